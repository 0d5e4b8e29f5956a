//! The arithmetic peak of one core, to read the kernels' benches against: `mul_add` runs
//! `acc + a·b` as a multiply and an add (two roundings, the portable precision mode), `fma` as
//! one fused instruction (the native mode's step), each on twelve independent 8-lane
//! accumulators — more than the latency of either times its throughput — with no memory
//! traffic. Criterion's throughput is in multiply-adds (elements) per second.
//! `cargo bench --bench peak`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Steps per call: each is 12 accumulators × 8 lanes of multiply-adds.
const STEPS: usize = 1 << 16;
const ACCUMULATORS: usize = 12;
const LANES: usize = 8;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{ACCUMULATORS, STEPS};
    use std::arch::x86_64::*;

    /// Sums the accumulators so the loop cannot be dropped.
    #[target_feature(enable = "avx2")]
    unsafe fn total(acc: [__m256; ACCUMULATORS]) -> f32 {
        let mut s = _mm256_setzero_ps();
        for v in acc {
            s = _mm256_add_ps(s, v);
        }
        let mut out = [0.0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), s);
        out.iter().sum()
    }

    /// `acc = acc + a·b` with separate `vmulps` and `vaddps`.
    #[target_feature(enable = "avx2")]
    pub unsafe fn mul_add(a: f32, b: f32) -> f32 {
        let (a, b) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
        let mut acc = [_mm256_setzero_ps(); ACCUMULATORS];
        for _ in 0..STEPS {
            for v in acc.iter_mut() {
                *v = _mm256_add_ps(*v, _mm256_mul_ps(a, b));
            }
            // Keeps the product from being hoisted out of the loop as a loop invariant.
            core::arch::asm!(
                "/* {0} */",
                inout(ymm_reg) * acc.as_mut_ptr(),
                options(nomem, nostack)
            );
        }
        total(acc)
    }

    /// `acc = fma(a, b, acc)`.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma(a: f32, b: f32) -> f32 {
        let (a, b) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
        let mut acc = [_mm256_setzero_ps(); ACCUMULATORS];
        for _ in 0..STEPS {
            for v in acc.iter_mut() {
                *v = _mm256_fmadd_ps(a, b, *v);
            }
        }
        total(acc)
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("peak/one_core");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .throughput(Throughput::Elements((STEPS * ACCUMULATORS * LANES) as u64));
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            group.bench_function("mul_add", |b| {
                // SAFETY: AVX2 was detected just above.
                b.iter(|| unsafe { x86::mul_add(black_box(0.999), black_box(1e-3)) })
            });
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            group.bench_function("fma", |b| {
                // SAFETY: AVX2 and FMA were detected just above.
                b.iter(|| unsafe { x86::fma(black_box(0.999), black_box(1e-3)) })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
