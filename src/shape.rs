//! The one shape vocabulary: what every op's operands must look like, the dimensions a kernel
//! runs over, and the output shape — or a [`ShapeError`] naming the shapes involved.
//!
//! The kernels call these functions before they allocate anything, and the graph builder calls
//! the same ones as each op is added, so an eager call and a graph node agree on what is valid,
//! and on the words of the error, by construction.
//!
//! ```
//! use skainet_schedule::shape;
//! let dims = shape::sdpa(&[1, 8, 4, 16], &[1, 2, 6, 16], &[1, 2, 6, 16], None, true).unwrap();
//! assert_eq!((dims.heads, dims.kv_heads, dims.q_len, dims.kv_len), (8, 2, 4, 6));
//! assert_eq!(dims.output_shape(), [1, 8, 4, 16]);
//! ```

use alloc::vec;
use alloc::vec::Vec;

use crate::shape_error::ShapeError;

pub use crate::shape_error::MAX_ELEMENTS;

/// The number of elements of `shape`, or `None` when it is above [`MAX_ELEMENTS`] (or the
/// product overflows).
///
/// ```
/// use skainet_schedule::shape::element_count;
/// assert_eq!(element_count(&[2, 3, 4]), Some(24));
/// assert_eq!(element_count(&[]), Some(1));
/// assert_eq!(element_count(&[usize::MAX, 2]), None);
/// assert_eq!(element_count(&[0, usize::MAX]), Some(0));
/// ```
pub fn element_count(shape: &[usize]) -> Option<usize> {
    // A zero anywhere makes the tensor empty, however large the other dimensions are.
    if shape.contains(&0) {
        return Some(0);
    }
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
}

fn too_large(op: &'static str, shapes: &[&[usize]]) -> ShapeError {
    ShapeError::TooLarge {
        op,
        shapes: shapes.iter().map(|s| s.to_vec()).collect(),
    }
}

/// Checks that every shape of `shapes` (and the output `out`) fits one allocation.
fn fits(op: &'static str, shapes: &[&[usize]], out: &[usize]) -> Result<(), ShapeError> {
    if shapes
        .iter()
        .chain([&out])
        .all(|s| element_count(s).is_some())
    {
        Ok(())
    } else {
        Err(too_large(op, shapes))
    }
}

fn rank4(op: &'static str, operand: &'static str, s: &[usize]) -> Result<[usize; 4], ShapeError> {
    match *s {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(ShapeError::Rank {
            op,
            operand,
            expected: "4",
            shape: s.to_vec(),
        }),
    }
}

/// The dimensions of an attention call: `q [batch, heads, q_len, head_dim]`,
/// `k`/`v [batch, kv_heads, kv_len, head_dim]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SdpaDims {
    /// `b`.
    pub batch: usize,
    /// `H`, the query heads.
    pub heads: usize,
    /// `nKV`, the key/value heads; it divides `heads` (or both are zero).
    pub kv_heads: usize,
    /// `Sq`.
    pub q_len: usize,
    /// `Sk`.
    pub kv_len: usize,
    /// `hd`.
    pub head_dim: usize,
}

impl SdpaDims {
    /// The output's shape: `[b, H, Sq, hd]`.
    pub fn output_shape(&self) -> Vec<usize> {
        vec![self.batch, self.heads, self.q_len, self.head_dim]
    }

    /// The scores' shape `[b, H, Sq, Sk]`, which a mask broadcasts to.
    pub fn scores_shape(&self) -> [usize; 4] {
        [self.batch, self.heads, self.q_len, self.kv_len]
    }

    /// How many query heads read each K/V head (`H / nKV`; 1 when there are none).
    pub fn group(&self) -> usize {
        self.heads.checked_div(self.kv_heads).unwrap_or(1)
    }
}

/// Validates attention operands: `q [b, H, Sq, hd]`, `k`/`v [b, nKV, Sk, hd]` with `nKV`
/// dividing `H`, an optional additive mask of rank 2 to 4 that broadcasts to the scores
/// `[b, H, Sq, Sk]` by trailing alignment (every dimension `1` or equal, the last one exactly
/// `Sk`: `[Sq, Sk]`, `[b, 1, Sq, Sk]`, `[1, H, Sq, Sk]`, `[b, 1, 1, Sk]`, …), and with
/// `causal`, `Sq <= Sk`.
///
/// # Errors
///
/// [`ShapeError::Rank`], [`ShapeError::BatchMismatch`], [`ShapeError::KvHeadsMismatch`],
/// [`ShapeError::ZeroKvHeads`], [`ShapeError::KvHeadsDoNotDivide`],
/// [`ShapeError::HeadDimMismatch`], [`ShapeError::KvLengthMismatch`],
/// [`ShapeError::MaskShape`], [`ShapeError::CausalQueryLongerThanKeys`],
/// [`ShapeError::TooLarge`] — checked in that order.
pub fn sdpa(
    q: &[usize],
    k: &[usize],
    v: &[usize],
    mask: Option<&[usize]>,
    causal: bool,
) -> Result<SdpaDims, ShapeError> {
    const OP: &str = "sdpa";
    let [b, heads, sq, hd] = rank4(OP, "q", q)?;
    let [kb, kv_heads, sk, khd] = rank4(OP, "k", k)?;
    let [vb, v_heads, vsk, vhd] = rank4(OP, "v", v)?;
    let (q_, k_, v_) = (q.to_vec(), k.to_vec(), v.to_vec());
    if kb != b {
        return Err(ShapeError::BatchMismatch { q: q_, kv: k_ });
    }
    if vb != b {
        return Err(ShapeError::BatchMismatch { q: q_, kv: v_ });
    }
    if v_heads != kv_heads {
        return Err(ShapeError::KvHeadsMismatch { k: k_, v: v_ });
    }
    if kv_heads == 0 && heads > 0 {
        return Err(ShapeError::ZeroKvHeads { q: q_, k: k_ });
    }
    if kv_heads > 0 && heads % kv_heads != 0 {
        return Err(ShapeError::KvHeadsDoNotDivide { q: q_, k: k_ });
    }
    if khd != hd {
        return Err(ShapeError::HeadDimMismatch { q: q_, kv: k_ });
    }
    if vhd != hd {
        return Err(ShapeError::HeadDimMismatch { q: q_, kv: v_ });
    }
    if vsk != sk {
        return Err(ShapeError::KvLengthMismatch { k: k_, v: v_ });
    }
    let dims = SdpaDims {
        batch: b,
        heads,
        kv_heads,
        q_len: sq,
        kv_len: sk,
        head_dim: hd,
    };
    if let Some(m) = mask {
        if !mask_broadcasts(m, dims.scores_shape()) {
            return Err(ShapeError::MaskShape {
                mask: m.to_vec(),
                scores: dims.scores_shape().to_vec(),
            });
        }
    }
    if causal && sq > sk {
        return Err(ShapeError::CausalQueryLongerThanKeys { q: q_, k: k_ });
    }
    let mut operands: Vec<&[usize]> = vec![q, k, v];
    operands.extend(mask);
    fits(OP, &operands, &dims.output_shape())?;
    Ok(dims)
}

/// Whether a mask of `shape` broadcasts to `scores` `[b, H, Sq, Sk]`: rank 2 to 4, the last
/// dimension exactly `Sk`, every other one `1` or equal.
fn mask_broadcasts(shape: &[usize], scores: [usize; 4]) -> bool {
    (2..=4).contains(&shape.len())
        && shape[shape.len() - 1] == scores[3]
        && shape
            .iter()
            .rev()
            .zip(scores.iter().rev())
            .all(|(&d, &s)| d == 1 || d == s)
}

/// Checks that the last two dimensions of a view lie back to back (strides `[.., n, 1]` for a
/// shape `[.., m, n]`; a dimension of size 1 may have any stride), as attention reads each
/// head's `[positions, head_dim]` block of a K/V cache.
///
/// ```
/// use skainet_schedule::shape;
/// // The filled prefix of a cache [1, 2, capacity 16, 8] holding 5 positions.
/// assert!(shape::contiguous_heads("sdpa", "k", &[1, 2, 5, 8], &[256, 128, 8, 1]).is_ok());
/// assert!(shape::contiguous_heads("sdpa", "k", &[1, 2, 5, 8], &[256, 128, 16, 1]).is_err());
/// ```
///
/// # Errors
///
/// [`ShapeError::Rank`] below rank 2; [`ShapeError::Layout`] otherwise.
pub fn contiguous_heads(
    op: &'static str,
    operand: &'static str,
    shape: &[usize],
    strides: &[usize],
) -> Result<(), ShapeError> {
    let rank = shape.len();
    if rank < 2 || strides.len() != rank {
        return Err(ShapeError::Rank {
            op,
            operand,
            expected: ">= 2",
            shape: shape.to_vec(),
        });
    }
    let (rows, cols) = (shape[rank - 2], shape[rank - 1]);
    let ok = (cols <= 1 || strides[rank - 1] == 1) && (rows <= 1 || strides[rank - 2] == cols);
    if ok {
        Ok(())
    } else {
        Err(ShapeError::Layout {
            op,
            operand,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            expected: "its last two dimensions back to back (strides [.., n, 1])",
        })
    }
}

/// Checks that a view's last dimension lies back to back (stride 1, or at most one element),
/// as the row-wise ops read it.
///
/// # Errors
///
/// [`ShapeError::Layout`].
pub fn contiguous_rows(
    op: &'static str,
    operand: &'static str,
    shape: &[usize],
    strides: &[usize],
) -> Result<(), ShapeError> {
    match (shape.last(), strides.last()) {
        (Some(&d), Some(&s)) if d > 1 && s != 1 => Err(ShapeError::Layout {
            op,
            operand,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            expected: "the last stride 1",
        }),
        _ => Ok(()),
    }
}

/// Validates RMS normalisation: `x [.., d]` (rank at least 1) and `weight [d]`. Returns
/// `(rows, d)`, the rows being every dimension but the last.
///
/// ```
/// use skainet_schedule::shape;
/// assert_eq!(shape::rms_norm(&[2, 5, 8], &[8]), Ok((10, 8)));
/// assert!(shape::rms_norm(&[2, 5, 8], &[5]).is_err());
/// ```
///
/// # Errors
///
/// [`ShapeError::Rank`], [`ShapeError::NormWeight`], [`ShapeError::TooLarge`].
pub fn rms_norm(x: &[usize], weight: &[usize]) -> Result<(usize, usize), ShapeError> {
    const OP: &str = "rms_norm";
    let Some((&d, outer)) = x.split_last() else {
        return Err(ShapeError::Rank {
            op: OP,
            operand: "x",
            expected: ">= 1",
            shape: x.to_vec(),
        });
    };
    if weight != [d] {
        return Err(ShapeError::NormWeight {
            op: OP,
            x: x.to_vec(),
            weight: weight.to_vec(),
        });
    }
    fits(OP, &[x, weight], x)?;
    let rows = element_count(outer).ok_or_else(|| too_large(OP, &[x, weight]))?;
    Ok((rows, d))
}

/// Validates a rotary position embedding of `x [b, heads, s, hd]` whose rows sit at positions
/// `offset..offset + s`: `hd` even, the positions representable. Returns the four dimensions.
///
/// ```
/// use skainet_schedule::shape;
/// assert_eq!(shape::rope(&[1, 9, 4, 64], 128), Ok([1, 9, 4, 64]));
/// assert!(shape::rope(&[1, 9, 4, 63], 0).is_err());
/// ```
///
/// # Errors
///
/// [`ShapeError::Rank`], [`ShapeError::RopeOddHeadDim`], [`ShapeError::RopePositions`].
pub fn rope(x: &[usize], offset: usize) -> Result<[usize; 4], ShapeError> {
    let dims = rank4("rope", "x", x)?;
    if dims[3] % 2 != 0 {
        return Err(ShapeError::RopeOddHeadDim { x: x.to_vec() });
    }
    if offset.checked_add(dims[2]).is_none() {
        return Err(ShapeError::RopePositions {
            x: x.to_vec(),
            offset,
        });
    }
    fits("rope", &[x], x)?;
    Ok(dims)
}

/// The shape `a` and `b` broadcast to (trailing alignment: the shorter shape is padded with
/// leading 1s; each pair of dimensions is equal or one of them is 1).
///
/// ```
/// use skainet_schedule::shape;
/// assert_eq!(shape::broadcast("add", &[2, 3, 4], &[4]), Ok(vec![2, 3, 4]));
/// assert_eq!(shape::broadcast("add", &[2, 1, 4], &[3, 1]), Ok(vec![2, 3, 4]));
/// assert!(shape::broadcast("add", &[2, 3], &[2]).is_err());
/// ```
///
/// # Errors
///
/// [`ShapeError::Broadcast`], [`ShapeError::TooLarge`].
pub fn broadcast(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>, ShapeError> {
    let rank = a.len().max(b.len());
    let at = |s: &[usize], i: usize| {
        // Dimension `i` of `s` padded on the left to `rank`.
        (i + s.len()).checked_sub(rank).map_or(1, |j| s[j])
    };
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let (x, y) = (at(a, i), at(b, i));
        let d = match (x, y) {
            _ if x == y => x,
            (1, _) => y,
            (_, 1) => x,
            _ => {
                return Err(ShapeError::Broadcast {
                    op,
                    a: a.to_vec(),
                    b: b.to_vec(),
                })
            }
        };
        out.push(d);
    }
    fits(op, &[a, b], &out)?;
    Ok(out)
}

/// Validates an embedding lookup of `ids` in `table [vocab, d]`: every id below `vocab`.
/// Returns the output shape `[ids.len(), d]`.
///
/// ```
/// use skainet_schedule::shape;
/// assert_eq!(shape::embedding(&[100, 8], &[3, 99]), Ok(vec![2, 8]));
/// assert!(shape::embedding(&[100, 8], &[3, 100]).is_err());
/// ```
///
/// # Errors
///
/// [`ShapeError::Rank`], [`ShapeError::EmbeddingId`], [`ShapeError::TooLarge`].
pub fn embedding(table: &[usize], ids: &[usize]) -> Result<Vec<usize>, ShapeError> {
    let [vocab, d] = *table else {
        return Err(ShapeError::Rank {
            op: "embedding",
            operand: "table",
            expected: "2",
            shape: table.to_vec(),
        });
    };
    if let Some((index, &id)) = ids.iter().enumerate().find(|(_, &id)| id >= vocab) {
        return Err(ShapeError::EmbeddingId {
            table: table.to_vec(),
            index,
            id,
        });
    }
    let out = vec![ids.len(), d];
    fits("embedding", &[table], &out)?;
    Ok(out)
}

/// Validates an append of `k`, `v` to a K/V cache of shape `cache` `[b, nKV, capacity, hd]`
/// holding `len` positions: both are `[b, nKV, t, hd]` with the same `t`, and `len + t` fits
/// the capacity. Returns `t`.
///
/// ```
/// use skainet_schedule::shape;
/// assert_eq!(shape::kv_append(&[1, 3, 8, 4], 6, &[1, 3, 2, 4], &[1, 3, 2, 4]), Ok(2));
/// assert!(shape::kv_append(&[1, 3, 8, 4], 7, &[1, 3, 2, 4], &[1, 3, 2, 4]).is_err());
/// ```
///
/// # Errors
///
/// [`ShapeError::KvAppendShape`], then [`ShapeError::KvCacheFull`].
pub fn kv_append(
    cache: &[usize],
    len: usize,
    k: &[usize],
    v: &[usize],
) -> Result<usize, ShapeError> {
    let fits_cache = |s: &[usize]| {
        s.len() == 4 && cache.len() == 4 && s[0] == cache[0] && s[1] == cache[1] && s[3] == cache[3]
    };
    if !fits_cache(k) || !fits_cache(v) || k[2] != v[2] {
        return Err(ShapeError::KvAppendShape {
            cache: cache.to_vec(),
            k: k.to_vec(),
            v: v.to_vec(),
        });
    }
    let (capacity, new) = (cache[2], k[2]);
    if len.checked_add(new).is_none_or(|end| end > capacity) {
        return Err(ShapeError::KvCacheFull { capacity, len, new });
    }
    Ok(new)
}

/// The dimensions of `a [.., m, k] × b [k, n]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MatmulDims {
    /// Rows of the output: `m` times every leading (batch) dimension of `a`.
    pub rows: usize,
    /// `k`.
    pub inner: usize,
    /// `n`.
    pub cols: usize,
    /// `[.., m, n]`.
    pub output_shape: Vec<usize>,
}

/// Validates `a [.., m, k] × b [k, n]` (rank of `a` at least 2; leading dimensions are batch).
///
/// # Errors
///
/// [`ShapeError::Rank`], [`ShapeError::MatmulInnerMismatch`], [`ShapeError::TooLarge`].
pub fn matmul(a: &[usize], b: &[usize]) -> Result<MatmulDims, ShapeError> {
    const OP: &str = "matmul";
    if a.len() < 2 {
        return Err(ShapeError::Rank {
            op: OP,
            operand: "a",
            expected: ">= 2",
            shape: a.to_vec(),
        });
    }
    let [kb, n] = *b else {
        return Err(ShapeError::Rank {
            op: OP,
            operand: "b",
            expected: "2",
            shape: b.to_vec(),
        });
    };
    let k = a[a.len() - 1];
    if k != kb {
        return Err(ShapeError::MatmulInnerMismatch {
            a: a.to_vec(),
            b: b.to_vec(),
        });
    }
    let mut output_shape = a.to_vec();
    output_shape[a.len() - 1] = n;
    fits(OP, &[a, b], &output_shape)?;
    let rows = element_count(&a[..a.len() - 1]).ok_or_else(|| too_large(OP, &[a, b]))?;
    Ok(MatmulDims {
        rows,
        inner: k,
        cols: n,
        output_shape,
    })
}

/// Validates `x [.., k] · wᵀ` for a weight `w [n, k]` stored as checkpoints store a linear
/// layer (`[out, in]`): rank of `x` at least 1, leading dimensions are batch; the output is
/// `[.., n]`.
///
/// ```
/// use skainet_schedule::shape;
/// let dims = shape::linear(&[2, 3, 576], &[1536, 576]).unwrap();
/// assert_eq!((dims.rows, dims.inner, dims.cols), (6, 576, 1536));
/// assert_eq!(dims.output_shape, [2, 3, 1536]);
/// ```
///
/// # Errors
///
/// [`ShapeError::Rank`] (`x` of rank 0, `w` not of rank 2),
/// [`ShapeError::MatmulInnerMismatch`] (the last dimensions differ), [`ShapeError::TooLarge`].
pub fn linear(x: &[usize], w: &[usize]) -> Result<MatmulDims, ShapeError> {
    const OP: &str = "linear";
    let Some((&k, batch)) = x.split_last() else {
        return Err(ShapeError::Rank {
            op: OP,
            operand: "x",
            expected: ">= 1",
            shape: x.to_vec(),
        });
    };
    let [n, kw] = *w else {
        return Err(ShapeError::Rank {
            op: OP,
            operand: "w",
            expected: "2",
            shape: w.to_vec(),
        });
    };
    if k != kw {
        return Err(ShapeError::MatmulInnerMismatch {
            a: x.to_vec(),
            b: w.to_vec(),
        });
    }
    let mut output_shape = x.to_vec();
    output_shape[batch.len()] = n;
    fits(OP, &[x, w], &output_shape)?;
    let rows = element_count(batch).ok_or_else(|| too_large(OP, &[x, w]))?;
    Ok(MatmulDims {
        rows,
        inner: k,
        cols: n,
        output_shape,
    })
}

/// The dimensions of a 2-D convolution: input `[N, C, H, W]`, weight `[O, C, kH, kW]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Conv2dDims {
    /// `N`.
    pub batch: usize,
    /// `C`.
    pub in_channels: usize,
    /// `[H, W]`.
    pub in_hw: [usize; 2],
    /// `O`.
    pub out_channels: usize,
    /// `[kH, kW]`.
    pub kernel_hw: [usize; 2],
    /// `[OH, OW]`: `(H + 2·padH - kH) / strideH + 1`, and the same for the width.
    pub out_hw: [usize; 2],
}

impl Conv2dDims {
    /// The output's shape: `[N, O, OH, OW]`.
    pub fn output_shape(&self) -> Vec<usize> {
        vec![
            self.batch,
            self.out_channels,
            self.out_hw[0],
            self.out_hw[1],
        ]
    }

    /// The taps of one output value: `C · kH · kW` (saturating: with no output channel the
    /// weight is empty whatever its other dimensions, and their product may not fit a usize).
    pub fn taps(&self) -> usize {
        self.in_channels
            .saturating_mul(self.kernel_hw[0])
            .saturating_mul(self.kernel_hw[1])
    }
}

/// Validates a 2-D convolution (NCHW × OIHW) with an optional bias `[O]`, `stride` (both at
/// least 1) and zero `padding` on each side, as `[height, width]`.
///
/// # Errors
///
/// [`ShapeError::Rank`], [`ShapeError::ConvChannelMismatch`], [`ShapeError::ConvBiasShape`],
/// [`ShapeError::ConvZeroStride`], [`ShapeError::ConvKernelTooLarge`],
/// [`ShapeError::TooLarge`] (also when the padded input overflows `usize`).
pub fn conv2d(
    input: &[usize],
    weight: &[usize],
    bias: Option<&[usize]>,
    stride: [usize; 2],
    padding: [usize; 2],
) -> Result<Conv2dDims, ShapeError> {
    const OP: &str = "conv2d";
    let [n, c, h, w] = rank4(OP, "input", input)?;
    let [o, wc, kh, kw] = rank4(OP, "weight", weight)?;
    if wc != c {
        return Err(ShapeError::ConvChannelMismatch {
            input: input.to_vec(),
            weight: weight.to_vec(),
        });
    }
    if let Some(bias) = bias {
        if bias.len() != 1 {
            return Err(ShapeError::Rank {
                op: OP,
                operand: "bias",
                expected: "1",
                shape: bias.to_vec(),
            });
        }
        if bias[0] != o {
            return Err(ShapeError::ConvBiasShape {
                bias: bias.to_vec(),
                weight: weight.to_vec(),
            });
        }
    }
    if stride[0] == 0 || stride[1] == 0 {
        return Err(ShapeError::ConvZeroStride { stride });
    }
    let mut operands: Vec<&[usize]> = vec![input, weight];
    operands.extend(bias);
    let pad = |x: usize, p: usize| p.checked_mul(2).and_then(|p2| x.checked_add(p2));
    let (Some(ph), Some(pw)) = (pad(h, padding[0]), pad(w, padding[1])) else {
        return Err(too_large(OP, &operands));
    };
    if kh > ph || kw > pw {
        return Err(ShapeError::ConvKernelTooLarge {
            input: input.to_vec(),
            weight: weight.to_vec(),
            padding,
        });
    }
    // `+ 1` overflows only for an empty kernel over a padded size of usize::MAX.
    let out = |padded: usize, k: usize, s: usize| ((padded - k) / s).checked_add(1);
    let (Some(oh), Some(ow)) = (out(ph, kh, stride[0]), out(pw, kw, stride[1])) else {
        return Err(too_large(OP, &operands));
    };
    let dims = Conv2dDims {
        batch: n,
        in_channels: c,
        in_hw: [h, w],
        out_channels: o,
        kernel_hw: [kh, kw],
        out_hw: [oh, ow],
    };
    fits(OP, &operands, &dims.output_shape())?;
    Ok(dims)
}

/// Validates an elementwise op (`add`, `sub`, `mul`): both operands have the same shape, which
/// is the output's.
///
/// # Errors
///
/// [`ShapeError::ElementwiseMismatch`], [`ShapeError::TooLarge`].
pub fn elementwise(op: &'static str, a: &[usize], b: &[usize]) -> Result<Vec<usize>, ShapeError> {
    if a != b {
        return Err(ShapeError::ElementwiseMismatch {
            op,
            a: a.to_vec(),
            b: b.to_vec(),
        });
    }
    fits(op, &[a, b], a)?;
    Ok(a.to_vec())
}

/// `to`, when it holds as many elements as `from`.
///
/// # Errors
///
/// [`ShapeError::Reshape`] when the counts differ or either is above [`MAX_ELEMENTS`].
pub fn reshape(from: &[usize], to: &[usize]) -> Result<Vec<usize>, ShapeError> {
    match (element_count(from), element_count(to)) {
        (Some(a), Some(b)) if a == b => Ok(to.to_vec()),
        _ => Err(ShapeError::Reshape {
            from: from.to_vec(),
            to: to.to_vec(),
        }),
    }
}

/// The shape of `shape` permuted by `permutation` (output dimension `i` is input dimension
/// `permutation[i]`).
///
/// # Errors
///
/// [`ShapeError::Permutation`] when `permutation` is not a permutation of `0..shape.len()`.
pub fn transpose(shape: &[usize], permutation: &[usize]) -> Result<Vec<usize>, ShapeError> {
    let mut seen = vec![false; shape.len()];
    let valid = permutation.len() == shape.len()
        && permutation
            .iter()
            .all(|&p| p < shape.len() && !core::mem::replace(&mut seen[p], true));
    if !valid {
        return Err(ShapeError::Permutation {
            shape: shape.to_vec(),
            permutation: permutation.to_vec(),
        });
    }
    Ok(permutation.iter().map(|&p| shape[p]).collect())
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn a_zero_dimension_makes_any_shape_empty() {
        assert_eq!(element_count(&[usize::MAX, 0, usize::MAX]), Some(0));
    }

    #[test]
    fn the_element_limit_is_the_allocation_limit() {
        assert_eq!(element_count(&[MAX_ELEMENTS]), Some(MAX_ELEMENTS));
        assert_eq!(element_count(&[MAX_ELEMENTS + 1]), None);
        assert_eq!(element_count(&[1 << 31, 1 << 31]), None);
    }

    #[test]
    fn an_oversized_matmul_output_is_too_large_before_allocation() {
        assert_eq!(
            matmul(&[1 << 31, 0], &[0, 1 << 31]),
            Err(ShapeError::TooLarge {
                op: "matmul",
                shapes: vec![vec![1 << 31, 0], vec![0, 1 << 31]],
            })
        );
    }

    #[test]
    fn conv_padding_that_overflows_is_too_large() {
        let err = conv2d(&[1, 1, 4, 4], &[1, 1, 3, 3], None, [1, 1], [usize::MAX, 0]);
        assert_eq!(
            err,
            Err(ShapeError::TooLarge {
                op: "conv2d",
                shapes: vec![vec![1, 1, 4, 4], vec![1, 1, 3, 3]],
            })
        );
    }

    #[test]
    fn conv_padding_that_makes_a_huge_output_is_too_large() {
        let err = conv2d(
            &[1, 1, 1, 1],
            &[1, 1, 1, 1],
            None,
            [1, 1],
            [1 << 30, 1 << 30],
        );
        assert!(matches!(
            err,
            Err(ShapeError::TooLarge { op: "conv2d", .. })
        ));
    }

    #[test]
    fn an_empty_kernel_over_a_maximal_padded_size_is_too_large() {
        let err = conv2d(&[0, 1, usize::MAX, 1], &[1, 1, 0, 1], None, [1, 1], [0, 0]);
        assert!(matches!(
            err,
            Err(ShapeError::TooLarge { op: "conv2d", .. })
        ));
    }

    #[test]
    fn messages_start_with_the_op() {
        let err = elementwise("add", &[2], &[3]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "add: operands [2] and [3] have different shapes"
        );
    }
}

/// The shape of `a` and `b` joined along dimension `dim`: equal ranks above `dim`, every other
/// dimension equal; the output's `dim` is the sum.
///
/// ```
/// use skainet_schedule::shape;
/// assert_eq!(shape::concat(&[1, 2, 5, 8], &[1, 2, 3, 8], 2), Ok(vec![1, 2, 8, 8]));
/// assert!(shape::concat(&[1, 2, 5, 8], &[1, 4, 3, 8], 2).is_err());
/// assert!(shape::concat(&[1, 2], &[1, 2], 2).is_err());
/// ```
///
/// # Errors
///
/// [`ShapeError::Rank`] when `dim` is not a dimension of `a`,
/// [`ShapeError::ElementwiseMismatch`] (op `concat`) when the ranks or the other dimensions
/// differ, [`ShapeError::TooLarge`].
pub fn concat(a: &[usize], b: &[usize], dim: usize) -> Result<Vec<usize>, ShapeError> {
    const OP: &str = "concat";
    if dim >= a.len() {
        return Err(ShapeError::Rank {
            op: OP,
            operand: "a",
            expected: "> dim",
            shape: a.to_vec(),
        });
    }
    let fit = a.len() == b.len()
        && a.iter()
            .zip(b)
            .enumerate()
            .all(|(i, (x, y))| i == dim || x == y);
    if !fit {
        return Err(ShapeError::ElementwiseMismatch {
            op: OP,
            a: a.to_vec(),
            b: b.to_vec(),
        });
    }
    let joined = a[dim]
        .checked_add(b[dim])
        .ok_or_else(|| too_large(OP, &[a, b]))?;
    let mut out = a.to_vec();
    out[dim] = joined;
    fits(OP, &[a, b], &out)?;
    Ok(out)
}
