//! Prints `model <triple> <variant> <ids> <hash>` for every variant of the CPU kernels available
//! on this machine (or the one `--variant` names): the real model (`scripts/fetch_model.sh`'s
//! SmolLM2-135M-Instruct, Q4_1) writes 16 greedy tokens after a fixed chat prompt, in exact
//! mode (f32 activations) and portable arithmetic under `Sequential`. `<ids>` are the 16 token
//! ids, comma-separated; `<hash>` is a 64-bit FNV-1a over the bits of the 16 logit rows they
//! were chosen from (the prompt's last, then each decode step's), as `examples/bits.rs` hashes
//! its outputs. `scripts/check_targets.sh` runs it natively, under `qemu-aarch64` and under
//! node's WASI, and fails unless every line is the same.
//!
//! ```text
//! cargo run --release --features model --example bits_model -- \
//!     [--model PATH] [--variant NAME] [--target-name <triple>]
//! ```
//!
//! Without `--model` it reads `models/SmolLM2-135M-Instruct.Q4_1.gguf` of this checkout. Where
//! a file can be mapped it is ([`GgufFile::open`]); on wasm, which has no mapping, it is read
//! into memory and parsed there ([`Gguf::parse`]: the reader needs no alignment of the bytes).

use std::path::PathBuf;
use std::process::ExitCode;

use skainet_schedule::gguf::Gguf;
#[cfg(not(target_family = "wasm"))]
use skainet_schedule::gguf::GgufFile;
use skainet_schedule::model::{
    argmax, render_chat, CacheKind, ChatMessage, Llama, Logits, ModelError, Tokenizer,
};
use skainet_schedule::prelude::*;
use skainet_schedule::{cpu_kernels, Activations, KernelConfig, Sequential};

#[path = "bits/triple.rs"]
mod triple;

/// The fixed prompt's system and user messages, rendered with the file's own chat template:
/// 24 tokens, answered "The capital of France is Paris." A short system message of our own,
/// because without one SmolLM2's template inserts its default (13 tokens more, each of which
/// costs about a second of prefill per variant under `qemu-aarch64`).
const SYSTEM: &str = "Be concise.";
const USER: &str = "What is the capital of France?";

/// How many tokens each run writes (the first from the prompt's logits).
const NEW_TOKENS: usize = 16;

const USAGE: &str = "usage: bits_model [--model PATH] [--variant NAME] [--target-name <triple>]";

/// 64-bit FNV-1a over the little-endian bytes of each value's bits.
struct Fnv(u64);

impl Fnv {
    fn write(&mut self, xs: &[f32]) {
        for x in xs {
            for byte in x.to_bits().to_le_bytes() {
                self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
}

/// The prompt's tokens: [`SYSTEM`] and [`USER`] in the file's chat template, with the
/// assistant's turn opened.
fn prompt(gguf: &Gguf<'_>) -> Result<Vec<u32>, String> {
    let template = gguf
        .get_str("tokenizer.chat_template")
        .map_err(|e| e.to_string())?;
    let messages = [
        ChatMessage {
            role: "system",
            content: SYSTEM,
        },
        ChatMessage {
            role: "user",
            content: USER,
        },
    ];
    let text = render_chat(template, &messages, true).map_err(|e| e.to_string())?;
    let tok = Tokenizer::from_gguf(gguf).map_err(|e| e.to_string())?;
    tok.encode(&text, true).map_err(|e| e.to_string())
}

/// [`NEW_TOKENS`] greedy tokens after `prompt` with `config`'s variant: the prompt in one
/// batched `forward`, then a `step` per token. Returns the ids and the hash of their logits.
fn greedy(
    model: &Llama<'_>,
    config: &KernelConfig,
    prompt: &[u32],
) -> Result<(Vec<u32>, u64), String> {
    let (mode, s) = (Activations::Exact, &Sequential);
    let e = |e: ModelError| e.to_string();
    let mut cache = model
        .cache(CacheKind::Positional, prompt.len() + NEW_TOKENS)
        .map_err(e)?;
    let first = model
        .forward_with(config, prompt, &mut cache, Logits::Last, mode, s)
        .map_err(e)?;
    let mut hash = Fnv(0xcbf2_9ce4_8422_2325);
    let mut logits = first.data();
    let mut ids = Vec::with_capacity(NEW_TOKENS);
    loop {
        hash.write(logits);
        let next = argmax(logits).ok_or("the logits hold no finite value")?;
        ids.push(next);
        if ids.len() == NEW_TOKENS {
            return Ok((ids, hash.0));
        }
        logits = model
            .step_with(config, next, &mut cache, mode, s)
            .map_err(e)?;
    }
}

/// What to run and how to name it.
struct Args {
    model: PathBuf,
    /// Only this variant (by name); every available one when `None`.
    variant: Option<String>,
    triple: String,
}

/// One line per available variant (or the one `args` names).
fn run(gguf: &Gguf<'_>, args: &Args) -> Result<(), String> {
    let model = Llama::from_gguf(gguf).map_err(|e| e.to_string())?;
    let prompt = prompt(gguf)?;
    let variants: Vec<_> = match &args.variant {
        Some(name) => {
            let variant = cpu_kernels()
                .find(name)
                .filter(|v| v.is_available())
                .ok_or_else(|| format!("no variant {name:?} is available here"))?;
            vec![variant]
        }
        None => {
            let providers = cpu_kernels().providers();
            providers
                .iter()
                .filter(|p| p.is_available())
                .cloned()
                .collect()
        }
    };
    let triple = &args.triple;
    for variant in &variants {
        let config = KernelConfig::new(variant.clone());
        let (ids, hash) = greedy(&model, &config, &prompt)
            .map_err(|e| format!("variant {}: {e}", variant.name()))?;
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        println!(
            "model {triple} {} {} {hash:016x}",
            variant.name(),
            ids.join(",")
        );
    }
    Ok(())
}

/// Maps the file (where mapping exists) and runs.
#[cfg(not(target_family = "wasm"))]
fn load_and_run(args: &Args) -> Result<(), String> {
    let file = GgufFile::open(&args.model).map_err(|e| e.to_string())?;
    run(file.gguf(), args)
}

/// Reads the file into memory (wasm maps nothing) and runs.
#[cfg(target_family = "wasm")]
fn load_and_run(args: &Args) -> Result<(), String> {
    let path = &args.model;
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    run(&Gguf::parse(&bytes).map_err(|e| e.to_string())?, args)
}

fn main() -> ExitCode {
    let mut args = Args {
        model: PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join("SmolLM2-135M-Instruct.Q4_1.gguf"),
        variant: None,
        triple: triple::triple(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match (flag.as_str(), it.next()) {
            ("--model", Some(path)) => args.model = PathBuf::from(path),
            ("--variant", Some(name)) => args.variant = Some(name),
            ("--target-name", Some(name)) => args.triple = name,
            _ => {
                eprintln!("{USAGE}; got {flag:?}");
                return ExitCode::from(2);
            }
        }
    }
    match load_and_run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bits_model: {e}");
            ExitCode::FAILURE
        }
    }
}
