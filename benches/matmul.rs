//! matmul over rows: `Sequential` vs `hardware()` (feature `parallel`) vs `RayonSchedule`
//! (feature `rayon`). `cargo bench --features parallel,rayon --bench matmul`.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use skainet_schedule::matmul;

use common::{schedules, tensor};

fn bench(c: &mut Criterion) {
    let schedules = schedules();
    for (m, k, n) in [(64, 64, 64), (256, 256, 256), (1024, 512, 512)] {
        let a = tensor(vec![m, k], 1);
        let b = tensor(vec![k, n], 2);
        let mut group = c.benchmark_group(format!("matmul/{m}x{k}x{n}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        for (name, schedule) in &schedules {
            group.bench_function(*name, |bench| {
                bench.iter(|| matmul(black_box(&a), black_box(&b), schedule.as_ref()).unwrap())
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
