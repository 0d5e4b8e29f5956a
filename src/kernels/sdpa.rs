//! Scaled dot-product attention with grouped K/V heads, scheduled over (batch, head) units.

use super::config::KernelConfig;
use super::error::ReusedScratch;
use super::loops::attend::{scratch_len, Head, CACHED_KV_BYTES};
use super::parallel::{parallel_chunks_grained, Work};
use super::KernelError;
use crate::schedule::Schedule;
use crate::shape::{self, SdpaDims};
use crate::tensor::{Tensor, TensorView};
#[cfg(doc)]
use crate::Precision;

/// Calls holding fewer multiply-adds than this (`2·b·H·Sq·Sk·hd`, hidden causal keys included)
/// run inline on the caller: below it a region costs more than the second core saves. 2^18 —
/// measured on a 2-core x86_64 (AVX-512) machine with `hardware()` forced to fork, medians of
/// 3000 calls back to back: decode steps of 2^16 multiply-adds (3–3.4 µs) ran 0.91–0.94× as
/// fast as `Sequential` and of 2^17 (8 heads × 128 keys, 5.9 µs) 0.97×, while a prefill of
/// 2^18 (2 heads × 8 queries × 128 keys) ran 1.5× and of 2^19 1.7× (2^16 before the decode
/// kernels read 32 keys at a time; 2^20, the figure for a scalar kernel about 20× slower,
/// would leave most decode shapes inline).
pub const SDPA_PARALLEL_MIN_WORK: u64 = 1 << 18;

/// A bound on the work (counted as for [`SDPA_PARALLEL_MIN_WORK`]) one core does while a
/// helper woken from sleep gets going, `D`: 2^22, about 65 µs of attention on a 2-core x86_64
/// virtual machine where such a helper started 15–45 µs late (its host halts idle virtual
/// CPUs; real hardware wakes a thread in microseconds to tens of them).
///
/// A call of fewer than four pieces per task (one per (batch, head) unit, or per group of heads
/// sharing K/V in a decode step) wakes sleeping helpers before its first piece and cannot
/// balance one that starts late: the caller claims what the helper has not, but a piece the
/// helper took ends `D` late. With `u` pieces of time `d` that costs the region
/// `(u·d + D + d) / 2` against `u·d` inline, so while the schedule's helpers sleep
/// ([`Schedule::helpers_asleep`]) such a call forks only from `2^22 · u / (u − 1)` (2^23 for
/// two pieces; half that for a decode step, which does half the multiply-adds per second);
/// when they are awake, from [`SDPA_PARALLEL_MIN_WORK`]. Measured with 1 ms of
/// idling before each call (every worker asleep), `hardware()` against `Sequential`, forking
/// from 2^18: 2 heads × 8 queries × 128 keys (2^18) 0.36×, 2 heads at 2^22 0.80–0.97× and at
/// 2^23 1.59–1.75×; 4 heads at 2^21 0.62–0.76× and at 2^22 1.51–1.60×; 6 heads at 2^21.6
/// 1.56×; back to back (awake) the same calls gain up to 1.9×. Calls of four or more pieces
/// per task fork from [`SDPA_PARALLEL_MIN_WORK`]: the pool decides after their first piece
/// whether waking a helper pays. A threshold set with [`KernelConfig::with_min_parallel_work`]
/// replaces both.
pub const SDPA_LATE_HELPER_WORK: u64 = 1 << 22;

/// The work from which a call of `pieces` pieces forks on a schedule of `parallelism` tasks
/// whose helpers are `asleep` or not, for a `decode` step or not (see
/// [`SDPA_LATE_HELPER_WORK`]).
pub(super) fn fork_from(pieces: usize, parallelism: usize, asleep: bool, decode: bool) -> u64 {
    let tasks = parallelism.min(pieces).max(1);
    if !asleep || pieces < 2 || pieces / tasks >= 4 {
        return SDPA_PARALLEL_MIN_WORK;
    }
    // A decode step streams K and V for few multiply-adds each: it does about half as many
    // per second as a prefill (40 against 69 G/s here), so a late start is half the work.
    let late = match decode {
        true => SDPA_LATE_HELPER_WORK / 2,
        false => SDPA_LATE_HELPER_WORK,
    };
    // `W·u / (u − 1)` as `W + W / (u − 1)`: no product to overflow.
    late.saturating_add(late / (pieces as u64 - 1))
        .max(SDPA_PARALLEL_MIN_WORK)
}

/// Options of [`scaled_dot_product_attention`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SdpaOptions {
    /// Multiplies every `q·k`; `None` means `1 / sqrt(head_dim)`.
    pub scale: Option<f32>,
    /// Hides, for query row `i`, every key `j > i + Sk - Sq` (bottom-right aligned: the last
    /// query sees every key, the decode / KV-cache convention).
    pub causal: bool,
}

/// `softmax(q·kᵀ · scale + mask) · v` per (batch, head), with grouped-query K/V.
///
/// * `q`: `[b, H, Sq, hd]`; `k`, `v`: `[b, nKV, Sk, hd]` with `nKV` dividing `H`. Query head
///   `h` reads K/V head `h / (H / nKV)` by index; K/V are never copied.
/// * `mask`: additive, broadcast to the scores `[b, H, Sq, Sk]` by trailing alignment: rank 2
///   to 4, the last dimension `Sk`, every other dimension either `1` or equal (`[Sq, Sk]`,
///   `[b, 1, Sq, Sk]`, `[1, H, Sq, Sk]`, `[b, H, Sq, Sk]`, `[b, 1, 1, Sk]`, …). Applied
///   together with `causal`.
/// * A query row whose scores are all `-inf` (fully masked by the mask and causality, or
///   `Sk = 0`) yields zeros, never NaN. NaN is not masking: it propagates, IEEE fashion, to
///   exactly the rows it reaches —
///   - NaN in `q` row `i`, or in `mask[i, j]` for a key `j` that row `i` sees causally: row
///     `i` is NaN (even when every other score of the row is `-inf`, since `NaN + -inf` is
///     NaN);
///   - NaN in `k` row `j`: every row that sees key `j` causally is NaN, whatever the mask
///     says there;
///   - NaN in `v[j, d]`: element `d` of every row that sees key `j` causally and is not fully
///     masked is NaN, even where its weight for `j` is `0` (`0 · NaN = NaN`); a fully masked
///     row never reads `v` and stays zeros;
///   - a NaN `scale`: every row that sees at least one key is NaN.
///
///   Keys hidden by `causal` are never computed or read, so NaN there reaches nothing (a
///   reference that masks with `-inf` and multiplies by all of `v` would give NaN for a NaN
///   `v` row it hides). Which NaN bit pattern comes out is not specified.
/// * Output: `[b, H, Sq, hd]`.
/// * `q`, `k`, `v` are anything that converts into a [`TensorView`]: a `&Tensor`, or a view
///   of a larger buffer — such as [`KvCache::keys`](crate::KvCache::keys), the filled prefix
///   of a `[b, nKV, capacity, hd]` cache — read in place, never copied. Each head's
///   `[positions, hd]` block must lie back to back (strides `[.., .., hd, 1]`); batch and head
///   strides are free. The result equals, bit for bit, the result on compact copies.
/// * `mask` is a [`TensorView`] too (`tensor.view()`, or a window of a larger mask such as
///   `mask.view().narrow(..)`): its last dimension must lie back to back (stride 1), every
///   other stride is free.
/// * Arithmetic: keys go in tiles of a fixed size counted from key 0, with an online softmax
///   (a running max and sum per row), so the scratch per task is bounded by the tile and the
///   head dimension, not by `Sk`; with `std` each thread keeps that scratch (up to 1 MiB) for
///   its next call rather than allocating it per call. Each score is one chain of multiply-adds over the head
///   dimension in increasing order, and each output element a chain over the keys in
///   increasing order — in [`Precision::Portable`] (the default) each step rounds twice and the
///   bits are the same on every target and variant; in [`Precision::Native`] (through
///   [`scaled_dot_product_attention_with`]) the steps fuse where the CPU has FMA.
///
/// The (batch, head) pairs are the units of `schedule`; calls below
/// [`SDPA_PARALLEL_MIN_WORK`] stay inline, and so, while the schedule's helpers sleep, do calls
/// of fewer than four pieces per task below [`SDPA_LATE_HELPER_WORK`]'s bound. The arithmetic
/// of a unit never depends on the schedule, so the result is bit-identical under every
/// schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{scaled_dot_product_attention, SdpaOptions, Sequential, Tensor};
///
/// let q = Tensor::new(vec![1, 1, 1, 2], vec![1.0, 0.0]).unwrap();
/// let k = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]).unwrap();
/// let v = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let mask = Tensor::new(vec![1, 2], vec![0.0, f32::NEG_INFINITY]).unwrap();
/// let options = SdpaOptions::default();
/// let out = scaled_dot_product_attention(&q, &k, &v, Some(mask.view()), &options, &Sequential)
///     .unwrap();
/// assert_eq!(out.shape(), [1, 1, 1, 2]);
/// assert_eq!(out.data(), [1.0, 2.0]); // the second key is masked out
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Shape`] with the [`ShapeError`](crate::ShapeError) of [`shape::sdpa`] (rank,
/// batch, heads, head dimension, lengths, mask, causal length, size) naming the shapes
/// involved, or of [`shape::contiguous_heads`] for a view whose heads are not back to back, or
/// of [`shape::contiguous_rows`] for a mask whose rows are not; [`KernelError::Tensor`] or
/// [`KernelError::Scratch`] when memory cannot be had;
/// [`KernelError::DisjointSplit`] when `schedule` broke its contract. No output is produced.
pub fn scaled_dot_product_attention<'a>(
    q: impl Into<TensorView<'a>>,
    k: impl Into<TensorView<'a>>,
    v: impl Into<TensorView<'a>>,
    mask: Option<TensorView<'_>>,
    options: &SdpaOptions,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    scaled_dot_product_attention_with(&KernelConfig::selected(), q, k, v, mask, options, schedule)
}

/// [`scaled_dot_product_attention`] with a given [`KernelConfig`]: another compiled variant
/// (every variant gives the same bits in the portable mode; this is how that is tested), the
/// [`Precision::Native`] mode (fused multiply-adds where the CPU has them: bit-identical
/// under every schedule on one machine and variant, within `1e-5` of portable), or another
/// work threshold.
///
/// # Errors
///
/// As [`scaled_dot_product_attention`].
pub fn scaled_dot_product_attention_with<'a>(
    config: &KernelConfig,
    q: impl Into<TensorView<'a>>,
    k: impl Into<TensorView<'a>>,
    v: impl Into<TensorView<'a>>,
    mask: Option<TensorView<'_>>,
    options: &SdpaOptions,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let (q, k, v) = (q.into(), k.into(), v.into());
    let dims = shape::sdpa(
        q.shape(),
        k.shape(),
        v.shape(),
        mask.as_ref().map(TensorView::shape),
        options.causal,
    )?;
    if let Some(m) = &mask {
        shape::contiguous_rows("sdpa", "mask", m.shape(), m.strides())?;
    }
    let (q, k, v) = (
        Heads::new("q", &q)?,
        Heads::new("k", &k)?,
        Heads::new("v", &v)?,
    );
    let mut out = Tensor::zeros(dims.output_shape())?;
    if out.is_empty() {
        // Nothing to compute, and a unit's `sq * hd` (or a mask plane) may overflow when
        // `b · H` is what is zero.
        return Ok(out);
    }
    // Every position it forms is one of the mask's; an empty mask (Sk = 0) masks nothing.
    let mask = mask.as_ref().filter(|m| !m.is_empty()).map(MaskRows::new);
    attend_heads(
        config,
        &dims,
        [&q, &k, &v],
        mask.as_ref(),
        options,
        out.data_mut(),
        schedule,
    )?;
    Ok(out)
}

/// Attention of the validated heads `[q, k, v]` of `dims` into `out` (`b·H·Sq·hd` values,
/// compact `[b, H, Sq, hd]`, not empty): the kernel of [`scaled_dot_product_attention`], which a
/// decoder's step calls on its own buffers (it allocates nothing once the thread's scratch has
/// grown).
pub(crate) fn attend_heads(
    config: &KernelConfig,
    dims: &SdpaDims,
    [q, k, v]: [&Heads<'_>; 3],
    mask: Option<&MaskRows<'_>>,
    options: &SdpaOptions,
    out: &mut [f32],
    schedule: &dyn Schedule,
) -> Result<(), KernelError> {
    let SdpaDims {
        heads,
        q_len: sq,
        kv_len: sk,
        head_dim: hd,
        ..
    } = *dims;
    let scale = options
        .scale
        .unwrap_or_else(|| 1.0 / libm::sqrtf(hd as f32));
    let group = dims.group();
    // In u64 and saturating: `sq * sk * hd` alone can overflow a 32-bit usize.
    let total = [dims.batch, heads, sq, sk, hd]
        .iter()
        .fold(2u64, |w, &d| w.saturating_mul(d as u64));
    let attend = config.pick(&config.kernels().attend);
    // K and V of the whole call, in bytes: whether a decode row may take them to be cached.
    let kv_bytes = [dims.batch, heads / group.max(1), sk, hd]
        .iter()
        .fold(8u64, |w, &d| w.saturating_mul(d as u64));
    let cached = kv_bytes <= CACHED_KV_BYTES;
    // A decode step's chunks are whole groups of heads sharing a K/V head when there are
    // groups enough for every task: each group is then one call that reads its K and V once,
    // instead of a region's pieces cutting groups in two and reading them twice. With fewer
    // groups than tasks (one K/V head, many cores) the groups are split as before.
    let units = dims.batch.saturating_mul(heads);
    let groups = units / group.max(1);
    let grain = if sq == 1 && q.head_stride == hd && groups >= schedule.parallelism() {
        group
    } else {
        1
    };
    let pieces = units.div_ceil(grain);
    let work = Work {
        total,
        fork_from: config.min_parallel_work().unwrap_or_else(|| {
            fork_from(
                pieces,
                schedule.parallelism(),
                schedule.helpers_asleep(),
                sq == 1,
            )
        }),
    };
    parallel_chunks_grained(
        "sdpa",
        schedule,
        out,
        sq * hd,
        grain,
        work,
        &|units, chunk| {
            // Attention reads only scratch it wrote for the same head (a padded key column is
            // zeroed when packed), so the thread's buffer from its last call serves as is.
            let mut scores = ReusedScratch::take("sdpa", scratch_len(hd))?;
            let mut unit = units.start;
            let mut chunk = chunk;
            while unit < units.end {
                let (bi, h) = (unit / heads, unit % heads);
                let kv_h = h / group;
                // A decode step (one query row per head) of the heads in this chunk that share
                // a K/V head goes as the rows of one call, so K and V are read once for them.
                // A row's bits do not depend on which rows share a call, so neither the
                // chunking nor the stacking shows in the result.
                let rows = if sq == 1 && q.head_stride == hd {
                    (group - h % group).min(units.end - unit)
                } else {
                    1
                };
                let (o, rest) = core::mem::take(&mut chunk).split_at_mut(rows * sq * hd);
                chunk = rest;
                let head = Head {
                    q: q.of(bi, h, rows * sq * hd),
                    k: k.of(bi, kv_h, sk * hd),
                    v: v.of(bi, kv_h, sk * hd),
                    // Stacked heads' mask rows lie a head apart (0 where the mask broadcasts
                    // over heads).
                    mask: mask.map(|m| {
                        let (at, row) = m.of(bi, h);
                        (at, if rows > 1 { m.head_stride } else { row })
                    }),
                    sq: rows * sq,
                    sk,
                    hd,
                    scale,
                    // One row sees every key, causal or not (`sq <= sk`).
                    causal: options.causal && rows == 1,
                    decode: sq == 1,
                    cached,
                };
                attend(&head, o, &mut scores);
                unit += rows;
            }
            Ok(())
        },
    )?;
    Ok(())
}

/// Where each (batch, head) block of a rank-4 operand starts: a view whose last two
/// dimensions lie back to back, so a block is one slice.
pub(crate) struct Heads<'a> {
    data: &'a [f32],
    offset: usize,
    batch_stride: usize,
    head_stride: usize,
}

impl<'a> Heads<'a> {
    fn new(operand: &'static str, view: &TensorView<'a>) -> Result<Self, KernelError> {
        shape::contiguous_heads("sdpa", operand, view.shape(), view.strides())?;
        Ok(Self {
            data: view.buffer(),
            offset: view.offset(),
            batch_stride: view.strides()[0],
            head_stride: view.strides()[1],
        })
    }

    /// The blocks of `data` from `offset`, `batch_stride` and `head_stride` apart: the caller
    /// vouches that every block a call reads lies inside `data`.
    #[cfg(feature = "model")]
    pub(crate) fn raw(
        data: &'a [f32],
        offset: usize,
        batch_stride: usize,
        head_stride: usize,
    ) -> Self {
        Self {
            data,
            offset,
            batch_stride,
            head_stride,
        }
    }

    /// The `len` values of block (`bi`, `h`).
    fn of(&self, bi: usize, h: usize, len: usize) -> &'a [f32] {
        if len == 0 {
            return &[];
        }
        // In bounds: (bi, h) is inside the view's shape, `len` is its [rows, cols] block, and
        // the view was checked to name only positions inside `data`.
        let start = self.offset + bi * self.batch_stride + h * self.head_stride;
        &self.data[start..start + len]
    }
}

/// Where the mask rows of a unit live: the mask view padded to rank 4, with a stride of 0 on
/// every broadcast dimension.
pub(crate) struct MaskRows<'a> {
    data: &'a [f32],
    offset: usize,
    batch_stride: usize,
    head_stride: usize,
    row_stride: usize,
}

impl<'a> MaskRows<'a> {
    /// `mask` is non-empty, validated by `shape::sdpa` and its rows back to back.
    fn new(mask: &TensorView<'a>) -> Self {
        let (shape, strides) = (mask.shape(), mask.strides());
        let pad = 4 - shape.len();
        // A dimension of size 1 broadcasts: whatever its stride, it reads position 0.
        let stride = |dim: usize| {
            dim.checked_sub(pad)
                .filter(|&at| shape[at] != 1)
                .map_or(0, |at| strides[at])
        };
        Self {
            data: mask.buffer(),
            offset: mask.offset(),
            batch_stride: stride(0),
            head_stride: stride(1),
            row_stride: stride(2),
        }
    }

    /// The mask rows of unit (`bi`, `h`), from its first, and the distance between rows.
    fn of(&self, bi: usize, h: usize) -> (&'a [f32], usize) {
        // In bounds: (bi, h, 0, 0) is a position of the non-empty view (or broadcast to one).
        let start = self.offset + bi * self.batch_stride + h * self.head_stride;
        (&self.data[start..], self.row_stride)
    }
}
