//! The scheduled kernels and the ops that carry a schedule.
//!
//! Kernels take a `&dyn Schedule` argument and never reach for a pool of their own; a
//! [`TensorOps`] value binds them to the schedule they run under.
//!
//! * [`scaled_dot_product_attention`] — grouped-query attention over (batch, head) units;
//! * [`matmul()`] — over output rows; [`conv2d()`] — over (batch, output channel) planes;
//! * [`parallel_chunks`] — the one way they open a region (inline below a minimum of work);
//! * [`exp`] — the deterministic, vectorisable exponential of the softmax;
//! * [`cpu_kernels`] — the registry of compiled variants of the inner loops (portable, AVX2)
//!   every call dispatches through.
//!
//! Every kernel is bit-identical under every schedule and every variant: a unit's arithmetic
//! is fixed (lane accumulators in a fixed order, no fused multiply-add), whoever runs it.

mod attend;
pub mod chunks;
mod config;
pub mod conv;
pub mod error;
mod exp;
mod lanes;
pub mod matmul;
pub mod ops;
pub mod sdpa;
mod simd;
#[cfg(all(test, not(feature = "loom")))]
mod tests;
mod variants;

pub use chunks::parallel_chunks;
pub use config::KernelConfig;
pub use conv::{conv2d, conv2d_with, Conv2dOptions, CONV2D_PARALLEL_MIN_WORK};
pub use error::KernelError;
pub use exp::{exp, EXP_MAX_ARG, EXP_MAX_REL_ERROR, EXP_MIN_ARG};
pub use matmul::{matmul, matmul_with, MATMUL_PARALLEL_MIN_WORK};
pub use ops::CpuOps;
pub use sdpa::{
    scaled_dot_product_attention, scaled_dot_product_attention_with, SdpaOptions,
    SDPA_PARALLEL_MIN_WORK,
};
pub use variants::{cpu_kernels, selected_kernels, CpuKernels};

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
