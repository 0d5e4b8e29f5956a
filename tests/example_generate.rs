#![cfg(all(feature = "model", feature = "parallel", not(feature = "loom")))]
//! `examples/generate` on hostile files: each run exits with status 1, writes nothing to
//! stdout, and ends its stderr with one line, `generate: ` and the error the library itself
//! gives for the same file. Runs the example binary `cargo test` builds beside this test.

#[path = "common/gguf.rs"]
mod writer;

use std::path::{Path, PathBuf};
use std::process::Command;

use skainet_schedule::gguf::GgufFile;
use skainet_schedule::model::{Llama, Tokenizer};
use writer::{f32_data, GgufWriter, TensorSpec, Val};

/// The example, as `cargo test` builds it: `target/<profile>/examples/generate`.
fn generate() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // The test runs from `target/<profile>/deps/`.
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let bin = profile
        .join("examples")
        .join(format!("generate{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test --features model,parallel` builds it",
        bin.display()
    );
    bin
}

/// What the library says of the file at `path`: the first error of opening it, reading the
/// model, reading its tokenizer.
fn library_error(path: &Path) -> String {
    let file = match GgufFile::open(path) {
        Ok(file) => file,
        Err(e) => return e.to_string(),
    };
    if let Err(e) = Llama::from_gguf(file.gguf()) {
        return e.to_string();
    }
    match Tokenizer::from_gguf(file.gguf()) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{} is a model the library reads", path.display()),
    }
}

/// Runs the example on the file `bytes` (or on `path` itself when `bytes` is `None`) and
/// checks how it fails; returns the library's error.
fn refuses(name: &str, bytes: Option<&[u8]>) -> String {
    let want = refuses_with(name, bytes, &[]);
    // Read into huge pages instead of mapped: the same error.
    assert_eq!(refuses_with(name, bytes, &["--huge-pages"]), want, "{name}");
    want
}

/// [`refuses`] with `flags` added to the command line.
fn refuses_with(name: &str, bytes: Option<&[u8]>, flags: &[&str]) -> String {
    let path = std::env::temp_dir().join(format!("skainet-{}-{name}.gguf", std::process::id()));
    if let Some(bytes) = bytes {
        std::fs::write(&path, bytes).unwrap();
    }
    let out = Command::new(generate())
        .args(["--model".as_ref(), path.as_os_str()])
        .args(["--prompt", "hi", "--max-tokens", "1"])
        .args(flags)
        .output()
        .unwrap();
    let want = library_error(&path);
    if bytes.is_some() {
        std::fs::remove_file(&path).unwrap();
    }
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
    assert_eq!(out.stdout, b"", "{name}");
    assert!(!want.contains('\n'), "{name}: {want:?} is one line");
    assert_eq!(
        stderr.lines().last(),
        Some(&*format!("generate: {want}")),
        "{name}"
    );
    want
}

/// The metadata of a llama file of width 64: 4 heads over 2 K/V heads, 1 block.
fn llama_kvs(w: GgufWriter) -> GgufWriter {
    llama_heads(w, 4)
}

/// [`llama_kvs`] with `heads` query heads.
fn llama_heads(w: GgufWriter, heads: u32) -> GgufWriter {
    w.kv("general.architecture", Val::Str("llama".into()))
        .kv("llama.block_count", Val::U32(1))
        .kv("llama.embedding_length", Val::U32(64))
        .kv("llama.feed_forward_length", Val::U32(96))
        .kv("llama.attention.head_count", Val::U32(heads))
        .kv("llama.attention.head_count_kv", Val::U32(2))
        .kv("llama.context_length", Val::U32(128))
        .kv("llama.attention.layer_norm_rms_epsilon", Val::F32(1e-5))
}

fn embedding() -> TensorSpec {
    TensorSpec::new("token_embd.weight", &[64, 4], 0, f32_data(256))
}

#[test]
fn a_missing_file_is_exit_1_and_one_line_naming_it() {
    let e = refuses("missing", None);
    assert!(e.contains("skainet-") && e.contains("missing"), "{e}");
}

#[test]
fn a_truncated_file_is_exit_1_and_one_line() {
    let bytes = llama_kvs(GgufWriter::new(3)).tensor(embedding()).to_bytes();
    for cut in [3, 20, bytes.len() / 2, bytes.len() - 1] {
        let e = refuses(&format!("cut{cut}"), Some(&bytes[..cut]));
        assert!(!e.is_empty());
    }
}

#[test]
fn lying_counts_and_sizes_are_exit_1_and_one_line() {
    let w = llama_kvs(GgufWriter::new(3)).tensor(embedding());
    let lying_tensors = GgufWriter {
        tensor_count: Some(u64::MAX),
        ..w.clone()
    };
    let e = refuses("tensors", Some(&lying_tensors.to_bytes()));
    assert!(e.contains("tensor count 18446744073709551615"), "{e}");
    let lying_kvs = GgufWriter {
        kv_count: Some(1 << 40),
        ..w.clone()
    };
    let e = refuses("kvs", Some(&lying_kvs.to_bytes()));
    assert!(e.contains("metadata"), "{e}");
    let mut past_end = embedding();
    past_end.offset = Some(1 << 20);
    let bytes = llama_kvs(GgufWriter::new(3)).tensor(past_end).to_bytes();
    let e = refuses("offset", Some(&bytes));
    assert!(e.contains("token_embd.weight"), "{e}");
}

#[test]
fn bad_tensor_infos_are_exit_1_and_one_line() {
    let five_dims = TensorSpec::new("token_embd.weight", &[64, 4, 1, 1, 1], 0, f32_data(256));
    let e = refuses(
        "dims",
        Some(&llama_kvs(GgufWriter::new(3)).tensor(five_dims).to_bytes()),
    );
    assert!(e.contains("5 dimensions"), "{e}");
    let overflow = TensorSpec::new("token_embd.weight", &[u64::MAX, 3], 0, f32_data(4));
    let e = refuses(
        "overflow",
        Some(&llama_kvs(GgufWriter::new(3)).tensor(overflow).to_bytes()),
    );
    assert!(e.contains("token_embd.weight"), "{e}");
    let unknown = TensorSpec::new("token_embd.weight", &[64, 4], 99, f32_data(256));
    let e = refuses(
        "type",
        Some(&llama_kvs(GgufWriter::new(3)).tensor(unknown).to_bytes()),
    );
    assert!(e.contains("99"), "{e}");
}

#[test]
fn the_wrong_kind_of_model_is_exit_1_and_one_line() {
    let other = GgufWriter::new(3)
        .kv("general.architecture", Val::Str("gpt2".into()))
        .tensor(embedding());
    let e = refuses("arch", Some(&other.to_bytes()));
    assert!(e.contains("\"gpt2\""), "{e}");
    let wrong_type = GgufWriter::new(3)
        .kv("general.architecture", Val::U32(7))
        .tensor(embedding());
    let e = refuses("type", Some(&wrong_type.to_bytes()));
    assert!(e.contains("general.architecture"), "{e}");
    let heads = llama_heads(GgufWriter::new(3), 5).tensor(embedding());
    let e = refuses("heads", Some(&heads.to_bytes()));
    assert!(e.contains("head_count 5 does not divide"), "{e}");
    // Metadata for a block the file holds no tensors of.
    let e = refuses(
        "blocks",
        Some(&llama_kvs(GgufWriter::new(3)).tensor(embedding()).to_bytes()),
    );
    assert!(e.contains("blk.0."), "{e}");
}
