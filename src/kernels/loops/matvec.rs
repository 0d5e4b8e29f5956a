//! Products with few rows — a decode step's matvec — as their own memory-bound path: the
//! weight is read once, a column range at a time, and the rows share every load of it.
//!
//! The order of an element's reduction depends on where the weight lies:
//! * `[k, n]` (`x · W`): `((0 + a₀·b₀) + a₁·b₁) + …` in increasing inner index, the order of
//!   the packed product in [`gemm`](super::gemm), vectorised over output columns;
//! * `[n, k]` (`x · Wᵀ`, how checkpoints store a linear layer): the lane order of
//!   [`simd`](super::simd) — eight accumulators, element `p` to lane `p % 8`, a zero-padded
//!   ragged chunk, the fixed fold — because each output is a dot product of two contiguous rows.

use core::ops::Range;

use super::simd::{MulAdd, Simd, LANES};

/// Where the weight `b` of a product lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `[k, n]`: the product is `a · b`.
    InOut,
    /// `[n, k]`: the product is `a · bᵀ`.
    OutIn,
}

/// A column range of `a · b` (or `a · bᵀ`) for a few rows: `a` is `[m, k]`.
#[derive(Debug, Clone)]
pub(crate) struct Skinny<'a> {
    pub a: &'a [f32],
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub b: &'a [f32],
    pub layout: Layout,
    pub cols: Range<usize>,
}

/// Writes the columns `p.cols` of the `[m, n]` product to `out` column by column:
/// `out[(j - cols.start)·m + r]`. Rows are taken four at a time.
#[inline(always)]
pub(crate) fn skinny<S: Simd, M: MulAdd>(s: S, mode: M, p: &Skinny<'_>, out: &mut [f32]) {
    let out = &mut out[..p.cols.len() * p.m];
    let mut r0 = 0;
    while r0 < p.m {
        let rows = (p.m - r0).min(4);
        match (p.layout, rows) {
            (Layout::InOut, 1) => in_out::<S, M, 1, 8>(s, mode, p, r0, out),
            (Layout::InOut, 2) => in_out::<S, M, 2, 4>(s, mode, p, r0, out),
            (Layout::InOut, 3) => in_out::<S, M, 3, 2>(s, mode, p, r0, out),
            (Layout::InOut, _) => in_out::<S, M, 4, 2>(s, mode, p, r0, out),
            (Layout::OutIn, 1) => out_in::<S, M, 1, 4>(s, mode, p, r0, out),
            (Layout::OutIn, 2) => out_in::<S, M, 2, 4>(s, mode, p, r0, out),
            (Layout::OutIn, 3) => out_in::<S, M, 3, 2>(s, mode, p, r0, out),
            (Layout::OutIn, _) => out_in::<S, M, 4, 2>(s, mode, p, r0, out),
        }
        r0 += rows;
    }
}

/// Rows `r0..r0 + R` against a `[k, n]` weight: `H` vectors of columns at a time, then single
/// vectors, then single columns (one value at a time, rounded as a lane is).
#[inline(always)]
fn in_out<S: Simd, M: MulAdd, const R: usize, const H: usize>(
    s: S,
    mode: M,
    p: &Skinny<'_>,
    r0: usize,
    out: &mut [f32],
) {
    let a: [&[f32]; R] = core::array::from_fn(|r| &p.a[(r0 + r) * p.k..(r0 + r + 1) * p.k]);
    let mut j = p.cols.start;
    while j + H * LANES <= p.cols.end {
        in_out_block::<S, M, R, H>(s, mode, p, &a, j, r0, out);
        j += H * LANES;
    }
    while j + LANES <= p.cols.end {
        in_out_block::<S, M, R, 1>(s, mode, p, &a, j, r0, out);
        j += LANES;
    }
    for j in j..p.cols.end {
        for (r, a_row) in a.iter().enumerate() {
            let mut acc = 0.0f32;
            for (q, &x) in a_row.iter().enumerate() {
                acc = mode.step1(s, acc, x, p.b[q * p.n + j]);
            }
            out[(j - p.cols.start) * p.m + r0 + r] = acc;
        }
    }
}

/// Columns `j..j + H·8` of rows `r0..r0 + R`, against a `[k, n]` weight.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..H` unroll into registers
fn in_out_block<S: Simd, M: MulAdd, const R: usize, const H: usize>(
    s: S,
    mode: M,
    p: &Skinny<'_>,
    a: &[&[f32]; R],
    j: usize,
    r0: usize,
    out: &mut [f32],
) {
    let mut acc = [[s.zero(); H]; R];
    for q in 0..p.k {
        let row = &p.b[q * p.n + j..q * p.n + j + H * LANES];
        let bv: [S::V; H] = core::array::from_fn(|h| s.load(&row[h * LANES..(h + 1) * LANES]));
        for r in 0..R {
            let av = s.splat(a[r][q]);
            for h in 0..H {
                acc[r][h] = mode.step(s, acc[r][h], av, bv[h]);
            }
        }
    }
    let mut lanes = [0.0f32; LANES];
    for r in 0..R {
        for h in 0..H {
            s.store(acc[r][h], &mut lanes);
            for (l, &v) in lanes.iter().enumerate() {
                out[(j + h * LANES + l - p.cols.start) * p.m + r0 + r] = v;
            }
        }
    }
}

/// Rows `r0..r0 + R` against an `[n, k]` weight: dot products of `C` weight rows at a time.
#[inline(always)]
fn out_in<S: Simd, M: MulAdd, const R: usize, const C: usize>(
    s: S,
    mode: M,
    p: &Skinny<'_>,
    r0: usize,
    out: &mut [f32],
) {
    let a: [&[f32]; R] = core::array::from_fn(|r| &p.a[(r0 + r) * p.k..(r0 + r + 1) * p.k]);
    let mut j = p.cols.start;
    while j + C <= p.cols.end {
        let dots = out_in_dots::<S, M, R, C>(s, mode, &a, &p.b[j * p.k..(j + C) * p.k], p.k);
        store_dots(p, &dots, j, r0, out);
        j += C;
    }
    for j in j..p.cols.end {
        let dots = out_in_dots::<S, M, R, 1>(s, mode, &a, &p.b[j * p.k..(j + 1) * p.k], p.k);
        store_dots(p, &dots, j, r0, out);
    }
}

#[inline(always)]
fn store_dots<const R: usize, const C: usize>(
    p: &Skinny<'_>,
    dots: &[[f32; C]; R],
    j: usize,
    r0: usize,
    out: &mut [f32],
) {
    for (r, row) in dots.iter().enumerate() {
        for (t, &v) in row.iter().enumerate() {
            out[(j + t - p.cols.start) * p.m + r0 + r] = v;
        }
    }
}

/// `R × C` dot products of `a[r]` with the rows `w[t·k..][..k]`, in the lane order.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..C` unroll into registers
fn out_in_dots<S: Simd, M: MulAdd, const R: usize, const C: usize>(
    s: S,
    mode: M,
    a: &[&[f32]; R],
    w: &[f32],
    k: usize,
) -> [[f32; C]; R] {
    let full = k - k % LANES;
    let wf: [&[f32]; C] = core::array::from_fn(|t| &w[t * k..t * k + full]);
    let af: [&[f32]; R] = core::array::from_fn(|r| &a[r][..full]);
    let mut acc = [[s.zero(); C]; R];
    let mut c = 0;
    while c + LANES <= full {
        let wv: [S::V; C] = core::array::from_fn(|t| s.load(&wf[t][c..c + LANES]));
        for r in 0..R {
            let xv = s.load(&af[r][c..c + LANES]);
            for t in 0..C {
                acc[r][t] = mode.step(s, acc[r][t], xv, wv[t]);
            }
        }
        c += LANES;
    }
    if full < k {
        let wv: [S::V; C] = core::array::from_fn(|t| s.load_tail(&w[t * k..(t + 1) * k]));
        for r in 0..R {
            let xv = s.load_tail(a[r]);
            for t in 0..C {
                acc[r][t] = mode.step(s, acc[r][t], xv, wv[t]);
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
