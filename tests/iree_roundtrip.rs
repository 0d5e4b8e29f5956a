#![cfg(all(feature = "std", not(feature = "loom")))]
//! The export is real only if a real compiler eats it: every graph here is exported,
//! compiled by `iree-compile` for `llvm-cpu`, run by `iree-run-module` on the local-task
//! device with 1 and 2 task groups (and `$SKAINET_TASK_GROUPS` when set) from the very same
//! `.vmfb`, and compared with the eager kernels (max abs error <= 1e-4).
//!
//! The tools come from PyPI: `python3 -m venv .venv && .venv/bin/pip install
//! iree-base-compiler iree-base-runtime` at the repository root, or `IREE_BIN_DIR=<dir>`.
//! Without them these tests FAIL, with that instruction; they never pass silently. To leave
//! them out on purpose: `cargo test -- --skip iree_`.

mod common;

use common::graph::{attention_graph, conv_graph, graph_inputs};
use std::path::{Path, PathBuf};

use skainet_schedule::graph::iree::IreeTools;
use skainet_schedule::graph::ScheduleHint;
use skainet_schedule::graph::{core_passes, execute, stablehlo, Graph, GraphBuilder};
use skainet_schedule::SdpaOptions;
use skainet_schedule::Sequential;
use skainet_schedule::Tensor;
use skainet_schedule::{
    add_broadcast, linear, rms_norm, rope, scaled_dot_product_attention, silu_mul, KvCache,
    OpsContext,
};

const TOLERANCE: f32 = 1e-4;

fn tools() -> IreeTools {
    match IreeTools::locate(Path::new(env!("CARGO_MANIFEST_DIR"))) {
        Ok(tools) => tools,
        Err(e) => panic!(
            "the IREE round trip needs iree-compile and iree-run-module: {e}\n\
             (to leave these tests out on purpose, run `cargo test -- --skip iree_`)"
        ),
    }
}

/// 1 and 2, plus `$SKAINET_TASK_GROUPS` when it is set.
fn group_counts() -> Vec<usize> {
    let mut counts = vec![1, 2];
    if let Ok(value) = std::env::var("SKAINET_TASK_GROUPS") {
        let n: usize = value
            .trim()
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .unwrap_or_else(|| panic!("SKAINET_TASK_GROUPS={value:?} is not a positive integer"));
        if !counts.contains(&n) {
            counts.push(n);
        }
    }
    counts
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("skainet-iree-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.data()
        .iter()
        .zip(b.data())
        .map(|(x, y)| if x == y { 0.0 } else { (x - y).abs() })
        .fold(0.0f32, |m, d| if d.is_nan() || d > m { d } else { m })
}

/// Exports `graph` (after the core passes unless `bare`), compiles it once, runs the same
/// `.vmfb` at every group count and compares each result with the eager run.
fn round_trip(name: &str, graph: Graph, inputs: Vec<(String, Tensor)>, bare: bool) {
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let expected = execute(&OpsContext::cpu(Sequential::shared()), &graph, &named).unwrap();
    round_trip_against(name, graph, inputs, bare, &expected);
}

/// [`round_trip`] against given results; returns the exported module.
fn round_trip_against(
    name: &str,
    mut graph: Graph,
    inputs: Vec<(String, Tensor)>,
    bare: bool,
    expected: &[Tensor],
) -> String {
    let tools = tools();
    if !bare {
        core_passes(&mut graph);
    }
    let mlir = stablehlo::export(&graph);
    if bare {
        assert_eq!(stablehlo::module_header(&graph), "module {");
    } else {
        assert!(
            mlir.starts_with("module attributes {skainet."),
            "{name}: header expected"
        );
    }

    let dir = scratch_dir(name);
    let mlir_path = dir.join("model.mlir");
    let vmfb = dir.join("model.vmfb");
    std::fs::write(&mlir_path, &mlir).unwrap();
    tools
        .compile(&mlir_path, &vmfb)
        .unwrap_or_else(|e| panic!("{name}: {e}\n--- module ---\n{mlir}"));
    let compiled = std::fs::read(&vmfb).unwrap();
    let tensors: Vec<&Tensor> = inputs.iter().map(|(_, t)| t).collect();

    for groups in group_counts() {
        let used = std::fs::read(&vmfb).unwrap();
        assert!(
            used == compiled,
            "{name}: the .vmfb changed before the run with {groups} groups"
        );
        let got = tools
            .run(&vmfb, groups, &dir, &tensors, expected.len())
            .unwrap_or_else(|e| panic!("{name}, {groups} groups: {e}"));
        for (i, (g, e)) in got.iter().zip(expected).enumerate() {
            let err = max_abs_diff(g, e);
            assert!(
                err <= TOLERANCE,
                "{name}, {groups} groups, output {i}: max abs error {err} > {TOLERANCE}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    mlir
}

#[test]
fn iree_runs_grouped_query_attention() {
    let hint = ScheduleHint::new(["batch", "heads"], Some(8)).unwrap();
    let g = attention_graph(
        [2, 8, 5, 16],
        [2, 2, 9, 16],
        None,
        SdpaOptions::default(),
        Some(hint),
    );
    let inputs = graph_inputs(&g);
    round_trip("gqa", g, inputs, false);
}

#[test]
fn iree_runs_causal_attention_with_fewer_queries_than_keys() {
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    let g = attention_graph([1, 4, 3, 8], [1, 2, 7, 8], None, causal, None);
    let inputs = graph_inputs(&g);
    round_trip("causal", g, inputs, false);
}

#[test]
fn iree_runs_masked_attention_with_a_fully_masked_row() {
    let options = SdpaOptions {
        scale: Some(0.3),
        causal: true,
    };
    let g = attention_graph(
        [2, 4, 4, 8],
        [2, 2, 6, 8],
        Some(vec![2, 1, 4, 6]),
        options,
        None,
    );
    let mut inputs = graph_inputs(&g);
    // Some scores hidden, and every score of batch 1, query 2 hidden: that row must be zeros.
    let mask = &mut inputs[3].1;
    for (i, x) in mask.data_mut().iter_mut().enumerate() {
        let (batch, row) = (i / 24, (i / 6) % 4);
        if i % 5 == 0 || (batch == 1 && row == 2) {
            *x = f32::NEG_INFINITY;
        }
    }
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let eager = execute(&OpsContext::cpu(Sequential::shared()), &g, &named).unwrap();
    for h in 0..4 {
        for d in 0..8 {
            assert_eq!(eager[0].get(&[1, h, 2, d]), Some(0.0));
        }
    }
    round_trip("masked", g, inputs, false);
}

#[test]
fn iree_runs_a_per_head_mask_broadcast_over_queries() {
    // [1, H, 1, Sk]: split like Q into [1, nKV, nRep, 1, Sk], then broadcast over b and Sq.
    let g = attention_graph(
        [2, 8, 3, 8],
        [2, 2, 5, 8],
        Some(vec![1, 8, 1, 5]),
        SdpaOptions::default(),
        None,
    );
    let mut inputs = graph_inputs(&g);
    for (i, x) in inputs[3].1.data_mut().iter_mut().enumerate() {
        if i % 4 == 3 {
            *x = f32::NEG_INFINITY;
        }
    }
    round_trip("per_head_mask", g, inputs, false);
}

#[test]
fn iree_runs_an_attention_block_with_matmul_projections() {
    let (s, d, heads, kv_heads, hd) = (6, 32, 8, 2, 4);
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1, s, d]).unwrap();
    let wq = b.input("wq", [d, heads * hd]).unwrap();
    let wk = b.input("wk", [d, kv_heads * hd]).unwrap();
    let wv = b.input("wv", [d, kv_heads * hd]).unwrap();
    let wo = b.input("wo", [heads * hd, d]).unwrap();
    let rows = ScheduleHint::parallel(["rows"]).unwrap();
    let project = |b: &mut GraphBuilder, w, n: usize, id: &str| {
        let p = b
            .matmul(x, w)
            .id(id)
            .schedule(rows.clone())
            .finish()
            .unwrap();
        let r = b.reshape(p, [1, s, n, hd]).finish().unwrap();
        b.transpose(r, [0, 2, 1, 3]).finish().unwrap()
    };
    let q = project(&mut b, wq, heads, "q_proj");
    let k = project(&mut b, wk, kv_heads, "k_proj");
    let v = project(&mut b, wv, kv_heads, "v_proj");
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    let a = b.sdpa(q, k, v, None, causal).id("attn").finish().unwrap();
    let t = b.transpose(a, [0, 2, 1, 3]).finish().unwrap();
    let merged = b.reshape(t, [1, s, heads * hd]).finish().unwrap();
    let o = b.matmul(merged, wo).id("o_proj").finish().unwrap();
    let y = b.add(o, x).id("residual").finish().unwrap();
    b.output(y).unwrap();
    let g = b.build().unwrap();
    let inputs = graph_inputs(&g);
    round_trip("block", g, inputs, false);
}

#[test]
fn iree_runs_conv2d_with_bias() {
    let hint = ScheduleHint::parallel(["out_channels"]).unwrap();
    let g = conv_graph(Some(hint));
    let inputs = graph_inputs(&g);
    round_trip("conv2d", g, inputs, false);
}

#[test]
fn iree_compiles_a_module_without_attributes() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [4, 3]).unwrap();
    let w = b.input("w", [3, 5]).unwrap();
    let y = b.matmul(x, w).finish().unwrap();
    let z = b.mul(y, y).finish().unwrap();
    b.output(z).unwrap();
    b.output(y).unwrap();
    let g = b.build().unwrap();
    let inputs = graph_inputs(&g);
    round_trip("bare", g, inputs, true);
}

/// A one-op graph over inputs of the given shapes, the op hinted `["rows"]`.
fn one_op(
    shapes: &[(&str, &[usize])],
    op: impl FnOnce(
        &mut GraphBuilder,
        &[skainet_schedule::graph::Value],
    ) -> skainet_schedule::graph::Value,
) -> Graph {
    let mut b = GraphBuilder::new();
    let values: Vec<_> = shapes
        .iter()
        .map(|(n, s)| b.input(n, s.to_vec()).unwrap())
        .collect();
    let y = op(&mut b, &values);
    b.output(y).unwrap();
    b.build().unwrap()
}

fn rows() -> ScheduleHint {
    ScheduleHint::parallel(["rows"]).unwrap()
}

#[test]
fn iree_runs_linear_against_an_out_in_weight() {
    let g = one_op(&[("x", &[2, 3, 16]), ("w", &[8, 16])], |b, v| {
        b.linear(v[0], v[1])
            .id("proj")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let inputs = graph_inputs(&g);
    let mlir = round_trip_against(
        "linear",
        g.clone(),
        inputs.clone(),
        false,
        &[linear(&inputs[0].1, &inputs[1].1, &Sequential).unwrap()],
    );
    // The weight first, read in place; the small product is transposed back.
    assert!(
        mlir.contains("stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [2] : (tensor<8x16xf32>, tensor<2x3x16xf32>) -> tensor<8x2x3xf32>"),
        "{mlir}"
    );
    assert!(
        mlir.contains(
            "stablehlo.transpose %0, dims = [1, 2, 0] : (tensor<8x2x3xf32>) -> tensor<2x3x8xf32>"
        ),
        "{mlir}"
    );
    round_trip("linear_exec", g, inputs, false);
}

#[test]
fn iree_runs_rms_norm() {
    let g = one_op(&[("x", &[2, 3, 16]), ("w", &[16])], |b, v| {
        b.rms_norm(v[0], v[1], 1e-5)
            .id("norm")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let inputs = graph_inputs(&g);
    let want = rms_norm(&inputs[0].1, &inputs[1].1, 1e-5, &Sequential).unwrap();
    round_trip_against("rms_norm", g, inputs, false, &[want]);
}

#[test]
fn iree_runs_rope_at_a_position_offset() {
    let g = one_op(&[("x", &[1, 4, 3, 8])], |b, v| {
        b.rope(v[0], 5, 10_000.0)
            .id("rope")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let inputs = graph_inputs(&g);
    let want = rope(&inputs[0].1, 5, 10_000.0, &Sequential).unwrap();
    round_trip_against("rope", g, inputs, false, &[want]);
}

#[test]
fn iree_runs_rope_far_along_the_sequence() {
    // Angles in the thousands of radians: the tables must come from the f64 angles.
    let g = one_op(&[("x", &[1, 2, 3, 16])], |b, v| {
        b.rope(v[0], 4093, 10_000.0)
            .id("rope")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let inputs = graph_inputs(&g);
    let want = rope(&inputs[0].1, 4093, 10_000.0, &Sequential).unwrap();
    round_trip_against("rope_far", g, inputs, false, &[want]);
}

#[test]
fn iree_runs_silu_mul() {
    let g = one_op(&[("gate", &[2, 3, 16]), ("up", &[2, 3, 16])], |b, v| {
        b.silu_mul(v[0], v[1])
            .id("silu")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let mut inputs = graph_inputs(&g);
    // Gates out to ±8, where the sigmoid saturates.
    for x in inputs[0].1.data_mut() {
        *x *= 8.0;
    }
    let want = silu_mul(&inputs[0].1, &inputs[1].1, &Sequential).unwrap();
    round_trip_against("silu_mul", g, inputs, false, &[want]);
}

#[test]
fn iree_runs_an_add_that_broadcasts_both_operands() {
    let g = one_op(&[("a", &[2, 1, 16]), ("b", &[3, 1])], |b, v| {
        b.add(v[0], v[1])
            .id("sum")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let inputs = graph_inputs(&g);
    let want = add_broadcast(&inputs[0].1, &inputs[1].1, &Sequential).unwrap();
    assert_eq!(want.shape(), [2, 3, 16]);
    round_trip_against("add_broadcast", g, inputs, false, &[want]);
}

#[test]
fn iree_runs_concat_along_the_sequence() {
    let g = one_op(
        &[("past", &[1, 2, 5, 8]), ("new", &[1, 2, 3, 8])],
        |b, v| b.concat(v[0], v[1], 2).id("append").finish().unwrap(),
    );
    let inputs = graph_inputs(&g);
    // Nothing to split in a concat: the module states no schedule.
    round_trip("concat", g, inputs, true);
}

// The decoder layer: hidden 32, 4 query heads over 2 K/V heads of 8, MLP 64, 3 new tokens
// after 5 cached positions.
const D: usize = 32;
const H: usize = 4;
const KV: usize = 2;
const HD: usize = 8;
const MLP: usize = 64;
const NEW: usize = 3;
const PAST: usize = 5;
const EPS: f32 = 1e-5;
const THETA: f32 = 10_000.0;

/// One decoder layer as a graph. Weights are graph inputs (`[out, in]`, as `linear` takes
/// them), not constants: the module stays small and the same `.vmfb` runs any weights. The
/// cache's past K/V are inputs too; the new K/V are computed in the graph and appended with a
/// `concat` along the sequence — the cache append, not a head repeat: attention reads the 2
/// K/V heads by index. Every compute op carries a structural hint.
fn decoder_layer_graph() -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1, NEW, D]).unwrap();
    let k_past = b.input("k_past", [1, KV, PAST, HD]).unwrap();
    let v_past = b.input("v_past", [1, KV, PAST, HD]).unwrap();
    let attn_norm = b.input("attn_norm", [D]).unwrap();
    let wq = b.input("wq", [H * HD, D]).unwrap();
    let wk = b.input("wk", [KV * HD, D]).unwrap();
    let wv = b.input("wv", [KV * HD, D]).unwrap();
    let wo = b.input("wo", [D, H * HD]).unwrap();
    let mlp_norm = b.input("mlp_norm", [D]).unwrap();
    let w_gate = b.input("w_gate", [MLP, D]).unwrap();
    let w_up = b.input("w_up", [MLP, D]).unwrap();
    let w_down = b.input("w_down", [D, MLP]).unwrap();

    let h = b
        .rms_norm(x, attn_norm, EPS)
        .id("attn_norm_out")
        .schedule(rows())
        .finish()
        .unwrap();
    let heads = |b: &mut GraphBuilder, w, n: usize, id: &str| {
        let p = b.linear(h, w).id(id).schedule(rows()).finish().unwrap();
        let r = b.reshape(p, [1, NEW, n, HD]).finish().unwrap();
        b.transpose(r, [0, 2, 1, 3]).finish().unwrap()
    };
    let q = heads(&mut b, wq, H, "q_proj");
    let q = b
        .rope(q, PAST, THETA)
        .id("q_rope")
        .schedule(rows())
        .finish()
        .unwrap();
    let k = heads(&mut b, wk, KV, "k_proj");
    let k = b
        .rope(k, PAST, THETA)
        .id("k_rope")
        .schedule(rows())
        .finish()
        .unwrap();
    let v = heads(&mut b, wv, KV, "v_proj");
    let k_all = b.concat(k_past, k, 2).id("k_append").finish().unwrap();
    let v_all = b.concat(v_past, v, 2).id("v_append").finish().unwrap();
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    let a = b
        .sdpa(q, k_all, v_all, None, causal)
        .id("attn")
        .finish()
        .unwrap();
    let a = b.transpose(a, [0, 2, 1, 3]).finish().unwrap();
    let a = b.reshape(a, [1, NEW, H * HD]).finish().unwrap();
    let o = b
        .linear(a, wo)
        .id("o_proj")
        .schedule(rows())
        .finish()
        .unwrap();
    let h1 = b
        .add(x, o)
        .id("attn_residual")
        .schedule(rows())
        .finish()
        .unwrap();
    let n2 = b
        .rms_norm(h1, mlp_norm, EPS)
        .id("mlp_norm_out")
        .schedule(rows())
        .finish()
        .unwrap();
    let g = b
        .linear(n2, w_gate)
        .id("gate_proj")
        .schedule(rows())
        .finish()
        .unwrap();
    let u = b
        .linear(n2, w_up)
        .id("up_proj")
        .schedule(rows())
        .finish()
        .unwrap();
    let m = b
        .silu_mul(g, u)
        .id("silu")
        .schedule(rows())
        .finish()
        .unwrap();
    let d = b
        .linear(m, w_down)
        .id("down_proj")
        .schedule(rows())
        .finish()
        .unwrap();
    let y = b
        .add(h1, d)
        .id("mlp_residual")
        .schedule(rows())
        .finish()
        .unwrap();
    b.output(y).unwrap();
    b.build().unwrap()
}

/// The same layer eagerly, the past K/V in a [`KvCache`] that the new K/V are appended to.
fn eager_decoder_layer(inputs: &[(String, Tensor)]) -> Tensor {
    let t = |name: &str| &inputs.iter().find(|(n, _)| n == name).unwrap().1;
    let s = &Sequential;
    let x = t("x");
    let h = rms_norm(x, t("attn_norm"), EPS, s).unwrap();
    let heads = |w: &str, n: usize| {
        linear(&h, t(w), s)
            .unwrap()
            .reshape(vec![1, NEW, n, HD])
            .unwrap()
    };
    let (q, k, v) = (heads("wq", H), heads("wk", KV), heads("wv", KV));
    let perm = [0, 2, 1, 3];
    let q = rope(q.view().permute(&perm).unwrap(), PAST, THETA, s).unwrap();
    let k = rope(k.view().permute(&perm).unwrap(), PAST, THETA, s).unwrap();
    let mut cache = KvCache::new(1, KV, PAST + NEW, HD).unwrap();
    cache.append(t("k_past"), t("v_past")).unwrap();
    cache.append(&k, v.view().permute(&perm).unwrap()).unwrap();
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    let a =
        scaled_dot_product_attention(&q, cache.keys(), cache.values(), None, &causal, s).unwrap();
    let a = a
        .view()
        .permute(&perm)
        .unwrap()
        .to_tensor()
        .unwrap()
        .reshape(vec![1, NEW, H * HD])
        .unwrap();
    let h1 = add_broadcast(x, &linear(&a, t("wo"), s).unwrap(), s).unwrap();
    let n2 = rms_norm(&h1, t("mlp_norm"), EPS, s).unwrap();
    let g = linear(&n2, t("w_gate"), s).unwrap();
    let u = linear(&n2, t("w_up"), s).unwrap();
    let m = silu_mul(&g, &u, s).unwrap();
    add_broadcast(&h1, &linear(&m, t("w_down"), s).unwrap(), s).unwrap()
}

#[test]
fn iree_runs_a_decoder_layer_over_a_kv_cache_like_the_eager_layer() {
    let g = decoder_layer_graph();
    let mut inputs = graph_inputs(&g);
    // Projections scaled by 1/sqrt(in), as trained weights roughly are.
    for (name, t) in &mut inputs {
        if name.starts_with('w') {
            let scale = 1.0 / (t.shape()[1] as f32).sqrt();
            t.data_mut().iter_mut().for_each(|x| *x *= scale);
        }
    }
    let want = eager_decoder_layer(&inputs);
    assert_eq!(want.shape(), [1, NEW, D]);
    // The graph's eager run is the hand-written layer, bit for bit.
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let graph_eager = execute(&OpsContext::cpu(Sequential::shared()), &g, &named).unwrap();
    assert_eq!(graph_eager[0].to_bits(), want.to_bits());

    let mlir = round_trip_against("decoder_layer", g, inputs, false, &[want]);
    // GQA by index: the K/V heads are never repeated; the only concatenates are the two cache
    // appends along the sequence and the two rope halves.
    assert!(!mlir.contains("broadcast_in_dim %arg1"), "K past broadcast");
    assert_eq!(mlir.matches("stablehlo.concatenate").count(), 4, "{mlir}");
    assert_eq!(
        mlir.matches("dim = 2 : (tensor<1x2x5x8xf32>, tensor<1x2x3x8xf32>)")
            .count(),
        2
    );
    for id in [
        "attn_norm_out",
        "q_proj",
        "k_proj",
        "v_proj",
        "q_rope",
        "k_rope",
        "attn",
        "o_proj",
        "attn_residual",
        "mlp_norm_out",
        "gate_proj",
        "up_proj",
        "silu",
        "down_proj",
        "mlp_residual",
    ] {
        let dims = if id == "attn" {
            "[\"batch\", \"heads\"]"
        } else {
            "[\"rows\"]"
        };
        assert!(
            mlir.lines()
                .next()
                .unwrap()
                .contains(&format!("{id} = {{parallel_dims = {dims}}}")),
            "{id}: no structural parallel_dims in the header"
        );
    }
}

#[test]
fn iree_runs_an_embedding_by_f32_indices() {
    let g = one_op(&[("table", &[10, 16]), ("ids", &[3])], |b, v| {
        b.embedding(v[0], v[1])
            .id("embed")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let mut inputs = graph_inputs(&g);
    inputs[1].1 = Tensor::new(vec![3], vec![7.0, 0.0, 9.0]).unwrap();
    let want = skainet_schedule::embedding(&inputs[0].1, &[7, 0, 9], &Sequential).unwrap();
    round_trip_against("embedding", g.clone(), inputs.clone(), false, &[want]);
}

#[test]
fn iree_runs_rope_tables_over_adjacent_and_rotate_half_pairs() {
    for interleaved in [true, false] {
        let g = one_op(
            &[("x", &[1, 4, 3, 16]), ("cos", &[3, 8]), ("sin", &[3, 8])],
            |b, v| {
                b.rope_tables(v[0], v[1], v[2], interleaved)
                    .id("rope")
                    .schedule(rows())
                    .finish()
                    .unwrap()
            },
        );
        let inputs = graph_inputs(&g);
        round_trip(&format!("rope_tables_{interleaved}"), g, inputs, false);
    }
}

/// `‖a - b‖₂ / ‖b‖₂`, in f64.
#[cfg(feature = "model")]
fn normwise_relative_error(a: &Tensor, b: &Tensor) -> f64 {
    assert_eq!(a.shape(), b.shape());
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for (&x, &y) in a.data().iter().zip(b.data()) {
        diff += (f64::from(x) - f64::from(y)).powi(2);
        norm += f64::from(y).powi(2);
    }
    (diff / norm).sqrt()
}

/// The real model's decode step at 2 blocks: the step graph run eagerly gives the bits of
/// `Llama::step`, and compiled by IREE it matches them (normwise relative error <= 1e-4, the
/// same greedy token) at every group count, its new K/V rows too. Runs in release in
/// `scripts/test` (the `real_model_` filter), with the model `scripts/fetch_model.sh` fetches.
#[cfg(feature = "model")]
#[test]
fn real_model_iree_decode_step_at_two_blocks_matches_the_eager_step() {
    use skainet_schedule::gguf::GgufFile;
    use skainet_schedule::model::{argmax, CacheKind, Llama, Logits, Tokenizer};
    use skainet_schedule::Activations;

    let path = common::model_file::model_path();
    let file = GgufFile::open(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run scripts/fetch_model.sh; to leave the real-model tests out: \
             --skip real_model_)",
            path.display()
        )
    });
    let mut model = Llama::from_gguf(file.gguf()).unwrap();
    model.truncate_blocks(2);
    let tokenizer = Tokenizer::from_gguf(file.gguf()).unwrap();
    let prompt = tokenizer
        .encode(
            "The capital of France is Paris, and the capital of Italy is",
            true,
        )
        .unwrap();
    let (p, token) = (prompt.len() - 1, prompt[prompt.len() - 1]);
    let mut cache = model.cache(CacheKind::Positional, p + 1).unwrap();
    let exact = Activations::Exact;
    model
        .forward(&prompt[..p], &mut cache, Logits::Last, exact, &Sequential)
        .unwrap();
    let inputs = model.step_graph_inputs(token, &cache).unwrap();
    let step = model.step(token, &mut cache, exact, &Sequential).unwrap();
    let want = Tensor::new(vec![1, step.len()], step.to_vec()).unwrap();

    let mut graph = model.step_graph(p).unwrap();
    assert!(core_passes(&mut graph).is_empty());
    assert_eq!(graph.outputs().len(), 1 + 2 * 2);
    let named: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let eager = execute(&OpsContext::cpu(Sequential::shared()), &graph, &named).unwrap();
    assert_eq!(eager[0].to_bits(), want.to_bits(), "graph vs Llama::step");

    let mlir = stablehlo::export(&graph);
    let header = mlir.lines().next().unwrap();
    assert!(!mlir.contains("parallelism"), "no core count anywhere");
    for node in graph.nodes() {
        if node.kind().schedule_class().is_some() {
            assert!(
                header.contains(&format!("{} = {{parallel_dims = [", node.id())),
                "{}: no structural parallel_dims in the header",
                node.id()
            );
        }
    }
    // GQA by index: the prefixes (arguments 2..6) are only ever appended to, never broadcast.
    for arg in 2..6 {
        let uses: Vec<&str> = mlir
            .lines()
            .filter(|l| l.contains(&format!("%arg{arg},")) || l.contains(&format!("%arg{arg} ")))
            .collect();
        assert_eq!(uses.len(), 1, "%arg{arg}: {uses:?}");
        assert!(uses[0].contains("stablehlo.concatenate"), "{uses:?}");
    }
    assert_eq!(mlir.matches("stablehlo.concatenate").count(), 2 * 2);

    let tools = tools();
    let dir = scratch_dir("real_model_step");
    let (mlir_path, vmfb) = (dir.join("model.mlir"), dir.join("model.vmfb"));
    std::fs::write(&mlir_path, &mlir).unwrap();
    tools.compile(&mlir_path, &vmfb).unwrap();
    let tensors: Vec<&Tensor> = inputs.iter().map(|(_, t)| t).collect();
    let greedy = argmax(want.data()).unwrap();
    for groups in group_counts() {
        let got = tools
            .run(&vmfb, groups, &dir, &tensors, eager.len())
            .unwrap_or_else(|e| panic!("{groups} groups: {e}"));
        let err = normwise_relative_error(&got[0], &want);
        assert!(err <= 1e-4, "{groups} groups: logits error {err:e}");
        assert_eq!(argmax(got[0].data()), Some(greedy), "{groups} groups");
        for (i, (g, e)) in got.iter().zip(&eager).enumerate().skip(1) {
            let err = normwise_relative_error(g, e);
            assert!(err <= 1e-4, "{groups} groups, new K/V #{i}: error {err:e}");
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
