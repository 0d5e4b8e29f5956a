//! What a hostile or careless caller can build, and what it gets: a clean `Err` (or a documented
//! panic with a message) — never a hang, an abort, a lost worker or a plausible wrong answer.
//!
//! One module per part of the crate; every case that could hang runs under a watchdog, so a
//! regression fails instead of stalling CI.
#![cfg(not(feature = "loom"))]

#[path = "hostile/graph.rs"]
mod graph;
#[path = "hostile/kernels.rs"]
mod kernels;
#[path = "hostile/npy.rs"]
mod npy;
#[path = "hostile/runtime.rs"]
mod runtime;
#[path = "runtime_support/mod.rs"]
mod support;
