//! The element-wise pieces of a decoder block: the SiLU gate and the residual add.

use super::exp::exp;

/// `out[j] = silu(g[j]) · u[j]` with `silu(g) = g / (1 + e^-g)` (the deterministic [`exp`]):
/// `-0.0`/`0` for very negative `g`, `g` for very large `g`, never NaN from finite inputs.
///
/// Every operation is an exactly rounded IEEE one (Rust never fuses them), so the bits are the
/// same at any vector width: on x86_64 with AVX2 the loop runs compiled for it, else as built.
#[inline]
pub(crate) fn silu_mul_row(g: &[f32], u: &[f32], out: &mut [f32]) {
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, as checked.
        return unsafe { silu_mul_avx2(g, u, out) };
    }
    silu_mul(g, u, out)
}

/// [`silu_mul_row`] compiled with AVX2.
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx2")]
unsafe fn silu_mul_avx2(g: &[f32], u: &[f32], out: &mut [f32]) {
    silu_mul(g, u, out)
}

/// The loop of [`silu_mul_row`].
#[inline(always)]
fn silu_mul(g: &[f32], u: &[f32], out: &mut [f32]) {
    for ((o, &gj), &uj) in out.iter_mut().zip(g).zip(u) {
        *o = (gj / (1.0 + exp(-gj))) * uj;
    }
}
