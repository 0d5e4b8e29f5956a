#![cfg(not(feature = "loom"))]
//! Attention in `Precision::Native` (SPEC §8): fused multiply-adds where the CPU has them,
//! bit-identical under every schedule on one machine and variant, within 1e-5 of the portable
//! mode and of an f64 reference.

mod common;

use common::{
    all_schedules, assert_sdpa_bits_under, max_abs_diff, reference_sdpa, sparse_mask, uniform,
    SdpaCall,
};
use skainet_schedule::{
    scaled_dot_product_attention_with, KernelConfig, Precision, SdpaOptions, Sequential, Tensor,
};

fn native() -> KernelConfig {
    KernelConfig::selected().with_precision(Precision::Native)
}

/// Native, always opening a region, so that small shapes really split across tasks.
fn native_forking() -> KernelConfig {
    native().with_min_parallel_work(0)
}

/// Whether the selected variant's native attention fuses: x86_64 with AVX2 and FMA, or
/// aarch64 (NEON's fused multiply-add is baseline).
fn fuses() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(target_arch = "aarch64")]
    {
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// The shapes of the parity grid: lone rows and four-row blocks, ragged head dimensions,
/// several key tiles (of 128) and row groups (of 64).
const SHAPES: [(usize, usize, usize); 6] = [
    (1, 1, 16),
    (1, 300, 64),
    (7, 65, 11),
    (16, 16, 80),
    (70, 260, 24),
    (64, 129, 64),
];

#[test]
fn native_attention_is_bit_identical_under_every_schedule() {
    let schedules = all_schedules();
    let (b, heads, kv_heads) = (2, 4, 2);
    for (sq, sk, hd) in SHAPES {
        let q = uniform(&[b, heads, sq, hd], 1);
        let k = uniform(&[b, kv_heads, sk, hd], 2);
        let v = uniform(&[b, kv_heads, sk, hd], 3);
        let mask = sparse_mask(&[b, 1, sq, sk], 4, 5);
        for causal in [false, true] {
            let o = SdpaOptions {
                scale: None,
                causal,
            };
            let want = scaled_dot_product_attention_with(
                &native(),
                &q,
                &k,
                &v,
                Some(mask.view()),
                &o,
                &Sequential,
            )
            .unwrap();
            let call = SdpaCall {
                q: &q,
                k: &k,
                v: &v,
                mask: Some(mask.view()),
                options: o,
            };
            assert_sdpa_bits_under(
                &schedules,
                &native_forking(),
                &call,
                &want.to_bits(),
                &format!("sq={sq} sk={sk} hd={hd} causal={causal}"),
            );
        }
    }
}

#[test]
fn native_attention_is_within_1e_5_of_portable_and_of_the_f64_reference() {
    let (b, heads, kv_heads) = (1, 4, 1);
    for (sq, sk, hd) in SHAPES {
        let q = uniform(&[b, heads, sq, hd], 5);
        let k = uniform(&[b, kv_heads, sk, hd], 6);
        let v = uniform(&[b, kv_heads, sk, hd], 7);
        let mask = sparse_mask(&[sq, sk], 8, 4);
        for causal in [false, true] {
            let o = SdpaOptions {
                scale: None,
                causal,
            };
            let run = |config: &KernelConfig| {
                scaled_dot_product_attention_with(
                    config,
                    &q,
                    &k,
                    &v,
                    Some(mask.view()),
                    &o,
                    &Sequential,
                )
                .unwrap()
            };
            let (fast, portable) = (run(&native()), run(&KernelConfig::selected()));
            let wide: Vec<f64> = portable.data().iter().map(|&x| f64::from(x)).collect();
            let apart = max_abs_diff(fast.data(), &wide);
            assert!(
                apart <= 1e-5,
                "sq={sq} sk={sk} hd={hd}: {apart:e} from portable"
            );
            let reference = reference_sdpa(&q, &k, &v, Some(&mask), None, causal);
            let err = max_abs_diff(fast.data(), &reference);
            assert!(err <= 1e-5, "sq={sq} sk={sk} hd={hd}: {err:e} from f64");
        }
    }
}

/// One query row `[1, 1 + 2⁻¹³]` against keys `[-1, 1 - 2⁻¹³]` and `[0, 0]`, scale `2²⁶`: the
/// first score's second step is `-1 + (1 - 2⁻²⁶)`, which is `0` when the product rounds first
/// and `-2⁻²⁶` (so the score `-1`) when it fuses.
#[test]
fn native_attention_fuses_where_the_cpu_has_fma_and_portable_rounds_twice() {
    let e = f32::powi(2.0, -13);
    let q = Tensor::new(vec![1, 1, 1, 2], vec![1.0, 1.0 + e]).unwrap();
    let k = Tensor::new(vec![1, 1, 2, 2], vec![-1.0, 1.0 - e, 0.0, 0.0]).unwrap();
    let v = Tensor::new(vec![1, 1, 2, 2], vec![1.0, 1.0, 0.0, 0.0]).unwrap();
    let o = SdpaOptions {
        scale: Some(f32::powi(2.0, 26)),
        causal: false,
    };
    let run = |config: &KernelConfig| {
        scaled_dot_product_attention_with(config, &q, &k, &v, None, &o, &Sequential).unwrap()
    };
    // Equal scores: half of each value row.
    assert_eq!(run(&KernelConfig::selected()).data(), [0.5, 0.5]);
    let fast = run(&native());
    if fuses() {
        // Scores -1 and 0: e⁻¹ / (1 + e⁻¹).
        let want = (-1.0f64).exp() / (1.0 + (-1.0f64).exp());
        for x in fast.data() {
            assert!((f64::from(*x) - want).abs() < 1e-6, "{x} != {want}");
        }
    } else {
        assert_eq!(fast.data(), [0.5, 0.5]);
    }
}

#[test]
fn the_native_mode_keeps_fully_masked_rows_zeros_and_nan_rows_nan() {
    let (sq, sk, hd) = (3, 200, 8);
    let q = uniform(&[1, 1, sq, hd], 9);
    let k = uniform(&[1, 1, sk, hd], 10);
    let v = uniform(&[1, 1, sk, hd], 11);
    // Row 0 fully masked; row 1 masked but for one NaN; row 2 sees every key.
    let mask = Tensor::from_fn(vec![sq, sk], |i| match (i / sk, i % sk) {
        (0, _) => f32::NEG_INFINITY,
        (1, 150) => f32::NAN,
        (1, _) => f32::NEG_INFINITY,
        _ => 0.0,
    })
    .unwrap();
    let o = SdpaOptions::default();
    let out = scaled_dot_product_attention_with(
        &native(),
        &q,
        &k,
        &v,
        Some(mask.view()),
        &o,
        &Sequential,
    )
    .unwrap();
    let rows: Vec<&[f32]> = out.data().chunks(hd).collect();
    assert!(rows[0].iter().all(|x| x.to_bits() == 0), "{:?}", rows[0]);
    assert!(rows[1].iter().all(|x| x.is_nan()), "{:?}", rows[1]);
    assert!(rows[2].iter().all(|x| x.is_finite()), "{:?}", rows[2]);
}
