//! Where the real-model tests find the model file: `$SKAINET_MODEL`, else the file
//! `scripts/fetch_model.sh` fetches (`models/SmolLM2-135M-Instruct.Q4_1.gguf`).

use std::path::PathBuf;

/// The real model's file (which may not exist: each test says what to run then).
pub fn model_path() -> PathBuf {
    match std::env::var_os("SKAINET_MODEL") {
        Some(path) => PathBuf::from(path),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join("SmolLM2-135M-Instruct.Q4_1.gguf"),
    }
}
