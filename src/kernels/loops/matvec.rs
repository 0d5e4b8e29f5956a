//! Products with few rows — a decode step's matvec — as their own memory-bound path: the
//! weight is read once, a column range at a time, and the rows share every load of it.
//!
//! The order of an element's reduction depends on where the weight lies:
//! * `[k, n]` (`x · W`): `((0 + a₀·b₀) + a₁·b₁) + …` in increasing inner index, the order of
//!   the packed product in [`gemm`](super::gemm), vectorised over output columns;
//! * `[n, k]` (`x · Wᵀ`, how checkpoints store a linear layer): each output is a dot product of
//!   two contiguous rows, in lanes — chunk `q` of 8 values to accumulator vector `q % U`
//!   (`U` = 4 for one row, 2 for two, 1 for three or four), element `p` to lane `p % 8`, a
//!   zero-padded ragged chunk, the vectors added in a fixed tree, then the fixed lane fold of
//!   [`simd`](super::simd) (see `out_in_dots`).

use core::ops::Range;

use super::simd::{prefetch_l1, MulAdd, Simd, LANES};

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
            (Layout::InOut, 1) => in_out::<S, M, 1>(s, mode, p, r0, out),
            (Layout::InOut, 2) => in_out::<S, M, 2>(s, mode, p, r0, out),
            (Layout::InOut, 3) => in_out::<S, M, 3>(s, mode, p, r0, out),
            (Layout::InOut, _) => in_out::<S, M, 4>(s, mode, p, r0, out),
            (Layout::OutIn, 1) => out_in::<S, M, 1, OUT_IN_C, OUT_IN_U>(s, mode, p, r0, out),
            (Layout::OutIn, 2) => out_in::<S, M, 2, 2, 2>(s, mode, p, r0, out),
            (Layout::OutIn, 3) => out_in::<S, M, 3, 2, 1>(s, mode, p, r0, out),
            (Layout::OutIn, _) => out_in::<S, M, 4, 2, 1>(s, mode, p, r0, out),
        }
        r0 += rows;
    }
}

/// The values of a `[k, n]` weight (16 MiB) up to which it is taken to be read from the
/// last-level cache, where requesting its rows ahead costs more than it brings: one row
/// against 1536 × 576 from cache took 38–39 µs without the requests and 44–53 with them; one
/// row against 576 × 49 152 from memory 5.7–6.6 ms without and 3.1–3.3 with.
const CACHED_WEIGHT_VALUES: usize = 4 << 20;

/// Columns a pass over a `[k, n]` weight covers, into accumulators on the stack: each row of
/// the weight is read `WIDE·4` bytes at a time, contiguous, and the rows a few on are requested
/// meanwhile (the hardware prefetchers follow no jump from row to row).
const WIDE: usize = 512;
/// The same for one row, whose accumulators are the output itself: a longer contiguous read
/// per weight row (16 KiB), the accumulators still in L1.
const WIDE_ONE_ROW: usize = 4096;

/// Rows `r0..r0 + R` against a `[k, n]` weight: every output `(r, j)` is
/// `((0 + a[r][0]·b[0][j]) + a[r][1]·b[1][j]) + …`, a pass of columns at a time.
#[inline(always)]
fn in_out<S: Simd, M: MulAdd, const R: usize>(
    s: S,
    mode: M,
    p: &Skinny<'_>,
    r0: usize,
    out: &mut [f32],
) {
    let a: [&[f32]; R] = core::array::from_fn(|r| &p.a[(r0 + r) * p.k..(r0 + r + 1) * p.k]);
    if p.m == 1 && out.len() >= WIDE_ONE_ROW {
        // One row over a wide column range: the column-major output is contiguous, so it
        // holds the accumulators. A narrower range (a piece of a region) keeps them on the
        // stack instead: its ends may share a cache line with a neighbour's piece running on
        // another core, which writing once per weight row would bounce between them.
        let mut j0 = 0;
        while j0 < out.len() {
            let width = WIDE_ONE_ROW.min(out.len() - j0);
            let mut acc = [&mut out[j0..j0 + width]];
            in_out_pass::<S, M, 1>(s, mode, p, &[a[0]], p.cols.start + j0, &mut acc);
            j0 += width;
        }
        return;
    }
    let mut stack = [[0.0f32; WIDE]; R];
    let mut j0 = p.cols.start;
    while j0 < p.cols.end {
        let width = WIDE.min(p.cols.end - j0);
        {
            let mut acc: [&mut [f32]; R] = {
                let mut rows = stack.iter_mut();
                core::array::from_fn(|_| match rows.next() {
                    Some(row) => &mut row[..width],
                    None => &mut [],
                })
            };
            in_out_pass::<S, M, R>(s, mode, p, &a, j0, &mut acc);
        }
        for (r, row) in stack.iter().enumerate() {
            for (c, &v) in row[..width].iter().enumerate() {
                out[(j0 + c - p.cols.start) * p.m + r0 + r] = v;
            }
        }
        j0 += width;
    }
}

/// One pass: `acc[r][c] = (… (0 + a[r][0]·b[0][j0 + c]) …)` over every `q < k` in increasing
/// order, for `c < acc[r].len()`; whole vectors, then single columns rounded as a lane is.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R` unroll into registers
fn in_out_pass<S: Simd, M: MulAdd, const R: usize>(
    s: S,
    mode: M,
    p: &Skinny<'_>,
    a: &[&[f32]; R],
    j0: usize,
    acc: &mut [&mut [f32]; R],
) {
    let width = acc[0].len();
    let vectors = width - width % LANES;
    for row in acc.iter_mut() {
        row.fill(0.0);
    }
    // Over a weight larger than the last-level cache, the weight row `ahead` rows on is asked
    // for a line at a time while this one is read, at the same columns: at least
    // `PREFETCH_AHEAD` values ahead in the stream the pass reads.
    let ahead = PREFETCH_AHEAD.div_ceil(width.max(1)).max(1);
    let request = p.b.len() > CACHED_WEIGHT_VALUES;
    for q in 0..p.k {
        let b = &p.b[q * p.n + j0..q * p.n + j0 + width];
        let av: [S::V; R] = core::array::from_fn(|r| s.splat(a[r][q]));
        let later = match request {
            true => {
                p.b.get((q + ahead) * p.n + j0..(q + ahead) * p.n + j0 + width)
            }
            false => None,
        };
        // The steps of one vector of columns: a loop of their own with and without requests,
        // so that the loop over a cached weight has no test in it.
        macro_rules! step {
            ($c:expr) => {
                let bv = s.load(&b[$c..$c + LANES]);
                for r in 0..R {
                    let slot = &mut acc[r][$c..$c + LANES];
                    s.store(mode.step(s, s.load(slot), av[r], bv), slot);
                }
            };
        }
        let mut c = 0;
        if let Some(later) = later {
            while c < vectors {
                // A line (16 values) per request.
                if c % 16 == 0 {
                    prefetch_l1(&later[c..c + 1]);
                }
                step!(c);
                c += LANES;
            }
        }
        while c < vectors {
            step!(c);
            c += LANES;
        }
        for c in vectors..width {
            for r in 0..R {
                acc[r][c] = mode.step1(s, acc[r][c], a[r][q], b[c]);
            }
        }
    }
}

/// Rows `r0..r0 + R` against an `[n, k]` weight: dot products of `C` weight rows at a time.
#[inline(always)]
fn out_in<S: Simd, M: MulAdd, const R: usize, const C: usize, const U: usize>(
    s: S,
    mode: M,
    p: &Skinny<'_>,
    r0: usize,
    out: &mut [f32],
) {
    let a: [&[f32]; R] = core::array::from_fn(|r| &p.a[(r0 + r) * p.k..(r0 + r + 1) * p.k]);
    // The range's weight rows are one contiguous stream. Its first window is asked for at
    // once, so that a task starts at full speed instead of waiting for the prefetchers to
    // ramp up; the dot products then ask for the lines `PREFETCH_AHEAD` values ahead.
    let stream = &p.b[p.cols.start * p.k..p.cols.end * p.k];
    prefetch(stream, 0, PREFETCH_AHEAD);
    let ahead = |j: usize| {
        let at = (j - p.cols.start) * p.k + PREFETCH_AHEAD;
        stream.get(at..).unwrap_or(&[])
    };
    let mut j = p.cols.start;
    while j + C <= p.cols.end {
        let w = &p.b[j * p.k..(j + C) * p.k];
        let dots = out_in_dots::<S, M, R, C, U>(s, mode, &a, w, p.k, ahead(j));
        store_dots(p, &dots, j, r0, out);
        j += C;
    }
    for j in j..p.cols.end {
        let w = &p.b[j * p.k..(j + 1) * p.k];
        let dots = out_in_dots::<S, M, R, 1, U>(s, mode, &a, w, p.k, ahead(j));
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

/// One row against an `[n, k]` weight: `OUT_IN_C` weight rows at a time, each with `OUT_IN_U`
/// accumulator vectors, so the weight is read as few long streams with several additions in
/// flight each (a decode step's projection is bound by the read bandwidth).
const OUT_IN_C: usize = 1;
const OUT_IN_U: usize = 4;

/// How far ahead of its reads an `[n, k]` weight stream is prefetched, in values: 8 KiB, two
/// pages. The hardware prefetchers stop at each 4 KiB page and ramp up again; asked for this
/// far ahead, the next pages' lines are already in flight. A decode step's projections on one
/// core went 1.08–1.3× faster with it; 2 KiB ahead gained less, 16 KiB no more.
const PREFETCH_AHEAD: usize = 2048;

/// `R × C` dot products of `a[r]` with the rows `w[t·k..][..k]`: chunk `q` of 8 values
/// (`p / 8`, the ragged last one zero-padded) goes to accumulator vector `q % U`, element `p`
/// to its lane `p % 8`, in increasing `q`; the `U` vectors then add as `((v0 + v1) + (v2 + v3))`
/// (`v0 + v1` for two, `v0` for one) and the lanes fold in the fixed tree of
/// [`simd`](super::simd). With `U = 1` this is the attention kernel's lane order.
///
/// `ahead` is where the weight stream continues [`PREFETCH_AHEAD`] values after `w`'s start
/// (short or empty near the stream's end): each step asks for its lines, which changes what
/// is in the caches, never a value.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..C`, `0..U` unroll into registers
fn out_in_dots<S: Simd, M: MulAdd, const R: usize, const C: usize, const U: usize>(
    s: S,
    mode: M,
    a: &[&[f32]; R],
    w: &[f32],
    k: usize,
    ahead: &[f32],
) -> [[f32; C]; R] {
    let full = k - k % LANES;
    let wf: [&[f32]; C] = core::array::from_fn(|t| &w[t * k..t * k + full]);
    let af: [&[f32]; R] = core::array::from_fn(|r| &a[r][..full]);
    let mut acc = [[[s.zero(); U]; C]; R];
    let mut c = 0;
    while c + U * LANES <= full {
        for t in 0..C {
            prefetch(ahead, t * k + c, t * k + c + U * LANES);
        }
        for u in 0..U {
            let at = c + u * LANES;
            // A loop, not `array::from_fn`: a closure would not inline the vector loads.
            let mut wv = [s.zero(); C];
            for t in 0..C {
                wv[t] = s.load(&wf[t][at..at + LANES]);
            }
            for r in 0..R {
                let xv = s.load(&af[r][at..at + LANES]);
                for t in 0..C {
                    acc[r][t][u] = mode.step(s, acc[r][t][u], xv, wv[t]);
                }
            }
        }
        c += U * LANES;
    }
    // The chunks left after whole groups of `U` continue at accumulator 0.
    let mut u = 0;
    while c + LANES <= full {
        // A loop, not `array::from_fn`: a closure would not inline the vector loads.
        let mut wv = [s.zero(); C];
        for t in 0..C {
            wv[t] = s.load(&wf[t][c..c + LANES]);
        }
        for r in 0..R {
            let xv = s.load(&af[r][c..c + LANES]);
            for t in 0..C {
                acc[r][t][u] = mode.step(s, acc[r][t][u], xv, wv[t]);
            }
        }
        c += LANES;
        u += 1;
    }
    if full < k {
        // A loop, not `array::from_fn`: a closure would not inline the vector loads.
        let mut wv = [s.zero(); C];
        for t in 0..C {
            wv[t] = s.load_tail(&w[t * k..(t + 1) * k]);
        }
        for r in 0..R {
            let xv = s.load_tail(a[r]);
            for t in 0..C {
                acc[r][t][u] = mode.step(s, acc[r][t][u], xv, wv[t]);
            }
        }
    }
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for t in 0..C {
            let v = &acc[r][t];
            let joined = match U {
                1 => v[0],
                2 => s.add(v[0], v[1]),
                _ => s.add(s.add(v[0], v[1]), s.add(v[2], v[3])),
            };
            out[r][t] = s.fold(joined);
        }
    }
    out
}

/// Asks for the cache lines of `data[from..to]` (clamped to `data`), one request per 16
/// values (a 64-byte line). A hint only: nothing is read architecturally, so no value changes.
#[inline(always)]
fn prefetch(data: &[f32], from: usize, to: usize) {
    prefetch_l1(data.get(from..to.min(data.len())).unwrap_or(&[]));
}
