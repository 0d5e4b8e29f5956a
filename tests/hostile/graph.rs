//! The graph builder against foreign handles, hint names that are not identifiers and
//! shapes no tensor can have: each is an `Err` naming what was wrong, never a graph wired to
//! the wrong node or a header that no MLIR parser reads.

use skainet_schedule::graph::{
    Attr, AttrMap, GraphBuilder, GraphError, HintError, OpKind, ScheduleHint, Value,
};
use skainet_schedule::ShapeError;

/// A builder with the inputs `x [2, 2]` and `w [2, 2]`, and their handles.
fn two_inputs() -> (GraphBuilder, Value, Value) {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [2, 2]).unwrap();
    let w = b.input("w", [2, 2]).unwrap();
    (b, x, w)
}

#[test]
fn an_operand_from_another_builder_is_refused_even_at_an_index_in_range() {
    let (_, ax, _) = two_inputs();
    let (mut b, bx, bw) = two_inputs();
    assert_eq!(ax.index(), bx.index());
    assert_ne!(ax, bx);
    assert_eq!(
        b.matmul(ax, bw).id("mm").finish(),
        Err(GraphError::UnknownValue {
            node: "mm".into(),
            index: 0
        })
    );
}

#[test]
fn an_output_from_another_builder_is_refused_even_at_an_index_in_range() {
    let (_, _, aw) = two_inputs();
    let (mut b, _, _) = two_inputs();
    assert_eq!(
        b.output(aw),
        Err(GraphError::UnknownValue {
            node: "<output>".into(),
            index: 1
        })
    );
}

#[test]
fn a_graph_and_a_builder_know_no_shape_or_node_for_a_foreign_handle() {
    let (a, ax, _) = two_inputs();
    let (mut b, bx, _) = two_inputs();
    assert_eq!(b.shape(ax), None);
    b.output(bx).unwrap();
    let mut graph = b.build().unwrap();
    assert!(graph.node(ax).is_none());
    assert!(graph.metadata_mut(ax).is_none());
    assert_eq!(graph.node(bx).map(|n| n.id()), Some("x"));
    assert_eq!(a.shape(ax), Some(&[2usize, 2][..]));
}

#[test]
fn a_hint_dim_that_is_not_an_identifier_is_refused() {
    assert_eq!(
        ScheduleHint::parallel(["batch", "rows\"]}"]),
        Err(HintError::InvalidDim {
            index: 1,
            dim: "rows\"]}".into()
        })
    );
    assert_eq!(
        ScheduleHint::parallel(["batch", "rows\"]}"])
            .unwrap_err()
            .to_string(),
        "schedule hint: parallel_dims[1] = \"rows\\\"]}\" is not an identifier ([A-Za-z_][A-Za-z0-9_]*)"
    );
}

#[test]
fn a_hint_dim_with_surrounding_spaces_or_dashes_is_refused() {
    for (dim, index) in [
        (" heads", 0),
        ("out-channels", 0),
        ("0rows", 0),
        ("héads", 0),
    ] {
        assert_eq!(
            ScheduleHint::parallel([dim]),
            Err(HintError::InvalidDim {
                index,
                dim: dim.into()
            }),
            "{dim:?}"
        );
    }
}

#[test]
fn a_hint_map_with_a_non_identifier_dim_reads_back_as_none() {
    let mut map = AttrMap::new();
    map.insert(
        "parallel_dims".into(),
        Attr::List(vec![Attr::from("rows} {")]),
    );
    assert_eq!(ScheduleHint::from_map(&map), None);
}

#[test]
fn dims_that_differ_only_in_case_are_one_dim_named_twice() {
    assert_eq!(
        ScheduleHint::parallel(["heads", "HEADS"]),
        Err(HintError::DuplicateDim {
            dim: "HEADS".into()
        })
    );
}

fn too_large(node: &str, op: OpKind, shape: Vec<usize>) -> GraphError {
    GraphError::BadShape {
        node: node.into(),
        op,
        error: ShapeError::TooLarge {
            op: op.name(),
            shapes: vec![shape],
        },
    }
}

#[test]
fn an_input_with_more_elements_than_any_tensor_is_refused() {
    let mut b = GraphBuilder::new();
    assert_eq!(
        b.input("x", [usize::MAX, 2]),
        Err(too_large("x", OpKind::Input, vec![usize::MAX, 2]))
    );
    // The name was not taken by the refused input.
    assert!(b.input("x", [2, 2]).is_ok());
}

#[test]
fn an_input_one_element_over_the_limit_is_refused_and_at_the_limit_accepted() {
    let max = skainet_schedule::shape::MAX_ELEMENTS;
    let mut b = GraphBuilder::new();
    assert!(b.input("at", [max]).is_ok());
    assert_eq!(
        b.input("over", [max + 1]),
        Err(too_large("over", OpKind::Input, vec![max + 1]))
    );
}

#[test]
fn an_empty_input_with_an_absurd_dimension_is_refused() {
    let mut b = GraphBuilder::new();
    assert_eq!(
        b.input("x", [0, usize::MAX]),
        Err(too_large("x", OpKind::Input, vec![0, usize::MAX]))
    );
}

#[test]
fn a_reshape_to_an_absurd_shape_is_refused() {
    let mut b = GraphBuilder::new();
    let x = b.input("x", [0, 4]).unwrap();
    assert_eq!(
        b.reshape(x, [0, usize::MAX]).id("r").finish(),
        Err(too_large("r", OpKind::Reshape, vec![0, usize::MAX]))
    );
}

#[test]
fn the_too_large_message_names_the_input_and_its_shape() {
    let mut b = GraphBuilder::new();
    let err = b.input("x", [usize::MAX, 2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "node \"x\": input: shapes [[{}, 2]] need a tensor of more than {} f32 values",
            usize::MAX,
            skainet_schedule::shape::MAX_ELEMENTS
        )
    );
}
