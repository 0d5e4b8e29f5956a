//! matmul over rows: `Sequential` vs `hardware()` (feature `parallel`) vs `RayonSchedule`
//! (feature `rayon`). `cargo bench --features parallel,rayon --bench matmul`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use skainet_schedule::kernels::matmul;
use skainet_schedule::tensor::Tensor;
use skainet_schedule::{Schedule, Sequential};

fn tensor(shape: Vec<usize>, seed: u32) -> Tensor {
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    Tensor::from_fn(shape, |_| {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
    .expect("bench shapes are small")
}

fn schedules() -> Vec<(&'static str, Box<dyn Schedule>)> {
    #[allow(unused_mut)]
    let mut list: Vec<(&'static str, Box<dyn Schedule>)> =
        vec![("sequential", Box::new(Sequential))];
    #[cfg(feature = "parallel")]
    list.push(("hardware", Box::new(skainet_schedule::runtime::hardware())));
    #[cfg(feature = "rayon")]
    list.push(("rayon", Box::new(skainet_schedule::RayonSchedule::global())));
    list
}

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
