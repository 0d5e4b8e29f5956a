//! [`CpuOps`]: the CPU kernels bound to a schedule.

use crate::kernels::{OpsRef, TensorOps};
use crate::schedule::ScheduleRef;
use crate::sync::Arc;

/// The CPU kernels of this crate, bound to the schedule they run under.
///
/// [`with_schedule`](TensorOps::with_schedule) always succeeds: it returns a sibling bound to
/// the new schedule (for the schedule it already has, an equivalent sibling).
///
/// ```
/// use std::sync::Arc;
/// use skainet_schedule::kernels::{CpuOps, TensorOps};
/// use skainet_schedule::Sequential;
/// let ops = CpuOps::new(Sequential::shared());
/// assert_eq!(ops.schedule().name(), "sequential");
/// let sibling = ops.with_schedule(Sequential::shared()).unwrap();
/// assert_eq!(sibling.schedule().name(), "sequential");
/// ```
#[derive(Clone)]
pub struct CpuOps {
    schedule: ScheduleRef,
}

impl CpuOps {
    /// CPU ops running under `schedule`.
    pub fn new(schedule: ScheduleRef) -> Self {
        Self { schedule }
    }

    /// A shareable handle to CPU ops under `schedule`.
    pub fn shared(schedule: ScheduleRef) -> OpsRef {
        Arc::new(Self::new(schedule))
    }
}

impl Default for CpuOps {
    /// CPU ops under [`platform_default_schedule`](crate::platform_default_schedule).
    fn default() -> Self {
        Self::new(crate::platform_default_schedule())
    }
}

impl core::fmt::Debug for CpuOps {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CpuOps")
            .field("schedule", &self.schedule.name())
            .finish()
    }
}

impl TensorOps for CpuOps {
    fn schedule(&self) -> &ScheduleRef {
        &self.schedule
    }

    fn with_schedule(&self, schedule: ScheduleRef) -> Option<OpsRef> {
        Some(Self::shared(schedule))
    }
}
