#![cfg(not(feature = "loom"))]
//! The graph executor and graph contexts: results bit-identical to `Sequential` under every
//! schedule, SDPA units routed through the context's schedule, schedule changes as siblings.

use std::sync::Arc;

use skainet_schedule::graph::ScheduleHint;
use skainet_schedule::graph::{execute, ExecError, Graph, GraphBuilder, GraphContext};
use skainet_schedule::Tensor;
use skainet_schedule::{CollectingSink, ScheduleRef, Sequential, TraceEvent};
use skainet_schedule::{ContextRef, ExecutionContext};
use skainet_schedule::{Conv2dOptions, CpuOps, OpsRef, SdpaOptions, TensorOps};

mod common;

use common::graph::graph_inputs;
use common::{Order, OutOfOrder};

/// Runs chunks in reverse order on several threads and reports every split region to `sink`.
fn reversed(parallelism: usize, sink: Arc<CollectingSink>) -> ScheduleRef {
    Arc::new(OutOfOrder::new(parallelism, Order::Reversed).with_trace(sink))
}

/// Ops that cannot be rebuilt under another schedule.
struct FixedOps(ScheduleRef);

impl TensorOps for FixedOps {
    fn schedule(&self) -> &ScheduleRef {
        &self.0
    }

    fn with_schedule(&self, _schedule: ScheduleRef) -> Option<OpsRef> {
        None
    }
}

const BATCH: usize = 1;
const HEADS: usize = 8;

/// An attention block large enough that every kernel splits its work: projections, GQA
/// attention (8 heads over 2 K/V heads, 256 positions: 2^23 multiply-adds, enough to fork
/// with as few as three pieces per task on a pool whose workers sleep), output projection,
/// residual; and a conv2d beside it.
fn block() -> Graph {
    let (s, d, kv_heads, hd) = (256, 64, 2, 8);
    let mut b = GraphBuilder::new();
    let x = b.input("x", [BATCH, s, d]).unwrap();
    let wq = b.input("wq", [d, HEADS * hd]).unwrap();
    let wk = b.input("wk", [d, kv_heads * hd]).unwrap();
    let wv = b.input("wv", [d, kv_heads * hd]).unwrap();
    let wo = b.input("wo", [HEADS * hd, d]).unwrap();
    let img = b.input("img", [2, 16, 16, 16]).unwrap();
    let filt = b.input("filt", [16, 16, 3, 3]).unwrap();
    let project = |b: &mut GraphBuilder, w, n: usize| {
        let p = b.matmul(x, w).finish().unwrap();
        let r = b.reshape(p, [BATCH, s, n, hd]).finish().unwrap();
        b.transpose(r, [0, 2, 1, 3]).finish().unwrap()
    };
    let q = project(&mut b, wq, HEADS);
    let k = project(&mut b, wk, kv_heads);
    let v = project(&mut b, wv, kv_heads);
    let heads = ScheduleHint::parallel(["heads"]).unwrap();
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    let a = b
        .sdpa(q, k, v, None, causal)
        .id("attn")
        .schedule(heads)
        .finish()
        .unwrap();
    let t = b.transpose(a, [0, 2, 1, 3]).finish().unwrap();
    let merged = b.reshape(t, [BATCH, s, HEADS * hd]).finish().unwrap();
    let o = b.matmul(merged, wo).finish().unwrap();
    let y = b.add(o, x).finish().unwrap();
    let c = b
        .conv2d(img, filt, None, Conv2dOptions::default())
        .finish()
        .unwrap();
    let c2 = b.mul(c, c).finish().unwrap();
    b.output(y).unwrap();
    b.output(c2).unwrap();
    b.build().unwrap()
}

fn run(graph: &Graph, schedule: ScheduleRef) -> Vec<Vec<u32>> {
    let data = graph_inputs(graph);
    let named: Vec<(&str, &Tensor)> = data.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let ctx = GraphContext::over_ops(CpuOps::shared(schedule));
    ctx.execute(graph, &named)
        .unwrap()
        .iter()
        .map(Tensor::to_bits)
        .collect()
}

fn assert_bit_identical_to_sequential(schedule: ScheduleRef) {
    let g = block();
    let name = schedule.name().to_string();
    assert_eq!(run(&g, schedule), run(&g, Sequential::shared()), "{name}");
}

#[test]
fn a_reversed_chunk_order_is_bit_identical_to_sequential() {
    for p in 1..=4 {
        assert_bit_identical_to_sequential(reversed(p, Arc::new(CollectingSink::new())));
    }
}

#[cfg(feature = "parallel")]
#[test]
fn hardware_is_bit_identical_to_sequential() {
    assert_bit_identical_to_sequential(skainet_schedule::hardware().shared());
}

#[cfg(feature = "parallel")]
#[test]
fn dedicated_pools_are_bit_identical_to_sequential() {
    for p in 1..=4 {
        assert_bit_identical_to_sequential(skainet_schedule::dedicated(p).unwrap().shared());
    }
}

#[cfg(feature = "rayon")]
#[test]
fn rayon_is_bit_identical_to_sequential() {
    assert_bit_identical_to_sequential(skainet_schedule::RayonSchedule::global().shared());
}

#[test]
fn sdpa_units_go_through_the_context_schedule() {
    let sink = Arc::new(CollectingSink::new());
    let g = block();
    run(&g, reversed(3, sink.clone()));
    let sdpa: Vec<TraceEvent> = sink
        .regions()
        .into_iter()
        .filter(|e| matches!(e, TraceEvent::ScheduleRegion { op, .. } if op == "sdpa"))
        .collect();
    assert_eq!(
        sdpa,
        [TraceEvent::ScheduleRegion {
            op: "sdpa".into(),
            schedule: "reversed(3)".into(),
            elements: BATCH * HEADS,
            tasks: 3,
            duration: None,
        }]
    );
}

#[cfg(feature = "parallel")]
#[test]
fn sdpa_units_go_through_a_dedicated_pool() {
    let sink = Arc::new(CollectingSink::new());
    let pool = skainet_schedule::dedicated(3)
        .unwrap()
        .with_trace(sink.clone());
    run(&block(), pool.shared());
    let sdpa: Vec<(String, usize, usize)> = sink
        .regions()
        .into_iter()
        .filter_map(|e| match e {
            TraceEvent::ScheduleRegion {
                op,
                schedule,
                elements,
                tasks,
                ..
            } if op == "sdpa" => Some((schedule, elements, tasks)),
            _ => None,
        })
        .collect();
    assert_eq!(sdpa, [("dedicated(3)".to_string(), BATCH * HEADS, 3)]);
}

#[test]
fn a_graph_context_reports_the_schedule_of_its_ops() {
    let sink = Arc::new(CollectingSink::new());
    let ctx = GraphContext::over_ops(CpuOps::shared(reversed(2, sink)));
    assert_eq!(ctx.schedule().name(), "reversed(2)");
    assert_eq!(ctx.ops().schedule().name(), "reversed(2)");
}

#[test]
fn with_schedule_on_a_graph_context_yields_a_sibling_not_a_downgrade() {
    let events = Arc::new(CollectingSink::new());
    let regions = Arc::new(CollectingSink::new());
    let ctx: ContextRef = Arc::new(GraphContext::over_ops_with_sink(
        CpuOps::shared(Sequential::shared()),
        events.clone(),
    ));
    let sibling = ctx.clone().with_schedule(reversed(2, regions.clone()));
    assert_eq!(sibling.schedule().name(), "reversed(2)");
    assert_eq!(
        ctx.schedule().name(),
        "sequential",
        "the original is untouched"
    );
    assert_eq!(events.events(), [], "no downgrade");

    // The sibling runs graphs under the new schedule.
    let g = block();
    let data = graph_inputs(&g);
    let named: Vec<(&str, &Tensor)> = data.iter().map(|(n, t)| (n.as_str(), t)).collect();
    execute(sibling.as_ref(), &g, &named).unwrap();
    assert!(regions
        .regions()
        .iter()
        .any(|e| matches!(e, TraceEvent::ScheduleRegion { op, .. } if op == "sdpa")));
}

#[test]
fn with_schedule_to_the_same_schedule_is_silent_and_returns_the_same_context() {
    let events = Arc::new(CollectingSink::new());
    let ctx: ContextRef = Arc::new(GraphContext::over_ops_with_sink(
        CpuOps::shared(Sequential::shared()),
        events.clone(),
    ));
    let same = ctx.clone().with_schedule(Sequential::shared());
    assert!(std::ptr::addr_eq(Arc::as_ptr(&same), Arc::as_ptr(&ctx)));
    assert_eq!(events.events(), []);
}

#[test]
fn a_graph_context_over_fixed_ops_stays_and_reports_one_downgrade() {
    let events = Arc::new(CollectingSink::new());
    let ctx: ContextRef = Arc::new(GraphContext::over_ops_with_sink(
        Arc::new(FixedOps(Sequential::shared())),
        events.clone(),
    ));
    let after = ctx
        .clone()
        .with_schedule(reversed(4, Arc::new(CollectingSink::new())));
    assert!(std::ptr::addr_eq(Arc::as_ptr(&after), Arc::as_ptr(&ctx)));
    assert_eq!(after.schedule().name(), "sequential");
    assert_eq!(
        events.events(),
        [TraceEvent::ScheduleDowngraded {
            requested: "reversed(4)".into(),
            effective: "sequential".into(),
            reason: "ops bound to sequential cannot be rebuilt under another schedule".into(),
        }]
    );
}

fn small() -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3]).unwrap();
    let y = b.input("y", [2, 3]).unwrap();
    let s = b.sub(x, y).finish().unwrap();
    let t = b.transpose(s, [1, 0]).finish().unwrap();
    b.output(t).unwrap();
    b.build().unwrap()
}

#[test]
fn elementwise_and_transpose_compute_exact_values() {
    let x = Tensor::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let y = Tensor::new(vec![2, 3], vec![0.5; 6]).unwrap();
    let ctx = GraphContext::over_ops(CpuOps::shared(Sequential::shared()));
    let out = ctx.execute(&small(), &[("y", &y), ("x", &x)]).unwrap();
    assert_eq!(out[0].shape(), [3, 2]);
    assert_eq!(out[0].data(), [0.5, 3.5, 1.5, 4.5, 2.5, 5.5]);
}

#[test]
fn missing_unknown_and_misshapen_inputs_are_errors() {
    let x = Tensor::zeros(vec![2, 3]).unwrap();
    let wrong = Tensor::zeros(vec![3, 2]).unwrap();
    let ctx = GraphContext::over_ops(CpuOps::shared(Sequential::shared()));
    let g = small();
    assert_eq!(
        ctx.execute(&g, &[("x", &x)]),
        Err(ExecError::MissingInput { name: "y".into() })
    );
    assert_eq!(
        ctx.execute(&g, &[("x", &x), ("y", &x), ("z", &x)]),
        Err(ExecError::UnknownInput { name: "z".into() })
    );
    assert_eq!(
        ctx.execute(&g, &[("x", &x), ("y", &wrong)]),
        Err(ExecError::InputShape {
            name: "y".into(),
            expected: vec![2, 3],
            actual: vec![3, 2]
        })
    );
}

#[test]
fn decoder_ops_in_a_graph_give_the_bits_of_the_eager_kernels() {
    use skainet_schedule::{add_broadcast, linear, rms_norm, rope, silu_mul};
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1, 3, 16]).unwrap();
    let nw = b.input("norm", [16]).unwrap();
    let w = b.input("w", [16, 16]).unwrap();
    let up = b.input("up", [1, 4, 3, 4]).unwrap();
    let bias = b.input("bias", [4]).unwrap();
    let n = b.rms_norm(x, nw, 1e-5).finish().unwrap();
    let p = b.linear(n, w).finish().unwrap();
    let r = b.reshape(p, [1, 4, 3, 4]).finish().unwrap();
    let r = b.rope(r, 7, 10_000.0).finish().unwrap();
    let g = b.silu_mul(r, up).finish().unwrap();
    let y = b.add(g, bias).finish().unwrap();
    b.output(y).unwrap();
    let graph = b.build().unwrap();
    let inputs = graph_inputs(&graph);
    let t = |i: usize| &inputs[i].1;

    let s = Sequential;
    let n = rms_norm(t(0), t(1), 1e-5, &s).unwrap();
    let p = linear(&n, t(2), &s)
        .unwrap()
        .reshape(vec![1, 4, 3, 4])
        .unwrap();
    let r = rope(&p, 7, 10_000.0, &s).unwrap();
    let g = silu_mul(&r, t(3), &s).unwrap();
    let want = add_broadcast(&g, t(4), &s).unwrap();

    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    for schedule in [
        Sequential::shared(),
        reversed(3, Arc::new(CollectingSink::new())),
    ] {
        let ctx = GraphContext::over_ops(CpuOps::shared(schedule));
        let got = execute(&ctx, &graph, &named).unwrap();
        assert_eq!(got[0].shape(), [1, 4, 3, 4]);
        assert_eq!(got[0].to_bits(), want.to_bits());
    }
}

#[test]
fn concat_joins_blocks_along_the_middle_dimension() {
    let mut b = GraphBuilder::new();
    let a = b.input("a", [2, 1, 2]).unwrap();
    let c = b.input("c", [2, 2, 2]).unwrap();
    let y = b.concat(a, c, 1).finish().unwrap();
    b.output(y).unwrap();
    let graph = b.build().unwrap();
    let at = Tensor::new(vec![2, 1, 2], vec![0.0, 1.0, 2.0, 3.0]).unwrap();
    let ct = Tensor::from_fn(vec![2, 2, 2], |i| 10.0 + i as f32).unwrap();
    let got = execute(
        &GraphContext::over_ops(CpuOps::shared(Sequential::shared())),
        &graph,
        &[("a", &at), ("c", &ct)],
    )
    .unwrap();
    assert_eq!(got[0].shape(), [2, 3, 2]);
    assert_eq!(
        got[0].data(),
        [0.0, 1.0, 10.0, 11.0, 12.0, 13.0, 2.0, 3.0, 14.0, 15.0, 16.0, 17.0]
    );
}

/// `x [1, heads, s, hd]` and the cos/sin tables `[s, hd/2]` of positions `offset..` for base
/// `theta`, read off the eager kernel itself: rotating the pair `(1, 0)` gives `(cos, sin)`.
fn rope_case(heads: usize, s: usize, hd: usize, offset: usize, theta: f32) -> [Tensor; 3] {
    use skainet_schedule::rope_interleaved;
    let x = Tensor::from_fn(vec![1, heads, s, hd], |i| (i as f32 * 0.37).sin()).unwrap();
    let unit = Tensor::from_fn(vec![1, 1, s, hd], |i| if i % 2 == 0 { 1.0 } else { 0.0 }).unwrap();
    let r = rope_interleaved(&unit, offset, theta, &Sequential).unwrap();
    let pick = |k: usize| {
        let values = r.data().iter().skip(k).step_by(2).copied().collect();
        Tensor::new(vec![s, hd / 2], values).unwrap()
    };
    [x, pick(0), pick(1)]
}

fn rope_tables_graph(shape: [usize; 4], interleaved: bool) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input("x", shape).unwrap();
    let cos = b.input("cos", [shape[2], shape[3] / 2]).unwrap();
    let sin = b.input("sin", [shape[2], shape[3] / 2]).unwrap();
    let r = b.rope_tables(x, cos, sin, interleaved).finish().unwrap();
    b.output(r).unwrap();
    b.build().unwrap()
}

#[test]
fn rope_tables_of_the_kernels_angles_give_the_bits_of_rope_and_rope_interleaved() {
    use skainet_schedule::{rope, rope_interleaved};
    let (offset, theta) = (4093, 100_000.0);
    let [x, cos, sin] = rope_case(3, 5, 16, offset, theta);
    let named = [("x", &x), ("cos", &cos), ("sin", &sin)];
    for schedule in [
        Sequential::shared(),
        reversed(3, Arc::new(CollectingSink::new())),
    ] {
        let ctx = GraphContext::over_ops(CpuOps::shared(schedule));
        let adjacent = execute(&ctx, &rope_tables_graph([1, 3, 5, 16], true), &named).unwrap();
        let want = rope_interleaved(&x, offset, theta, &Sequential).unwrap();
        assert_eq!(adjacent[0].to_bits(), want.to_bits());
        let half = execute(&ctx, &rope_tables_graph([1, 3, 5, 16], false), &named).unwrap();
        let want = rope(&x, offset, theta, &Sequential).unwrap();
        assert_eq!(half[0].to_bits(), want.to_bits());
    }
}

fn embedding_graph() -> Graph {
    let mut b = GraphBuilder::new();
    let table = b.input("table", [4, 2]).unwrap();
    let ids = b.input("ids", [3]).unwrap();
    let e = b.embedding(table, ids).id("embed").finish().unwrap();
    b.output(e).unwrap();
    b.build().unwrap()
}

fn run_embedding(ids: Vec<f32>) -> Result<Vec<Tensor>, Box<ExecError>> {
    let table = Tensor::from_fn(vec![4, 2], |i| i as f32).unwrap();
    let ids = Tensor::new(vec![3], ids).unwrap();
    let ctx = GraphContext::over_ops(CpuOps::shared(Sequential::shared()));
    execute(
        &ctx,
        &embedding_graph(),
        &[("table", &table), ("ids", &ids)],
    )
    .map_err(Box::new)
}

#[test]
fn an_embedding_picks_the_rows_its_f32_indices_name() {
    let got = run_embedding(vec![3.0, 0.0, 3.0]).unwrap();
    assert_eq!(got[0].shape(), [3, 2]);
    assert_eq!(got[0].data(), [6.0, 7.0, 0.0, 1.0, 6.0, 7.0]);
}

#[test]
fn an_index_that_is_no_whole_number_or_past_the_table_is_an_error() {
    assert_eq!(
        run_embedding(vec![0.0, 1.5, 2.0]).map_err(|e| *e),
        Err(ExecError::NotAnIndex {
            node: "embed".into(),
            at: 1,
            value: "1.5".into()
        })
    );
    for (bad, printed) in [(-1.0, "-1"), (f32::NAN, "NaN"), (f32::INFINITY, "inf")] {
        let err = run_embedding(vec![0.0, 1.0, bad]).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("node \"embed\" (embedding): index {printed} at 2 is not a whole number >= 0")
        );
    }
    let err = run_embedding(vec![0.0, 4.0, 1.0]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node \"embed\" (embedding): embedding: token id 4 (at index 1) is not a row of the table [4, 2]"
    );
}
