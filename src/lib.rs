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
//! | (none)     | the `no_std` + `alloc` core: [`Sequential`], hints, tracing, registries, kernels, the compile lane |
//! | `std`      | (default) std locks and wall-clock durations in trace events |
//! | `parallel` | the threaded schedule: `hardware()`, `dedicated(p)` |
//! | `rayon`    | `RayonSchedule` over a rayon pool |
//! | `loom`     | swaps the sync shim for loom's; only the model-checking tests run |
//! | `tracing`  | `TracingSink`: trace events as `tracing` events (target `skainet_schedule`) |
//!
//! See `features.md` in the repository for targets and dependencies.
#![cfg_attr(not(feature = "std"), no_std)]
#![deny(missing_docs)]
#![warn(rust_2018_idioms)]

extern crate alloc;

pub mod attr;
pub mod context;
pub mod graph;
pub mod kernels;
pub mod registry;
pub mod schedule;
pub mod tensor;
pub mod trace;

#[cfg(any(feature = "parallel", feature = "rayon"))]
pub mod runtime;

pub(crate) mod sync;

pub use attr::{Attr, AttrMap};
pub use kernels::{
    conv2d, matmul, scaled_dot_product_attention, Conv2dOptions, CpuOps, KernelError, SdpaOptions,
};
pub use schedule::{
    chunk_for, same_schedule, tasks_for, Chunks, DisjointError, DisjointSlice, HintError, Schedule,
    ScheduleExt, ScheduleHint, ScheduleRef, Sequential, SCHEDULE_KEY,
};
#[cfg(feature = "tracing")]
pub use trace::TracingSink;
pub use trace::{CollectingSink, NoopSink, TraceEvent, TraceSink, TraceSinkRef};

#[cfg(feature = "rayon")]
pub use runtime::RayonSchedule;
#[cfg(feature = "parallel")]
pub use runtime::{dedicated, hardware, PoolSchedule, ScheduleError};

/// The schedule a CPU context uses when none is given: the process-wide `hardware()` pool with
/// the `parallel` feature, [`Sequential`] otherwise.
pub fn platform_default_schedule() -> ScheduleRef {
    #[cfg(feature = "parallel")]
    {
        runtime::platform_default()
    }
    #[cfg(not(feature = "parallel"))]
    {
        Sequential::shared()
    }
}

/// The README's examples, compiled and run as doctests so they cannot rot.
#[cfg(all(doctest, feature = "std", not(feature = "loom")))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
