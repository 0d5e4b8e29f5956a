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

#[allow(dead_code)] // the example's `main`, unused here
#[path = "../../examples/export.rs"]
mod export;

/// The `export` example's command line, run in-process (the example file is included as a
/// module: `cargo test --test hostile` builds no example binary to run).
mod export_cli {
    use super::export::{cli, Exit, MAX_VALUES};

    fn run(args: &[&str]) -> (Result<(), Exit>, String) {
        let mut stdout = Vec::new();
        let result = cli(args.iter().map(|a| a.to_string()), &mut stdout);
        (result, String::from_utf8(stdout).unwrap())
    }

    fn bad(args: &[&str]) -> String {
        match run(args) {
            (Err(Exit { code: 2, message }), out) => {
                assert_eq!(out, "", "nothing printed on a bad argument");
                assert!(!message.contains('\n'), "one line: {message:?}");
                message
            }
            other => panic!("{args:?}: expected exit 2, got {other:?}"),
        }
    }

    /// A fresh directory under the system's temp dir, removed when dropped.
    struct TempDir(std::path::PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("skainet-export-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            Self(dir)
        }

        fn arg(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn an_empty_out_directory_is_a_bad_argument() {
        assert_eq!(
            bad(&["--out", ""]),
            "--out: the directory must not be empty"
        );
    }

    #[test]
    fn sizes_whose_product_overflows_are_a_bad_argument() {
        let max = usize::MAX.to_string();
        let message = bad(&["--heads", &max, "--kv-heads", "1", "--out", "unused"]);
        assert_eq!(
            message,
            format!(
                "q [1, {max}, 5, 16] has more than {MAX_VALUES} values, the most this example writes"
            )
        );
    }

    #[test]
    fn sizes_too_large_to_allocate_are_refused_before_allocating() {
        let message = bad(&[
            "--heads",
            "8",
            "--kv-heads",
            "8",
            "--seq-q",
            "65536",
            "--seq-k",
            "65536",
            "--head-dim",
            "1024",
            "--out",
            "unused",
        ]);
        assert_eq!(
            message,
            format!(
                "q [1, 8, 65536, 1024] has more than {MAX_VALUES} values, the most this example writes"
            )
        );
    }

    #[test]
    fn heads_that_kv_heads_do_not_divide_are_a_bad_argument() {
        let message = bad(&["--heads", "8", "--kv-heads", "3", "--out", "unused"]);
        assert!(message.starts_with("node \"attn\": sdpa: "), "{message}");
    }

    #[test]
    fn an_unknown_flag_a_missing_value_and_a_non_number_are_bad_arguments() {
        assert_eq!(
            bad(&["--bogus"]),
            "unknown argument \"--bogus\" (see --help)"
        );
        assert_eq!(bad(&["--heads"]), "--heads needs a value (see --help)");
        assert_eq!(
            bad(&["--heads", "-1"]),
            "--heads: \"-1\" is not a number (see --help)"
        );
        assert_eq!(bad(&["--causal"]), "--out is required (see --help)");
    }

    #[test]
    fn an_out_path_that_is_a_file_is_a_failure_with_one_line() {
        let dir = TempDir::new("file");
        std::fs::write(&dir.0, b"not a directory").unwrap();
        let (result, out) = run(&["--out", dir.arg()]);
        let Err(Exit { code: 1, message }) = result else {
            panic!("expected exit 1, got {result:?}");
        };
        assert!(
            message.starts_with(&format!("cannot create {}: ", dir.arg())),
            "{message}"
        );
        assert!(!message.contains('\n'));
        assert_eq!(out, "");
        std::fs::remove_file(&dir.0).unwrap();
    }

    #[test]
    fn a_good_export_writes_its_files_and_prints_their_paths() {
        let dir = TempDir::new("good");
        let (result, out) = run(&["--causal", "--mask", "--out", dir.arg()]);
        assert_eq!(result, Ok(()));
        let d = dir.arg();
        let first = out.lines().next().unwrap();
        assert_eq!(
            first,
            format!("wrote {d}/model.mlir, the inputs and {d}/expected.npy; check with:")
        );
        for file in [
            "model.mlir",
            "q.npy",
            "k.npy",
            "v.npy",
            "mask.npy",
            "expected.npy",
        ] {
            assert!(dir.0.join(file).is_file(), "{file}");
        }
    }

    #[test]
    fn help_prints_the_usage_and_succeeds() {
        let (result, out) = run(&["--help"]);
        assert_eq!(result, Ok(()));
        assert!(out.starts_with("usage: export --heads H"), "{out}");
    }
}

#[cfg(feature = "model")]
// `dead_code`: the example's `main`, unused here. `duplicate_mod`: both examples include
// `examples/common/exit.rs` as a module of their own (each is a crate of its own); here they
// meet in one crate.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../examples/export_model.rs"]
mod export_model;

/// The `export_model` example's command line, run in-process: every bad argument is exit 2
/// with one line and nothing printed. The ones that need the model's block count or its
/// prompt read the real model file (`scripts/fetch_model.sh`), and run no forward pass.
#[cfg(feature = "model")]
mod export_model_cli {
    use super::export_model::{cli, Exit};

    fn run(args: &[&str]) -> (Result<(), Exit>, String) {
        let mut stdout = Vec::new();
        let result = cli(args.iter().map(|a| a.to_string()), &mut stdout);
        (result, String::from_utf8(stdout).unwrap())
    }

    fn bad(args: &[&str]) -> String {
        match run(args) {
            (Err(Exit { code: 2, message }), out) => {
                assert_eq!(out, "", "nothing printed on a bad argument");
                assert!(!message.contains('\n'), "one line: {message:?}");
                message
            }
            other => panic!("{args:?}: expected exit 2, got {other:?}"),
        }
    }

    /// The real model's path, which must exist: `$SKAINET_MODEL`, else the file
    /// `scripts/fetch_model.sh` fetches (as `tests/common/model_file.rs` says).
    fn model() -> String {
        let path = match std::env::var_os("SKAINET_MODEL") {
            Some(path) => std::path::PathBuf::from(path),
            None => std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        };
        assert!(
            path.is_file(),
            "{} is missing: run scripts/fetch_model.sh",
            path.display()
        );
        path.to_str().unwrap().to_string()
    }

    #[test]
    fn an_unknown_flag_a_missing_value_and_a_non_number_are_bad_arguments() {
        assert_eq!(
            bad(&["--bogus"]),
            "unknown argument \"--bogus\" (see --help)"
        );
        assert_eq!(bad(&["--layers"]), "--layers needs a value (see --help)");
        assert_eq!(
            bad(&["--prefix", "-3"]),
            "--prefix: \"-3\" is not a number (see --help)"
        );
        assert_eq!(
            bad(&["--layers", "two"]),
            "--layers: \"two\" is not a number (see --help)"
        );
    }

    #[test]
    fn model_prefix_and_out_are_required_and_out_not_empty() {
        assert_eq!(
            bad(&["--prefix", "4", "--out", "unused"]),
            "--model is required (see --help)"
        );
        assert_eq!(
            bad(&["--model", "m.gguf", "--out", "unused"]),
            "--prefix is required (see --help)"
        );
        assert_eq!(
            bad(&["--model", "m.gguf", "--prefix", "4"]),
            "--out is required (see --help)"
        );
        assert_eq!(
            bad(&["--model", "m.gguf", "--out", ""]),
            "--out: the directory must not be empty"
        );
    }

    #[test]
    fn zero_layers_is_a_bad_argument() {
        let args = ["--model", "m.gguf", "--layers", "0", "--prefix", "1"];
        assert_eq!(
            bad(&[&args[..], &["--out", "unused"]].concat()),
            "--layers: a model needs at least 1 block"
        );
    }

    #[test]
    fn more_layers_than_the_model_has_is_a_bad_argument() {
        let model = model();
        let args = ["--model", &model, "--layers", "31", "--prefix", "1"];
        assert_eq!(
            bad(&[&args[..], &["--out", "unused"]].concat()),
            "--layers 31: the model has 30 blocks"
        );
    }

    #[test]
    fn a_prefix_the_prompt_has_no_next_token_for_is_a_bad_argument() {
        let model = model();
        let message = bad(&["--model", &model, "--prefix", "100000", "--out", "unused"]);
        assert!(
            message.starts_with("--prefix 100000: the fixed prompt has "),
            "{message}"
        );
        assert!(message.contains("so the prefix is at most "), "{message}");
    }

    #[test]
    fn a_file_that_is_no_model_is_a_failure_with_one_line() {
        let path = std::env::temp_dir().join(format!("skainet-not-a-model-{}", std::process::id()));
        std::fs::write(&path, b"not a gguf file").unwrap();
        let args = ["--model", path.to_str().unwrap(), "--prefix", "1"];
        let (result, out) = run(&[&args[..], &["--out", "unused"]].concat());
        std::fs::remove_file(&path).unwrap();
        let Err(Exit { code: 1, message }) = result else {
            panic!("expected exit 1, got {result:?}");
        };
        assert!(!message.contains('\n'), "{message}");
        assert_eq!(out, "");
    }

    #[test]
    fn help_prints_the_usage_and_succeeds() {
        let (result, out) = run(&["--help"]);
        assert_eq!(result, Ok(()));
        assert!(out.starts_with("usage: export_model --model PATH"), "{out}");
    }
}
