//! Guides: how the algorithm, the schedule and the compile lane fit together.
//!
//! * [`algorithm_and_schedule`] — the split, and who decides what.
//! * [`getting_started`] — a graph from builder to eager run to StableHLO, step by step.

pub mod algorithm_and_schedule {
    //! # Algorithm and schedule
    //!
    //! A kernel says **what** it computes; a schedule says **how many tasks** compute it.
    //! The two never mix: every schedule cuts the same independent units with the same
    //! arithmetic ([`Chunks`](crate::Chunks)), and a unit's arithmetic never depends on where a
    //! range was cut, so a result is bit-identical under every schedule.
    //!
    //! ## Structure at compile time, cores at run time
    //!
    //! The compile lane carries the same split into an exported model. What is decided where:
    //!
    //! | decision | owner | when |
    //! |---|---|---|
    //! | which axes of an op are independent (`parallel_dims`), the layout of the graph, grouped-query attention by indexing K/V rather than copying them | SKaiNET passes: [`ScheduleAnnotationPass`](crate::graph::ScheduleAnnotationPass) (hints and structural defaults), [`TensorLayoutPass`](crate::graph::TensorLayoutPass), the attention lowering in [`stablehlo`](crate::graph::stablehlo) | compile time |
    //! | instruction set, tiling, workgroup formation | IREE (`iree-compile`) | compile time |
    //! | how many cores run the workgroups | the IREE task runtime: `--task_topology_group_count` | run time |
    //! | how many tasks run the eager kernels and the [graph executor](crate::graph::execute) | a [`Schedule`](crate::Schedule): `Sequential`, `hardware()`, `dedicated(p)`, `RayonSchedule` | run time |
    //!
    //! One knob sets the core count at run time on both sides: the environment variable
    //! `SKAINET_TASK_GROUPS` sizes the eager `hardware()` pool, and the same number is what an
    //! IREE local-task device takes as `--task_topology_group_count`.
    //!
    //! ## What the exported module says
    //!
    //! The header of the StableHLO module states structure, never cores:
    //!
    //! ```text
    //! module attributes {skainet.tensor_layouts = {k = "NHSD", q = "NHSD", v = "NHSD"},
    //!                    skainet.schedule = {attn = {parallel_dims = ["batch", "heads"]}}} {
    //! ```
    //!
    //! * `skainet.tensor_layouts` names the axes of each input an op reads directly
    //!   (`NHSD`: batch, heads, sequence, head dim; `NCHW` / `OIHW` for convolutions).
    //! * `skainet.schedule` lists, in topological order, the hints the annotation pass accepted.
    //!   `parallel_dims` is structural and authoritative. `parallelism` appears only when a user
    //!   wrote one, is flagged by an "advisory" diagnostic, and is read by no compiler.
    //!
    //! The structure itself is in the ops: grouped-query attention views Q as
    //! `[b, nKV, nRep, Sq, hd]` and batches both `dot_general`s over `[b, nKV]`, so the backend
    //! sees the independent (batch, K/V head) axes without K/V ever being broadcast. Which
    //! IREE attribute should `skainet.schedule` lower to? None: IREE forms and tiles the
    //! workgroups itself, and one `.vmfb` runs unchanged on 1, 2 or 64 cores.
    //!
    //! ```
    //! use skainet_schedule::graph::{core_passes, stablehlo, GraphBuilder};
    //! use skainet_schedule::SdpaOptions;
    //!
    //! # fn main() -> Result<(), Box<dyn std::error::Error>> {
    //! let mut b = GraphBuilder::new();
    //! let q = b.input("q", [1, 8, 4, 16])?;
    //! let k = b.input("k", [1, 2, 4, 16])?;
    //! let v = b.input("v", [1, 2, 4, 16])?;
    //! let attn = b.sdpa(q, k, v, None, SdpaOptions::default()).id("attn").finish()?;
    //! b.output(attn)?;
    //! let mut graph = b.build()?;
    //!
    //! // No hint given: the structural default says (batch, heads), with no core count.
    //! assert!(core_passes(&mut graph).is_empty());
    //! let mlir = stablehlo::export(&graph);
    //! assert_eq!(
    //!     mlir.lines().next().unwrap(),
    //!     r#"module attributes {skainet.tensor_layouts = {k = "NHSD", q = "NHSD", v = "NHSD"}, skainet.schedule = {attn = {parallel_dims = ["batch", "heads"]}}} {"#
    //! );
    //! assert!(!mlir.contains("parallelism"));
    //! assert!(!mlir.contains("stablehlo.concatenate"));
    //! # Ok(())
    //! # }
    //! ```
    //!
    //! ## Eager execution
    //!
    //! SKaiNET's own executors — the eager ops and the graph executor — are ours to
    //! parallelise: a context's ops carry its schedule, and
    //! [`execute`](crate::graph::execute) runs every `sdpa`, `matmul` and `conv2d` of a graph
    //! under it. Changing the schedule of a [`GraphContext`](crate::graph::GraphContext)
    //! rebuilds its ops (a sibling context); a context whose ops cannot be rebuilt keeps its
    //! schedule and says so with a `ScheduleDowngraded` trace event.
}

pub mod getting_started {
    //! # Getting started
    //!
    //! Build a graph, let the passes state its structure, run it eagerly under a schedule of
    //! your choice, and export it for IREE.
    //!
    //! ```
    //! # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
    //! use skainet_schedule::OpsContext;
    //! use skainet_schedule::graph::{core_passes, execute, stablehlo, GraphBuilder};
    //! use skainet_schedule::SdpaOptions;
    //! use skainet_schedule::Tensor;
    //! use skainet_schedule::graph::ScheduleHint;
    //! use skainet_schedule::Sequential;
    //!
    //! # fn main() -> Result<(), Box<dyn std::error::Error>> {
    //! // 1. The algorithm: grouped-query attention, 8 query heads over 2 K/V heads.
    //! let mut b = GraphBuilder::new();
    //! let q = b.input("q", [1, 8, 3, 4])?;
    //! let k = b.input("k", [1, 2, 5, 4])?;
    //! let v = b.input("v", [1, 2, 5, 4])?;
    //! let causal = SdpaOptions { scale: None, causal: true };
    //! // 2. A schedule hint: heads are independent (optional: attention defaults to batch, heads).
    //! let heads = ScheduleHint::parallel(["heads"])?;
    //! let attn = b.schedule(heads, |b| b.sdpa(q, k, v, None, causal).id("attn").finish())?;
    //! b.output(attn)?;
    //! let mut graph = b.build()?;
    //!
    //! // 3. The passes accept the hint (or say why not) and record the layouts.
    //! let diagnostics = core_passes(&mut graph);
    //! assert!(diagnostics.is_empty(), "{diagnostics:?}");
    //!
    //! // 4. Run it eagerly. Any schedule gives the same bits; Sequential is the reference.
    //! let data = |n: usize, seed: f32| Tensor::from_fn(vec![n], |i| ((i as f32 + seed) * 0.37).sin());
    //! let qs = data(8 * 3 * 4, 1.0)?.reshape(vec![1, 8, 3, 4])?;
    //! let ks = data(2 * 5 * 4, 2.0)?.reshape(vec![1, 2, 5, 4])?;
    //! let vs = data(2 * 5 * 4, 3.0)?.reshape(vec![1, 2, 5, 4])?;
    //! let ctx = OpsContext::cpu(Sequential::shared());
    //! let out = execute(&ctx, &graph, &[("q", &qs), ("k", &ks), ("v", &vs)])?;
    //! assert_eq!(out[0].shape(), [1, 8, 3, 4]);
    //!
    //! // 5. Export it: structure in the header, no core count anywhere.
    //! let mlir = stablehlo::export(&graph);
    //! assert!(mlir.starts_with(
    //!     r#"module attributes {skainet.tensor_layouts = {k = "NHSD", q = "NHSD", v = "NHSD"}, skainet.schedule = {attn = {parallel_dims = ["heads"]}}} {"#
    //! ));
    //! # Ok(())
    //! # }
    //! # }
    //! ```
    //!
    //! With the `parallel` feature, `OpsContext::cpu(skainet_schedule::hardware().shared())`
    //! runs the same graph on every core (`SKAINET_TASK_GROUPS=N` caps it), bit for bit the
    //! same result.
    //!
    //! ## Checking the export with IREE
    //!
    //! `cargo run --example export -- --heads 8 --kv-heads 2 --seq-q 5 --seq-k 9 --head-dim 16
    //! --causal --mask --out /tmp/attn` writes the module, its inputs as `.npy` and the eager
    //! result `expected.npy`. With IREE from PyPI (`pip install iree-base-compiler
    //! iree-base-runtime`):
    //!
    //! ```text
    //! iree-compile --iree-hal-target-device=local --iree-hal-local-target-device-backends=llvm-cpu \
    //!     --iree-llvmcpu-target-cpu=generic /tmp/attn/model.mlir -o /tmp/attn/model.vmfb
    //! iree-run-module --device=local-task --task_topology_group_count=2 \
    //!     --module=/tmp/attn/model.vmfb --function=main \
    //!     --input=@/tmp/attn/q.npy --input=@/tmp/attn/k.npy --input=@/tmp/attn/v.npy \
    //!     --input=@/tmp/attn/mask.npy --output=@/tmp/attn/out.npy
    //! ```
    //!
    //! `out.npy` matches `expected.npy` within 1e-4, with any group count, from the same
    //! `.vmfb`. From Rust, `graph::iree::IreeTools` (feature `std`) does the same;
    //! `IreeTools::run_files_env` takes the group count from `SKAINET_TASK_GROUPS`, the knob of
    //! the eager pool.
    //!
    //! A whole model: with the `model` feature, `model::Llama::step_graph` is one decode step
    //! of a GGUF llama model (the token, its position and every block's K/V prefix as inputs,
    //! the weights too), and `cargo run --release --features model --example export_model --
    //! --model FILE --prefix 40 --out DIR` writes it with its inputs, `inputs.txt` and
    //! `outputs.txt` (`iree-run-module --flagfile`s) and the eager step's logits.
}
