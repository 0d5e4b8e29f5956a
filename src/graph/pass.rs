//! Passes over a built graph: the schedule annotation pass (which hints are accepted, and the
//! structural defaults) and the tensor layout pass (what the export's
//! `skainet.tensor_layouts` states).

use alloc::collections::BTreeMap;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use super::attr::Attr;
use super::hint::{ScheduleHint, SCHEDULE_KEY};
use super::node::{Graph, Value};
use super::op::{normalize_dim, Op, OpKind, ScheduleClass};

/// The metadata key under which the layout pass records an input's layout.
pub const LAYOUT_KEY: &str = "skainet.layout";

/// Something a pass reports about one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The node's id.
    pub node: String,
    /// The node's op.
    pub op: OpKind,
    /// What happened.
    pub kind: DiagnosticKind,
}

/// What a [`Diagnostic`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DiagnosticKind {
    /// A hint named dimensions the op does not have; nothing was stamped.
    UnknownDims {
        /// The names it asked for that the op does not know, as given.
        rejected: Vec<String>,
        /// The dimensions this op honours.
        honoured: Vec<String>,
    },
    /// A hint was given to an op a schedule has nothing to split in; nothing was stamped.
    Unschedulable {
        /// The dimensions it asked for, as given.
        requested: Vec<String>,
    },
    /// An explicit parallelism was kept: it is advisory, read by no compiler (the core count
    /// is chosen at run time).
    Advisory {
        /// The parallelism stated.
        parallelism: usize,
    },
    /// Two consumers of an input want different layouts; the first one was kept.
    LayoutConflict {
        /// The layout kept.
        kept: String,
        /// The layout dropped.
        dropped: String,
    },
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Diagnostic { node, op, kind } = self;
        match kind {
            DiagnosticKind::UnknownDims { rejected, honoured } => write!(
                f,
                "node {node:?} ({op}): unknown parallel dims {rejected:?}; {op} honours {honoured:?}; no schedule stamped"
            ),
            DiagnosticKind::Unschedulable { requested } => write!(
                f,
                "node {node:?} ({op}): {op} has no schedulable dims; hint {requested:?} ignored"
            ),
            DiagnosticKind::Advisory { parallelism } => write!(
                f,
                "node {node:?} ({op}): parallelism = {parallelism} is advisory: stated in the header, read by no compiler; cores are chosen at run time"
            ),
            DiagnosticKind::LayoutConflict { kept, dropped } => write!(
                f,
                "input {node:?}: layout {dropped:?} conflicts with {kept:?}; kept {kept:?}"
            ),
        }
    }
}

/// Why a set of structural defaults could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefaultsError {
    /// A default stated a core count; defaults are structure only.
    Parallelism {
        /// The op family.
        class: ScheduleClass,
        /// The parallelism it stated.
        parallelism: usize,
    },
    /// A default named dimensions its op family does not have.
    UnknownDims {
        /// The op family.
        class: ScheduleClass,
        /// The unknown names.
        rejected: Vec<String>,
    },
}

impl fmt::Display for DefaultsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Parallelism { class, parallelism } => write!(
                f,
                "structural default for {}: states parallelism = {parallelism}; defaults never carry a core count",
                class.name()
            ),
            Self::UnknownDims { class, rejected } => write!(
                f,
                "structural default for {}: unknown dims {rejected:?}; it honours {:?}",
                class.name(),
                class.known_dims()
            ),
        }
    }
}

impl core::error::Error for DefaultsError {}

/// The hints an op gets when it asked for none: structure only, never a core count.
///
/// ```
/// use skainet_schedule::graph::{DefaultsError, ScheduleClass, StructuralDefaults};
/// use skainet_schedule::graph::ScheduleHint;
///
/// let d = StructuralDefaults::standard();
/// assert_eq!(d.get(ScheduleClass::Attention).unwrap().parallel_dims(), ["batch", "heads"]);
///
/// let with_cores = ScheduleHint::new(["rows"], Some(8)).unwrap();
/// assert_eq!(
///     StructuralDefaults::none().with(ScheduleClass::Linear, with_cores),
///     Err(DefaultsError::Parallelism { class: ScheduleClass::Linear, parallelism: 8 })
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StructuralDefaults {
    by_class: BTreeMap<ScheduleClass, ScheduleHint>,
}

impl StructuralDefaults {
    /// No defaults at all.
    pub fn none() -> Self {
        Self::default()
    }

    /// The standard defaults: attention → `["batch", "heads"]`.
    pub fn standard() -> Self {
        let mut by_class = BTreeMap::new();
        by_class.insert(
            ScheduleClass::Attention,
            ScheduleHint::parallel(ScheduleClass::Attention.known_dims().iter().copied())
                .expect("two distinct, non-blank names"),
        );
        Self { by_class }
    }

    /// These defaults plus `hint` for `class` (replacing any it had), under the canonical names.
    ///
    /// # Errors
    ///
    /// [`DefaultsError::Parallelism`] when `hint` states a parallelism,
    /// [`DefaultsError::UnknownDims`] when it names a dimension `class` does not have.
    pub fn with(mut self, class: ScheduleClass, hint: ScheduleHint) -> Result<Self, DefaultsError> {
        if let Some(parallelism) = hint.parallelism() {
            return Err(DefaultsError::Parallelism { class, parallelism });
        }
        let hint = match canonical(class, &hint) {
            Ok(hint) => hint,
            Err(rejected) => return Err(DefaultsError::UnknownDims { class, rejected }),
        };
        self.by_class.insert(class, hint);
        Ok(self)
    }

    /// The default for `class`, if any.
    pub fn get(&self, class: ScheduleClass) -> Option<&ScheduleHint> {
        self.by_class.get(&class)
    }
}

/// `hint` with every dim replaced by `class`'s canonical name for it (duplicates after
/// normalisation dropped), or the dims it does not know, as given.
fn canonical(class: ScheduleClass, hint: &ScheduleHint) -> Result<ScheduleHint, Vec<String>> {
    let known = class.known_dims();
    let mut dims: Vec<&'static str> = Vec::new();
    let mut rejected = Vec::new();
    for dim in hint.parallel_dims() {
        let norm = normalize_dim(dim);
        match known.iter().find(|k| normalize_dim(k) == norm) {
            Some(k) if !dims.contains(k) => dims.push(k),
            Some(_) => {}
            None => rejected.push(dim.clone()),
        }
    }
    if !rejected.is_empty() {
        return Err(rejected);
    }
    Ok(ScheduleHint::new(dims, hint.parallelism())
        .expect("canonical dims are distinct and non-blank"))
}

/// Validates every node's requested schedule hint and stamps the accepted ones into its
/// metadata under [`SCHEDULE_KEY`]; what the export's `skainet.schedule` header states.
///
/// For each node:
/// * a requested hint on a schedulable op (attention: `batch`, `heads`; matmul and linear:
///   `rows`; conv: `batch`, `out_channels`; the row-wise `add`, `rms_norm`, `rope` and
///   `silu_mul`: `rows`; names compared ignoring ASCII case, otherwise exactly) is
///   stamped with the canonical names; an explicit parallelism is kept and reported
///   [`DiagnosticKind::Advisory`];
/// * a hint naming an unknown dim gives [`DiagnosticKind::UnknownDims`] and no metadata;
///   a hint on any other op gives [`DiagnosticKind::Unschedulable`] and no metadata;
/// * a node without a hint gets its family's [`StructuralDefaults`] entry, if any.
///
/// The pass only writes that one metadata key: edges, ids and shapes are untouched, and
/// running it twice gives the graph (and the diagnostics) of running it once.
///
/// ```
/// use skainet_schedule::graph::{GraphBuilder, ScheduleAnnotationPass};
/// use skainet_schedule::graph::ScheduleHint;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut b = GraphBuilder::new();
/// let x = b.input("x", [4, 3])?;
/// let w = b.input("w", [3, 2])?;
/// let y = b.matmul(x, w).id("mm").schedule(ScheduleHint::parallel(["Rows"])?).finish()?;
/// b.output(y)?;
/// let mut graph = b.build()?;
/// let diagnostics = ScheduleAnnotationPass::new().run(&mut graph);
/// assert!(diagnostics.is_empty());
/// assert_eq!(graph.find("mm").unwrap().annotated(), Some(&ScheduleHint::parallel(["rows"])?));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleAnnotationPass {
    defaults: StructuralDefaults,
}

impl Default for ScheduleAnnotationPass {
    fn default() -> Self {
        Self::new()
    }
}

impl ScheduleAnnotationPass {
    /// The pass with the [standard](StructuralDefaults::standard) defaults.
    pub fn new() -> Self {
        Self::with_defaults(StructuralDefaults::standard())
    }

    /// The pass with the given defaults.
    pub fn with_defaults(defaults: StructuralDefaults) -> Self {
        Self { defaults }
    }

    /// The defaults it applies.
    pub fn defaults(&self) -> &StructuralDefaults {
        &self.defaults
    }

    /// Runs the pass over `graph`, returning its diagnostics in node order.
    pub fn run(&self, graph: &mut Graph) -> Vec<Diagnostic> {
        let mut diagnostics = Vec::new();
        for node in &mut graph.nodes {
            let op = node.op.kind();
            if op == OpKind::Input {
                continue;
            }
            let class = op.schedule_class();
            let mut report = |kind: DiagnosticKind| {
                diagnostics.push(Diagnostic {
                    node: node.id.clone(),
                    op,
                    kind,
                })
            };
            let stamped = match (&node.requested, class) {
                (Some(hint), None) => {
                    report(DiagnosticKind::Unschedulable {
                        requested: hint.parallel_dims().to_vec(),
                    });
                    None
                }
                (Some(hint), Some(class)) => match canonical(class, hint) {
                    Ok(accepted) => {
                        if let Some(parallelism) = accepted.parallelism() {
                            report(DiagnosticKind::Advisory { parallelism });
                        }
                        Some(accepted)
                    }
                    Err(rejected) => {
                        report(DiagnosticKind::UnknownDims {
                            rejected,
                            honoured: class.known_dims().iter().map(|d| d.to_string()).collect(),
                        });
                        None
                    }
                },
                (None, Some(class)) => self.defaults.get(class).cloned(),
                (None, None) => None,
            };
            // The typed hint is what the export reads; the metadata entry is its map form.
            match &stamped {
                Some(hint) => {
                    node.metadata
                        .insert(SCHEDULE_KEY.to_string(), Attr::Map(hint.to_map()));
                }
                None => {
                    node.metadata.remove(SCHEDULE_KEY);
                }
            }
            node.annotated = stamped;
        }
        diagnostics
    }
}

/// Records, on each input node, the layout its consumers read it in, under [`LAYOUT_KEY`]:
/// what the export's `skainet.tensor_layouts` states.
///
/// Layouts name the axes in order: attention's `q`, `k` and `v` are `"NHSD"` (batch, heads —
/// K/V heads for `k` and `v` —, sequence, head dim), a mask is the trailing letters of
/// `"NHQK"` for its rank (`"QK"` for `[Sq, Sk]`; Q for queries, K for keys); a convolution's input is `"NCHW"` and its weight `"OIHW"`.
/// Only inputs an op reads directly get a layout; the first consumer (in topological order)
/// wins and a later, different one is reported as [`DiagnosticKind::LayoutConflict`]. A layout
/// already in an input's metadata (stamped by hand or by an earlier run) is kept, so the pass
/// is idempotent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TensorLayoutPass;

impl TensorLayoutPass {
    /// Runs the pass over `graph`, returning its diagnostics.
    pub fn run(&self, graph: &mut Graph) -> Vec<Diagnostic> {
        let mut wanted: Vec<(Value, &'static str)> = Vec::new();
        for node in &graph.nodes {
            match &node.op {
                Op::Sdpa(_) => {
                    for &v in &node.inputs[..3] {
                        wanted.push((v, "NHSD"));
                    }
                    if let Some(&mask) = node.inputs.get(3) {
                        let rank = graph.nodes[mask.0].shape.len();
                        wanted.push((mask, &"NHQK"[4 - rank.min(4)..]));
                    }
                }
                Op::Conv2d(_) => {
                    wanted.push((node.inputs[0], "NCHW"));
                    wanted.push((node.inputs[1], "OIHW"));
                }
                _ => {}
            }
        }
        let mut diagnostics = Vec::new();
        for (value, layout) in wanted {
            let node = &mut graph.nodes[value.0];
            if node.op != Op::Input {
                continue;
            }
            match node.metadata.get(LAYOUT_KEY).and_then(Attr::as_str) {
                None => {
                    node.metadata
                        .insert(LAYOUT_KEY.to_string(), Attr::from(layout));
                }
                Some(kept) if kept != layout => diagnostics.push(Diagnostic {
                    node: node.id.clone(),
                    op: OpKind::Input,
                    kind: DiagnosticKind::LayoutConflict {
                        kept: kept.to_string(),
                        dropped: layout.to_string(),
                    },
                }),
                Some(_) => {}
            }
        }
        diagnostics
    }
}

/// The passes an exporter runs before [`export`](super::stablehlo::export): the
/// [`TensorLayoutPass`], then the [`ScheduleAnnotationPass`] with the standard defaults.
/// Returns their diagnostics, layout first.
pub fn core_passes(graph: &mut Graph) -> Vec<Diagnostic> {
    let mut diagnostics = TensorLayoutPass.run(graph);
    diagnostics.extend(ScheduleAnnotationPass::new().run(graph));
    diagnostics
}
