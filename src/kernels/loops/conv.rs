//! One conv2d output plane, in a fixed order.

/// One output plane's operands: input channels of one batch, weights of one output channel.
#[derive(Clone, Copy)]
pub(crate) struct ConvPlane<'a> {
    /// `[C, H, W]`.
    pub input: &'a [f32],
    /// `[C, kH, kW]`.
    pub weight: &'a [f32],
    pub bias: f32,
    pub channels: usize,
    pub in_hw: [usize; 2],
    pub kernel_hw: [usize; 2],
    pub out_hw: [usize; 2],
    pub stride: [usize; 2],
    pub padding: [usize; 2],
}

/// Writes one `[OH, OW]` plane: `out[y][x] = ((bias + t₀) + t₁) + …` over the taps
/// `(c, ky, kx)` in increasing order that fall inside the input (padding contributes nothing).
#[inline(always)]
pub(crate) fn conv_plane(p: &ConvPlane<'_>, out: &mut [f32]) {
    let [h, w] = p.in_hw;
    let [kh, kw] = p.kernel_hw;
    let [oh, ow] = p.out_hw;
    let [sy, sx] = p.stride;
    let [py, px] = p.padding;
    out.fill(p.bias);
    for y in 0..oh {
        let row = &mut out[y * ow..(y + 1) * ow];
        for c in 0..p.channels {
            for ky in 0..kh {
                // Input row iy = y*sy + ky - py, skipped when it falls in the padding.
                let Some(iy) = (y * sy + ky).checked_sub(py).filter(|&iy| iy < h) else {
                    continue;
                };
                let in_row = &p.input[(c * h + iy) * w..(c * h + iy + 1) * w];
                for kx in 0..kw {
                    let wt = p.weight[(c * kh + ky) * kw + kx];
                    // Output columns whose input column x*sx + kx - px lies in [0, w).
                    let x0 = px.saturating_sub(kx).div_ceil(sx);
                    let x1 = if w + px > kx {
                        (w + px - kx).div_ceil(sx).min(ow)
                    } else {
                        0
                    };
                    if x0 >= x1 {
                        continue;
                    }
                    if sx == 1 {
                        let src = &in_row[x0 + kx - px..x1 + kx - px];
                        for (o, &i) in row[x0..x1].iter_mut().zip(src) {
                            *o += wt * i;
                        }
                    } else {
                        for (x, o) in row.iter_mut().enumerate().take(x1).skip(x0) {
                            *o += wt * in_row[x * sx + kx - px];
                        }
                    }
                }
            }
        }
    }
}
