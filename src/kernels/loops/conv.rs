//! A convolution as a packed product, without an im2col copy: the packing of
//! [`gemm`](super::gemm) reads the `[taps, pixels]` operand straight from the input.

use super::gemm::MAX_NR;

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
        // Each pixel's top-left input corner, padded coordinates, computed once per panel.
        let mut corner = [(0usize, 0usize); MAX_NR];
        let valid = valid.min(MAX_NR);
        for (i, c) in corner.iter_mut().enumerate().take(valid) {
            let pixel = start + i;
            *c = ((pixel / ow) * sy, (pixel % ow) * sx);
        }
        let (mut c, mut ky, mut kx) = (pc / taps_per_channel, pc / kw % kh, pc % kw);
        for step in dst.chunks_exact_mut(w) {
            let plane = &self.input[c * plane_len..(c + 1) * plane_len];
            for (x, &(y0, x0)) in step.iter_mut().zip(&corner[..valid]) {
                // Input (iy, ix) = (y·sy + ky - py, x·sx + kx - px), zero in the padding.
                *x = match ((y0 + ky).checked_sub(py), (x0 + kx).checked_sub(px)) {
                    (Some(iy), Some(ix)) if iy < h && ix < wd => plane[iy * wd + ix],
                    _ => 0.0,
                };
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
