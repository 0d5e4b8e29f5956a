//! The attention of one (batch, head) unit, in a fixed order.
//!
//! Per query row `i`: the scores of the keys it may see (`j < visible(i)`; the causal mask is
//! honoured by not computing hidden keys at all), each `dot(q_i, k_j) · scale + mask[i, j]`
//! computed four keys at a time by [`dot4`]; a two-pass softmax (exact lane max, then
//! `exp(s - max)` and a lane sum); then `Σ_j p_j · v_j` accumulated in increasing `j` by
//! [`accumulate_rows`] and divided by the sum. Nothing here depends on which other units share
//! a task, so every schedule gets the same bits.

use super::exp::exp;
use super::lanes::{accumulate_rows, dot, dot4, max, sum};

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

/// Writes the unit's `[sq, hd]` output into `out`; `scores` is scratch of at least `sk`.
#[inline(always)]
pub(crate) fn attend_head(h: &Head<'_>, out: &mut [f32], scores: &mut [f32]) {
    let hd = h.hd;
    for i in 0..h.sq {
        // Bottom-right aligned: row i sees keys j <= i + sk - sq (validated: sq <= sk).
        let visible = if h.causal { i + 1 + h.sk - h.sq } else { h.sk };
        let s = &mut scores[..visible];
        let qi = &h.q[i * hd..(i + 1) * hd];
        let mut j = 0;
        while j + 4 <= visible {
            let d = dot4(qi, &h.k[j * hd..], hd);
            s[j] = d[0] * h.scale;
            s[j + 1] = d[1] * h.scale;
            s[j + 2] = d[2] * h.scale;
            s[j + 3] = d[3] * h.scale;
            j += 4;
        }
        while j < visible {
            s[j] = dot(qi, &h.k[j * hd..]) * h.scale;
            j += 1;
        }
        if let Some((mask, row_stride)) = h.mask {
            let m = &mask[i * row_stride..i * row_stride + visible];
            for (x, &a) in s.iter_mut().zip(m) {
                *x += a;
            }
        }
        let o = &mut out[i * hd..(i + 1) * hd];
        o.fill(0.0);
        let top = max(s);
        if top == f32::NEG_INFINITY {
            // Every key hidden (or none at all): zeros, never 0/0.
            continue;
        }
        for x in s.iter_mut() {
            *x = exp(*x - top);
        }
        let total = sum(s);
        accumulate_rows(o, s, h.v, hd);
        for x in o.iter_mut() {
            *x /= total;
        }
    }
}
