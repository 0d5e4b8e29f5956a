//! A Llama-shaped decoder on the crate's scheduled ops, with deterministic synthetic weights.
//!
//! Shared by `examples/decode.rs` and `tests/decoder_model.rs` (included with `#[path]`), so
//! the test runs the very code the example measures. Only the library's public API is used.

use std::time::{Duration, Instant};

use skainet_schedule::{
    add_broadcast, embedding, rms_norm, rope, scaled_dot_product_attention, silu_mul, KernelError,
    KvCache, Schedule, SdpaOptions, Tensor, TensorView,
};

/// The dimensions of the decoder.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub layers: usize,
    pub hidden: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub mlp: usize,
    pub vocab: usize,
    pub rope_theta: f32,
    pub norm_eps: f32,
}

impl Config {
    /// SmolLM2-135M: 30 layers, hidden 576, 9 query heads over 3 K/V heads of 64, MLP 1536,
    /// vocabulary 49152, RoPE θ 100000 (the base its GGUF file states).
    pub fn smollm2_135m() -> Self {
        Self {
            layers: 30,
            hidden: 576,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            mlp: 1536,
            vocab: 49152,
            rope_theta: 100_000.0,
            norm_eps: 1e-5,
        }
    }

    /// Two layers of small dimensions, for tests: still large enough that the LM head and the
    /// prefill's products and attention open regions under the default thresholds.
    pub fn tiny() -> Self {
        Self {
            layers: 2,
            hidden: 64,
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
            mlp: 256,
            vocab: 4096,
            rope_theta: 10_000.0,
            norm_eps: 1e-5,
        }
    }
}

/// The weights of one block; projections are stored `[out, in]`, as checkpoints store a linear
/// layer (`y = x · Wᵀ`). The query, key and value projections are one matrix
/// `[(H + 2·nKV)·hd, d]`, and the MLP's gate and up projections (`W1`, `W3`) one matrix
/// `[2·mlp, d]`: one product (one region) each, whose
/// column blocks the next ops read as views. Each output column is computed exactly as in a
/// product with its own matrix, so the fusion changes no bit.
pub struct Layer {
    attn_norm: Tensor,
    wqkv: Tensor,
    wo: Tensor,
    mlp_norm: Tensor,
    w13: Tensor,
    w2: Tensor,
}

/// The decoder: embedding, blocks, final norm, LM head.
pub struct Model {
    pub config: Config,
    embed: Tensor,
    layers: Vec<Layer>,
    final_norm: Tensor,
    lm_head: Tensor,
}

/// Deterministic values in `[-scale, scale)` (a 32-bit LCG per tensor), in memory advised for
/// transparent huge pages when `huge` (the values are the same either way).
fn synthetic(shape: Vec<usize>, seed: u32, scale: f32, huge: bool) -> Tensor {
    let zeros = if huge {
        Tensor::zeros_in_huge_pages
    } else {
        Tensor::zeros
    };
    let mut t = zeros(shape).expect("weights fit in memory");
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    for x in t.data_mut() {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *x = ((state >> 8) as f32 / (1u32 << 23) as f32 - 1.0) * scale;
    }
    t
}

/// A projection `[fan_out, fan_in]` scaled so activations keep unit size.
fn projection(fan_in: usize, fan_out: usize, seed: u32, huge: bool) -> Tensor {
    let scale = (3.0 / fan_in as f32).sqrt();
    synthetic(vec![fan_out, fan_in], seed, scale, huge)
}

/// Norm weights near 1.
fn norm_weight(d: usize, seed: u32) -> Tensor {
    let noise = synthetic(vec![d], seed, 0.1, false);
    Tensor::from_fn(vec![d], |i| 1.0 + noise.data()[i]).expect("small")
}

impl Model {
    /// Bytes of weights one decode step reads: every projection and the LM head once (the
    /// embedding is gathered, one row). What bounds a decode step on a CPU.
    pub fn weight_bytes_per_token(&self) -> usize {
        let projections = self.layers.iter().map(|l| {
            [&l.wqkv, &l.wo, &l.w13, &l.w2]
                .iter()
                .map(|w| w.len())
                .sum::<usize>()
        });
        (projections.sum::<usize>() + self.lm_head.len()) * core::mem::size_of::<f32>()
    }

    /// The model with deterministic synthetic weights (no downloads): the same `config` always
    /// gives the same bits. With `huge_pages`, the projections, the LM head and the embedding
    /// are allocated in memory advised for transparent huge pages (see
    /// `Tensor::zeros_in_huge_pages`): the same bits, read faster.
    pub fn synthetic(config: Config, huge_pages: bool) -> Self {
        let huge = huge_pages;
        let Config {
            hidden: d,
            heads,
            kv_heads,
            head_dim: hd,
            mlp,
            vocab,
            ..
        } = config;
        let layers = (0..config.layers as u32)
            .map(|l| {
                let s = 100 + l * 16;
                Layer {
                    attn_norm: norm_weight(d, s),
                    wqkv: projection(d, (heads + 2 * kv_heads) * hd, s + 1, huge),
                    wo: projection(heads * hd, d, s + 4, huge),
                    mlp_norm: norm_weight(d, s + 5),
                    w13: projection(d, 2 * mlp, s + 6, huge),
                    w2: projection(mlp, d, s + 8, huge),
                }
            })
            .collect();
        Self {
            embed: synthetic(vec![vocab, d], 1, 1.0, huge),
            layers,
            final_norm: norm_weight(d, 2),
            lm_head: projection(d, vocab, 3, huge),
            config,
        }
    }

    /// Empty caches, one per layer, of `C`'s kind.
    pub fn caches<C: Cache>(&self, capacity: usize) -> Result<Vec<C>, KernelError> {
        (0..self.config.layers)
            .map(|_| C::new(self.config.kv_heads, capacity, self.config.head_dim))
            .collect()
    }

    /// Runs `tokens` (at positions `caches[..].len()..`) through the model, appending their
    /// keys and values to `caches`, and returns the logits `[1, vocab]` of the last token.
    pub fn forward<C: Cache>(
        &self,
        tokens: &[usize],
        caches: &mut [C],
        schedule: &dyn Schedule,
        timing: &mut Timing,
    ) -> Result<Tensor, KernelError> {
        let c = &self.config;
        let (s, d, hd) = (tokens.len(), c.hidden, c.head_dim);
        let offset = caches.first().map_or(0, C::len);
        let mut x = embedding(&self.embed, tokens, schedule)?;
        let causal = SdpaOptions {
            scale: None,
            causal: true,
        };
        for (layer, cache) in self.layers.iter().zip(caches.iter_mut()) {
            let h = rms_norm(&x, &layer.attn_norm, c.norm_eps, schedule)?;
            // [s, (H + 2·nKV)·hd]: q, k and v side by side in each row. RoPE and the cache
            // read each block as [1, heads, s, hd] through a strided view, without a copy.
            let qkv = timed_linear(&h, &layer.wqkv, schedule, timing)?;
            let (k_at, v_at) = (c.heads * hd, (c.heads + c.kv_heads) * hd);
            let q = heads_view(&qkv, 0, c.heads, hd)?;
            let k = heads_view(&qkv, k_at, c.kv_heads, hd)?;
            let v = heads_view(&qkv, v_at, c.kv_heads, hd)?;
            let q = rope(q, offset, c.rope_theta, schedule)?;
            let k = rope(k, offset, c.rope_theta, schedule)?;
            let t = Instant::now();
            cache.append(k.view(), v)?;
            let (keys, values) = (cache.keys(), cache.values());
            timing.kv_cache += t.elapsed();
            let t = Instant::now();
            let attn = scaled_dot_product_attention(&q, keys, values, None, &causal, schedule)?;
            timing.attention += t.elapsed();
            // Back to [s, heads·hd] for the output projection.
            let attn = attn
                .view()
                .permute(&[0, 2, 1, 3])?
                .to_tensor()?
                .reshape(vec![s, c.heads * hd])?;
            x = add_broadcast(
                &x,
                &timed_linear(&attn, &layer.wo, schedule, timing)?,
                schedule,
            )?;
            let h = rms_norm(&x, &layer.mlp_norm, c.norm_eps, schedule)?;
            // [s, 2·mlp]: the gate (x·W1) and up (x·W3) halves of each row, read as views.
            let gate_up = timed_linear(&h, &layer.w13, schedule, timing)?;
            let (gate, up) = halves(&gate_up, c.mlp)?;
            let act = silu_mul(gate, up, schedule)?;
            x = add_broadcast(
                &x,
                &timed_linear(&act, &layer.w2, schedule, timing)?,
                schedule,
            )?;
        }
        let last = x.view().narrow(0, s.saturating_sub(1), 1)?;
        let h = rms_norm(last, &self.final_norm, c.norm_eps, schedule)?;
        debug_assert_eq!(h.shape(), [1, d]);
        timed_linear(&h, &self.lm_head, schedule, timing)
    }

    /// Greedy generation: the prompt in one forward pass (prefill), then one token at a time.
    /// Returns `new_tokens` tokens (the first from the prefill's logits, the others from
    /// `new_tokens - 1` decode steps), the last logits, and the timings.
    pub fn generate<C: Cache>(
        &self,
        prompt: &[usize],
        new_tokens: usize,
        schedule: &dyn Schedule,
        progress: &mut dyn FnMut(usize),
    ) -> Result<Generation, KernelError> {
        let mut caches: Vec<C> = self.caches(prompt.len() + new_tokens)?;
        let mut prefill_timing = Timing::default();
        let t = Instant::now();
        let mut logits = self.forward(prompt, &mut caches, schedule, &mut prefill_timing)?;
        let prefill = t.elapsed();
        let mut tokens = vec![argmax(logits.data())];
        let mut timing = Timing::default();
        let t = Instant::now();
        while tokens.len() < new_tokens {
            progress(tokens.len());
            let last = tokens[tokens.len() - 1];
            logits = self.forward(&[last], &mut caches, schedule, &mut timing)?;
            tokens.push(argmax(logits.data()));
        }
        Ok(Generation {
            tokens,
            logits,
            prefill,
            decode: t.elapsed(),
            decode_steps: new_tokens.saturating_sub(1),
            timing,
        })
    }
}

/// The one place a decoder multiplies by a weight: `x [rows, in] · wᵀ` with `w [out, in]`,
/// read in place. One row (a decode step) is split across tasks by output column, more rows by
/// output tile; the order depends only on the shapes, so every schedule gives the same bits.
pub fn linear(x: &Tensor, w: &Tensor, schedule: &dyn Schedule) -> Result<Tensor, KernelError> {
    skainet_schedule::linear(x, w, schedule)
}

/// [`linear`], its time added to `timing.projections`.
fn timed_linear(
    x: &Tensor,
    w: &Tensor,
    schedule: &dyn Schedule,
    timing: &mut Timing,
) -> Result<Tensor, KernelError> {
    let t = Instant::now();
    let y = linear(x, w, schedule);
    timing.projections += t.elapsed();
    y
}

/// The `heads·hd` columns of `t` `[s, width]` from column `start`, seen as
/// `[1, heads, s, hd]`.
fn heads_view(
    t: &Tensor,
    start: usize,
    heads: usize,
    hd: usize,
) -> Result<TensorView<'_>, KernelError> {
    let [s, width] = *t.shape() else {
        unreachable!("a projection's output is [s, width]")
    };
    let shape = vec![1, heads, s, hd];
    Ok(TensorView::strided(
        t.data(),
        shape,
        vec![s * width, hd, width, 1],
        start,
    )?)
}

/// The two halves `[s, n]` of each row of `t` `[s, 2·n]`.
fn halves(t: &Tensor, n: usize) -> Result<(TensorView<'_>, TensorView<'_>), KernelError> {
    let s = t.shape()[0];
    let half = |start| TensorView::strided(t.data(), vec![s, n], vec![2 * n, 1], start);
    Ok((half(0)?, half(n)?))
}

/// The index of the largest value (the first of equal ones); NaN never wins.
pub fn argmax(xs: &[f32]) -> usize {
    let mut best = 0;
    for (i, &x) in xs.iter().enumerate() {
        if x > xs[best] {
            best = i;
        }
    }
    best
}

/// FNV-1a over the bit patterns of `xs`: equal hashes for bit-identical logits.
pub fn bits_hash(xs: &[f32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in xs {
        for byte in x.to_bits().to_le_bytes() {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A fixed prompt of `len` token ids below `vocab`.
pub fn prompt(len: usize, vocab: usize) -> Vec<usize> {
    (0..len).map(|i| (i * 7919 + 13) % vocab).collect()
}

/// Time spent in attention, in the K/V cache (append plus reading the views), and in the
/// projections (every `linear`, LM head included: the weight streams).
#[derive(Debug, Default, Clone, Copy)]
pub struct Timing {
    pub attention: Duration,
    pub kv_cache: Duration,
    pub projections: Duration,
}

/// What [`Model::generate`] returns.
pub struct Generation {
    pub tokens: Vec<usize>,
    pub logits: Tensor,
    pub prefill: Duration,
    pub decode: Duration,
    pub decode_steps: usize,
    /// Attention, cache and projection time of the decode steps.
    pub timing: Timing,
}

/// A per-layer K/V cache of batch 1: where the keys and values of past positions live.
pub trait Cache: Sized {
    /// An empty cache.
    fn new(kv_heads: usize, capacity: usize, head_dim: usize) -> Result<Self, KernelError>;
    /// Adds `[1, nKV, t, hd]` keys and values after the filled positions.
    fn append(&mut self, k: TensorView<'_>, v: TensorView<'_>) -> Result<(), KernelError>;
    /// The filled keys `[1, nKV, len, hd]`.
    fn keys(&self) -> TensorView<'_>;
    /// The filled values `[1, nKV, len, hd]`.
    fn values(&self) -> TensorView<'_>;
    /// The filled positions.
    fn len(&self) -> usize;
}

/// The positional cache: the library's [`KvCache`], written in place.
impl Cache for KvCache {
    fn new(kv_heads: usize, capacity: usize, head_dim: usize) -> Result<Self, KernelError> {
        KvCache::new(1, kv_heads, capacity, head_dim)
    }
    fn append(&mut self, k: TensorView<'_>, v: TensorView<'_>) -> Result<(), KernelError> {
        KvCache::append(self, k, v)
    }
    fn keys(&self) -> TensorView<'_> {
        KvCache::keys(self)
    }
    fn values(&self) -> TensorView<'_> {
        KvCache::values(self)
    }
    fn len(&self) -> usize {
        KvCache::len(self)
    }
}

/// The naive cache: every append allocates tensors one position longer and copies the old
/// keys and values into them (what `torch.cat` on the cache does), O(len) per token.
pub struct AppendCache {
    k: Tensor,
    v: Tensor,
}

impl AppendCache {
    fn grow(old: &Tensor, new: &TensorView<'_>) -> Result<Tensor, KernelError> {
        let [b, kv, len, hd] = *old.shape() else {
            unreachable!("rank 4 by construction")
        };
        let t = new.shape()[2];
        let new = new.to_tensor()?;
        let mut out = Tensor::zeros(vec![b, kv, len + t, hd])?;
        for bh in 0..b * kv {
            let dst = &mut out.data_mut()[bh * (len + t) * hd..(bh + 1) * (len + t) * hd];
            dst[..len * hd].copy_from_slice(&old.data()[bh * len * hd..(bh + 1) * len * hd]);
            dst[len * hd..].copy_from_slice(&new.data()[bh * t * hd..(bh + 1) * t * hd]);
        }
        Ok(out)
    }
}

impl Cache for AppendCache {
    fn new(kv_heads: usize, _capacity: usize, head_dim: usize) -> Result<Self, KernelError> {
        let empty = || Tensor::zeros(vec![1, kv_heads, 0, head_dim]);
        Ok(Self {
            k: empty()?,
            v: empty()?,
        })
    }
    fn append(&mut self, k: TensorView<'_>, v: TensorView<'_>) -> Result<(), KernelError> {
        self.k = Self::grow(&self.k, &k)?;
        self.v = Self::grow(&self.v, &v)?;
        Ok(())
    }
    fn keys(&self) -> TensorView<'_> {
        self.k.view()
    }
    fn values(&self) -> TensorView<'_> {
        self.v.view()
    }
    fn len(&self) -> usize {
        self.k.shape()[2]
    }
}
