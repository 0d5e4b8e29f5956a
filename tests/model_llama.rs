#![cfg(all(feature = "model", feature = "parallel", not(feature = "loom")))]
//! The llama model read from GGUF: a tiny synthetic file built here (every schedule and cache
//! kind gives the same bits; every kind of wrong file is its own error), and the real model
//! (SmolLM2-135M-Instruct, Q4_1, as `scripts/fetch_model.sh` fetches it), whose greedy tokens
//! equal a float64 reference's.
//!
//! The real model's file is `$SKAINET_MODEL`, else `models/SmolLM2-135M-Instruct.Q4_1.gguf`;
//! without it those tests FAIL, saying to run `scripts/fetch_model.sh`. To leave them out on
//! purpose: `cargo test -- --skip real_model`.

#[path = "common/gguf.rs"]
mod writer;

#[path = "common/model_file.rs"]
mod model_file;

use model_file::model_path;
use std::sync::OnceLock;

use skainet_schedule::gguf::{Gguf, GgufFile};
use skainet_schedule::model::{CacheKind, Llama, Logits, ModelError, Sampler, Sampling};
use skainet_schedule::prelude::*;
use skainet_schedule::{
    cpu_kernels, dedicated, hardware, Activations, KernelConfig, Precision, Schedule, Sequential,
    Tensor,
};
use writer::{GgufWriter, TensorSpec, Val};

// ---- a tiny llama, written here ----

/// Dimensions of the tiny model: 2 blocks, width 64, 4 heads over 2 K/V heads of 16, FFN 96,
/// vocabulary 160 (every projection a whole number of 32-value blocks).
struct Tiny {
    blocks: u32,
    dim: u64,
    ffn: u64,
    heads: u32,
    kv_heads: u32,
    vocab: u64,
}

const TINY: Tiny = Tiny {
    blocks: 2,
    dim: 64,
    ffn: 96,
    heads: 4,
    kv_heads: 2,
    vocab: 160,
};

/// `n` deterministic f32 values in [-scale, scale), little-endian.
fn values(n: u64, seed: u32, scale: f32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    (0..n)
        .flat_map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((((state >> 8) as f32) / (1u32 << 23) as f32 - 1.0) * scale).to_le_bytes()
        })
        .collect()
}

/// Q8_0 blocks for `rows × cols` values (cols a multiple of 32): scale 1/64, quants from seed.
fn q8_0(rows: u64, cols: u64, seed: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for b in 0..rows * cols / 32 {
        out.extend(0x2400u16.to_le_bytes()); // f16 1/64
        out.extend((0..32u64).map(|i| ((b * 31 + i * 7 + u64::from(seed)) % 61) as u8 ^ 0x80));
    }
    out
}

/// The tiny model's file; `edit` may change its metadata and tensors first.
fn tiny_file(edit: impl FnOnce(&mut Vec<(String, Val)>, &mut Vec<TensorSpec>)) -> Vec<u8> {
    let t = TINY;
    let hd = t.dim / u64::from(t.heads);
    let mut kvs: Vec<(String, Val)> = vec![
        ("general.architecture".into(), Val::Str("llama".into())),
        ("llama.block_count".into(), Val::U32(t.blocks)),
        ("llama.embedding_length".into(), Val::U32(t.dim as u32)),
        ("llama.feed_forward_length".into(), Val::U32(t.ffn as u32)),
        ("llama.attention.head_count".into(), Val::U32(t.heads)),
        ("llama.attention.head_count_kv".into(), Val::U32(t.kv_heads)),
        ("llama.rope.freq_base".into(), Val::F32(100_000.0)),
        (
            "llama.attention.layer_norm_rms_epsilon".into(),
            Val::F32(1e-5),
        ),
        ("llama.context_length".into(), Val::U32(64)),
    ];
    let f32_t = |name: String, dims: &[u64], seed: u32, scale: f32| {
        TensorSpec::new(&name, dims, 0, values(dims.iter().product(), seed, scale))
    };
    let mut tensors = vec![TensorSpec::new(
        "token_embd.weight",
        &[t.dim, t.vocab],
        8,
        q8_0(t.vocab, t.dim, 1),
    )];
    for i in 0..u64::from(t.blocks) {
        let s = 10 + i as u32 * 16;
        let n = |w: &str| format!("blk.{i}.{w}.weight");
        let (q, kv) = (u64::from(t.heads) * hd, u64::from(t.kv_heads) * hd);
        tensors.push(f32_t(n("attn_norm"), &[t.dim], s, 1.0));
        tensors.push(f32_t(n("attn_q"), &[t.dim, q], s + 1, 0.2));
        tensors.push(f32_t(n("attn_k"), &[t.dim, kv], s + 2, 0.2));
        tensors.push(f32_t(n("attn_v"), &[t.dim, kv], s + 3, 0.2));
        tensors.push(f32_t(n("attn_output"), &[q, t.dim], s + 4, 0.2));
        tensors.push(f32_t(n("ffn_norm"), &[t.dim], s + 5, 1.0));
        tensors.push(f32_t(n("ffn_gate"), &[t.dim, t.ffn], s + 6, 0.2));
        tensors.push(f32_t(n("ffn_up"), &[t.dim, t.ffn], s + 7, 0.2));
        tensors.push(f32_t(n("ffn_down"), &[t.ffn, t.dim], s + 8, 0.2));
    }
    tensors.push(f32_t("output_norm.weight".into(), &[t.dim], 3, 1.0));
    edit(&mut kvs, &mut tensors);
    let mut w = GgufWriter::new(3);
    for (k, v) in kvs {
        w = w.kv(&k, v);
    }
    for t in tensors {
        w = w.tensor(t);
    }
    w.to_bytes()
}

fn tiny() -> &'static [u8] {
    static FILE: OnceLock<Vec<u8>> = OnceLock::new();
    FILE.get_or_init(|| tiny_file(|_, _| {}))
}

fn load(bytes: &[u8]) -> Result<Llama<'_>, ModelError> {
    Llama::from_gguf(&Gguf::parse(bytes).expect("the test writes valid GGUF"))
}

/// The logits of every position of `tokens`, then of 3 greedy decode steps, as bits.
fn run(model: &Llama<'_>, kind: CacheKind, mode: Activations, s: &dyn Schedule) -> Vec<u32> {
    let tokens = [3u32, 141, 7, 59, 100, 2];
    let mut cache = model.cache(kind, tokens.len() + 3).unwrap();
    let all = model
        .forward(&tokens, &mut cache, Logits::All, mode, s)
        .unwrap();
    let mut bits = all.to_bits();
    let vocab = model.config().vocab;
    let mut next = skainet_schedule::model::argmax(&all.data()[(tokens.len() - 1) * vocab..]);
    for _ in 0..3 {
        let logits = model
            .forward(&[next.unwrap()], &mut cache, Logits::Last, mode, s)
            .unwrap();
        bits.extend(logits.to_bits());
        next = skainet_schedule::model::argmax(logits.data());
    }
    bits
}

fn schedules() -> Vec<Box<dyn Schedule>> {
    let mut out: Vec<Box<dyn Schedule>> = vec![Box::new(hardware())];
    for p in 1..=4 {
        out.push(Box::new(dedicated(p).unwrap()));
    }
    out
}

#[test]
fn tiny_model_reads_its_dimensions_from_the_metadata() {
    let model = load(tiny()).unwrap();
    let c = model.config();
    assert_eq!(
        (c.blocks, c.dim, c.ffn, c.heads, c.kv_heads, c.head_dim, c.vocab, c.context),
        (2, 64, 96, 4, 2, 16, 160, 64)
    );
    assert_eq!((c.rope_base, c.rms_eps), (100_000.0, 1e-5));
    assert!(model.tied_output());
    // 2 blocks of 64·64 + 2·64·32 + 64·64 + 3·64·96 = 30 720 f32, and the Q8_0 head: 160 rows
    // of 2 blocks of 34 bytes.
    assert_eq!(
        model.weight_bytes_per_token(),
        2 * 30_720 * 4 + 160 * 2 * 34
    );
}

#[test]
fn tiny_model_gives_the_same_bits_under_every_schedule_cache_and_mode() {
    let model = load(tiny()).unwrap();
    for mode in [Activations::Exact, Activations::Q8] {
        let want = run(&model, CacheKind::Positional, mode, &Sequential);
        assert_eq!(run(&model, CacheKind::Append, mode, &Sequential), want);
        for s in schedules() {
            assert_eq!(
                run(&model, CacheKind::Positional, mode, s.as_ref()),
                want,
                "{mode:?} under {}",
                s.name()
            );
        }
    }
}

#[test]
fn the_modes_differ_so_q8_really_quantizes_the_activations() {
    let model = load(tiny()).unwrap();
    let exact = run(
        &model,
        CacheKind::Positional,
        Activations::Exact,
        &Sequential,
    );
    let q8 = run(&model, CacheKind::Positional, Activations::Q8, &Sequential);
    assert_ne!(exact, q8);
}

#[test]
fn the_last_logits_are_the_last_row_of_all_logits() {
    let model = load(tiny()).unwrap();
    let tokens = [5u32, 6, 7, 8];
    let forward = |logits| {
        let mut cache = model.cache(CacheKind::Positional, 4).unwrap();
        model
            .forward(&tokens, &mut cache, logits, Activations::Exact, &Sequential)
            .unwrap()
    };
    let (all, last) = (forward(Logits::All), forward(Logits::Last));
    assert_eq!(all.shape(), [4, 160]);
    assert_eq!(last.shape(), [1, 160]);
    assert_eq!(last.to_bits(), all.to_bits()[3 * 160..]);
}

// ---- every kind of wrong file is its own error ----

fn error_of(edit: impl FnOnce(&mut Vec<(String, Val)>, &mut Vec<TensorSpec>)) -> String {
    let bytes = tiny_file(edit);
    load(&bytes).unwrap_err().to_string()
}

fn set(kvs: &mut [(String, Val)], key: &str, v: Val) {
    kvs.iter_mut().find(|(k, _)| k == key).unwrap().1 = v;
}

#[test]
fn another_architecture_is_an_error_naming_it() {
    let e = error_of(|kv, _| set(kv, "general.architecture", Val::Str("gpt2".into())));
    assert_eq!(
        e,
        "general.architecture is \"gpt2\": only \"llama\" models are supported"
    );
}

#[test]
fn a_missing_tensor_is_an_error_naming_it() {
    let e = error_of(|_, t| t.retain(|t| t.name != b"blk.1.ffn_up.weight"));
    assert_eq!(e, "tensor blk.1.ffn_up.weight is missing from the file");
}

#[test]
fn a_block_count_beyond_the_tensors_present_names_the_first_missing_tensor() {
    let e = error_of(|kv, _| set(kv, "llama.block_count", Val::U32(3)));
    assert_eq!(e, "tensor blk.2.attn_norm.weight is missing from the file");
}

#[test]
fn heads_that_do_not_divide_the_width_are_an_error() {
    let e = error_of(|kv, _| set(kv, "llama.attention.head_count", Val::U32(5)));
    assert_eq!(
        e,
        "attention.head_count 5 does not divide embedding_length 64"
    );
}

#[test]
fn kv_heads_that_do_not_divide_the_heads_are_an_error() {
    let e = error_of(|kv, _| set(kv, "llama.attention.head_count_kv", Val::U32(3)));
    assert_eq!(
        e,
        "attention.head_count_kv 3 does not divide attention.head_count 4"
    );
}

#[test]
fn a_zero_dimension_is_an_error_naming_the_key() {
    let e = error_of(|kv, _| set(kv, "llama.feed_forward_length", Val::U32(0)));
    assert_eq!(
        e,
        "llama.feed_forward_length = 0: a model dimension must be a positive size"
    );
}

#[test]
fn metadata_of_the_wrong_type_is_an_error_naming_the_key() {
    let e = error_of(|kv, _| set(kv, "llama.block_count", Val::Str("thirty".into())));
    assert!(e.contains("llama.block_count"), "{e}");
    assert!(e.contains("string"), "{e}");
}

#[test]
fn a_missing_key_is_an_error_naming_it() {
    let e = error_of(|kv, _| kv.retain(|(k, _)| k != "llama.attention.layer_norm_rms_epsilon"));
    assert!(e.contains("llama.attention.layer_norm_rms_epsilon"), "{e}");
}

#[test]
fn a_tensor_of_other_dims_is_an_error_naming_both() {
    let e = error_of(|_, t| {
        let w = t
            .iter_mut()
            .find(|t| t.name == b"blk.0.attn_k.weight")
            .unwrap();
        *w = TensorSpec::new("blk.0.attn_k.weight", &[64, 64], 0, values(64 * 64, 1, 0.1));
    });
    assert_eq!(
        e,
        "tensor blk.0.attn_k.weight has dims [64, 64], the metadata implies [64, 32]"
    );
}

#[test]
fn a_norm_weight_that_is_not_f32_is_an_error() {
    let e = error_of(|_, t| {
        let w = t
            .iter_mut()
            .find(|t| t.name == b"output_norm.weight")
            .unwrap();
        *w = TensorSpec::new("output_norm.weight", &[64], 8, q8_0(1, 64, 2));
    });
    assert_eq!(
        e,
        "tensor output_norm.weight is q8_0: norm weights must be f32"
    );
}

/// `steps` greedy decode steps after `prompt`, once by `forward` of one token and once by
/// `step`, on two caches of `kind`: every step's logits as bits, both ways.
fn step_and_forward(
    model: &Llama<'_>,
    prompt: &[u32],
    steps: usize,
    kind: CacheKind,
    mode: Activations,
    s: &dyn Schedule,
) -> (Vec<u32>, Vec<u32>) {
    let mut a = model.cache(kind, prompt.len() + steps).unwrap();
    let mut b = model.cache(kind, prompt.len() + steps).unwrap();
    let first = model
        .forward(prompt, &mut a, Logits::Last, mode, s)
        .unwrap();
    model
        .forward(prompt, &mut b, Logits::Last, mode, s)
        .unwrap();
    let mut next = skainet_schedule::model::argmax(first.data()).unwrap();
    let (mut by_forward, mut by_step) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        let f = model
            .forward(&[next], &mut a, Logits::Last, mode, s)
            .unwrap();
        let g = model.step(next, &mut b, mode, s).unwrap();
        by_forward.extend(f.to_bits());
        by_step.extend(g.iter().map(|x| x.to_bits()));
        next = skainet_schedule::model::argmax(f.data()).unwrap();
    }
    assert_eq!(
        (a.len(), b.len()),
        (prompt.len() + steps, prompt.len() + steps)
    );
    (by_forward, by_step)
}

#[test]
fn a_step_gives_the_bits_of_a_one_token_forward_under_every_schedule_cache_and_mode() {
    let model = load(tiny()).unwrap();
    let mut all: Vec<Box<dyn Schedule>> = vec![Box::new(Sequential)];
    all.extend(schedules());
    let mut want = None;
    for kind in [CacheKind::Positional, CacheKind::Append] {
        for mode in [Activations::Exact, Activations::Q8] {
            for s in &all {
                let (f, g) = step_and_forward(&model, &[3, 141, 7, 59], 5, kind, mode, s.as_ref());
                assert_eq!(f.len(), 5 * 160);
                assert_eq!(g, f, "{kind:?} {mode:?} {}", s.name());
                if mode == Activations::Exact {
                    // And the same bits under every schedule and cache.
                    assert_eq!(*want.get_or_insert_with(|| g.clone()), g, "{}", s.name());
                }
            }
        }
    }
}

/// [`step_and_forward`] with a given [`KernelConfig`]: the prompt's logits, then `steps` greedy
/// steps by `forward_with` of one token and by `step_with`, as bits, both ways.
fn step_and_forward_with(
    model: &Llama<'_>,
    config: &KernelConfig,
    prompt: &[u32],
    steps: usize,
    mode: Activations,
) -> (Vec<u32>, Vec<u32>) {
    let s = &Sequential;
    let mut a = model
        .cache(CacheKind::Positional, prompt.len() + steps)
        .unwrap();
    let mut b = model
        .cache(CacheKind::Positional, prompt.len() + steps)
        .unwrap();
    let first = model
        .forward_with(config, prompt, &mut a, Logits::All, mode, s)
        .unwrap();
    model
        .forward_with(config, prompt, &mut b, Logits::Last, mode, s)
        .unwrap();
    let (mut by_forward, mut by_step) = (first.to_bits(), Vec::new());
    let vocab = model.config().vocab;
    let mut next = skainet_schedule::model::argmax(&first.data()[first.len() - vocab..]).unwrap();
    for _ in 0..steps {
        let f = model
            .forward_with(config, &[next], &mut a, Logits::Last, mode, s)
            .unwrap();
        let g = model.step_with(config, next, &mut b, mode, s).unwrap();
        by_forward.extend(f.to_bits());
        by_step.extend(g.iter().map(|x| x.to_bits()));
        next = skainet_schedule::model::argmax(f.data()).unwrap();
    }
    (by_forward, by_step)
}

#[test]
fn every_variant_gives_the_bits_of_forward_and_step_in_portable_precision() {
    let model = load(tiny()).unwrap();
    let prompt = [3, 141, 7, 59, 100, 2];
    for mode in [Activations::Exact, Activations::Q8] {
        // The plain entry points: the selected variant, portable precision.
        let (want, want_steps) = {
            let mut a = model
                .cache(CacheKind::Positional, prompt.len() + 3)
                .unwrap();
            let mut b = model
                .cache(CacheKind::Positional, prompt.len() + 3)
                .unwrap();
            let all = model
                .forward(&prompt, &mut a, Logits::All, mode, &Sequential)
                .unwrap();
            model
                .forward(&prompt, &mut b, Logits::Last, mode, &Sequential)
                .unwrap();
            let mut bits = all.to_bits();
            let mut steps = Vec::new();
            let mut next = skainet_schedule::model::argmax(&all.data()[5 * 160..]).unwrap();
            for _ in 0..3 {
                let f = model
                    .forward(&[next], &mut a, Logits::Last, mode, &Sequential)
                    .unwrap();
                let g = model.step(next, &mut b, mode, &Sequential).unwrap();
                bits.extend(f.to_bits());
                steps.extend(g.iter().map(|x| x.to_bits()));
                next = skainet_schedule::model::argmax(f.data()).unwrap();
            }
            (bits, steps)
        };
        assert!(
            want[6 * 160..] == want_steps[..],
            "{mode:?}: step and forward differ"
        );
        let providers = cpu_kernels().providers();
        for variant in providers.iter().filter(|p| p.is_available()) {
            let config = KernelConfig::new(variant.clone());
            let (f, g) = step_and_forward_with(&model, &config, &prompt, 3, mode);
            let name = variant.name();
            assert!(
                f == want,
                "{mode:?}: forward_with {name} differs from forward"
            );
            assert!(
                g == want_steps,
                "{mode:?}: step_with {name} differs from step"
            );
        }
    }
}

#[test]
fn a_step_with_native_precision_gives_the_bits_of_a_forward_with_it() {
    let model = load(tiny()).unwrap();
    let config = KernelConfig::selected().with_precision(Precision::Native);
    for mode in [Activations::Exact, Activations::Q8] {
        let (f, g) = step_and_forward_with(&model, &config, &[3, 141, 7, 59], 4, mode);
        assert!(
            g[..] == f[4 * 160..],
            "{mode:?}: step_with differs from forward_with"
        );
    }
}

#[test]
fn a_step_checks_its_token_and_the_cache_first() {
    let model = load(tiny()).unwrap();
    let mut cache = model.cache(CacheKind::Positional, 1).unwrap();
    let e = model
        .step(160, &mut cache, Activations::Exact, &Sequential)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "token id 160 is not below the vocabulary size 160"
    );
    assert_eq!(cache.len(), 0, "nothing was appended");
    model
        .step(5, &mut cache, Activations::Exact, &Sequential)
        .unwrap();
    let e = model
        .step(5, &mut cache, Activations::Exact, &Sequential)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the K/V cache holds 1 of 1 positions: no room for 1 more"
    );
    assert_eq!(cache.len(), 1);
}

#[test]
fn the_cache_times_attention_and_its_appends() {
    let model = load(tiny()).unwrap();
    let mut cache = model.cache(CacheKind::Append, 8).unwrap();
    assert_eq!(cache.attention_time(), std::time::Duration::ZERO);
    assert_eq!(cache.kv_cache_time(), std::time::Duration::ZERO);
    model
        .forward(
            &[1, 2, 3],
            &mut cache,
            Logits::Last,
            Activations::Exact,
            &Sequential,
        )
        .unwrap();
    let (attention, kv) = (cache.attention_time(), cache.kv_cache_time());
    assert!(attention > std::time::Duration::ZERO && kv > std::time::Duration::ZERO);
    model
        .step(4, &mut cache, Activations::Exact, &Sequential)
        .unwrap();
    assert!(cache.attention_time() > attention && cache.kv_cache_time() > kv);
}

#[test]
fn a_token_id_beyond_the_vocabulary_is_an_error() {
    let model = load(tiny()).unwrap();
    let mut cache = model.cache(CacheKind::Positional, 4).unwrap();
    let e = model
        .forward(
            &[1, 160],
            &mut cache,
            Logits::Last,
            Activations::Exact,
            &Sequential,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "token id 160 is not below the vocabulary size 160"
    );
    assert_eq!(cache.len(), 0, "nothing was appended");
}

#[test]
fn more_positions_than_the_cache_holds_is_an_error() {
    let model = load(tiny()).unwrap();
    let mut cache = model.cache(CacheKind::Positional, 3).unwrap();
    let e = model
        .forward(
            &[1, 2, 3, 4],
            &mut cache,
            Logits::Last,
            Activations::Exact,
            &Sequential,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the K/V cache holds 0 of 3 positions: no room for 4 more"
    );
}

// ---- the real model ----

fn real() -> &'static GgufFile {
    static MODEL: OnceLock<GgufFile> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = model_path();
        if !path.is_file() {
            panic!(
                "real_model tests need the model file {}: run scripts/fetch_model.sh, or set \
                 SKAINET_MODEL to the file\n(to leave these tests out on purpose, run \
                 `cargo test -- --skip real_model`)",
                path.display()
            );
        }
        GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// `n` greedy tokens after `prompt`.
fn greedy(
    model: &Llama<'_>,
    prompt: &[u32],
    n: usize,
    mode: Activations,
    s: &dyn Schedule,
) -> (Vec<u32>, Tensor) {
    let mut cache = model
        .cache(CacheKind::Positional, prompt.len() + n)
        .unwrap();
    let mut sampler = Sampler::new(Sampling::GREEDY);
    let mut logits = model
        .forward(prompt, &mut cache, Logits::Last, mode, s)
        .unwrap();
    let mut out = Vec::new();
    while out.len() < n {
        let next = sampler.next(logits.data()).unwrap();
        out.push(next);
        if out.len() < n {
            // Decode steps as a generator runs them (`step`'s bits are `forward`'s, which
            // a test below checks on this model).
            let step = model.step(next, &mut cache, mode, s).unwrap();
            logits = Tensor::new(vec![1, step.len()], step.to_vec()).unwrap();
        }
    }
    (out, logits)
}

#[test]
fn real_model_config_is_smollm2_135m() {
    let model = Llama::from_gguf(real().gguf()).unwrap();
    let c = model.config();
    assert_eq!(
        (c.blocks, c.dim, c.ffn, c.heads, c.kv_heads, c.head_dim, c.vocab, c.context),
        (30, 576, 1536, 9, 3, 64, 49152, 8192)
    );
    assert_eq!((c.rope_base, c.rms_eps), (100_000.0, 1e-5));
    assert!(model.tied_output());
    // 30 blocks of Q4_1 projections (20 bytes per 32 values) and the Q8_0 head (34 per 32).
    let block = (576 * 576 * 2 + 2 * 576 * 192 + 3 * 576 * 1536) / 32 * 20;
    assert_eq!(
        model.weight_bytes_per_token(),
        30 * block + 49152 * 576 / 32 * 34
    );
    assert_eq!(model.weight_bytes_per_token(), 96_436_224);
}

/// "The capital of France is" (ids from llama.cpp's tokenizer) and the float64 reference's 16
/// greedy tokens on the same file: a numpy forward pass of the dequantized weights, written
/// outside this repository (`ref.py --model SmolLM2-135M-Instruct.Q4_1.gguf --tokens
/// 504,3575,282,4649,314 --n 16`): " Paris.\n\nThe answer is: 2018-01".
const FRANCE: [u32; 5] = [504, 3575, 282, 4649, 314];
const FRANCE_REFERENCE: [u32; 16] = [
    7042, 30, 198, 198, 504, 2988, 314, 42, 216, 34, 32, 33, 40, 29, 32, 33,
];

#[test]
fn real_model_exact_mode_writes_the_float64_references_greedy_tokens() {
    let model = Llama::from_gguf(real().gguf()).unwrap();
    let (tokens, _) = greedy(&model, &FRANCE, 16, Activations::Exact, &Sequential);
    assert_eq!(tokens, FRANCE_REFERENCE);
}

#[test]
fn real_model_steps_give_the_bits_of_one_token_forwards() {
    let model = Llama::from_gguf(real().gguf()).unwrap();
    for mode in [Activations::Exact, Activations::Q8] {
        let (f, g) = step_and_forward(&model, &FRANCE, 3, CacheKind::Positional, mode, &hardware());
        assert_eq!(f.len(), 3 * 49152);
        assert!(g == f, "{mode:?}: a step's logits differ from forward's");
    }
}

#[test]
fn real_model_tokens_and_logits_are_the_same_bits_under_hardware() {
    let model = Llama::from_gguf(real().gguf()).unwrap();
    for mode in [Activations::Exact, Activations::Q8] {
        let (want, want_logits) = greedy(&model, &FRANCE, 4, mode, &Sequential);
        let (got, logits) = greedy(&model, &FRANCE, 4, mode, &hardware());
        assert_eq!(got, want, "{mode:?}");
        assert_eq!(logits.to_bits(), want_logits.to_bits(), "{mode:?}");
    }
}

/// The ChatML prompt "What is the capital of France?" (`<|im_start|>user\n…<|im_end|>\n
/// <|im_start|>assistant\n`, ids from llama.cpp's tokenizer) and llama.cpp's 24 greedy tokens
/// on the same file: a program on its C API outside this repository (one thread, an F32 K/V
/// cache, flash attention off, the argmax of each step's last logits, the end markers ignored;
/// its q8 arithmetic: Q8_1 activations into the Q4_1 weights, Q8_0 into the head). " The
/// capital of France is Paris." and what follows the end marker. (On [`FRANCE`] the two part
/// at the sixth token, a near tie; llama.cpp's vector dots sum in another order.)
const CHAT: [u32; 16] = [
    1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198,
];
const CHAT_LLAMA_CPP: [u32; 24] = [
    504, 3575, 282, 4649, 314, 7042, 30, 2, 198, 2, 1, 9690, 198, 2, 198, 1, 4093, 198, 57, 5248,
    3946, 288, 7198, 253,
];

#[test]
fn real_model_q8_mode_writes_llama_cpps_greedy_tokens() {
    let model = Llama::from_gguf(real().gguf()).unwrap();
    let (tokens, _) = greedy(&model, &CHAT, 24, Activations::Q8, &Sequential);
    assert_eq!(tokens, CHAT_LLAMA_CPP);
}
