//! One row of RMS normalisation, in a fixed order.

use super::lanes::dots;
use super::simd::Scalar;

/// `Σ xs[i]²` in the lane order of [`lanes`](super::lanes), on plain Rust lanes: the same bits
/// on every target and vector width (each lane's `+` and `*` are separate IEEE operations).
#[inline(always)]
pub(crate) fn sum_of_squares(xs: &[f32]) -> f32 {
    let [[ss]] = dots::<Scalar, 1, 1>(Scalar, xs, xs, xs.len());
    ss
}

/// `out[j] = (x[j] · inv) · w[j]` with `inv = 1 / sqrt(Σ x² / d + eps)`.
#[inline(always)]
pub(crate) fn rms_norm_row(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let mean = sum_of_squares(x) / x.len() as f32;
    let inv = 1.0 / libm::sqrtf(mean + eps);
    for ((o, &xj), &wj) in out.iter_mut().zip(x).zip(w) {
        *o = (xj * inv) * wj;
    }
}
