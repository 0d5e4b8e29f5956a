//! What a kernel reports instead of panicking: every invalid shape names the shapes involved.

use core::fmt;

use crate::pages::Values;
use crate::quant::QuantError;
use crate::schedule::DisjointError;
use crate::tensor::TensorError;
use crate::ShapeError;

/// Why a kernel produced no output. Nothing is written when a kernel returns an error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KernelError {
    /// The operands' shapes do not fit the op (the error names the op and the shapes).
    Shape(ShapeError),
    /// An input or output tensor could not be built or allocated.
    Tensor(TensorError),
    /// A scratch buffer of `elements` f32 values could not be allocated.
    Scratch {
        /// The kernel (`sdpa`, `matmul`, `conv2d`).
        op: &'static str,
        /// The values it asked for.
        elements: usize,
    },
    /// The output could not be split into per-unit chunks, or the schedule broke its contract
    /// (ran a unit twice, out of range, or not at all); the error names the schedule.
    DisjointSplit(DisjointError),
    /// Quantized bytes could not be read (the error names the type and the sizes).
    Quant(QuantError),
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Shape(err) => err.fmt(f),
            Self::Tensor(err) => err.fmt(f),
            Self::Scratch { op, elements } => write!(
                f,
                "{op}: could not allocate a scratch buffer of {elements} f32 values"
            ),
            Self::DisjointSplit(err) => write!(f, "kernel output split failed: {err}"),
            Self::Quant(err) => err.fmt(f),
        }
    }
}

impl core::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Shape(err) => Some(err),
            Self::Tensor(err) => Some(err),
            Self::DisjointSplit(err) => Some(err),
            Self::Quant(err) => Some(err),
            Self::Scratch { .. } => None,
        }
    }
}

impl From<ShapeError> for KernelError {
    fn from(err: ShapeError) -> Self {
        Self::Shape(err)
    }
}

impl From<TensorError> for KernelError {
    fn from(err: TensorError) -> Self {
        Self::Tensor(err)
    }
}

impl From<QuantError> for KernelError {
    fn from(err: QuantError) -> Self {
        Self::Quant(err)
    }
}

impl From<DisjointError> for KernelError {
    fn from(err: DisjointError) -> Self {
        Self::DisjointSplit(err)
    }
}

/// A zeroed scratch buffer of `len` values, or [`KernelError::Scratch`] when it cannot be had.
pub(crate) fn scratch(op: &'static str, len: usize) -> Result<Values, KernelError> {
    crate::tensor::try_zeroed(len).ok_or(KernelError::Scratch { op, elements: len })
}

/// The most values a thread keeps in its reused scratch between calls (1 MiB: what attention
/// needs up to head dimension 1024, and a matrix product's packs over rows); a larger buffer
/// is freed when its call ends.
#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) const KEPT_SCRATCH: usize = 1 << 18;

#[cfg(all(feature = "std", not(feature = "loom")))]
std::thread_local! {
    /// The calling thread's reused scratch (empty while a [`ReusedScratch`] holds it).
    static THREAD_SCRATCH: core::cell::Cell<Values> = const { core::cell::Cell::new(Values::new()) };
}

/// Scratch values that hold **whatever this thread's last call left in them** (zeros on first
/// use), given back to the thread when dropped. Only for a kernel that writes every value it
/// reads: a body call then neither allocates nor clears its scratch, which on a small region
/// is a tenth of the call (80 KiB for attention at head dimension 64). Without `std` (no
/// thread-locals), and in loom builds, each one is a fresh zeroed buffer. One taken while
/// another is held on the same thread (a nested call) is a buffer of its own.
pub(crate) struct ReusedScratch {
    buf: Values,
    len: usize,
}

impl ReusedScratch {
    /// `len` values, or [`KernelError::Scratch`] when they cannot be had.
    pub(crate) fn take(op: &'static str, len: usize) -> Result<Self, KernelError> {
        #[cfg(all(feature = "std", not(feature = "loom")))]
        let buf = THREAD_SCRATCH
            .try_with(core::cell::Cell::take)
            .unwrap_or_default();
        #[cfg(not(all(feature = "std", not(feature = "loom"))))]
        let buf = Values::new();
        let buf = if buf.len() < len {
            scratch(op, len)?
        } else {
            buf
        };
        Ok(Self { buf, len })
    }
}

impl core::ops::Deref for ReusedScratch {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.buf[..self.len]
    }
}

impl core::ops::DerefMut for ReusedScratch {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[..self.len]
    }
}

#[cfg(all(feature = "std", not(feature = "loom")))]
impl Drop for ReusedScratch {
    fn drop(&mut self) {
        if self.buf.len() <= KEPT_SCRATCH {
            let buf = core::mem::take(&mut self.buf);
            // Replaces (and frees) whatever a nested call put back meanwhile; a thread whose
            // thread-locals are being destroyed frees it.
            let _ = THREAD_SCRATCH.try_with(|s| s.set(buf));
        }
    }
}

/// Fills this thread's reused scratch with `len` copies of `value`, so that a test can show a
/// kernel's bits do not depend on what an earlier call left there.
#[cfg(all(test, feature = "std", not(feature = "loom")))]
pub(crate) fn poison_reused_scratch(len: usize, value: f32) {
    THREAD_SCRATCH.with(|s| s.set(Values::from_vec(alloc::vec![value; len])));
}

#[cfg(all(test, feature = "std", not(feature = "loom")))]
mod tests {
    use super::{poison_reused_scratch, KernelError, ReusedScratch, KEPT_SCRATCH};

    #[test]
    fn a_reused_scratch_holds_what_the_threads_last_one_left() {
        poison_reused_scratch(0, 0.0);
        {
            let mut first = ReusedScratch::take("sdpa", 4).unwrap();
            assert_eq!(*first, [0.0; 4]);
            first.copy_from_slice(&[1.0, 2.0, 3.0, 4.0]);
        }
        let second = ReusedScratch::take("sdpa", 3).unwrap();
        assert_eq!(*second, [1.0, 2.0, 3.0]);
    }

    #[test]
    fn a_reused_scratch_taken_while_another_is_held_is_a_zeroed_buffer_of_its_own() {
        poison_reused_scratch(8, 5.0);
        let mut outer = ReusedScratch::take("sdpa", 8).unwrap();
        let mut inner = ReusedScratch::take("sdpa", 8).unwrap();
        assert_eq!(*inner, [0.0; 8]);
        inner.fill(7.0);
        outer.fill(1.0);
        assert_eq!(*inner, [7.0; 8]);
        drop(inner);
        drop(outer);
        // The outer one, given back last, is the one kept.
        assert_eq!(*ReusedScratch::take("sdpa", 8).unwrap(), [1.0; 8]);
    }

    #[test]
    fn a_reused_scratch_above_the_kept_size_is_freed_when_dropped() {
        poison_reused_scratch(4, 3.0);
        ReusedScratch::take("sdpa", KEPT_SCRATCH + 1)
            .unwrap()
            .fill(9.0);
        // The large one went away; what the thread held before it was taken went with it.
        assert_eq!(*ReusedScratch::take("sdpa", 4).unwrap(), [0.0; 4]);
    }

    #[test]
    fn a_reused_scratch_no_allocation_can_serve_is_a_scratch_error_naming_the_op() {
        assert_eq!(
            ReusedScratch::take("sdpa", usize::MAX).err(),
            Some(KernelError::Scratch {
                op: "sdpa",
                elements: usize::MAX
            })
        );
    }
}
