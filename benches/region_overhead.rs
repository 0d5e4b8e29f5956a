//! Region overhead: what opening a region costs on top of the body, for every schedule, with
//! rayon's own primitives as the anchor.
//!
//! `cargo bench --features parallel,rayon --bench region_overhead`
//!
//! * `empty/<schedule>`: an empty body over `n = parallelism` units (grain 1), so every
//!   schedule forks as wide as it can and the time is pure overhead.
//! * `spin64/<schedule>`: a ~1 µs body per unit over 64 units.
//! * `dedicated2_disabled_trace`: the same pool with a disabled sink attached (should match
//!   `dedicated2`).
//! * `nested_inline`: a region opened from inside a chunk (runs inline), against a direct
//!   `Sequential` call.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use rayon::prelude::*;
use skainet_schedule::RayonSchedule;
use skainet_schedule::{NoopSink, Schedule, Sequential};

/// Iterations of `spin` that take about one microsecond on this machine.
fn calibrate_one_microsecond() -> u64 {
    let mut iterations = 1_000u64;
    loop {
        let started = Instant::now();
        for _ in 0..100 {
            spin(iterations);
        }
        let per_call = started.elapsed() / 100;
        if per_call >= Duration::from_micros(1) || iterations > 1 << 30 {
            let scaled = iterations as f64 * 1_000.0 / per_call.as_nanos().max(1) as f64;
            return (scaled as u64).max(1);
        }
        iterations *= 2;
    }
}

/// Deterministic busy work the optimiser cannot remove.
fn spin(iterations: u64) -> u64 {
    let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
    for _ in 0..iterations {
        x = x.rotate_left(5) ^ x.wrapping_mul(0x2545_f491_4f6c_dd1d);
    }
    black_box(x)
}

fn schedules() -> Vec<(&'static str, Box<dyn Schedule>)> {
    vec![
        ("sequential", Box::new(Sequential)),
        ("hardware", Box::new(skainet_schedule::hardware())),
        (
            "dedicated2",
            Box::new(skainet_schedule::dedicated(2).expect("2 > 0")),
        ),
        (
            "dedicated2_disabled_trace",
            Box::new(
                skainet_schedule::dedicated(2)
                    .expect("2 > 0")
                    .with_trace(NoopSink::shared()),
            ),
        ),
        ("rayon_adapter", Box::new(RayonSchedule::global())),
    ]
}

/// rayon's own fork of `n` units into at most `tasks` chunks: `scope` + `spawn`, the caller
/// running the first chunk.
fn rayon_scope(n: usize, tasks: usize, unit: &(dyn Fn(usize) + Sync)) {
    let chunk = n.div_ceil(tasks.max(1));
    rayon::scope(|s| {
        for start in (chunk..n).step_by(chunk.max(1)) {
            s.spawn(move |_| (start..(start + chunk).min(n)).for_each(unit));
        }
        (0..chunk.min(n)).for_each(unit);
    });
}

/// rayon's `par_chunks` over the same chunks.
fn rayon_par_chunks(units: &[u8], tasks: usize, unit: &(dyn Fn(usize) + Sync)) {
    let chunk = units.len().div_ceil(tasks.max(1));
    units
        .par_chunks(chunk.max(1))
        .enumerate()
        .for_each(|(i, c)| (i * chunk..i * chunk + c.len()).for_each(unit));
}

fn bench_empty(c: &mut Criterion) {
    let mut group = c.benchmark_group("empty");
    for (name, schedule) in schedules() {
        let n = schedule.parallelism();
        group.bench_function(BenchmarkId::new(name, n), |b| {
            b.iter(|| {
                schedule.for_range(black_box(n), 1, &|s, e| {
                    black_box((s, e));
                })
            })
        });
    }
    let n = rayon::current_num_threads();
    let units = vec![0u8; n];
    group.bench_function(BenchmarkId::new("rayon_scope", n), |b| {
        b.iter(|| {
            rayon_scope(black_box(n), n, &|i| {
                black_box(i);
            })
        })
    });
    group.bench_function(BenchmarkId::new("rayon_par_chunks", n), |b| {
        b.iter(|| {
            rayon_par_chunks(black_box(&units), n, &|i| {
                black_box(i);
            })
        })
    });
    group.finish();
}

fn bench_spin64(c: &mut Criterion) {
    let one_us = calibrate_one_microsecond();
    let mut group = c.benchmark_group("spin64");
    for (name, schedule) in schedules() {
        group.bench_function(BenchmarkId::new(name, schedule.parallelism()), |b| {
            b.iter(|| {
                schedule.for_range(64, 1, &|s, e| {
                    for _ in s..e {
                        spin(one_us);
                    }
                })
            })
        });
    }
    let tasks = rayon::current_num_threads();
    let units = vec![0u8; 64];
    group.bench_function(BenchmarkId::new("rayon_scope", tasks), |b| {
        b.iter(|| {
            rayon_scope(64, tasks, &|_| {
                spin(one_us);
            })
        })
    });
    group.bench_function(BenchmarkId::new("rayon_par_chunks", tasks), |b| {
        b.iter(|| {
            rayon_par_chunks(&units, tasks, &|_| {
                spin(one_us);
            })
        })
    });
    group.finish();
}

fn bench_nested(c: &mut Criterion) {
    let pool = skainet_schedule::dedicated(2).expect("2 > 0");
    let mut group = c.benchmark_group("nested_inline");
    // Time `iters` nested regions from inside chunk 0 of an outer region.
    group.bench_function("dedicated2_inside_a_chunk", |b| {
        b.iter_custom(|iters| {
            let elapsed = std::sync::Mutex::new(Duration::ZERO);
            pool.for_range(2, 1, &|start, _| {
                if start == 0 {
                    let started = Instant::now();
                    for _ in 0..iters {
                        pool.for_range(black_box(64), 1, &|s, e| {
                            black_box((s, e));
                        });
                    }
                    *elapsed.lock().unwrap() = started.elapsed();
                }
            });
            elapsed.into_inner().unwrap()
        })
    });
    group.bench_function("sequential_direct", |b| {
        b.iter(|| {
            Sequential.for_range(black_box(64), 1, &|s, e| {
                black_box((s, e));
            })
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_empty, bench_spin64, bench_nested
}
criterion_main!(benches);
