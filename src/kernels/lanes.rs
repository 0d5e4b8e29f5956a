//! The fixed-order lane arithmetic every inner loop is made of.
//!
//! Each helper is written on plain `[f32; LANES]` arrays: LLVM maps them onto whatever vector
//! registers the target has (two SSE registers, one AVX register, scalar on thumbv7em), and
//! because every operation is an exactly rounded IEEE `+` or `*` in a fixed order — never a
//! fused multiply-add — the bits are the same for every mapping. The order is part of each
//! helper's contract: a dot product accumulates element `d` into lane `d % LANES` in
//! increasing `d`, then folds the lanes with [`fold`].

// Index loops over `0..LANES` are the shape LLVM's vectoriser turns into one vector op.
#![allow(clippy::needless_range_loop)]

/// The number of independent accumulators of a reduction.
pub(crate) const LANES: usize = 8;

/// Folds lane accumulators in a fixed tree: `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.
#[inline(always)]
pub(crate) fn fold(acc: [f32; LANES]) -> f32 {
    let h = [
        acc[0] + acc[4],
        acc[1] + acc[5],
        acc[2] + acc[6],
        acc[3] + acc[7],
    ];
    let q = [h[0] + h[2], h[1] + h[3]];
    q[0] + q[1]
}

/// `Σ a[d]·b[d]` over `a.len()` elements (`b` at least as long), in the lane order above.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let len = a.len();
    let b = &b[..len];
    let full = len - len % LANES;
    let mut acc = [0.0f32; LANES];
    let mut c = 0;
    while c < full {
        let (ac, bc) = (&a[c..c + LANES], &b[c..c + LANES]);
        for l in 0..LANES {
            acc[l] += ac[l] * bc[l];
        }
        c += LANES;
    }
    for l in 0..len - full {
        acc[l] += a[full + l] * b[full + l];
    }
    fold(acc)
}

/// Four dot products of `a` with the consecutive rows `b[t*stride ..][..a.len()]`, `t < 4`,
/// each bit-identical to [`dot`]; `a` is loaded once for the four.
#[inline(always)]
pub(crate) fn dot4(a: &[f32], b: &[f32], stride: usize) -> [f32; 4] {
    let len = a.len();
    let b0 = &b[..len];
    let b1 = &b[stride..stride + len];
    let b2 = &b[2 * stride..2 * stride + len];
    let b3 = &b[3 * stride..3 * stride + len];
    let full = len - len % LANES;
    let mut acc = [[0.0f32; LANES]; 4];
    let mut c = 0;
    while c < full {
        let ac = &a[c..c + LANES];
        let (c0, c1, c2, c3) = (
            &b0[c..c + LANES],
            &b1[c..c + LANES],
            &b2[c..c + LANES],
            &b3[c..c + LANES],
        );
        for l in 0..LANES {
            acc[0][l] += ac[l] * c0[l];
            acc[1][l] += ac[l] * c1[l];
            acc[2][l] += ac[l] * c2[l];
            acc[3][l] += ac[l] * c3[l];
        }
        c += LANES;
    }
    for l in 0..len - full {
        let x = a[full + l];
        acc[0][l] += x * b0[full + l];
        acc[1][l] += x * b1[full + l];
        acc[2][l] += x * b2[full + l];
        acc[3][l] += x * b3[full + l];
    }
    [fold(acc[0]), fold(acc[1]), fold(acc[2]), fold(acc[3])]
}

/// `out[d] += Σ_j w[j]·rows[j*stride + d]` for `j` in increasing order, element by element:
/// every `out[d]` is `((out[d] + w0·r0[d]) + w1·r1[d]) + …`, whatever the blocking below.
#[inline(always)]
pub(crate) fn accumulate_rows(out: &mut [f32], w: &[f32], rows: &[f32], stride: usize) {
    let len = out.len();
    let mut j = 0;
    while j + 4 <= w.len() {
        let (w0, w1, w2, w3) = (w[j], w[j + 1], w[j + 2], w[j + 3]);
        let base = j * stride;
        let r0 = &rows[base..base + len];
        let r1 = &rows[base + stride..base + stride + len];
        let r2 = &rows[base + 2 * stride..base + 2 * stride + len];
        let r3 = &rows[base + 3 * stride..base + 3 * stride + len];
        for d in 0..len {
            out[d] = (((out[d] + w0 * r0[d]) + w1 * r1[d]) + w2 * r2[d]) + w3 * r3[d];
        }
        j += 4;
    }
    while j < w.len() {
        let wj = w[j];
        let r = &rows[j * stride..j * stride + len];
        for d in 0..len {
            out[d] += wj * r[d];
        }
        j += 1;
    }
}

/// The largest element (`-inf` for an empty slice), over fixed lanes.
#[inline(always)]
pub(crate) fn max(xs: &[f32]) -> f32 {
    let full = xs.len() - xs.len() % LANES;
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut c = 0;
    while c < full {
        let xc = &xs[c..c + LANES];
        for l in 0..LANES {
            acc[l] = if xc[l] > acc[l] { xc[l] } else { acc[l] };
        }
        c += LANES;
    }
    for l in 0..xs.len() - full {
        let x = xs[full + l];
        acc[l] = if x > acc[l] { x } else { acc[l] };
    }
    let mut m = acc[0];
    for &x in &acc[1..] {
        m = if x > m { x } else { m };
    }
    m
}

/// `Σ xs[i]` in the lane order of [`dot`].
#[inline(always)]
pub(crate) fn sum(xs: &[f32]) -> f32 {
    let full = xs.len() - xs.len() % LANES;
    let mut acc = [0.0f32; LANES];
    let mut c = 0;
    while c < full {
        let xc = &xs[c..c + LANES];
        for l in 0..LANES {
            acc[l] += xc[l];
        }
        c += LANES;
    }
    for l in 0..xs.len() - full {
        acc[l] += xs[full + l];
    }
    fold(acc)
}
