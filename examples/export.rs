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

use std::path::PathBuf;
use std::process::ExitCode;

use skainet_schedule::graph::{core_passes, execute, npy, stablehlo, GraphBuilder};
use skainet_schedule::OpsContext;
use skainet_schedule::SdpaOptions;
use skainet_schedule::Sequential;
use skainet_schedule::Tensor;

/// As `skainet_schedule::graph::iree::COMPILE_FLAGS` (that module needs the `std` feature;
/// this example builds without it too).
const COMPILE_FLAGS: &str = "--iree-hal-target-device=local \
--iree-hal-local-target-device-backends=llvm-cpu --iree-llvmcpu-target-cpu=generic";

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

const USAGE: &str = "usage: export --heads H --kv-heads N --seq-q SQ --seq-k SK --head-dim D \
[--batch B] [--causal] [--mask] --out DIR";

fn parse() -> Result<Args, String> {
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
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            v.parse()
                .map_err(|_| format!("{name}: {v:?} is not a number"))
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
            "--out" => out = Some(PathBuf::from(it.next().ok_or("--out needs a value")?)),
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    args.out = out.ok_or(format!("--out is required\n{USAGE}"))?;
    Ok(args)
}

/// Deterministic values in [-1, 1): a hash of the index and a seed.
fn values(shape: Vec<usize>, seed: u32) -> Tensor {
    Tensor::from_fn(shape, |i| {
        let mut x = (i as u32).wrapping_mul(0x9E37_79B9) ^ seed.wrapping_mul(0x85EB_CA6B);
        x ^= x >> 15;
        x = x.wrapping_mul(0x2C1B_3C6D);
        x ^= x >> 12;
        (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
    .expect("small shapes")
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let q_shape = vec![args.batch, args.heads, args.seq_q, args.head_dim];
    let kv_shape = vec![args.batch, args.kv_heads, args.seq_k, args.head_dim];
    let mask_shape = vec![args.seq_q, args.seq_k];

    let mut b = GraphBuilder::new();
    let q = b.input("q", q_shape.clone())?;
    let k = b.input("k", kv_shape.clone())?;
    let v = b.input("v", kv_shape.clone())?;
    let mask = if args.mask {
        Some(b.input("mask", mask_shape.clone())?)
    } else {
        None
    };
    let options = SdpaOptions {
        scale: None,
        causal: args.causal,
    };
    let attn = b.sdpa(q, k, v, mask, options).id("attn").finish()?;
    b.output(attn)?;
    let mut graph = b.build()?;
    for d in core_passes(&mut graph) {
        eprintln!("{d}");
    }

    let mut inputs = vec![
        ("q", values(q_shape, 1)),
        ("k", values(kv_shape.clone(), 2)),
        ("v", values(kv_shape, 3)),
    ];
    if args.mask {
        // Every third score hidden, the rest nudged.
        let m = values(mask_shape, 4);
        let data = m
            .data()
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                if i % 3 == 1 {
                    f32::NEG_INFINITY
                } else {
                    0.5 * x
                }
            })
            .collect();
        inputs.push(("mask", Tensor::new(m.shape().to_vec(), data)?));
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (*n, t)).collect();
    let expected = execute(&OpsContext::cpu(Sequential::shared()), &graph, &named)?;

    std::fs::create_dir_all(&args.out)?;
    let dir = &args.out;
    std::fs::write(dir.join("model.mlir"), stablehlo::export(&graph))?;
    for (name, t) in &inputs {
        std::fs::write(dir.join(format!("{name}.npy")), npy::to_bytes(t))?;
    }
    std::fs::write(dir.join("expected.npy"), npy::to_bytes(&expected[0]))?;

    let d = dir.display();
    let inputs_flags: Vec<String> = inputs
        .iter()
        .map(|(n, _)| format!("--input=@{d}/{n}.npy"))
        .collect();
    println!("wrote {d}/model.mlir, the inputs and {d}/expected.npy; check with:");
    println!("iree-compile {COMPILE_FLAGS} {d}/model.mlir -o {d}/model.vmfb");
    println!(
        "iree-run-module --device=local-task --task_topology_group_count=2 --module={d}/model.vmfb --function=main {} --output=@{d}/out.npy",
        inputs_flags.join(" ")
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("export: {e}");
            ExitCode::FAILURE
        }
    }
}
