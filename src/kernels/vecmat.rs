//! A matrix product scheduled over output columns: the decode step's `x · W` for one token.

use super::config::KernelConfig;
use super::loops::lanes::accumulate_rows;
use super::parallel::{parallel_chunks, Work};
use super::KernelError;
use crate::schedule::Schedule;
use crate::shape;
use crate::tensor::Tensor;

/// Calls with fewer multiply-adds than this (`rows·k·n`) run inline on the caller. 2^16: a
/// one-row product reads a fresh weight value per multiply-add, so it is bound by memory and
/// 2^16 of them (256 KiB of weights, tens of µs on one core) cost several times a region —
/// SDPA, whose multiply-adds are cheaper, measured its break-even at 2^15. This keeps a
/// SmolLM2-sized decoder's K/V projections (576 × 192) on both cores.
pub const VECMAT_PARALLEL_MIN_WORK: u64 = 1 << 16;

/// Output columns accumulated together: 2048 accumulators (8 KiB) stay in L1 while the rows
/// of `w` stream past in 8 KiB runs (measured in the decode example: 512 was ~5 % slower on
/// one core, the wider runs stream better).
const TILE: usize = 2048;

/// `x · w` for `x` `[.., k]` and `w` `[k, n]` — the same product and the same bits as
/// [`matmul()`](crate::matmul()), but split across tasks by output *element* rather than by
/// output row. A decode step multiplies one row by each weight matrix: `matmul` has one unit to
/// schedule there, `vecmat` has `n`, so every core streams its share of `w`, which is what
/// bounds the step (the weights are read once per token).
///
/// Every output element is `((0 + x[r][0]·w[0][c]) + x[r][1]·w[1][c]) + …` in increasing inner
/// index, whatever the schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{matmul, vecmat, Sequential, Tensor};
/// let x = Tensor::new(vec![1, 2], vec![1.0, 2.0]).unwrap();
/// let w = Tensor::new(vec![2, 3], vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0]).unwrap();
/// let y = vecmat(&x, &w, &Sequential).unwrap();
/// assert_eq!(y.data(), [21.0, 42.0, 63.0]);
/// assert_eq!(y, matmul(&x, &w, &Sequential).unwrap());
/// # }
/// ```
///
/// # Errors
///
/// As [`matmul()`](crate::matmul()): [`KernelError::Shape`] with the [`ShapeError`](crate::ShapeError) of
/// [`shape::matmul`] (op `matmul`); [`KernelError::Tensor`] when the output cannot be
/// allocated.
pub fn vecmat(x: &Tensor, w: &Tensor, schedule: &dyn Schedule) -> Result<Tensor, KernelError> {
    vecmat_with(&KernelConfig::selected(), x, w, schedule)
}

/// [`vecmat`] with a given [`KernelConfig`] (its work threshold).
///
/// # Errors
///
/// As [`vecmat`].
pub fn vecmat_with(
    config: &KernelConfig,
    x: &Tensor,
    w: &Tensor,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let dims = shape::matmul(x.shape(), w.shape())?;
    let (k, n) = (dims.inner, dims.cols);
    let mut out = Tensor::zeros(dims.output_shape)?;
    if n == 0 {
        return Ok(out);
    }
    let work = Work {
        total: (dims.rows as u64)
            .saturating_mul(k as u64)
            .saturating_mul(n as u64),
        fork_from: config.threshold(VECMAT_PARALLEL_MIN_WORK),
    };
    let (xd, wd) = (x.data(), w.data());
    parallel_chunks(
        "vecmat",
        schedule,
        out.data_mut(),
        1,
        work,
        &|units, chunk| {
            // `chunk` is the flat outputs `units`; walk it one output row segment at a time.
            let mut at = units.start;
            let mut rest = chunk;
            while !rest.is_empty() {
                let (r, c) = (at / n, at % n);
                let len = rest.len().min(n - c);
                let (segment, tail) = rest.split_at_mut(len);
                let x_row = &xd[r * k..(r + 1) * k];
                for (t, tile) in segment.chunks_mut(TILE).enumerate() {
                    let c0 = c + t * TILE;
                    // Column `c0 + d` of row `i` of `w` is `wd[c0 + i·n + d]`.
                    accumulate_rows(tile, x_row, &wd[c0..], n);
                }
                at += len;
                rest = tail;
            }
            Ok(())
        },
    )?;
    Ok(out)
}
