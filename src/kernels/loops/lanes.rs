//! The fixed-order loops the kernels are made of — dot products, sums, weighted sums of rows,
//! the softmax's scale/mask/max pass — written once on [`Simd`] so every backend runs the same
//! order (see [`simd`](super::simd) for the lane contract).

use super::simd::{MulAdd, Simd, LANES};

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

/// `Σ xs[i]` in the lane order above, continued from lanes `acc`: with `acc` zero the sum of
/// `xs`; with `acc` the lanes of `done` (a whole number of chunks), the sum of `done ++ xs`.
#[inline(always)]
pub(crate) fn sum_from<S: Simd>(s: S, acc: S::V, xs: &[f32]) -> f32 {
    let full = xs.len() - xs.len() % LANES;
    let mut acc = acc;
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

/// `out[r·out_stride + c] = Σ_d qt[d·R + r] · kt[d·kt_stride + col + c]` for the `R` rows of a
/// transposed block of queries and the `8·C` keys from column `col` of a transposed key tile:
/// each result is one chain over `d` in increasing order, `((q0·k0 + q1·k1) + q2·k2) + …`
/// (the first step adds to `+0.0`), in `mode`. Lanes hold different keys, never parts of one
/// sum, so neither `R`, `C` nor the vector width can change a result.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..C` unroll into registers
#[allow(clippy::too_many_arguments)]
pub(crate) fn scores_block<S: Simd, M: MulAdd, const R: usize, const C: usize>(
    s: S,
    mode: M,
    qt: &[f32],
    kt: &[f32],
    kt_stride: usize,
    col: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    let mut acc = [[s.zero(); C]; R];
    for (qd, kd) in qt.chunks_exact(R).zip(kt.chunks_exact(kt_stride)) {
        let kd = &kd[col..col + C * LANES];
        let kv: [S::V; C] = core::array::from_fn(|c| s.load(&kd[c * LANES..(c + 1) * LANES]));
        for r in 0..R {
            let qv = s.splat(qd[r]);
            for c in 0..C {
                acc[r][c] = mode.step(s, acc[r][c], qv, kv[c]);
            }
        }
    }
    for r in 0..R {
        for c in 0..C {
            let at = r * out_stride + col + c * LANES;
            s.store(acc[r][c], &mut out[at..at + LANES]);
        }
    }
}

/// `out[r·len + d] += Σ_j w[r·w_stride + j] · rows[j·len + d]` over keys `j < n`, for `R`
/// output rows at once, in `mode`: each element gets `((out + w0·r0) + w1·r1) + …` in
/// increasing `j`, whatever `R` and however the elements are split into vectors.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn weigh_rows<S: Simd, M: MulAdd, const R: usize>(
    s: S,
    mode: M,
    out: &mut [f32],
    w: &[f32],
    w_stride: usize,
    n: usize,
    rows: &[f32],
    len: usize,
) {
    if n == 0 {
        return;
    }
    let rows = &rows[..n * len];
    let full = len - len % LANES;
    let mut c = 0;
    // A block keeps two vectors of each of its rows (eight accumulators and the loads fill the
    // sixteen AVX2 registers); a lone row keeps eight, so that one pass reads each row of
    // `rows` whole (a decode step streams V from memory once).
    if R == 1 {
        while c + 8 * LANES <= full {
            weigh_pass::<S, M, R, 8>(s, mode, out, w, w_stride, rows, len, c);
            c += 8 * LANES;
        }
        while c + 4 * LANES <= full {
            weigh_pass::<S, M, R, 4>(s, mode, out, w, w_stride, rows, len, c);
            c += 4 * LANES;
        }
    }
    while c + 2 * LANES <= full {
        weigh_pass::<S, M, R, 2>(s, mode, out, w, w_stride, rows, len, c);
        c += 2 * LANES;
    }
    while c < full {
        weigh_pass::<S, M, R, 1>(s, mode, out, w, w_stride, rows, len, c);
        c += LANES;
    }
    if full < len {
        for r in 0..R {
            let o = &mut out[r * len + full..(r + 1) * len];
            let wr = &w[r * w_stride..r * w_stride + n];
            for (&wj, v) in wr.iter().zip(rows.chunks_exact(len)) {
                for (x, &y) in o.iter_mut().zip(&v[full..]) {
                    *x = mode.step1(s, *x, wj, y);
                }
            }
        }
    }
}

/// One pass of [`weigh_rows`] over the `W` vectors from element `c`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..W` unroll into registers
#[allow(clippy::too_many_arguments)]
fn weigh_pass<S: Simd, M: MulAdd, const R: usize, const W: usize>(
    s: S,
    mode: M,
    out: &mut [f32],
    w: &[f32],
    w_stride: usize,
    rows: &[f32],
    len: usize,
    c: usize,
) {
    let n = rows.len() / len;
    let wr: [&[f32]; R] = core::array::from_fn(|r| &w[r * w_stride..r * w_stride + n]);
    let mut acc = [[s.zero(); W]; R];
    for r in 0..R {
        for h in 0..W {
            let at = r * len + c + h * LANES;
            acc[r][h] = s.load(&out[at..at + LANES]);
        }
    }
    for (j, v) in rows.chunks_exact(len).enumerate() {
        let v = &v[c..c + W * LANES];
        let vv: [S::V; W] = core::array::from_fn(|h| s.load(&v[h * LANES..(h + 1) * LANES]));
        for r in 0..R {
            let p = s.splat(wr[r][j]);
            for h in 0..W {
                acc[r][h] = mode.step(s, acc[r][h], p, vv[h]);
            }
        }
    }
    for r in 0..R {
        for h in 0..W {
            let at = r * len + c + h * LANES;
            s.store(acc[r][h], &mut out[at..at + LANES]);
        }
    }
}
