//! Exports one decode step of a GGUF llama model (SmolLM2-135M-Instruct, as
//! `scripts/fetch_model.sh` fetches it) to StableHLO, with its inputs — the new token, its
//! position, every block's K/V prefix and the weights decoded to f32 — and the eager logits of
//! that step, so that IREE's tools can check the export by hand.
//!
//! ```text
//! cargo run --release --features model --example export_model -- \
//!     --model PATH [--layers N] --prefix P --out DIR
//! ```
//!
//! The prefix is the first `P` tokens of a fixed chat prompt, run through the eager model
//! (exact mode); the step's token is the prompt's next one, at position `P`. With
//! `--layers N` the model is its first `N` blocks, then the final norm and the head, on both
//! sides. Writes:
//!
//! * `DIR/model.mlir`: [`Llama::step_graph`], `main`'s first result the logits `[1, vocab]`,
//!   then every block's new key and value rows;
//! * one `.npy` per input and `DIR/inputs.txt`: one `--input=@FILE.npy` per line, file names
//!   relative to `DIR`, in the order of `main`'s parameters (an `iree-run-module --flagfile`);
//! * `DIR/outputs.txt`: `--output=@logits.npy`, then `--output=@k_new.i.npy` and
//!   `--output=@v_new.i.npy` for every block, one a line, in the order of `main`'s results;
//! * `DIR/expected.npy`: the eager logits `[1, vocab]` of the same step ([`Llama::step`],
//!   exact mode, from the same prefix).
//!
//! then prints the greedy token and the two commands that check it (IREE from
//! `pip install iree-base-compiler iree-base-runtime`; run them in `DIR`), the group count
//! the knob's (`SKAINET_TASK_GROUPS`, else the machine's parallelism, as for the eager pool):
//!
//! ```text
//! iree-compile --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu \
//!     --iree-llvmcpu-target-cpu=generic model.mlir -o model.vmfb
//! iree-run-module --device=local-task --task_topology_group_count=2 --module=model.vmfb \
//!     --function=main --flagfile=inputs.txt --flagfile=outputs.txt
//! ```
//!
//! `logits.npy` matches `expected.npy` (normwise relative error within 1e-4, the same greedy
//! token) with any `--task_topology_group_count`: the module states no core count.
//!
//! Exit status: 0 on success (and for `--help`); 2, with a one-line message, for bad
//! arguments — an unknown flag, a missing or non-numeric value, a missing `--model`,
//! `--prefix` or `--out`, an empty `--out`, `--layers` outside `1..=blocks`, a `--prefix`
//! the fixed prompt has no next token for, or an invalid `SKAINET_TASK_GROUPS`; 1, with a one-line message, when the model file
//! cannot be read or writing fails. The hostile tests (`tests/hostile/graph.rs`) include this
//! file as a module and run [`cli`] in-process.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use skainet_schedule::gguf::GgufFile;
use skainet_schedule::graph::{core_passes, iree, npy, stablehlo};
use skainet_schedule::model::Tokenizer;
use skainet_schedule::model::{argmax, render_chat, CacheKind, ChatMessage, Llama, Logits};
use skainet_schedule::{Activations, Sequential, Tensor};

const USAGE: &str = "usage: export_model --model PATH [--layers N] --prefix P --out DIR";

/// The conversation whose tokens are the prefix and the step's token: fixed, so that every
/// export of a given `--prefix` is the same step.
pub const PROMPT: &str = "Explain in a few sentences why the sky is blue during the day and \
turns red and orange at sunset. Mention Rayleigh scattering, the wavelengths of visible light, \
the length of the path sunlight takes through the atmosphere, and why clouds look white or \
grey instead. Keep the answer short and plain, for a curious ten-year-old.";

struct Args {
    model: PathBuf,
    layers: Option<usize>,
    prefix: usize,
    out: PathBuf,
}

#[path = "common/exit.rs"]
mod exit;
pub use exit::Exit;
use exit::{bad, failed};

/// `Ok(None)` for `--help`.
fn parse(argv: impl IntoIterator<Item = String>) -> Result<Option<Args>, Exit> {
    let (mut model, mut layers, mut prefix, mut out) = (None, None, None, None);
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| bad(format!("{name} needs a value (see --help)")))
        };
        let number = |name: &str, v: String| -> Result<usize, Exit> {
            v.parse()
                .map_err(|_| bad(format!("{name}: {v:?} is not a number (see --help)")))
        };
        match flag.as_str() {
            "--model" => model = Some(PathBuf::from(value("--model")?)),
            "--layers" => layers = Some(number("--layers", value("--layers")?)?),
            "--prefix" => prefix = Some(number("--prefix", value("--prefix")?)?),
            "--out" => {
                let dir = value("--out")?;
                if dir.is_empty() {
                    return Err(bad("--out: the directory must not be empty"));
                }
                out = Some(PathBuf::from(dir));
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(bad(format!("unknown argument {other:?} (see --help)"))),
        }
    }
    if layers == Some(0) {
        return Err(bad("--layers: a model needs at least 1 block"));
    }
    Ok(Some(Args {
        model: required(model, "--model")?,
        layers,
        prefix: required(prefix, "--prefix")?,
        out: required(out, "--out")?,
    }))
}

fn required<T>(value: Option<T>, name: &str) -> Result<T, Exit> {
    value.ok_or_else(|| bad(format!("{name} is required (see --help)")))
}

fn run(args: &Args, stdout: &mut dyn Write) -> Result<(), Exit> {
    let groups = iree::task_groups().map_err(|e| bad(e.to_string()))?;
    let file = GgufFile::open(&args.model).map_err(failed)?;
    let gguf = file.gguf();
    let mut model = Llama::from_gguf(gguf).map_err(failed)?;
    let blocks = model.config().blocks;
    if let Some(n) = args.layers {
        if n > blocks {
            return Err(bad(format!("--layers {n}: the model has {blocks} blocks")));
        }
        model.truncate_blocks(n);
    }
    let tokenizer = Tokenizer::from_gguf(gguf).map_err(failed)?;
    let template = gguf.get_str("tokenizer.chat_template").map_err(failed)?;
    let user = ChatMessage {
        role: "user",
        content: PROMPT,
    };
    let text = render_chat(template, &[user], true).map_err(failed)?;
    let prompt = tokenizer.encode(&text, true).map_err(failed)?;
    let p = args.prefix;
    let Some(&token) = prompt.get(p) else {
        return Err(bad(format!(
            "--prefix {p}: the fixed prompt has {} tokens, so the prefix is at most {}",
            prompt.len(),
            prompt.len().saturating_sub(1)
        )));
    };

    // The prefix through the eager model, then the step: exact mode, the reference numerics.
    let mut cache = model.cache(CacheKind::Positional, p + 1).map_err(failed)?;
    if p > 0 {
        model
            .forward(
                &prompt[..p],
                &mut cache,
                Logits::Last,
                Activations::Exact,
                &Sequential,
            )
            .map_err(failed)?;
    }
    let inputs = model.step_graph_inputs(token, &cache).map_err(failed)?;
    let logits = model
        .step(token, &mut cache, Activations::Exact, &Sequential)
        .map_err(failed)?;
    let greedy = argmax(logits).ok_or_else(|| failed("the step's logits are all NaN"))?;
    let expected = Tensor::new(vec![1, logits.len()], logits.to_vec()).map_err(failed)?;
    let mut graph = model.step_graph(p).map_err(failed)?;
    for d in core_passes(&mut graph) {
        eprintln!("export_model: {d}");
    }

    let dir = &args.out;
    std::fs::create_dir_all(dir)
        .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
    let write = |name: &str, bytes: &[u8]| -> Result<(), Exit> {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))
    };
    write("model.mlir", stablehlo::export(&graph).as_bytes())?;
    let mut flags = String::new();
    for (name, tensor) in &inputs {
        let file = format!("{name}.npy");
        write(&file, &npy::try_to_bytes(tensor).map_err(failed)?)?;
        flags.push_str(&format!("--input=@{file}\n"));
    }
    write("inputs.txt", flags.as_bytes())?;
    let mut results = String::from("--output=@logits.npy\n");
    for i in 0..model.config().blocks {
        results.push_str(&format!(
            "--output=@k_new.{i}.npy\n--output=@v_new.{i}.npy\n"
        ));
    }
    write("outputs.txt", results.as_bytes())?;
    write("expected.npy", &npy::to_bytes(&expected))?;

    let word = tokenizer.decode(&[greedy], false).unwrap_or_default();
    let lines = [
        format!(
            "wrote {}: model.mlir, {} inputs (inputs.txt), outputs.txt and expected.npy: {} blocks, token {token} at position {p}, greedy next token {greedy} {word:?}",
            dir.display(),
            inputs.len(),
            model.config().blocks,
        ),
        format!("check with, in {}:", dir.display()),
        format!(
            "iree-compile {} model.mlir -o model.vmfb",
            iree::COMPILE_FLAGS.join(" ")
        ),
        format!(
            "iree-run-module --device=local-task --task_topology_group_count={groups} \
             --module=model.vmfb --function=main --flagfile=inputs.txt --flagfile=outputs.txt"
        ),
    ];
    for line in lines {
        writeln!(stdout, "{line}").map_err(|e| failed(format!("cannot print: {e}")))?;
    }
    Ok(())
}

/// The whole program on `argv` (without the program name), printing to `stdout`; what `main`
/// runs and what the tests run.
///
/// # Errors
///
/// [`Exit`] with status 2 for bad arguments, 1 for a failure.
pub fn cli(argv: impl IntoIterator<Item = String>, stdout: &mut dyn Write) -> Result<(), Exit> {
    match parse(argv)? {
        None => writeln!(stdout, "{USAGE}").map_err(|e| failed(format!("cannot print: {e}"))),
        Some(args) => run(&args, stdout),
    }
}

fn main() -> ExitCode {
    match cli(std::env::args().skip(1), &mut std::io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(exit) => {
            eprintln!("export_model: {}", exit.message);
            ExitCode::from(exit.code)
        }
    }
}
