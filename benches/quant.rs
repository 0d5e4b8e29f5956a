//! Products over quantized weights (`quant_linear`), per block format and activation mode,
//! under `Sequential` and `hardware()` (feature `parallel`): one row (a decode step) over the
//! shapes of SmolLM2-135M's projections (576 → 1536, 1536 → 576) and of its 49152-row output
//! head, and 128 rows (a prefill) over the projections.
//! `cargo bench --features parallel --bench quant`; each group's throughput is the weight's
//! bytes, so a one-row group reads as the rate it streams the weight.

mod common;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use skainet_schedule::quant::GgmlType;
use skainet_schedule::{
    cpu_kernels, quant_linear, quant_linear_with, Activations, KernelConfig, KernelProvider,
    QMatrix, Sequential,
};

use common::{schedules, tensor};

/// The formats of the shipped Q4_1 file (its projections and its Q8_0 head) and of the
/// requantizations the peer comparison reads (Q4_K_M: Q5_0, Q4_K and Q6_K).
const FORMATS: [GgmlType; 6] = [
    GgmlType::Q4_1,
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q5_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
];

/// A `rows × cols` weight of `ty` from an LCG, every block's f16 scales set to small normal
/// values (random bytes would make some NaN or subnormal, which no real file has).
fn weight(ty: GgmlType, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let len = rows * cols / ty.block_len() * ty.block_bytes();
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(1);
    let mut bytes: Vec<u8> = (0..len)
        .map(|_| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 24) as u8
        })
        .collect();
    // Where each format keeps its f16 scales (`d`, then `m` or `dmin`).
    let scales: &[usize] = match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => &[0],
    };
    for block in bytes.chunks_exact_mut(ty.block_bytes()) {
        for &at in scales {
            // 2^-6 plus a little: a normal half whatever the seed.
            let h = 0x2400 | u16::from(block[at] & 0x3f);
            block[at..at + 2].copy_from_slice(&h.to_le_bytes());
        }
    }
    bytes
}

fn bench_quant(c: &mut Criterion) {
    let schedules = schedules();
    let shapes = [
        (1, 576, 1536),
        (1, 1536, 576),
        (1, 576, 49152),
        (128, 576, 1536),
        (128, 1536, 576),
    ];
    for (m, k, n) in shapes {
        let x = tensor(vec![m, k], 7);
        let mut group = c.benchmark_group(format!("quant_linear/{m}x{k}x{n}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        // The K-quants' 256-value blocks fit 1536 inputs (`ffn_down`), not 576.
        for ty in FORMATS.into_iter().filter(|ty| k % ty.block_len() == 0) {
            let bytes = weight(ty, n, k, ty.id());
            let w = QMatrix::new(ty, n, k, &bytes).expect("whole blocks");
            group.throughput(Throughput::Bytes(bytes.len() as u64));
            for (mode, activations) in [("exact", Activations::Exact), ("q8", Activations::Q8)] {
                for (name, schedule) in &schedules {
                    group.bench_function(format!("{ty:?}/{mode}/{name}"), |bench| {
                        bench.iter(|| {
                            quant_linear(black_box(&x), &w, activations, schedule.as_ref()).unwrap()
                        })
                    });
                }
            }
        }
        group.finish();
    }
}

/// q8 mode under `Sequential` on each kernel variant this CPU runs: what each vector path adds
/// to the integer dots, on the shipped file's two formats and the K-quants of its Q4_K_M
/// requantization (where the inputs are a multiple of 256).
fn bench_q8_variants(c: &mut Criterion) {
    let variants: Vec<_> = cpu_kernels()
        .providers()
        .iter()
        .filter(|v| v.is_available())
        .cloned()
        .collect();
    for (m, k, n) in [
        (1, 1536, 576),
        (1, 576, 49152),
        (128, 1536, 576),
        (1, 2048, 8192),
    ] {
        let x = tensor(vec![m, k], 7);
        let mut group = c.benchmark_group(format!("quant_q8_variant/{m}x{k}x{n}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(300))
            .measurement_time(Duration::from_secs(1));
        let formats = [
            GgmlType::Q4_1,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
        ];
        for ty in formats.into_iter().filter(|ty| k % ty.block_len() == 0) {
            let bytes = weight(ty, n, k, ty.id());
            let w = QMatrix::new(ty, n, k, &bytes).expect("whole blocks");
            group.throughput(Throughput::Bytes(bytes.len() as u64));
            for v in &variants {
                let config = KernelConfig::new(v.clone());
                group.bench_function(format!("{ty:?}/{}", v.name()), |bench| {
                    bench.iter(|| {
                        quant_linear_with(&config, black_box(&x), &w, Activations::Q8, &Sequential)
                            .unwrap()
                    })
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench_quant, bench_q8_variants);
criterion_main!(benches);
