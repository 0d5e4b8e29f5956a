//! The operations a graph node can hold, and which of their axes a schedule may split.

use alloc::string::ToString;
use alloc::vec::Vec;
use core::fmt;

use super::attr::{Attr, AttrMap};
use crate::kernels::{Conv2dOptions, SdpaOptions};

/// What a node computes. Inputs are named graph arguments; every other op reads the values of
/// earlier nodes (see [`Node::inputs`](super::Node::inputs) for the operand order of each).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Op {
    /// A named graph argument with a static shape.
    Input,
    /// Scaled dot-product attention; operands `q, k, v` and an optional additive `mask`.
    Sdpa(SdpaOptions),
    /// `a [.., m, k] x b [k, n] -> [.., m, n]`; operands `a, b`.
    Matmul,
    /// 2-D convolution, NCHW input and OIHW weight; operands `input, weight` and an optional
    /// bias `[O]`.
    Conv2d(Conv2dOptions),
    /// Elementwise `a + b`, broadcast like [`add_broadcast`](crate::add_broadcast): trailing
    /// alignment, each pair of dimensions equal or one of them 1.
    Add,
    /// Elementwise `a - b` of two equal shapes.
    Sub,
    /// Elementwise `a * b` of two equal shapes.
    Mul,
    /// The same values under another shape with the same element count.
    Reshape,
    /// Dimensions permuted: output dimension `i` is input dimension `permutation[i]`.
    Transpose {
        /// The permutation of the input's dimensions.
        permutation: Vec<usize>,
    },
    /// `x [.., k] · wᵀ` with `w [n, k]` (a layer's `[out, in]` weight) `-> [.., n]`, as
    /// [`linear`](crate::linear); operands `x, w`.
    Linear,
    /// Root-mean-square normalisation of each row of `x [.., d]` scaled by `weight [d]`, as
    /// [`rms_norm`](crate::rms_norm); operands `x, weight`.
    RmsNorm {
        /// Added to the mean of squares before the square root.
        eps: f32,
    },
    /// Rotary position embedding of `x [b, heads, s, hd]` at positions `offset..offset + s`,
    /// as [`rope`](crate::rope); operand `x`.
    Rope {
        /// The position of the first row.
        offset: usize,
        /// The frequency base (10000 in Llama 2).
        theta: f32,
    },
    /// `silu(gate) ⊙ up` of two equal shapes, as [`silu_mul`](crate::silu_mul); operands
    /// `gate, up`.
    SiluMul,
    /// Operands joined along dimension `dim` (every other dimension equal); a K/V cache's
    /// past positions followed by the new ones, for instance.
    Concat {
        /// The dimension the operands are joined along.
        dim: usize,
    },
    /// The rows of `table [n, d]` named by `indices [m]`: `[m, d]`, as
    /// [`embedding`](crate::embedding); operands `table, indices`. Every graph value is f32, so
    /// an index is an f32 holding a whole number below `n` (exact up to 2^24).
    Embedding,
    /// Rotary position embedding of `x [b, heads, s, hd]` by given angles: row `i` of
    /// `cos, sin [s, hd/2]` holds the cosines and sines of position `i`'s angles (as the
    /// eager kernels' f64 angles rounded once); operands `x, cos, sin`. The positions are
    /// data, not a parameter: a graph picks its tables' rows with an [`Embedding`](Self::Embedding)
    /// of a position input.
    RopeTables {
        /// Adjacent pairs `(x[2j], x[2j+1])`, as [`rope_interleaved`](crate::rope_interleaved)
        /// (GGUF's layout of Llama's Q and K); otherwise rotate-half pairs `(x[j], x[j+hd/2])`,
        /// as [`rope`](crate::rope).
        interleaved: bool,
    },
}

/// An op's name without its parameters: what diagnostics, generated ids and the export print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum OpKind {
    /// [`Op::Input`].
    Input,
    /// [`Op::Sdpa`].
    Sdpa,
    /// [`Op::Matmul`].
    Matmul,
    /// [`Op::Conv2d`].
    Conv2d,
    /// [`Op::Add`].
    Add,
    /// [`Op::Sub`].
    Sub,
    /// [`Op::Mul`].
    Mul,
    /// [`Op::Reshape`].
    Reshape,
    /// [`Op::Transpose`].
    Transpose,
    /// [`Op::Linear`].
    Linear,
    /// [`Op::RmsNorm`].
    RmsNorm,
    /// [`Op::Rope`].
    Rope,
    /// [`Op::SiluMul`].
    SiluMul,
    /// [`Op::Concat`].
    Concat,
    /// [`Op::Embedding`].
    Embedding,
    /// [`Op::RopeTables`].
    RopeTables,
}

impl OpKind {
    /// The stable lower-case name: `input`, `sdpa`, `matmul`, `conv2d`, `add`, `sub`, `mul`,
    /// `reshape`, `transpose`, `linear`, `rms_norm`, `rope`, `silu_mul`, `concat`, `embedding`,
    /// `rope_tables`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Sdpa => "sdpa",
            Self::Matmul => "matmul",
            Self::Conv2d => "conv2d",
            Self::Add => "add",
            Self::Sub => "sub",
            Self::Mul => "mul",
            Self::Reshape => "reshape",
            Self::Transpose => "transpose",
            Self::Linear => "linear",
            Self::RmsNorm => "rms_norm",
            Self::Rope => "rope",
            Self::SiluMul => "silu_mul",
            Self::Concat => "concat",
            Self::Embedding => "embedding",
            Self::RopeTables => "rope_tables",
        }
    }

    /// The family of schedulable ops this kind belongs to, or `None` when a schedule has
    /// nothing to split in it.
    pub const fn schedule_class(self) -> Option<ScheduleClass> {
        match self {
            Self::Sdpa => Some(ScheduleClass::Attention),
            Self::Matmul | Self::Linear => Some(ScheduleClass::Linear),
            Self::Conv2d => Some(ScheduleClass::Conv),
            Self::Add
            | Self::RmsNorm
            | Self::Rope
            | Self::SiluMul
            | Self::Embedding
            | Self::RopeTables => Some(ScheduleClass::RowWise),
            _ => None,
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The families of ops whose independent axes a schedule may split, each with its own
/// known dimension names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ScheduleClass {
    /// Attention: every (batch, head) pair is independent.
    Attention,
    /// Matmul / linear: every output row is independent.
    Linear,
    /// Convolution: every (batch, output channel) pair is independent.
    Conv,
    /// Row-wise ops (`rms_norm`, `rope`, `rope_tables`, `silu_mul`, `embedding`, the
    /// broadcasting `add`): every row of the
    /// output (all dimensions but the last, flattened) is independent — the units the eager
    /// kernels split. `sub`, `mul`, `reshape`, `transpose` and `concat` stay unschedulable:
    /// the eager executor runs them as plain loops, so a hint would promise nothing.
    RowWise,
}

impl ScheduleClass {
    /// The canonical names of the dimensions a hint may name for this family.
    pub const fn known_dims(self) -> &'static [&'static str] {
        match self {
            Self::Attention => &["batch", "heads"],
            Self::Linear => &["rows"],
            Self::Conv => &["batch", "out_channels"],
            Self::RowWise => &["rows"],
        }
    }

    /// The family's name in messages: `attention`, `linear`, `conv`, `row_wise`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Attention => "attention",
            Self::Linear => "linear",
            Self::Conv => "conv",
            Self::RowWise => "row_wise",
        }
    }
}

impl Op {
    /// The op's kind.
    pub fn kind(&self) -> OpKind {
        match self {
            Self::Input => OpKind::Input,
            Self::Sdpa(_) => OpKind::Sdpa,
            Self::Matmul => OpKind::Matmul,
            Self::Conv2d(_) => OpKind::Conv2d,
            Self::Add => OpKind::Add,
            Self::Sub => OpKind::Sub,
            Self::Mul => OpKind::Mul,
            Self::Reshape => OpKind::Reshape,
            Self::Transpose { .. } => OpKind::Transpose,
            Self::Linear => OpKind::Linear,
            Self::RmsNorm { .. } => OpKind::RmsNorm,
            Self::Rope { .. } => OpKind::Rope,
            Self::SiluMul => OpKind::SiluMul,
            Self::Concat { .. } => OpKind::Concat,
            Self::Embedding => OpKind::Embedding,
            Self::RopeTables { .. } => OpKind::RopeTables,
        }
    }

    /// The op's parameters as attributes (`scale`, `causal`, `stride`, `padding`,
    /// `permutation`, `eps`, `offset`, `theta`, `dim`, `interleaved`), for tooling that reads
    /// graphs generically. Ops without parameters give an empty map.
    pub fn params(&self) -> AttrMap {
        let mut map = AttrMap::new();
        let ints = |xs: &[usize]| Attr::List(xs.iter().map(|&x| Attr::Int(x as i64)).collect());
        match self {
            Self::Sdpa(o) => {
                if let Some(scale) = o.scale {
                    map.insert("scale".to_string(), Attr::Float(f64::from(scale)));
                }
                map.insert("causal".to_string(), Attr::Bool(o.causal));
            }
            Self::Conv2d(o) => {
                map.insert("stride".to_string(), ints(&o.stride));
                map.insert("padding".to_string(), ints(&o.padding));
            }
            Self::Transpose { permutation } => {
                map.insert("permutation".to_string(), ints(permutation));
            }
            Self::RmsNorm { eps } => {
                map.insert("eps".to_string(), Attr::Float(f64::from(*eps)));
            }
            Self::Rope { offset, theta } => {
                map.insert(
                    "offset".to_string(),
                    Attr::Int(i64::try_from(*offset).unwrap_or(i64::MAX)),
                );
                map.insert("theta".to_string(), Attr::Float(f64::from(*theta)));
            }
            Self::Concat { dim } => {
                map.insert("dim".to_string(), Attr::Int(*dim as i64));
            }
            Self::RopeTables { interleaved } => {
                map.insert("interleaved".to_string(), Attr::Bool(*interleaved));
            }
            _ => {}
        }
        map
    }
}

/// Canonical form of a dimension name: ASCII lower case, nothing else changed, so `Heads`,
/// `HEADS` and `heads` compare equal while `out_channels`, `outchannels` and `rows"]}` stay
/// distinct names (a [`ScheduleHint`](super::ScheduleHint) accepts identifiers only).
///
/// ```
/// use skainet_schedule::graph::normalize_dim;
/// assert_eq!(normalize_dim("Out_Channels"), "out_channels");
/// assert_eq!(normalize_dim("HEADS"), "heads");
/// assert_eq!(normalize_dim("rows\"]}"), "rows\"]}");
/// ```
pub fn normalize_dim(name: &str) -> alloc::string::String {
    name.to_ascii_lowercase()
}
