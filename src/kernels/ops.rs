//! [`TensorOps`]: kernels bound to a schedule, and [`CpuOps`], this crate's.

use super::{
    conv2d, matmul, scaled_dot_product_attention, Conv2dOptions, KernelError, SdpaOptions,
};
use crate::schedule::ScheduleRef;
use crate::sync::Arc;
use crate::tensor::Tensor;

/// A set of kernels bound to the schedule they run under.
///
/// Ops are rebuilt, never mutated, to change the schedule:
/// [`with_schedule`](TensorOps::with_schedule) returns a sibling, or `None` when this
/// implementation cannot run under another schedule. The kernel methods are provided: they
/// run this crate's kernels under [`schedule`](TensorOps::schedule).
pub trait TensorOps: Send + Sync {
    /// The schedule every kernel of these ops runs under.
    fn schedule(&self) -> &ScheduleRef;

    /// Ops identical to these but for the schedule; `None` if they cannot be rebuilt.
    fn with_schedule(&self, schedule: ScheduleRef) -> Option<Arc<dyn TensorOps>>;

    /// [`scaled_dot_product_attention`] under these ops' schedule.
    ///
    /// # Errors
    ///
    /// As [`scaled_dot_product_attention`].
    fn sdpa(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: Option<&Tensor>,
        options: &SdpaOptions,
    ) -> Result<Tensor, KernelError> {
        let mask = mask.map(Tensor::view);
        scaled_dot_product_attention(q, k, v, mask, options, self.schedule().as_ref())
    }

    /// [`matmul()`] under these ops' schedule.
    ///
    /// # Errors
    ///
    /// As [`matmul()`].
    fn matmul(&self, a: &Tensor, b: &Tensor) -> Result<Tensor, KernelError> {
        matmul(a, b, self.schedule().as_ref())
    }

    /// [`conv2d()`] under these ops' schedule.
    ///
    /// # Errors
    ///
    /// As [`conv2d()`].
    fn conv2d(
        &self,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        options: &Conv2dOptions,
    ) -> Result<Tensor, KernelError> {
        conv2d(input, weight, bias, options, self.schedule().as_ref())
    }
}

/// A shareable handle to ops.
pub type OpsRef = Arc<dyn TensorOps>;

/// The CPU kernels of this crate, bound to the schedule they run under.
///
/// [`with_schedule`](TensorOps::with_schedule) always succeeds: it returns a sibling bound to
/// the new schedule (for the schedule it already has, an equivalent sibling).
///
/// ```
/// use std::sync::Arc;
/// use skainet_schedule::prelude::*;
/// use skainet_schedule::{CpuOps, Sequential};
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
