//! What a kernel reports instead of panicking: every invalid shape names the shapes involved.

use core::fmt;

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
        }
    }
}

impl core::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Shape(err) => Some(err),
            Self::Tensor(err) => Some(err),
            Self::DisjointSplit(err) => Some(err),
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

impl From<DisjointError> for KernelError {
    fn from(err: DisjointError) -> Self {
        Self::DisjointSplit(err)
    }
}

/// A zeroed scratch buffer of `len` values, or [`KernelError::Scratch`] when it cannot be had.
pub(crate) fn scratch(op: &'static str, len: usize) -> Result<alloc::vec::Vec<f32>, KernelError> {
    crate::tensor::try_zeroed(len).ok_or(KernelError::Scratch { op, elements: len })
}
