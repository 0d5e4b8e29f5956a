//! The element-wise and row-wise ops of a transformer decoder, scheduled over output rows:
//! RMS normalisation, rotary position embedding, the SiLU gate, the broadcasting residual add
//! and the embedding lookup.
//!
//! Each reads its inputs through [`TensorView`]s (a `&Tensor` converts for free) and writes a
//! fresh tensor. A row's arithmetic is fixed (see `loops/{norm,rope,gate}.rs`), so the result
//! is bit-identical under every schedule and every compiled variant.

use alloc::vec::Vec;

use super::config::KernelConfig;
use super::loops::gate::silu_mul_row;
use super::loops::norm::rms_norm_row;
use super::loops::rope::{angle_table, rope_interleaved_row, rope_row};
use super::parallel::{parallel_chunks, Work};
use super::KernelError;
use crate::schedule::Schedule;
use crate::shape;
use crate::tensor::{Tensor, TensorView};
use crate::ShapeError;

/// Calls over fewer output values than this run inline on the caller. 2^16: the figure at
/// which a region paid for itself in attention before its decode kernels got faster
/// (`SDPA_PARALLEL_MIN_WORK`, now 2^18); these ops do less per value, so it is, if anything,
/// low — not tuned separately. A decode step's rows (one
/// token, a few hundred to a few thousand values) always stay inline.
pub const DECODER_PARALLEL_MIN_WORK: u64 = 1 << 16;

/// A view read row by row: its last dimension back to back.
struct Rows<'a> {
    view: TensorView<'a>,
    op: &'static str,
    operand: &'static str,
}

impl<'a> Rows<'a> {
    fn new(
        op: &'static str,
        operand: &'static str,
        view: TensorView<'a>,
    ) -> Result<Self, ShapeError> {
        shape::contiguous_rows(op, operand, view.shape(), view.strides())?;
        Ok(Self { view, op, operand })
    }

    /// Row `r` (every dimension but the last flattened).
    fn get(&self, r: usize) -> Result<&'a [f32], KernelError> {
        // Always `Some` for a row index below the row count: checked by `new`.
        self.view.row(r).ok_or_else(|| {
            ShapeError::Layout {
                op: self.op,
                operand: self.operand,
                shape: self.view.shape().to_vec(),
                strides: self.view.strides().to_vec(),
                expected: "the last stride 1",
            }
            .into()
        })
    }
}

/// What a row-wise op computes for output row `r`.
type RowBody<'a> = dyn Fn(usize, &mut [f32]) -> Result<(), KernelError> + Sync + 'a;

/// Runs `body(r, out_row)` for every row of `out` (rows of `cols` values) under `schedule`.
fn for_rows(
    op: &'static str,
    config: &KernelConfig,
    schedule: &dyn Schedule,
    out: &mut Tensor,
    cols: usize,
    body: &RowBody<'_>,
) -> Result<(), KernelError> {
    if cols == 0 {
        return Ok(());
    }
    let work = Work {
        total: out.len() as u64,
        fork_from: config.threshold(DECODER_PARALLEL_MIN_WORK),
    };
    parallel_chunks(op, schedule, out.data_mut(), cols, work, &|units, chunk| {
        for (r, row) in units.zip(chunk.chunks_exact_mut(cols)) {
            body(r, row)?;
        }
        Ok(())
    })
}

/// Root-mean-square normalisation of every row of `x` `[.., d]`, scaled by `weight` `[d]`:
/// `out = (x · 1/sqrt(mean(x²) + eps)) · weight` (Llama's `RMSNorm`).
///
/// Rows are the units of `schedule`; the sum of squares runs in the fixed 8-lane order of the
/// other kernels, so the result is bit-identical under every schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{rms_norm, Sequential, Tensor};
/// let x = Tensor::new(vec![1, 4], vec![1.0, -1.0, 1.0, -1.0]).unwrap();
/// let w = Tensor::new(vec![4], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// assert_eq!(rms_norm(&x, &w, 0.0, &Sequential).unwrap().data(), [1.0, -2.0, 3.0, -4.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with [`ShapeError::Rank`], [`ShapeError::NormWeight`],
/// [`ShapeError::TooLarge`] (from [`shape::rms_norm`]) or [`ShapeError::Layout`] for a view
/// whose last stride is not 1; [`KernelError::Tensor`] when the output cannot be allocated.
pub fn rms_norm<'a>(
    x: impl Into<TensorView<'a>>,
    weight: impl Into<TensorView<'a>>,
    eps: f32,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    rms_norm_with(&KernelConfig::selected(), x, weight, eps, schedule)
}

/// [`rms_norm`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`rms_norm`].
pub fn rms_norm_with<'a>(
    config: &KernelConfig,
    x: impl Into<TensorView<'a>>,
    weight: impl Into<TensorView<'a>>,
    eps: f32,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    const OP: &str = "rms_norm";
    let (x, weight) = (x.into(), weight.into());
    let (_, d) = shape::rms_norm(x.shape(), weight.shape())?;
    let x = Rows::new(OP, "x", x)?;
    let w = Rows::new(OP, "weight", weight)?;
    let w = w.get(0)?;
    let mut out = Tensor::zeros(x.view.shape().to_vec())?;
    for_rows(OP, config, schedule, &mut out, d, &|r, o| {
        rms_norm_row(x.get(r)?, w, eps, o);
        Ok(())
    })?;
    Ok(out)
}

/// Rotary position embedding of `x` `[b, heads, s, hd]` whose position `i` sits at
/// `offset + i` (the decode step's offset is the number of cached positions): each pair
/// `(x[j], x[j + hd/2])` is rotated by `(offset + i) · theta^(-2j/hd)` (rotate-half, the Llama
/// convention; `theta` is 10000 in Llama 2, 100000 in SmolLM2). Output `[b, heads, s, hd]`,
/// compact. A model read from GGUF rotates adjacent pairs instead: [`rope_interleaved`].
///
/// The angles are computed once per call in f64 and rounded to f32, so the rotation stays
/// accurate at positions in the thousands. Rows are the units of `schedule`; the result is
/// bit-identical under every schedule. `x` may be a strided view — a projection's
/// `[b, s, heads, hd]` output permuted to `[b, heads, s, hd]` is read without a copy.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{rope, Sequential, Tensor};
/// let x = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 0.0, 1.0, 0.0]).unwrap();
/// let out = rope(&x, 0, 10_000.0, &Sequential).unwrap();
/// // Position 0 is not rotated; position 1 is rotated by 1 radian.
/// assert_eq!(&out.data()[..2], [1.0, 0.0]);
/// assert_eq!(out.data()[2], 1.0f64.cos() as f32);
/// assert_eq!(out.data()[3], 1.0f64.sin() as f32);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with [`ShapeError::Rank`], [`ShapeError::RopeOddHeadDim`],
/// [`ShapeError::RopePositions`] (from [`shape::rope`]) or [`ShapeError::Layout`];
/// [`KernelError::Tensor`] or [`KernelError::Scratch`] when memory cannot be had.
pub fn rope<'a>(
    x: impl Into<TensorView<'a>>,
    offset: usize,
    theta: f32,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    rope_with(&KernelConfig::selected(), x, offset, theta, schedule)
}

/// [`rope`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`rope`].
pub fn rope_with<'a>(
    config: &KernelConfig,
    x: impl Into<TensorView<'a>>,
    offset: usize,
    theta: f32,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    rotate(config, x.into(), offset, theta, schedule, rope_row)
}

/// The rotation of [`rope`] and [`rope_interleaved`]: the angle table once, then `row` on
/// every row with its position's angles.
fn rotate(
    config: &KernelConfig,
    x: TensorView<'_>,
    offset: usize,
    theta: f32,
    schedule: &dyn Schedule,
    row: fn(&[f32], &[[f32; 2]], &mut [f32]),
) -> Result<Tensor, KernelError> {
    let [_, _, s, hd] = shape::rope(x.shape(), offset)?;
    let table = angle_table(offset, s, hd, theta).ok_or(KernelError::Scratch {
        op: "rope",
        elements: s.saturating_mul(hd),
    })?;
    rotate_by(config, x, offset, &table, schedule, row)
}

/// The rotary angles of positions `offset..offset + len` for heads of `hd` values and base
/// `theta` ([`angle_table`]), kept with what they were computed for: a decoder computes them
/// once per step for the queries and keys of every layer.
#[cfg(feature = "model")]
pub(crate) struct Angles {
    key: (usize, usize, usize, u32),
    table: Vec<[f32; 2]>,
}

#[cfg(feature = "model")]
impl Angles {
    /// The angles, or `None` when the table cannot be allocated.
    pub(crate) fn new(offset: usize, len: usize, hd: usize, theta: f32) -> Option<Self> {
        Some(Self {
            key: (offset, len, hd, theta.to_bits()),
            table: angle_table(offset, len, hd, theta)?,
        })
    }
}

/// [`rope_interleaved`] with `angles` where they are `x`'s (its positions and head width,
/// `offset` and `theta`); otherwise it computes its own, as [`rope_interleaved`]. The same bits.
#[cfg(feature = "model")]
pub(crate) fn rope_interleaved_by(
    config: &KernelConfig,
    x: TensorView<'_>,
    offset: usize,
    theta: f32,
    angles: &Angles,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let [_, _, s, hd] = shape::rope(x.shape(), offset)?;
    if angles.key != (offset, s, hd, theta.to_bits()) {
        return rotate(config, x, offset, theta, schedule, rope_interleaved_row);
    }
    rotate_by(
        config,
        x,
        offset,
        &angles.table,
        schedule,
        rope_interleaved_row,
    )
}

/// [`rope`] of `x [b, heads, s, hd]` (or [`rope_interleaved`] when `interleaved`) by given
/// angles: `cos` and `sin` hold `s` rows of `hd / 2` values, row `i` position `i`'s. Fed the
/// rows [`angle_table`] computes, it gives those kernels' bits: the same table, the same row
/// function.
///
/// # Errors
///
/// As [`rope`]; [`ShapeError::ElementwiseMismatch`] (op `rope_tables`) when a table does not
/// hold `s · hd / 2` values.
pub(crate) fn rope_by_tables(
    x: TensorView<'_>,
    cos: &[f32],
    sin: &[f32],
    interleaved: bool,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let [_, _, s, hd] = shape::rope(x.shape(), 0)?;
    let want = s.saturating_mul(hd / 2);
    for t in [cos, sin] {
        if t.len() != want {
            return Err(ShapeError::ElementwiseMismatch {
                op: "rope_tables",
                a: alloc::vec![want],
                b: alloc::vec![t.len()],
            }
            .into());
        }
    }
    let mut table = Vec::new();
    table
        .try_reserve_exact(want)
        .map_err(|_| KernelError::Scratch {
            op: "rope",
            elements: want,
        })?;
    table.extend(cos.iter().zip(sin).map(|(&c, &s)| [c, s]));
    let row = if interleaved {
        rope_interleaved_row
    } else {
        rope_row
    };
    rotate_by(&KernelConfig::selected(), x, 0, &table, schedule, row)
}

/// [`rotate`] with its angle table given: `s · hd / 2` angles for `x`'s positions, as
/// [`angle_table`] computes them.
fn rotate_by(
    config: &KernelConfig,
    x: TensorView<'_>,
    offset: usize,
    table: &[[f32; 2]],
    schedule: &dyn Schedule,
    row: fn(&[f32], &[[f32; 2]], &mut [f32]),
) -> Result<Tensor, KernelError> {
    const OP: &str = "rope";
    let [_, _, s, hd] = shape::rope(x.shape(), offset)?;
    let x = Rows::new(OP, "x", x)?;
    debug_assert_eq!(table.len(), s * (hd / 2));
    let mut out = Tensor::zeros(x.view.shape().to_vec())?;
    let half = hd / 2;
    for_rows(OP, config, schedule, &mut out, hd, &|r, o| {
        let i = r % s;
        row(x.get(r)?, &table[i * half..(i + 1) * half], o);
        Ok(())
    })?;
    Ok(out)
}

/// [`rope`] over adjacent pairs: each pair `(x[2j], x[2j + 1])` is rotated by
/// `(offset + i) · theta^(-2j/hd)`. This is the layout GGUF files store Llama's Q and K
/// projections in (llama.cpp's "normal" rope mode; the converter permutes the rows so that
/// rotate-half becomes adjacent pairs), so a model read from GGUF rotates with it. Same angles,
/// shapes, schedule promise and errors as [`rope`].
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{rope_interleaved, Sequential, Tensor};
/// let x = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 0.0, 1.0, 0.0]).unwrap();
/// let out = rope_interleaved(&x, 0, 100_000.0, &Sequential).unwrap();
/// // One pair per row: position 0 is not rotated, position 1 by 1 radian.
/// assert_eq!(&out.data()[..2], [1.0, 0.0]);
/// assert_eq!(out.data()[2..], [1.0f64.cos() as f32, 1.0f64.sin() as f32]);
/// # }
/// ```
///
/// # Errors
///
/// As [`rope`].
pub fn rope_interleaved<'a>(
    x: impl Into<TensorView<'a>>,
    offset: usize,
    theta: f32,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    rope_interleaved_with(&KernelConfig::selected(), x, offset, theta, schedule)
}

/// [`rope_interleaved`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`rope`].
pub fn rope_interleaved_with<'a>(
    config: &KernelConfig,
    x: impl Into<TensorView<'a>>,
    offset: usize,
    theta: f32,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    rotate(
        config,
        x.into(),
        offset,
        theta,
        schedule,
        rope_interleaved_row,
    )
}

/// The gate of a SiLU-gated MLP: `silu(gate) ⊙ up` element by element, with
/// `silu(g) = g / (1 + e^-g)` (the crate's deterministic [`exp`](crate::exp)). In a Llama
/// block, `gate = x·W1` and `up = x·W3`, and the MLP's output is `silu_mul(gate, up)·W2`.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{silu_mul, Sequential, Tensor};
/// let g = Tensor::new(vec![3], vec![0.0, 100.0, -100.0]).unwrap();
/// let u = Tensor::new(vec![3], vec![5.0, 2.0, 2.0]).unwrap();
/// assert_eq!(silu_mul(&g, &u, &Sequential).unwrap().data(), [0.0, 200.0, -0.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with [`ShapeError::ElementwiseMismatch`] (op `silu_mul`),
/// [`ShapeError::TooLarge`], [`ShapeError::Layout`] or [`ShapeError::Rank`] (rank 0);
/// [`KernelError::Tensor`] when the output cannot be allocated.
pub fn silu_mul<'a>(
    gate: impl Into<TensorView<'a>>,
    up: impl Into<TensorView<'a>>,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    silu_mul_with(&KernelConfig::selected(), gate, up, schedule)
}

/// [`silu_mul`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`silu_mul`].
pub fn silu_mul_with<'a>(
    config: &KernelConfig,
    gate: impl Into<TensorView<'a>>,
    up: impl Into<TensorView<'a>>,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    const OP: &str = "silu_mul";
    let (gate, up) = (gate.into(), up.into());
    let shape = shape::elementwise(OP, gate.shape(), up.shape())?;
    let Some(&d) = shape.last() else {
        return Err(ShapeError::Rank {
            op: OP,
            operand: "gate",
            expected: ">= 1",
            shape,
        }
        .into());
    };
    let (g, u) = (Rows::new(OP, "gate", gate)?, Rows::new(OP, "up", up)?);
    let mut out = Tensor::zeros(shape)?;
    for_rows(OP, config, schedule, &mut out, d, &|r, o| {
        silu_mul_row(g.get(r)?, u.get(r)?, o);
        Ok(())
    })?;
    Ok(out)
}

/// Where each output row of a broadcast starts in one operand, and its stride along the row.
struct Broadcast<'a> {
    data: &'a [f32],
    offset: usize,
    /// The operand's stride for each output dimension; 0 where it is broadcast.
    strides: Vec<usize>,
}

impl<'a> Broadcast<'a> {
    fn new(view: &TensorView<'a>, out: &[usize]) -> Self {
        let pad = out.len() - view.rank();
        let strides = (0..out.len())
            .map(|i| match i.checked_sub(pad) {
                Some(j) if view.shape()[j] == out[i] => view.strides()[j],
                _ => 0,
            })
            .collect();
        Self {
            data: view.buffer(),
            offset: view.offset(),
            strides,
        }
    }

    /// The position of element 0 of output row `r` (over every output dimension but the last).
    fn row_start(&self, out: &[usize], r: usize) -> usize {
        let rank = out.len();
        let mut at = self.offset;
        let mut rest = r;
        for d in (0..rank.saturating_sub(1)).rev() {
            at += (rest % out[d]) * self.strides[d];
            rest /= out[d];
        }
        at
    }
}

/// `a + b` with broadcasting (trailing alignment, see [`shape::broadcast`]): the residual add
/// of a decoder block, or adding a `[d]` bias to every row of `[.., d]`. Output of the
/// broadcast shape, compact; each element is one IEEE `+`, so the result is bit-identical
/// under every schedule. Inputs may be any views (broadcast dimensions read with stride 0).
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{add_broadcast, Sequential, Tensor};
/// let x = Tensor::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let bias = Tensor::new(vec![2], vec![10.0, 20.0]).unwrap();
/// assert_eq!(add_broadcast(&x, &bias, &Sequential).unwrap().data(), [11.0, 22.0, 13.0, 24.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with [`ShapeError::Broadcast`] (op `add`) or
/// [`ShapeError::TooLarge`]; [`KernelError::Tensor`] when the output cannot be allocated.
pub fn add_broadcast<'a>(
    a: impl Into<TensorView<'a>>,
    b: impl Into<TensorView<'a>>,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    add_broadcast_with(&KernelConfig::selected(), a, b, schedule)
}

/// [`add_broadcast`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`add_broadcast`].
pub fn add_broadcast_with<'a>(
    config: &KernelConfig,
    a: impl Into<TensorView<'a>>,
    b: impl Into<TensorView<'a>>,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    const OP: &str = "add";
    let (a, b) = (a.into(), b.into());
    let shape = shape::broadcast(OP, a.shape(), b.shape())?;
    // A rank-0 output is one row of one value.
    let cols = shape.last().copied().unwrap_or(1);
    let (pa, pb) = (Broadcast::new(&a, &shape), Broadcast::new(&b, &shape));
    let last = |p: &Broadcast<'_>| p.strides.last().copied().unwrap_or(0);
    let (sa, sb) = (last(&pa), last(&pb));
    let mut out = Tensor::zeros(shape.clone())?;
    for_rows(OP, config, schedule, &mut out, cols, &|r, o| {
        let (ra, rb) = (pa.row_start(&shape, r), pb.row_start(&shape, r));
        if sa == 1 && sb == 1 {
            // The common case: two contiguous rows.
            let (x, y) = (&pa.data[ra..ra + cols], &pb.data[rb..rb + cols]);
            for ((o, &x), &y) in o.iter_mut().zip(x).zip(y) {
                *o = x + y;
            }
        } else {
            for (j, o) in o.iter_mut().enumerate() {
                *o = pa.data[ra + j * sa] + pb.data[rb + j * sb];
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// The rows of `table` `[vocab, d]` named by `ids`: an output `[ids.len(), d]` whose row `i`
/// is `table[ids[i]]` (a decoder's token embedding). Rows are the units of `schedule`.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{embedding, Sequential, Tensor};
/// let table = Tensor::new(vec![3, 2], vec![0.0, 0.5, 1.0, 1.5, 2.0, 2.5]).unwrap();
/// assert_eq!(embedding(&table, &[2, 0], &Sequential).unwrap().data(), [2.0, 2.5, 0.0, 0.5]);
/// assert!(embedding(&table, &[3], &Sequential).is_err());
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with [`ShapeError::Rank`], [`ShapeError::EmbeddingId`] (naming the
/// first id out of range), [`ShapeError::TooLarge`] or [`ShapeError::Layout`];
/// [`KernelError::Tensor`] when the output cannot be allocated.
pub fn embedding<'a>(
    table: impl Into<TensorView<'a>>,
    ids: &[usize],
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    embedding_with(&KernelConfig::selected(), table, ids, schedule)
}

/// [`embedding`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`embedding`].
pub fn embedding_with<'a>(
    config: &KernelConfig,
    table: impl Into<TensorView<'a>>,
    ids: &[usize],
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    const OP: &str = "embedding";
    let table = table.into();
    let shape = shape::embedding(table.shape(), ids)?;
    let d = shape[1];
    let table = Rows::new(OP, "table", table)?;
    let mut out = Tensor::zeros(shape)?;
    for_rows(OP, config, schedule, &mut out, d, &|r, o| {
        o.copy_from_slice(table.get(ids[r])?);
        Ok(())
    })?;
    Ok(out)
}

#[cfg(all(test, feature = "model", not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::Sequential;

    #[test]
    fn rope_by_angles_has_rope_interleaveds_bits_and_recomputes_angles_of_other_positions() {
        let (s, hd, theta) = (3, 8, 100_000.0);
        let data: Vec<f32> = (0..2 * s * hd).map(|i| (i as f32 * 0.37).sin()).collect();
        let x = Tensor::new(vec![1, 2, s, hd], data).unwrap();
        let want = rope_interleaved(&x, 5, theta, &Sequential).unwrap();
        let angles = Angles::new(5, s, hd, theta).unwrap();
        let config = KernelConfig::selected();
        let got = rope_interleaved_by(&config, x.view(), 5, theta, &angles, &Sequential).unwrap();
        assert_eq!(got.to_bits(), want.to_bits());
        // Angles of another offset, length, width or base are not used.
        for other in [
            Angles::new(4, s, hd, theta),
            Angles::new(5, s + 1, hd, theta),
            Angles::new(5, s, hd + 2, theta),
            Angles::new(5, s, hd, 10_000.0),
        ] {
            let got =
                rope_interleaved_by(&config, x.view(), 5, theta, &other.unwrap(), &Sequential);
            assert_eq!(got.unwrap().to_bits(), want.to_bits());
        }
        // And the shape errors are rope's.
        let odd = Tensor::new(vec![1, 1, 1, 3], vec![0.0; 3]).unwrap();
        assert_eq!(
            rope_interleaved_by(&config, odd.view(), 0, theta, &angles, &Sequential).unwrap_err(),
            rope_interleaved(&odd, 0, theta, &Sequential).unwrap_err()
        );
    }
}
