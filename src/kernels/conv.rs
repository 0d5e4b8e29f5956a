//! 2-D convolution (NCHW × OIHW), scheduled over (batch, output channel) planes.

use super::config::KernelConfig;
use super::loops::conv::ConvPlane;
use super::parallel::{parallel_chunks, Work};
use super::KernelError;
use crate::schedule::Schedule;
use crate::shape;
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
/// use skainet_schedule::{conv2d, Conv2dOptions, Sequential, Tensor};
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
/// [`KernelError::Shape`] with the [`ShapeError`](crate::ShapeError) of [`shape::conv2d`]:
/// ranks, channels, bias, a zero stride, a kernel larger than the padded input, sizes too large
/// for one allocation; [`KernelError::Tensor`] when the output cannot be allocated.
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
    let Conv2dOptions { stride, padding } = *options;
    let dims = shape::conv2d(
        input.shape(),
        weight.shape(),
        bias.map(Tensor::shape),
        stride,
        padding,
    )?;
    let mut out = Tensor::zeros(dims.output_shape())?;
    if out.is_empty() {
        // Nothing to write; with no batch or no output channel the spatial sizes are unbounded
        // and their product may not even fit a usize.
        return Ok(out);
    }
    // The output is not empty, so N and O are not zero and every product below is the size of
    // a tensor that exists: an output plane, one batch's input, one channel's weights.
    let plane = dims.out_hw[0] * dims.out_hw[1];
    let (c, [h, w], o) = (dims.in_channels, dims.in_hw, dims.out_channels);
    let in_plane = input.len() / dims.batch;
    let taps = weight.len() / o;
    let work = Work {
        total: (out.len() as u64).saturating_mul(taps as u64),
        fork_from: config.threshold(CONV2D_PARALLEL_MIN_WORK),
    };
    let kernel = config.kernels().conv_plane;
    let (id, wd) = (input.data(), weight.data());
    let bias = bias.map(Tensor::data);
    parallel_chunks(
        "conv2d",
        schedule,
        out.data_mut(),
        plane,
        work,
        &|units, chunk| {
            for (unit, out_plane) in units.zip(chunk.chunks_exact_mut(plane)) {
                let (bi, oc) = (unit / o, unit % o);
                let p = ConvPlane {
                    input: &id[bi * in_plane..(bi + 1) * in_plane],
                    weight: &wd[oc * taps..(oc + 1) * taps],
                    bias: bias.map_or(0.0, |b| b[oc]),
                    channels: c,
                    in_hw: [h, w],
                    kernel_hw: dims.kernel_hw,
                    out_hw: dims.out_hw,
                    stride,
                    padding,
                };
                kernel(&p, out_plane);
            }
            Ok(())
        },
    )?;
    Ok(out)
}
