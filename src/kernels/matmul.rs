//! Matrix products — `a · b` ([`matmul()`]) and `x · wᵀ` ([`linear()`]) — scheduled over
//! output tiles, or over output columns when the product has few rows.

use alloc::vec::Vec;
use core::ops::Range;

use super::config::KernelConfig;
use super::error::scratch;
use super::loops::gemm::{pack_len, GemmTile, Source, Strided, MAX_MR, MAX_NR};
use super::loops::matvec::{Layout, Skinny};
use super::parallel::{parallel_chunks, Work};
use super::KernelError;
use crate::schedule::Schedule;
use crate::shape::{self, MatmulDims};
use crate::tensor::Tensor;

/// Calls with fewer multiply-adds than this (`rows·k·n`) run inline on the caller
/// (2^18: conservative, not tuned separately; SDPA measures its break-even near 2^15).
pub const MATMUL_PARALLEL_MIN_WORK: u64 = 1 << 18;

/// Products with at most this many rows take the memory-bound few-row path.
const SKINNY_ROWS: usize = 4;
/// The largest output tile a unit computes: `TILE_ROWS × TILE_COLS` (a packed `KC`-deep slice
/// of B for it, 512 KiB, stays in L2).
const TILE_ROWS: usize = 96;
const TILE_COLS: usize = 512;

/// `a · b` for `a` of shape `[.., m, k]` (rank ≥ 2; leading dimensions are batch) and `b` of
/// shape `[k, n]`: an output of shape `[.., m, n]`.
///
/// Every output element is `((0 + a[r][0]·b[0][c]) + a[r][1]·b[1][c]) + …` in increasing
/// inner index — in [`Precision::Portable`](crate::Precision::Portable) each step rounds
/// twice, in [`Precision::Native`](crate::Precision::Native) it may fuse — whatever the
/// schedule, the tiling or the variant, so results are bit-identical under every schedule.
///
/// The units of `schedule` are output tiles of up to 96 rows (all batches' rows together) ×
/// 512 columns, each a packed, register-blocked product; a product of at most four rows is
/// split over its output columns instead, streaming `b` once. Calls below
/// [`MATMUL_PARALLEL_MIN_WORK`] stay inline.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{matmul, Sequential, Tensor};
/// let a = Tensor::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let b = Tensor::new(vec![2, 1], vec![10.0, 1.0]).unwrap();
/// assert_eq!(matmul(&a, &b, &Sequential).unwrap().data(), [12.0, 34.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with the [`ShapeError`](crate::ShapeError) of [`shape::matmul`]:
/// `a` of rank below 2 or `b` not of rank 2, inner dimensions that differ, an output too large
/// for one allocation; [`KernelError::Tensor`] when the output cannot be allocated,
/// [`KernelError::Scratch`] when the tiles or packing buffers cannot.
pub fn matmul(a: &Tensor, b: &Tensor, schedule: &dyn Schedule) -> Result<Tensor, KernelError> {
    matmul_with(&KernelConfig::selected(), a, b, schedule)
}

/// [`matmul()`] with a given [`KernelConfig`] (variant, precision, work threshold).
///
/// # Errors
///
/// As [`matmul()`].
pub fn matmul_with(
    config: &KernelConfig,
    a: &Tensor,
    b: &Tensor,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let dims = shape::matmul(a.shape(), b.shape())?;
    product(
        config,
        "matmul",
        dims,
        a.data(),
        b.data(),
        Layout::InOut,
        schedule,
    )
}

/// `x · wᵀ` for `x` of shape `[.., k]` (rank ≥ 1; leading dimensions are batch) and a weight
/// `w` of shape `[n, k]` — `[out, in]`, as checkpoints store a linear layer — read in place,
/// without a transposed copy: an output of shape `[.., n]`.
///
/// With more than four rows this is [`matmul()`]'s tiled product, in its order. With at most
/// four (a decode step) every output is a dot product of two contiguous rows in lanes (for one
/// row: 32 accumulators, element `p` in lane `p % 32`; for two: 16; for three or four: 8; each
/// a fixed fold), split over output columns so one row still runs on every worker. Either way
/// the order depends only on the shapes: bit-identical under every schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{linear, Sequential, Tensor};
/// let x = Tensor::new(vec![2], vec![1.0, 2.0]).unwrap();
/// let w = Tensor::new(vec![3, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]).unwrap();
/// assert_eq!(linear(&x, &w, &Sequential).unwrap().data(), [1.0, 2.0, 3.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with the [`ShapeError`](crate::ShapeError) of [`shape::linear`];
/// [`KernelError::Tensor`] and [`KernelError::Scratch`] as [`matmul()`].
pub fn linear(x: &Tensor, w: &Tensor, schedule: &dyn Schedule) -> Result<Tensor, KernelError> {
    linear_with(&KernelConfig::selected(), x, w, schedule)
}

/// [`linear()`] with a given [`KernelConfig`] (variant, precision, work threshold).
///
/// # Errors
///
/// As [`linear()`].
pub fn linear_with(
    config: &KernelConfig,
    x: &Tensor,
    w: &Tensor,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let dims = shape::linear(x.shape(), w.shape())?;
    product(
        config,
        "linear",
        dims,
        x.data(),
        w.data(),
        Layout::OutIn,
        schedule,
    )
}

/// One product, validated: the few-row path or the tiled one.
fn product(
    config: &KernelConfig,
    op: &'static str,
    dims: MatmulDims,
    a: &[f32],
    b: &[f32],
    layout: Layout,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let (m, k, n) = (dims.rows, dims.inner, dims.cols);
    let mut out = Tensor::zeros(dims.output_shape)?;
    if m == 0 || n == 0 {
        return Ok(out);
    }
    let work = Work {
        total: (m as u64).saturating_mul(k as u64).saturating_mul(n as u64),
        fork_from: config.threshold(MATMUL_PARALLEL_MIN_WORK),
    };
    let operands = Operands {
        a,
        b,
        m,
        k,
        n,
        layout,
    };
    if m <= SKINNY_ROWS {
        few_rows(config, op, &operands, out.data_mut(), work, schedule)?;
    } else {
        tiled(config, op, &operands, out.data_mut(), work, schedule)?;
    }
    Ok(out)
}

/// `a` is `[m, k]`; `b` is `[k, n]` or `[n, k]` as `layout` says.
struct Operands<'a> {
    a: &'a [f32],
    b: &'a [f32],
    m: usize,
    k: usize,
    n: usize,
    layout: Layout,
}

/// Units are output columns. The kernel writes a column range column by column (`m` values
/// each): straight into the output for one row, else into a column-major copy transposed after.
fn few_rows(
    config: &KernelConfig,
    op: &'static str,
    p: &Operands<'_>,
    out: &mut [f32],
    work: Work,
    schedule: &dyn Schedule,
) -> Result<(), KernelError> {
    let kernel = config.pick(&config.kernels().skinny);
    let body = |cols: Range<usize>, chunk: &mut [f32]| {
        let unit = Skinny {
            a: p.a,
            m: p.m,
            k: p.k,
            n: p.n,
            b: p.b,
            layout: p.layout,
            cols,
        };
        kernel(&unit, chunk);
        Ok(())
    };
    if p.m == 1 {
        return parallel_chunks(op, schedule, out, 1, work, &body);
    }
    let mut by_column = scratch(op, out.len())?;
    parallel_chunks(op, schedule, &mut by_column, p.m, work, &body)?;
    for (j, column) in by_column.chunks_exact(p.m).enumerate() {
        for (r, &v) in column.iter().enumerate() {
            out[r * p.n + j] = v;
        }
    }
    Ok(())
}

/// The matrix product's tiles: `b` in either layout, read in place.
fn tiled(
    config: &KernelConfig,
    op: &'static str,
    p: &Operands<'_>,
    out: &mut [f32],
    work: Work,
    schedule: &dyn Schedule,
) -> Result<(), KernelError> {
    let a = Strided {
        data: p.a,
        row_stride: p.k,
        col_stride: 1,
    };
    let b = Source::Strided(match p.layout {
        Layout::InOut => Strided {
            data: p.b,
            row_stride: p.n,
            col_stride: 1,
        },
        Layout::OutIn => Strided {
            data: p.b,
            row_stride: 1,
            col_stride: p.k,
        },
    });
    let product = Tiled {
        batches: 1,
        m: p.m,
        n: p.n,
        k: p.k,
        tile: &|_, rows, cols| GemmTile {
            a,
            b,
            k: p.k,
            rows,
            cols,
            init: None,
        },
    };
    run_tiles(config, op, &product, out, work, schedule)
}

/// `batches` products of `m × n` outputs (one `[batches, m, n]` row-major output) with an inner
/// dimension `k`; `tile(batch, rows, cols)` is the tile of a batch's product.
pub(super) struct Tiled<'a> {
    pub batches: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    #[allow(clippy::type_complexity)] // one closure, named by the field's doc
    pub tile: &'a (dyn Fn(usize, Range<usize>, Range<usize>) -> GemmTile<'a> + Sync),
}

/// Runs a [`Tiled`] product. Units are output tiles (batch, row block, column block, in that
/// order): straight into the output when one column of tiles divides the rows (the tile-major
/// layout is then the output's own), else through a buffer per task, copied row by row.
pub(super) fn run_tiles(
    config: &KernelConfig,
    op: &'static str,
    p: &Tiled<'_>,
    out: &mut [f32],
    work: Work,
    schedule: &dyn Schedule,
) -> Result<(), KernelError> {
    if p.batches == 0 || p.m == 0 || p.n == 0 {
        return Ok(());
    }
    let (tm, tn) = tile_shape(p, schedule.parallelism());
    let (row_tiles, col_tiles) = (p.m.div_ceil(tm), p.n.div_ceil(tn));
    let per_batch = row_tiles * col_tiles;
    let units = p.batches * per_batch;
    let tile = tm * tn;
    let span = |u: usize| {
        let (batch, rest) = (u / per_batch, u % per_batch);
        let (ti, tj) = (rest / col_tiles, rest % col_tiles);
        (
            batch,
            ti * tm..((ti + 1) * tm).min(p.m),
            tj * tn..((tj + 1) * tn).min(p.n),
        )
    };
    let direct = col_tiles == 1 && p.m % tm == 0;
    let slot_len = if direct { tm * p.n } else { tile };
    let kernel = config.pick(&config.kernels().gemm);
    let body = |range: Range<usize>, chunk: &mut [f32]| {
        let mut pack = scratch(op, pack_len(tm, tn, p.k))?;
        for (u, slot) in range.zip(chunk.chunks_exact_mut(slot_len)) {
            let (batch, rows, cols) = span(u);
            kernel(&(p.tile)(batch, rows, cols), slot, &mut pack);
        }
        Ok(())
    };
    if direct {
        return parallel_chunks(op, schedule, out, slot_len, work, &body);
    }
    // Otherwise each unit computes its tile into a buffer of its task and copies the rows
    // into place. The units are claimed through a split of zero-sized values: it hands each
    // unit to one task only (and fails on a schedule that runs one twice), which is what makes
    // the tiles' writes disjoint.
    let target = RowSegments {
        ptr: out.as_mut_ptr(),
        len: out.len(),
    };
    let mut claims = Vec::new();
    claims
        .try_reserve_exact(units)
        .map_err(|_| KernelError::Scratch {
            op,
            elements: units,
        })?;
    claims.resize(units, ());
    parallel_chunks(op, schedule, &mut claims, 1, work, &|range, _claimed| {
        let mut buf = scratch(op, tile + pack_len(tm, tn, p.k))?;
        let (slot, pack) = buf.split_at_mut(tile);
        for u in range {
            let (batch, rows, cols) = span(u);
            let width = cols.len();
            kernel(&(p.tile)(batch, rows.clone(), cols.clone()), slot, pack);
            for (i, r) in rows.enumerate() {
                let at = (batch * p.m + r) * p.n + cols.start;
                // SAFETY: `at..at + width` is row `r`, columns `cols`, of unit `u`'s tile,
                // inside the output (`batch < batches`, `r < m`, `cols.end <= n`). Tiles do not
                // overlap and unit `u` was handed to this task alone (`_claimed`), so no other
                // task reads or writes these values while the region runs; the output is
                // borrowed mutably by this function for all of it.
                unsafe { target.write(at, &slot[i * width..(i + 1) * width]) };
            }
        }
        Ok(())
    })
}

/// The row-major output of [`run_tiles`], written by several tasks at once, each only into the
/// row segments of the tiles it claimed.
struct RowSegments {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: tasks only write disjoint ranges through it (see `write`), and it is used only
// while the output it points into is mutably borrowed by `run_tiles`.
unsafe impl Sync for RowSegments {}

impl RowSegments {
    /// Copies `src` to `out[at..at + src.len()]`.
    ///
    /// # Safety
    ///
    /// No other task may read or write that range while the copy runs.
    unsafe fn write(&self, at: usize, src: &[f32]) {
        let end = at.checked_add(src.len());
        assert!(
            end.is_some_and(|end| end <= self.len),
            "row segment out of bounds"
        );
        // SAFETY: in bounds (asserted above) of the live output; the caller guarantees the
        // range is not accessed concurrently, and `src` is a different allocation.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(at), src.len()) }
    }
}

/// The tile of a product: up to `TILE_ROWS × TILE_COLS`, smaller (rows first, down to a
/// quarter, then columns) until every batch holds at least four tiles per worker, so that the
/// tasks' shares stay even. The bits do not depend on the tiles, so this may follow the
/// schedule.
fn tile_shape(p: &Tiled<'_>, parallelism: usize) -> (usize, usize) {
    let want = parallelism.saturating_mul(4);
    let (mut rows, mut cols) = (TILE_ROWS, TILE_COLS);
    loop {
        let (tm, tn) = (tile_len(p.m, rows, MAX_MR), tile_len(p.n, cols, MAX_NR));
        let units = p.m.div_ceil(tm).saturating_mul(p.n.div_ceil(tn));
        if p.batches.saturating_mul(units) >= want {
            return (tm, tn);
        }
        if rows > TILE_ROWS / 4 {
            rows /= 2;
        } else if cols > TILE_COLS / 4 {
            cols /= 2;
        } else {
            return (tm, tn);
        }
    }
}

/// The tile length for `len` values at most `max` long, made even across tiles and rounded up
/// to a multiple of `align` (the micro-kernel's size).
fn tile_len(len: usize, max: usize, align: usize) -> usize {
    let tiles = len.div_ceil(max).max(1);
    len.div_ceil(tiles).div_ceil(align) * align
}
