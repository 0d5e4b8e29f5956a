//! The StableHLO export: a graph as a textual MLIR module that `iree-compile` accepts.
//!
//! The module's header states what the passes stamped (see [`module_header`]); its body is
//! one `func.func @main` whose arguments are the graph's inputs (in declaration order) and
//! whose results are the graph's outputs. It never states a core count: the header's
//! `parallelism` is advisory, and the device picks the number of cores when it is created.
//!
//! Every tensor a graph reads — weights included — is an `Input`, so a function argument: the
//! module holds no weights (only rope's small angle tables are constants), and one compiled
//! module runs any weights of the declared shapes.
//!
//! The lowerings, with the eager kernel's semantics:
//!
//! * `sdpa`: Q `[b, H, Sq, hd]` is viewed as `[b, nKV, nRep, Sq, hd]` (`nRep = H / nKV`)
//!   and both `stablehlo.dot_general`s batch over `[b, nKV]` — scores with
//!   `contracting_dims = [4] x [3]` against K `[b, nKV, Sk, hd]`, the output with
//!   `contracting_dims = [4] x [2]` against V — so K and V are never concatenated or
//!   broadcast. Scores are scaled (`scale`, default `1 / sqrt(hd)`), the additive mask is
//!   broadcast onto them, the causal mask is bottom-right aligned (query `i` sees key
//!   `j <= i + Sk - Sq`, built with `iota`/`compare`/`select`), and a row whose scores are all
//!   `-inf` yields zeros: its max is replaced by 0 before the `exp`, its zero sum by 1, and
//!   its output row is selected to zeros after the second `dot_general` (the eager kernel
//!   never reads `v` for it, so NaN in `v` does not reach it there either). NaN follows the
//!   eager rule for `q`, `k`, the mask and `scale`: `stablehlo.maximum` propagates NaN, so a
//!   NaN score is never taken for a fully masked row and its whole row is NaN. One difference
//!   remains, for NaN in `v` only: a key hidden by causality still meets `v` in the second
//!   `dot_general` with weight `0`, and `0 · NaN` is NaN there, while the eager kernel never
//!   reads that key (avoiding it would take a select over `[.., Sq, Sk, hd]`).
//! * `matmul`: one `stablehlo.dot_general` contracting the last dim of `a` with dim 0 of `b`.
//! * `conv2d`: `stablehlo.convolution` with `[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]`, plus a
//!   broadcast `add` of the bias.
//! * `add`: operands of another shape than the output are first `broadcast_in_dim` onto it
//!   with trailing alignment (dims `[R - r, .., R - 1]`), as the eager `add_broadcast` reads them.
//! * `sub`, `mul`, `reshape`, `transpose`: the StableHLO op of the same name (`multiply`,
//!   `subtract` for the two binary ones).
//! * `linear`: one `stablehlo.dot_general` of the `[out, in]` weight with `x`, the weight
//!   first (its dim 1 contracted with the last of `x`), then a `transpose` of the `[out, ..]`
//!   product to `[.., out]` — an activation-sized copy, a reshape in effect for one row. With
//!   `x` first, IREE materialised a transpose of the weight before every product; with the
//!   weight first it reads the weight in place, which matters when weights are function inputs
//!   (a SmolLM2-135M decode step: 5x less work).
//! * `rms_norm`: `reduce` (add) of `x * x` over the last dim, divided by `d`, plus `eps`,
//!   `rsqrt`, broadcast back over the row and multiplied into `x`, then by the broadcast weight.
//! * `rope`: the `cos`/`sin` tables `[s, hd/2]` are f32 constants in the module, computed from
//!   the same f64 angles as the eager kernel; `x` is sliced into its halves (rotate-half, the
//!   eager pairing of `j` with `j + hd/2`), rotated with `multiply`/`subtract`/`add` and
//!   concatenated back.
//! * `silu_mul`: `logistic(gate) * gate * up`.
//! * `embedding`: the f32 indices `convert`ed to `i32` and reshaped to `[m, 1]`, then one
//!   `stablehlo.gather` of `[1, d]` slices of the table (`collapsed_slice_dims = [0]`). An index
//!   that is not a whole number below the table's rows is the caller's error: the eager
//!   executor refuses it, while `convert` truncates and `gather` clamps its start index (the
//!   StableHLO rule), so the compiled module reads some row.
//! * `rope_tables`: `x` viewed with its pairs on a last axis of 2 (`[b, h, s, hd/2, 2]` for
//!   adjacent pairs, `[b, h, s, 2, hd/2]` for rotate-half), the pair swapped by a
//!   `stablehlo.reverse` of that axis, and `x · cos + swap(x) · (sin · [-1, 1])` with the
//!   tables broadcast over heads: `x₀·c - x₁·s` and `x₁·c + x₀·s`, the eager kernel's products
//!   and sums, with no slice or concatenate.
//! * `concat`: one `stablehlo.concatenate` — in a decoder, a K/V cache's past positions then
//!   the new ones along the sequence dimension (never a repeat of K/V heads: grouped-query
//!   attention reads the `nKV` heads by index, as above).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

use super::node::{Graph, Node};
use super::op::Op;
use super::pass::LAYOUT_KEY;

/// The name of the exported function.
pub const FUNCTION: &str = "main";

/// The textual MLIR module for `graph`: [`module_header`], then `func.func @main`.
///
/// ```
/// use skainet_schedule::graph::{core_passes, stablehlo, GraphBuilder};
/// use skainet_schedule::graph::ScheduleHint;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut b = GraphBuilder::new();
/// let x = b.input("x", [4, 3])?;
/// let w = b.input("w", [3, 2])?;
/// let hint = ScheduleHint::new(["rows"], Some(8))?;
/// let y = b.matmul(x, w).id("proj").schedule(hint).finish()?;
/// b.output(y)?;
/// let mut graph = b.build()?;
/// core_passes(&mut graph);
/// let mlir = stablehlo::export(&graph);
/// assert!(mlir.starts_with(
///     "module attributes {skainet.schedule = {proj = {parallel_dims = [\"rows\"], parallelism = 8}}} {\n"
/// ));
/// assert!(mlir.contains("stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]"));
/// # Ok(())
/// # }
/// ```
pub fn export(graph: &Graph) -> String {
    let mut out = module_header(graph);
    out.push('\n');
    let mut body = Body::default();
    let mut names: Vec<String> = Vec::with_capacity(graph.nodes.len());
    let mut args = Vec::new();
    for node in &graph.nodes {
        let name = match &node.op {
            Op::Input => {
                let name = format!("%arg{}", args.len());
                args.push(format!("{name}: {}", ty(&node.shape)));
                name
            }
            _ => {
                let operands: Vec<(&str, &[usize])> = node
                    .inputs
                    .iter()
                    .map(|v| (names[v.0].as_str(), graph.nodes[v.0].shape.as_slice()))
                    .collect();
                body.lower(node, &operands)
            }
        };
        names.push(name);
    }
    let results: Vec<&Node> = graph.outputs.iter().map(|v| &graph.nodes[v.0]).collect();
    let result_types: Vec<String> = results.iter().map(|n| ty(&n.shape)).collect();
    let result_sig = if result_types.len() == 1 {
        result_types[0].clone()
    } else {
        format!("({})", result_types.join(", "))
    };
    let _ = writeln!(
        out,
        "  func.func @{FUNCTION}({}) -> {result_sig} {{",
        args.join(", ")
    );
    out.push_str(&body.text);
    let result_names: Vec<&str> = graph.outputs.iter().map(|v| names[v.0].as_str()).collect();
    let _ = writeln!(
        out,
        "    return {} : {}",
        result_names.join(", "),
        result_types.join(", ")
    );
    out.push_str("  }\n}\n");
    out
}

/// The module's first line, without the newline: `module attributes {…} {`, or `module {`
/// when there is nothing to state.
///
/// Two attributes, in this order, each only when it has entries:
/// * `skainet.tensor_layouts = {<input> = "<layout>", …}` — the layout the
///   [`TensorLayoutPass`](super::TensorLayoutPass) recorded for each input, sorted by input
///   name;
/// * `skainet.schedule = {<node> = {parallel_dims = [...], parallelism = N}, …}` — the hints
///   the [`ScheduleAnnotationPass`](super::ScheduleAnnotationPass) accepted, in topological
///   order, `parallelism` only when one was stated. A hint the pass rejected (or a graph the
///   pass never ran on) states nothing.
///
/// Keys are bare when they are MLIR identifiers (`[A-Za-z_][A-Za-z0-9_$.]*`), quoted
/// otherwise.
pub fn module_header(graph: &Graph) -> String {
    let mut layouts: Vec<(&str, &str)> = graph
        .inputs()
        .filter_map(|n| Some((n.id(), n.metadata.get(LAYOUT_KEY)?.as_str()?)))
        .collect();
    layouts.sort_unstable();
    let schedule: Vec<(&str, &super::hint::ScheduleHint)> = graph
        .nodes
        .iter()
        .filter_map(|n| Some((n.id(), n.annotated()?)))
        .collect();

    let mut attrs = Vec::new();
    if !layouts.is_empty() {
        let entries: Vec<String> = layouts
            .iter()
            .map(|(name, layout)| format!("{} = {}", key(name), quote(layout)))
            .collect();
        attrs.push(format!(
            "skainet.tensor_layouts = {{{}}}",
            entries.join(", ")
        ));
    }
    if !schedule.is_empty() {
        let entries: Vec<String> = schedule
            .iter()
            .map(|(id, hint)| {
                let dims: Vec<String> = hint.parallel_dims().iter().map(|d| quote(d)).collect();
                let mut entry = format!("{} = {{parallel_dims = [{}]", key(id), dims.join(", "));
                if let Some(p) = hint.parallelism() {
                    let _ = write!(entry, ", parallelism = {p}");
                }
                entry.push('}');
                entry
            })
            .collect();
        attrs.push(format!(
            "{} = {{{}}}",
            super::hint::SCHEDULE_KEY,
            entries.join(", ")
        ));
    }
    if attrs.is_empty() {
        String::from("module {")
    } else {
        format!("module attributes {{{}}} {{", attrs.join(", "))
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '.'))
}

fn key(s: &str) -> String {
    if is_identifier(s) {
        String::from(s)
    } else {
        quote(s)
    }
}

/// An MLIR string literal: `"` and `\` escaped, other non-printable bytes as `\XX`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:02X}");
            }
        }
    }
    out.push('"');
    out
}

/// `tensor<2x3xf32>`, `tensor<f32>` for rank 0.
fn ty(shape: &[usize]) -> String {
    typed(shape, "f32")
}

fn typed(shape: &[usize], element: &str) -> String {
    let mut s = String::from("tensor<");
    for d in shape {
        let _ = write!(s, "{d}x");
    }
    s.push_str(element);
    s.push('>');
    s
}

/// An exact f32 literal: the bit pattern in hex.
fn f32_literal(x: f32) -> String {
    format!("0x{:08X}", x.to_bits())
}

fn dims(xs: impl IntoIterator<Item = usize>) -> String {
    let v: Vec<String> = xs.into_iter().map(|x| format!("{x}")).collect();
    format!("[{}]", v.join(", "))
}

/// `1, 2, 3`.
fn list(xs: &[usize]) -> String {
    let v: Vec<String> = xs.iter().map(|x| format!("{x}")).collect();
    v.join(", ")
}

/// `values` of `shape` as a nested MLIR dense literal, `[[0x.., 0x..], [..]]`.
fn nested(out: &mut String, values: &[f32], shape: &[usize]) {
    match shape.split_first() {
        None => out.push_str(&f32_literal(values[0])),
        Some((&n, rest)) => {
            let step = rest.iter().product::<usize>();
            out.push('[');
            for i in 0..n {
                if i > 0 {
                    out.push_str(", ");
                }
                nested(out, &values[i * step..(i + 1) * step], rest);
            }
            out.push(']');
        }
    }
}

/// `[cos, sin]` of `(offset + i) · theta^(-2j / hd)` for positions `i < len` and pairs
/// `j < hd / 2`, row-major by position: the eager `rope`'s angles, with its arithmetic (f64,
/// rounded once to f32), so the exported tables hold the bits the eager kernel rotates by.
pub(crate) fn rope_angles(
    offset: usize,
    len: usize,
    hd: usize,
    theta: f32,
) -> impl Iterator<Item = [f32; 2]> {
    let half = hd / 2;
    let theta = f64::from(theta);
    (0..len).flat_map(move |i| {
        let pos = (offset + i) as f64;
        (0..half).map(move |j| {
            let angle = pos * libm::pow(theta, -((2 * j) as f64) / hd as f64);
            [libm::cos(angle) as f32, libm::sin(angle) as f32]
        })
    })
}

/// The function body under construction, with its SSA counter.
#[derive(Default)]
struct Body {
    text: String,
    next: usize,
}

impl Body {
    /// Emits `%N = <rhs>` and returns `%N`.
    fn emit(&mut self, rhs: String) -> String {
        let name = format!("%{}", self.next);
        self.next += 1;
        let _ = writeln!(self.text, "    {name} = {rhs}");
        name
    }

    fn constant(&mut self, value: f32, shape: &[usize]) -> String {
        self.emit(format!(
            "stablehlo.constant dense<{}> : {}",
            f32_literal(value),
            ty(shape)
        ))
    }

    fn binary(&mut self, op: &str, a: &str, b: &str, shape: &[usize]) -> String {
        self.emit(format!("stablehlo.{op} {a}, {b} : {}", ty(shape)))
    }

    fn broadcast(&mut self, x: &str, x_ty: &str, dims_: &[usize], shape: &[usize]) -> String {
        self.emit(format!(
            "stablehlo.broadcast_in_dim {x}, dims = {} : ({x_ty}) -> {}",
            dims(dims_.iter().copied()),
            ty(shape)
        ))
    }

    fn reshape(&mut self, x: &str, from: &[usize], to: &[usize]) -> String {
        self.emit(format!(
            "stablehlo.reshape {x} : ({}) -> {}",
            ty(from),
            ty(to)
        ))
    }

    fn compare(&mut self, dir: &str, a: &str, b: &str, shape: &[usize]) -> String {
        self.emit(format!(
            "stablehlo.compare {dir}, {a}, {b}, FLOAT : ({t}, {t}) -> {}",
            typed(shape, "i1"),
            t = ty(shape)
        ))
    }

    fn select(&mut self, pred: &str, on_true: &str, on_false: &str, shape: &[usize]) -> String {
        self.emit(format!(
            "stablehlo.select {pred}, {on_true}, {on_false} : ({}, {t}, {t}) -> {t}",
            typed(shape, "i1"),
            t = ty(shape)
        ))
    }

    fn reduce_last(&mut self, x: &str, init: f32, op: &str, from: &[usize]) -> String {
        let init = self.constant(init, &[]);
        let to = &from[..from.len() - 1];
        self.emit(format!(
            "stablehlo.reduce({x} init: {init}) applies stablehlo.{op} across dimensions = [{}] : ({}, tensor<f32>) -> {}",
            from.len() - 1,
            ty(from),
            ty(to)
        ))
    }

    /// Lowers one non-input node; `operands` are its operands' SSA names and shapes.
    fn lower(&mut self, node: &Node, operands: &[(&str, &[usize])]) -> String {
        let out = node.shape.as_slice();
        let _ = writeln!(
            self.text,
            "    // {} = {}",
            node.id.escape_debug(),
            node.kind()
        );
        match &node.op {
            Op::Input => unreachable!("inputs are function arguments"),
            Op::Add => {
                let a = self.broadcast_to(operands[0], out);
                let b = self.broadcast_to(operands[1], out);
                self.binary("add", &a, &b, out)
            }
            Op::Linear => self.linear(operands, out),
            Op::RmsNorm { eps } => self.rms_norm(operands, *eps, out),
            Op::Rope { offset, theta } => self.rope(operands[0].0, *offset, *theta, out),
            Op::SiluMul => {
                let (g, u) = (operands[0].0, operands[1].0);
                let sig = self.emit(format!("stablehlo.logistic {g} : {}", ty(out)));
                let silu = self.binary("multiply", g, &sig, out);
                self.binary("multiply", &silu, u, out)
            }
            Op::Concat { dim } => self.emit(format!(
                "stablehlo.concatenate {}, {}, dim = {dim} : ({}, {}) -> {}",
                operands[0].0,
                operands[1].0,
                ty(operands[0].1),
                ty(operands[1].1),
                ty(out)
            )),
            Op::Embedding => self.embedding(operands, out),
            Op::RopeTables { interleaved } => self.rope_tables(operands, *interleaved, out),
            Op::Sub => self.binary("subtract", operands[0].0, operands[1].0, out),
            Op::Mul => self.binary("multiply", operands[0].0, operands[1].0, out),
            Op::Reshape => self.reshape(operands[0].0, operands[0].1, out),
            Op::Transpose { permutation } => self.emit(format!(
                "stablehlo.transpose {}, dims = {} : ({}) -> {}",
                operands[0].0,
                dims(permutation.iter().copied()),
                ty(operands[0].1),
                ty(out)
            )),
            Op::Matmul => {
                let (a, a_shape) = operands[0];
                let (b, b_shape) = operands[1];
                self.emit(format!(
                    "stablehlo.dot_general {a}, {b}, contracting_dims = [{}] x [0] : ({}, {}) -> {}",
                    a_shape.len() - 1,
                    ty(a_shape),
                    ty(b_shape),
                    ty(out)
                ))
            }
            Op::Conv2d(o) => {
                let (x, x_shape) = operands[0];
                let (w, w_shape) = operands[1];
                let conv = self.emit(format!(
                    "stablehlo.convolution({x}, {w}) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {{stride = {}, pad = [[{p0}, {p0}], [{p1}, {p1}]]}} {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : ({}, {}) -> {}",
                    dims(o.stride),
                    ty(x_shape),
                    ty(w_shape),
                    ty(out),
                    p0 = o.padding[0],
                    p1 = o.padding[1],
                ));
                match operands.get(2) {
                    None => conv,
                    Some(&(bias, bias_shape)) => {
                        let b = self.broadcast(bias, &ty(bias_shape), &[1], out);
                        self.binary("add", &conv, &b, out)
                    }
                }
            }
            Op::Sdpa(o) => self.sdpa(operands, o.scale, o.causal, out),
        }
    }

    /// `w [n, k] · xᵀ` for `x [.., k]`: `[n, ..]`, then transposed to `[.., n]` (a reshape in
    /// effect when `x` is one row).
    fn linear(&mut self, operands: &[(&str, &[usize])], out: &[usize]) -> String {
        let (x, x_shape) = operands[0];
        let (w, w_shape) = operands[1];
        let last = x_shape.len() - 1;
        let mut product = alloc::vec![w_shape[0]];
        product.extend_from_slice(&x_shape[..last]);
        let t = self.emit(format!(
            "stablehlo.dot_general {w}, {x}, contracting_dims = [1] x [{last}] : ({}, {}) -> {}",
            ty(w_shape),
            ty(x_shape),
            ty(&product)
        ));
        if last == 0 {
            return t;
        }
        self.emit(format!(
            "stablehlo.transpose {t}, dims = {} : ({}) -> {}",
            dims((1..=last).chain([0])),
            ty(&product),
            ty(out)
        ))
    }

    /// `x` broadcast to `out` with trailing alignment (as the eager `add_broadcast`); `x` as
    /// it is when it already has that shape.
    fn broadcast_to(&mut self, (x, shape): (&str, &[usize]), out: &[usize]) -> String {
        if shape == out {
            return String::from(x);
        }
        let pad = out.len() - shape.len();
        let dims_: Vec<usize> = (pad..out.len()).collect();
        self.broadcast(x, &ty(shape), &dims_, out)
    }

    /// `x · rsqrt(Σx²/d + eps) · weight` over the last dimension.
    fn rms_norm(&mut self, operands: &[(&str, &[usize])], eps: f32, out: &[usize]) -> String {
        let (x, _) = operands[0];
        let (w, w_shape) = operands[1];
        let last = out.len() - 1;
        let rows = &out[..last];
        let sq = self.binary("multiply", x, x, out);
        let sum = self.reduce_last(&sq, 0.0, "add", out);
        let d = self.constant(out[last] as f32, rows);
        let mean = self.binary("divide", &sum, &d, rows);
        let eps = self.constant(eps, rows);
        let shifted = self.binary("add", &mean, &eps, rows);
        let inv = self.emit(format!("stablehlo.rsqrt {shifted} : {}", ty(rows)));
        let inv_b = self.broadcast(&inv, &ty(rows), &(0..last).collect::<Vec<_>>(), out);
        let normed = self.binary("multiply", x, &inv_b, out);
        let w_b = self.broadcast(w, &ty(w_shape), &[last], out);
        self.binary("multiply", &normed, &w_b, out)
    }

    /// Rotate-half over `x [b, h, s, hd]` with the `cos`/`sin` tables of [`rope_angles`] as
    /// constants: `[x1·c - x2·s, x2·c + x1·s]`.
    fn rope(&mut self, x: &str, offset: usize, theta: f32, out: &[usize]) -> String {
        let (s, hd) = (out[2], out[3]);
        let half = hd / 2;
        let table = [s, half];
        let quarter = [out[0], out[1], s, half];
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for [c, sn] in rope_angles(offset, s, hd, theta) {
            cos.push(c);
            sin.push(sn);
        }
        let c = self.dense(&cos, &table);
        let sn = self.dense(&sin, &table);
        let c = self.broadcast(&c, &ty(&table), &[2, 3], &quarter);
        let sn = self.broadcast(&sn, &ty(&table), &[2, 3], &quarter);
        let x1 = self.slice(x, out, [0, 0, 0, 0], quarter);
        let x2 = self.slice(x, out, [0, 0, 0, half], out.try_into().unwrap_or(quarter));
        let a = self.binary("multiply", &x1, &c, &quarter);
        let b = self.binary("multiply", &x2, &sn, &quarter);
        let o1 = self.binary("subtract", &a, &b, &quarter);
        let a = self.binary("multiply", &x2, &c, &quarter);
        let b = self.binary("multiply", &x1, &sn, &quarter);
        let o2 = self.binary("add", &a, &b, &quarter);
        self.emit(format!(
            "stablehlo.concatenate {o1}, {o2}, dim = 3 : ({t}, {t}) -> {}",
            ty(out),
            t = ty(&quarter)
        ))
    }

    /// `table [n, d]` rows at `indices [m]` (f32 whole numbers): `[m, d]`.
    fn embedding(&mut self, operands: &[(&str, &[usize])], out: &[usize]) -> String {
        let (table, table_shape) = operands[0];
        let (ids, ids_shape) = operands[1];
        let m = ids_shape[0];
        let as_int = self.emit(format!(
            "stablehlo.convert {ids} : ({}) -> {}",
            ty(ids_shape),
            typed(ids_shape, "i32")
        ));
        let column = self.emit(format!(
            "stablehlo.reshape {as_int} : ({}) -> {}",
            typed(ids_shape, "i32"),
            typed(&[m, 1], "i32")
        ));
        self.emit(format!(
            "\"stablehlo.gather\"({table}, {column}) {{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, {}>}} : ({}, {}) -> {}",
            table_shape[1],
            ty(table_shape),
            typed(&[m, 1], "i32"),
            ty(out)
        ))
    }

    /// `x [b, h, s, hd]` rotated by the rows of `cos`, `sin` `[s, hd/2]`: with the pairs on
    /// an axis of 2, `x · cos + reverse(x) · sin · [-1, 1]`.
    fn rope_tables(
        &mut self,
        operands: &[(&str, &[usize])],
        interleaved: bool,
        out: &[usize],
    ) -> String {
        let (x, _) = operands[0];
        let (cos, table) = operands[1];
        let (sin, _) = operands[2];
        let (b, h, s, half) = (out[0], out[1], out[2], out[3] / 2);
        // The pair axis and the table's axes within the 5-D view.
        let (pairs, pair_axis, table_axes) = if interleaved {
            ([b, h, s, half, 2], 4, [2, 3])
        } else {
            ([b, h, s, 2, half], 3, [2, 4])
        };
        let x5 = self.reshape(x, out, &pairs);
        let swapped = self.emit(format!(
            "stablehlo.reverse {x5}, dims = [{pair_axis}] : {}",
            ty(&pairs)
        ));
        let c = self.broadcast(cos, &ty(table), &table_axes, &pairs);
        let sn = self.broadcast(sin, &ty(table), &table_axes, &pairs);
        let sign = self.dense(&[-1.0, 1.0], &[2]);
        let sign = self.broadcast(&sign, &ty(&[2]), &[pair_axis], &pairs);
        let signed = self.binary("multiply", &sn, &sign, &pairs);
        let a = self.binary("multiply", &x5, &c, &pairs);
        let b_ = self.binary("multiply", &swapped, &signed, &pairs);
        let rotated = self.binary("add", &a, &b_, &pairs);
        self.reshape(&rotated, &pairs, out)
    }

    /// `x[start..limit]` of a rank-4 `x` of shape `from`.
    fn slice(&mut self, x: &str, from: &[usize], start: [usize; 4], limit: [usize; 4]) -> String {
        let to: Vec<usize> = limit.iter().zip(&start).map(|(l, s)| l - s).collect();
        self.emit(format!(
            "\"stablehlo.slice\"({x}) {{start_indices = array<i64: {}>, limit_indices = array<i64: {}>, strides = array<i64: 1, 1, 1, 1>}} : ({}) -> {}",
            list(&start),
            list(&limit),
            ty(from),
            ty(&to)
        ))
    }

    /// A constant tensor of `shape` holding `values` (row-major), each an exact bit pattern.
    fn dense(&mut self, values: &[f32], shape: &[usize]) -> String {
        let mut text = String::with_capacity(values.len() * 12);
        nested(&mut text, values, shape);
        self.emit(format!("stablehlo.constant dense<{text}> : {}", ty(shape)))
    }

    fn sdpa(
        &mut self,
        operands: &[(&str, &[usize])],
        scale: Option<f32>,
        causal: bool,
        out: &[usize],
    ) -> String {
        let (q, qs) = operands[0];
        let (k, ks) = operands[1];
        let (v, vs) = operands[2];
        let (b, h, sq, hd) = (qs[0], qs[1], qs[2], qs[3]);
        let (nkv, sk) = (ks[1], ks[2]);
        // `shape::sdpa` admits 0 query heads over 0 K/V heads (an empty op); one group then.
        let nrep = h.checked_div(nkv).unwrap_or(1);
        let q5 = [b, nkv, nrep, sq, hd];
        let s5 = [b, nkv, nrep, sq, sk];
        let r4 = [b, nkv, nrep, sq];
        let o5 = [b, nkv, nrep, sq, hd];

        let q5v = self.reshape(q, qs, &q5);
        let raw = self.emit(format!(
            "stablehlo.dot_general {q5v}, {k}, batching_dims = [0, 1] x [0, 1], contracting_dims = [4] x [3] : ({}, {}) -> {}",
            ty(&q5),
            ty(ks),
            ty(&s5)
        ));
        let scale = scale.unwrap_or_else(|| 1.0 / libm::sqrtf(hd as f32));
        let c = self.constant(scale, &s5);
        let mut scores = self.binary("multiply", &raw, &c, &s5);

        if let Some(&(mask, ms)) = operands.get(3) {
            // Left-pad to [m0, m1, m2, Sk], then split the head dim as Q was: a mask of one
            // head stays [1, 1], a mask of H heads becomes [nKV, nRep].
            let mut m4 = [1usize; 4];
            m4[4 - ms.len()..].copy_from_slice(ms);
            let heads = if m4[1] == 1 { [1, 1] } else { [nkv, nrep] };
            let m5 = [m4[0], heads[0], heads[1], m4[2], m4[3]];
            let m5v = self.reshape(mask, ms, &m5);
            let broadcast = self.broadcast(&m5v, &ty(&m5), &[0, 1, 2, 3, 4], &s5);
            scores = self.binary("add", &scores, &broadcast, &s5);
        }

        if causal {
            // Bottom-right aligned: query i sees key j when j <= i + (Sk - Sq).
            let qk = [sq, sk];
            let i_ty = typed(&qk, "i64");
            let i = self.emit(format!("stablehlo.iota dim = 0 : {i_ty}"));
            let j = self.emit(format!("stablehlo.iota dim = 1 : {i_ty}"));
            let offset = self.emit(format!(
                "stablehlo.constant dense<{}> : {i_ty}",
                sk as i64 - sq as i64
            ));
            let limit = self.emit(format!("stablehlo.add {i}, {offset} : {i_ty}"));
            let visible = self.emit(format!(
                "stablehlo.compare LE, {j}, {limit}, SIGNED : ({i_ty}, {i_ty}) -> {}",
                typed(&qk, "i1")
            ));
            let visible5 = self.emit(format!(
                "stablehlo.broadcast_in_dim {visible}, dims = [3, 4] : ({}) -> {}",
                typed(&qk, "i1"),
                typed(&s5, "i1")
            ));
            let neg_inf = self.constant(f32::NEG_INFINITY, &s5);
            scores = self.select(&visible5, &scores, &neg_inf, &s5);
        }

        // Softmax over keys; a row of all -inf gets max 0 (so exp gives zeros, not NaN) and
        // sum 1 (so the row stays zeros).
        let max = self.reduce_last(&scores, f32::NEG_INFINITY, "maximum", &s5);
        let neg_inf_r = self.constant(f32::NEG_INFINITY, &r4);
        let zero_r = self.constant(0.0, &r4);
        let dead = self.compare("EQ", &max, &neg_inf_r, &r4);
        let safe_max = self.select(&dead, &zero_r, &max, &r4);
        let max5 = self.broadcast(&safe_max, &ty(&r4), &[0, 1, 2, 3], &s5);
        let shifted = self.binary("subtract", &scores, &max5, &s5);
        let e = self.emit(format!("stablehlo.exponential {shifted} : {}", ty(&s5)));
        let sum = self.reduce_last(&e, 0.0, "add", &s5);
        let empty = self.compare("EQ", &sum, &zero_r, &r4);
        let one_r = self.constant(1.0, &r4);
        let denom = self.select(&empty, &one_r, &sum, &r4);
        let denom5 = self.broadcast(&denom, &ty(&r4), &[0, 1, 2, 3], &s5);
        let p = self.binary("divide", &e, &denom5, &s5);

        let o = self.emit(format!(
            "stablehlo.dot_general {p}, {v}, batching_dims = [0, 1] x [0, 1], contracting_dims = [4] x [2] : ({}, {}) -> {}",
            ty(&s5),
            ty(vs),
            ty(&o5)
        ));
        // The eager kernel never reads v for a fully masked row: zeros there, even where v
        // holds NaN (the weights are 0, and 0 · NaN is NaN) or -0.0.
        let dead5 = self.emit(format!(
            "stablehlo.broadcast_in_dim {dead}, dims = [0, 1, 2, 3] : ({}) -> {}",
            typed(&r4, "i1"),
            typed(&o5, "i1")
        ));
        let zero_o = self.constant(0.0, &o5);
        let o = self.select(&dead5, &zero_o, &o, &o5);
        self.reshape(&o, &o5, out)
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bare_only_when_identifiers() {
        assert_eq!(key("attn"), "attn");
        assert_eq!(key("layer.0_attn$"), "layer.0_attn$");
        assert_eq!(key("0attn"), "\"0attn\"");
        assert_eq!(key("my attn"), "\"my attn\"");
        assert_eq!(key("a\"b\\c\n"), "\"a\\\"b\\\\c\\0A\"");
    }

    #[test]
    fn float_literals_are_exact_bit_patterns() {
        assert_eq!(f32_literal(0.25), "0x3E800000");
        assert_eq!(f32_literal(f32::NEG_INFINITY), "0xFF800000");
    }

    #[test]
    fn types_print_rank_zero_and_higher() {
        assert_eq!(ty(&[]), "tensor<f32>");
        assert_eq!(ty(&[1, 8, 5, 16]), "tensor<1x8x5x16xf32>");
    }
}
