//! The fixed-order loops the kernels are made of — dot products, sums, weighted sums of rows,
//! the softmax's scale/mask/max pass — written once on [`Simd`] so every backend runs the same
//! order (see [`simd`](super::simd) for the lane contract).

use super::simd::{Simd, LANES};

/// `R × C` dot products of the rows `q[r·len..][..len]` with the rows `k[c·len..][..len]`,
/// in the lane order above; each result is the same whatever `R` and `C` (they only share
/// loads).
#[inline(always)]
pub(crate) fn dots<S: Simd, const R: usize, const C: usize>(
    s: S,
    q: &[f32],
    k: &[f32],
    len: usize,
) -> [[f32; C]; R] {
    let full = len - len % LANES;
    // Every row slice has length `full`, so the loop condition proves each chunk in bounds.
    let qf: [&[f32]; R] = core::array::from_fn(|r| &q[r * len..r * len + full]);
    let kf: [&[f32]; C] = core::array::from_fn(|t| &k[t * len..t * len + full]);
    let mut acc = [[s.zero(); C]; R];
    let mut c = 0;
    while c + LANES <= full {
        let kv: [S::V; C] = core::array::from_fn(|t| s.load(&kf[t][c..c + LANES]));
        for r in 0..R {
            let qv = s.load(&qf[r][c..c + LANES]);
            for t in 0..C {
                acc[r][t] = s.mul_add(acc[r][t], qv, kv[t]);
            }
        }
        c += LANES;
    }
    if full < len {
        let kv: [S::V; C] = core::array::from_fn(|t| s.load_tail(&k[t * len..(t + 1) * len]));
        for r in 0..R {
            let qv = s.load_tail(&q[r * len..(r + 1) * len]);
            for t in 0..C {
                acc[r][t] = s.mul_add(acc[r][t], qv, kv[t]);
            }
        }
    }
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for t in 0..C {
            out[r][t] = s.fold(acc[r][t]);
        }
    }
    out
}

/// [`dots`] for four rows and two keys, with the eight accumulators as named locals: the
/// generic array form ends up on the stack inside the large attention function.
#[inline(always)]
pub(crate) fn dots_4x2<S: Simd>(s: S, q: &[f32], k: &[f32], len: usize) -> [[f32; 2]; 4] {
    let full = len - len % LANES;
    let (q0, q1, q2, q3) = (
        &q[..full],
        &q[len..len + full],
        &q[2 * len..2 * len + full],
        &q[3 * len..3 * len + full],
    );
    let (k0, k1) = (&k[..full], &k[len..len + full]);
    let z = s.zero();
    let (mut a00, mut a01, mut a10, mut a11) = (z, z, z, z);
    let (mut a20, mut a21, mut a30, mut a31) = (z, z, z, z);
    let mut c = 0;
    while c + LANES <= full {
        let (x0, x1) = (s.load(&k0[c..c + LANES]), s.load(&k1[c..c + LANES]));
        let y = s.load(&q0[c..c + LANES]);
        a00 = s.mul_add(a00, y, x0);
        a01 = s.mul_add(a01, y, x1);
        let y = s.load(&q1[c..c + LANES]);
        a10 = s.mul_add(a10, y, x0);
        a11 = s.mul_add(a11, y, x1);
        let y = s.load(&q2[c..c + LANES]);
        a20 = s.mul_add(a20, y, x0);
        a21 = s.mul_add(a21, y, x1);
        let y = s.load(&q3[c..c + LANES]);
        a30 = s.mul_add(a30, y, x0);
        a31 = s.mul_add(a31, y, x1);
        c += LANES;
    }
    if full < len {
        let (x0, x1) = (s.load_tail(&k[..len]), s.load_tail(&k[len..2 * len]));
        let y = s.load_tail(&q[..len]);
        a00 = s.mul_add(a00, y, x0);
        a01 = s.mul_add(a01, y, x1);
        let y = s.load_tail(&q[len..2 * len]);
        a10 = s.mul_add(a10, y, x0);
        a11 = s.mul_add(a11, y, x1);
        let y = s.load_tail(&q[2 * len..3 * len]);
        a20 = s.mul_add(a20, y, x0);
        a21 = s.mul_add(a21, y, x1);
        let y = s.load_tail(&q[3 * len..4 * len]);
        a30 = s.mul_add(a30, y, x0);
        a31 = s.mul_add(a31, y, x1);
    }
    [
        [s.fold(a00), s.fold(a01)],
        [s.fold(a10), s.fold(a11)],
        [s.fold(a20), s.fold(a21)],
        [s.fold(a30), s.fold(a31)],
    ]
}

/// `Σ xs[i]` in the lane order above.
#[inline(always)]
pub(crate) fn sum<S: Simd>(s: S, xs: &[f32]) -> f32 {
    let full = xs.len() - xs.len() % LANES;
    let mut acc = s.zero();
    let mut c = 0;
    while c < full {
        acc = s.add(acc, s.load(&xs[c..]));
        c += LANES;
    }
    if full < xs.len() {
        acc = s.add(acc, s.load_tail(xs));
    }
    s.fold(acc)
}

/// `out[r·len + d] += Σ_j w[r·w_stride + j]·rows[j·len + d]` for `R` output rows at once, over
/// the same keys `j < n`: each element gets `((out + w0·r0) + w1·r1) + …` in increasing `j`. Two
/// vectors of each row stay in registers while `j` runs, so every load of `rows` serves all
/// `R` rows.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R` unroll into registers
pub(crate) fn accumulate_block<S: Simd, const R: usize>(
    s: S,
    out: &mut [f32],
    w: &[f32],
    w_stride: usize,
    n: usize,
    rows: &[f32],
    len: usize,
) {
    let wr: [&[f32]; R] = core::array::from_fn(|r| &w[r * w_stride..r * w_stride + n]);
    let rows = &rows[..n * len];
    let full = len - len % LANES;
    let mut c = 0;
    // As many chunks per pass over `rows` as the registers hold: a lone row keeps up to 8.
    if R == 1 {
        while c + 8 * LANES <= full {
            accumulate_pass::<S, R, 8>(s, out, &wr, rows, len, c);
            c += 8 * LANES;
        }
        while c + 4 * LANES <= full {
            accumulate_pass::<S, R, 4>(s, out, &wr, rows, len, c);
            c += 4 * LANES;
        }
    }
    while c + 2 * LANES <= full {
        accumulate_pass::<S, R, 2>(s, out, &wr, rows, len, c);
        c += 2 * LANES;
    }
    while c < full {
        accumulate_pass::<S, R, 1>(s, out, &wr, rows, len, c);
        c += LANES;
    }
    if full < len {
        for r in 0..R {
            let o = &mut out[r * len + full..(r + 1) * len];
            for j in 0..n {
                let wj = wr[r][j];
                for (x, &v) in o.iter_mut().zip(&rows[j * len + full..(j + 1) * len]) {
                    *x += wj * v;
                }
            }
        }
    }
}

/// One pass of [`accumulate_block`] over the `W` chunks starting at element `c`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..W` unroll into registers
fn accumulate_pass<S: Simd, const R: usize, const W: usize>(
    s: S,
    out: &mut [f32],
    wr: &[&[f32]; R],
    rows: &[f32],
    len: usize,
    c: usize,
) {
    let n = wr[0].len();
    let mut acc = [[s.zero(); W]; R];
    for r in 0..R {
        for h in 0..W {
            acc[r][h] = s.load(&out[r * len + c + h * LANES..r * len + c + (h + 1) * LANES]);
        }
    }
    for j in 0..n {
        let v = &rows[j * len + c..j * len + c + W * LANES];
        let vv: [S::V; W] = core::array::from_fn(|h| s.load(&v[h * LANES..(h + 1) * LANES]));
        for r in 0..R {
            let p = s.splat(wr[r][j]);
            for h in 0..W {
                acc[r][h] = s.mul_add(acc[r][h], p, vv[h]);
            }
        }
    }
    for r in 0..R {
        for h in 0..W {
            let o = &mut out[r * len + c + h * LANES..r * len + c + (h + 1) * LANES];
            s.store(acc[r][h], o);
        }
    }
}

/// Scales `row` in place by `scale`, adds `mask[..row.len()]` if given, and returns the largest
/// result (`-inf` for an empty row): lane maxima over whole chunks with [`Simd::max`], then the
/// eight lanes and the ragged tail in order, each step `if x > m { x } else { m }`.
#[inline(always)]
pub(crate) fn scale_mask_max<S: Simd>(
    s: S,
    row: &mut [f32],
    scale: f32,
    mask: Option<&[f32]>,
) -> f32 {
    let len = row.len();
    let full = len - len % LANES;
    let k = s.splat(scale);
    let mut m = s.splat(f32::NEG_INFINITY);
    let mut c = 0;
    while c + LANES <= full {
        let chunk = &mut row[c..c + LANES];
        let mut v = s.mul(s.load(chunk), k);
        if let Some(mask) = mask {
            v = s.add(v, s.load(&mask[c..c + LANES]));
        }
        s.store(v, chunk);
        m = s.max(v, m);
        c += LANES;
    }
    let mut lanes = [0.0f32; LANES];
    s.store(m, &mut lanes);
    let mut top = f32::NEG_INFINITY;
    for x in lanes {
        top = if x > top { x } else { top };
    }
    for (d, x) in row[full..].iter_mut().enumerate() {
        *x *= scale;
        if let Some(mask) = mask {
            *x += mask[full + d];
        }
        top = if *x > top { *x } else { top };
    }
    top
}
