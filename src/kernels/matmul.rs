//! Matrix multiplication scheduled over output rows.

use super::config::KernelConfig;
use super::parallel::{parallel_chunks, Work};
use super::KernelError;
use crate::schedule::Schedule;
use crate::shape;
use crate::tensor::Tensor;

/// Calls with fewer multiply-adds than this (`rows·k·n`) run inline on the caller
/// (2^18: conservative, not tuned separately; SDPA measures its break-even near 2^15).
pub const MATMUL_PARALLEL_MIN_WORK: u64 = 1 << 18;

/// `a · b` for `a` of shape `[.., m, k]` (rank ≥ 2; leading dimensions are batch) and `b` of
/// shape `[k, n]`: an output of shape `[.., m, n]`.
///
/// The units of `schedule` are the output rows (all batches' rows together); calls below
/// [`MATMUL_PARALLEL_MIN_WORK`] stay inline. Every output element is
/// `((0 + a[r][0]·b[0][c]) + a[r][1]·b[1][c]) + …` in increasing inner index, whatever the
/// schedule, so results are bit-identical under every schedule.
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
/// for one allocation; [`KernelError::Tensor`] when the output cannot be allocated.
pub fn matmul(a: &Tensor, b: &Tensor, schedule: &dyn Schedule) -> Result<Tensor, KernelError> {
    matmul_with(&KernelConfig::selected(), a, b, schedule)
}

/// [`matmul()`] with a given [`KernelConfig`] (variant, work threshold).
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
    let (k, n) = (dims.inner, dims.cols);
    let mut out = Tensor::zeros(dims.output_shape)?;
    let work = Work {
        total: (dims.rows as u64)
            .saturating_mul(k as u64)
            .saturating_mul(n as u64),
        fork_from: config.threshold(MATMUL_PARALLEL_MIN_WORK),
    };
    let rows_kernel = config.kernels().matmul_rows;
    let (ad, bd) = (a.data(), b.data());
    parallel_chunks(
        "matmul",
        schedule,
        out.data_mut(),
        n,
        work,
        &|units, chunk| {
            rows_kernel(&ad[units.start * k..units.end * k], bd, k, n, chunk);
            Ok(())
        },
    )?;
    Ok(out)
}
