//! The graph itself: nodes in topological order, each producing one value.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::attr::{Attr, AttrMap};
use super::hint::{ScheduleHint, SCHEDULE_KEY};
use super::op::{Op, OpKind};
use crate::sync::IdCounter;

/// A handle to the value a node produces (nodes produce exactly one value). A handle is a
/// position in one graph and remembers the builder that made it: the builder, and the graph
/// it builds, refuse a handle of any other builder (even one whose position is in range), and
/// handles of different builders never compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Value(pub(crate) usize, pub(crate) BuilderId);

impl Value {
    /// The producing node's position in [`Graph::nodes`].
    pub fn index(self) -> usize {
        self.0
    }
}

/// Which [`GraphBuilder`](super::GraphBuilder) made a handle: a process-wide counter, so
/// identities repeat only after `usize::MAX + 1` builders (2^32 on a 32-bit target).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct BuilderId(usize);

impl BuilderId {
    /// An identity no earlier builder of this process had (up to wrap-around).
    pub(crate) fn fresh() -> Self {
        static NEXT: IdCounter = IdCounter::new();
        Self(NEXT.next())
    }
}

/// One node: an id unique in its graph, an op, its operands, its (static) output shape, the
/// schedule hint asked for when it was built, and metadata that passes stamp.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub(crate) id: String,
    pub(crate) op: Op,
    pub(crate) inputs: Vec<Value>,
    pub(crate) shape: Vec<usize>,
    pub(crate) requested: Option<ScheduleHint>,
    /// What the annotation pass accepted: the typed source of the export's header (the
    /// metadata entry under [`SCHEDULE_KEY`] is its map form, for readers of the metadata).
    pub(crate) annotated: Option<ScheduleHint>,
    pub(crate) metadata: AttrMap,
}

impl Node {
    /// The node's id (for inputs, the input's name).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What it computes.
    pub fn op(&self) -> &Op {
        &self.op
    }

    /// Its op's kind.
    pub fn kind(&self) -> OpKind {
        self.op.kind()
    }

    /// Its operands, in the op's order (`sdpa`: q, k, v[, mask]; `conv2d`: input, weight[,
    /// bias]; binary ops: a, b; reshape and transpose: x; `embedding`: table, indices;
    /// `rope_tables`: x, cos, sin).
    pub fn inputs(&self) -> &[Value] {
        &self.inputs
    }

    /// The static shape of its value.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The schedule hint the builder was asked for (per op or from an enclosing scoped
    /// block), before any validation. What the export states is the [`annotated`](Self::annotated)
    /// hint, not this one.
    pub fn requested_hint(&self) -> Option<&ScheduleHint> {
        self.requested.as_ref()
    }

    /// The op parameters plus, under [`SCHEDULE_KEY`], the requested hint's map form: the
    /// node's operation parameters.
    pub fn params(&self) -> AttrMap {
        let mut params = self.op.params();
        if let Some(hint) = &self.requested {
            params.insert(SCHEDULE_KEY.to_string(), Attr::Map(hint.to_map()));
        }
        params
    }

    /// Metadata: user entries and what passes stamped (the accepted schedule under
    /// [`SCHEDULE_KEY`], the layout of an input under [`LAYOUT_KEY`](super::LAYOUT_KEY)).
    pub fn metadata(&self) -> &AttrMap {
        &self.metadata
    }

    /// The hint the annotation pass accepted and stamped, if any: what the export states.
    pub fn annotated(&self) -> Option<&ScheduleHint> {
        self.annotated.as_ref()
    }
}

/// A dataflow graph: nodes in topological order (every operand precedes its user) and the
/// values it returns. Built by [`GraphBuilder`](super::GraphBuilder).
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    pub(crate) nodes: Vec<Node>,
    pub(crate) outputs: Vec<Value>,
    /// The builder that made it: its handles are the only ones this graph accepts.
    pub(crate) builder: BuilderId,
}

impl Graph {
    /// Every node, in topological order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node producing `value`, or `None` for a handle from another graph (whatever its
    /// position).
    pub fn node(&self, value: Value) -> Option<&Node> {
        self.owns(value).then(|| self.nodes.get(value.0)).flatten()
    }

    /// The node with id `id`.
    pub fn find(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The input nodes, in the order they were declared.
    pub fn inputs(&self) -> impl Iterator<Item = &Node> + '_ {
        self.nodes.iter().filter(|n| n.op == Op::Input)
    }

    /// The values the graph returns, in order.
    pub fn outputs(&self) -> &[Value] {
        &self.outputs
    }

    /// Every edge `(operand, user)`, in node order.
    pub fn edges(&self) -> Vec<(Value, Value)> {
        self.nodes
            .iter()
            .enumerate()
            .flat_map(|(user, n)| {
                n.inputs
                    .iter()
                    .map(move |&v| (v, Value(user, self.builder)))
            })
            .collect()
    }

    /// The metadata of node `value`, mutably (what passes write through); `None` for a handle
    /// from another graph.
    pub fn metadata_mut(&mut self, value: Value) -> Option<&mut AttrMap> {
        if !self.owns(value) {
            return None;
        }
        self.nodes.get_mut(value.0).map(|n| &mut n.metadata)
    }

    fn owns(&self, value: Value) -> bool {
        value.1 == self.builder
    }
}
