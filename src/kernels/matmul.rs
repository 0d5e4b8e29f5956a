//! Matrix multiplication scheduled over output rows.

use alloc::vec;

use super::chunks::parallel_chunks;
use super::config::KernelConfig;
use super::KernelError;
use crate::schedule::Schedule;
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
/// use skainet_schedule::kernels::matmul;
/// use skainet_schedule::tensor::Tensor;
/// use skainet_schedule::Sequential;
/// let a = Tensor::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let b = Tensor::new(vec![2, 1], vec![10.0, 1.0]).unwrap();
/// assert_eq!(matmul(&a, &b, &Sequential).unwrap().data(), [12.0, 34.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Rank`] when `a` has rank below 2 or `b` is not rank 2;
/// [`KernelError::MatmulInnerMismatch`] when `a`'s last dimension differs from `b`'s first;
/// [`KernelError::MatmulTooLarge`] when the output has more elements than `usize` holds.
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
    let a_shape = a.shape();
    if a_shape.len() < 2 {
        return Err(KernelError::Rank {
            op: "matmul",
            operand: "a",
            expected: ">= 2",
            shape: a_shape.to_vec(),
        });
    }
    let [kb, n] = *b.shape() else {
        return Err(KernelError::Rank {
            op: "matmul",
            operand: "b",
            expected: "2",
            shape: b.shape().to_vec(),
        });
    };
    let k = a_shape[a_shape.len() - 1];
    if k != kb {
        return Err(KernelError::MatmulInnerMismatch {
            a: a_shape.to_vec(),
            b: b.shape().to_vec(),
        });
    }
    let too_large = || KernelError::MatmulTooLarge {
        a: a_shape.to_vec(),
        b: b.shape().to_vec(),
    };
    let rows = a_shape[..a_shape.len() - 1]
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(too_large)?;
    let mut out_shape = a_shape.to_vec();
    *out_shape.last_mut().expect("rank >= 2") = n;
    let len = rows.checked_mul(n).ok_or_else(too_large)?;
    let mut out = vec![0.0f32; len];
    let rows_kernel = config.kernels().matmul_rows;
    let (ad, bd) = (a.data(), b.data());
    parallel_chunks(
        "matmul",
        schedule,
        &mut out,
        n,
        (rows * k) as u64 * n as u64,
        config.threshold(MATMUL_PARALLEL_MIN_WORK),
        &|units, chunk| {
            rows_kernel(&ad[units.start * k..units.end * k], bd, k, n, chunk);
        },
    )?;
    Ok(Tensor::new(out_shape, out).expect("the output holds rows*n values by construction"))
}
