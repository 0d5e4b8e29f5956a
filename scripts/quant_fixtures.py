#!/usr/bin/env python3
"""Writes the decode fixtures of tests/quant_decode.rs: small blocks of every block format this
crate reads, with the f32 bits the `gguf` Python package decodes them to.

The exact command that produced the committed fixtures (from the repository root; the script
makes its own virtual environment outside the repository and installs gguf and numpy there):

    python3 scripts/quant_fixtures.py

Options: --venv DIR (default: $TMPDIR/skainet-quant-venv, or /work/scratch/quant-venv when
/work/scratch exists), --out DIR (default: tests/fixtures/quant), --seed N (default 20250101).
The committed files were made with gguf 0.19.0 and numpy 2.4.6 (printed on each file's
second line).

Format (one file per type, `<type>.txt`, type as ggml names it): lines starting with `#` are
comments; every other line is one case,

    <label> <values> <bytes> <bits>

`<bytes>` the row's stored bytes in hex (two digits a byte, in file order), `<bits>` the
decoded values' f32 bit patterns, eight hex digits each (most significant first), back to back.
Cases: random blocks, edge values (zero, negative and subnormal f16 scales, the largest and
smallest quants, infinite and NaN scales; for F16/BF16/F32 rows every special value), and for
the types the package can quantize, blocks quantized from random floats.
"""
import argparse
import os
import subprocess
import sys
import venv

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def default_venv():
    if os.path.isdir("/work/scratch"):
        return "/work/scratch/quant-venv"
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), "skainet-quant-venv")


def ensure_venv(path):
    """Re-runs this script inside a venv at `path` holding gguf and numpy."""
    py = os.path.join(path, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(path):
        return
    if not os.path.exists(py):
        venv.create(path, with_pip=True)
    subprocess.check_call([py, "-m", "pip", "install", "-q", "gguf", "numpy"])
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default=default_venv())
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "quant"))
    ap.add_argument("--seed", type=int, default=20250101)
    args = ap.parse_args()
    ensure_venv(args.venv)

    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as T
    from gguf.quants import dequantize, quantize

    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)

    def f16(x):
        return np.array([x], dtype=np.float16).view(np.uint16)[0]

    def h16(bits):
        return int(bits).to_bytes(2, "little")

    def rand_bytes(n):
        return rng.integers(0, 256, n, dtype=np.uint8).tobytes()

    def normal_half():
        return h16(f16(rng.uniform(0.001, 0.2) * rng.choice([-1, 1])))

    # Scales of the edge cases: zero, negative zero, negative, subnormals, the largest half,
    # infinities and NaNs (quiet and signalling).
    edge_scales = {
        "zero": 0x0000,
        "negzero": 0x8000,
        "negative": 0xB266,
        "subnormal_min": 0x0001,
        "subnormal_max": 0x03FF,
        "subnormal_neg": 0x8200,
        "largest": 0x7BFF,
        "inf": 0x7C00,
        "neginf": 0xFC00,
        "qnan": 0x7E00,
        "snan": 0x7C01,
    }

    def layouts():
        """Per type: (block bytes, function(scale bits or None, quant fill or None) -> block)."""

        def q8_0(d, fill):
            qs = rand_bytes(32) if fill is None else bytes([fill]) * 32
            return h16(d) + qs

        def q4_0(d, fill):
            qs = rand_bytes(16) if fill is None else bytes([fill]) * 16
            return h16(d) + qs

        def q4_1(d, fill):
            qs = rand_bytes(16) if fill is None else bytes([fill]) * 16
            return h16(d) + normal_half() + qs

        def q5_0(d, fill):
            rest = rand_bytes(20) if fill is None else bytes([fill]) * 20
            return h16(d) + rest

        def q5_1(d, fill):
            rest = rand_bytes(20) if fill is None else bytes([fill]) * 20
            return h16(d) + normal_half() + rest

        def q4_k(d, fill):
            rest = rand_bytes(140) if fill is None else bytes([fill]) * 140
            return h16(d) + normal_half() + rest

        def q5_k(d, fill):
            rest = rand_bytes(172) if fill is None else bytes([fill]) * 172
            return h16(d) + normal_half() + rest

        def q6_k(d, fill):
            rest = rand_bytes(208) if fill is None else bytes([fill]) * 208
            return rest + h16(d)

        return {
            T.Q8_0: (32, q8_0),
            T.Q4_0: (32, q4_0),
            T.Q4_1: (32, q4_1),
            T.Q5_0: (32, q5_0),
            T.Q5_1: (32, q5_1),
            T.Q4_K: (256, q4_k),
            T.Q5_K: (256, q5_k),
            T.Q6_K: (256, q6_k),
        }

    def line(qtype, label, values, raw):
        data = np.frombuffer(raw, dtype=np.uint8)
        out = dequantize(data, qtype).reshape(-1)
        assert out.dtype == np.float32 and out.size == values, (label, out.shape)
        bits = "".join(f"{b:08x}" for b in out.view(np.uint32))
        return f"{label} {values} {raw.hex()} {bits}"

    header = [
        "# Generated by scripts/quant_fixtures.py (python3 scripts/quant_fixtures.py);",
        f"# gguf {pkg_version('gguf')}, "
        f"numpy {np.__version__}, seed {args.seed}. Do not edit by hand.",
        "# <label> <values> <bytes hex> <decoded f32 bits, 8 hex digits each>",
    ]

    for qtype, (block_len, make) in layouts().items():
        lines = list(header)
        small = block_len == 32
        # Random blocks: a row of several.
        raw = b"".join(make(f16(rng.uniform(0.001, 0.2)), None) for _ in range(3 if small else 2))
        lines.append(line(qtype, "random", len(raw) // len(make(0, 0)) * block_len, raw))
        if small:
            for name, d in edge_scales.items():
                lines.append(line(qtype, f"scale_{name}", block_len, make(d, None)))
            lines.append(line(qtype, "quants_max", block_len, make(f16(0.125), 0xFF)))
            lines.append(line(qtype, "quants_min", block_len, make(f16(-0.125), 0x00)))
            lines.append(line(qtype, "quants_alternating", block_len, make(f16(1.5), 0xA5)))
        else:
            # 256-value blocks are large: the edges share rows.
            raw = make(edge_scales["negzero"], None) + make(edge_scales["subnormal_min"], None)
            lines.append(line(qtype, "scales_zero_subnormal", 2 * block_len, raw))
            raw = make(edge_scales["negative"], 0xFF) + make(edge_scales["subnormal_neg"], 0x00)
            lines.append(line(qtype, "negative_scales_quants_max_min", 2 * block_len, raw))
            raw = make(edge_scales["inf"], None) + make(edge_scales["qnan"], 0xA5)
            lines.append(line(qtype, "scales_inf_nan", 2 * block_len, raw))
        if qtype in (T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
            xs = rng.standard_normal(2 * block_len).astype(np.float32)
            xs[3] = 0.0
            raw = quantize(xs.reshape(1, -1), qtype).tobytes()
            lines.append(line(qtype, "quantized", 2 * block_len, raw))
            zeros = np.zeros((1, block_len), dtype=np.float32)
            lines.append(line(qtype, "quantized_zeros", block_len, quantize(zeros, qtype).tobytes()))
        write(args.out, qtype.name.lower().replace("_k", "_K"), lines)

    # Float rows: every special value, then random ones.
    specials16 = [0x0000, 0x8000, 0x3C00, 0xBC00, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF,
                  0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7D55, 0x7FFF,
                  0x3555, 0x1234]
    for qtype, specials in ((T.F16, specials16), (T.BF16, [0x0000, 0x8000, 0x3F80, 0xBF80,
                            0x0001, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0,
                            0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0x3EAB, 0x1234])):
        lines = list(header)
        raw = b"".join(h16(s) for s in specials)
        lines.append(line(qtype, "specials", len(specials), raw))
        raw = rand_bytes(2 * 40)
        lines.append(line(qtype, "random", 40, raw))
        xs = rng.standard_normal(16).astype(np.float32)
        if qtype == T.BF16:
            raw = quantize(xs.reshape(1, -1), qtype).tobytes()
        else:
            raw = xs.astype(np.float16).tobytes()
        lines.append(line(qtype, "quantized", 16, raw))
        write(args.out, qtype.name.lower(), lines)

    lines = list(header)
    f32s = np.array([0.0, -0.0, 1.0, -2.5, 1e-45, 3.4e38, np.inf, -np.inf], dtype=np.float32)
    raw = f32s.tobytes() + bytes.fromhex("0000c07f") + bytes.fromhex("0100807f")
    lines.append(line(T.F32, "specials", 10, raw))
    write(args.out, "f32", lines)


def pkg_version(name):
    from importlib.metadata import version

    return version(name)


def write(out, name, lines):
    path = os.path.join(out, f"{name}.txt")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
