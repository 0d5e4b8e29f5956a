//! The graph builder: a dataflow graph written as code, with per-op and scoped schedule
//! hints.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use super::attr::{Attr, AttrMap};
use super::hint::ScheduleHint;
use super::node::{BuilderId, Graph, Node, Value};
use super::op::{Op, OpKind};
use crate::kernels::{Conv2dOptions, SdpaOptions};
use crate::shape;
use crate::ShapeError;

/// Why a graph could not be built. Every variant names the node involved.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphError {
    /// Two nodes were given the same id.
    DuplicateId {
        /// The id used twice.
        id: String,
    },
    /// A node id or input name was empty.
    EmptyId,
    /// An operand handle does not belong to this builder: it was made by another builder
    /// (whatever its position), or is past this builder's nodes.
    UnknownValue {
        /// The node being added (or `"<output>"` for [`GraphBuilder::output`]).
        node: String,
        /// The handle's index.
        index: usize,
    },
    /// An op's operand shapes do not fit together.
    BadShape {
        /// The node being added.
        node: String,
        /// Its op.
        op: OpKind,
        /// What is wrong, with the shapes.
        error: ShapeError,
    },
    /// [`GraphBuilder::build`] was called without any [`output`](GraphBuilder::output).
    NoOutputs,
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateId { id } => write!(f, "node id {id:?} is used twice"),
            Self::EmptyId => write!(f, "node ids and input names must not be empty"),
            Self::UnknownValue { node, index } => write!(
                f,
                "node {node:?}: operand #{index} does not belong to this graph"
            ),
            // The shape error's message starts with the op already.
            Self::BadShape { node, error, .. } => write!(f, "node {node:?}: {error}"),
            Self::NoOutputs => write!(f, "the graph returns nothing: call output() first"),
        }
    }
}

impl core::error::Error for GraphError {}

/// Builds a [`Graph`] one op at a time, checking shapes as it goes.
///
/// Every op method returns an [`OpBuilder`]: name the node with [`id`](OpBuilder::id), give it
/// a hint with [`schedule`](OpBuilder::schedule), then [`finish`](OpBuilder::finish) it.
/// [`GraphBuilder::schedule`] applies a hint to every op added inside its closure; an op's own
/// hint wins over the block's, and nothing leaks out of the block.
///
/// ```
/// use skainet_schedule::graph::GraphBuilder;
/// use skainet_schedule::graph::ScheduleHint;
/// use skainet_schedule::SdpaOptions;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut b = GraphBuilder::new();
/// let q = b.input("q", [1, 8, 4, 16])?;
/// let k = b.input("k", [1, 2, 6, 16])?;
/// let v = b.input("v", [1, 2, 6, 16])?;
/// let heads = ScheduleHint::parallel(["heads"])?;
/// let attn = b.schedule(heads, |b| {
///     b.sdpa(q, k, v, None, SdpaOptions::default()).id("attn").finish()
/// })?;
/// b.output(attn)?;
/// let graph = b.build()?;
/// assert_eq!(graph.find("attn").unwrap().shape(), [1, 8, 4, 16]);
/// assert_eq!(graph.find("attn").unwrap().requested_hint().unwrap().parallel_dims(), ["heads"]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct GraphBuilder {
    nodes: Vec<Node>,
    ids: BTreeSet<String>,
    outputs: Vec<Value>,
    scopes: Vec<ScheduleHint>,
    generated: BTreeMap<OpKind, usize>,
    identity: BuilderId,
}

impl Default for GraphBuilder {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            ids: BTreeSet::new(),
            outputs: Vec::new(),
            scopes: Vec::new(),
            generated: BTreeMap::new(),
            identity: BuilderId::fresh(),
        }
    }
}

impl GraphBuilder {
    /// An empty builder, with an identity of its own: its [`Value`]s work only with it and
    /// the graph it builds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a named input with a static shape; its node id is `name`.
    ///
    /// # Errors
    ///
    /// [`GraphError::DuplicateId`] when `name` is taken, [`GraphError::EmptyId`] when empty,
    /// [`GraphError::BadShape`] with [`ShapeError::TooLarge`] when the shape holds more than
    /// [`shape::MAX_ELEMENTS`] values (or a dimension above it, even with a zero elsewhere):
    /// no tensor could be fed to it, and no compiler could read its type.
    pub fn input(&mut self, name: &str, shape: impl Into<Vec<usize>>) -> Result<Value, GraphError> {
        let shape = shape.into();
        if name.is_empty() {
            return Err(GraphError::EmptyId);
        }
        check_size(name, OpKind::Input, &shape)?;
        self.claim(name)?;
        Ok(self.push(Node {
            id: name.to_string(),
            op: Op::Input,
            inputs: Vec::new(),
            shape,
            requested: None,
            annotated: None,
            metadata: AttrMap::new(),
        }))
    }

    /// Attention over `q [b, H, Sq, hd]`, `k`/`v [b, nKV, Sk, hd]` and an optional additive
    /// mask `[Sq, Sk]` or `[b|1, H|1, Sq, Sk]`.
    pub fn sdpa(
        &mut self,
        q: Value,
        k: Value,
        v: Value,
        mask: Option<Value>,
        options: SdpaOptions,
    ) -> OpBuilder<'_> {
        let mut operands = alloc::vec![q, k, v];
        operands.extend(mask);
        OpBuilder::new(self, Op::Sdpa(options), operands)
    }

    /// `a [.., m, k] x b [k, n] -> [.., m, n]`.
    pub fn matmul(&mut self, a: Value, b: Value) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Matmul, alloc::vec![a, b])
    }

    /// A 2-D convolution of an NCHW `input` with an OIHW `weight` and an optional bias `[O]`.
    pub fn conv2d(
        &mut self,
        input: Value,
        weight: Value,
        bias: Option<Value>,
        options: Conv2dOptions,
    ) -> OpBuilder<'_> {
        let mut operands = alloc::vec![input, weight];
        operands.extend(bias);
        OpBuilder::new(self, Op::Conv2d(options), operands)
    }

    /// Elementwise `a + b`, broadcast like [`add_broadcast`](crate::add_broadcast) (trailing
    /// alignment: a `[d]` bias onto `[.., d]`, a residual onto its equal shape).
    pub fn add(&mut self, a: Value, b: Value) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Add, alloc::vec![a, b])
    }

    /// Elementwise `a - b` (equal shapes).
    pub fn sub(&mut self, a: Value, b: Value) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Sub, alloc::vec![a, b])
    }

    /// Elementwise `a * b` (equal shapes).
    pub fn mul(&mut self, a: Value, b: Value) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Mul, alloc::vec![a, b])
    }

    /// `x` under `shape` (same element count).
    pub fn reshape(&mut self, x: Value, shape: impl Into<Vec<usize>>) -> OpBuilder<'_> {
        let mut op = OpBuilder::new(self, Op::Reshape, alloc::vec![x]);
        op.reshape_to = Some(shape.into());
        op
    }

    /// `x` with its dimensions permuted (output dim `i` is input dim `permutation[i]`).
    pub fn transpose(&mut self, x: Value, permutation: impl Into<Vec<usize>>) -> OpBuilder<'_> {
        OpBuilder::new(
            self,
            Op::Transpose {
                permutation: permutation.into(),
            },
            alloc::vec![x],
        )
    }

    /// `x [.., k] · wᵀ` with `w [n, k]` (`[out, in]`) `-> [.., n]`, as [`linear`](crate::linear).
    pub fn linear(&mut self, x: Value, w: Value) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Linear, alloc::vec![x, w])
    }

    /// Each row of `x [.., d]` RMS-normalised and scaled by `weight [d]`, as
    /// [`rms_norm`](crate::rms_norm).
    pub fn rms_norm(&mut self, x: Value, weight: Value, eps: f32) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::RmsNorm { eps }, alloc::vec![x, weight])
    }

    /// Rotary position embedding of `x [b, heads, s, hd]` at positions `offset..offset + s`,
    /// as [`rope`](crate::rope).
    pub fn rope(&mut self, x: Value, offset: usize, theta: f32) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Rope { offset, theta }, alloc::vec![x])
    }

    /// `silu(gate) ⊙ up` (equal shapes), as [`silu_mul`](crate::silu_mul).
    pub fn silu_mul(&mut self, gate: Value, up: Value) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::SiluMul, alloc::vec![gate, up])
    }

    /// `a` then `b` along dimension `dim` (every other dimension equal).
    pub fn concat(&mut self, a: Value, b: Value, dim: usize) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Concat { dim }, alloc::vec![a, b])
    }

    /// The rows of `table [n, d]` named by `indices [m]` (f32 values holding whole numbers
    /// below `n`): `[m, d]`, as [`embedding`](crate::embedding). A token embedding, or the
    /// rows of a position's rotary angles.
    pub fn embedding(&mut self, table: Value, indices: Value) -> OpBuilder<'_> {
        OpBuilder::new(self, Op::Embedding, alloc::vec![table, indices])
    }

    /// Rotary position embedding of `x [b, heads, s, hd]` by the angles of `cos` and `sin`
    /// `[s, hd/2]` (row `i`: position `i`'s), adjacent pairs when `interleaved` (as
    /// [`rope_interleaved`](crate::rope_interleaved)), rotate-half pairs otherwise (as
    /// [`rope`](crate::rope)).
    pub fn rope_tables(
        &mut self,
        x: Value,
        cos: Value,
        sin: Value,
        interleaved: bool,
    ) -> OpBuilder<'_> {
        OpBuilder::new(
            self,
            Op::RopeTables { interleaved },
            alloc::vec![x, cos, sin],
        )
    }

    /// Runs `body` with `hint` applied to every op it adds that has no hint of its own, and
    /// returns what `body` returns. Blocks nest (the innermost wins); the hint ends with the
    /// block.
    pub fn schedule<R>(&mut self, hint: ScheduleHint, body: impl FnOnce(&mut Self) -> R) -> R {
        self.scopes.push(hint);
        let out = body(self);
        self.scopes.pop();
        out
    }

    /// Marks `value` as a result of the graph (results keep the order of these calls).
    ///
    /// # Errors
    ///
    /// [`GraphError::UnknownValue`] for a handle from another builder.
    pub fn output(&mut self, value: Value) -> Result<(), GraphError> {
        if !self.owns(value) {
            return Err(GraphError::UnknownValue {
                node: "<output>".to_string(),
                index: value.0,
            });
        }
        self.outputs.push(value);
        Ok(())
    }

    /// The shape of a value built so far; `None` for a handle of another builder.
    pub fn shape(&self, value: Value) -> Option<&[usize]> {
        if !self.owns(value) {
            return None;
        }
        self.nodes.get(value.0).map(|n| n.shape.as_slice())
    }

    /// The finished graph.
    ///
    /// # Errors
    ///
    /// [`GraphError::NoOutputs`] when no output was marked.
    pub fn build(self) -> Result<Graph, GraphError> {
        if self.outputs.is_empty() {
            return Err(GraphError::NoOutputs);
        }
        Ok(Graph {
            nodes: self.nodes,
            outputs: self.outputs,
            builder: self.identity,
        })
    }

    /// Whether `value` is a node of this builder (not of another one at the same position).
    fn owns(&self, value: Value) -> bool {
        value.1 == self.identity && value.0 < self.nodes.len()
    }

    fn claim(&mut self, id: &str) -> Result<(), GraphError> {
        if id.is_empty() {
            return Err(GraphError::EmptyId);
        }
        if !self.ids.insert(id.to_string()) {
            return Err(GraphError::DuplicateId { id: id.to_string() });
        }
        Ok(())
    }

    fn generate_id(&mut self, kind: OpKind) -> String {
        let next = self.generated.entry(kind).or_insert(0);
        loop {
            let id = format!("{}_{}", kind.name(), *next);
            *next += 1;
            if !self.ids.contains(&id) {
                return id;
            }
        }
    }

    fn push(&mut self, node: Node) -> Value {
        self.nodes.push(node);
        Value(self.nodes.len() - 1, self.identity)
    }
}

/// `Err(TooLarge)` for a shape no tensor can have: more than [`shape::MAX_ELEMENTS`] values,
/// or one dimension above it (a zero-sized tensor of such a shape still has a type that MLIR,
/// with its `i64` dimensions, may not read).
fn check_size(node: &str, op: OpKind, dims: &[usize]) -> Result<(), GraphError> {
    let fits =
        shape::element_count(dims).is_some() && dims.iter().all(|&d| d <= shape::MAX_ELEMENTS);
    if fits {
        return Ok(());
    }
    Err(GraphError::BadShape {
        node: node.to_string(),
        op,
        error: ShapeError::TooLarge {
            op: op.name(),
            shapes: alloc::vec![dims.to_vec()],
        },
    })
}

/// `[m, d]` for a `table [n, d]` and `indices [m]`. Which rows the indices name is data: the
/// executor checks it.
fn embedding_shape(table: &[usize], indices: &[usize]) -> Result<Vec<usize>, ShapeError> {
    let rank = |operand, expected, shape: &[usize]| ShapeError::Rank {
        op: "embedding",
        operand,
        expected,
        shape: shape.to_vec(),
    };
    let [_, d] = *table else {
        return Err(rank("table", "2", table));
    };
    let [m] = *indices else {
        return Err(rank("indices", "1", indices));
    };
    Ok(alloc::vec![m, d])
}

/// `x`'s shape, when `x` is `[b, heads, s, hd]` with `hd` even and both tables are `[s, hd/2]`.
fn rope_tables_shape(x: &[usize], cos: &[usize], sin: &[usize]) -> Result<Vec<usize>, ShapeError> {
    let [_, _, s, hd] = shape::rope(x, 0)?;
    let table = [s, hd / 2];
    for t in [cos, sin] {
        if t != table {
            return Err(ShapeError::ElementwiseMismatch {
                op: "rope_tables",
                a: table.to_vec(),
                b: t.to_vec(),
            });
        }
    }
    Ok(x.to_vec())
}

/// An op being added: set its id, hint and metadata, then [`finish`](OpBuilder::finish) it.
#[must_use = "an op is only added to the graph by finish()"]
pub struct OpBuilder<'b> {
    builder: &'b mut GraphBuilder,
    op: Op,
    operands: Vec<Value>,
    id: Option<String>,
    hint: Option<ScheduleHint>,
    metadata: AttrMap,
    reshape_to: Option<Vec<usize>>,
}

impl<'b> OpBuilder<'b> {
    fn new(builder: &'b mut GraphBuilder, op: Op, operands: Vec<Value>) -> Self {
        Self {
            builder,
            op,
            operands,
            id: None,
            hint: None,
            metadata: AttrMap::new(),
            reshape_to: None,
        }
    }

    /// Names the node (otherwise it gets `<op>_<n>`, e.g. `matmul_0`).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Gives this op its own schedule hint; it wins over any enclosing scoped block.
    pub fn schedule(mut self, hint: ScheduleHint) -> Self {
        self.hint = Some(hint);
        self
    }

    /// Adds a metadata entry to the node.
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<Attr>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Checks the operands' shapes and adds the node.
    ///
    /// # Errors
    ///
    /// [`GraphError::DuplicateId`] / [`GraphError::EmptyId`] for a bad id,
    /// [`GraphError::UnknownValue`] for a foreign operand, [`GraphError::BadShape`] (naming
    /// the node) when the operands do not fit.
    pub fn finish(self) -> Result<Value, GraphError> {
        let OpBuilder {
            builder,
            op,
            operands,
            id,
            hint,
            metadata,
            reshape_to,
        } = self;
        let kind = op.kind();
        let id = match id {
            Some(id) => id,
            None => builder.generate_id(kind),
        };
        let mut shapes: Vec<&[usize]> = Vec::with_capacity(operands.len());
        for v in &operands {
            match builder.owns(*v).then(|| &builder.nodes[v.0]) {
                Some(n) => shapes.push(&n.shape),
                None => {
                    return Err(GraphError::UnknownValue {
                        node: id,
                        index: v.0,
                    })
                }
            }
        }
        let inferred = match &op {
            Op::Input => Ok(Vec::new()),
            Op::Sdpa(o) => shape::sdpa(
                shapes[0],
                shapes[1],
                shapes[2],
                shapes.get(3).copied(),
                o.causal,
            )
            .map(|d| d.output_shape()),
            Op::Matmul => shape::matmul(shapes[0], shapes[1]).map(|d| d.output_shape),
            Op::Conv2d(o) => shape::conv2d(
                shapes[0],
                shapes[1],
                shapes.get(2).copied(),
                o.stride,
                o.padding,
            )
            .map(|d| d.output_shape()),
            Op::Add => shape::broadcast(kind.name(), shapes[0], shapes[1]),
            Op::Sub | Op::Mul | Op::SiluMul => {
                shape::elementwise(kind.name(), shapes[0], shapes[1])
            }
            Op::Linear => shape::linear(shapes[0], shapes[1]).map(|d| d.output_shape),
            Op::RmsNorm { .. } => shape::rms_norm(shapes[0], shapes[1]).map(|_| shapes[0].to_vec()),
            Op::Rope { offset, .. } => shape::rope(shapes[0], *offset).map(|d| d.to_vec()),
            Op::Concat { dim } => shape::concat(shapes[0], shapes[1], *dim),
            Op::Embedding => embedding_shape(shapes[0], shapes[1]),
            Op::RopeTables { .. } => rope_tables_shape(shapes[0], shapes[1], shapes[2]),
            Op::Reshape => shape::reshape(shapes[0], reshape_to.as_deref().unwrap_or(&[])),
            Op::Transpose { permutation } => shape::transpose(shapes[0], permutation),
        };
        let shape = inferred.map_err(|error| GraphError::BadShape {
            node: id.clone(),
            op: kind,
            error,
        })?;
        // A reshape may name any dims; inferred shapes of the other ops stay within their
        // operands', but one check covers all.
        check_size(&id, kind, &shape)?;
        builder.claim(&id)?;
        let requested = hint.or_else(|| builder.scopes.last().cloned());
        Ok(builder.push(Node {
            id,
            op,
            inputs: operands,
            shape,
            requested,
            annotated: None,
            metadata,
        }))
    }
}
