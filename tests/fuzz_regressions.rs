#![cfg(all(feature = "parallel", not(feature = "loom")))]
//! Every input saved under `fuzz/regressions/<target>/` replays through the checks of that
//! fuzz target (`fuzz/checks.rs`, the very code the targets run), so a crash fixed once stays
//! fixed without a nightly toolchain or libFuzzer. A new crash's input is added here together
//! with its fix.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

/// The files of `fuzz/<dir>/<target>/`, sorted.
fn inputs(dir: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(dir)
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `check` on every file; a panic names the file that caused it.
fn replay(files: &[PathBuf], check: fn(&[u8])) {
    for path in files {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(panic) = std::panic::catch_unwind(|| check(&bytes)) {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(not a string)");
            panic!("{} fails its check: {message}", path.display());
        }
    }
}

#[test]
fn npy_read_regressions_replay_cleanly() {
    let files = inputs("regressions", "npy_read");
    assert!(!files.is_empty(), "fuzz/regressions/npy_read is empty");
    replay(&files, checks::check_npy_read);
}

#[test]
fn graph_export_regressions_replay_cleanly() {
    let files = inputs("regressions", "graph_export");
    assert!(!files.is_empty(), "fuzz/regressions/graph_export is empty");
    replay(&files, checks::check_graph_export);
}

#[test]
fn kernel_shapes_regressions_replay_cleanly() {
    let files = inputs("regressions", "kernel_shapes");
    assert!(!files.is_empty(), "fuzz/regressions/kernel_shapes is empty");
    replay(&files, checks::check_kernel_shapes);
}

#[test]
fn gguf_parse_regressions_replay_cleanly() {
    let files = inputs("regressions", "gguf_parse");
    assert!(!files.is_empty(), "fuzz/regressions/gguf_parse is empty");
    replay(&files, checks::check_gguf_parse);
}
