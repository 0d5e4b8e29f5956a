//! Cold regions: the attention grid of `sdpa_schedule` (heads {8, 32} × Sk {128, 1024, 4096}
//! × Sq {1, 64}, hd 64, causal) called after 1 ms of sleep, so that the pool's workers have gone
//! back to sleep and every region starts with helpers that must be woken. `Sequential` and
//! `hardware()` sit in one group per shape, so their ratio comes from one run; `warm` groups
//! time back-to-back calls for comparison.
//!
//! Shapes of fewer than four pieces per task follow the grid, regions that wake their helpers
//! before the first piece: prefills of 2 or 4 heads (2^18 to 2^23 multiply-adds), then decode
//! steps of 8 query heads on 2 K/V heads, two pieces of one group each
//! (`h8_kv2_sk{Sk}_sq1`).
//!
//! Then one-row products (`linear_1x1024x{n}`, 2^18 to 2^21 multiply-adds): a decoder's
//! projections after an idle spell.
//!
//! `cargo bench --features parallel --bench cold_pool [-- FILTER]`; ids read
//! `cold_pool/h{heads}_sk{Sk}_sq{Sq}/{sequential,hardware}` and
//! `warm_pool/h{heads}_sk{Sk}_sq{Sq}/{sequential,hardware}`.

#[allow(dead_code)] // only the inputs: this bench compares two schedules of its own
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode};
use skainet_schedule::{linear, scaled_dot_product_attention, Schedule, SdpaOptions, Sequential};

use common::tensor;

const HD: usize = 64;

/// How long the caller sleeps before each timed call: far longer than any worker keeps
/// polling, so every call finds the pool asleep.
const COLD_SLEEP: Duration = Duration::from_millis(1);

/// Timed calls per sample at most: criterion sizes samples by the timed duration only, which
/// leaves out the sleeps, so an uncapped sample of a 20 µs call would sleep for minutes.
const MAX_CALLS_PER_SAMPLE: u64 = 40;

fn bench_cold(c: &mut Criterion) {
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    let schedules: [(&str, Box<dyn Schedule>); 2] = [
        ("sequential", Box::new(Sequential)),
        ("hardware", Box::new(skainet_schedule::hardware())),
    ];
    let grid = [8usize, 32].into_iter().flat_map(|heads| {
        [128usize, 1024, 4096]
            .into_iter()
            .flat_map(move |sk| [1usize, 64].map(|sq| (heads, heads, sk, sq)))
    });
    let few_heads = [(2, 128, 8), (4, 256, 16), (2, 512, 32), (2, 1024, 32)]
        .map(|(heads, sk, sq)| (heads, heads, sk, sq));
    let few_groups = [(8, 2, 2048, 1), (8, 2, 4096, 1)];
    for (heads, kv_heads, sk, sq) in grid.chain(few_heads).chain(few_groups) {
        let q = tensor(vec![1, heads, sq, HD], 1);
        let k = tensor(vec![1, kv_heads, sk, HD], 2);
        let v = tensor(vec![1, kv_heads, sk, HD], 3);
        let id = match kv_heads == heads {
            true => format!("h{heads}_sk{sk}_sq{sq}"),
            false => format!("h{heads}_kv{kv_heads}_sk{sk}_sq{sq}"),
        };
        let call = |schedule: &dyn Schedule| {
            scaled_dot_product_attention(
                black_box(&q),
                black_box(&k),
                black_box(&v),
                None,
                &options,
                schedule,
            )
            .expect("valid shapes")
        };
        cold_and_warm(c, &id, &schedules, call);
    }
}

/// One-row products (`linear`, `x [1, k] · Wᵀ` with `W [n, k]`) of 2^18, 2^20 and 2^21
/// multiply-adds: a decoder's projections, whose weights the first call after an idle spell
/// streams while the pool's helpers wake. Ids `…/linear_1x{k}x{n}/…`.
fn bench_cold_linear(c: &mut Criterion) {
    let schedules: [(&str, Box<dyn Schedule>); 2] = [
        ("sequential", Box::new(Sequential)),
        ("hardware", Box::new(skainet_schedule::hardware())),
    ];
    let k = 1024;
    for n in [256usize, 1024, 2048] {
        let x = tensor(vec![1, k], 1);
        let w = tensor(vec![n, k], 2);
        let call = |schedule: &dyn Schedule| {
            linear(black_box(&x), black_box(&w), schedule).expect("valid shapes")
        };
        cold_and_warm(c, &format!("linear_1x{k}x{n}"), &schedules, call);
    }
}

/// The `cold_pool/{id}` group (each call after [`COLD_SLEEP`]) and the `warm_pool/{id}` group
/// (calls back to back) of `call` under each of `schedules`.
fn cold_and_warm<R>(
    c: &mut Criterion,
    id: &str,
    schedules: &[(&str, Box<dyn Schedule>)],
    call: impl Fn(&dyn Schedule) -> R,
) {
    let mut group = c.benchmark_group(format!("cold_pool/{id}"));
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(500));
    for (name, schedule) in schedules {
        group.bench_function(*name, |bench| {
            bench.iter_custom(|iters| {
                let calls = iters.clamp(1, MAX_CALLS_PER_SAMPLE);
                let mut timed = Duration::ZERO;
                for _ in 0..calls {
                    std::thread::sleep(COLD_SLEEP);
                    let started = Instant::now();
                    black_box(call(schedule.as_ref()));
                    timed += started.elapsed();
                }
                // The mean of the calls made, as if all `iters` had been made.
                timed.mul_f64(iters as f64 / calls as f64)
            })
        });
    }
    group.finish();
    let mut group = c.benchmark_group(format!("warm_pool/{id}"));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(500));
    for (name, schedule) in schedules {
        group.bench_function(*name, |bench| bench.iter(|| call(schedule.as_ref())));
    }
    group.finish();
}

criterion_group!(benches, bench_cold, bench_cold_linear);
criterion_main!(benches);
