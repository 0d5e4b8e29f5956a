//! Shape inference: every op's output shape from its operands' shapes, or the reason there is
//! none. The builder runs it as each op is added, so a bad shape fails at build time.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use crate::kernels::conv::Conv2dOptions;
use crate::kernels::sdpa::SdpaOptions;
use crate::tensor::element_count;

/// Why an op's operands do not fit together. Every variant carries the shapes involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeError {
    /// An operand has the wrong rank.
    Rank {
        /// Which operand (`q`, `k`, `mask`, `input`, `a`, ...).
        operand: &'static str,
        /// The rank (or ranks) it may have, in words: `4`, `2 or 4`, `>= 2`.
        expected: &'static str,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// Two shapes that must agree (entirely, or in the dimension `what` names) do not.
    Mismatch {
        /// What must agree: `k and v`, `q and k (batch, head_dim)`, `a and b (inner)`, ...
        what: &'static str,
        /// The first shape.
        left: Vec<usize>,
        /// The second shape.
        right: Vec<usize>,
    },
    /// The number of query heads is not a (non-zero) multiple of the number of K/V heads.
    Heads {
        /// `q`'s shape `[b, H, Sq, hd]`.
        q: Vec<usize>,
        /// `k`'s shape `[b, nKV, Sk, hd]`.
        k: Vec<usize>,
    },
    /// Causal attention with more queries than keys has no bottom-right alignment.
    CausalQueriesExceedKeys {
        /// `q`'s shape.
        q: Vec<usize>,
        /// `k`'s shape.
        k: Vec<usize>,
    },
    /// The mask does not broadcast to the scores `[b, H, Sq, Sk]`.
    Mask {
        /// The mask's shape.
        mask: Vec<usize>,
        /// The scores' shape.
        scores: Vec<usize>,
    },
    /// A reshape changes the element count (or the count overflows).
    Reshape {
        /// The operand's shape.
        from: Vec<usize>,
        /// The requested shape.
        to: Vec<usize>,
    },
    /// A transpose's permutation is not a permutation of the operand's dimensions.
    Permutation {
        /// The operand's shape.
        shape: Vec<usize>,
        /// The permutation given.
        permutation: Vec<usize>,
    },
    /// A convolution whose stride is zero or whose (padded) input is smaller than its kernel.
    ConvWindow {
        /// The input's shape `[N, C, H, W]`.
        input: Vec<usize>,
        /// The weight's shape `[O, C, KH, KW]`.
        weight: Vec<usize>,
        /// The stride.
        stride: [usize; 2],
        /// The padding.
        padding: [usize; 2],
    },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rank {
                operand,
                expected,
                shape,
            } => write!(f, "{operand} must have rank {expected}, got shape {shape:?}"),
            Self::Mismatch { what, left, right } => {
                write!(f, "{what} do not agree: {left:?} vs {right:?}")
            }
            Self::Heads { q, k } => write!(
                f,
                "query heads must be a multiple of K/V heads: q {q:?}, k {k:?}"
            ),
            Self::CausalQueriesExceedKeys { q, k } => write!(
                f,
                "causal attention needs Sq <= Sk: q {q:?}, k {k:?}"
            ),
            Self::Mask { mask, scores } => write!(
                f,
                "mask {mask:?} does not broadcast to scores {scores:?}"
            ),
            Self::Reshape { from, to } => {
                write!(f, "cannot reshape {from:?} to {to:?}: element counts differ")
            }
            Self::Permutation { shape, permutation } => write!(
                f,
                "{permutation:?} is not a permutation of the dimensions of {shape:?}"
            ),
            Self::ConvWindow {
                input,
                weight,
                stride,
                padding,
            } => write!(
                f,
                "conv2d window does not fit: input {input:?}, weight {weight:?}, stride {stride:?}, padding {padding:?}"
            ),
        }
    }
}

impl core::error::Error for ShapeError {}

fn rank(
    operand: &'static str,
    expected: &'static str,
    shape: &[usize],
    ok: bool,
) -> Result<(), ShapeError> {
    if ok {
        Ok(())
    } else {
        Err(ShapeError::Rank {
            operand,
            expected,
            shape: shape.to_vec(),
        })
    }
}

fn mismatch(what: &'static str, left: &[usize], right: &[usize]) -> ShapeError {
    ShapeError::Mismatch {
        what,
        left: left.to_vec(),
        right: right.to_vec(),
    }
}

/// The output shape of attention: `q [b, H, Sq, hd]`, `k`/`v [b, nKV, Sk, hd]` with
/// `nKV | H`, an optional additive mask of rank 2 to 4 that broadcasts to the scores
/// `[b, H, Sq, Sk]` by trailing alignment (every dim 1 or equal, the last one `Sk`: `[Sq, Sk]`,
/// `[b, 1, Sq, Sk]`, `[1, H, Sq, Sk]`, `[b, 1, 1, Sk]`, …); the output is `q`'s shape.
pub fn sdpa(
    q: &[usize],
    k: &[usize],
    v: &[usize],
    mask: Option<&[usize]>,
    options: &SdpaOptions,
) -> Result<Vec<usize>, ShapeError> {
    rank("q", "4", q, q.len() == 4)?;
    rank("k", "4", k, k.len() == 4)?;
    rank("v", "4", v, v.len() == 4)?;
    if k != v {
        return Err(mismatch("k and v", k, v));
    }
    if q[0] != k[0] || q[3] != k[3] {
        return Err(mismatch("q and k (batch, head_dim)", q, k));
    }
    if k[1] == 0 || q[1] % k[1] != 0 {
        return Err(ShapeError::Heads {
            q: q.to_vec(),
            k: k.to_vec(),
        });
    }
    if options.causal && q[2] > k[2] {
        return Err(ShapeError::CausalQueriesExceedKeys {
            q: q.to_vec(),
            k: k.to_vec(),
        });
    }
    if let Some(m) = mask {
        let scores = [q[0], q[1], q[2], k[2]];
        // Trailing alignment: every mask dim is 1 or the scores' dim, the last is Sk.
        let fits = (2..=4).contains(&m.len())
            && m[m.len() - 1] == scores[3]
            && m.iter()
                .rev()
                .zip(scores.iter().rev())
                .all(|(&d, &s)| d == 1 || d == s);
        if !fits {
            return Err(ShapeError::Mask {
                mask: m.to_vec(),
                scores: scores.to_vec(),
            });
        }
    }
    Ok(q.to_vec())
}

/// The output shape of `a [.., m, k] x b [k, n]`: `[.., m, n]`.
pub fn matmul(a: &[usize], b: &[usize]) -> Result<Vec<usize>, ShapeError> {
    rank("a", ">= 2", a, a.len() >= 2)?;
    rank("b", "2", b, b.len() == 2)?;
    if a[a.len() - 1] != b[0] {
        return Err(mismatch("a and b (inner)", a, b));
    }
    let mut out = a.to_vec();
    let last = out.len() - 1;
    out[last] = b[1];
    Ok(out)
}

/// The output shape of a convolution: input `[N, C, H, W]`, weight `[O, C, KH, KW]`, bias
/// `[O]`; output `[N, O, (H + 2 ph - KH) / sh + 1, (W + 2 pw - KW) / sw + 1]`.
pub fn conv2d(
    input: &[usize],
    weight: &[usize],
    bias: Option<&[usize]>,
    options: &Conv2dOptions,
) -> Result<Vec<usize>, ShapeError> {
    rank("input", "4", input, input.len() == 4)?;
    rank("weight", "4", weight, weight.len() == 4)?;
    if input[1] != weight[1] {
        return Err(mismatch("input and weight (channels)", input, weight));
    }
    if let Some(b) = bias {
        if b != [weight[0]] {
            return Err(mismatch("bias and weight (out_channels)", b, weight));
        }
    }
    let window = |i: usize| -> Option<usize> {
        let padded = input[2 + i].checked_add(options.padding[i].checked_mul(2)?)?;
        let stride = options.stride[i];
        if stride == 0 || padded < weight[2 + i] {
            return None;
        }
        Some((padded - weight[2 + i]) / stride + 1)
    };
    match (window(0), window(1)) {
        (Some(h), Some(w)) => Ok(vec![input[0], weight[0], h, w]),
        _ => Err(ShapeError::ConvWindow {
            input: input.to_vec(),
            weight: weight.to_vec(),
            stride: options.stride,
            padding: options.padding,
        }),
    }
}

/// The output shape of an elementwise op: both operands' shape, which must be equal.
pub fn elementwise(a: &[usize], b: &[usize]) -> Result<Vec<usize>, ShapeError> {
    if a != b {
        return Err(mismatch("elementwise operands", a, b));
    }
    Ok(a.to_vec())
}

/// `to`, when it holds as many elements as `from`.
pub fn reshape(from: &[usize], to: &[usize]) -> Result<Vec<usize>, ShapeError> {
    match (element_count(from), element_count(to)) {
        (Some(a), Some(b)) if a == b => Ok(to.to_vec()),
        _ => Err(ShapeError::Reshape {
            from: from.to_vec(),
            to: to.to_vec(),
        }),
    }
}

/// The shape of `shape` permuted by `permutation` (output dim `i` is input dim
/// `permutation[i]`).
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
