//! Rows of a matrix product, in a fixed order.

use super::lanes::accumulate_rows;

/// `out[r] = a[r] · b` for each row `r` of `a` (`k` values each), `b` being `[k, n]`:
/// `out[r][c] = ((0 + a[r][0]·b[0][c]) + a[r][1]·b[1][c]) + …`.
#[inline(always)]
pub(crate) fn matmul_rows(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut [f32]) {
    out.fill(0.0);
    if k == 0 || n == 0 {
        return;
    }
    for (a_row, out_row) in a.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
        accumulate_rows(out_row, a_row, b, n);
    }
}
