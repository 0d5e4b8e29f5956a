//! Matrix products — `a · b` ([`matmul()`]) and `x · wᵀ` ([`linear()`]) — scheduled over
//! output tiles, or over output columns when the product has few rows.

use alloc::vec::Vec;
use core::ops::Range;

use super::config::KernelConfig;
use super::error::{scratch, ReusedScratch};
use super::loops::gemm::{pack_len, GemmTile, Source, Strided};
use super::loops::matvec::{Layout, Skinny};
use super::loops::panel::{MAX_MR, MAX_NR};
use super::parallel::{parallel_chunks, parallel_chunks_grained, Work};
use super::KernelError;
use crate::schedule::Schedule;
use crate::shape::{self, MatmulDims};
use crate::tensor::Tensor;

/// Calls with fewer multiply-adds than this (`rows·k·n`) run inline on the caller
/// (2^18: conservative, not tuned separately; SDPA measures its break-even near 2^15).
pub const MATMUL_PARALLEL_MIN_WORK: u64 = 1 << 18;

/// Products with at most this many rows take the memory-bound few-row path.
const SKINNY_ROWS: usize = 4;
/// The largest output tile of a split over tiles: `TILE_ROWS × TILE_COLS`, its task's buffer
/// (1 MiB) reused tile after tile.
const TILE_ROWS: usize = 256;
const TILE_COLS: usize = 1024;

/// `a · b` for `a` of shape `[.., m, k]` (rank ≥ 2; leading dimensions are batch) and `b` of
/// shape `[k, n]`: an output of shape `[.., m, n]`.
///
/// Every output element is `((0 + a[r][0]·b[0][c]) + a[r][1]·b[1][c]) + …` in increasing
/// inner index — in [`Precision::Portable`](crate::Precision::Portable) each step rounds
/// twice, in [`Precision::Native`](crate::Precision::Native) it may fuse — whatever the
/// schedule, the tiling or the variant, so results are bit-identical under every schedule.
///
/// The units of `schedule` are output rows (all batches' rows together), each task's rows one
/// packed, register-blocked product written in place; when the product has so few rows for
/// its columns that every task would pack most of `b` again, they are output tiles of up to
/// 256 rows × 1024 columns instead, as many column tiles as tasks. A product of at most four
/// rows is split over its output columns, streaming `b` once. Calls below
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
        // A memory-bound stream, cut as finely as the schedule likes: the pool's four pieces
        // per task let the caller take the share of a helper that wakes late. Each piece's
        // kernel requests its weight rows ahead from its first line, so a piece restarts no
        // prefetcher (measured against one range per task: the same 47–54 GB/s on two cores
        // over a decoder's projection shapes; cold, k 1024 × n 256, 28.8 → 18.0 µs against
        // 18.5 µs inline).
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

/// Runs a [`Tiled`] product, split one of two ways (see [`split`]): over output rows, each
/// task's rows one tile written in place, or over tiles (batch, row block, column block, in
/// that order) computed into a buffer of their task and copied row by row.
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
    let tasks = if work.forks() {
        schedule.parallelism().max(1)
    } else {
        1
    };
    let kernel = config.pick(&config.kernels().gemm);
    let (tm, tn) = match split(p, tasks) {
        Split::Rows => {
            // Units are output rows (all batches' rows in order); a task's rows are one tile
            // per batch they touch, so B is packed once per task and batch. Each body call
            // packs B again, so the grain keeps the calls to one per task.
            let grain = p.batches.saturating_mul(p.m).div_ceil(tasks);
            return parallel_chunks_grained(
                op,
                schedule,
                out,
                p.n,
                grain,
                work,
                &|range, chunk| {
                    // Packing writes every value the micro-kernels read, so the thread's
                    // reused scratch serves (no allocation, no clearing per call).
                    let len = pack_len(range.len().min(p.m), p.n, p.k);
                    let mut pack = ReusedScratch::take(op, len)?;
                    let mut row = range.start;
                    while row < range.end {
                        let (batch, r0) = (row / p.m, row % p.m);
                        let r1 = p.m.min(r0 + (range.end - row));
                        let at = (row - range.start) * p.n;
                        let slot = &mut chunk[at..at + (r1 - r0) * p.n];
                        kernel(&(p.tile)(batch, r0..r1, 0..p.n), slot, p.n, &mut pack);
                        row += r1 - r0;
                    }
                    Ok(())
                },
            );
        }
        Split::Tiles { rows, cols } => (rows, cols),
    };
    let (row_tiles, col_tiles) = (p.m.div_ceil(tm), p.n.div_ceil(tn));
    let per_batch = row_tiles * col_tiles;
    let units = p.batches * per_batch;
    let span = |u: usize| {
        let (batch, rest) = (u / per_batch, u % per_batch);
        let (ti, tj) = (rest / col_tiles, rest % col_tiles);
        (
            batch,
            ti * tm..((ti + 1) * tm).min(p.m),
            tj * tn..((tj + 1) * tn).min(p.n),
        )
    };
    // Each unit computes its tile into a buffer of its task and copies the rows into place.
    // The units are claimed through a split of zero-sized values: it hands each unit to one
    // task only (and fails on a schedule that runs one twice), which is what makes the tiles'
    // writes disjoint.
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
    let tile = tm * tn;
    parallel_chunks(op, schedule, &mut claims, 1, work, &|range, _claimed| {
        // The tile is written whole before its rows are copied out, and the packs before
        // they are read: the thread's reused scratch serves.
        let mut buf = ReusedScratch::take(op, tile + pack_len(tm, tn, p.k))?;
        let (slot, pack) = buf.split_at_mut(tile);
        for u in range {
            let (batch, rows, cols) = span(u);
            let width = cols.len();
            kernel(
                &(p.tile)(batch, rows.clone(), cols.clone()),
                slot,
                width,
                pack,
            );
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

/// How [`run_tiles`] splits a product over its tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// Over output rows, written in place.
    Rows,
    /// Over tiles of at most `rows × cols` outputs, through a buffer per task.
    Tiles { rows: usize, cols: usize },
}

/// The split that copies least for `tasks` tasks. A task packs every value of B its rows
/// need, so splitting one batch's rows over `t` tasks packs B `t` times; splitting its columns
/// instead packs A `t` times and copies the outputs once through a buffer. Rows win unless
/// B is the larger cost (few rows, many columns). The bits do not depend on the split, so it
/// may follow the schedule.
fn split(p: &Tiled<'_>, tasks: usize) -> Split {
    if tasks <= 1 {
        return Split::Rows;
    }
    let extra = (tasks - 1) as u64;
    let (m, n, k, batches) = (p.m as u64, p.n as u64, p.k as u64, p.batches as u64);
    let by_rows = if p.batches.is_multiple_of(tasks) {
        0
    } else {
        extra.saturating_mul(k).saturating_mul(n)
    };
    let by_cols = batches.saturating_mul(
        extra
            .saturating_mul(m)
            .saturating_mul(k)
            .saturating_add(m.saturating_mul(n).saturating_mul(2)),
    );
    if by_rows <= by_cols {
        return Split::Rows;
    }
    // Column tiles a multiple of the tasks (so every task gets the same share), at most
    // `TILE_COLS` wide; row tiles at most `TILE_ROWS` high.
    let col_tiles =
        p.n.div_ceil(tasks.saturating_mul(TILE_COLS))
            .saturating_mul(tasks);
    Split::Tiles {
        rows: tile_len(p.m, TILE_ROWS, MAX_MR),
        cols: tile_len(p.n, p.n.div_ceil(col_tiles), MAX_NR),
    }
}

/// The tile length for `len` values at most `max` long, made even across tiles and rounded up
/// to a multiple of `align` (the micro-kernel's size).
fn tile_len(len: usize, max: usize, align: usize) -> usize {
    let tiles = len.div_ceil(max).max(1);
    len.div_ceil(tiles).div_ceil(align) * align
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::loops::gemm::{GemmTile, Source, Strided};

    fn split_of(batches: usize, m: usize, k: usize, n: usize, tasks: usize) -> Split {
        let a = Strided {
            data: &[],
            row_stride: 0,
            col_stride: 0,
        };
        let tile = |_, rows, cols| GemmTile {
            a,
            b: Source::Strided(a),
            k,
            rows,
            cols,
            init: None,
        };
        split(
            &Tiled {
                batches,
                m,
                n,
                k,
                tile: &tile,
            },
            tasks,
        )
    }

    #[test]
    fn split_keeps_rows_for_one_task_or_many_rows() {
        assert_eq!(split_of(1, 128, 576, 1536, 1), Split::Rows);
        assert_eq!(split_of(1, 512, 512, 512, 2), Split::Rows);
        assert_eq!(split_of(1, 1024, 512, 512, 2), Split::Rows);
    }

    #[test]
    fn split_keeps_rows_when_every_task_gets_whole_batches() {
        assert_eq!(split_of(2, 64, 576, 784, 2), Split::Rows);
    }

    #[test]
    fn split_gives_each_task_one_column_of_tiles_when_rows_are_few() {
        assert_eq!(
            split_of(1, 128, 576, 1536, 2),
            Split::Tiles {
                rows: 132,
                cols: 768
            }
        );
        assert_eq!(
            split_of(1, 128, 1536, 576, 2),
            Split::Tiles {
                rows: 132,
                cols: 288
            }
        );
        assert_eq!(
            split_of(1, 32, 144, 3136, 2),
            Split::Tiles {
                rows: 36,
                cols: 800
            }
        );
    }
}
