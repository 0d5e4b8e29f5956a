//! The element-wise pieces of a decoder block: the SiLU gate and the residual add.

use super::exp::exp;

/// `out[j] = silu(g[j]) · u[j]` with `silu(g) = g / (1 + e^-g)` (the deterministic [`exp`]):
/// `-0.0`/`0` for very negative `g`, `g` for very large `g`, never NaN from finite inputs.
#[inline(always)]
pub(crate) fn silu_mul_row(g: &[f32], u: &[f32], out: &mut [f32]) {
    for ((o, &gj), &uj) in out.iter_mut().zip(g).zip(u) {
        *o = (gj / (1.0 + exp(-gj))) * uj;
    }
}
