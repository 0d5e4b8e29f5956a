//! # skainet-schedule
//!
//! Schedules for compute kernels: the "how many tasks" half of Halide's algorithm/schedule
//! split, with structured concurrency underneath.
//!
//! A kernel says what it computes over `n` independent units; a [`Schedule`] decides how many
//! tasks run them, and the answer never changes a single bit of the result: every schedule
//! cuts `[0, n)` with the same arithmetic ([`tasks_for`], [`chunk_for`], [`Chunks`]), and a
//! kernel's per-unit arithmetic never depends on where a range was cut.
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
//! use skainet_schedule::{Schedule, ScheduleExt, Sequential};
//!
//! // What: square every element. How many tasks: whatever the schedule says.
//! fn square_all(schedule: &dyn Schedule, xs: &mut [f32]) {
//!     schedule
//!         .for_chunks_mut("square", xs, 1, 1024, &|_units, chunk: &mut [f32]| {
//!             for x in chunk {
//!                 *x *= *x;
//!             }
//!         })
//!         .expect("1-element units always split");
//! }
//!
//! let mut xs = [1.0, 2.0, 3.0];
//! square_all(&Sequential, &mut xs);
//! assert_eq!(xs, [1.0, 4.0, 9.0]);
//! # }
//! ```
//!
//! ## The contract in a paragraph
//!
//! [`Schedule::for_range`] calls a body with disjoint, non-empty, half-open ranges that cover
//! `[0, n)`. A body writes only its own pre-split outputs and reads inputs nobody changes
//! during the call; it never opens a nested region (one opened anyway runs inline). No task
//! outlives the call, every write happens-before its return, and the first failure is
//! re-raised after every sibling has finished or was skipped.
//!
//! ## The compile lane
//!
//! [`graph`] builds a graph with schedule hints, validates them
//! ([`ScheduleAnnotationPass`](graph::ScheduleAnnotationPass)), exports StableHLO that IREE
//! compiles and runs on any number of cores, and executes the graph eagerly under a context's
//! schedule. Read [Algorithm and schedule](graph::guide::algorithm_and_schedule) (who decides
//! what) and [Getting started](graph::guide::getting_started).
//!
//! ## Features
//!
//! | feature    | adds |
//! |------------|------|
//! | (none)     | the `no_std` + `alloc` core: [`Sequential`], hints, tracing, registries, kernels, the compile lane, the GGUF reader ([`gguf`]) |
//! | `std`      | (default) std locks and wall-clock durations in trace events |
//! | `parallel` | the threaded schedule: `hardware()`, `dedicated(p)` |
//! | `rayon`    | `RayonSchedule` over a rayon pool |
//! | `loom`     | swaps the sync shim for loom's; only the model-checking tests run |
//! | `tracing`  | `TracingSink`: trace events as `tracing` events (target `skainet_schedule`) |
//! | `model`    | `gguf::GgufFile` (a GGUF file mapped read-only, parsed in place) and `model`: the llama model, its tokenizer and chat template, sampling |
//!
//! See `features.md` in the repository for targets and dependencies.
//!
//! ## Where things are
//!
//! Everything a kernel caller needs is at the crate root: the contract ([`Schedule`],
//! [`Sequential`], [`ScheduleExt`]), the schedules of the features (`hardware()`,
//! `dedicated()`, `RayonSchedule`), the tensor ([`Tensor`]) and borrowed, strided views of
//! values ([`TensorView`]), the positional K/V cache ([`KvCache`]), the kernels
//! ([`scaled_dot_product_attention`], [`matmul()`], [`linear()`], [`conv2d()`], and a decoder's
//! [`rms_norm`], [`rope`], [`silu_mul`], [`add_broadcast`], [`embedding`]) and their one error type
//! [`KernelError`] (`From<TensorError>`, so one `?` covers building inputs and calling a
//! kernel), the context seam, tracing and the registries. Three modules group what is not:
//! [`shape`] (the shape rules every op shares, wrapped by [`KernelError::Shape`] and
//! [`graph::GraphError::BadShape`]), [`graph`] (the compile lane) and [`prelude`] (the traits).
//!
//! ## `no_std`
//!
//! Without default features the crate is `#![no_std]` and needs `alloc`: a final binary
//! provides a `#[global_allocator]` and a `#[panic_handler]` (the repository's
//! `examples/nostd_smoke.rs` does both for a Cortex-M4F and runs attention under
//! [`Sequential`]).
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![warn(rust_2018_idioms)]

extern crate alloc;

mod context;
pub mod gguf;
pub mod graph;
mod kernels;
mod kv_cache;
#[cfg(feature = "model")]
pub mod model;
mod pages;
pub mod quant;
mod registry;
mod schedule;
pub mod shape;
mod shape_error;
mod tensor;
mod trace;

#[cfg(any(feature = "parallel", feature = "rayon"))]
mod runtime;

pub(crate) mod sync;

pub use context::{
    platform_default_schedule, refuse_schedule, ContextExt, ContextRef, ExecutionContext,
    OpsContext, Scheduled,
};
pub use kernels::{
    add_broadcast, add_broadcast_with, conv2d, conv2d_with, cpu_kernels, embedding, embedding_with,
    exp, linear, linear_with, matmul, matmul_with, parallel_chunks, quant_embedding,
    quant_embedding_with, quant_linear, quant_linear_many, quant_linear_many_with,
    quant_linear_with, rms_norm, rms_norm_with, rope, rope_interleaved, rope_interleaved_with,
    rope_with, scaled_dot_product_attention, scaled_dot_product_attention_with, selected_kernels,
    silu_mul, silu_mul_with, Activations, Conv2dOptions, CpuKernels, CpuOps, KernelConfig,
    KernelError, OpsRef, Precision, QMatrix, SdpaOptions, TensorOps, Work,
    CONV2D_PARALLEL_MIN_WORK, DECODER_PARALLEL_MIN_WORK, EXP_MAX_ARG, EXP_MAX_REL_ERROR,
    EXP_MIN_ARG, MATMUL_PARALLEL_MIN_WORK, QUANT_PARALLEL_MIN_WORK, SDPA_LATE_HELPER_WORK,
    SDPA_PARALLEL_MIN_WORK,
};
pub use kv_cache::KvCache;
pub use registry::{KernelDispatch, KernelProvider, KernelRegistry};
pub use schedule::{
    chunk_for, same_schedule, tasks_for, Chunks, DisjointError, DisjointSlice, Schedule,
    ScheduleExt, ScheduleRef, Sequential, TryChunkBody,
};
pub use shape_error::ShapeError;
pub use tensor::{Tensor, TensorError, TensorView};
pub use trace::{CollectingSink, NoopSink, TraceEvent, TraceSink, TraceSinkRef};
#[cfg(feature = "tracing")]
pub use trace::{TracingSink, TRACING_TARGET};

#[cfg(feature = "loom")]
#[doc(hidden)]
pub use runtime::model_hooks;
#[cfg(feature = "rayon")]
pub use runtime::RayonSchedule;
#[cfg(feature = "parallel")]
pub use runtime::{
    dedicated, hardware, hardware_fallback, hardware_parallelism, parse_task_groups, PoolSchedule,
    ScheduleError, MAX_BLOCK_TIME, MAX_PARALLELISM, TASK_GROUPS_VAR,
};

/// The traits' methods, for `use skainet_schedule::prelude::*`: they then work on every
/// schedule, context, ops, provider and sink value (`hardware().for_range(..)`, `ctx.ops()`,
/// ...) without naming each trait. The traits are imported anonymously (`as _`), so each keeps
/// its one path at the crate root, where code that implements or names one imports it.
pub mod prelude {
    pub use crate::context::{ContextExt as _, ExecutionContext as _};
    pub use crate::kernels::TensorOps as _;
    pub use crate::registry::KernelProvider as _;
    pub use crate::schedule::{Schedule as _, ScheduleExt as _};
    pub use crate::trace::TraceSink as _;
}

/// The README's examples, compiled and run as doctests so they cannot rot (in the build of the
/// README's test command, which has every feature they use).
#[cfg(all(
    doctest,
    feature = "model",
    feature = "parallel",
    not(feature = "loom")
))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
