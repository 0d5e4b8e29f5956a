//! The compile lane: a graph builder with schedule hints, the annotation pass, the StableHLO
//! export and the graph executor.
//!
//! Structure at compile time, cores at run time (see [`guide::algorithm_and_schedule`]):
//!
//! 1. [`GraphBuilder`] — a dataflow graph as code: named inputs with static
//!    shapes, ops (`sdpa`, `matmul`, `conv2d`, `linear`, the decoder's row-wise ops,
//!    `embedding`, `rope_tables`, elementwise, `reshape`, `transpose`, `concat`) checked shape
//!    by shape as they are added, and schedule hints per op or per scoped block. With the
//!    `model` feature, `model::Llama::step_graph` builds a whole decode step of a GGUF model.
//! 2. Passes — [`ScheduleAnnotationPass`] accepts or rejects each hint (with
//!    [`Diagnostic`]s) and applies [`StructuralDefaults`]; [`TensorLayoutPass`] records input
//!    layouts. [`core_passes`] runs both.
//! 3. [`stablehlo::export`] — a textual MLIR module that `iree-compile` compiles for any
//!    number of cores; its header states the accepted hints and the layouts.
//! 4. [`execute`] — runs a graph eagerly with a context's ops, under that context's
//!    schedule.
//!
//! Hints are [`ScheduleHint`]s: which dimensions of an op are independent (structural, what a
//! compiler may parallelise) and, advisory only, with how many tasks. They live here, in the
//! compile lane: the eager kernels need no hint, their units are fixed by the op.
//!
//! Start with [`guide::getting_started`].

mod attr;
mod builder;
mod executor;
pub mod guide;
mod hint;
#[cfg(feature = "std")]
pub mod iree;
mod node;
pub mod npy;
mod op;
mod pass;
pub mod stablehlo;

pub use attr::{Attr, AttrMap};
pub use builder::{GraphBuilder, GraphError, OpBuilder};
pub use executor::{execute, ExecError, GraphContext};
pub use hint::{HintError, ScheduleHint, SCHEDULE_KEY};
pub use node::{Graph, Node, Value};
pub use op::{normalize_dim, Op, OpKind, ScheduleClass};
pub use pass::{
    core_passes, DefaultsError, Diagnostic, DiagnosticKind, ScheduleAnnotationPass,
    StructuralDefaults, TensorLayoutPass, LAYOUT_KEY,
};
