//! The scheduled kernels and the ops that carry a schedule.
//!
//! Kernels take a `&dyn Schedule` argument and never reach for a pool of their own; a
//! [`TensorOps`] value binds them to the schedule they run under.

use crate::schedule::ScheduleRef;
use crate::sync::Arc;

/// A set of kernels bound to the schedule they run under.
///
/// Ops are rebuilt, never mutated, to change the schedule:
/// [`with_schedule`](TensorOps::with_schedule) returns a sibling, or `None` when this
/// implementation cannot run under another schedule.
pub trait TensorOps: Send + Sync {
    /// The schedule every kernel of these ops runs under.
    fn schedule(&self) -> &ScheduleRef;

    /// Ops identical to these but for the schedule; `None` if they cannot be rebuilt.
    fn with_schedule(&self, schedule: ScheduleRef) -> Option<Arc<dyn TensorOps>>;
}

/// A shareable handle to ops.
pub type OpsRef = Arc<dyn TensorOps>;
