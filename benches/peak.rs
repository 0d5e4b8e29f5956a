//! The arithmetic peak of one core, to read the kernels' benches against: `mul_add` runs
//! `acc + a·b` as a multiply and an add (two roundings, the portable precision mode), `fma` as
//! one fused instruction (the native mode's step), on twelve independent 8-lane (AVX2) or 24
//! 16-lane (AVX-512) accumulators — more than the latency of either times its throughput — with
//! no memory traffic. Criterion's throughput is in multiply-adds (elements) per second; the
//! matmul bench divided by it is the kernels' share of the core's peak. `read_bandwidth` streams
//! 128 MiB once per iteration (bytes per second): the ceiling of the one-row products; its
//! `sum_256MiB` streams 256 MiB, the reference for reads of that size (a 256 MiB decode step):
//! the 32 MiB L3 serves part of a smaller stream. `sum_huge` and `sum_256MiB_huge` stream the
//! same sizes from memory advised for transparent huge pages (`Tensor::zeros_in_huge_pages`),
//! the references of the decode benches over such memory.
//! `cargo bench --bench peak -- read_bandwidth`.
//! Inline assembly: the compiler would hoist or merge the loop-invariant products of
//! intrinsics, and AVX-512's intrinsics are newer than the crate's minimum Rust.
//! `cargo bench --bench peak`.

use std::time::Duration;

#[allow(dead_code)] // only the stream: this bench measures the machine, not the kernels
mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
#[cfg(target_arch = "x86_64")]
use skainet_schedule::Tensor;

#[cfg(target_arch = "x86_64")]
use common::{stream_sum, stream_sum_two_cores};

/// Steps per call: each is 12 accumulators × 8 lanes of multiply-adds (AVX2), or 24 × 16
/// (AVX-512, as the packed product's micro-kernel runs them).
const STEPS: usize = 1 << 16;
const ACCUMULATORS: usize = 12;
const LANES: usize = 8;
const ACCUMULATORS_512: usize = 24;
const LANES_512: usize = 16;

/// AVX2 in inline assembly, so that the compiler can neither hoist the loop-invariant product
/// nor merge the twelve equal ones.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::STEPS;

    /// `ymm0..ymm11 += ymm14 · ymm15` as `vmulps` + `vaddps`, `STEPS` times.
    pub fn mul_add() {
        // SAFETY: called only where AVX2 was detected; register-only arithmetic, every vector
        // register it uses is call-clobbered (`clobber_abi`).
        unsafe {
            core::arch::asm!(
                "vxorps xmm14, xmm14, xmm14",
                "vxorps xmm15, xmm15, xmm15",
                "2:",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm0, ymm0, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm1, ymm1, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm2, ymm2, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm3, ymm3, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm4, ymm4, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm5, ymm5, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm6, ymm6, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm7, ymm7, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm8, ymm8, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm9, ymm9, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm10, ymm10, ymm12",
                "vmulps ymm12, ymm14, ymm15", "vaddps ymm11, ymm11, ymm12",
                "dec rcx",
                "jnz 2b",
                "vzeroupper",
                inout("rcx") STEPS => _,
                clobber_abi("C"),
                options(nomem, nostack),
            )
        }
    }

    /// `ymm0..ymm11 = fma(ymm14, ymm15, ymm_i)`, `STEPS` times.
    pub fn fma() {
        // SAFETY: called only where AVX2 and FMA were detected; as `mul_add`.
        unsafe {
            core::arch::asm!(
                "vxorps xmm14, xmm14, xmm14",
                "vxorps xmm15, xmm15, xmm15",
                "2:",
                "vfmadd231ps ymm0, ymm14, ymm15",
                "vfmadd231ps ymm1, ymm14, ymm15",
                "vfmadd231ps ymm2, ymm14, ymm15",
                "vfmadd231ps ymm3, ymm14, ymm15",
                "vfmadd231ps ymm4, ymm14, ymm15",
                "vfmadd231ps ymm5, ymm14, ymm15",
                "vfmadd231ps ymm6, ymm14, ymm15",
                "vfmadd231ps ymm7, ymm14, ymm15",
                "vfmadd231ps ymm8, ymm14, ymm15",
                "vfmadd231ps ymm9, ymm14, ymm15",
                "vfmadd231ps ymm10, ymm14, ymm15",
                "vfmadd231ps ymm11, ymm14, ymm15",
                "dec rcx",
                "jnz 2b",
                "vzeroupper",
                inout("rcx") STEPS => _,
                clobber_abi("C"),
                options(nomem, nostack),
            )
        }
    }
}

/// AVX-512 in inline assembly (its intrinsics are newer than the crate's minimum Rust).
#[cfg(target_arch = "x86_64")]
mod x86_512 {
    use super::STEPS;

    /// `zmm0..zmm23 += zmm24 · zmm25` as `vmulps` + `vaddps`, `STEPS` times.
    pub fn mul_add() {
        // SAFETY: called only where AVX-512F was detected; register-only arithmetic, every
        // vector register it uses is call-clobbered (`clobber_abi`).
        unsafe {
            core::arch::asm!(
                "vxorps xmm24, xmm24, xmm24",
                "vxorps xmm25, xmm25, xmm25",
                "2:",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm0, zmm0, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm1, zmm1, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm2, zmm2, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm3, zmm3, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm4, zmm4, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm5, zmm5, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm6, zmm6, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm7, zmm7, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm8, zmm8, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm9, zmm9, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm10, zmm10, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm11, zmm11, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm12, zmm12, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm13, zmm13, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm14, zmm14, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm15, zmm15, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm16, zmm16, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm17, zmm17, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm18, zmm18, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm19, zmm19, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm20, zmm20, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm21, zmm21, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm22, zmm22, zmm27",
                "vmulps zmm27, zmm24, zmm25", "vaddps zmm23, zmm23, zmm27",
                "dec rcx",
                "jnz 2b",
                "vzeroupper",
                inout("rcx") STEPS => _,
                clobber_abi("C"),
                options(nomem, nostack),
            )
        }
    }

    /// `zmm0..zmm23 = fma(zmm24, zmm25, zmm_i)`, `STEPS` times.
    pub fn fma() {
        // SAFETY: as `mul_add`.
        unsafe {
            core::arch::asm!(
                "vxorps xmm24, xmm24, xmm24",
                "vxorps xmm25, xmm25, xmm25",
                "2:",
                "vfmadd231ps zmm0, zmm24, zmm25",
                "vfmadd231ps zmm1, zmm24, zmm25",
                "vfmadd231ps zmm2, zmm24, zmm25",
                "vfmadd231ps zmm3, zmm24, zmm25",
                "vfmadd231ps zmm4, zmm24, zmm25",
                "vfmadd231ps zmm5, zmm24, zmm25",
                "vfmadd231ps zmm6, zmm24, zmm25",
                "vfmadd231ps zmm7, zmm24, zmm25",
                "vfmadd231ps zmm8, zmm24, zmm25",
                "vfmadd231ps zmm9, zmm24, zmm25",
                "vfmadd231ps zmm10, zmm24, zmm25",
                "vfmadd231ps zmm11, zmm24, zmm25",
                "vfmadd231ps zmm12, zmm24, zmm25",
                "vfmadd231ps zmm13, zmm24, zmm25",
                "vfmadd231ps zmm14, zmm24, zmm25",
                "vfmadd231ps zmm15, zmm24, zmm25",
                "vfmadd231ps zmm16, zmm24, zmm25",
                "vfmadd231ps zmm17, zmm24, zmm25",
                "vfmadd231ps zmm18, zmm24, zmm25",
                "vfmadd231ps zmm19, zmm24, zmm25",
                "vfmadd231ps zmm20, zmm24, zmm25",
                "vfmadd231ps zmm21, zmm24, zmm25",
                "vfmadd231ps zmm22, zmm24, zmm25",
                "vfmadd231ps zmm23, zmm24, zmm25",
                "dec rcx",
                "jnz 2b",
                "vzeroupper",
                inout("rcx") STEPS => _,
                clobber_abi("C"),
                options(nomem, nostack),
            )
        }
    }
}

/// Bytes the read-bandwidth bench streams: 128 MiB, far above the last-level cache, like a
/// decode step's vocabulary projection (113 MB).
const STREAM_BYTES: usize = 128 << 20;
/// The larger stream, `sum_256MiB`: a 256 MiB read (a decode step over 256 MiB of K and V) is
/// measured against a stream of its own size.
const LARGE_STREAM_BYTES: usize = 256 << 20;

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
            group.bench_function("mul_add", |b| b.iter(x86::mul_add));
        }
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            group.bench_function("fma", |b| b.iter(x86::fma));
        }
    }
    group.finish();
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        let mut group = c.benchmark_group("peak/one_core_avx512");
        group
            .sample_size(20)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1))
            .throughput(Throughput::Elements(
                (STEPS * ACCUMULATORS_512 * LANES_512) as u64,
            ));
        group.bench_function("mul_add", |b| b.iter(x86_512::mul_add));
        group.bench_function("fma", |b| b.iter(x86_512::fma));
        group.finish();
    }
    #[cfg(target_arch = "x86_64")]
    {
        let xs: Vec<f32> = (0..STREAM_BYTES / 4).map(|i| (i % 7) as f32).collect();
        let large: Vec<f32> = (0..LARGE_STREAM_BYTES / 4)
            .map(|i| (i % 7) as f32)
            .collect();
        let in_huge_pages = |bytes: usize| {
            let mut t = Tensor::zeros_in_huge_pages(vec![bytes / 4]).expect("256 MiB at most");
            for (i, x) in t.data_mut().iter_mut().enumerate() {
                *x = (i % 7) as f32;
            }
            t
        };
        let (xs_huge, large_huge) = (
            in_huge_pages(STREAM_BYTES),
            in_huge_pages(LARGE_STREAM_BYTES),
        );
        let mut group = c.benchmark_group("peak/read_bandwidth_one_core");
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Bytes(STREAM_BYTES as u64));
        group.bench_function("sum", |b| b.iter(|| stream_sum(&xs)));
        group.bench_function("sum_huge", |b| b.iter(|| stream_sum(xs_huge.data())));
        group.throughput(Throughput::Bytes(LARGE_STREAM_BYTES as u64));
        group.bench_function("sum_256MiB", |b| b.iter(|| stream_sum(&large)));
        let large_huge_sum = |b: &mut criterion::Bencher| b.iter(|| stream_sum(large_huge.data()));
        group.bench_function("sum_256MiB_huge", large_huge_sum);
        group.finish();
        // Both cores at once, each streaming its half, in scoped threads started per call (a
        // few tens of microseconds against milliseconds of streaming): what the two-task
        // one-row products and decode are measured against.
        let mut group = c.benchmark_group("peak/read_bandwidth_two_cores");
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Bytes(STREAM_BYTES as u64));
        group.bench_function("sum", |b| b.iter(|| stream_sum_two_cores(&[&xs])));
        group.throughput(Throughput::Bytes(LARGE_STREAM_BYTES as u64));
        group.bench_function("sum_256MiB", |b| b.iter(|| stream_sum_two_cores(&[&large])));
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
