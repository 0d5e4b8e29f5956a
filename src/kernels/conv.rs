//! 2-D convolution (NCHW × OIHW), scheduled over (batch, output channel) planes.

use alloc::vec;

use super::chunks::parallel_chunks;
use super::config::KernelConfig;
use super::KernelError;
use crate::schedule::Schedule;
use crate::tensor::Tensor;

/// Calls with fewer multiply-adds than this (`N·O·OH·OW·C·kH·kW`) run inline on the caller
/// (2^18: conservative, not tuned separately; SDPA measures its break-even near 2^15).
pub const CONV2D_PARALLEL_MIN_WORK: u64 = 1 << 18;

/// Options of [`conv2d()`]: stride and zero padding, as `[height, width]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dOptions {
    /// Step between output positions; both must be at least 1.
    pub stride: [usize; 2],
    /// Zeros added on each side of the input.
    pub padding: [usize; 2],
}

impl Default for Conv2dOptions {
    fn default() -> Self {
        Self {
            stride: [1, 1],
            padding: [0, 0],
        }
    }
}

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

/// 2-D convolution of `input` `[N, C, H, W]` with `weight` `[O, C, kH, kW]`, plus an optional
/// `bias` `[O]`: an output `[N, O, OH, OW]` with `OH = (H + 2·padH - kH) / strideH + 1` (and
/// the same for the width).
///
/// The units of `schedule` are the `N·O` output planes; calls below
/// [`CONV2D_PARALLEL_MIN_WORK`] stay inline. A plane's arithmetic is fixed (see
/// `conv_plane` in the source), so results are bit-identical under every schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::kernels::{conv2d, Conv2dOptions};
/// use skainet_schedule::tensor::Tensor;
/// use skainet_schedule::Sequential;
/// let input = Tensor::from_fn(vec![1, 1, 3, 3], |i| i as f32).unwrap();
/// let weight = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]).unwrap();
/// let out = conv2d(&input, &weight, None, &Conv2dOptions::default(), &Sequential).unwrap();
/// assert_eq!(out.shape(), [1, 1, 2, 2]);
/// assert_eq!(out.data(), [4.0, 6.0, 10.0, 12.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Rank`] for an input or weight that is not rank 4 or a bias that is not
/// rank 1; [`KernelError::ConvChannelMismatch`], [`KernelError::ConvBiasShape`],
/// [`KernelError::ConvZeroStride`], [`KernelError::ConvKernelTooLarge`],
/// [`KernelError::ConvTooLarge`].
pub fn conv2d(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    options: &Conv2dOptions,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    conv2d_with(
        &KernelConfig::selected(),
        input,
        weight,
        bias,
        options,
        schedule,
    )
}

fn rank4(operand: &'static str, t: &Tensor) -> Result<[usize; 4], KernelError> {
    match *t.shape() {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(KernelError::Rank {
            op: "conv2d",
            operand,
            expected: "4",
            shape: t.shape().to_vec(),
        }),
    }
}

/// [`conv2d()`] with a given [`KernelConfig`] (variant, work threshold).
///
/// # Errors
///
/// As [`conv2d()`].
pub fn conv2d_with(
    config: &KernelConfig,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    options: &Conv2dOptions,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let [n, c, h, w] = rank4("input", input)?;
    let [o, wc, kh, kw] = rank4("weight", weight)?;
    if wc != c {
        return Err(KernelError::ConvChannelMismatch {
            input: input.shape().to_vec(),
            weight: weight.shape().to_vec(),
        });
    }
    if let Some(bias) = bias {
        if bias.rank() != 1 {
            return Err(KernelError::Rank {
                op: "conv2d",
                operand: "bias",
                expected: "1",
                shape: bias.shape().to_vec(),
            });
        }
        if bias.len() != o {
            return Err(KernelError::ConvBiasShape {
                bias: bias.shape().to_vec(),
                weight: weight.shape().to_vec(),
            });
        }
    }
    let Conv2dOptions { stride, padding } = *options;
    if stride[0] == 0 || stride[1] == 0 {
        return Err(KernelError::ConvZeroStride { stride });
    }
    let too_large = || KernelError::ConvTooLarge {
        input: input.shape().to_vec(),
        weight: weight.shape().to_vec(),
        padding,
    };
    let pad = |x: usize, p: usize| p.checked_mul(2).and_then(|p2| x.checked_add(p2));
    let (ph, pw) = match (pad(h, padding[0]), pad(w, padding[1])) {
        (Some(ph), Some(pw)) => (ph, pw),
        _ => return Err(too_large()),
    };
    if kh > ph || kw > pw {
        return Err(KernelError::ConvKernelTooLarge {
            input: input.shape().to_vec(),
            weight: weight.shape().to_vec(),
            padding,
        });
    }
    let out_hw = [(ph - kh) / stride[0] + 1, (pw - kw) / stride[1] + 1];
    let plane = out_hw[0].checked_mul(out_hw[1]).ok_or_else(too_large)?;
    let len = plane
        .checked_mul(n)
        .and_then(|x| x.checked_mul(o))
        .ok_or_else(too_large)?;
    let mut out = vec![0.0f32; len];
    let taps = c * kh * kw;
    let work = (out.len() as u64).saturating_mul(taps as u64);
    let kernel = config.kernels().conv_plane;
    let (id, wd) = (input.data(), weight.data());
    let bias = bias.map(Tensor::data);
    parallel_chunks(
        "conv2d",
        schedule,
        &mut out,
        plane,
        work,
        config.threshold(CONV2D_PARALLEL_MIN_WORK),
        &|units, chunk| {
            for (unit, out_plane) in units.zip(chunk.chunks_exact_mut(plane)) {
                let (bi, oc) = (unit / o, unit % o);
                let p = ConvPlane {
                    input: &id[bi * c * h * w..(bi + 1) * c * h * w],
                    weight: &wd[oc * taps..(oc + 1) * taps],
                    bias: bias.map_or(0.0, |b| b[oc]),
                    channels: c,
                    in_hw: [h, w],
                    kernel_hw: [kh, kw],
                    out_hw,
                    stride,
                    padding,
                };
                kernel(&p, out_plane);
            }
        },
    )?;
    Ok(Tensor::new(vec![n, o, out_hw[0], out_hw[1]], out)
        .expect("the output holds N*O*OH*OW values by construction"))
}
