//! The panel geometry every packed operand shares: the product's micro-kernels and the
//! convolution's packing of its input both size their buffers by it, so it sits below both.

/// The largest `MR` (rows of A's panels) of any micro-kernel: what packing buffers and the
/// partial-tile copy are sized for, and what tiles are aligned to.
pub(crate) const MAX_MR: usize = 12;
/// The largest `NR` (columns of B's panels) of any micro-kernel; a convolution packs at most
/// this many output pixels per panel.
pub(crate) const MAX_NR: usize = 32;
