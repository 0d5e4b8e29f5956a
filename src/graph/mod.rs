//! The compile lane: a graph builder with schedule hints, the annotation pass, the StableHLO
//! export and the graph executor.
//!
//! Structure at compile time, cores at run time (see [`guide::algorithm_and_schedule`]):
//!
//! 1. [`GraphBuilder`] — the Rust face of the seed's `dag { }`: named inputs with static
//!    shapes, ops (`sdpa`, `matmul`, `conv2d`, elementwise, `reshape`, `transpose`) checked
//!    shape by shape as they are added, and schedule hints per op or per scoped block.
//! 2. Passes — [`ScheduleAnnotationPass`] accepts or rejects each hint (with
//!    [`Diagnostic`]s) and applies [`StructuralDefaults`]; [`TensorLayoutPass`] records input
//!    layouts. [`core_passes`] runs both.
//! 3. [`stablehlo::export`] — a textual MLIR module that `iree-compile` compiles for any
//!    number of cores; its header states the accepted hints and the layouts.
//! 4. [`executor`] — runs a graph eagerly with a context's ops, under that context's
//!    schedule.
//!
//! Start with [`guide::getting_started`].

mod builder;
pub mod executor;
pub mod guide;
#[cfg(feature = "std")]
pub mod iree;
mod node;
pub mod npy;
mod op;
mod pass;
pub mod shape;
pub mod stablehlo;

pub use builder::{GraphBuilder, GraphError, OpBuilder};
pub use executor::{execute, ExecError, GraphContext};
pub use node::{Graph, Node, Value};
pub use op::{normalize_dim, Op, OpKind, ScheduleClass};
pub use pass::{
    core_passes, DefaultsError, Diagnostic, DiagnosticKind, ScheduleAnnotationPass,
    StructuralDefaults, TensorLayoutPass, LAYOUT_KEY,
};
pub use shape::ShapeError;
