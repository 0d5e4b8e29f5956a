//! Matrix products: the packed tiled product (`matmul`) and the few-row path (`linear`, a
//! decode step's `x · Wᵀ`), in both precision modes, under `Sequential`, `hardware()`
//! (feature `parallel`) and `RayonSchedule` (feature `rayon`).
//! `cargo bench --features parallel,rayon --bench matmul`; compare with `benches/peak.rs`.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use skainet_schedule::{linear_with, matmul_with, KernelConfig, Precision};

use common::{schedules, tensor};

fn modes() -> [(&'static str, KernelConfig); 2] {
    [
        ("portable", KernelConfig::selected()),
        (
            "native",
            KernelConfig::selected().with_precision(Precision::Native),
        ),
    ]
}

/// `[m, k] · [k, n]`: prefill-sized products, the four shapes first.
fn bench_matmul(c: &mut Criterion) {
    let schedules = schedules();
    for (m, k, n) in [
        (512, 512, 512),
        (1024, 512, 512),
        (128, 576, 1536),
        (128, 1536, 576),
        (64, 64, 64),
    ] {
        let a = tensor(vec![m, k], 1);
        let b = tensor(vec![k, n], 2);
        let mut group = c.benchmark_group(format!("matmul/{m}x{k}x{n}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        for (mode, config) in modes() {
            for (name, schedule) in &schedules {
                group.bench_function(format!("{mode}/{name}"), |bench| {
                    bench.iter(|| {
                        matmul_with(&config, black_box(&a), black_box(&b), schedule.as_ref())
                            .unwrap()
                    })
                });
            }
        }
        group.finish();
    }
}

/// One row against a weight: `linear` reads `W [n, k]` in place (`x · Wᵀ`); `matmul` reads
/// `W [k, n]`.
fn bench_matvec(c: &mut Criterion) {
    let schedules = schedules();
    for (k, n) in [(576, 49152), (1536, 576)] {
        let x = tensor(vec![1, k], 3);
        let w_out_in = tensor(vec![n, k], 4);
        let w_in_out = tensor(vec![k, n], 5);
        let mut group = c.benchmark_group(format!("matvec/1x{k}x{n}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        for (mode, config) in modes() {
            for (name, schedule) in &schedules {
                group.bench_function(format!("linear/{mode}/{name}"), |bench| {
                    bench.iter(|| {
                        linear_with(&config, black_box(&x), &w_out_in, schedule.as_ref()).unwrap()
                    })
                });
                group.bench_function(format!("matmul/{mode}/{name}"), |bench| {
                    bench.iter(|| {
                        matmul_with(&config, black_box(&x), &w_in_out, schedule.as_ref()).unwrap()
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench_matmul, bench_matvec);
criterion_main!(benches);
