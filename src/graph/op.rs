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
    /// Elementwise `a + b` of two equal shapes.
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
}

impl OpKind {
    /// The stable lower-case name: `input`, `sdpa`, `matmul`, `conv2d`, `add`, `sub`, `mul`,
    /// `reshape`, `transpose`.
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
        }
    }

    /// The family of schedulable ops this kind belongs to, or `None` when a schedule has
    /// nothing to split in it.
    pub const fn schedule_class(self) -> Option<ScheduleClass> {
        match self {
            Self::Sdpa => Some(ScheduleClass::Attention),
            Self::Matmul => Some(ScheduleClass::Linear),
            Self::Conv2d => Some(ScheduleClass::Conv),
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
pub enum ScheduleClass {
    /// Attention: every (batch, head) pair is independent.
    Attention,
    /// Matmul / linear: every output row is independent.
    Linear,
    /// Convolution: every (batch, output channel) pair is independent.
    Conv,
}

impl ScheduleClass {
    /// The canonical names of the dimensions a hint may name for this family.
    pub const fn known_dims(self) -> &'static [&'static str] {
        match self {
            Self::Attention => &["batch", "heads"],
            Self::Linear => &["rows"],
            Self::Conv => &["batch", "out_channels"],
        }
    }

    /// The family's name in messages: `attention`, `linear`, `conv`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Attention => "attention",
            Self::Linear => "linear",
            Self::Conv => "conv",
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
        }
    }

    /// The op's parameters as attributes (`scale`, `causal`, `stride`, `padding`,
    /// `permutation`), for tooling that reads graphs generically. Ops without parameters
    /// give an empty map.
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
