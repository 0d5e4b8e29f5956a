//! [`KernelConfig`]: which compiled variant a call runs, in which [`Precision`], and from how
//! much work it forks.

use super::variants::{selected_kernels, CpuKernels, PerMode};
use crate::sync::Arc;

/// How a kernel's multiply-adds round. Either mode is bit-identical under every schedule (the
/// order of every reduction is fixed by the shapes and the kernel's constants); they differ in
/// what else the bits may depend on.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{KernelConfig, Precision};
/// assert_eq!(KernelConfig::selected().precision(), Precision::Portable);
/// let fast = KernelConfig::selected().with_precision(Precision::Native);
/// assert_eq!(fast.precision(), Precision::Native);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum Precision {
    /// Every `acc + a·b` rounds twice (a product, then a sum): the same bits on every target
    /// and every compiled variant.
    #[default]
    Portable,
    /// The target's own multiply-add: fused (one rounding) where the CPU has FMA, else as
    /// [`Portable`](Self::Portable). Faster; the bits may differ between targets and variants,
    /// never between schedules.
    Native,
}

/// How a kernel call runs, for the `*_with` entry points: the compiled variant of the inner
/// loops, the [`Precision`] of its multiply-adds, and the minimum of work (multiply-adds) from which it opens a region instead of
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
    precision: Precision,
    min_parallel_work: Option<u64>,
}

impl KernelConfig {
    /// The variant the registry selects now, and each op's own work threshold.
    pub fn selected() -> Self {
        Self::new(selected_kernels())
    }

    /// A given variant, in [`Precision::Portable`], with each op's own work threshold.
    pub fn new(kernels: Arc<CpuKernels>) -> Self {
        Self {
            kernels,
            precision: Precision::Portable,
            min_parallel_work: None,
        }
    }

    /// The same, with multiply-adds in `precision`.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The precision mode.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The compilation of an inner loop for this precision mode.
    pub(crate) fn pick<F: Copy>(&self, loops: &PerMode<F>) -> F {
        match self.precision {
            Precision::Portable => loops.portable,
            Precision::Native => loops.native,
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
