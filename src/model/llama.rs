//! The llama architecture read from a GGUF file: its dimensions from the metadata, its
//! weights read in place from the file's bytes, run on the crate's scheduled ops.
//!
//! Nothing here names a particular model: every dimension comes from `{arch}.*` metadata and
//! the tensors present. The projections stay in the file's block formats and are multiplied by
//! [`quant_linear`](crate::quant_linear) (no f32 copy of a weight is ever made); only the small
//! norm weights are decoded into tensors at load. Q and K rows are used as GGUF stores them,
//! permuted for adjacent-pair rotary ([`rope_interleaved`](crate::rope_interleaved)); the
//! output head is `output.weight`, or the token embedding when the file ties them.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::gguf::{Gguf, GgufError, TensorInfo};
use crate::kernels::step::{
    add_columns_into, attend_heads, inv_frequencies, push_angles, quant_embedding_row_into,
    quant_embedding_rows_into, quant_linear_row_into, quant_linear_rows_into, rms_norm_row,
    rms_norm_rows_into, rope_interleaved_row, rope_interleaved_rows_into, scratch,
    silu_mul_columns_into, silu_mul_row, transpose_into, Heads, QScratch,
};
use crate::quant::{self, GgmlType, QuantError};
use crate::shape::SdpaDims;
use crate::{
    Activations, KernelConfig, KernelError, KvCache, QMatrix, Schedule, SdpaOptions, ShapeError,
    Tensor, TensorView,
};
use std::time::{Duration, Instant};

/// The dimensions of a llama-architecture model, as its GGUF metadata states them.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// `general.architecture` (`"llama"`): the prefix of every other key.
    pub architecture: String,
    /// Transformer blocks (`{arch}.block_count`).
    pub blocks: usize,
    /// Width of the residual stream (`{arch}.embedding_length`).
    pub dim: usize,
    /// Hidden width of the gated MLP (`{arch}.feed_forward_length`).
    pub ffn: usize,
    /// Query heads (`{arch}.attention.head_count`).
    pub heads: usize,
    /// Key/value heads (`{arch}.attention.head_count_kv`; the query heads when absent).
    pub kv_heads: usize,
    /// Width of one head: `dim / heads`.
    pub head_dim: usize,
    /// Rotary base (`{arch}.rope.freq_base`; 10000 when absent, llama.cpp's default).
    pub rope_base: f32,
    /// RMS normalisation epsilon (`{arch}.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f32,
    /// Positions the model was trained for (`{arch}.context_length`).
    pub context: usize,
    /// Rows of the token embedding.
    pub vocab: usize,
}

/// Why a GGUF file is not a llama model this crate can run. Each message names the key or
/// tensor and the values found.
#[derive(Debug)]
#[non_exhaustive]
pub enum ModelError {
    /// The file itself: parsing, or a metadata key missing or of the wrong type.
    Gguf(GgufError),
    /// `general.architecture` names another architecture.
    Architecture {
        /// What the file says.
        found: String,
    },
    /// A dimension that must be positive is zero, or does not fit `usize`.
    Dimension {
        /// The metadata key.
        key: String,
        /// Its value.
        value: u64,
    },
    /// `heads` does not divide the width.
    HeadsDoNotDivide {
        /// `{arch}.embedding_length`.
        dim: usize,
        /// `{arch}.attention.head_count`.
        heads: usize,
    },
    /// The K/V heads do not divide the query heads.
    KvHeadsDoNotDivide {
        /// Query heads.
        heads: usize,
        /// K/V heads.
        kv_heads: usize,
    },
    /// The head width is odd, so rotary pairs do not fit it.
    OddHeadDim {
        /// `dim / heads`.
        head_dim: usize,
    },
    /// A tensor the architecture needs is not in the file.
    MissingTensor {
        /// Its name.
        name: String,
    },
    /// A tensor has other dimensions than the metadata implies.
    TensorShape {
        /// Its name.
        name: String,
        /// What the file says (ggml order: the row length first).
        dims: Vec<usize>,
        /// What the metadata implies.
        expected: Vec<usize>,
    },
    /// A norm weight is stored in a type other than F32.
    NormType {
        /// Its name.
        name: String,
        /// Its type.
        ty: GgmlType,
    },
    /// A weight's bytes do not form a matrix of its type.
    Quant {
        /// The tensor.
        name: String,
        /// Why.
        error: QuantError,
    },
    /// A token id at or above the vocabulary.
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// The vocabulary.
        vocab: usize,
    },
    /// More positions than the cache was made for.
    CacheFull {
        /// Positions already cached.
        len: usize,
        /// Positions asked to add.
        adding: usize,
        /// The cache's capacity.
        capacity: usize,
    },
    /// A kernel refused (a size that cannot be allocated, a shape the op rejects).
    Kernel(KernelError),
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Gguf(e) => write!(f, "{e}"),
            ModelError::Architecture { found } => write!(
                f,
                "general.architecture is {found:?}: only \"llama\" models are supported"
            ),
            ModelError::Dimension { key, value } => {
                write!(
                    f,
                    "{key} = {value}: a model dimension must be a positive size"
                )
            }
            ModelError::HeadsDoNotDivide { dim, heads } => write!(
                f,
                "attention.head_count {heads} does not divide embedding_length {dim}"
            ),
            ModelError::KvHeadsDoNotDivide { heads, kv_heads } => write!(
                f,
                "attention.head_count_kv {kv_heads} does not divide attention.head_count {heads}"
            ),
            ModelError::OddHeadDim { head_dim } => {
                write!(
                    f,
                    "head width {head_dim} is odd: rotary pairs need an even one"
                )
            }
            ModelError::MissingTensor { name } => {
                write!(f, "tensor {name} is missing from the file")
            }
            ModelError::TensorShape {
                name,
                dims,
                expected,
            } => write!(
                f,
                "tensor {name} has dims {dims:?}, the metadata implies {expected:?}"
            ),
            ModelError::NormType { name, ty } => {
                write!(f, "tensor {name} is {ty}: norm weights must be f32")
            }
            ModelError::Quant { name, error } => write!(f, "tensor {name}: {error}"),
            ModelError::TokenOutOfRange { id, vocab } => {
                write!(f, "token id {id} is not below the vocabulary size {vocab}")
            }
            ModelError::CacheFull {
                len,
                adding,
                capacity,
            } => write!(
                f,
                "the K/V cache holds {len} of {capacity} positions: no room for {adding} more"
            ),
            ModelError::Kernel(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for ModelError {}

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        ModelError::Gguf(e)
    }
}

impl From<KernelError> for ModelError {
    fn from(e: KernelError) -> Self {
        ModelError::Kernel(e)
    }
}

impl From<crate::TensorError> for ModelError {
    fn from(e: crate::TensorError) -> Self {
        ModelError::Kernel(e.into())
    }
}

fn size(g: &Gguf<'_>, key: &str) -> Result<usize, ModelError> {
    let v: u64 = g.get_scalar::<u32>(key).map(u64::from).or_else(|e| {
        // Some converters write 64-bit counts: accept them, report the 32-bit error otherwise.
        g.get_scalar::<u64>(key).map_err(|_| e)
    })?;
    usize::try_from(v)
        .ok()
        .filter(|&n| n > 0)
        .ok_or(ModelError::Dimension {
            key: key.into(),
            value: v,
        })
}

impl LlamaConfig {
    /// Reads the dimensions from `gguf`'s metadata and checks that they fit together.
    ///
    /// # Errors
    ///
    /// [`ModelError::Architecture`] for another architecture; [`ModelError::Gguf`] for a
    /// missing key or one of the wrong type; [`ModelError::Dimension`],
    /// [`ModelError::HeadsDoNotDivide`], [`ModelError::KvHeadsDoNotDivide`],
    /// [`ModelError::OddHeadDim`] for dimensions that do not fit;
    /// [`ModelError::MissingTensor`] without `token_embd.weight` (the vocabulary's size).
    pub fn from_gguf(g: &Gguf<'_>) -> Result<LlamaConfig, ModelError> {
        let arch = g.get_str("general.architecture")?;
        if arch != "llama" {
            return Err(ModelError::Architecture { found: arch.into() });
        }
        let key = |k: &str| alloc::format!("{arch}.{k}");
        let blocks = size(g, &key("block_count"))?;
        let dim = size(g, &key("embedding_length"))?;
        let ffn = size(g, &key("feed_forward_length"))?;
        let heads = size(g, &key("attention.head_count"))?;
        let kv_key = key("attention.head_count_kv");
        let kv_heads = if g.get(&kv_key).is_some() {
            size(g, &kv_key)?
        } else {
            heads
        };
        let context = size(g, &key("context_length"))?;
        let rope_key = key("rope.freq_base");
        let rope_base = if g.get(&rope_key).is_some() {
            g.get_scalar::<f32>(&rope_key)?
        } else {
            10_000.0
        };
        let rms_eps = g.get_scalar::<f32>(&key("attention.layer_norm_rms_epsilon"))?;
        if dim % heads != 0 {
            return Err(ModelError::HeadsDoNotDivide { dim, heads });
        }
        if heads % kv_heads != 0 {
            return Err(ModelError::KvHeadsDoNotDivide { heads, kv_heads });
        }
        let head_dim = dim / heads;
        if head_dim % 2 != 0 {
            return Err(ModelError::OddHeadDim { head_dim });
        }
        let embd = tensor(g, "token_embd.weight")?;
        let vocab = match embd.dims() {
            [d, v] if *d == dim && *v > 0 => *v,
            dims => {
                return Err(ModelError::TensorShape {
                    name: "token_embd.weight".into(),
                    dims: dims.to_vec(),
                    expected: alloc::vec![dim, embd.rows().max(1)],
                })
            }
        };
        Ok(LlamaConfig {
            architecture: arch.into(),
            blocks,
            dim,
            ffn,
            heads,
            kv_heads,
            head_dim,
            rope_base,
            rms_eps,
            context,
            vocab,
        })
    }
}

fn tensor<'a, 'g>(g: &'g Gguf<'a>, name: &str) -> Result<&'g TensorInfo<'a>, ModelError> {
    g.get_tensor(name)
        .ok_or_else(|| ModelError::MissingTensor { name: name.into() })
}

/// `name` as a `[rows, cols]` weight (ggml dims `[cols, rows]`).
fn matrix<'a>(
    g: &Gguf<'a>,
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<QMatrix<'a>, ModelError> {
    let t = tensor(g, name)?;
    if t.dims() != [cols, rows] {
        return Err(ModelError::TensorShape {
            name: name.into(),
            dims: t.dims().to_vec(),
            expected: alloc::vec![cols, rows],
        });
    }
    QMatrix::new(t.ty(), rows, cols, t.data()).map_err(|error| ModelError::Quant {
        name: name.into(),
        error,
    })
}

/// `name` as an f32 vector of `len` values, decoded into a tensor (norm weights are small).
fn vector(g: &Gguf<'_>, name: &str, len: usize) -> Result<Tensor, ModelError> {
    let t = tensor(g, name)?;
    if t.dims() != [len] {
        return Err(ModelError::TensorShape {
            name: name.into(),
            dims: t.dims().to_vec(),
            expected: alloc::vec![len],
        });
    }
    if t.ty() != GgmlType::F32 {
        return Err(ModelError::NormType {
            name: name.into(),
            ty: t.ty(),
        });
    }
    let mut out = Tensor::zeros(alloc::vec![len])?;
    quant::decode_row(GgmlType::F32, t.data(), out.data_mut()).map_err(|error| {
        ModelError::Quant {
            name: name.into(),
            error,
        }
    })?;
    Ok(out)
}

/// One transformer block's weights (read by `step_graph` too, which decodes them).
pub(super) struct Block<'a> {
    pub(super) attn_norm: Tensor,
    pub(super) wq: QMatrix<'a>,
    pub(super) wk: QMatrix<'a>,
    pub(super) wv: QMatrix<'a>,
    pub(super) wo: QMatrix<'a>,
    pub(super) ffn_norm: Tensor,
    pub(super) w_gate: QMatrix<'a>,
    pub(super) w_up: QMatrix<'a>,
    pub(super) w_down: QMatrix<'a>,
}

/// A llama model whose weights are borrowed from a GGUF file's bytes.
pub struct Llama<'a> {
    config: LlamaConfig,
    pub(super) embd: QMatrix<'a>,
    pub(super) blocks: Vec<Block<'a>>,
    pub(super) output_norm: Tensor,
    pub(super) output: QMatrix<'a>,
    tied: bool,
}

impl fmt::Debug for Llama<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Llama")
            .field("config", &self.config)
            .field("tied_output", &self.tied)
            .finish_non_exhaustive()
    }
}

impl<'a> Llama<'a> {
    /// The model of `gguf`: its [`LlamaConfig`], and every weight checked against it and
    /// borrowed in place. Only the norm weights (a few KiB each) are copied.
    ///
    /// # Errors
    ///
    /// As [`LlamaConfig::from_gguf`]; [`ModelError::MissingTensor`] for a block's tensor that
    /// is absent (so a `block_count` beyond the tensors present), [`ModelError::TensorShape`],
    /// [`ModelError::NormType`] and [`ModelError::Quant`] for tensors that do not fit it.
    pub fn from_gguf(g: &Gguf<'a>) -> Result<Llama<'a>, ModelError> {
        let c = LlamaConfig::from_gguf(g)?;
        let (d, hd) = (c.dim, c.head_dim);
        let mut blocks = Vec::new();
        blocks
            .try_reserve_exact(c.blocks)
            .map_err(|_| ModelError::Dimension {
                key: alloc::format!("{}.block_count", c.architecture),
                value: c.blocks as u64,
            })?;
        for i in 0..c.blocks {
            let n = |what: &str| alloc::format!("blk.{i}.{what}.weight");
            blocks.push(Block {
                attn_norm: vector(g, &n("attn_norm"), d)?,
                wq: matrix(g, &n("attn_q"), c.heads * hd, d)?,
                wk: matrix(g, &n("attn_k"), c.kv_heads * hd, d)?,
                wv: matrix(g, &n("attn_v"), c.kv_heads * hd, d)?,
                wo: matrix(g, &n("attn_output"), d, c.heads * hd)?,
                ffn_norm: vector(g, &n("ffn_norm"), d)?,
                w_gate: matrix(g, &n("ffn_gate"), c.ffn, d)?,
                w_up: matrix(g, &n("ffn_up"), c.ffn, d)?,
                w_down: matrix(g, &n("ffn_down"), d, c.ffn)?,
            });
        }
        let embd = matrix(g, "token_embd.weight", c.vocab, d)?;
        let (output, tied) = match g.get_tensor("output.weight") {
            Some(_) => (matrix(g, "output.weight", c.vocab, d)?, false),
            None => (embd, true),
        };
        Ok(Llama {
            output_norm: vector(g, "output_norm.weight", d)?,
            embd,
            blocks,
            output,
            tied,
            config: c,
        })
    }

    /// The model's dimensions.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Keeps the first `blocks` transformer blocks and drops the others (no change when the
    /// model has no more than `blocks`): the model becomes the embedding, those blocks, the
    /// final norm and the head, and its [`config`](Self::config)`().blocks` says so. A
    /// truncated model is what a check of a few blocks compares against — the compile lane's
    /// round trip of [`step_graph`](Self::step_graph) at 2 blocks, for one; its caches are
    /// made after the truncation.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use skainet_schedule::gguf::GgufFile;
    /// use skainet_schedule::model::Llama;
    ///
    /// let file = GgufFile::open("models/SmolLM2-135M-Instruct.Q4_1.gguf")?;
    /// let mut model = Llama::from_gguf(file.gguf())?;
    /// model.truncate_blocks(2);
    /// assert_eq!(model.config().blocks, 2);
    /// # Ok(()) }
    /// ```
    pub fn truncate_blocks(&mut self, blocks: usize) {
        self.blocks.truncate(blocks);
        self.config.blocks = self.blocks.len();
    }

    /// Whether the output head is the token embedding (no `output.weight` in the file).
    pub fn tied_output(&self) -> bool {
        self.tied
    }

    /// Bytes of weights one decode step reads: every projection and the output head once
    /// (the embedding contributes one row).
    pub fn weight_bytes_per_token(&self) -> usize {
        let projections: usize = self
            .blocks
            .iter()
            .flat_map(|b| [b.wq, b.wk, b.wv, b.wo, b.w_gate, b.w_up, b.w_down])
            .map(|m| m.bytes().len())
            .sum();
        projections + self.output.bytes().len()
    }

    /// An empty cache for `capacity` positions of `kind`.
    ///
    /// # Errors
    ///
    /// [`ModelError::Kernel`] when the cache cannot be allocated.
    pub fn cache(&self, kind: CacheKind, capacity: usize) -> Result<LlamaCache, ModelError> {
        let c = &self.config;
        let mut layers = Vec::new();
        layers
            .try_reserve_exact(c.blocks)
            .map_err(|_| KernelError::Scratch {
                op: "kv_cache",
                elements: c.blocks,
            })?;
        for _ in 0..c.blocks {
            layers.push(match kind {
                CacheKind::Positional => {
                    LayerCache::Positional(KvCache::new(1, c.kv_heads, capacity, c.head_dim)?)
                }
                CacheKind::Append => LayerCache::Append {
                    k: Tensor::zeros(alloc::vec![1, c.kv_heads, 0, c.head_dim])?,
                    v: Tensor::zeros(alloc::vec![1, c.kv_heads, 0, c.head_dim])?,
                },
            });
        }
        Ok(LlamaCache {
            layers,
            capacity,
            len: 0,
            step: StepBuffers::new(c)?,
            prefill: PrefillBuffers::default(),
            times: OpTimes::default(),
        })
    }

    /// Runs `tokens` at positions `cache.len()..` through the model, appends their keys and
    /// values to `cache`, and returns the logits of `logits` of them: the last token's
    /// `[1, vocab]`, or every token's `[tokens.len(), vocab]`.
    ///
    /// Every op runs under `schedule`; the result is bit-identical under every schedule. The
    /// kernels are the selected variant's ([`KernelConfig::selected`]);
    /// [`forward_with`](Self::forward_with) takes a given one.
    ///
    /// Every op writes into buffers the cache keeps, grown to the longest call so far and
    /// reused by every layer, so a call no longer than an earlier one on the same cache
    /// allocates only the logits it returns (and, for [`Logits::All`], the output head's
    /// product before it is transposed into them, as large as they are).
    ///
    /// # Errors
    ///
    /// [`ModelError::TokenOutOfRange`], [`ModelError::CacheFull`] (checked before anything
    /// is computed), [`ModelError::Kernel`] when memory cannot be had.
    pub fn forward(
        &self,
        tokens: &[u32],
        cache: &mut LlamaCache,
        logits: Logits,
        mode: Activations,
        schedule: &dyn Schedule,
    ) -> Result<Tensor, ModelError> {
        let config = KernelConfig::selected();
        self.forward_with(&config, tokens, cache, logits, mode, schedule)
    }

    /// [`forward`](Self::forward) with a given [`KernelConfig`]: every op runs `config`'s
    /// variant, in its [`Precision`](crate::Precision). In
    /// [`Precision::Portable`](crate::Precision::Portable) (the default) the logits are the
    /// same bits under every variant and on every target.
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn forward_with(
        &self,
        config: &KernelConfig,
        tokens: &[u32],
        cache: &mut LlamaCache,
        logits: Logits,
        mode: Activations,
        schedule: &dyn Schedule,
    ) -> Result<Tensor, ModelError> {
        let c = &self.config;
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= c.vocab) {
            return Err(ModelError::TokenOutOfRange { id, vocab: c.vocab });
        }
        if cache.layers.len() != c.blocks || tokens.len() > cache.capacity.saturating_sub(cache.len)
        {
            return Err(ModelError::CacheFull {
                len: cache.len,
                adding: tokens.len(),
                capacity: cache.capacity,
            });
        }
        let (s, hd) = (tokens.len(), c.head_dim);
        if s == 0 {
            return Ok(Tensor::zeros(alloc::vec![0, c.vocab])?);
        }
        let (d, ffn) = (c.dim, c.ffn);
        let (nq, nkv) = (c.heads * hd, c.kv_heads * hd);
        let nqkv = nq + 2 * nkv;
        let offset = cache.len;
        let causal = SdpaOptions {
            scale: None,
            causal: true,
        };
        let LlamaCache {
            layers,
            step,
            prefill: b,
            times,
            ..
        } = cache;
        b.fit(c, s)?;
        let x = &mut b.x[..s * d];
        quant_embedding_rows_into(config, tokens, &self.embd, schedule, x)?;
        // The rotary angles of this call's positions, once for every layer's queries and keys.
        b.angles.clear();
        push_angles(offset, s, &step.inv_freq, &mut b.angles);
        for (blk, layer) in self.blocks.iter().zip(layers.iter_mut()) {
            let (x, h) = (&mut b.x[..s * d], &mut b.h[..s * d]);
            rms_norm_rows_into(config, x, blk.attn_norm.data(), c.rms_eps, schedule, h)?;
            // One region (and one quantization of `h`) for the three projections.
            let qkv = [blk.wq, blk.wk, blk.wv];
            let cols = &mut b.cols[..s * nqkv];
            b.linear.product(config, h, d, &qkv, mode, schedule, cols)?;
            // Each head's `hd` columns of `s` values become its `[s, hd]` rows: the queries,
            // keys and values as `[heads, s, hd]` blocks, one after another.
            let heads = &mut b.heads[..s * nqkv];
            for (from, to) in cols
                .chunks_exact(s * hd)
                .zip(heads.chunks_exact_mut(s * hd))
            {
                transpose_into(from, s, hd, to);
            }
            let (q, rest) = heads.split_at(s * nq);
            let (k, v) = rest.split_at(s * nkv);
            let angles = &b.angles;
            let (rq, rk) = (&mut b.q[..s * nq], &mut b.k[..s * nkv]);
            rope_interleaved_rows_into(config, q, s, hd, angles, schedule, rq)?;
            rope_interleaved_rows_into(config, k, s, hd, angles, schedule, rk)?;
            let t = Instant::now();
            layer.append_compact(rk, v, s)?;
            let t = times.kv_cache_since(t);
            let ([keys, values], len, capacity) = layer.buffers();
            let dims = SdpaDims {
                batch: 1,
                heads: c.heads,
                kv_heads: c.kv_heads,
                q_len: s,
                kv_len: len,
                head_dim: hd,
            };
            let q = Heads::raw(rq, 0, s * nq, s * hd);
            let (k, v) = (
                Heads::raw(keys, 0, capacity * nkv, capacity * hd),
                Heads::raw(values, 0, capacity * nkv, capacity * hd),
            );
            let attn = &mut b.attn[..s * nq];
            attend_heads(config, &dims, [&q, &k, &v], None, &causal, attn, schedule)?;
            times.attention += t.elapsed();
            // [heads, s, hd] to the rows [s, heads·hd] the output projection reads (in `h`,
            // whose normed rows the projections above have read: `heads·hd` is the width).
            for (hh, head) in attn.chunks_exact(s * hd).enumerate() {
                for (i, row) in head.chunks_exact(hd).enumerate() {
                    h[i * nq + hh * hd..i * nq + (hh + 1) * hd].copy_from_slice(row);
                }
            }
            let cols = &mut b.cols[..s * d];
            b.linear
                .product(config, h, nq, &[blk.wo], mode, schedule, cols)?;
            add_columns_into(config, x, cols, s, schedule)?;
            rms_norm_rows_into(config, x, blk.ffn_norm.data(), c.rms_eps, schedule, h)?;
            let gate_up = [blk.w_gate, blk.w_up];
            let cols = &mut b.cols[..s * 2 * ffn];
            b.linear
                .product(config, h, d, &gate_up, mode, schedule, cols)?;
            let (gate, up) = cols.split_at(s * ffn);
            let act = &mut b.act[..s * ffn];
            silu_mul_columns_into(config, gate, up, s, schedule, act)?;
            let cols = &mut b.cols[..s * d];
            b.linear
                .product(config, act, ffn, &[blk.w_down], mode, schedule, cols)?;
            add_columns_into(config, x, cols, s, schedule)?;
        }
        cache.len += s;
        let b = &mut cache.prefill;
        let m = match logits {
            Logits::Last => 1,
            Logits::All => s,
        };
        let (x, h) = (&b.x[(s - m) * d..s * d], &mut b.h[..m * d]);
        rms_norm_rows_into(config, x, self.output_norm.data(), c.rms_eps, schedule, h)?;
        let mut out = Tensor::zeros(alloc::vec![m, c.vocab])?;
        let head = [self.output];
        if m == 1 {
            // One row's column-major product is the row.
            b.linear
                .product(config, h, d, &head, mode, schedule, out.data_mut())?;
        } else {
            // As large as the output: made for this call, not kept with the cache.
            let mut cols = scratch("quant_linear", m.saturating_mul(c.vocab))?;
            b.linear
                .product(config, h, d, &head, mode, schedule, &mut cols)?;
            transpose_into(&cols, m, c.vocab, out.data_mut());
        }
        Ok(out)
    }

    /// One decode step: `token` at position `cache.len()` through the model, its keys and
    /// values appended to `cache`, and the logits `[vocab]` returned from a buffer the cache
    /// holds — the bits of [`forward`](Self::forward)`(&[token], cache, Logits::Last, ..)`.
    ///
    /// Every product, attention and norm writes into buffers made with the cache, so once the
    /// first step has grown the activations' scratch (and each worker thread its attention
    /// scratch), a step on a [`CacheKind::Positional`] cache allocates nothing. An
    /// [`CacheKind::Append`] cache still reallocates its keys and values, as it is meant to.
    /// The kernels are the selected variant's; [`step_with`](Self::step_with) takes a given one.
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn step<'c>(
        &self,
        token: u32,
        cache: &'c mut LlamaCache,
        mode: Activations,
        schedule: &dyn Schedule,
    ) -> Result<&'c [f32], ModelError> {
        let config = KernelConfig::selected();
        self.step_with(&config, token, cache, mode, schedule)
    }

    /// [`step`](Self::step) with a given [`KernelConfig`]: the bits of
    /// [`forward_with`](Self::forward_with)`(config, &[token], cache, Logits::Last, ..)`.
    ///
    /// # Errors
    ///
    /// As [`forward`](Self::forward).
    pub fn step_with<'c>(
        &self,
        config: &KernelConfig,
        token: u32,
        cache: &'c mut LlamaCache,
        mode: Activations,
        schedule: &dyn Schedule,
    ) -> Result<&'c [f32], ModelError> {
        let c = &self.config;
        if token as usize >= c.vocab {
            return Err(ModelError::TokenOutOfRange {
                id: token,
                vocab: c.vocab,
            });
        }
        if cache.layers.len() != c.blocks || cache.len >= cache.capacity {
            return Err(ModelError::CacheFull {
                len: cache.len,
                adding: 1,
                capacity: cache.capacity,
            });
        }
        let (hd, pos) = (c.head_dim, cache.len);
        let (nq, nkv) = (c.heads * hd, c.kv_heads * hd);
        let LlamaCache {
            layers,
            step: b,
            times,
            ..
        } = cache;
        quant_embedding_row_into(token, &self.embd, &mut b.x)?;
        b.angles.clear();
        push_angles(pos, 1, &b.inv_freq, &mut b.angles);
        let causal = SdpaOptions {
            scale: None,
            causal: true,
        };
        for (blk, layer) in self.blocks.iter().zip(layers.iter_mut()) {
            rms_norm_row(&b.x, blk.attn_norm.data(), c.rms_eps, &mut b.h);
            let qkv = [blk.wq, blk.wk, blk.wv];
            quant_linear_row_into(config, &b.h, &qkv, mode, schedule, &mut b.q8, &mut b.qkv)?;
            let (q, rest) = b.qkv.split_at(nq);
            let (k, v) = rest.split_at(nkv);
            for (x, o) in q.chunks_exact(hd).zip(b.q.chunks_exact_mut(hd)) {
                rope_interleaved_row(x, &b.angles, o);
            }
            for (x, o) in k.chunks_exact(hd).zip(b.k.chunks_exact_mut(hd)) {
                rope_interleaved_row(x, &b.angles, o);
            }
            let t = Instant::now();
            layer.append_position(&b.k, v)?;
            let t = times.kv_cache_since(t);
            let ([keys, values], len, capacity) = layer.buffers();
            let dims = SdpaDims {
                batch: 1,
                heads: c.heads,
                kv_heads: c.kv_heads,
                q_len: 1,
                kv_len: len,
                head_dim: hd,
            };
            let q = Heads::raw(&b.q, 0, nq, hd);
            let (k, v) = (
                Heads::raw(keys, 0, capacity * nkv, capacity * hd),
                Heads::raw(values, 0, capacity * nkv, capacity * hd),
            );
            attend_heads(
                config,
                &dims,
                [&q, &k, &v],
                None,
                &causal,
                &mut b.attn,
                schedule,
            )?;
            times.attention += t.elapsed();
            let wo = [blk.wo];
            quant_linear_row_into(config, &b.attn, &wo, mode, schedule, &mut b.q8, &mut b.y)?;
            add_into(&mut b.x, &b.y);
            rms_norm_row(&b.x, blk.ffn_norm.data(), c.rms_eps, &mut b.h);
            let gate_up = [blk.w_gate, blk.w_up];
            let out = &mut b.gate_up;
            quant_linear_row_into(config, &b.h, &gate_up, mode, schedule, &mut b.q8, out)?;
            let (gate, up) = b.gate_up.split_at(c.ffn);
            silu_mul_row(gate, up, &mut b.act);
            let down = [blk.w_down];
            quant_linear_row_into(config, &b.act, &down, mode, schedule, &mut b.q8, &mut b.y)?;
            add_into(&mut b.x, &b.y);
        }
        cache.len += 1;
        rms_norm_row(&b.x, self.output_norm.data(), c.rms_eps, &mut b.h);
        let head = [self.output];
        quant_linear_row_into(
            config,
            &b.h,
            &head,
            mode,
            schedule,
            &mut b.q8,
            &mut b.logits,
        )?;
        Ok(&b.logits)
    }
}

/// `x += y`, one IEEE `+` each: [`add_broadcast`]'s bits for two rows of one shape.
fn add_into(x: &mut [f32], y: &[f32]) {
    for (x, &y) in x.iter_mut().zip(y) {
        *x += y;
    }
}

/// The buffers of one [`Llama::step`], made with its cache: the residual stream, the
/// projections' outputs, the rotated queries and keys, the logits, and the q8 activations.
struct StepBuffers {
    x: Vec<f32>,
    h: Vec<f32>,
    qkv: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    attn: Vec<f32>,
    y: Vec<f32>,
    gate_up: Vec<f32>,
    act: Vec<f32>,
    logits: Vec<f32>,
    inv_freq: Vec<f64>,
    angles: Vec<[f32; 2]>,
    q8: QScratch,
}

impl StepBuffers {
    fn new(c: &LlamaConfig) -> Result<Self, ModelError> {
        let (hd, d) = (c.head_dim, c.dim);
        let sizes = [
            ("x", d),
            ("qkv", (c.heads + 2 * c.kv_heads).saturating_mul(hd)),
            ("q", c.heads.saturating_mul(hd)),
            ("k", c.kv_heads.saturating_mul(hd)),
            ("gate_up", c.ffn.saturating_mul(2)),
            ("act", c.ffn),
            ("logits", c.vocab),
        ];
        let zeros = |op: &'static str, n: usize| -> Result<Vec<f32>, ModelError> {
            let mut v = Vec::new();
            v.try_reserve_exact(n)
                .map_err(|_| KernelError::Scratch { op, elements: n })?;
            v.resize(n, 0.0);
            Ok(v)
        };
        let [x, qkv, q, k, gate_up, act, logits] = sizes.map(|(op, n)| zeros(op, n));
        let mut angles = Vec::new();
        angles
            .try_reserve_exact(hd / 2)
            .map_err(|_| KernelError::Scratch {
                op: "rope",
                elements: hd / 2,
            })?;
        Ok(Self {
            h: zeros("h", d)?,
            y: zeros("y", d)?,
            attn: zeros("attn", c.heads.saturating_mul(hd))?,
            x: x?,
            qkv: qkv?,
            q: q?,
            k: k?,
            gate_up: gate_up?,
            act: act?,
            logits: logits?,
            inv_freq: inv_frequencies(hd, c.rope_base).ok_or(KernelError::Scratch {
                op: "rope",
                elements: hd / 2,
            })?,
            angles,
            q8: QScratch::default(),
        })
    }
}

/// The buffers of one [`Llama::forward`], made with its cache when the first call needs them
/// and grown to the longest call since: every layer, and every later call of no more tokens,
/// writes into them instead of allocating (and the allocator paging) tensors per op. Each is
/// `positions` rows of its width, a call of `s` tokens using the first `s`.
#[derive(Default)]
struct PrefillBuffers {
    /// The rows they hold.
    positions: usize,
    /// The residual stream `[s, dim]`.
    x: Vec<f32>,
    /// The rows a projection reads `[s, dim]`: the normed stream, or the attention's heads side
    /// by side (`heads·hd` is `dim`).
    h: Vec<f32>,
    /// A projection's column-major output: its columns of `s` values, one after another.
    cols: Vec<f32>,
    /// The query, key and value heads `[heads + 2·kv_heads, s, hd]`, each head's rows compact.
    heads: Vec<f32>,
    /// The rotated queries `[heads, s, hd]`.
    q: Vec<f32>,
    /// The rotated keys `[kv_heads, s, hd]`.
    k: Vec<f32>,
    /// The attention's output `[heads, s, hd]`.
    attn: Vec<f32>,
    /// The gated MLP's hidden rows `[s, ffn]`.
    act: Vec<f32>,
    /// The rotary angles of the call's positions.
    angles: Vec<[f32; 2]>,
    linear: LinearScratch,
}

impl PrefillBuffers {
    /// Grows the buffers to hold `s` positions of `c` (nothing when they already do).
    fn fit(&mut self, c: &LlamaConfig, s: usize) -> Result<(), ModelError> {
        if s <= self.positions {
            return Ok(());
        }
        let hd = c.head_dim;
        let nq = c.heads.saturating_mul(hd);
        let nkv = c.kv_heads.saturating_mul(hd);
        let nqkv = nq.saturating_add(nkv.saturating_mul(2));
        let widest = nqkv.max(c.ffn.saturating_mul(2)).max(c.dim);
        let buffers = [
            (&mut self.x, "x", c.dim),
            (&mut self.h, "h", c.dim),
            (&mut self.cols, "quant_linear", widest),
            (&mut self.heads, "qkv", nqkv),
            (&mut self.q, "rope", nq),
            (&mut self.k, "rope", nkv),
            (&mut self.attn, "sdpa", nq),
            (&mut self.act, "silu_mul", c.ffn),
        ];
        for (v, op, width) in buffers {
            let n = s.saturating_mul(width);
            if v.len() < n {
                v.try_reserve_exact(n - v.len())
                    .map_err(|_| KernelError::Scratch { op, elements: n })?;
                v.resize(n, 0.0);
            }
        }
        let pairs = s.saturating_mul(hd / 2);
        self.angles.clear();
        self.angles
            .try_reserve_exact(pairs)
            .map_err(|_| KernelError::Scratch {
                op: "rope",
                elements: pairs,
            })?;
        let rows = &mut self.linear.rows;
        rows.try_reserve_exact(s)
            .map_err(|_| KernelError::Scratch {
                op: "quant_linear",
                elements: s,
            })?;
        self.positions = s;
        Ok(())
    }
}

/// What a product of many rows keeps between calls: the list of its input rows and its
/// quantized activations, both grown to the largest call and then reused.
#[derive(Default)]
struct LinearScratch {
    /// Empty between calls: only its allocation is kept (see [`recycle`]).
    rows: Vec<&'static [f32]>,
    q8: QScratch,
}

impl LinearScratch {
    /// The rows of `x` (`k` values each) times `ws`, column-major into `out`
    /// ([`quant_linear_rows_into`]): the bits of [`quant_linear_many`](crate::quant_linear_many).
    #[allow(clippy::too_many_arguments)]
    fn product(
        &mut self,
        config: &KernelConfig,
        x: &[f32],
        k: usize,
        ws: &[QMatrix<'_>],
        mode: Activations,
        schedule: &dyn Schedule,
        out: &mut [f32],
    ) -> Result<(), ModelError> {
        let m = x.len().checked_div(k).unwrap_or(0);
        if m.saturating_mul(k) != x.len() {
            return Err(KernelError::Shape(ShapeError::ElementwiseMismatch {
                op: "quant_linear",
                a: alloc::vec![m, k],
                b: alloc::vec![x.len()],
            })
            .into());
        }
        let mut rows = recycle(core::mem::take(&mut self.rows));
        let done = rows
            .try_reserve_exact(m)
            .map_err(|_| KernelError::Scratch {
                op: "quant_linear",
                elements: m,
            })
            .and_then(|()| {
                rows.extend(x.chunks_exact(k.max(1)));
                quant_linear_rows_into(config, &rows, ws, mode, schedule, &mut self.q8, out)
            });
        self.rows = recycle(rows);
        Ok(done?)
    }
}

/// `v` emptied, as a list of rows of another lifetime in the same allocation: a
/// [`LinearScratch`] keeps the list's memory between calls, though the rows it lists live only
/// for one. Collecting an emptied `Vec`'s iterator into a `Vec` of an element of the same size
/// reuses its allocation (the standard library collects such iterators in place).
fn recycle<'b>(mut v: Vec<&[f32]>) -> Vec<&'b [f32]> {
    v.clear();
    // An empty list: the closure never runs, it only names the new element type.
    v.into_iter().map(|_| -> &'b [f32] { &[] }).collect()
}

/// Time spent in attention and in the K/V cache's appends, summed over every call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct OpTimes {
    attention: Duration,
    kv_cache: Duration,
}

impl OpTimes {
    /// Adds the time since `t` to the cache's, and returns now.
    fn kv_cache_since(&mut self, t: Instant) -> Instant {
        let now = Instant::now();
        self.kv_cache += now - t;
        now
    }
}

/// Which rows' logits [`Llama::forward`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// The last token's: what generation needs.
    Last,
    /// Every token's (teacher forcing, perplexity).
    All,
}

/// How a [`LlamaCache`] keeps past keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheKind {
    /// A preallocated [`KvCache`] per layer, appended in place and read through views.
    Positional,
    /// Tensors that grow by reallocating and copying on every append (what concatenating the
    /// cache does): the baseline the positional cache is measured against.
    Append,
}

enum LayerCache {
    Positional(KvCache),
    Append { k: Tensor, v: Tensor },
}

impl LayerCache {
    fn append(&mut self, k: TensorView<'_>, v: TensorView<'_>) -> Result<(), KernelError> {
        match self {
            LayerCache::Positional(c) => c.append(k, v),
            LayerCache::Append { k: ks, v: vs } => {
                *ks = grow(ks, &k)?;
                *vs = grow(vs, &v)?;
                Ok(())
            }
        }
    }

    /// [`append`](Self::append) of one position, `k` and `v` `[nKV·hd]` each.
    fn append_position(&mut self, k: &[f32], v: &[f32]) -> Result<(), KernelError> {
        match self {
            LayerCache::Positional(c) => c.append_position(k, v),
            LayerCache::Append { .. } => self.append_compact(k, v, 1),
        }
    }

    /// [`append`](Self::append) of `t` positions, `k` and `v` compact `[nKV, t, hd]` each:
    /// without a view, so a positional cache allocates nothing.
    fn append_compact(&mut self, k: &[f32], v: &[f32], t: usize) -> Result<(), KernelError> {
        match self {
            LayerCache::Positional(c) => c.append_compact(k, v, t),
            LayerCache::Append { k: ks, .. } => {
                let [_, kv, _, hd] = *ks.shape() else {
                    return Ok(());
                };
                let shape = || alloc::vec![1, kv, t, hd];
                let strides = || alloc::vec![kv * t * hd, t * hd, hd, 1];
                let k = TensorView::strided(k, shape(), strides(), 0)?;
                let v = TensorView::strided(v, shape(), strides(), 0)?;
                self.append(k, v)
            }
        }
    }

    /// The key and value buffers `[1, nKV, capacity, hd]`, the positions filled, and the
    /// capacity.
    fn buffers(&self) -> ([&[f32]; 2], usize, usize) {
        match self {
            LayerCache::Positional(c) => {
                let (k, v) = c.buffers();
                ([k, v], c.len(), c.capacity())
            }
            LayerCache::Append { k, v } => {
                let len = k.shape().get(2).copied().unwrap_or(0);
                ([k.data(), v.data()], len, len)
            }
        }
    }

    fn keys_values(&self) -> (TensorView<'_>, TensorView<'_>) {
        match self {
            LayerCache::Positional(c) => (c.keys(), c.values()),
            LayerCache::Append { k, v } => (k.view(), v.view()),
        }
    }
}

/// `old` `[1, nKV, len, hd]` and `new` `[1, nKV, t, hd]` concatenated along the positions.
fn grow(old: &Tensor, new: &TensorView<'_>) -> Result<Tensor, KernelError> {
    let [b, kv, len, hd] = *old.shape() else {
        return Ok(old.clone());
    };
    let t = new.shape()[2];
    let new = new.to_tensor()?;
    let mut out = Tensor::zeros(alloc::vec![b, kv, len + t, hd])?;
    for bh in 0..b * kv {
        let dst = &mut out.data_mut()[bh * (len + t) * hd..(bh + 1) * (len + t) * hd];
        dst[..len * hd].copy_from_slice(&old.data()[bh * len * hd..(bh + 1) * len * hd]);
        dst[len * hd..].copy_from_slice(&new.data()[bh * t * hd..(bh + 1) * t * hd]);
    }
    Ok(out)
}

/// The keys and values of every layer of a [`Llama`], for one sequence.
pub struct LlamaCache {
    layers: Vec<LayerCache>,
    capacity: usize,
    len: usize,
    step: StepBuffers,
    prefill: PrefillBuffers,
    times: OpTimes,
}

impl fmt::Debug for LlamaCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlamaCache")
            .field("layers", &self.layers.len())
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl LlamaCache {
    /// Positions cached.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is cached.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions it can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Blocks it caches.
    pub(super) fn blocks(&self) -> usize {
        self.layers.len()
    }

    /// Block `i`'s cached keys and values, `[1, nKV, len, hd]` each (no copy).
    ///
    /// # Panics
    ///
    /// When `i` is not below [`blocks`](Self::blocks).
    pub(super) fn block_keys_values(&self, i: usize) -> (TensorView<'_>, TensorView<'_>) {
        self.layers[i].keys_values()
    }

    /// Wall-clock time spent in attention, summed over every [`Llama::forward`] and
    /// [`Llama::step`] on this cache.
    pub fn attention_time(&self) -> Duration {
        self.times.attention
    }

    /// Wall-clock time spent appending keys and values to this cache (for
    /// [`CacheKind::Append`], reallocating and copying them), summed as
    /// [`attention_time`](Self::attention_time).
    pub fn kv_cache_time(&self) -> Duration {
        self.times.kv_cache
    }
}
