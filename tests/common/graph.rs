//! Graph fixtures shared by the compile-lane tests.

use skainet_schedule::graph::ScheduleHint;
use skainet_schedule::graph::{Graph, GraphBuilder};
use skainet_schedule::Tensor;
use skainet_schedule::{Conv2dOptions, SdpaOptions};

use super::uniform;

/// One `sdpa` node `attn` over inputs `q`, `k`, `v` (and `mask` when given a shape).
pub fn attention_graph(
    q: [usize; 4],
    kv: [usize; 4],
    mask: Option<Vec<usize>>,
    options: SdpaOptions,
    hint: Option<ScheduleHint>,
) -> Graph {
    let mut b = GraphBuilder::new();
    let qv = b.input("q", q).unwrap();
    let kv_ = b.input("k", kv).unwrap();
    let vv = b.input("v", kv).unwrap();
    let m = mask.map(|s| b.input("mask", s).unwrap());
    let mut op = b.sdpa(qv, kv_, vv, m, options).id("attn");
    if let Some(h) = hint {
        op = op.schedule(h);
    }
    let out = op.finish().unwrap();
    b.output(out).unwrap();
    b.build().unwrap()
}

/// One `conv2d` node `conv`: x `[2, 3, 8, 8]`, w `[4, 3, 3, 3]`, bias `[4]`, stride `[2, 1]`,
/// padding `[1, 0]`, so the output is `[2, 4, 4, 6]`.
pub fn conv_graph(hint: Option<ScheduleHint>) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3, 8, 8]).unwrap();
    let w = b.input("w", [4, 3, 3, 3]).unwrap();
    let bias = b.input("bias", [4]).unwrap();
    let opts = Conv2dOptions {
        stride: [2, 1],
        padding: [1, 0],
    };
    let mut op = b.conv2d(x, w, Some(bias), opts).id("conv");
    if let Some(h) = hint {
        op = op.schedule(h);
    }
    let y = op.finish().unwrap();
    b.output(y).unwrap();
    b.build().unwrap()
}

/// Deterministic values for every input of `graph`, in declaration order, each its own seed.
pub fn graph_inputs(graph: &Graph) -> Vec<(String, Tensor)> {
    graph
        .inputs()
        .enumerate()
        .map(|(i, n)| (n.id().to_string(), uniform(n.shape(), i as u32 + 1)))
        .collect()
}
