//! 2-D convolution (NCHW × OIHW) as a packed product, scheduled over output tiles.

use super::config::KernelConfig;
use super::loops::conv::Im2col;
use super::loops::gemm::{GemmTile, Source, Strided};
use super::matmul::{run_tiles, Tiled};
use super::parallel::Work;
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
/// Each batch is the product of the weight, `[O, C·kH·kW]`, with the input read as its
/// `[C·kH·kW, OH·OW]` matrix — packed straight from the input, a panel at a time, never copied
/// whole — on [`matmul()`](crate::matmul)'s packed product, so the units of `schedule` are its
/// output rows (batch, output channel) or tiles (batch, output channels, pixels) and the
/// [`Precision`](crate::Precision) of the config applies. Every output is `((bias + t₀) + t₁) + …` over the taps `(c, ky, kx)` in increasing
/// order, a tap in the padding adding `w·0`: bit-identical under every schedule. Calls below
/// [`CONV2D_PARALLEL_MIN_WORK`] stay inline.
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
    // a tensor that exists: one batch's input, one channel's weights, an output plane.
    let (o, in_plane) = (dims.out_channels, input.len() / dims.batch);
    let taps = weight.len() / o;
    let work = Work {
        total: (out.len() as u64).saturating_mul(taps as u64),
        fork_from: config.threshold(CONV2D_PARALLEL_MIN_WORK),
    };
    let (id, wd) = (input.data(), weight.data());
    let weights = Strided {
        data: wd,
        row_stride: taps,
        col_stride: 1,
    };
    let product = Tiled {
        batches: dims.batch,
        m: o,
        n: dims.out_hw[0] * dims.out_hw[1],
        k: taps,
        tile: &|batch, rows, cols| GemmTile {
            a: weights,
            b: Source::Im2col(Im2col {
                input: &id[batch * in_plane..(batch + 1) * in_plane],
                in_hw: dims.in_hw,
                kernel_hw: dims.kernel_hw,
                out_hw: dims.out_hw,
                stride,
                padding,
            }),
            k: taps,
            rows,
            cols,
            init: bias.map(Tensor::data),
        },
    };
    run_tiles(config, "conv2d", &product, out.data_mut(), work, schedule)?;
    Ok(out)
}
