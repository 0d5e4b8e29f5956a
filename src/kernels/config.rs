//! [`KernelConfig`]: which compiled variant a call runs, and from how much work it forks.

use super::variants::{selected_kernels, CpuKernels};
use crate::sync::Arc;

/// How a kernel call runs, for the `*_with` entry points: the compiled variant of the inner
/// loops, and the minimum of work (multiply-adds) from which it opens a region instead of
/// running inline. The plain entry points use [`KernelConfig::selected`].
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::KernelConfig;
/// let always_fork = KernelConfig::selected().with_min_parallel_work(0);
/// assert_eq!(always_fork.min_parallel_work(), Some(0));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct KernelConfig {
    kernels: Arc<CpuKernels>,
    min_parallel_work: Option<u64>,
}

impl KernelConfig {
    /// The variant the registry selects now, and each op's own work threshold.
    pub fn selected() -> Self {
        Self::new(selected_kernels())
    }

    /// A given variant, with each op's own work threshold.
    pub fn new(kernels: Arc<CpuKernels>) -> Self {
        Self {
            kernels,
            min_parallel_work: None,
        }
    }

    /// The same, forking from `work` multiply-adds on (`0`: always open a region).
    pub fn with_min_parallel_work(mut self, work: u64) -> Self {
        self.min_parallel_work = Some(work);
        self
    }

    /// The variant.
    pub fn kernels(&self) -> &CpuKernels {
        &self.kernels
    }

    /// The threshold set by [`with_min_parallel_work`](Self::with_min_parallel_work), if any.
    pub fn min_parallel_work(&self) -> Option<u64> {
        self.min_parallel_work
    }

    /// The threshold in effect for an op whose own default is `default`.
    pub(crate) fn threshold(&self, default: u64) -> u64 {
        self.min_parallel_work.unwrap_or(default)
    }
}
