#![cfg(not(feature = "loom"))]
//! The schedule annotation pass and the layout pass.

use skainet_schedule::graph::{
    core_passes, DefaultsError, Diagnostic, DiagnosticKind, Graph, GraphBuilder, OpKind,
    ScheduleAnnotationPass, ScheduleClass, StructuralDefaults, TensorLayoutPass, LAYOUT_KEY,
};
use skainet_schedule::graph::{Attr, ScheduleHint, SCHEDULE_KEY};
use skainet_schedule::{Conv2dOptions, SdpaOptions};

fn hint(dims: &[&str]) -> ScheduleHint {
    ScheduleHint::parallel(dims.iter().copied()).unwrap()
}

/// One attention, one matmul and one add, each with the given hint.
fn graph(attn: Option<ScheduleHint>, mm: Option<ScheduleHint>, add: Option<ScheduleHint>) -> Graph {
    let mut b = GraphBuilder::new();
    let q = b.input("q", [1, 4, 3, 8]).unwrap();
    let k = b.input("k", [1, 2, 3, 8]).unwrap();
    let w = b.input("w", [8, 8]).unwrap();
    let mut op = b.sdpa(q, k, k, None, SdpaOptions::default()).id("attn");
    if let Some(h) = attn {
        op = op.schedule(h);
    }
    let a = op.finish().unwrap();
    let mut op = b.matmul(a, w).id("mm");
    if let Some(h) = mm {
        op = op.schedule(h);
    }
    let m = op.finish().unwrap();
    let mut op = b.sub(m, a).id("sum");
    if let Some(h) = add {
        op = op.schedule(h);
    }
    let s = op.finish().unwrap();
    b.output(s).unwrap();
    b.build().unwrap()
}

fn stamped(g: &Graph, id: &str) -> Option<ScheduleHint> {
    g.find(id).unwrap().annotated().cloned()
}

#[test]
fn an_accepted_hint_is_stamped_exactly() {
    let mut g = graph(None, Some(hint(&["rows"])), None);
    let diagnostics = ScheduleAnnotationPass::new().run(&mut g);
    assert_eq!(diagnostics, []);
    let mut expected = skainet_schedule::graph::AttrMap::new();
    expected.insert("parallel_dims".into(), Attr::List(vec![Attr::from("rows")]));
    assert_eq!(
        g.find("mm").unwrap().metadata().get(SCHEDULE_KEY),
        Some(&Attr::Map(expected))
    );
}

#[test]
fn dim_names_are_normalised_to_the_canonical_ones() {
    let mut g = graph(Some(hint(&["HEADS", "Batch"])), None, None);
    assert_eq!(ScheduleAnnotationPass::new().run(&mut g), []);
    assert_eq!(stamped(&g, "attn"), Some(hint(&["heads", "batch"])));
}

#[test]
fn conv_accepts_out_channels_in_any_case() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1, 2, 4, 4]).unwrap();
    let w = b.input("w", [3, 2, 3, 3]).unwrap();
    let c = b
        .conv2d(x, w, None, Conv2dOptions::default())
        .id("conv")
        .schedule(hint(&["Out_Channels", "batch"]))
        .finish()
        .unwrap();
    b.output(c).unwrap();
    let mut g = b.build().unwrap();
    assert_eq!(ScheduleAnnotationPass::new().run(&mut g), []);
    assert_eq!(stamped(&g, "conv"), Some(hint(&["out_channels", "batch"])));
}

#[test]
fn an_unknown_dim_gives_an_exact_diagnostic_and_no_metadata() {
    let mut g = graph(Some(hint(&["heads", "seq"])), None, None);
    let diagnostics = ScheduleAnnotationPass::new().run(&mut g);
    assert_eq!(
        diagnostics,
        [Diagnostic {
            node: "attn".into(),
            op: OpKind::Sdpa,
            kind: DiagnosticKind::UnknownDims {
                rejected: vec!["seq".into()],
                honoured: vec!["batch".into(), "heads".into()],
            },
        }]
    );
    assert_eq!(
        diagnostics[0].to_string(),
        "node \"attn\" (sdpa): unknown parallel dims [\"seq\"]; sdpa honours [\"batch\", \"heads\"]; no schedule stamped"
    );
    assert_eq!(g.find("attn").unwrap().metadata().get(SCHEDULE_KEY), None);
}

#[test]
fn a_hint_on_an_unschedulable_op_gives_a_diagnostic_and_no_metadata() {
    let mut g = graph(None, None, Some(hint(&["rows"])));
    let diagnostics = ScheduleAnnotationPass::new().run(&mut g);
    assert_eq!(
        diagnostics,
        [Diagnostic {
            node: "sum".into(),
            op: OpKind::Sub,
            kind: DiagnosticKind::Unschedulable {
                requested: vec!["rows".into()]
            },
        }]
    );
    assert_eq!(
        diagnostics[0].to_string(),
        "node \"sum\" (sub): sub has no schedulable dims; hint [\"rows\"] ignored"
    );
    assert_eq!(g.find("sum").unwrap().metadata().get(SCHEDULE_KEY), None);
}

#[test]
fn defaults_apply_only_where_there_is_no_hint() {
    let mut g = graph(None, None, None);
    assert_eq!(ScheduleAnnotationPass::new().run(&mut g), []);
    assert_eq!(stamped(&g, "attn"), Some(hint(&["batch", "heads"])));
    assert_eq!(stamped(&g, "mm"), None, "linear has no standard default");
    assert_eq!(stamped(&g, "sum"), None);

    let mut explicit = graph(Some(hint(&["heads"])), None, None);
    ScheduleAnnotationPass::new().run(&mut explicit);
    assert_eq!(stamped(&explicit, "attn"), Some(hint(&["heads"])));

    let mut rejected = graph(Some(hint(&["tokens"])), None, None);
    ScheduleAnnotationPass::new().run(&mut rejected);
    assert_eq!(
        stamped(&rejected, "attn"),
        None,
        "a rejected hint gets no default"
    );
}

#[test]
fn the_pass_without_defaults_stamps_only_requests() {
    let mut g = graph(None, Some(hint(&["rows"])), None);
    ScheduleAnnotationPass::with_defaults(StructuralDefaults::none()).run(&mut g);
    assert_eq!(stamped(&g, "attn"), None);
    assert_eq!(stamped(&g, "mm"), Some(hint(&["rows"])));
}

#[test]
fn defaults_with_a_parallelism_are_rejected() {
    let with_cores = ScheduleHint::new(["batch", "heads"], Some(4)).unwrap();
    let err = StructuralDefaults::standard().with(ScheduleClass::Attention, with_cores);
    assert_eq!(
        err,
        Err(DefaultsError::Parallelism {
            class: ScheduleClass::Attention,
            parallelism: 4
        })
    );
    assert_eq!(
        err.unwrap_err().to_string(),
        "structural default for attention: states parallelism = 4; defaults never carry a core count"
    );
}

#[test]
fn defaults_with_unknown_dims_are_rejected() {
    assert_eq!(
        StructuralDefaults::none().with(ScheduleClass::Conv, hint(&["rows"])),
        Err(DefaultsError::UnknownDims {
            class: ScheduleClass::Conv,
            rejected: vec!["rows".into()]
        })
    );
}

#[test]
fn custom_defaults_apply_to_their_family() {
    let defaults = StructuralDefaults::none()
        .with(ScheduleClass::Linear, hint(&["ROWS"]))
        .unwrap();
    let mut g = graph(None, None, None);
    ScheduleAnnotationPass::with_defaults(defaults).run(&mut g);
    assert_eq!(stamped(&g, "mm"), Some(hint(&["rows"])));
    assert_eq!(stamped(&g, "attn"), None);
}

#[test]
fn an_explicit_parallelism_is_stamped_with_one_advisory_diagnostic() {
    let mut g = graph(
        None,
        Some(ScheduleHint::new(["rows"], Some(8)).unwrap()),
        None,
    );
    let diagnostics = ScheduleAnnotationPass::new().run(&mut g);
    assert_eq!(
        diagnostics,
        [Diagnostic {
            node: "mm".into(),
            op: OpKind::Matmul,
            kind: DiagnosticKind::Advisory { parallelism: 8 },
        }]
    );
    assert_eq!(
        diagnostics[0].to_string(),
        "node \"mm\" (matmul): parallelism = 8 is advisory: stated in the header, read by no compiler; cores are chosen at run time"
    );
    assert_eq!(
        stamped(&g, "mm"),
        Some(ScheduleHint::new(["rows"], Some(8)).unwrap())
    );
}

#[test]
fn the_pass_is_idempotent() {
    let mut once = graph(
        Some(hint(&["heads", "seq"])),
        Some(ScheduleHint::new(["rows"], Some(8)).unwrap()),
        Some(hint(&["rows"])),
    );
    let pass = ScheduleAnnotationPass::new();
    let first = pass.run(&mut once);
    let mut twice = once.clone();
    let second = pass.run(&mut twice);
    assert_eq!(twice, once);
    assert_eq!(second, first);
}

#[test]
fn the_pass_keeps_edges_ids_and_shapes() {
    let before = graph(Some(hint(&["heads"])), Some(hint(&["rows"])), None);
    let mut after = before.clone();
    core_passes(&mut after);
    assert_eq!(after.edges(), before.edges());
    for (a, b) in after.nodes().iter().zip(before.nodes()) {
        assert_eq!((a.id(), a.shape(), a.op()), (b.id(), b.shape(), b.op()));
    }
    assert_eq!(after.outputs(), before.outputs());
}

#[test]
fn layouts_are_recorded_on_the_inputs_attention_reads() {
    let mut g = graph(None, None, None);
    assert_eq!(TensorLayoutPass.run(&mut g), []);
    let layout = |id: &str| g.find(id).unwrap().metadata().get(LAYOUT_KEY).cloned();
    assert_eq!(layout("q"), Some(Attr::from("NHSD")));
    assert_eq!(layout("k"), Some(Attr::from("NHSD")));
    assert_eq!(layout("w"), None, "matmul operands carry no layout");
}

#[test]
fn a_conflicting_layout_keeps_the_first_and_says_so() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [1, 1, 4, 4]).unwrap();
    let a = b
        .sdpa(x, x, x, None, SdpaOptions::default())
        .finish()
        .unwrap();
    let c = b
        .conv2d(x, x, None, Conv2dOptions::default())
        .finish()
        .unwrap();
    b.output(a).unwrap();
    b.output(c).unwrap();
    let mut g = b.build().unwrap();
    let diagnostics = TensorLayoutPass.run(&mut g);
    assert_eq!(
        diagnostics,
        [
            Diagnostic {
                node: "x".into(),
                op: OpKind::Input,
                kind: DiagnosticKind::LayoutConflict {
                    kept: "NHSD".into(),
                    dropped: "NCHW".into()
                },
            },
            Diagnostic {
                node: "x".into(),
                op: OpKind::Input,
                kind: DiagnosticKind::LayoutConflict {
                    kept: "NHSD".into(),
                    dropped: "OIHW".into()
                },
            },
        ]
    );
    assert_eq!(
        g.find("x").unwrap().metadata().get(LAYOUT_KEY),
        Some(&Attr::from("NHSD"))
    );
}
