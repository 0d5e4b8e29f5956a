//! The element-wise and row-wise ops of a transformer decoder, scheduled over output rows:
//! RMS normalisation, rotary position embedding, the SiLU gate, the broadcasting residual add
//! and the embedding lookup.
//!
//! Each reads its inputs through [`TensorView`]s (a `&Tensor` converts for free) and writes a
//! fresh tensor. A row's arithmetic is fixed (see `loops/{norm,rope,gate}.rs`), so the result
//! is bit-identical under every schedule and every compiled variant. A decoder's prefill runs
//! the same row functions under the same schedules through the `*_into` forms, which write
//! into its own buffers; the SiLU gate and the residual add there read a product's
//! column-major output directly, so that it needs no transpose of its own.

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
    out: &mut [f32],
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
    parallel_chunks(op, schedule, out, cols, work, &|units, chunk| {
        for (r, row) in units.zip(chunk.chunks_exact_mut(cols)) {
            body(r, row)?;
        }
        Ok(())
    })
}

/// `Ok` when a caller's buffer of `got` values holds the `want` an op writes or reads;
/// otherwise the mismatch as [`ShapeError::ElementwiseMismatch`] naming the op.
#[cfg(feature = "model")]
fn fits(op: &'static str, want: usize, got: usize) -> Result<(), KernelError> {
    if want == got {
        return Ok(());
    }
    Err(ShapeError::ElementwiseMismatch {
        op,
        a: alloc::vec![want],
        b: alloc::vec![got],
    }
    .into())
}

/// The side of the tiles [`silu_mul_columns_into`] and [`add_columns_into`] take from a
/// column-major operand: per tile, a run of contiguous reads from each of as many columns, and
/// a run of contiguous writes to each of as many rows.
#[cfg(feature = "model")]
const TILE_SIDE: usize = 16;

/// One tile of a column-major operand, column `c`'s values at `[c][..rows]`.
#[cfg(feature = "model")]
type ColumnTile = [[f32; TILE_SIDE]; TILE_SIDE];

/// Where a tile lies: rows `r..r + rows` (numbered in the whole output) of columns
/// `j..j + cols`.
#[cfg(feature = "model")]
#[derive(Clone, Copy)]
struct TileAt {
    r: usize,
    rows: usize,
    j: usize,
    cols: usize,
}

#[cfg(feature = "model")]
impl TileAt {
    /// Copies this tile of `src` (columns of `m` values, back to back) into `tile`.
    fn load(&self, src: &[f32], m: usize, tile: &mut ColumnTile) {
        for (c, column) in tile.iter_mut().enumerate().take(self.cols) {
            let from = &src[(self.j + c) * m + self.r..];
            match from.first_chunk::<TILE_SIDE>() {
                // A whole column of the tile (nearly every one): a copy of fixed length.
                Some(whole) if self.rows == TILE_SIDE => *column = *whole,
                _ => column[..self.rows].copy_from_slice(&from[..self.rows]),
            }
        }
    }

    /// Runs `each(value, &mut out)` for every value of `tile` and its place in the row-major
    /// `rows` (this tile's rows, `width` values each, from the first).
    fn store(
        &self,
        tile: &ColumnTile,
        rows: &mut [f32],
        width: usize,
        each: impl Fn(f32, &mut f32),
    ) {
        for (i, row) in rows.chunks_exact_mut(width).take(self.rows).enumerate() {
            let row = &mut row[self.j..self.j + self.cols];
            match row.first_chunk_mut::<TILE_SIDE>() {
                // A whole group of columns (nearly every row): the same loop over an array,
                // whose fixed bounds let it unroll.
                Some(row) => {
                    for (c, o) in row.iter_mut().enumerate() {
                        each(tile[c][i], o);
                    }
                }
                None => {
                    for (c, o) in row.iter_mut().enumerate() {
                        each(tile[c][i], o);
                    }
                }
            }
        }
    }
}

/// Runs `body(tiles, tile, rows)` for every tile of `out` (rows of `width` values), with
/// `rows` the tile's rows of `out` from its first, under `schedule` as [`for_rows`] runs rows;
/// `tiles` is the body's room for its tiles, made once per piece of the region (not once per
/// tile, which would clear it every 256 values). A piece takes its rows a column group at a
/// time, so that a body reading a column-major operand streams the group's columns.
#[cfg(feature = "model")]
fn for_tiles<T: Default>(
    op: &'static str,
    config: &KernelConfig,
    schedule: &dyn Schedule,
    out: &mut [f32],
    width: usize,
    body: impl Fn(&mut T, TileAt, &mut [f32]) + Sync,
) -> Result<(), KernelError> {
    if width == 0 {
        return Ok(());
    }
    let work = Work {
        total: out.len() as u64,
        fork_from: config.threshold(DECODER_PARALLEL_MIN_WORK),
    };
    parallel_chunks(op, schedule, out, width, work, &|units, chunk| {
        let mut tiles = T::default();
        for j in (0..width).step_by(TILE_SIDE) {
            let cols = TILE_SIDE.min(width - j);
            for r in units.clone().step_by(TILE_SIDE) {
                let rows = TILE_SIDE.min(units.end - r);
                let tile = TileAt { r, rows, j, cols };
                body(&mut tiles, tile, &mut chunk[(r - units.start) * width..]);
            }
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
    for_rows(OP, config, schedule, out.data_mut(), d, &|r, o| {
        rms_norm_row(x.get(r)?, w, eps, o);
        Ok(())
    })?;
    Ok(out)
}

/// [`rms_norm`] of the rows of `x` (each `weight.len()` values) into `out`, as long as `x`:
/// the same row function under the same schedule, on a caller's buffers (a decoder's prefill).
///
/// # Errors
///
/// [`ShapeError::ElementwiseMismatch`] when `out` is not as long as `x`;
/// [`KernelError::DisjointSplit`] when `x` is not whole rows, or the schedule broke its contract.
#[cfg(feature = "model")]
pub(crate) fn rms_norm_rows_into(
    config: &KernelConfig,
    x: &[f32],
    weight: &[f32],
    eps: f32,
    schedule: &dyn Schedule,
    out: &mut [f32],
) -> Result<(), KernelError> {
    const OP: &str = "rms_norm";
    fits(OP, x.len(), out.len())?;
    let d = weight.len();
    for_rows(OP, config, schedule, out, d, &|r, o| {
        rms_norm_row(&x[r * d..(r + 1) * d], weight, eps, o);
        Ok(())
    })
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
    for_rows(OP, config, schedule, out.data_mut(), hd, &|r, o| {
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

/// [`rope_interleaved`] of `x`, compact rows of `hd` values in blocks of `s` positions (a
/// `[.., s, hd]` tensor's values), into `out`, as long as `x`: row `r` is position `r % s`,
/// rotated by `angles[r % s]`'s `hd / 2` pairs ([`angle_table`]'s rows, which the caller
/// computed once for every layer). The same row function and schedule as
/// [`rope_interleaved`], on a caller's buffers (a decoder's prefill).
///
/// # Errors
///
/// [`ShapeError::ElementwiseMismatch`] when `out` is not as long as `x`, or `angles` does not
/// hold `s · hd / 2` pairs; [`KernelError::DisjointSplit`] when `x` is not whole rows, or the
/// schedule broke its contract.
#[cfg(feature = "model")]
pub(crate) fn rope_interleaved_rows_into(
    config: &KernelConfig,
    x: &[f32],
    s: usize,
    hd: usize,
    angles: &[[f32; 2]],
    schedule: &dyn Schedule,
    out: &mut [f32],
) -> Result<(), KernelError> {
    const OP: &str = "rope";
    fits(OP, x.len(), out.len())?;
    if s == 0 {
        // No positions: no rows either.
        return fits(OP, 0, x.len());
    }
    let half = hd / 2;
    fits(OP, s.saturating_mul(half), angles.len())?;
    for_rows(OP, config, schedule, out, hd, &|r, o| {
        let i = r % s;
        let cs = &angles[i * half..(i + 1) * half];
        rope_interleaved_row(&x[r * hd..(r + 1) * hd], cs, o);
        Ok(())
    })
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
    for_rows(OP, config, schedule, out.data_mut(), d, &|r, o| {
        silu_mul_row(g.get(r)?, u.get(r)?, o);
        Ok(())
    })?;
    Ok(out)
}

/// [`silu_mul`] of `gate` and `up` given column-major — `width` columns of `m` values each, as
/// a product writes them — into the row-major `out` (`m` rows of `width`): the same row
/// function on the same values (each output is one element's arithmetic, whatever its
/// neighbours), so that the transpose the product's output would otherwise need is this pass.
/// A tile of [`TILE_SIDE`] columns by as many rows is copied in, gated in one call and
/// written to its rows; a region's piece takes its rows a column group at a time, streaming
/// the group's columns. Output rows are the units of `schedule`, as [`silu_mul`]'s.
///
/// # Errors
///
/// [`ShapeError::ElementwiseMismatch`] when `gate`, `up` and `out` are not all `m` rows long;
/// [`KernelError::DisjointSplit`] when `out` is not whole rows, or the schedule broke its
/// contract.
#[cfg(feature = "model")]
pub(crate) fn silu_mul_columns_into(
    config: &KernelConfig,
    gate: &[f32],
    up: &[f32],
    m: usize,
    schedule: &dyn Schedule,
    out: &mut [f32],
) -> Result<(), KernelError> {
    const OP: &str = "silu_mul";
    fits(OP, gate.len(), out.len())?;
    fits(OP, up.len(), out.len())?;
    let width = out.len().checked_div(m).unwrap_or(0);
    fits(OP, m.saturating_mul(width), out.len())?;
    for_tiles(
        OP,
        config,
        schedule,
        out,
        width,
        |[g, u, o]: &mut [ColumnTile; 3], at, rows| {
            at.load(gate, m, g);
            at.load(up, m, u);
            // The whole tile in one call: where it is partial, the values outside it are whatever
            // the last tile left, gated and never written out.
            silu_mul_row(g.as_flattened(), u.as_flattened(), o.as_flattened_mut());
            at.store(o, rows, width, |v, out| *out = v);
        },
    )
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
    for_rows(OP, config, schedule, out.data_mut(), cols, &|r, o| {
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

/// `x += y` for the row-major `x` (`m` rows) and `y` given column-major (a product's output,
/// `x`'s width columns of `m` values each): per element the one IEEE `+` of
/// [`add_broadcast`]`(x, y)` (the residual add of a decoder block), in place and read a tile
/// at a time ([`TILE_SIDE`] columns by as many rows), so that the product's output needs no
/// transpose of its own. Rows of `x` are the units of `schedule`, as [`add_broadcast`]'s
/// output rows.
///
/// # Errors
///
/// [`ShapeError::ElementwiseMismatch`] when `y` is not as long as `x`, or not `m` rows;
/// [`KernelError::DisjointSplit`] when `x` is not whole rows, or the schedule broke its
/// contract.
#[cfg(feature = "model")]
pub(crate) fn add_columns_into(
    config: &KernelConfig,
    x: &mut [f32],
    y: &[f32],
    m: usize,
    schedule: &dyn Schedule,
) -> Result<(), KernelError> {
    const OP: &str = "add";
    fits(OP, x.len(), y.len())?;
    let width = x.len().checked_div(m).unwrap_or(0);
    fits(OP, m.saturating_mul(width), x.len())?;
    for_tiles(
        OP,
        config,
        schedule,
        x,
        width,
        |t: &mut ColumnTile, at, rows| {
            at.load(y, m, t);
            at.store(t, rows, width, |y, x| *x += y);
        },
    )
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
    for_rows(OP, config, schedule, out.data_mut(), d, &|r, o| {
        o.copy_from_slice(table.get(ids[r])?);
        Ok(())
    })?;
    Ok(out)
}

#[cfg(all(test, feature = "model", not(feature = "loom")))]
mod tests {
    use super::*;
    use crate::kernels::tests::TwoTasksInline;
    use crate::Sequential;

    /// Sequential, and two pieces of every region.
    fn schedules() -> [(KernelConfig, &'static dyn Schedule); 2] {
        [
            (KernelConfig::selected(), &Sequential),
            (
                KernelConfig::selected().with_min_parallel_work(0),
                &TwoTasksInline,
            ),
        ]
    }

    fn values(len: usize, seed: f32) -> Vec<f32> {
        (0..len)
            .map(|i| ((i as f32 + seed) * 0.37).sin() * 3.0)
            .collect()
    }

    /// The row-major `[m, width]` of `width` columns of `m` values.
    fn columns(rows: &[f32], m: usize, width: usize) -> Vec<f32> {
        (0..width * m)
            .map(|i| rows[(i % m) * width + i / m])
            .collect()
    }

    #[test]
    fn rms_norm_rows_into_has_rms_norms_bits() {
        let (m, d) = (5, 24);
        let x = Tensor::new(alloc::vec![m, d], values(m * d, 1.0)).unwrap();
        let w = Tensor::new(alloc::vec![d], values(d, 2.0)).unwrap();
        let want = rms_norm(&x, &w, 1e-5, &Sequential).unwrap();
        for (config, s) in schedules() {
            let mut out = alloc::vec![f32::NAN; m * d];
            rms_norm_rows_into(&config, x.data(), w.data(), 1e-5, s, &mut out).unwrap();
            assert_eq!(Tensor::new(alloc::vec![m, d], out).unwrap(), want);
        }
        let mut short = alloc::vec![0.0; m * d - 1];
        let err = rms_norm_rows_into(
            &KernelConfig::selected(),
            x.data(),
            w.data(),
            1e-5,
            &Sequential,
            &mut short,
        );
        assert!(matches!(
            err,
            Err(KernelError::Shape(ShapeError::ElementwiseMismatch { .. }))
        ));
    }

    #[test]
    fn rope_interleaved_rows_into_has_rope_interleaveds_bits() {
        let (heads, s, hd, offset, theta) = (3, 5, 8, 7, 100_000.0);
        let x = Tensor::new(alloc::vec![1, heads, s, hd], values(heads * s * hd, 3.0)).unwrap();
        let want = rope_interleaved(&x, offset, theta, &Sequential).unwrap();
        let angles = angle_table(offset, s, hd, theta).unwrap();
        for (config, sc) in schedules() {
            let mut out = alloc::vec![f32::NAN; x.len()];
            rope_interleaved_rows_into(&config, x.data(), s, hd, &angles, sc, &mut out).unwrap();
            assert_eq!(out, want.data());
        }
        // Angles of another length are refused, not read short.
        let mut out = alloc::vec![0.0; x.len()];
        let config = KernelConfig::selected();
        let err = rope_interleaved_rows_into(
            &config,
            x.data(),
            s,
            hd,
            &angles[1..],
            &Sequential,
            &mut out,
        );
        assert!(matches!(
            err,
            Err(KernelError::Shape(ShapeError::ElementwiseMismatch { .. }))
        ));
    }

    #[test]
    fn silu_mul_columns_into_has_silu_muls_bits_transposed() {
        // Two whole column groups and a ragged one; 21 rows are a whole tile's and a ragged
        // one's, and with two pieces, two ragged tiles each.
        let (m, width) = (21, 37);
        let g = Tensor::new(alloc::vec![m, width], values(m * width, 4.0)).unwrap();
        let u = Tensor::new(alloc::vec![m, width], values(m * width, 5.0)).unwrap();
        let want = silu_mul(&g, &u, &Sequential).unwrap();
        let (gc, uc) = (columns(g.data(), m, width), columns(u.data(), m, width));
        for (config, s) in schedules() {
            let mut out = alloc::vec![f32::NAN; m * width];
            silu_mul_columns_into(&config, &gc, &uc, m, s, &mut out).unwrap();
            assert_eq!(out, want.data());
        }
        let mut out = alloc::vec![0.0; m * width];
        let err = silu_mul_columns_into(
            &KernelConfig::selected(),
            &gc,
            &uc[1..],
            m,
            &Sequential,
            &mut out,
        );
        assert!(matches!(
            err,
            Err(KernelError::Shape(ShapeError::ElementwiseMismatch { .. }))
        ));
    }

    #[test]
    fn add_columns_into_has_add_broadcasts_bits_transposed() {
        let (m, width) = (7, 35);
        let x = Tensor::new(alloc::vec![m, width], values(m * width, 6.0)).unwrap();
        let y = Tensor::new(alloc::vec![m, width], values(m * width, 7.0)).unwrap();
        let want = add_broadcast(&x, &y, &Sequential).unwrap();
        let yc = columns(y.data(), m, width);
        for (config, s) in schedules() {
            let mut sum = x.data().to_vec();
            add_columns_into(&config, &mut sum, &yc, m, s).unwrap();
            assert_eq!(sum, want.data());
        }
        // A length that is not `m` rows is refused.
        let mut sum = x.data().to_vec();
        let err = add_columns_into(&KernelConfig::selected(), &mut sum, &yc, m + 1, &Sequential);
        assert!(matches!(
            err,
            Err(KernelError::Shape(ShapeError::ElementwiseMismatch { .. }))
        ));
    }
}
