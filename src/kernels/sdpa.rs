//! Scaled dot-product attention with grouped K/V heads, scheduled over (batch, head) units.

use alloc::vec;

use super::attend::{scratch_len, Head};
use super::chunks::parallel_chunks;
use super::config::KernelConfig;
use super::KernelError;
use crate::schedule::Schedule;
use crate::tensor::Tensor;

/// Calls holding fewer multiply-adds than this (`2·b·H·Sq·Sk·hd`, hidden causal keys included)
/// run inline on the caller: below it a region costs more than the second core saves. 2^16 —
/// measured on a 2-core x86_64 (AVX2) machine with `hardware()`, medians of 2000 calls: forking
/// breaks even at 2^15 multiply-adds (≈ 2 µs of kernel work) and wins 1.2–1.9× at 2^16 and
/// 1.7× at 2^17 (the seed's 2^20 was tuned for a scalar kernel about 20× slower).
pub const SDPA_PARALLEL_MIN_WORK: u64 = 1 << 16;

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
/// * A query row whose scores are all `-inf` (fully masked) yields zeros, never NaN.
/// * Output: `[b, H, Sq, hd]`.
///
/// The (batch, head) pairs are the units of `schedule`; calls below
/// [`SDPA_PARALLEL_MIN_WORK`] stay inline. The arithmetic of a unit never depends on the
/// schedule, so the result is bit-identical under every schedule.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::kernels::{scaled_dot_product_attention, SdpaOptions};
/// use skainet_schedule::tensor::Tensor;
/// use skainet_schedule::Sequential;
///
/// let q = Tensor::new(vec![1, 1, 1, 2], vec![1.0, 0.0]).unwrap();
/// let k = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 0.0, 0.0, 1.0]).unwrap();
/// let v = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let mask = Tensor::new(vec![1, 2], vec![0.0, f32::NEG_INFINITY]).unwrap();
/// let out = scaled_dot_product_attention(&q, &k, &v, Some(&mask), &SdpaOptions::default(), &Sequential)
///     .unwrap();
/// assert_eq!(out.shape(), [1, 1, 1, 2]);
/// assert_eq!(out.data(), [1.0, 2.0]); // the second key is masked out
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::Rank`], [`KernelError::BatchMismatch`], [`KernelError::KvHeadsMismatch`],
/// [`KernelError::ZeroKvHeads`], [`KernelError::KvHeadsDoNotDivide`],
/// [`KernelError::HeadDimMismatch`], [`KernelError::KvLengthMismatch`],
/// [`KernelError::MaskShape`], [`KernelError::CausalQueryLongerThanKeys`] — each naming the
/// shapes involved; no output is produced.
pub fn scaled_dot_product_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    options: &SdpaOptions,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    scaled_dot_product_attention_with(&KernelConfig::selected(), q, k, v, mask, options, schedule)
}

/// [`scaled_dot_product_attention`] with a given [`KernelConfig`]: another compiled variant
/// (every variant gives the same bits; this is how that is tested) or another work threshold.
///
/// # Errors
///
/// As [`scaled_dot_product_attention`].
pub fn scaled_dot_product_attention_with(
    config: &KernelConfig,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    options: &SdpaOptions,
    schedule: &dyn Schedule,
) -> Result<Tensor, KernelError> {
    let dims = validate(q, k, v, mask, options)?;
    let Dims {
        b,
        heads,
        kv_heads,
        sq,
        sk,
        hd,
    } = dims;
    let scale = options
        .scale
        .unwrap_or_else(|| 1.0 / libm::sqrtf(hd as f32));
    let mask = mask.map(|m| MaskRows::new(m, &dims));
    let group = heads / kv_heads.max(1);
    let mut out = vec![0.0f32; b * heads * sq * hd];
    // In u64 and saturating: `sq * sk * hd` alone can overflow a 32-bit usize.
    let work = [b, heads, sq, sk, hd]
        .iter()
        .fold(2u64, |w, &d| w.saturating_mul(d as u64));
    let attend = config.kernels().attend;
    let (qd, kd, vd) = (q.data(), k.data(), v.data());
    parallel_chunks(
        "sdpa",
        schedule,
        &mut out,
        sq * hd,
        work,
        config.threshold(SDPA_PARALLEL_MIN_WORK),
        &|units, chunk| {
            let mut scores = vec![0.0f32; scratch_len(sq, sk)];
            for (unit, o) in units.zip(chunk.chunks_exact_mut(sq * hd)) {
                let (bi, h) = (unit / heads, unit % heads);
                let kv_unit = bi * kv_heads + h / group;
                let head = Head {
                    q: &qd[unit * sq * hd..(unit + 1) * sq * hd],
                    k: &kd[kv_unit * sk * hd..(kv_unit + 1) * sk * hd],
                    v: &vd[kv_unit * sk * hd..(kv_unit + 1) * sk * hd],
                    mask: mask.as_ref().map(|m| m.of(bi, h)),
                    sq,
                    sk,
                    hd,
                    scale,
                    causal: options.causal,
                };
                attend(&head, o, &mut scores);
            }
        },
    )?;
    Ok(Tensor::new(vec![b, heads, sq, hd], out)
        .expect("the output holds b*H*Sq*hd values by construction"))
}

#[derive(Debug, Clone, Copy)]
struct Dims {
    b: usize,
    heads: usize,
    kv_heads: usize,
    sq: usize,
    sk: usize,
    hd: usize,
}

fn rank4(operand: &'static str, t: &Tensor) -> Result<[usize; 4], KernelError> {
    match *t.shape() {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(KernelError::Rank {
            op: "sdpa",
            operand,
            expected: "4",
            shape: t.shape().to_vec(),
        }),
    }
}

fn validate(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    options: &SdpaOptions,
) -> Result<Dims, KernelError> {
    let [b, heads, sq, hd] = rank4("q", q)?;
    let [kb, kv_heads, sk, khd] = rank4("k", k)?;
    let [vb, v_heads, vsk, vhd] = rank4("v", v)?;
    let shape = |t: &Tensor| t.shape().to_vec();
    if kb != b {
        return Err(KernelError::BatchMismatch {
            q: shape(q),
            kv: shape(k),
        });
    }
    if vb != b {
        return Err(KernelError::BatchMismatch {
            q: shape(q),
            kv: shape(v),
        });
    }
    if v_heads != kv_heads {
        return Err(KernelError::KvHeadsMismatch {
            k: shape(k),
            v: shape(v),
        });
    }
    if kv_heads == 0 && heads > 0 {
        return Err(KernelError::ZeroKvHeads {
            q: shape(q),
            k: shape(k),
        });
    }
    if kv_heads > 0 && heads % kv_heads != 0 {
        return Err(KernelError::KvHeadsDoNotDivide {
            q: shape(q),
            k: shape(k),
        });
    }
    if khd != hd {
        return Err(KernelError::HeadDimMismatch {
            q: shape(q),
            kv: shape(k),
        });
    }
    if vhd != hd {
        return Err(KernelError::HeadDimMismatch {
            q: shape(q),
            kv: shape(v),
        });
    }
    if vsk != sk {
        return Err(KernelError::KvLengthMismatch {
            k: shape(k),
            v: shape(v),
        });
    }
    let dims = Dims {
        b,
        heads,
        kv_heads,
        sq,
        sk,
        hd,
    };
    if let Some(m) = mask {
        if !mask_fits(m.shape(), &dims) {
            return Err(KernelError::MaskShape {
                mask: shape(m),
                scores: vec![b, heads, sq, sk],
            });
        }
    }
    if options.causal && sq > sk {
        return Err(KernelError::CausalQueryLongerThanKeys {
            q: shape(q),
            k: shape(k),
        });
    }
    Ok(dims)
}

/// Whether a mask of `shape` broadcasts to the scores `[b, H, Sq, Sk]`: rank 2 to 4, the
/// last dimension exactly `Sk`, every other one `1` or equal.
fn mask_fits(shape: &[usize], d: &Dims) -> bool {
    if !(2..=4).contains(&shape.len()) {
        return false;
    }
    let padded = pad4(shape);
    let target = [d.b, d.heads, d.sq, d.sk];
    padded[3] == d.sk
        && padded[..3]
            .iter()
            .zip(&target[..3])
            .all(|(&m, &t)| m == t || m == 1)
}

/// Where the mask rows of a unit live: the mask padded to rank 4, with a stride of 0 on every
/// broadcast dimension.
struct MaskRows<'a> {
    data: &'a [f32],
    batch_stride: usize,
    head_stride: usize,
    row_stride: usize,
}

impl<'a> MaskRows<'a> {
    fn new(mask: &'a Tensor, d: &Dims) -> Self {
        let [mb, mh, msq, _] = pad4(mask.shape());
        let plane = msq * d.sk;
        Self {
            data: mask.data(),
            batch_stride: if mb == 1 { 0 } else { mh * plane },
            head_stride: if mh == 1 { 0 } else { plane },
            row_stride: if msq == 1 { 0 } else { d.sk },
        }
    }

    /// The mask rows of unit (`bi`, `h`) and the distance between rows.
    fn of(&self, bi: usize, h: usize) -> (&'a [f32], usize) {
        let start = bi * self.batch_stride + h * self.head_stride;
        (&self.data[start..], self.row_stride)
    }
}

fn pad4(shape: &[usize]) -> [usize; 4] {
    let mut padded = [1usize; 4];
    padded[4 - shape.len()..].copy_from_slice(shape);
    padded
}
