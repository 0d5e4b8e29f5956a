#!/usr/bin/env python3
"""Writes a GGUF file of the proposal's scale: Llama-3.2-1B's shape with random weights.

    python scripts/scale_model.py --type Q4_1 --tokenizer SMOLLM2.gguf --out DIR/scale.Q4_1.gguf

16 blocks, width 2048, 32 query heads over 8 K/V heads of 64, FFN 8192, vocabulary 128256,
rope base 500000, the output head tied to the token embedding. The weights are seeded normal
draws (std 0.02, norms 1): the file measures speed and schedule parity (the same tokens under
every schedule), never text. `--type` is the projections' format (Q4_0, Q4_1, Q8_0, F16 or
BF16; the embedding, which is also the head, is Q8_0 as in the shipped file unless F16/BF16).
K-quant files are made from the Q8_0 file by llama.cpp's `llama-quantize --allow-requantize`.

The vocabulary is the tokenizer of `--tokenizer` (a GGUF file, e.g. the SmolLM2 model the
tests read) padded with control tokens `<|reserved_N|>` to 128256 entries, so that both this
crate and llama.cpp load the file. Needs numpy and PyPI's `gguf` (which quantizes itself);
scripts/bench_report.sh runs it in a scratch venv outside the repository.
"""

import argparse
import sys

import numpy as np

BLOCKS, DIM, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 16, 2048, 32, 8, 64, 8192, 128256
TYPES = ("Q4_0", "Q4_1", "Q8_0", "F16", "BF16")


def main() -> int:
    import gguf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--type", choices=TYPES, required=True)
    ap.add_argument("--tokenizer", required=True, help="a GGUF file whose tokenizer to pad")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    src = gguf.GGUFReader(a.tokenizer)
    field = lambda k: src.fields[k].contents()  # noqa: E731
    tokens = list(field("tokenizer.ggml.tokens"))
    types = list(field("tokenizer.ggml.token_type"))
    if len(tokens) > VOCAB:
        print(f"scale_model: {a.tokenizer} has {len(tokens)} tokens, more than {VOCAB}", file=sys.stderr)
        return 1
    pad = VOCAB - len(tokens)
    tokens += [f"<|reserved_{i}|>" for i in range(pad)]
    types += [int(gguf.TokenType.CONTROL)] * pad

    qtype = gguf.GGMLQuantizationType[a.type]
    embd_type = qtype if a.type in ("F16", "BF16") else gguf.GGMLQuantizationType.Q8_0
    file_type = {
        "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
        "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
        "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "F16": gguf.LlamaFileType.MOSTLY_F16,
        "BF16": gguf.LlamaFileType.MOSTLY_BF16,
    }[a.type]

    w = gguf.GGUFWriter(a.out, "llama")
    w.add_name("random weights in Llama-3.2-1B's shape")
    w.add_block_count(BLOCKS)
    w.add_context_length(8192)
    w.add_embedding_length(DIM)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_file_type(file_type)
    w.add_tokenizer_model(field("tokenizer.ggml.model"))
    w.add_tokenizer_pre(field("tokenizer.ggml.pre"))
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(list(field("tokenizer.ggml.merges")))
    w.add_bos_token_id(int(field("tokenizer.ggml.bos_token_id")))
    w.add_eos_token_id(int(field("tokenizer.ggml.eos_token_id")))
    w.add_add_bos_token(False)

    rng = np.random.default_rng(a.seed)

    def matrix(name: str, rows: int, cols: int, ty) -> None:
        x = (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)
        if ty == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, x.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(x, ty), raw_dtype=ty)
        print(f"scale_model: {name} {rows}x{cols} {ty.name}", file=sys.stderr)

    def norm(name: str) -> None:
        w.add_tensor(name, np.ones(DIM, dtype=np.float32))

    matrix("token_embd.weight", VOCAB, DIM, embd_type)
    for b in range(BLOCKS):
        p = f"blk.{b}."
        norm(p + "attn_norm.weight")
        matrix(p + "attn_q.weight", HEADS * HEAD_DIM, DIM, qtype)
        matrix(p + "attn_k.weight", KV_HEADS * HEAD_DIM, DIM, qtype)
        matrix(p + "attn_v.weight", KV_HEADS * HEAD_DIM, DIM, qtype)
        matrix(p + "attn_output.weight", DIM, HEADS * HEAD_DIM, qtype)
        norm(p + "ffn_norm.weight")
        matrix(p + "ffn_gate.weight", FFN, DIM, qtype)
        matrix(p + "ffn_up.weight", FFN, DIM, qtype)
        matrix(p + "ffn_down.weight", DIM, FFN, qtype)
    norm("output_norm.weight")

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
