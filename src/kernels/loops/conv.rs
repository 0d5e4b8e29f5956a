//! A convolution as a packed product, without an im2col copy: the packing of
//! [`gemm`](super::gemm) reads the `[taps, pixels]` operand straight from the input.

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
    /// Packs the pixels `start..start + valid` (zeros up to `w`) over the taps `pc..`:
    /// `dst[p·w + i] = self(pc + p, start + i)`; `dst.len() / w` taps.
    #[inline(always)]
    pub(crate) fn pack(&self, w: usize, start: usize, valid: usize, pc: usize, dst: &mut [f32]) {
        let [h, wd] = self.in_hw;
        let [kh, kw] = self.kernel_hw;
        let [sy, sx] = self.stride;
        let [py, px] = self.padding;
        let ow = self.out_hw[1];
        for (p, step) in dst.chunks_exact_mut(w).enumerate() {
            let tap = pc + p;
            let (c, ky, kx) = (tap / (kh * kw), tap / kw % kh, tap % kw);
            let plane = &self.input[c * h * wd..(c + 1) * h * wd];
            for (i, x) in step.iter_mut().enumerate() {
                *x = if i < valid {
                    let pixel = start + i;
                    let (y, xo) = (pixel / ow, pixel % ow);
                    // Input (iy, ix) = (y·sy + ky - py, x·sx + kx - px), zero in the padding.
                    match (
                        (y * sy + ky).checked_sub(py),
                        (xo * sx + kx).checked_sub(px),
                    ) {
                        (Some(iy), Some(ix)) if iy < h && ix < wd => plane[iy * wd + ix],
                        _ => 0.0,
                    }
                } else {
                    0.0
                };
            }
        }
    }
}
