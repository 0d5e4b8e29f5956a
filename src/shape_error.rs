//! [`ShapeError`]: the one error of the shape rules, wrapped by `KernelError::Shape` and by the
//! graph's `GraphError::BadShape`. Its own file so that its one public path is the crate root.

use alloc::vec::Vec;
use core::fmt;

/// The most `f32` values one tensor may hold: the most whose bytes fit one allocation
/// (`isize::MAX` bytes). A shape above it is a [`ShapeError::TooLarge`] before anything is
/// allocated; one below it may still fail to allocate, which is reported, never an abort.
pub const MAX_ELEMENTS: usize = isize::MAX as usize / core::mem::size_of::<f32>();

/// Why an op's operands do not fit together. Every variant carries the shapes involved, and
/// its message starts with the op's name (`sdpa`, `matmul`, `conv2d`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeError {
    /// An operand has the wrong number of dimensions.
    Rank {
        /// The op (`sdpa`, `matmul`, `conv2d`, ...).
        op: &'static str,
        /// Which operand (`q`, `k`, `v`, `mask`, `a`, `b`, `input`, `weight`, `bias`).
        operand: &'static str,
        /// The rank it needs, as text (`"4"`, `">= 2"`, `"2 to 4"`).
        expected: &'static str,
        /// The shape it has.
        shape: Vec<usize>,
    },
    /// SDPA: the batch of `k`/`v` differs from `q`'s.
    BatchMismatch {
        /// The query shape `[b, H, Sq, hd]`.
        q: Vec<usize>,
        /// The key or value shape `[b, nKV, Sk, hd]`.
        kv: Vec<usize>,
    },
    /// SDPA: `k` and `v` have different head counts.
    KvHeadsMismatch {
        /// The key shape.
        k: Vec<usize>,
        /// The value shape.
        v: Vec<usize>,
    },
    /// SDPA: `k`/`v` have zero heads while `q` has some.
    ZeroKvHeads {
        /// The query shape.
        q: Vec<usize>,
        /// The key shape.
        k: Vec<usize>,
    },
    /// SDPA: the K/V head count does not divide the query head count.
    KvHeadsDoNotDivide {
        /// The query shape; its dimension 1 is `H`.
        q: Vec<usize>,
        /// The key shape; its dimension 1 is `nKV`.
        k: Vec<usize>,
    },
    /// SDPA: `k` or `v` has another head dimension than `q`.
    HeadDimMismatch {
        /// The query shape.
        q: Vec<usize>,
        /// The key or value shape.
        kv: Vec<usize>,
    },
    /// SDPA: `k` and `v` have different lengths (`Sk`).
    KvLengthMismatch {
        /// The key shape.
        k: Vec<usize>,
        /// The value shape.
        v: Vec<usize>,
    },
    /// SDPA: the mask does not broadcast to the scores `[b, H, Sq, Sk]`.
    MaskShape {
        /// The mask shape.
        mask: Vec<usize>,
        /// The scores shape it must broadcast to.
        scores: Vec<usize>,
    },
    /// SDPA: causal attention with more queries than keys (bottom-right alignment would leave
    /// the first rows without any key).
    CausalQueryLongerThanKeys {
        /// The query shape.
        q: Vec<usize>,
        /// The key shape.
        k: Vec<usize>,
    },
    /// matmul: the inner dimensions differ (`a[.., m, k]` × `b[k, n]`).
    MatmulInnerMismatch {
        /// The left shape.
        a: Vec<usize>,
        /// The right shape.
        b: Vec<usize>,
    },
    /// conv2d: the input's channels differ from the weight's input channels.
    ConvChannelMismatch {
        /// The input shape `[N, C, H, W]`.
        input: Vec<usize>,
        /// The weight shape `[O, C, kH, kW]`.
        weight: Vec<usize>,
    },
    /// conv2d: the bias is not `[O]`.
    ConvBiasShape {
        /// The bias shape.
        bias: Vec<usize>,
        /// The weight shape `[O, C, kH, kW]`.
        weight: Vec<usize>,
    },
    /// conv2d: a stride is zero.
    ConvZeroStride {
        /// The stride given.
        stride: [usize; 2],
    },
    /// conv2d: the kernel is larger than the padded input, so there is no output position.
    ConvKernelTooLarge {
        /// The input shape.
        input: Vec<usize>,
        /// The weight shape.
        weight: Vec<usize>,
        /// The padding given.
        padding: [usize; 2],
    },
    /// An elementwise op's operands have different shapes.
    ElementwiseMismatch {
        /// The op (`add`, `sub`, `mul`).
        op: &'static str,
        /// The left shape.
        a: Vec<usize>,
        /// The right shape.
        b: Vec<usize>,
    },
    /// A reshape changes the element count (or the count overflows).
    Reshape {
        /// The operand's shape.
        from: Vec<usize>,
        /// The requested shape.
        to: Vec<usize>,
    },
    /// A transpose's permutation is not a permutation of the operand's dimensions.
    Permutation {
        /// The operand's shape.
        shape: Vec<usize>,
        /// The permutation given.
        permutation: Vec<usize>,
    },
    /// A K/V cache append: the new keys or values are not `[b, nKV, t, hd]` of the cache's
    /// `b`, `nKV`, `hd`, or keys and values differ in length.
    KvAppendShape {
        /// The cache's shape `[b, nKV, capacity, hd]`.
        cache: Vec<usize>,
        /// The new keys' shape.
        k: Vec<usize>,
        /// The new values' shape.
        v: Vec<usize>,
    },
    /// A K/V cache append would go past the cache's capacity.
    KvCacheFull {
        /// The positions the cache holds.
        capacity: usize,
        /// The positions already filled.
        len: usize,
        /// The positions being appended.
        new: usize,
    },
    /// A normalisation's weight is not one value per feature (the last dimension of `x`).
    NormWeight {
        /// The op (`rms_norm`).
        op: &'static str,
        /// The input shape `[.., d]`.
        x: Vec<usize>,
        /// The weight shape (must be `[d]`).
        weight: Vec<usize>,
    },
    /// Rotary embedding: the head dimension is odd, so it does not split into pairs.
    RopeOddHeadDim {
        /// The input shape `[b, heads, s, hd]`.
        x: Vec<usize>,
    },
    /// Rotary embedding: the last position (`offset + s - 1`) overflows.
    RopePositions {
        /// The input shape `[b, heads, s, hd]`.
        x: Vec<usize>,
        /// The position of the first row.
        offset: usize,
    },
    /// Two operands do not broadcast together (trailing alignment: every dimension equal or 1).
    Broadcast {
        /// The op (`add`).
        op: &'static str,
        /// The left shape.
        a: Vec<usize>,
        /// The right shape.
        b: Vec<usize>,
    },
    /// Embedding lookup: a token id is not a row of the table.
    EmbeddingId {
        /// The table shape `[vocab, d]`.
        table: Vec<usize>,
        /// Where in the ids it is.
        index: usize,
        /// The id.
        id: usize,
    },
    /// A view's strides do not lay out its values the way the op reads them (the op reads rows
    /// or heads as contiguous slices; it never gathers single values).
    Layout {
        /// The op (`sdpa`, `rms_norm`, ...).
        op: &'static str,
        /// Which operand.
        operand: &'static str,
        /// Its shape.
        shape: Vec<usize>,
        /// Its strides.
        strides: Vec<usize>,
        /// What the op needs, as text (`"the last stride 1"`, ...).
        expected: &'static str,
    },
    /// A tensor the op would read or write holds more bytes than one allocation can
    /// ([`MAX_ELEMENTS`]), so no call with these shapes can succeed.
    TooLarge {
        /// The op (`tensor` for a tensor built on its own).
        op: &'static str,
        /// The shapes that were given (operands, or the tensor's own shape).
        shapes: Vec<Vec<usize>>,
    },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rank {
                op,
                operand,
                expected,
                shape,
            } => write!(
                f,
                "{op}: {operand} must have rank {expected}, got shape {shape:?}"
            ),
            Self::BatchMismatch { q, kv } => {
                write!(f, "sdpa: batch of k/v {kv:?} differs from q {q:?}")
            }
            Self::KvHeadsMismatch { k, v } => {
                write!(f, "sdpa: k {k:?} and v {v:?} have different head counts")
            }
            Self::ZeroKvHeads { q, k } => {
                write!(f, "sdpa: k {k:?} has zero heads for q {q:?}")
            }
            Self::KvHeadsDoNotDivide { q, k } => write!(
                f,
                "sdpa: k/v heads of {k:?} do not divide the query heads of {q:?}"
            ),
            Self::HeadDimMismatch { q, kv } => {
                write!(f, "sdpa: head dimension of k/v {kv:?} differs from q {q:?}")
            }
            Self::KvLengthMismatch { k, v } => {
                write!(f, "sdpa: k {k:?} and v {v:?} have different lengths")
            }
            Self::MaskShape { mask, scores } => write!(
                f,
                "sdpa: mask {mask:?} does not broadcast to the scores {scores:?}"
            ),
            Self::CausalQueryLongerThanKeys { q, k } => write!(
                f,
                "sdpa: causal attention needs no more queries than keys, got q {q:?} and k {k:?}"
            ),
            Self::MatmulInnerMismatch { a, b } => {
                write!(f, "matmul: inner dimensions of a {a:?} and b {b:?} differ")
            }
            Self::ConvChannelMismatch { input, weight } => write!(
                f,
                "conv2d: channels of input {input:?} differ from weight {weight:?}"
            ),
            Self::ConvBiasShape { bias, weight } => write!(
                f,
                "conv2d: bias {bias:?} is not one value per output channel of weight {weight:?}"
            ),
            Self::ConvZeroStride { stride } => {
                write!(f, "conv2d: stride {stride:?} has a zero")
            }
            Self::ConvKernelTooLarge {
                input,
                weight,
                padding,
            } => write!(
                f,
                "conv2d: weight {weight:?} is larger than input {input:?} padded by {padding:?}"
            ),
            Self::ElementwiseMismatch { op, a, b } => {
                write!(f, "{op}: operands {a:?} and {b:?} have different shapes")
            }
            Self::Reshape { from, to } => {
                write!(
                    f,
                    "reshape: cannot reshape {from:?} to {to:?}: element counts differ"
                )
            }
            Self::Permutation { shape, permutation } => write!(
                f,
                "transpose: {permutation:?} is not a permutation of the dimensions of {shape:?}"
            ),
            Self::KvAppendShape { cache, k, v } => write!(
                f,
                "kv_cache: new keys {k:?} and values {v:?} are not [b, nKV, t, hd] of the cache {cache:?}"
            ),
            Self::KvCacheFull { capacity, len, new } => write!(
                f,
                "kv_cache: appending {new} positions to the {len} filled exceeds the capacity of {capacity}"
            ),
            Self::NormWeight { op, x, weight } => write!(
                f,
                "{op}: weight {weight:?} is not one value per feature of x {x:?}"
            ),
            Self::RopeOddHeadDim { x } => write!(
                f,
                "rope: head dimension of x {x:?} is odd; it must split into pairs"
            ),
            Self::RopePositions { x, offset } => write!(
                f,
                "rope: positions from {offset} over x {x:?} overflow"
            ),
            Self::Broadcast { op, a, b } => {
                write!(f, "{op}: operands {a:?} and {b:?} do not broadcast together")
            }
            Self::EmbeddingId { table, index, id } => write!(
                f,
                "embedding: token id {id} (at index {index}) is not a row of the table {table:?}"
            ),
            Self::Layout {
                op,
                operand,
                shape,
                strides,
                expected,
            } => write!(
                f,
                "{op}: {operand} of shape {shape:?} has strides {strides:?}; it needs {expected}"
            ),
            Self::TooLarge { op, shapes } => write!(
                f,
                "{op}: shapes {shapes:?} need a tensor of more than {MAX_ELEMENTS} f32 values"
            ),
        }
    }
}

impl core::error::Error for ShapeError {}
