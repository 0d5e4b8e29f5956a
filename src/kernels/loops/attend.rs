//! The attention of one (batch, head) unit, in a fixed order.
//!
//! Per query row `i`: the scores of the keys it may see (`j < visible(i)`: keys hidden by the
//! causal mask are never computed), `dot(q_i, k_j) · scale + mask[i, j]` with the dot product
//! in the lane order of [`dots`]; a two-pass softmax (exact max, then `exp(s - max)` and a lane
//! [`sum`]); then `Σ_j p_j · v_j` accumulated in increasing `j` by [`accumulate_block`] and
//! divided by the sum. A row's arithmetic depends on nothing but its own inputs — not on the
//! block or tile it falls in, not on which other units share a task — so every schedule and
//! every backend gets the same bits.
//!
//! The loop nest only decides what is loaded when: rows go in groups of [`GROUP`] whose scores
//! are all kept, keys in tiles of [`KEY_TILE`] that stay in cache while every block of
//! [`ROWS`] rows of the group uses them, and each key load inside a block serves four rows.

use super::exp::exp;
use super::lanes::{accumulate_block, dots, dots_4x2, scale_mask_max, sum};
use super::simd::{Phase, Simd};

/// Query rows that share each key load.
pub(crate) const ROWS: usize = 4;
/// Query rows whose scores are kept at once (so each key tile is read once per group).
pub(crate) const GROUP: usize = 64;
/// Keys per tile: 512 keys of head_dim 64 are 128 KiB of K (or V), well inside L2.
pub(crate) const KEY_TILE: usize = 512;

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

/// Scratch [`attend_head`] needs: the scores of one group of rows (saturating: a length no
/// allocation can serve is refused by the allocation, not by an overflow).
pub(crate) fn scratch_len(sq: usize, sk: usize) -> usize {
    GROUP.min(sq).saturating_mul(sk)
}

/// Writes the unit's `[sq, hd]` output into `out`; `scores` is scratch of [`scratch_len`].
#[inline(always)]
pub(crate) fn attend_head<S: Simd>(s: S, h: &Head<'_>, out: &mut [f32], scores: &mut [f32]) {
    let hd = h.hd;
    let mut g0 = 0;
    while g0 < h.sq {
        let rows = GROUP.min(h.sq - g0);
        let seen = h.visible(g0 + rows - 1);
        let mut t0 = 0;
        while t0 < seen {
            let keys = t0..(t0 + KEY_TILE).min(seen);
            s.outlined(RawScores {
                h,
                g0,
                rows,
                keys,
                scores,
            });
            t0 += KEY_TILE;
        }
        let mut totals = [0.0f32; GROUP];
        let mut counts = [0usize; GROUP];
        s.outlined(Softmax {
            h,
            g0,
            rows,
            scores,
            totals: &mut totals,
            counts: &mut counts,
        });
        let group = &mut out[g0 * hd..(g0 + rows) * hd];
        group.fill(0.0);
        let weighed = counts[..rows].iter().copied().max().unwrap_or(0);
        let mut t0 = 0;
        while t0 < weighed {
            let keys = t0..(t0 + KEY_TILE).min(weighed);
            s.outlined(WeightedValues {
                h,
                rows,
                keys,
                counts: &counts,
                scores,
                group,
            });
            t0 += KEY_TILE;
        }
        for (r, o) in group.chunks_exact_mut(hd.max(1)).enumerate() {
            if counts[r] > 0 {
                for x in o.iter_mut() {
                    *x /= totals[r];
                }
            }
        }
        g0 += rows;
    }
}

/// The raw dot products of the group's rows (`g0 ..`) with the keys of one tile that each row
/// sees, into `scores[r * sk + j]`.
struct RawScores<'a, 'h> {
    h: &'a Head<'h>,
    g0: usize,
    rows: usize,
    keys: core::ops::Range<usize>,
    scores: &'a mut [f32],
}

impl<S: Simd> Phase<S> for RawScores<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            h,
            g0,
            rows,
            keys,
            scores,
        } = self;
        let (hd, sk) = (h.hd, h.sk);
        let mut r0 = 0;
        while r0 + ROWS <= rows {
            // Four rows share every key load; the last row of the block sees the most keys,
            // and the scores the others do not see are never read.
            let q = &h.q[(g0 + r0) * hd..(g0 + r0 + ROWS) * hd];
            let end = keys.end.min(h.visible(g0 + r0 + ROWS - 1));
            let mut j = keys.start;
            while j + 2 <= end {
                let d = dots_4x2(s, q, &h.k[j * hd..], hd);
                for (r, dr) in d.iter().enumerate() {
                    scores[(r0 + r) * sk + j] = dr[0];
                    scores[(r0 + r) * sk + j + 1] = dr[1];
                }
                j += 2;
            }
            if j < end {
                let d = dots::<S, ROWS, 1>(s, q, &h.k[j * hd..], hd);
                for (r, dr) in d.iter().enumerate() {
                    scores[(r0 + r) * sk + j] = dr[0];
                }
            }
            r0 += ROWS;
        }
        for r in r0..rows {
            let q = &h.q[(g0 + r) * hd..(g0 + r + 1) * hd];
            let end = keys.end.min(h.visible(g0 + r));
            let row = &mut scores[r * sk..(r + 1) * sk];
            let mut j = keys.start;
            while j + 4 <= end {
                let d = dots::<S, 1, 4>(s, q, &h.k[j * hd..], hd);
                row[j..j + 4].copy_from_slice(&d[0]);
                j += 4;
            }
            while j < end {
                row[j] = dots::<S, 1, 1>(s, q, &h.k[j * hd..], hd)[0][0];
                j += 1;
            }
        }
    }
}

/// Turns the group's scores into softmax weights in place; their sums and the number of keys
/// each row weighs.
struct Softmax<'a, 'h> {
    h: &'a Head<'h>,
    g0: usize,
    rows: usize,
    scores: &'a mut [f32],
    totals: &'a mut [f32; GROUP],
    counts: &'a mut [usize; GROUP],
}

impl<S: Simd> Phase<S> for Softmax<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            h,
            g0,
            rows,
            scores,
            totals,
            counts,
        } = self;
        for r in 0..rows {
            let i = g0 + r;
            let row = &mut scores[r * h.sk..r * h.sk + h.visible(i)];
            (totals[r], counts[r]) = softmax_row(s, h, i, row);
        }
    }
}

/// Adds one tile of keys' weighted values to the group's output rows.
struct WeightedValues<'a, 'h> {
    h: &'a Head<'h>,
    rows: usize,
    keys: core::ops::Range<usize>,
    counts: &'a [usize; GROUP],
    scores: &'a [f32],
    group: &'a mut [f32],
}

impl<S: Simd> Phase<S> for WeightedValues<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn run(self, s: S) {
        let Self {
            h,
            rows,
            keys,
            counts,
            scores,
            group,
        } = self;
        let (hd, sk) = (h.hd, h.sk);
        let mut r0 = 0;
        while r0 < rows {
            let block = ROWS.min(rows - r0);
            // The keys of the tile every row of a full block weighs share their loads; the rest
            // go row by row. Per element the additions stay in increasing key order.
            let shared = if block == ROWS {
                let shared = counts[r0..r0 + ROWS].iter().copied().min().unwrap_or(0);
                let end = keys.end.min(shared);
                if keys.start < end {
                    let out = &mut group[r0 * hd..(r0 + ROWS) * hd];
                    let w = &scores[r0 * sk + keys.start..];
                    let n = end - keys.start;
                    accumulate_block::<S, ROWS>(s, out, w, sk, n, &h.v[keys.start * hd..], hd);
                }
                end.max(keys.start)
            } else {
                keys.start
            };
            for r in r0..r0 + block {
                let end = keys.end.min(counts[r]);
                if shared < end {
                    let out = &mut group[r * hd..(r + 1) * hd];
                    let w = &scores[r * sk + shared..r * sk + end];
                    accumulate_block::<S, 1>(s, out, w, 0, w.len(), &h.v[shared * hd..], hd);
                }
            }
            r0 += block;
        }
    }
}

/// Scales and masks row `i`'s raw dot products in `row` (one per visible key) and turns them
/// into unnormalised weights `exp(s - max)`. Returns their lane sum and how many keys carry
/// weight: all visible ones, or none when every score is `-inf` (the row's output is zeros).
///
/// The max skips NaN scores (`maxps` keeps its second operand), so a NaN score never shows
/// in `top`; it shows in its own weight, `exp(NaN - top) = NaN`, which makes the sum and
/// the whole output row NaN. Only when every other score is `-inf` would the row look fully
/// masked: then the scores are checked for NaN, and a NaN row keeps every key, with weights
/// `exp(s - -inf)` that are all NaN (`-inf - -inf` is NaN too).
#[inline(always)]
fn softmax_row<S: Simd>(s: S, h: &Head<'_>, i: usize, row: &mut [f32]) -> (f32, usize) {
    let mask = h
        .mask
        .map(|(mask, stride)| &mask[i * stride..i * stride + row.len()]);
    let top = scale_mask_max(s, row, h.scale, mask);
    if top == f32::NEG_INFINITY && !row.iter().any(|x| x.is_nan()) {
        // Every key hidden (or none at all): zeros, never 0/0.
        return (0.0, 0);
    }
    for x in row.iter_mut() {
        *x = exp(*x - top);
    }
    (sum(s, row), row.len())
}
