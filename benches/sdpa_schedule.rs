//! The attention grid of the original proposal: heads {8, 32} × Sk {128, 1024, 4096} × Sq {1, 64}, b = 1, hd = 64,
//! causal — the fast kernel under `Sequential`, `hardware()` (feature `parallel`) and
//! `RayonSchedule` (feature `rayon`), against a plain scalar kernel in the proposal's loop order.
//!
//! `cargo bench --features parallel,rayon --bench sdpa_schedule [-- FILTER]`; ids read
//! `sdpa/h{heads}_sk{Sk}_sq{Sq}/{scalar,sequential,hardware,rayon}`.
//!
//! Read against `benches/peak.rs`: `sdpa_peak/sq64_hd64/{portable,native}/sk{Sk}` counts
//! multiply-adds (`2·Sq·Sk·hd` per head, the causal keys it hides included, as the kernel's
//! work threshold counts them), so its throughput over `peak/one_core/{mul_add,fma}` is the share
//! of one core's peak; `sdpa_decode/sq1_hd64_sk{Sk}/{portable,native}` counts the bytes of K and V
//! (64 MiB and more, above the last-level cache), read against `peak/read_bandwidth_one_core`:
//! its `sum` (128 MiB) for `sk16384` (64 MiB) and `sk32768` (128 MiB, the size of `sum`
//! itself), its `sum_256MiB` for `sk65536` (256 MiB: each size has a stream of its own size,
//! since the 32 MiB L3 serves part of a smaller one);
//! `sdpa_decode_gqa/sq1_hd64_h32_kv8_sk16384/{portable,native}` the same with four query heads
//! per K/V head (`..._sk512`: 2 MiB, in cache, the arithmetic's ceiling), and `…_h24_kv8_…`
//! with three. Each decode group also holds `stream`, a plain sum over the same K and V buffers
//! in the same run: the ratio to it is the one to read, with the noise of the minutes it ran
//! in. `sdpa_decode_huge/…` and
//! `sdpa_decode_gqa_huge/…` are the same steps with K and V in memory advised for transparent
//! huge pages (as `KvCache::with_huge_pages` allocates), read against `peak`'s `…_huge` streams.
//! Both run under `Sequential`, one core; with `parallel`, each decode group also holds
//! `{portable,native}_hardware`, the same step under `hardware()` (two tasks here), beside
//! `stream_two_cores`, two cores streaming half of each of the same buffers at once (read
//! against `peak/read_bandwidth_two_cores` as well).
//! `sdpa_modes/h{heads}_sk{Sk}_sq64/{mode}_{schedule}`
//! (mode `portable` or `native`, schedule `sequential` or `hardware`) is the grid's prefill
//! half in both modes, to hold against another library (XLA).

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skainet_schedule::{scaled_dot_product_attention, SdpaOptions};
use skainet_schedule::{scaled_dot_product_attention_with, KernelConfig, Precision, Sequential};
use skainet_schedule::{Schedule, Tensor};

use common::{schedules, tensor, tensor_in_huge_pages};

const HD: usize = 64;

/// The baseline: the proposal's scalar loop, one element at a time — `q·k` dot products, a softmax
/// with libm's `expf`, then each output element as a sum over the keys.
fn scalar_sdpa(q: &Tensor, k: &Tensor, v: &Tensor, causal: bool) -> Vec<f32> {
    let [b, heads, sq, hd] = *q.shape() else {
        unreachable!()
    };
    let [_, kv_heads, sk, _] = *k.shape() else {
        unreachable!()
    };
    let (q, k, v) = (q.data(), k.data(), v.data());
    let scale = 1.0 / (hd as f32).sqrt();
    let mut out = vec![0.0f32; b * heads * sq * hd];
    let mut scores = vec![0.0f32; sk];
    for bi in 0..b {
        for h in 0..heads {
            let kvh = h / (heads / kv_heads);
            let qb = ((bi * heads + h) * sq) * hd;
            let kb = ((bi * kv_heads + kvh) * sk) * hd;
            for i in 0..sq {
                let mut max = f32::NEG_INFINITY;
                for j in 0..sk {
                    let mut dot = 0.0f32;
                    for d in 0..hd {
                        dot += q[qb + i * hd + d] * k[kb + j * hd + d];
                    }
                    let mut s = dot * scale;
                    if causal && j > i + sk - sq {
                        s = f32::NEG_INFINITY;
                    }
                    scores[j] = s;
                    if s > max {
                        max = s;
                    }
                }
                let mut sum = 0.0f32;
                for s in scores.iter_mut() {
                    *s = libm::expf(*s - max);
                    sum += *s;
                }
                for d in 0..hd {
                    let mut acc = 0.0f32;
                    for j in 0..sk {
                        acc += scores[j] * v[kb + j * hd + d];
                    }
                    out[qb + i * hd + d] = acc / sum;
                }
            }
        }
    }
    out
}

fn bench_grid(c: &mut Criterion) {
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    let schedules = schedules();
    for heads in [8usize, 32] {
        for sk in [128usize, 1024, 4096] {
            for sq in [1usize, 64] {
                let q = tensor(vec![1, heads, sq, HD], 1);
                let k = tensor(vec![1, heads, sk, HD], 2);
                let v = tensor(vec![1, heads, sk, HD], 3);
                let mut group = c.benchmark_group(format!("sdpa/h{heads}_sk{sk}_sq{sq}"));
                group
                    .sample_size(10)
                    .warm_up_time(Duration::from_millis(300))
                    .measurement_time(Duration::from_secs(1));
                group.bench_function("scalar", |bench| {
                    bench.iter(|| scalar_sdpa(black_box(&q), black_box(&k), black_box(&v), true))
                });
                for (name, schedule) in &schedules {
                    group.bench_function(*name, |bench| {
                        bench.iter(|| {
                            scaled_dot_product_attention(
                                black_box(&q),
                                black_box(&k),
                                black_box(&v),
                                None,
                                &options,
                                schedule.as_ref(),
                            )
                            .expect("valid shapes")
                        })
                    });
                }
                group.finish();
            }
        }
    }
}

/// Both precision modes, one group per shape so their ratio comes from one run.
fn modes() -> [(&'static str, KernelConfig); 2] {
    [
        ("portable", KernelConfig::selected()),
        (
            "native",
            KernelConfig::selected().with_precision(Precision::Native),
        ),
    ]
}

/// One head of prefill attention (Sq = 64, hd = 64, causal) from Sk = 1024 to 65 536 under
/// `Sequential`: the kernel's share of one core's arithmetic peak, and how it holds up once K
/// and V leave the caches.
fn bench_peak(c: &mut Criterion) {
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    let sq = 64;
    let mut group = c.benchmark_group("sdpa_peak/sq64_hd64");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    for sk in [1024usize, 2048, 4096, 65_536] {
        let q = tensor(vec![1, 1, sq, HD], 1);
        let k = tensor(vec![1, 1, sk, HD], 2);
        let v = tensor(vec![1, 1, sk, HD], 3);
        group.throughput(Throughput::Elements((2 * sq * sk * HD) as u64));
        for (name, config) in &modes() {
            group.bench_function(format!("{name}/sk{sk}"), |bench| {
                bench.iter(|| attend(config, [&q, &k, &v], &options, &Sequential))
            });
        }
    }
    group.finish();
}

/// The grid's prefill shapes (Sq = 64) in both precision modes under `Sequential` and (with
/// `parallel`) `hardware()`: the figures to hold against another library on one and on every
/// core. Ids read `sdpa_modes/h{heads}_sk{Sk}_sq64/{portable,native}_{sequential,hardware}`.
fn bench_modes(c: &mut Criterion) {
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    let schedules: Vec<_> = schedules()
        .into_iter()
        .filter(|(name, _)| *name != "rayon")
        .collect();
    for heads in [8usize, 32] {
        for sk in [128usize, 1024, 4096] {
            let q = tensor(vec![1, heads, 64, HD], 1);
            let k = tensor(vec![1, heads, sk, HD], 2);
            let v = tensor(vec![1, heads, sk, HD], 3);
            let mut group = c.benchmark_group(format!("sdpa_modes/h{heads}_sk{sk}_sq64"));
            group
                .sample_size(10)
                .warm_up_time(Duration::from_millis(300))
                .measurement_time(Duration::from_secs(1))
                .throughput(Throughput::Elements((2 * heads * 64 * sk * HD) as u64));
            for (mode, config) in &modes() {
                for (name, schedule) in &schedules {
                    group.bench_function(format!("{mode}_{name}"), |bench| {
                        bench.iter(|| attend(config, [&q, &k, &v], &options, schedule.as_ref()))
                    });
                }
            }
            group.finish();
        }
    }
}

/// One attention call as the benches time it: `q`, `k` and `v` through `black_box`, no mask.
fn attend(
    config: &KernelConfig,
    [q, k, v]: [&Tensor; 3],
    options: &SdpaOptions,
    on: &dyn Schedule,
) -> Tensor {
    scaled_dot_product_attention_with(
        config,
        black_box(q),
        black_box(k),
        black_box(v),
        None,
        options,
        on,
    )
    .expect("valid shapes")
}

/// The sum of a tensor's values: one pass over its bytes, the read a decode step cannot beat
/// (`common::stream_sum`, as `benches/peak.rs` streams).
fn stream_sum(t: &Tensor) -> f32 {
    common::stream_sum(t.data())
}

/// One decode group `name`: a step (Sq = 1) of `heads` query heads over `kv_heads` K/V heads
/// of `sk` keys under `Sequential` (and `hardware()`, with `parallel`), in bytes of K and V per
/// second (each read once at best), next to `stream`, a plain read of the same K and V in the
/// same run (and `stream_two_cores`, two cores reading them at once).
fn decode_group(
    c: &mut Criterion,
    name: String,
    heads: usize,
    kv_heads: usize,
    sk: usize,
    pages: Pages,
) {
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    let q = tensor(vec![1, heads, 1, HD], 1);
    let kv = match pages {
        Pages::Small => tensor,
        Pages::Huge => tensor_in_huge_pages,
    };
    let k = kv(vec![1, kv_heads, sk, HD], 2);
    let v = kv(vec![1, kv_heads, sk, HD], 3);
    let bytes = 2 * kv_heads * sk * HD * 4;
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("stream", |bench| {
        bench.iter(|| stream_sum(black_box(&k)) + stream_sum(black_box(&v)))
    });
    // `hardware()` (feature `parallel`), and beside it, over K and V from memory, two cores'
    // stream over the same buffers, each core streaming half of each (in cache a scoped
    // thread's start would outweigh the few microseconds of the stream).
    let schedules: Vec<_> = schedules()
        .into_iter()
        .filter(|(name, _)| matches!(*name, "sequential" | "hardware"))
        .collect();
    if schedules.len() > 1 && bytes >= 64 << 20 {
        let (k, v) = (k.data(), v.data());
        let two = |bench: &mut criterion::Bencher| {
            bench.iter(|| common::stream_sum_two_cores(&[black_box(k), black_box(v)]))
        };
        group.bench_function("stream_two_cores", two);
    }
    for (on_name, on) in &schedules {
        for (mode, config) in &modes() {
            let name = match *on_name {
                "sequential" => mode.to_string(),
                _ => format!("{mode}_{on_name}"),
            };
            group.bench_function(name, |bench| {
                bench.iter(|| attend(config, [&q, &k, &v], &options, on.as_ref()))
            });
        }
    }
    group.finish();
}

/// Where a decode group's K and V live: pages of 4 KiB, or memory advised for transparent huge
/// pages (`Tensor::zeros_in_huge_pages`, as `KvCache::with_huge_pages` allocates), whose group
/// names end in `_huge`.
#[derive(Clone, Copy)]
enum Pages {
    Small,
    Huge,
}

impl Pages {
    fn suffix(self) -> &'static str {
        match self {
            Pages::Small => "",
            Pages::Huge => "_huge",
        }
    }
}

/// A decode step over 8 heads of K and V larger than the last-level cache (64, 128 and 256 MiB),
/// against one core's read bandwidth, in both kinds of pages.
fn bench_decode(c: &mut Criterion) {
    for pages in [Pages::Small, Pages::Huge] {
        for sk in [16_384usize, 32_768, 65_536] {
            let name = format!("sdpa_decode{}/sq1_hd64_sk{sk}", pages.suffix());
            decode_group(c, name, 8, 8, sk, pages);
        }
    }
}

/// A grouped-query decode step (32 query heads on 8 K/V heads) over K and V of 64 MiB, and
/// over 2 MiB (`sk512`, inside the last-level cache): the arithmetic's own rate, the ceiling
/// the 64 MiB step cannot pass whatever its reads; and the same with three query heads per K/V
/// head (24 on 8), whose groups the wide kernels pad to blocks of four.
fn bench_decode_gqa(c: &mut Criterion) {
    let kv_heads = 8;
    for (heads, sk, pages) in [
        (32, 512usize, Pages::Small),
        (32, 16_384, Pages::Small),
        (32, 16_384, Pages::Huge),
        (24, 512, Pages::Small),
        (24, 16_384, Pages::Small),
    ] {
        let suffix = pages.suffix();
        let name = format!("sdpa_decode_gqa{suffix}/sq1_hd64_h{heads}_kv{kv_heads}_sk{sk}");
        decode_group(c, name, heads, kv_heads, sk, pages);
    }
}

criterion_group!(
    benches,
    bench_grid,
    bench_peak,
    bench_modes,
    bench_decode,
    bench_decode_gqa
);
criterion_main!(benches);
