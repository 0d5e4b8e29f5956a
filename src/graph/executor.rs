//! The graph executor: runs a graph eagerly with the ops of a context, under that context's
//! schedule.
//!
//! `sdpa`, `matmul` and `conv2d` go through [`TensorOps`](crate::kernels::TensorOps), so they
//! run under the schedule the ops carry and are bit-identical to a run under
//! [`Sequential`](crate::Sequential). `linear`, `rms_norm`, `rope`, `silu_mul`, `embedding` and
//! the broadcasting `add` call the crate's eager kernels of those names under the same
//! schedule (`rope_tables` calls `rope`'s or `rope_interleaved`'s rotation with its tables),
//! so a graph gives the bits a hand-written decoder gives. `sub`, `mul`, `reshape`,
//! `transpose` and `concat` are plain loops on the calling thread (there is nothing for a
//! schedule to gain on them here).
//!
//! ```
//! # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
//! use std::sync::Arc;
//! use skainet_schedule::OpsContext;
//! use skainet_schedule::graph::{execute, GraphBuilder};
//! use skainet_schedule::Tensor;
//! use skainet_schedule::Sequential;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut b = GraphBuilder::new();
//! let x = b.input("x", [2, 2])?;
//! let w = b.input("w", [2, 1])?;
//! let y = b.matmul(x, w).finish()?;
//! b.output(y)?;
//! let graph = b.build()?;
//!
//! let ctx = OpsContext::cpu(Sequential::shared());
//! let xs = Tensor::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0])?;
//! let ws = Tensor::new(vec![2, 1], vec![1.0, 1.0])?;
//! let out = execute(&ctx, &graph, &[("x", &xs), ("w", &ws)])?;
//! assert_eq!(out[0].data(), [3.0, 7.0]);
//! # Ok(())
//! # }
//! # }
//! ```

use alloc::borrow::Cow;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::node::Graph;
use super::op::{Op, OpKind};
use crate::context::{ContextRef, ExecutionContext, OpsContext};
use crate::kernels::{KernelError, OpsRef};
use crate::schedule::{same_schedule, ScheduleRef};
use crate::sync::Arc;
use crate::tensor::Tensor;
use crate::trace::TraceSinkRef;

/// Why a graph could not be run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecError {
    /// No tensor was given for an input of the graph.
    MissingInput {
        /// The input's name.
        name: String,
    },
    /// A tensor was given for a name that is not an input of the graph.
    UnknownInput {
        /// The name given.
        name: String,
    },
    /// An input tensor has another shape than the graph declares.
    InputShape {
        /// The input's name.
        name: String,
        /// The declared shape.
        expected: Vec<usize>,
        /// The tensor's shape.
        actual: Vec<usize>,
    },
    /// An index operand (of an `embedding`) holds a value that is not a whole number `>= 0`:
    /// every graph value is f32, and an index is one holding a whole number.
    NotAnIndex {
        /// The node.
        node: String,
        /// The value's position in the operand.
        at: usize,
        /// The value, printed.
        value: String,
    },
    /// A kernel refused its operands.
    Kernel {
        /// The node.
        node: String,
        /// Its op.
        op: OpKind,
        /// The kernel's error.
        error: KernelError,
    },
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MissingInput { name } => write!(f, "no tensor given for input {name:?}"),
            Self::UnknownInput { name } => write!(f, "{name:?} is not an input of the graph"),
            Self::InputShape {
                name,
                expected,
                actual,
            } => write!(
                f,
                "input {name:?} is declared {expected:?} but the tensor is {actual:?}"
            ),
            Self::NotAnIndex { node, at, value } => write!(
                f,
                "node {node:?} (embedding): index {value} at {at} is not a whole number >= 0"
            ),
            Self::Kernel { node, op, error } => write!(f, "node {node:?} ({op}): {error}"),
        }
    }
}

impl core::error::Error for ExecError {}

/// Runs `graph` with `ctx`'s ops (so under `ctx`'s schedule) on the named `inputs`, returning
/// the graph's outputs in order. Intermediate values are dropped after their last use.
///
/// # Errors
///
/// [`ExecError::MissingInput`], [`ExecError::UnknownInput`] or [`ExecError::InputShape`] for
/// inputs that do not match the graph; [`ExecError::NotAnIndex`] for an `embedding` index that
/// is not a whole number; [`ExecError::Kernel`] if a kernel refuses its operands (an index past
/// the table's rows, for one).
pub fn execute(
    ctx: &dyn ExecutionContext,
    graph: &Graph,
    inputs: &[(&str, &Tensor)],
) -> Result<Vec<Tensor>, ExecError> {
    for (name, _) in inputs {
        if !graph.inputs().any(|n| n.id == *name) {
            return Err(ExecError::UnknownInput {
                name: (*name).to_string(),
            });
        }
    }
    // The last node reading each value; outputs are read "after" every node.
    let mut last_use = vec![0usize; graph.nodes.len()];
    for (user, node) in graph.nodes.iter().enumerate() {
        for v in &node.inputs {
            last_use[v.0] = user;
        }
    }
    for v in &graph.outputs {
        last_use[v.0] = usize::MAX;
    }

    let ops = ctx.ops();
    let schedule = ops.schedule().as_ref();
    let mut values: Vec<Option<Cow<'_, Tensor>>> = vec![None; graph.nodes.len()];
    for (index, node) in graph.nodes.iter().enumerate() {
        let value = if node.op == Op::Input {
            let tensor = inputs
                .iter()
                .find(|(name, _)| *name == node.id)
                .map(|(_, t)| *t)
                .ok_or_else(|| ExecError::MissingInput {
                    name: node.id.clone(),
                })?;
            if tensor.shape() != node.shape.as_slice() {
                return Err(ExecError::InputShape {
                    name: node.id.clone(),
                    expected: node.shape.clone(),
                    actual: tensor.shape().to_vec(),
                });
            }
            Cow::Borrowed(tensor)
        } else {
            let args: Vec<&Tensor> = node
                .inputs
                .iter()
                .map(|v| {
                    values[v.0]
                        .as_deref()
                        .expect("operands precede their users")
                })
                .collect();
            let kernel = |error| ExecError::Kernel {
                node: node.id.clone(),
                op: node.kind(),
                error,
            };
            let out = match &node.op {
                Op::Input => unreachable!("handled above"),
                Op::Sdpa(o) => ops
                    .sdpa(args[0], args[1], args[2], args.get(3).copied(), o)
                    .map_err(kernel)?,
                Op::Matmul => ops.matmul(args[0], args[1]).map_err(kernel)?,
                Op::Conv2d(o) => ops
                    .conv2d(args[0], args[1], args.get(2).copied(), o)
                    .map_err(kernel)?,
                Op::Add => {
                    crate::kernels::add_broadcast(args[0], args[1], schedule).map_err(kernel)?
                }
                Op::Linear => crate::kernels::linear(args[0], args[1], schedule).map_err(kernel)?,
                Op::RmsNorm { eps } => {
                    crate::kernels::rms_norm(args[0], args[1], *eps, schedule).map_err(kernel)?
                }
                Op::Rope { offset, theta } => {
                    crate::kernels::rope(args[0], *offset, *theta, schedule).map_err(kernel)?
                }
                Op::SiluMul => {
                    crate::kernels::silu_mul(args[0], args[1], schedule).map_err(kernel)?
                }
                Op::Embedding => {
                    let ids = indices(&node.id, args[1])?;
                    crate::kernels::embedding(args[0], &ids, schedule).map_err(kernel)?
                }
                Op::RopeTables { interleaved } => crate::kernels::decoder::rope_by_tables(
                    args[0].view(),
                    args[1].data(),
                    args[2].data(),
                    *interleaved,
                    schedule,
                )
                .map_err(kernel)?,
                Op::Concat { dim } => concatenated(args[0], args[1], *dim, &node.shape),
                Op::Sub => zip(args[0], args[1], |a, b| a - b),
                Op::Mul => zip(args[0], args[1], |a, b| a * b),
                Op::Reshape => reshaped(args[0], &node.shape),
                Op::Transpose { permutation } => transposed(args[0], permutation, &node.shape),
            };
            Cow::Owned(out)
        };
        values[index] = Some(value);
        for v in &node.inputs {
            if last_use[v.0] == index {
                values[v.0] = None;
            }
        }
    }
    Ok(graph
        .outputs
        .iter()
        .map(|v| {
            values[v.0]
                .as_deref()
                .expect("outputs are kept to the end")
                .clone()
        })
        .collect())
}

/// The whole numbers an index operand holds, or the first value that is not one.
fn indices(node: &str, t: &Tensor) -> Result<Vec<usize>, ExecError> {
    t.data()
        .iter()
        .enumerate()
        .map(|(at, &v)| {
            if v.is_finite() && v >= 0.0 && libm::truncf(v) == v {
                // Saturates above usize::MAX: the kernel then reports a row out of range.
                Ok(v as usize)
            } else {
                Err(ExecError::NotAnIndex {
                    node: node.to_string(),
                    at,
                    value: alloc::format!("{v}"),
                })
            }
        })
        .collect()
}

/// Elementwise `f(a, b)`; the builder guarantees equal shapes.
fn zip(a: &Tensor, b: &Tensor, f: impl Fn(f32, f32) -> f32) -> Tensor {
    let data = a
        .data()
        .iter()
        .zip(b.data())
        .map(|(&x, &y)| f(x, y))
        .collect();
    Tensor::new(a.shape().to_vec(), data).expect("equal shapes give equal lengths")
}

/// `a` then `b` along `dim`; the builder checked that every other dimension matches.
fn concatenated(a: &Tensor, b: &Tensor, dim: usize, out_shape: &[usize]) -> Tensor {
    // Above `dim` the operands interleave in blocks: one block of each per outer index.
    let inner: usize = out_shape[dim + 1..].iter().product();
    let (block_a, block_b) = (a.shape()[dim] * inner, b.shape()[dim] * inner);
    let mut data = Vec::with_capacity(a.len() + b.len());
    if let Some(outer) = (a.len() + b.len()).checked_div(block_a + block_b) {
        for o in 0..outer {
            data.extend_from_slice(&a.data()[o * block_a..(o + 1) * block_a]);
            data.extend_from_slice(&b.data()[o * block_b..(o + 1) * block_b]);
        }
    }
    Tensor::new(out_shape.to_vec(), data).expect("the builder checked the shapes")
}

fn reshaped(x: &Tensor, shape: &[usize]) -> Tensor {
    Tensor::new(shape.to_vec(), x.data().to_vec()).expect("the builder checked the count")
}

/// Output dim `i` is input dim `permutation[i]`.
fn transposed(x: &Tensor, permutation: &[usize], out_shape: &[usize]) -> Tensor {
    let in_shape = x.shape();
    let rank = in_shape.len();
    let mut in_strides = vec![1usize; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        in_strides[d] = in_strides[d + 1] * in_shape[d + 1];
    }
    // The input stride of each output dim.
    let strides: Vec<usize> = permutation.iter().map(|&p| in_strides[p]).collect();
    let mut data = Vec::with_capacity(x.len());
    let mut index = vec![0usize; rank];
    let mut offset = 0usize;
    for _ in 0..x.len() {
        data.push(x.data()[offset]);
        // Advance the output index like an odometer, keeping the input offset in step.
        for d in (0..rank).rev() {
            index[d] += 1;
            offset += strides[d];
            if index[d] < out_shape[d] {
                break;
            }
            offset -= strides[d] * index[d];
            index[d] = 0;
        }
    }
    Tensor::new(out_shape.to_vec(), data).expect("a permutation keeps the count")
}

/// A context that runs graphs: it wraps another context and answers everything — first of
/// all its schedule — from the ops that context holds.
///
/// [`with_schedule`](ExecutionContext::with_schedule) asks the wrapped context: when it
/// rebuilds its ops the result is a sibling graph context under the new schedule; when it
/// cannot (an [`OpsContext`] over ops that cannot be rebuilt), the graph context stays as it
/// is and the wrapped context's [`ScheduleDowngraded`](crate::TraceEvent::ScheduleDowngraded)
/// event is the report.
///
/// ```
/// use std::sync::Arc;
/// use skainet_schedule::{ContextRef, ExecutionContext};
/// use skainet_schedule::graph::GraphContext;
/// use skainet_schedule::CpuOps;
/// use skainet_schedule::{Schedule, Sequential};
///
/// let ctx = Arc::new(GraphContext::over_ops(CpuOps::shared(Sequential::shared())));
/// assert_eq!(ctx.schedule().name(), "sequential");
/// ```
#[derive(Clone)]
pub struct GraphContext {
    inner: ContextRef,
}

impl GraphContext {
    /// A graph context over `inner`.
    pub fn new(inner: ContextRef) -> Self {
        Self { inner }
    }

    /// A graph context over `ops` (an [`OpsContext`] with the no-op sink).
    pub fn over_ops(ops: OpsRef) -> Self {
        Self::new(Arc::new(OpsContext::new(ops)))
    }

    /// A graph context over `ops`, reporting to `sink`.
    pub fn over_ops_with_sink(ops: OpsRef, sink: TraceSinkRef) -> Self {
        Self::new(Arc::new(OpsContext::new(ops).with_sink(sink)))
    }

    /// The wrapped context.
    pub fn inner(&self) -> &ContextRef {
        &self.inner
    }

    /// Runs `graph` with this context's ops; see [`execute`].
    ///
    /// # Errors
    ///
    /// As [`execute`].
    pub fn execute(
        &self,
        graph: &Graph,
        inputs: &[(&str, &Tensor)],
    ) -> Result<Vec<Tensor>, ExecError> {
        execute(self, graph, inputs)
    }
}

impl fmt::Debug for GraphContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphContext")
            .field("schedule", &self.schedule().name())
            .finish_non_exhaustive()
    }
}

impl ExecutionContext for GraphContext {
    fn schedule(&self) -> &ScheduleRef {
        self.inner.ops().schedule()
    }

    fn ops(&self) -> &OpsRef {
        self.inner.ops()
    }

    fn trace_sink(&self) -> &TraceSinkRef {
        self.inner.trace_sink()
    }

    fn with_schedule(self: Arc<Self>, schedule: ScheduleRef) -> ContextRef {
        if same_schedule(self.schedule().as_ref(), schedule.as_ref()) {
            return self;
        }
        let next = self.inner.clone().with_schedule(schedule);
        if core::ptr::addr_eq(Arc::as_ptr(&next), Arc::as_ptr(&self.inner)) {
            // The wrapped context kept its ops and has reported why.
            return self;
        }
        Arc::new(GraphContext { inner: next })
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn transpose_permutes_dimensions() {
        let x = Tensor::from_fn(vec![2, 3, 4], |i| i as f32).unwrap();
        let t = transposed(&x, &[2, 0, 1], &[4, 2, 3]);
        for a in 0..2 {
            for b in 0..3 {
                for c in 0..4 {
                    assert_eq!(t.get(&[c, a, b]), x.get(&[a, b, c]));
                }
            }
        }
    }

    #[test]
    fn transpose_of_rank_zero_and_one_is_a_copy() {
        let x = Tensor::new(vec![3], vec![1.0, 2.0, 3.0]).unwrap();
        assert_eq!(transposed(&x, &[0], &[3]), x);
        let s = Tensor::new(vec![], vec![7.0]).unwrap();
        assert_eq!(transposed(&s, &[], &[]), s);
    }
}
