//! The attention of one (batch, head) unit, in a fixed order.
//!
//! Query rows go in blocks of [`ROWS`] so each key loaded serves four rows. Per row `i`: the
//! scores of the keys it may see (`j < visible(i)`: keys hidden by the causal mask are never
//! computed), `dot(q_i, k_j) · scale + mask[i, j]` with the dot product in the lane order of
//! [`dots`]; a two-pass softmax (exact max, then `exp(s - max)` and a lane [`sum`]); then
//! `Σ_j p_j · v_j` accumulated in increasing `j` by [`accumulate_block`] and divided by the
//! sum. A row's arithmetic depends on nothing but its own inputs — not on the block it falls in,
//! not on which other units share a task — so every schedule and every backend gets the same
//! bits.

use super::exp::exp;
use super::lanes::{accumulate_block, dots, dots_4x2, scale_mask_max, sum, Phase, Simd};

/// Query rows that share each key load.
pub(crate) const ROWS: usize = 4;

/// One (batch, head) unit's operands, already resolved from the tensors (GQA by index).
#[derive(Clone, Copy)]
pub(crate) struct Head<'a> {
    /// `[sq, hd]`, row-major.
    pub q: &'a [f32],
    /// `[sk, hd]` of the K/V head this query head reads.
    pub k: &'a [f32],
    /// `[sk, hd]`.
    pub v: &'a [f32],
    /// The additive mask rows for this unit and the distance between rows (0 when the mask
    /// broadcasts one row to every query); each row has `sk` values.
    pub mask: Option<(&'a [f32], usize)>,
    pub sq: usize,
    pub sk: usize,
    pub hd: usize,
    pub scale: f32,
    pub causal: bool,
}

impl Head<'_> {
    /// How many keys row `i` sees: bottom-right aligned when causal (`j <= i + sk - sq`;
    /// validated `sq <= sk`), all of them otherwise.
    #[inline(always)]
    fn visible(&self, i: usize) -> usize {
        if self.causal {
            i + 1 + self.sk - self.sq
        } else {
            self.sk
        }
    }
}

/// Scratch [`attend_head`] needs: `ROWS · sk` scores.
pub(crate) fn scratch_len(sk: usize) -> usize {
    ROWS * sk
}

/// Writes the unit's `[sq, hd]` output into `out`; `scores` is scratch of [`scratch_len`].
#[inline(always)]
pub(crate) fn attend_head<S: Simd>(s: S, h: &Head<'_>, out: &mut [f32], scores: &mut [f32]) {
    let hd = h.hd;
    let mut i0 = 0;
    while i0 < h.sq {
        let rows = ROWS.min(h.sq - i0);
        s.outlined(RawScores {
            h,
            i0,
            rows,
            scores,
        });
        let (totals, counts) = s.outlined(Softmax {
            h,
            i0,
            rows,
            scores,
        });
        s.outlined(WeightedValues {
            h,
            rows,
            totals,
            counts,
            scores,
            block: &mut out[i0 * hd..(i0 + rows) * hd],
        });
        i0 += rows;
    }
}

/// The raw dot products of rows `i0 .. i0 + rows` with the keys each sees, into
/// `scores[r * sk + j]`.
struct RawScores<'a, 'h> {
    h: &'a Head<'h>,
    i0: usize,
    rows: usize,
    scores: &'a mut [f32],
}

impl<S: Simd> Phase<S> for RawScores<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            h,
            i0,
            rows,
            scores,
        } = self;
        raw_scores(s, h, i0, rows, scores);
    }
}

/// Softmax weights of the block's rows in place; their sums and weighted key counts.
struct Softmax<'a, 'h> {
    h: &'a Head<'h>,
    i0: usize,
    rows: usize,
    scores: &'a mut [f32],
}

impl<S: Simd> Phase<S> for Softmax<'_, '_> {
    type Output = ([f32; ROWS], [usize; ROWS]);

    #[inline(always)]
    fn run(self, s: S) -> Self::Output {
        let Self {
            h,
            i0,
            rows,
            scores,
        } = self;
        let mut totals = [0.0f32; ROWS];
        let mut counts = [0usize; ROWS];
        for r in 0..rows {
            let i = i0 + r;
            let row = &mut scores[r * h.sk..r * h.sk + h.visible(i)];
            (totals[r], counts[r]) = softmax_row(s, h, i, row);
        }
        (totals, counts)
    }
}

/// The block's output rows from its weights.
struct WeightedValues<'a, 'h> {
    h: &'a Head<'h>,
    rows: usize,
    totals: [f32; ROWS],
    counts: [usize; ROWS],
    scores: &'a [f32],
    block: &'a mut [f32],
}

impl<S: Simd> Phase<S> for WeightedValues<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            h,
            rows,
            totals,
            counts,
            scores,
            block,
        } = self;
        weighted_values(s, h, rows, &totals, &counts, scores, block);
    }
}

#[inline(always)]
fn raw_scores<S: Simd>(s: S, h: &Head<'_>, i0: usize, rows: usize, scores: &mut [f32]) {
    let (hd, sk) = (h.hd, h.sk);
    if rows == ROWS {
        // Four rows share every key load; the last row of the block sees the most keys,
        // and the scores the others do not see are never read.
        let q = &h.q[i0 * hd..(i0 + ROWS) * hd];
        let seen = h.visible(i0 + ROWS - 1);
        let mut j = 0;
        while j + 2 <= seen {
            let d = dots_4x2(s, q, &h.k[j * hd..], hd);
            for (r, dr) in d.iter().enumerate() {
                scores[r * sk + j] = dr[0];
                scores[r * sk + j + 1] = dr[1];
            }
            j += 2;
        }
        if j < seen {
            let d = dots::<S, ROWS, 1>(s, q, &h.k[j * hd..], hd);
            for (r, dr) in d.iter().enumerate() {
                scores[r * sk + j] = dr[0];
            }
        }
    } else {
        for r in 0..rows {
            let q = &h.q[(i0 + r) * hd..(i0 + r + 1) * hd];
            let seen = h.visible(i0 + r);
            let row = &mut scores[r * sk..(r + 1) * sk];
            let mut j = 0;
            while j + 4 <= seen {
                let d = dots::<S, 1, 4>(s, q, &h.k[j * hd..], hd);
                row[j..j + 4].copy_from_slice(&d[0]);
                j += 4;
            }
            while j < seen {
                row[j] = dots::<S, 1, 1>(s, q, &h.k[j * hd..], hd)[0][0];
                j += 1;
            }
        }
    }
}

/// `out` rows of the block: `Σ_j p_j · v_j / total` per row (zeros for a row with no weight).
#[inline(always)]
fn weighted_values<S: Simd>(
    s: S,
    h: &Head<'_>,
    rows: usize,
    totals: &[f32; ROWS],
    counts: &[usize; ROWS],
    scores: &[f32],
    block: &mut [f32],
) {
    let (hd, sk) = (h.hd, h.sk);
    block.fill(0.0);
    // The keys every row of the block weighs share their loads; the rest go row by row.
    let shared = if rows == ROWS {
        let shared = counts.iter().copied().min().unwrap_or(0);
        accumulate_block::<S, ROWS>(s, block, scores, sk, shared, h.v, hd);
        shared
    } else {
        0
    };
    for (r, o) in block.chunks_exact_mut(hd.max(1)).enumerate().take(rows) {
        if counts[r] > 0 {
            let w = &scores[r * sk + shared..r * sk + counts[r]];
            accumulate_block::<S, 1>(s, o, w, 0, w.len(), &h.v[shared * hd..], hd);
            for x in o.iter_mut() {
                *x /= totals[r];
            }
        }
    }
}

/// Scales and masks row `i`'s raw dot products in `row` (one per visible key) and turns them
/// into unnormalised weights `exp(s - max)`. Returns their lane sum and how many keys carry
/// weight: all visible ones, or none when every score is `-inf` (the row's output is zeros).
#[inline(always)]
fn softmax_row<S: Simd>(s: S, h: &Head<'_>, i: usize, row: &mut [f32]) -> (f32, usize) {
    let mask = h
        .mask
        .map(|(mask, stride)| &mask[i * stride..i * stride + row.len()]);
    let top = scale_mask_max(s, row, h.scale, mask);
    if top == f32::NEG_INFINITY {
        // Every key hidden (or none at all): zeros, never 0/0.
        return (0.0, 0);
    }
    for x in row.iter_mut() {
        *x = exp(*x - top);
    }
    (sum(s, row), row.len())
}
