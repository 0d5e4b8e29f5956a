#![cfg(not(feature = "loom"))]
//! The StableHLO export: the module header, and the lowerings' structure.

use skainet_schedule::graph::ScheduleHint;
use skainet_schedule::graph::{
    core_passes, stablehlo, Graph, GraphBuilder, ScheduleAnnotationPass,
};
use skainet_schedule::SdpaOptions;

mod common;

use common::graph::{attention_graph, conv_graph};

/// `q [1, 8, 5, 16]`, `k`/`v [1, 2, 9, 16]`: grouped-query attention, H = 8, nKV = 2.
fn gqa_graph(hint: Option<ScheduleHint>, options: SdpaOptions, mask: Option<Vec<usize>>) -> Graph {
    attention_graph([1, 8, 5, 16], [1, 2, 9, 16], mask, options, hint)
}

fn first_line(mlir: &str) -> &str {
    mlir.lines().next().unwrap()
}

fn matmul_graph(id: &str, hint: Option<ScheduleHint>) -> Graph {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [4, 3]).unwrap();
    let w = b.input("w", [3, 2]).unwrap();
    let mut op = b.matmul(x, w).id(id);
    if let Some(h) = hint {
        op = op.schedule(h);
    }
    let y = op.finish().unwrap();
    b.output(y).unwrap();
    b.build().unwrap()
}

#[test]
fn one_hint_with_parallelism_gives_the_exact_header() {
    let mut g = matmul_graph("proj", Some(ScheduleHint::new(["rows"], Some(8)).unwrap()));
    core_passes(&mut g);
    assert_eq!(
        first_line(&stablehlo::export(&g)),
        r#"module attributes {skainet.schedule = {proj = {parallel_dims = ["rows"], parallelism = 8}}} {"#
    );
}

#[test]
fn a_default_only_sdpa_states_dims_without_parallelism() {
    let mut g = gqa_graph(None, SdpaOptions::default(), None);
    ScheduleAnnotationPass::new().run(&mut g);
    assert_eq!(
        first_line(&stablehlo::export(&g)),
        r#"module attributes {skainet.schedule = {attn = {parallel_dims = ["batch", "heads"]}}} {"#
    );
}

#[test]
fn layouts_come_first_sorted_then_the_schedule() {
    let hint = ScheduleHint::new(["batch", "heads"], Some(8)).unwrap();
    let mut g = gqa_graph(Some(hint), SdpaOptions::default(), Some(vec![5, 9]));
    core_passes(&mut g);
    assert_eq!(
        first_line(&stablehlo::export(&g)),
        r#"module attributes {skainet.tensor_layouts = {k = "NHSD", mask = "QK", q = "NHSD", v = "NHSD"}, skainet.schedule = {attn = {parallel_dims = ["batch", "heads"], parallelism = 8}}} {"#
    );
}

#[test]
fn no_hints_and_no_layouts_give_a_bare_module() {
    let mut g = matmul_graph("proj", None);
    core_passes(&mut g);
    let mlir = stablehlo::export(&g);
    assert_eq!(first_line(&mlir), "module {");
}

#[test]
fn a_graph_the_passes_never_saw_states_nothing() {
    let g = matmul_graph("proj", Some(ScheduleHint::parallel(["rows"]).unwrap()));
    assert_eq!(stablehlo::module_header(&g), "module {");
}

#[test]
fn a_rejected_hint_never_reaches_the_header() {
    let mut g = matmul_graph("proj", Some(ScheduleHint::new(["cols"], Some(4)).unwrap()));
    core_passes(&mut g);
    assert_eq!(stablehlo::module_header(&g), "module {");
}

#[test]
fn schedule_entries_follow_topological_order_and_quote_odd_keys() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 2]).unwrap();
    let rows = ScheduleHint::parallel(["rows"]).unwrap();
    let z = b
        .matmul(x, x)
        .id("zeta")
        .schedule(rows.clone())
        .finish()
        .unwrap();
    let a = b
        .matmul(z, x)
        .id("layer 0/attn")
        .schedule(rows.clone())
        .finish()
        .unwrap();
    let c = b.matmul(a, x).id("alpha").schedule(rows).finish().unwrap();
    b.output(c).unwrap();
    let mut g = b.build().unwrap();
    core_passes(&mut g);
    assert_eq!(
        stablehlo::module_header(&g),
        r#"module attributes {skainet.schedule = {zeta = {parallel_dims = ["rows"]}, "layer 0/attn" = {parallel_dims = ["rows"]}, alpha = {parallel_dims = ["rows"]}}} {"#
    );
}

#[test]
fn a_bare_module_is_complete_mlir() {
    let g = matmul_graph("proj", None);
    assert_eq!(
        stablehlo::export(&g),
        "module {
  func.func @main(%arg0: tensor<4x3xf32>, %arg1: tensor<3x2xf32>) -> tensor<4x2xf32> {
    // proj = matmul
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    return %0 : tensor<4x2xf32>
  }
}
"
    );
}

#[test]
fn gqa_batches_both_dot_generals_over_batch_and_kv_heads() {
    let mlir = stablehlo::export(&gqa_graph(None, SdpaOptions::default(), None));
    assert!(
        mlir.contains("stablehlo.reshape %arg0 : (tensor<1x8x5x16xf32>) -> tensor<1x2x4x5x16xf32>")
    );
    assert!(mlir.contains(
        "stablehlo.dot_general %0, %arg1, batching_dims = [0, 1] x [0, 1], contracting_dims = [4] x [3] : (tensor<1x2x4x5x16xf32>, tensor<1x2x9x16xf32>) -> tensor<1x2x4x5x9xf32>"
    ));
    assert!(mlir.contains(
        ", %arg2, batching_dims = [0, 1] x [0, 1], contracting_dims = [4] x [2] : (tensor<1x2x4x5x9xf32>, tensor<1x2x9x16xf32>) -> tensor<1x2x4x5x16xf32>"
    ));
    assert!(mlir.contains(": (tensor<1x2x4x5x16xf32>) -> tensor<1x8x5x16xf32>"));
}

#[test]
fn gqa_never_concatenates_or_broadcasts_k_and_v() {
    let mlir = stablehlo::export(&gqa_graph(
        None,
        SdpaOptions {
            scale: None,
            causal: true,
        },
        Some(vec![5, 9]),
    ));
    assert!(!mlir.contains("concatenate"));
    for line in mlir.lines().filter(|l| l.contains("broadcast")) {
        assert!(!line.contains("%arg1") && !line.contains("%arg2"), "{line}");
    }
    assert_eq!(
        mlir.matches("%arg1").count(),
        2,
        "k: the signature and one dot_general"
    );
    assert_eq!(
        mlir.matches("%arg2").count(),
        2,
        "v: the signature and one dot_general"
    );
}

#[test]
fn causal_is_bottom_right_aligned_with_iota_compare_select() {
    let mlir = stablehlo::export(&gqa_graph(
        None,
        SdpaOptions {
            scale: None,
            causal: true,
        },
        None,
    ));
    // Query i sees key j <= i + (Sk - Sq) = i + 4.
    assert!(mlir.contains("stablehlo.iota dim = 0 : tensor<5x9xi64>"));
    assert!(mlir.contains("stablehlo.iota dim = 1 : tensor<5x9xi64>"));
    assert!(mlir.contains("stablehlo.constant dense<4> : tensor<5x9xi64>"));
    assert!(mlir.contains("stablehlo.compare LE, %"));
    assert!(mlir.contains("stablehlo.constant dense<0xFF800000> : tensor<1x2x4x5x9xf32>"));
}

#[test]
fn the_scale_defaults_to_one_over_sqrt_head_dim_and_is_exact() {
    let mlir = stablehlo::export(&gqa_graph(None, SdpaOptions::default(), None));
    assert!(
        mlir.contains("stablehlo.constant dense<0x3E800000> : tensor<1x2x4x5x9xf32>"),
        "1/4"
    );
    let scaled = SdpaOptions {
        scale: Some(0.1),
        causal: false,
    };
    let mlir = stablehlo::export(&gqa_graph(None, scaled, None));
    assert!(mlir.contains(&format!("dense<0x{:08X}>", 0.1f32.to_bits())));
}

#[test]
fn fully_masked_rows_are_guarded_against_nan() {
    let mlir = stablehlo::export(&gqa_graph(
        None,
        SdpaOptions::default(),
        Some(vec![1, 8, 5, 9]),
    ));
    // A per-head mask is split like Q and broadcast onto the scores.
    assert!(
        mlir.contains("stablehlo.reshape %arg3 : (tensor<1x8x5x9xf32>) -> tensor<1x2x4x5x9xf32>")
    );
    assert!(mlir.contains("applies stablehlo.maximum across dimensions = [4]"));
    assert!(mlir.contains("applies stablehlo.add across dimensions = [4]"));
    assert_eq!(
        mlir.matches("stablehlo.compare EQ").count(),
        2,
        "max == -inf, sum == 0"
    );
}

#[test]
fn fully_masked_rows_are_selected_to_zeros_after_the_values() {
    let mlir = stablehlo::export(&gqa_graph(None, SdpaOptions::default(), Some(vec![5, 9])));
    let select = mlir
        .lines()
        .find(|l| l.contains("stablehlo.select") && l.contains("tensor<1x2x4x5x16xf32>"))
        .expect("a select over the output rows");
    assert!(
        select.ends_with(
            ": (tensor<1x2x4x5x16xi1>, tensor<1x2x4x5x16xf32>, tensor<1x2x4x5x16xf32>) -> tensor<1x2x4x5x16xf32>"
        ),
        "{select}"
    );
    assert!(mlir.contains("stablehlo.constant dense<0x00000000> : tensor<1x2x4x5x16xf32>"));
}

#[test]
fn the_body_never_states_a_core_count() {
    let hint = ScheduleHint::new(["heads"], Some(8)).unwrap();
    let mut g = gqa_graph(Some(hint), SdpaOptions::default(), None);
    core_passes(&mut g);
    let mlir = stablehlo::export(&g);
    let (header, body) = mlir.split_once('\n').unwrap();
    assert!(header.contains("parallelism = 8"));
    assert!(!body.contains("parallelism"));
    assert!(!body.contains("skainet"));
}

#[test]
fn conv2d_lowers_to_one_convolution_plus_bias() {
    let mut g = conv_graph(None);
    core_passes(&mut g);
    let mlir = stablehlo::export(&g);
    assert_eq!(
        first_line(&mlir),
        r#"module attributes {skainet.tensor_layouts = {w = "OIHW", x = "NCHW"}} {"#
    );
    assert!(mlir.contains(
        "stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 1], pad = [[1, 1], [0, 0]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x6xf32>"
    ));
    assert!(mlir.contains(
        "stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<4xf32>) -> tensor<2x4x4x6xf32>"
    ));
}

#[test]
fn several_outputs_are_returned_in_order() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3]).unwrap();
    let t = b.transpose(x, [1, 0]).id("t").finish().unwrap();
    let r = b.reshape(x, [6]).id("r").finish().unwrap();
    b.output(r).unwrap();
    b.output(t).unwrap();
    let mlir = stablehlo::export(&b.build().unwrap());
    assert!(mlir
        .contains("func.func @main(%arg0: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<3x2xf32>) {"));
    assert!(mlir.contains(
        "stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>"
    ));
    assert!(mlir.contains("return %1, %0 : tensor<6xf32>, tensor<3x2xf32>"));
}

#[test]
fn the_header_states_the_hint_the_pass_accepted_not_a_hand_edited_metadata_entry() {
    use skainet_schedule::graph::{Attr, SCHEDULE_KEY};
    let mut g = matmul_graph("proj", Some(ScheduleHint::parallel(["rows"]).unwrap()));
    core_passes(&mut g);
    let proj = g.outputs()[0];
    let forged = ScheduleHint::new(["batch"], Some(64)).unwrap().to_map();
    g.metadata_mut(proj)
        .unwrap()
        .insert(SCHEDULE_KEY.to_string(), Attr::Map(forged));
    assert_eq!(
        first_line(&stablehlo::export(&g)),
        r#"module attributes {skainet.schedule = {proj = {parallel_dims = ["rows"]}}} {"#
    );
}

/// One op over named inputs, hinted `["rows"]`, through the core passes.
fn one_row_op(
    shapes: &[(&str, &[usize])],
    op: impl FnOnce(
        &mut GraphBuilder,
        &[skainet_schedule::graph::Value],
    ) -> skainet_schedule::graph::Value,
) -> String {
    let mut b = GraphBuilder::new();
    let values: Vec<_> = shapes
        .iter()
        .map(|(n, s)| b.input(n, s.to_vec()).unwrap())
        .collect();
    let y = op(&mut b, &values);
    b.output(y).unwrap();
    let mut g = b.build().unwrap();
    assert!(core_passes(&mut g).is_empty());
    stablehlo::export(&g)
}

fn rows() -> ScheduleHint {
    ScheduleHint::parallel(["rows"]).unwrap()
}

#[test]
fn an_embedding_converts_its_indices_and_gathers_whole_rows() {
    let mlir = one_row_op(&[("table", &[10, 4]), ("ids", &[3])], |b, v| {
        let e = b.embedding(v[0], v[1]).id("embed").schedule(rows());
        e.finish().unwrap()
    });
    assert_eq!(
        first_line(&mlir),
        r#"module attributes {skainet.schedule = {embed = {parallel_dims = ["rows"]}}} {"#
    );
    let body: Vec<&str> = mlir.lines().skip(2).take(4).collect();
    assert_eq!(
        body,
        [
            "    // embed = embedding",
            "    %0 = stablehlo.convert %arg1 : (tensor<3xf32>) -> tensor<3xi32>",
            "    %1 = stablehlo.reshape %0 : (tensor<3xi32>) -> tensor<3x1xi32>",
            "    %2 = \"stablehlo.gather\"(%arg0, %1) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 4>} : (tensor<10x4xf32>, tensor<3x1xi32>) -> tensor<3x4xf32>",
        ]
    );
}

#[test]
fn rope_tables_swap_adjacent_pairs_by_a_reverse_with_no_slice_or_concatenate() {
    let mlir = one_row_op(
        &[("x", &[1, 2, 3, 8]), ("cos", &[3, 4]), ("sin", &[3, 4])],
        |b, v| {
            let r = b.rope_tables(v[0], v[1], v[2], true).id("rope");
            r.schedule(rows()).finish().unwrap()
        },
    );
    let body: Vec<&str> = mlir.lines().skip(2).take(13).collect();
    let t = "tensor<1x2x3x4x2xf32>";
    assert_eq!(
        body,
        [
            "    // rope = rope_tables".to_string(),
            format!("    %0 = stablehlo.reshape %arg0 : (tensor<1x2x3x8xf32>) -> {t}"),
            format!("    %1 = stablehlo.reverse %0, dims = [4] : {t}"),
            format!("    %2 = stablehlo.broadcast_in_dim %arg1, dims = [2, 3] : (tensor<3x4xf32>) -> {t}"),
            format!("    %3 = stablehlo.broadcast_in_dim %arg2, dims = [2, 3] : (tensor<3x4xf32>) -> {t}"),
            "    %4 = stablehlo.constant dense<[0xBF800000, 0x3F800000]> : tensor<2xf32>".to_string(),
            format!("    %5 = stablehlo.broadcast_in_dim %4, dims = [4] : (tensor<2xf32>) -> {t}"),
            format!("    %6 = stablehlo.multiply %3, %5 : {t}"),
            format!("    %7 = stablehlo.multiply %0, %2 : {t}"),
            format!("    %8 = stablehlo.multiply %1, %6 : {t}"),
            format!("    %9 = stablehlo.add %7, %8 : {t}"),
            format!("    %10 = stablehlo.reshape %9 : ({t}) -> tensor<1x2x3x8xf32>"),
            "    return %10 : tensor<1x2x3x8xf32>".to_string(),
        ]
    );
}

#[test]
fn rotate_half_rope_tables_put_the_pair_axis_before_the_half() {
    let mlir = one_row_op(
        &[("x", &[1, 2, 3, 8]), ("cos", &[3, 4]), ("sin", &[3, 4])],
        |b, v| {
            let r = b.rope_tables(v[0], v[1], v[2], false).id("rope");
            r.schedule(rows()).finish().unwrap()
        },
    );
    let t = "tensor<1x2x3x2x4xf32>";
    assert!(mlir.contains(&format!(
        "%0 = stablehlo.reshape %arg0 : (tensor<1x2x3x8xf32>) -> {t}"
    )));
    assert!(mlir.contains(&format!("%1 = stablehlo.reverse %0, dims = [3] : {t}")));
    assert!(mlir.contains(&format!(
        "%2 = stablehlo.broadcast_in_dim %arg1, dims = [2, 4] : (tensor<3x4xf32>) -> {t}"
    )));
    assert!(mlir.contains(&format!(
        "%5 = stablehlo.broadcast_in_dim %4, dims = [3] : (tensor<2xf32>) -> {t}"
    )));
}

#[test]
fn linear_puts_the_weight_first_and_transposes_the_small_product_back() {
    let mlir = one_row_op(&[("x", &[1, 4]), ("w", &[3, 4])], |b, v| {
        b.linear(v[0], v[1])
            .id("proj")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    let body: Vec<&str> = mlir.lines().skip(2).take(3).collect();
    assert_eq!(
        body,
        [
            "    // proj = linear",
            "    %0 = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [1] : (tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<3x1xf32>",
            "    %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<3x1xf32>) -> tensor<1x3xf32>",
        ]
    );
    // A vector input needs no transpose.
    let mlir = one_row_op(&[("x", &[4]), ("w", &[3, 4])], |b, v| {
        b.linear(v[0], v[1])
            .id("proj")
            .schedule(rows())
            .finish()
            .unwrap()
    });
    assert!(mlir.contains(
        "%0 = stablehlo.dot_general %arg1, %arg0, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3xf32>\n    return %0 : tensor<3xf32>"
    ));
}
