#![cfg(not(feature = "loom"))]
//! The graph builder: ids, scoped and per-op hints, shape checks at build time.

use skainet_schedule::graph::{Attr, ScheduleHint, SCHEDULE_KEY};
use skainet_schedule::graph::{Graph, GraphBuilder, GraphError, Op, OpKind, Value};
use skainet_schedule::ShapeError;
use skainet_schedule::{Conv2dOptions, SdpaOptions};

fn hint(dims: &[&str]) -> ScheduleHint {
    ScheduleHint::parallel(dims.iter().copied()).unwrap()
}

struct Attention {
    b: GraphBuilder,
    q: Value,
    k: Value,
    v: Value,
}

fn attention_inputs() -> Attention {
    let mut b = GraphBuilder::new();
    let q = b.input("q", [1, 8, 5, 16]).unwrap();
    let k = b.input("k", [1, 2, 9, 16]).unwrap();
    let v = b.input("v", [1, 2, 9, 16]).unwrap();
    Attention { b, q, k, v }
}

fn requested(graph: &Graph, id: &str) -> Option<ScheduleHint> {
    graph.find(id).unwrap().requested_hint().cloned()
}

#[test]
fn a_per_op_hint_is_recorded_on_its_node() {
    let Attention { mut b, q, k, v } = attention_inputs();
    let out = b
        .sdpa(q, k, v, None, SdpaOptions::default())
        .id("attn")
        .schedule(hint(&["heads"]))
        .finish()
        .unwrap();
    b.output(out).unwrap();
    let g = b.build().unwrap();
    assert_eq!(requested(&g, "attn"), Some(hint(&["heads"])));
    let params = g.find("attn").unwrap().params();
    assert_eq!(
        params.get(SCHEDULE_KEY),
        Some(&Attr::Map(hint(&["heads"]).to_map()))
    );
    assert_eq!(params.get("causal"), Some(&Attr::Bool(false)));
}

#[test]
fn a_scoped_hint_applies_to_every_op_inside() {
    let Attention { mut b, q, k, v } = attention_inputs();
    let (a1, a2) = b.schedule(hint(&["batch", "heads"]), |b| {
        let a1 = b
            .sdpa(q, k, v, None, SdpaOptions::default())
            .id("a1")
            .finish()
            .unwrap();
        let a2 = b
            .sdpa(q, k, v, None, SdpaOptions::default())
            .id("a2")
            .finish()
            .unwrap();
        (a1, a2)
    });
    b.output(a1).unwrap();
    b.output(a2).unwrap();
    let g = b.build().unwrap();
    assert_eq!(requested(&g, "a1"), Some(hint(&["batch", "heads"])));
    assert_eq!(requested(&g, "a2"), Some(hint(&["batch", "heads"])));
}

#[test]
fn an_explicit_hint_wins_over_the_scoped_one() {
    let Attention { mut b, q, k, v } = attention_inputs();
    let out = b.schedule(hint(&["batch"]), |b| {
        b.sdpa(q, k, v, None, SdpaOptions::default())
            .id("attn")
            .schedule(hint(&["heads"]))
            .finish()
            .unwrap()
    });
    b.output(out).unwrap();
    assert_eq!(
        requested(&b.build().unwrap(), "attn"),
        Some(hint(&["heads"]))
    );
}

#[test]
fn nothing_leaks_out_of_a_scoped_block() {
    let Attention { mut b, q, k, v } = attention_inputs();
    let inside = b.schedule(hint(&["heads"]), |b| {
        b.sdpa(q, k, v, None, SdpaOptions::default())
            .id("inside")
            .finish()
            .unwrap()
    });
    let after = b
        .sdpa(q, k, v, None, SdpaOptions::default())
        .id("after")
        .finish()
        .unwrap();
    b.output(inside).unwrap();
    b.output(after).unwrap();
    let g = b.build().unwrap();
    assert_eq!(requested(&g, "inside"), Some(hint(&["heads"])));
    assert_eq!(requested(&g, "after"), None);
}

#[test]
fn nested_blocks_use_the_innermost_hint_and_restore_the_outer_one() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [4, 3]).unwrap();
    let w = b.input("w", [3, 3]).unwrap();
    b.schedule(hint(&["outer"]), |b| {
        b.schedule(hint(&["inner"]), |b| {
            b.matmul(x, w).id("in").finish().unwrap()
        });
        b.matmul(x, w).id("out").finish().unwrap();
    });
    let last = b.matmul(x, w).id("none").finish().unwrap();
    b.output(last).unwrap();
    let g = b.build().unwrap();
    assert_eq!(requested(&g, "in"), Some(hint(&["inner"])));
    assert_eq!(requested(&g, "out"), Some(hint(&["outer"])));
    assert_eq!(requested(&g, "none"), None);
}

#[test]
fn duplicate_ids_are_an_error_naming_the_id() {
    let Attention { mut b, q, k, v } = attention_inputs();
    b.sdpa(q, k, v, None, SdpaOptions::default())
        .id("attn")
        .finish()
        .unwrap();
    let second = b
        .sdpa(q, k, v, None, SdpaOptions::default())
        .id("attn")
        .finish();
    assert_eq!(second, Err(GraphError::DuplicateId { id: "attn".into() }));
    assert_eq!(
        b.input("q", [1]),
        Err(GraphError::DuplicateId { id: "q".into() })
    );
}

#[test]
fn generated_ids_are_unique_and_skip_given_ones() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 2]).unwrap();
    let m0 = b.matmul(x, x).id("matmul_0").finish().unwrap();
    let m1 = b.matmul(x, x).finish().unwrap();
    let m2 = b.matmul(x, x).finish().unwrap();
    let s = b.add(m0, m1).finish().unwrap();
    b.output(m2).unwrap();
    b.output(s).unwrap();
    let g = b.build().unwrap();
    let ids: Vec<&str> = g.nodes().iter().map(|n| n.id()).collect();
    assert_eq!(ids, ["x", "matmul_0", "matmul_1", "matmul_2", "add_0"]);
}

#[test]
fn a_bad_shape_is_an_error_naming_the_node() {
    let mut b = GraphBuilder::new();
    let q = b.input("q", [1, 8, 5, 16]).unwrap();
    let k = b.input("k", [1, 3, 9, 16]).unwrap();
    let err = b
        .sdpa(q, k, k, None, SdpaOptions::default())
        .id("attn")
        .finish();
    assert_eq!(
        err,
        Err(GraphError::BadShape {
            node: "attn".into(),
            op: OpKind::Sdpa,
            error: ShapeError::KvHeadsDoNotDivide {
                q: vec![1, 8, 5, 16],
                k: vec![1, 3, 9, 16]
            }
        })
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "node \"attn\": sdpa: k/v heads of [1, 3, 9, 16] do not divide the query heads of [1, 8, 5, 16]"
    );
}

#[test]
fn a_bad_shape_names_a_generated_id_too() {
    let mut b = GraphBuilder::new();
    let a = b.input("a", [4, 3]).unwrap();
    let w = b.input("w", [4, 2]).unwrap();
    assert_eq!(
        b.matmul(a, w).finish(),
        Err(GraphError::BadShape {
            node: "matmul_0".into(),
            op: OpKind::Matmul,
            error: ShapeError::MatmulInnerMismatch {
                a: vec![4, 3],
                b: vec![4, 2]
            }
        })
    );
}

#[test]
fn causal_attention_with_more_queries_than_keys_is_rejected() {
    let mut b = GraphBuilder::new();
    let q = b.input("q", [1, 2, 9, 4]).unwrap();
    let k = b.input("k", [1, 2, 5, 4]).unwrap();
    let causal = SdpaOptions {
        scale: None,
        causal: true,
    };
    assert_eq!(
        b.sdpa(q, k, k, None, causal).id("attn").finish(),
        Err(GraphError::BadShape {
            node: "attn".into(),
            op: OpKind::Sdpa,
            error: ShapeError::CausalQueryLongerThanKeys {
                q: vec![1, 2, 9, 4],
                k: vec![1, 2, 5, 4]
            }
        })
    );
}

#[test]
fn masks_broadcast_by_trailing_alignment() {
    let Attention { mut b, q, k, v } = attention_inputs();
    for (name, shape) in [
        ("m2", vec![5, 9]),
        ("m4", vec![1, 8, 5, 9]),
        ("m1h", vec![1, 1, 5, 9]),
        ("mrow", vec![1, 1, 1, 9]),
    ] {
        let m = b.input(name, shape).unwrap();
        assert!(
            b.sdpa(q, k, v, Some(m), SdpaOptions::default())
                .finish()
                .is_ok(),
            "{name}"
        );
    }
    let bad = b.input("bad", [1, 2, 5, 9]).unwrap();
    assert_eq!(
        b.sdpa(q, k, v, Some(bad), SdpaOptions::default())
            .id("masked")
            .finish(),
        Err(GraphError::BadShape {
            node: "masked".into(),
            op: OpKind::Sdpa,
            error: ShapeError::MaskShape {
                mask: vec![1, 2, 5, 9],
                scores: vec![1, 8, 5, 9]
            }
        })
    );
}

#[test]
fn conv2d_infers_its_output_and_checks_its_window() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3, 8, 8]).unwrap();
    let w = b.input("w", [4, 3, 3, 3]).unwrap();
    let bias = b.input("bias", [4]).unwrap();
    let opts = Conv2dOptions {
        stride: [2, 1],
        padding: [1, 0],
    };
    let y = b
        .conv2d(x, w, Some(bias), opts)
        .id("conv")
        .finish()
        .unwrap();
    assert_eq!(b.shape(y), Some(&[2usize, 4, 4, 6][..]));

    let big = b.input("big", [4, 3, 9, 9]).unwrap();
    assert_eq!(
        b.conv2d(x, big, None, Conv2dOptions::default())
            .id("c2")
            .finish(),
        Err(GraphError::BadShape {
            node: "c2".into(),
            op: OpKind::Conv2d,
            error: ShapeError::ConvKernelTooLarge {
                input: vec![2, 3, 8, 8],
                weight: vec![4, 3, 9, 9],
                padding: [0, 0]
            }
        })
    );
}

#[test]
fn reshape_and_transpose_check_counts_and_permutations() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3, 4]).unwrap();
    let t = b.transpose(x, [2, 0, 1]).finish().unwrap();
    assert_eq!(b.shape(t), Some(&[4usize, 2, 3][..]));
    let r = b.reshape(t, [8, 3]).finish().unwrap();
    assert_eq!(b.shape(r), Some(&[8usize, 3][..]));
    assert_eq!(
        b.reshape(x, [5, 5]).id("r").finish(),
        Err(GraphError::BadShape {
            node: "r".into(),
            op: OpKind::Reshape,
            error: ShapeError::Reshape {
                from: vec![2, 3, 4],
                to: vec![5, 5]
            }
        })
    );
    assert_eq!(
        b.transpose(x, [0, 0, 1]).id("t").finish(),
        Err(GraphError::BadShape {
            node: "t".into(),
            op: OpKind::Transpose,
            error: ShapeError::Permutation {
                shape: vec![2, 3, 4],
                permutation: vec![0, 0, 1]
            }
        })
    );
}

#[test]
fn a_failed_op_leaves_its_id_free() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3]).unwrap();
    assert!(b.reshape(x, [7]).id("r").finish().is_err());
    assert!(b.reshape(x, [6]).id("r").finish().is_ok());
}

#[test]
fn per_node_metadata_is_kept() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3]).unwrap();
    let r = b.reshape(x, [6]).meta("origin", "layer0").finish().unwrap();
    b.output(r).unwrap();
    let g = b.build().unwrap();
    assert_eq!(
        g.nodes()[1].metadata().get("origin"),
        Some(&Attr::from("layer0"))
    );
    assert_eq!(g.nodes()[1].op(), &Op::Reshape);
}

#[test]
fn a_graph_without_outputs_is_an_error() {
    let mut b = GraphBuilder::new();
    b.input("x", [1]).unwrap();
    assert_eq!(b.build(), Err(GraphError::NoOutputs));
}

#[test]
fn foreign_values_are_rejected() {
    let mut other = GraphBuilder::new();
    for i in 0..5 {
        other.input(&format!("x{i}"), [1]).unwrap();
    }
    let foreign = other.input("y", [1]).unwrap();
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1]).unwrap();
    assert_eq!(
        b.add(x, foreign).id("sum").finish(),
        Err(GraphError::UnknownValue {
            node: "sum".into(),
            index: 5
        })
    );
}

#[test]
fn decoder_ops_infer_the_eager_kernels_shapes() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3, 16]).unwrap();
    let w = b.input("w", [8, 16]).unwrap();
    let nw = b.input("nw", [16]).unwrap();
    let bias = b.input("bias", [3, 1]).unwrap();
    let p = b.linear(x, w).finish().unwrap();
    assert_eq!(b.shape(p), Some(&[2, 3, 8][..]));
    let n = b.rms_norm(x, nw, 1e-5).finish().unwrap();
    assert_eq!(b.shape(n), Some(&[2, 3, 16][..]));
    let s = b.add(x, bias).finish().unwrap();
    assert_eq!(b.shape(s), Some(&[2, 3, 16][..]));
    let r = b.reshape(p, [2, 1, 3, 8]).finish().unwrap();
    let r = b.rope(r, 4, 10_000.0).finish().unwrap();
    assert_eq!(b.shape(r), Some(&[2, 1, 3, 8][..]));
    let c = b.concat(r, r, 2).finish().unwrap();
    assert_eq!(b.shape(c), Some(&[2, 1, 6, 8][..]));
}

#[test]
fn rope_over_an_odd_head_dim_is_rejected_with_the_node() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1, 2, 3, 7]).unwrap();
    assert_eq!(
        b.rope(x, 0, 10_000.0).id("q_rope").finish(),
        Err(GraphError::BadShape {
            node: "q_rope".into(),
            op: OpKind::Rope,
            error: ShapeError::RopeOddHeadDim {
                x: vec![1, 2, 3, 7]
            }
        })
    );
}

#[test]
fn add_of_shapes_that_do_not_broadcast_is_rejected() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 3]).unwrap();
    let y = b.input("y", [2]).unwrap();
    assert_eq!(
        b.add(x, y).finish(),
        Err(GraphError::BadShape {
            node: "add_0".into(),
            op: OpKind::Add,
            error: ShapeError::Broadcast {
                op: "add",
                a: vec![2, 3],
                b: vec![2]
            }
        })
    );
}

#[test]
fn concat_of_other_head_counts_is_rejected() {
    let mut b = GraphBuilder::new();
    let past = b.input("past", [1, 2, 5, 8]).unwrap();
    let new = b.input("new", [1, 4, 3, 8]).unwrap();
    assert_eq!(
        b.concat(past, new, 2).finish(),
        Err(GraphError::BadShape {
            node: "concat_0".into(),
            op: OpKind::Concat,
            error: ShapeError::ElementwiseMismatch {
                op: "concat",
                a: vec![1, 2, 5, 8],
                b: vec![1, 4, 3, 8]
            }
        })
    );
}

#[test]
fn decoder_op_parameters_are_attributes() {
    let rope = Op::Rope {
        offset: 5,
        theta: 10_000.0,
    };
    assert_eq!(rope.params().get("offset"), Some(&Attr::Int(5)));
    assert_eq!(rope.params().get("theta"), Some(&Attr::Float(10_000.0)));
    let norm = Op::RmsNorm { eps: 0.5 };
    assert_eq!(norm.params().get("eps"), Some(&Attr::Float(0.5)));
    assert_eq!(
        Op::Concat { dim: 2 }.params().get("dim"),
        Some(&Attr::Int(2))
    );
    assert!(Op::Linear.params().is_empty());
}

#[test]
fn an_embedding_takes_a_table_of_rows_and_a_vector_of_indices() {
    let mut b = GraphBuilder::new();
    let table = b.input("table", [10, 4]).unwrap();
    let ids = b.input("ids", [3]).unwrap();
    let e = b.embedding(table, ids).id("embed").finish().unwrap();
    assert_eq!(b.shape(e), Some(&[3usize, 4][..]));
    assert_eq!(
        b.embedding(ids, ids).id("flat").finish(),
        Err(GraphError::BadShape {
            node: "flat".into(),
            op: OpKind::Embedding,
            error: ShapeError::Rank {
                op: "embedding",
                operand: "table",
                expected: "2",
                shape: vec![3]
            }
        })
    );
    assert_eq!(
        b.embedding(table, table).id("square").finish(),
        Err(GraphError::BadShape {
            node: "square".into(),
            op: OpKind::Embedding,
            error: ShapeError::Rank {
                op: "embedding",
                operand: "indices",
                expected: "1",
                shape: vec![10, 4]
            }
        })
    );
}

#[test]
fn rope_tables_need_one_row_of_half_a_head_per_position() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1, 2, 3, 8]).unwrap();
    let cos = b.input("cos", [3, 4]).unwrap();
    let sin = b.input("sin", [3, 4]).unwrap();
    let short = b.input("short", [2, 4]).unwrap();
    let r = b
        .rope_tables(x, cos, sin, true)
        .id("rope")
        .finish()
        .unwrap();
    assert_eq!(b.shape(r), Some(&[1usize, 2, 3, 8][..]));
    let err = b.rope_tables(x, cos, short, false).id("bad").finish();
    assert_eq!(
        err,
        Err(GraphError::BadShape {
            node: "bad".into(),
            op: OpKind::RopeTables,
            error: ShapeError::ElementwiseMismatch {
                op: "rope_tables",
                a: vec![3, 4],
                b: vec![2, 4]
            }
        })
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "node \"bad\": rope_tables: operands [3, 4] and [2, 4] have different shapes"
    );
}

#[test]
fn the_new_ops_name_themselves_and_their_parameters() {
    assert_eq!(OpKind::Embedding.name(), "embedding");
    assert_eq!(OpKind::RopeTables.name(), "rope_tables");
    let params = Op::RopeTables { interleaved: true }.params();
    assert_eq!(params.get("interleaved"), Some(&Attr::Bool(true)));
    assert!(Op::Embedding.params().is_empty());
}
