//! The scheduled kernels and the ops that carry a schedule.
//!
//! Kernels take a `&dyn Schedule` argument and never reach for a pool of their own; a
//! [`TensorOps`] value binds them to the schedule they run under.
//!
//! * [`scaled_dot_product_attention`] — grouped-query attention over (batch, head) units;
//! * [`matmul()`], [`linear()`] and [`conv2d()`] — packed products over output tiles (a
//!   product of a few rows: over output columns);
//! * the decoder ops [`rms_norm`], [`rope`], [`silu_mul`], [`add_broadcast`], [`embedding`] —
//!   over output rows, reading [`TensorView`](crate::TensorView)s;
//! * [`quant_linear`] and [`quant_embedding`] — a product and a lookup over quantized weights
//!   read in place ([`QMatrix`]), the product over its output columns in two
//!   [`Activations`] modes;
//! * [`parallel_chunks`] — the one way they open a region (inline below a [`Work`] threshold);
//! * [`exp`] — the deterministic, vectorisable exponential of the softmax;
//! * [`cpu_kernels`] — the registry of compiled variants of the inner loops (portable, SSE2,
//!   AVX2, AVX-512 on x86_64; NEON on aarch64) every call dispatches through.
//!
//! Every kernel is bit-identical under every schedule: a unit's arithmetic is fixed (each
//! reduction in an order set by the shapes and the kernel's constants), whoever runs it. In
//! [`Precision::Portable`] (the default: no fused multiply-add) it is also bit-identical under
//! every variant; [`Precision::Native`] may fuse where the CPU can.
//!
//! Layers, each importing only those below it: the entry points (`sdpa.rs`, `matmul.rs`,
//! `conv.rs`) validate through [`shape`](crate::shape), allocate, and open a region with
//! `parallel.rs`; `config.rs` picks a variant; `variants.rs` compiles and registers the inner
//! loops of `loops/`; `loops/` knows nothing of schedules or variants.

mod config;
mod conv;
pub(crate) mod decoder;
mod error;
mod loops;
mod matmul;
mod ops;
mod parallel;
mod qlinear;
mod sdpa;
#[cfg(all(test, not(feature = "loom")))]
mod tests;
mod variants;

pub use config::{KernelConfig, Precision};
pub use conv::{conv2d, conv2d_with, Conv2dOptions, CONV2D_PARALLEL_MIN_WORK};
pub use decoder::{
    add_broadcast, add_broadcast_with, embedding, embedding_with, rms_norm, rms_norm_with, rope,
    rope_interleaved, rope_interleaved_with, rope_with, silu_mul, silu_mul_with,
    DECODER_PARALLEL_MIN_WORK,
};
pub use error::KernelError;
pub use loops::exp::{exp, EXP_MAX_ARG, EXP_MAX_REL_ERROR, EXP_MIN_ARG};
pub use matmul::{linear, linear_with, matmul, matmul_with, MATMUL_PARALLEL_MIN_WORK};
pub use ops::{CpuOps, OpsRef, TensorOps};
pub use parallel::{parallel_chunks, Work};
pub use qlinear::{
    quant_embedding, quant_embedding_with, quant_linear, quant_linear_many, quant_linear_many_with,
    quant_linear_with, Activations, QMatrix, QUANT_PARALLEL_MIN_WORK,
};
pub use sdpa::{
    scaled_dot_product_attention, scaled_dot_product_attention_with, SdpaOptions,
    SDPA_LATE_HELPER_WORK, SDPA_PARALLEL_MIN_WORK,
};
pub use variants::{cpu_kernels, selected_kernels, CpuKernels};

/// The row-level pieces a decoder's step and prefill run on their own buffers, so that they
/// allocate nothing: the same loops, in the same order, as the tensor ops above.
#[cfg(feature = "model")]
pub(crate) mod step {
    pub(crate) use super::decoder::{
        add_columns_into, rms_norm_rows_into, rope_interleaved_rows_into, silu_mul_columns_into,
    };
    pub(crate) use super::error::scratch;
    pub(crate) use super::loops::gate::silu_mul_row;
    pub(crate) use super::loops::norm::rms_norm_row;
    pub(crate) use super::loops::rope::{
        angle_table, inv_frequencies, push_angles, rope_interleaved_row,
    };
    pub(crate) use super::qlinear::{
        quant_embedding_row_into, quant_embedding_rows_into, quant_linear_row_into,
        quant_linear_rows_into, transpose_into, QScratch,
    };
    pub(crate) use super::sdpa::{attend_heads, Heads};
}
