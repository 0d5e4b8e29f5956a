//! conv2d over (batch, out_channel) planes: `Sequential` vs `hardware()` (feature `parallel`)
//! vs `RayonSchedule` (feature `rayon`). `cargo bench --features parallel,rayon --bench conv2d`.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use skainet_schedule::{conv2d, Conv2dOptions};

use common::{schedules, tensor};

fn bench(c: &mut Criterion) {
    let schedules = schedules();
    let same = Conv2dOptions {
        stride: [1, 1],
        padding: [1, 1],
    };
    // (input [N, C, H, W], weight [O, C, kH, kW])
    for (input, weight) in [
        ([1, 3, 32, 32], [8, 3, 3, 3]),
        ([1, 16, 56, 56], [32, 16, 3, 3]),
        ([2, 64, 28, 28], [64, 64, 3, 3]),
    ] {
        let x = tensor(input.to_vec(), 1);
        let w = tensor(weight.to_vec(), 2);
        let b = tensor(vec![weight[0]], 3);
        let [n, ch, h, w_] = input;
        let [o, _, kh, kw] = weight;
        let mut group = c.benchmark_group(format!("conv2d/n{n}_c{ch}_{h}x{w_}_o{o}_k{kh}x{kw}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        for (name, schedule) in &schedules {
            group.bench_function(*name, |bench| {
                bench.iter(|| {
                    conv2d(
                        black_box(&x),
                        black_box(&w),
                        Some(&b),
                        &same,
                        schedule.as_ref(),
                    )
                    .unwrap()
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
