//! A convolution as a packed product, without an im2col copy: the packing of
//! [`gemm`](super::gemm) reads the `[taps, pixels]` operand straight from the input.

use super::panel::MAX_NR;

/// One batch's input seen as the `[C·kH·kW, OH·OW]` matrix of a convolution: element
/// `(tap, pixel)` is the input value under that tap at that output pixel, or `0` in the padding.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Im2col<'a> {
    /// `[C, H, W]`.
    pub input: &'a [f32],
    pub in_hw: [usize; 2],
    pub kernel_hw: [usize; 2],
    pub out_hw: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

impl Im2col<'_> {
    /// Packs the pixels `start..start + valid` (zeros up to `w`, at most 32) over the taps
    /// `pc..`: `dst[p·w + i] = self(pc + p, start + i)`; `dst.len() / w` taps.
    #[inline(always)]
    pub(crate) fn pack(&self, w: usize, start: usize, valid: usize, pc: usize, dst: &mut [f32]) {
        if dst.is_empty() {
            // No tap to pack: with no input channel or an empty kernel, `kH·kW` and `H·W` are
            // unbounded (they may be zero, or their product may not fit a usize).
            return;
        }
        let [h, wd] = self.in_hw;
        let [kh, kw] = self.kernel_hw;
        // A tap exists, so C ≥ 1 and the kernel is not empty: one channel's plane is part of
        // the input and one channel's taps part of the weight, so both products fit.
        let (plane_len, taps_per_channel) = (h * wd, kh * kw);
        let [sy, sx] = self.stride;
        let [py, px] = self.padding;
        let ow = self.out_hw[1];
        let valid = valid.min(MAX_NR).min(w);
        // The panel's pixels as runs along one output row each: (first slot, output row's top
        // input row, first pixel's left input column, both padded, length). A run reads one
        // input row per tap, a contiguous segment of it when the stride across is 1.
        let mut runs = [(0usize, 0usize, 0usize, 0usize); MAX_NR];
        let (mut count, mut i) = (0, 0);
        while i < valid {
            let pixel = start + i;
            let (y, x) = (pixel / ow, pixel % ow);
            let len = (ow - x).min(valid - i);
            runs[count] = (i, y * sy, x * sx, len);
            count += 1;
            i += len;
        }
        let runs = &runs[..count];
        let (mut c, mut ky, mut kx) = (pc / taps_per_channel, pc / kw % kh, pc % kw);
        for step in dst.chunks_exact_mut(w) {
            let plane = &self.input[c * plane_len..(c + 1) * plane_len];
            for &(at, y0, x0, len) in runs {
                let out = &mut step[at..at + len];
                // Input (iy, ix) = (y·sy + ky - py, x·sx + kx - px), zero in the padding.
                let row = match (y0 + ky).checked_sub(py) {
                    Some(iy) if iy < h => &plane[iy * wd..(iy + 1) * wd],
                    _ => {
                        out.fill(0.0);
                        continue;
                    }
                };
                let first = x0 + kx;
                if sx == 1 {
                    // Slots before the left edge, and up to the right edge, of the input row.
                    let lo = px.saturating_sub(first).min(len);
                    let hi = px.saturating_add(wd).saturating_sub(first).min(len);
                    out[..lo].fill(0.0);
                    if lo < hi {
                        // first + lo ≥ px (lo reaches the left edge) and first + hi ≤ px + wd.
                        out[lo..hi].copy_from_slice(&row[first + lo - px..first + hi - px]);
                    }
                    out[hi.max(lo)..].fill(0.0);
                } else {
                    for (j, v) in out.iter_mut().enumerate() {
                        *v = match (first + j * sx).checked_sub(px) {
                            Some(ix) if ix < wd => row[ix],
                            _ => 0.0,
                        };
                    }
                }
            }
            step[valid..].fill(0.0);
            // The next tap, in increasing (c, ky, kx).
            kx += 1;
            if kx == kw {
                kx = 0;
                ky += 1;
                if ky == kh {
                    ky = 0;
                    c += 1;
                }
            }
        }
    }
}
