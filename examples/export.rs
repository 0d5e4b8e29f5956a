//! Exports a grouped-query attention graph to StableHLO, with its inputs and the eager
//! kernel's result, so that anyone can check the export with IREE by hand.
//!
//! ```text
//! cargo run --example export -- --heads 8 --kv-heads 2 --seq-q 5 --seq-k 9 --head-dim 16 \
//!     [--causal] [--mask] [--batch 1] --out DIR
//! ```
//!
//! writes `DIR/model.mlir`, `DIR/q.npy`, `DIR/k.npy`, `DIR/v.npy` (and `DIR/mask.npy` with
//! `--mask`) and `DIR/expected.npy`, then prints the two commands that check it (IREE from
//! `pip install iree-base-compiler iree-base-runtime`):
//!
//! ```text
//! iree-compile --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu \
//!     --iree-llvmcpu-target-cpu=generic DIR/model.mlir -o DIR/model.vmfb
//! iree-run-module --device=local-task --task_topology_group_count=2 --module=DIR/model.vmfb \
//!     --function=main --input=@DIR/q.npy --input=@DIR/k.npy --input=@DIR/v.npy \
//!     [--input=@DIR/mask.npy] --output=@DIR/out.npy
//! ```
//!
//! then compare `DIR/out.npy` with `DIR/expected.npy` (e.g. `numpy.abs(a - b).max()`, within
//! 1e-4). The same `model.vmfb` runs with any `--task_topology_group_count`: the module states
//! no core count.
//!
//! Exit status: 0 on success (and for `--help`); 2, with a one-line message, for bad arguments
//! — an unknown flag, a missing or non-numeric value, an empty `--out`, shapes attention
//! refuses, or a tensor of more than [`MAX_VALUES`] values (this is a hand check, and each
//! tensor is written whole); 1, with a one-line message, when running or writing fails. It
//! never panics or aborts. The hostile tests (`tests/hostile/graph.rs`) include this file as
//! a module and run [`cli`] in-process: `cargo test --test` builds no example binaries.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use skainet_schedule::graph::{core_passes, execute, npy, stablehlo, Graph, GraphBuilder};
use skainet_schedule::OpsContext;
use skainet_schedule::SdpaOptions;
use skainet_schedule::Sequential;
use skainet_schedule::Tensor;

/// As `skainet_schedule::graph::iree::COMPILE_FLAGS` (that module needs the `std` feature;
/// this example builds without it too).
const COMPILE_FLAGS: &str = "--iree-hal-target-device=local \
--iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=generic";

/// The most values one tensor (input or result) may have: 2^24, 64 MiB of f32, far more than
/// a check by hand needs, and small enough that every buffer (and its `.npy` copy) can be had.
pub const MAX_VALUES: usize = 1 << 24;

const USAGE: &str = "usage: export --heads H --kv-heads N --seq-q SQ --seq-k SK --head-dim D \
[--batch B] [--causal] [--mask] --out DIR";

struct Args {
    batch: usize,
    heads: usize,
    kv_heads: usize,
    seq_q: usize,
    seq_k: usize,
    head_dim: usize,
    causal: bool,
    mask: bool,
    out: PathBuf,
}

#[path = "common/exit.rs"]
mod exit;
pub use exit::Exit;
use exit::{bad, failed};

/// `Ok(None)` for `--help`.
fn parse(argv: impl IntoIterator<Item = String>) -> Result<Option<Args>, Exit> {
    let mut args = Args {
        batch: 1,
        heads: 8,
        kv_heads: 2,
        seq_q: 5,
        seq_k: 9,
        head_dim: 16,
        causal: false,
        mask: false,
        out: PathBuf::new(),
    };
    let mut out = None;
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        let mut number = |name: &str| -> Result<usize, Exit> {
            let v = it
                .next()
                .ok_or_else(|| bad(format!("{name} needs a value (see --help)")))?;
            v.parse()
                .map_err(|_| bad(format!("{name}: {v:?} is not a number (see --help)")))
        };
        match flag.as_str() {
            "--batch" => args.batch = number("--batch")?,
            "--heads" => args.heads = number("--heads")?,
            "--kv-heads" => args.kv_heads = number("--kv-heads")?,
            "--seq-q" => args.seq_q = number("--seq-q")?,
            "--seq-k" => args.seq_k = number("--seq-k")?,
            "--head-dim" => args.head_dim = number("--head-dim")?,
            "--causal" => args.causal = true,
            "--mask" => args.mask = true,
            "--out" => {
                let dir = it
                    .next()
                    .ok_or_else(|| bad("--out needs a value (see --help)"))?;
                if dir.is_empty() {
                    return Err(bad("--out: the directory must not be empty"));
                }
                out = Some(PathBuf::from(dir));
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(bad(format!("unknown argument {other:?} (see --help)"))),
        }
    }
    args.out = out.ok_or_else(|| bad("--out is required (see --help)"))?;
    Ok(Some(args))
}

/// Deterministic values in [-1, 1): a hash of the index and a seed.
fn values(shape: Vec<usize>, seed: u32) -> Result<Tensor, Exit> {
    Tensor::from_fn(shape, |i| {
        let mut x = (i as u32).wrapping_mul(0x9E37_79B9) ^ seed.wrapping_mul(0x85EB_CA6B);
        x ^= x >> 15;
        x = x.wrapping_mul(0x2C1B_3C6D);
        x ^= x >> 12;
        (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
    .map_err(failed)
}

/// The attention graph of `args`, or the bad argument that stops it (shapes attention
/// refuses, a tensor over [`MAX_VALUES`]).
fn graph(args: &Args) -> Result<Graph, Exit> {
    let shapes = [
        ("q", vec![args.batch, args.heads, args.seq_q, args.head_dim]),
        (
            "k",
            vec![args.batch, args.kv_heads, args.seq_k, args.head_dim],
        ),
        (
            "v",
            vec![args.batch, args.kv_heads, args.seq_k, args.head_dim],
        ),
        ("mask", vec![args.seq_q, args.seq_k]),
    ];
    let used = if args.mask { 4 } else { 3 };
    // The result has q's shape, so these are every tensor the export writes.
    for (name, shape) in &shapes[..used] {
        let count = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if count.is_none_or(|n| n > MAX_VALUES) {
            return Err(bad(format!(
                "{name} {shape:?} has more than {MAX_VALUES} values, the most this example writes"
            )));
        }
    }
    let mut b = GraphBuilder::new();
    let shape_error = |e: skainet_schedule::graph::GraphError| bad(e.to_string());
    let q = b.input("q", shapes[0].1.clone()).map_err(shape_error)?;
    let k = b.input("k", shapes[1].1.clone()).map_err(shape_error)?;
    let v = b.input("v", shapes[2].1.clone()).map_err(shape_error)?;
    let mask = if args.mask {
        Some(b.input("mask", shapes[3].1.clone()).map_err(shape_error)?)
    } else {
        None
    };
    let options = SdpaOptions {
        scale: None,
        causal: args.causal,
    };
    let attn = b
        .sdpa(q, k, v, mask, options)
        .id("attn")
        .finish()
        .map_err(shape_error)?;
    b.output(attn).map_err(shape_error)?;
    b.build().map_err(failed)
}

fn run(args: &Args, stdout: &mut dyn Write) -> Result<(), Exit> {
    let mut graph = graph(args)?;
    for d in core_passes(&mut graph) {
        eprintln!("export: {d}");
    }
    let shape = |name: &str| -> Vec<usize> {
        graph
            .find(name)
            .map(|n| n.shape().to_vec())
            .unwrap_or_default()
    };
    let mut inputs = vec![
        ("q", values(shape("q"), 1)?),
        ("k", values(shape("k"), 2)?),
        ("v", values(shape("v"), 3)?),
    ];
    if args.mask {
        // Every third score hidden, the rest nudged.
        let mut m = values(shape("mask"), 4)?;
        for (i, x) in m.data_mut().iter_mut().enumerate() {
            *x = if i % 3 == 1 {
                f32::NEG_INFINITY
            } else {
                0.5 * *x
            };
        }
        inputs.push(("mask", m));
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (*n, t)).collect();
    let expected =
        execute(&OpsContext::cpu(Sequential::shared()), &graph, &named).map_err(failed)?;

    let dir = &args.out;
    let write = |name: &str, bytes: &[u8]| -> Result<PathBuf, Exit> {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
        Ok(path)
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| failed(format!("cannot create {}: {e}", dir.display())))?;
    let model = write("model.mlir", stablehlo::export(&graph).as_bytes())?;
    let mut input_flags = Vec::new();
    for (name, t) in &inputs {
        let path = write(&format!("{name}.npy"), &npy::to_bytes(t))?;
        input_flags.push(format!("--input=@{}", path.display()));
    }
    let Some(result) = expected.first() else {
        return Err(failed("the graph returned no result"));
    };
    let expected = write("expected.npy", &npy::to_bytes(result))?;

    let vmfb = dir.join("model.vmfb");
    let out = dir.join("out.npy");
    let lines = [
        format!(
            "wrote {}, the inputs and {}; check with:",
            model.display(),
            expected.display()
        ),
        format!(
            "iree-compile {COMPILE_FLAGS} {} -o {}",
            model.display(),
            vmfb.display()
        ),
        format!(
            "iree-run-module --device=local-task --task_topology_group_count=2 --module={} --function=main {} --output=@{}",
            vmfb.display(),
            input_flags.join(" "),
            out.display()
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
            eprintln!("export: {}", exit.message);
            ExitCode::from(exit.code)
        }
    }
}
