#![cfg(not(feature = "loom"))]
//! Scaled dot-product attention (SPEC §5): bit parity under every schedule, grouped K/V equal
//! to tiled K/V, f64 numerics, fully masked rows, one error per invalid input class, tracing.

mod common;

use std::sync::Arc;

use common::{
    all_schedules, assert_sdpa_bits_under, available_variants, max_abs_diff, reference_sdpa,
    sparse_mask, tile_heads, uniform, Order, OutOfOrder, SdpaCall,
};
use skainet_schedule::KernelProvider;
use skainet_schedule::ShapeError;
use skainet_schedule::{
    cpu_kernels, scaled_dot_product_attention as sdpa, scaled_dot_product_attention_with,
    KernelConfig, KernelError, Precision, SdpaOptions,
};
use skainet_schedule::{CollectingSink, Sequential, TraceEvent};
use skainet_schedule::{Tensor, TensorView};

fn opts(causal: bool, scale: Option<f32>) -> SdpaOptions {
    SdpaOptions { scale, causal }
}

/// Always opens a region, so small test shapes really split across tasks.
fn forking() -> KernelConfig {
    KernelConfig::selected().with_min_parallel_work(0)
}

#[test]
fn parity_grid_is_bit_identical_to_sequential_under_every_schedule() {
    let schedules = all_schedules();
    let (b, heads) = (2, 8);
    let mut checked = 0;
    for hd in [16, 32, 64, 80] {
        for (sq, sk) in [(1, 1), (1, 128), (8, 64), (16, 16), (7, 65), (64, 64)] {
            let q = uniform(&[b, heads, sq, hd], 1);
            let k = uniform(&[b, heads, sk, hd], 2);
            let v = uniform(&[b, heads, sk, hd], 3);
            let mask = sparse_mask(&[b, 1, sq, sk], 4, 5);
            for causal in [false, true] {
                for with_mask in [false, true] {
                    for scale in [None, Some(0.25)] {
                        let o = opts(causal, scale);
                        let m = with_mask.then(|| mask.view());
                        let expected = sdpa(&q, &k, &v, m.clone(), &o, &Sequential)
                            .unwrap()
                            .to_bits();
                        let call = SdpaCall {
                            q: &q,
                            k: &k,
                            v: &v,
                            mask: m,
                            options: o,
                        };
                        assert_sdpa_bits_under(
                            &schedules,
                            &forking(),
                            &call,
                            &expected,
                            &format!(
                                "hd={hd} sq={sq} sk={sk} causal={causal} mask={with_mask} scale={scale:?}"
                            ),
                        );
                        checked += schedules.len();
                    }
                }
            }
        }
    }
    assert_eq!(checked, 4 * 6 * 8 * schedules.len());
}

#[test]
fn default_threshold_results_equal_forced_regions() {
    let q = uniform(&[2, 8, 64, 64], 1);
    let k = uniform(&[2, 8, 128, 64], 2);
    let v = uniform(&[2, 8, 128, 64], 3);
    let o = opts(true, None);
    let inline = sdpa(&q, &k, &v, None, &o, &Sequential).unwrap();
    for s in all_schedules() {
        assert_eq!(
            sdpa(&q, &k, &v, None, &o, s.as_ref()).unwrap().to_bits(),
            inline.to_bits(),
            "{}",
            s.name()
        );
    }
}

#[test]
fn grouped_kv_equals_tiled_kv_bit_for_bit() {
    let schedule = OutOfOrder::new(3, Order::Shuffled(99));
    for (heads, kv_heads) in [(8, 2), (6, 3), (4, 1), (4, 4)] {
        let (b, sq, sk, hd) = (2, 7, 33, 24);
        let q = uniform(&[b, heads, sq, hd], 11);
        let k = uniform(&[b, kv_heads, sk, hd], 12);
        let v = uniform(&[b, kv_heads, sk, hd], 13);
        let mask = sparse_mask(&[b, heads, sq, sk], 14, 6);
        let (kt, vt) = (tile_heads(&k, heads), tile_heads(&v, heads));
        for causal in [false, true] {
            for m in [None, Some(mask.view())] {
                let o = opts(causal, None);
                let grouped = scaled_dot_product_attention_with(
                    &forking(),
                    &q,
                    &k,
                    &v,
                    m.clone(),
                    &o,
                    &schedule,
                )
                .unwrap();
                let tiled = sdpa(&q, &kt, &vt, m.clone(), &o, &Sequential).unwrap();
                assert_eq!(grouped.shape(), [b, heads, sq, hd]);
                assert_eq!(
                    grouped.to_bits(),
                    tiled.to_bits(),
                    "H={heads} nKV={kv_heads} causal={causal} mask={}",
                    m.is_some()
                );
            }
        }
    }
}

/// (b, H, nKV, Sq, Sk, hd, causal, mask shape)
type Case = (
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    bool,
    Option<Vec<usize>>,
);

#[test]
fn matches_the_f64_reference_within_1e_5() {
    let cases: &[Case] = &[
        (1, 1, 1, 1, 1, 1, false, None),
        (2, 4, 4, 5, 17, 13, false, None),
        (2, 4, 2, 5, 17, 13, true, None),
        (1, 6, 3, 9, 9, 3, true, Some(vec![9, 9])),
        (2, 8, 2, 7, 65, 80, true, Some(vec![2, 1, 7, 65])),
        (2, 4, 1, 3, 40, 64, false, Some(vec![1, 4, 3, 40])),
        (2, 4, 4, 6, 31, 16, true, Some(vec![2, 4, 6, 31])),
        (2, 2, 1, 4, 21, 33, false, Some(vec![2, 1, 1, 21])),
        (1, 3, 1, 12, 100, 7, true, Some(vec![3, 12, 100])),
        (1, 2, 2, 64, 200, 64, true, None),
    ];
    for (n, (b, h, kv, sq, sk, hd, causal, mask_shape)) in cases.iter().cloned().enumerate() {
        let seed = n as u32 * 10;
        let q = uniform(&[b, h, sq, hd], seed + 1);
        let k = uniform(&[b, kv, sk, hd], seed + 2);
        let v = uniform(&[b, kv, sk, hd], seed + 3);
        let mask = mask_shape.map(|s| sparse_mask(&s, seed + 4, 7));
        for scale in [None, Some(0.25)] {
            let o = opts(causal, scale);
            let got = sdpa(&q, &k, &v, mask.as_ref().map(Tensor::view), &o, &Sequential).unwrap();
            let want = reference_sdpa(&q, &k, &v, mask.as_ref(), scale, causal);
            let err = max_abs_diff(got.data(), &want);
            assert!(
                err <= 1e-5,
                "case {n} scale {scale:?}: max abs error {err:e}"
            );
        }
    }
}

#[test]
fn fully_masked_rows_are_zeros() {
    let (sq, sk, hd) = (4, 9, 8);
    let q = uniform(&[1, 2, sq, hd], 1);
    let k = uniform(&[1, 2, sk, hd], 2);
    let v = uniform(&[1, 2, sk, hd], 3);
    // Row 1 hides every key; the others hide none.
    let mask = Tensor::from_fn(vec![sq, sk], |i| {
        if i / sk == 1 {
            f32::NEG_INFINITY
        } else {
            0.0
        }
    })
    .unwrap();
    for causal in [false, true] {
        let out = sdpa(
            &q,
            &k,
            &v,
            Some(mask.view()),
            &opts(causal, None),
            &Sequential,
        )
        .unwrap();
        for h in 0..2 {
            for i in 0..sq {
                let row = &out.data()[(h * sq + i) * hd..(h * sq + i + 1) * hd];
                if i == 1 {
                    assert!(row.iter().all(|x| x.to_bits() == 0), "row {i}: {row:?}");
                } else {
                    assert!(row.iter().all(|x| x.is_finite() && *x != 0.0), "row {i}");
                }
            }
        }
    }
}

#[test]
fn nan_in_a_value_reaches_its_element_of_every_row_that_weighs_that_key() {
    // Causal, 4 queries over 6 keys: row i sees keys j <= i + 2. Value row 4 is NaN, the mask
    // gives key 4 weight 0 in row 2 and hides every key of row 3.
    let (sq, sk, hd) = (4, 6, 8);
    let q = uniform(&[1, 1, sq, hd], 1);
    let k = uniform(&[1, 1, sk, hd], 2);
    let mut v = uniform(&[1, 1, sk, hd], 3);
    v.data_mut()[4 * hd + 3] = f32::NAN;
    let mask = Tensor::from_fn(vec![sq, sk], |at| match (at / sk, at % sk) {
        (2, 4) | (3, _) => f32::NEG_INFINITY,
        _ => 0.0,
    })
    .unwrap();
    let out = sdpa(
        &q,
        &k,
        &v,
        Some(mask.view()),
        &opts(true, None),
        &Sequential,
    )
    .unwrap();
    let nans: Vec<usize> = (0..sq * hd).filter(|&at| out.data()[at].is_nan()).collect();
    // Rows 0 and 1 never see key 4 (causal: not read); row 2 weighs it with 0, and
    // 0 · NaN = NaN in its element 3; row 3 is fully masked and never reads v.
    assert_eq!(nans, [2 * hd + 3]);
    assert!(out.data()[3 * hd..].iter().all(|x| x.to_bits() == 0));
}

#[test]
fn nan_results_have_the_same_bits_under_every_schedule() {
    // NaN in a query row, a key, a mask entry of an otherwise hidden row, and a value.
    let (sq, sk, hd) = (6, 9, 11);
    let mut q = uniform(&[2, 4, sq, hd], 1);
    let mut k = uniform(&[2, 2, sk, hd], 2);
    let mut v = uniform(&[2, 2, sk, hd], 3);
    q.data_mut()[(4 + 1) * sq * hd + 3 * hd] = f32::NAN;
    k.data_mut()[5 * hd + 2] = f32::NAN;
    v.data_mut()[(2 * sk + 7) * hd + 4] = f32::NAN;
    let mask = Tensor::from_fn(vec![sq, sk], |at| match (at / sk, at % sk) {
        (2, 6) => f32::NAN,
        (2, _) => f32::NEG_INFINITY,
        _ => 0.0,
    })
    .unwrap();
    let options = opts(true, Some(0.4));
    let want = sdpa(&q, &k, &v, Some(mask.view()), &options, &Sequential).unwrap();
    assert!(want.data().iter().any(|x| x.is_nan()));
    assert!(want.data().iter().any(|x| x.is_finite()));
    for schedule in all_schedules() {
        let got = scaled_dot_product_attention_with(
            &forking(),
            &q,
            &k,
            &v,
            Some(mask.view()),
            &options,
            &*schedule,
        )
        .unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "{}", schedule.name());
    }
}

#[test]
fn no_keys_give_zeros() {
    let q = uniform(&[1, 2, 3, 4], 1);
    let k = Tensor::zeros(vec![1, 2, 0, 4]).unwrap();
    let out = sdpa(&q, &k, &k, None, &opts(false, None), &Sequential).unwrap();
    assert_eq!(out.shape(), [1, 2, 3, 4]);
    assert!(out.data().iter().all(|x| x.to_bits() == 0));
}

#[test]
fn causal_is_bottom_right_aligned() {
    // One query over three keys: causal changes nothing (the last query sees every key).
    let q = uniform(&[1, 1, 1, 4], 1);
    let k = uniform(&[1, 1, 3, 4], 2);
    let v = uniform(&[1, 1, 3, 4], 3);
    let causal = sdpa(&q, &k, &v, None, &opts(true, None), &Sequential).unwrap();
    let full = sdpa(&q, &k, &v, None, &opts(false, None), &Sequential).unwrap();
    assert_eq!(causal.to_bits(), full.to_bits());
    // Two queries over three keys: row 0 sees keys 0 and 1 only, so the third value is unused.
    let q2 = uniform(&[1, 1, 2, 4], 4);
    let mut v2 = v.clone();
    let out = sdpa(&q2, &k, &v2, None, &opts(true, None), &Sequential).unwrap();
    v2.data_mut()[8..12].fill(1e6);
    let changed = sdpa(&q2, &k, &v2, None, &opts(true, None), &Sequential).unwrap();
    assert_eq!(out.data()[..4], changed.data()[..4]);
    assert_ne!(out.data()[4..], changed.data()[4..]);
}

#[test]
fn every_available_variant_gives_the_portable_bits() {
    let registry = cpu_kernels();
    let portable = KernelConfig::new(registry.find("portable").expect("always registered"));
    let variants = available_variants();
    assert!(variants.iter().any(|p| p.name() == "portable"));
    for (hd, sq, sk) in [
        (64, 64, 130),
        (128, 8, 300),
        (13, 5, 17),
        (80, 7, 65),
        (3, 1, 9),
    ] {
        let q = uniform(&[2, 4, sq, hd], 1);
        let k = uniform(&[2, 2, sk, hd], 2);
        let v = uniform(&[2, 2, sk, hd], 3);
        let mask = sparse_mask(&[sq, sk], 4, 5);
        let o = opts(true, None);
        let want = scaled_dot_product_attention_with(
            &portable,
            &q,
            &k,
            &v,
            Some(mask.view()),
            &o,
            &Sequential,
        )
        .unwrap();
        for variant in &variants {
            let config = KernelConfig::new(variant.clone());
            let got = scaled_dot_product_attention_with(
                &config,
                &q,
                &k,
                &v,
                Some(mask.view()),
                &o,
                &Sequential,
            )
            .unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{} hd={hd}", variant.name());
        }
    }
}

#[test]
fn the_selected_variant_is_the_best_available() {
    let best = cpu_kernels().best_available().unwrap();
    assert_eq!(KernelConfig::selected().kernels().name(), best.name());
}

// ---- errors: one per invalid input class, naming the shapes ----

fn t(shape: &[usize]) -> Tensor {
    Tensor::zeros(shape.to_vec()).unwrap()
}

fn err(q: &[usize], k: &[usize], v: &[usize], mask: Option<&[usize]>, causal: bool) -> KernelError {
    let m = mask.map(t);
    sdpa(
        &t(q),
        &t(k),
        &t(v),
        m.as_ref().map(Tensor::view),
        &opts(causal, None),
        &Sequential,
    )
    .unwrap_err()
}

#[test]
fn rank_error_names_the_operand_and_shape() {
    assert_eq!(
        err(&[2, 8, 4], &[2, 8, 4, 16], &[2, 8, 4, 16], None, false),
        KernelError::Shape(ShapeError::Rank {
            op: "sdpa",
            operand: "q",
            expected: "4",
            shape: vec![2, 8, 4]
        })
    );
    assert_eq!(
        err(
            &[2, 8, 4, 16],
            &[2, 8, 4, 16, 1],
            &[2, 8, 4, 16],
            None,
            false
        ),
        KernelError::Shape(ShapeError::Rank {
            op: "sdpa",
            operand: "k",
            expected: "4",
            shape: vec![2, 8, 4, 16, 1]
        })
    );
}

#[test]
fn batch_mismatch_is_an_error() {
    assert_eq!(
        err(&[2, 8, 4, 16], &[3, 8, 4, 16], &[3, 8, 4, 16], None, false),
        KernelError::Shape(ShapeError::BatchMismatch {
            q: vec![2, 8, 4, 16],
            kv: vec![3, 8, 4, 16]
        })
    );
}

#[test]
fn kv_heads_mismatch_is_an_error() {
    assert_eq!(
        err(&[2, 8, 4, 16], &[2, 2, 4, 16], &[2, 4, 4, 16], None, false),
        KernelError::Shape(ShapeError::KvHeadsMismatch {
            k: vec![2, 2, 4, 16],
            v: vec![2, 4, 4, 16]
        })
    );
}

#[test]
fn zero_kv_heads_is_an_error() {
    assert_eq!(
        err(&[2, 8, 4, 16], &[2, 0, 4, 16], &[2, 0, 4, 16], None, false),
        KernelError::Shape(ShapeError::ZeroKvHeads {
            q: vec![2, 8, 4, 16],
            k: vec![2, 0, 4, 16]
        })
    );
}

#[test]
fn kv_heads_that_do_not_divide_are_an_error() {
    assert_eq!(
        err(&[2, 8, 4, 16], &[2, 3, 4, 16], &[2, 3, 4, 16], None, false),
        KernelError::Shape(ShapeError::KvHeadsDoNotDivide {
            q: vec![2, 8, 4, 16],
            k: vec![2, 3, 4, 16]
        })
    );
}

#[test]
fn head_dim_mismatch_is_an_error() {
    assert_eq!(
        err(&[2, 8, 4, 16], &[2, 8, 4, 32], &[2, 8, 4, 32], None, false),
        KernelError::Shape(ShapeError::HeadDimMismatch {
            q: vec![2, 8, 4, 16],
            kv: vec![2, 8, 4, 32]
        })
    );
    assert_eq!(
        err(&[2, 8, 4, 16], &[2, 8, 4, 16], &[2, 8, 4, 8], None, false),
        KernelError::Shape(ShapeError::HeadDimMismatch {
            q: vec![2, 8, 4, 16],
            kv: vec![2, 8, 4, 8]
        })
    );
}

#[test]
fn kv_length_mismatch_is_an_error() {
    assert_eq!(
        err(&[2, 8, 4, 16], &[2, 8, 5, 16], &[2, 8, 6, 16], None, false),
        KernelError::Shape(ShapeError::KvLengthMismatch {
            k: vec![2, 8, 5, 16],
            v: vec![2, 8, 6, 16]
        })
    );
}

#[test]
fn a_mask_that_does_not_broadcast_is_an_error() {
    let scores = vec![2, 8, 4, 5];
    for bad in [
        &[4, 6][..],
        &[3, 1, 4, 5],
        &[1, 4, 4, 5],
        &[5],
        &[1, 2, 8, 4, 5],
        &[2, 4],
    ] {
        assert_eq!(
            err(
                &[2, 8, 4, 16],
                &[2, 8, 5, 16],
                &[2, 8, 5, 16],
                Some(bad),
                false
            ),
            KernelError::Shape(ShapeError::MaskShape {
                mask: bad.to_vec(),
                scores: scores.clone()
            }),
            "{bad:?}"
        );
    }
}

#[test]
fn causal_with_more_queries_than_keys_is_an_error() {
    assert_eq!(
        err(&[2, 8, 6, 16], &[2, 8, 5, 16], &[2, 8, 5, 16], None, true),
        KernelError::Shape(ShapeError::CausalQueryLongerThanKeys {
            q: vec![2, 8, 6, 16],
            k: vec![2, 8, 5, 16]
        })
    );
    // Without causal the same shapes are fine.
    assert!(sdpa(
        &t(&[2, 8, 6, 16]),
        &t(&[2, 8, 5, 16]),
        &t(&[2, 8, 5, 16]),
        None,
        &opts(false, None),
        &Sequential
    )
    .is_ok());
}

#[test]
fn error_messages_name_both_shapes() {
    let e = err(&[2, 8, 4, 16], &[3, 8, 4, 16], &[3, 8, 4, 16], None, false);
    assert_eq!(
        e.to_string(),
        "sdpa: batch of k/v [3, 8, 4, 16] differs from q [2, 8, 4, 16]"
    );
}

// ---- tracing ----

fn traced_call(schedule: &dyn skainet_schedule::Schedule, sq: usize, sk: usize, hd: usize) {
    let q = uniform(&[2, 8, sq, hd], 1);
    let k = uniform(&[2, 8, sk, hd], 2);
    sdpa(&q, &k, &k, None, &opts(true, None), schedule).unwrap();
}

fn region(elements: usize, tasks: usize, schedule: &str) -> (String, String, usize, usize) {
    ("sdpa".to_string(), schedule.to_string(), elements, tasks)
}

fn regions(sink: &CollectingSink) -> Vec<(String, String, usize, usize)> {
    sink.regions()
        .into_iter()
        .map(|e| match e {
            TraceEvent::ScheduleRegion {
                op,
                schedule,
                elements,
                tasks,
                ..
            } => (op, schedule, elements, tasks),
            other => panic!("not a region: {other:?}"),
        })
        .collect()
}

#[test]
fn a_scheduled_sdpa_emits_one_region_through_a_tracing_test_schedule() {
    let sink = Arc::new(CollectingSink::new());
    let schedule = OutOfOrder::new(2, Order::Reversed).with_trace(sink.clone());
    traced_call(&schedule, 64, 128, 64);
    assert_eq!(regions(&sink), vec![region(16, 2, "reversed(2)")]);
}

#[test]
fn a_call_under_the_threshold_emits_no_region() {
    let sink = Arc::new(CollectingSink::new());
    let schedule = OutOfOrder::new(2, Order::Reversed).with_trace(sink.clone());
    traced_call(&schedule, 1, 16, 16);
    assert!(sink.events().is_empty());
}

#[cfg(feature = "parallel")]
#[test]
fn a_scheduled_sdpa_over_16_units_at_parallelism_2_emits_one_region() {
    let sink = Arc::new(CollectingSink::new());
    let schedule = skainet_schedule::dedicated(2)
        .unwrap()
        .with_trace(sink.clone());
    traced_call(&schedule, 64, 128, 64);
    assert_eq!(regions(&sink), vec![region(16, 2, "dedicated(2)")]);
}

#[cfg(feature = "parallel")]
#[test]
fn a_pool_call_under_the_threshold_emits_nothing() {
    let sink = Arc::new(CollectingSink::new());
    let schedule = skainet_schedule::dedicated(2)
        .unwrap()
        .with_trace(sink.clone());
    traced_call(&schedule, 1, 16, 16);
    assert!(sink.events().is_empty());
}

/// A decode step's chunks follow its K/V groups only when there are groups for every task:
/// eight query heads on one K/V head still split over four tasks.
#[test]
fn a_decode_step_with_one_kv_head_splits_over_every_task() {
    let sink = Arc::new(CollectingSink::new());
    let schedule = OutOfOrder::new(4, Order::Reversed).with_trace(sink.clone());
    let q = uniform(&[1, 8, 1, 64], 41);
    let (k, v) = (uniform(&[1, 1, 512, 64], 42), uniform(&[1, 1, 512, 64], 43));
    sdpa(&q, &k, &v, None, &opts(true, None), &schedule).unwrap();
    assert_eq!(regions(&sink), vec![region(8, 4, "reversed(4)")]);
}

#[test]
fn several_row_groups_and_key_tiles_keep_parity_and_accuracy() {
    // 70 query rows (a group of 64 and one of 6) over 1100 keys (nine tiles of 128).
    let (b, heads, kv_heads, sq, sk, hd) = (1, 4, 2, 70, 1100, 24);
    let q = uniform(&[b, heads, sq, hd], 21);
    let k = uniform(&[b, kv_heads, sk, hd], 22);
    let v = uniform(&[b, kv_heads, sk, hd], 23);
    let mask = sparse_mask(&[sq, sk], 24, 3);
    let portable = KernelConfig::new(cpu_kernels().find("portable").unwrap());
    for causal in [false, true] {
        let o = opts(causal, None);
        let want = scaled_dot_product_attention_with(
            &portable,
            &q,
            &k,
            &v,
            Some(mask.view()),
            &o,
            &Sequential,
        )
        .unwrap();
        let err = max_abs_diff(
            want.data(),
            &reference_sdpa(&q, &k, &v, Some(&mask), None, causal),
        );
        assert!(err <= 1e-5, "causal={causal}: max abs error {err:e}");
        for s in all_schedules() {
            let got = scaled_dot_product_attention_with(
                &forking(),
                &q,
                &k,
                &v,
                Some(mask.view()),
                &o,
                s.as_ref(),
            )
            .unwrap();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} causal={causal}",
                s.name()
            );
        }
    }
}

/// A `[b, nKV, capacity, hd]` buffer whose first `len` positions hold `k`'s values and whose
/// other positions hold garbage that must never be read.
fn cache_buffer(k: &Tensor, capacity: usize) -> Vec<f32> {
    let [b, kv, len, hd] = *k.shape() else {
        panic!("rank 4")
    };
    let mut buf = vec![f32::NAN; b * kv * capacity * hd];
    for bh in 0..b * kv {
        buf[bh * capacity * hd..][..len * hd]
            .copy_from_slice(&k.data()[bh * len * hd..][..len * hd]);
    }
    buf
}

fn prefix_view(buf: &[f32], shape: [usize; 4], capacity: usize) -> TensorView<'_> {
    let [b, kv, len, hd] = shape;
    let strides = vec![kv * capacity * hd, capacity * hd, hd, 1];
    let full = TensorView::strided(buf, vec![b, kv, capacity, hd], strides, 0).unwrap();
    full.narrow(2, 0, len).unwrap()
}

#[test]
fn sdpa_on_a_cache_prefix_view_equals_sdpa_on_compact_copies_under_every_schedule() {
    let (b, heads, kv, hd, capacity) = (2, 6, 3, 16, 40);
    for (sq, sk) in [(1, 1), (1, 33), (5, 33), (7, 40)] {
        let q = uniform(&[b, heads, sq, hd], 11);
        let k = uniform(&[b, kv, sk, hd], 12);
        let v = uniform(&[b, kv, sk, hd], 13);
        let (kb, vb) = (cache_buffer(&k, capacity), cache_buffer(&v, capacity));
        let (kview, vview) = (
            prefix_view(&kb, [b, kv, sk, hd], capacity),
            prefix_view(&vb, [b, kv, sk, hd], capacity),
        );
        assert_eq!(kview.to_tensor().unwrap(), k);
        let o = opts(true, None);
        let want = sdpa(&q, &k, &v, None, &o, &Sequential).unwrap().to_bits();
        let got = sdpa(&q, &kview, &vview, None, &o, &Sequential).unwrap();
        assert_eq!(got.to_bits(), want, "sq={sq} sk={sk} Sequential");
        for s in all_schedules() {
            let got = scaled_dot_product_attention_with(
                &forking(),
                &q,
                &kview,
                &vview,
                None,
                &o,
                s.as_ref(),
            )
            .unwrap();
            assert_eq!(got.to_bits(), want, "sq={sq} sk={sk} {}", s.name());
        }
    }
}

#[test]
fn a_view_whose_rows_are_not_back_to_back_is_an_error() {
    // q as [b, s, H, hd] seen as [b, H, s, hd]: rows of one head are H·hd apart.
    let raw = uniform(&[1, 3, 2, 4], 1);
    let q = raw.view().permute(&[0, 2, 1, 3]).unwrap();
    let k = t(&[1, 2, 3, 4]);
    let err = sdpa(&q, &k, &k, None, &opts(false, None), &Sequential).unwrap_err();
    assert_eq!(
        err,
        KernelError::Shape(ShapeError::Layout {
            op: "sdpa",
            operand: "q",
            shape: vec![1, 2, 3, 4],
            strides: vec![24, 4, 8, 1],
            expected: "its last two dimensions back to back (strides [.., n, 1])",
        })
    );
    assert_eq!(
        err.to_string(),
        "sdpa: q of shape [1, 2, 3, 4] has strides [24, 4, 8, 1]; it needs its last two dimensions back to back (strides [.., n, 1])"
    );
}

#[test]
fn a_permuted_single_position_query_needs_no_copy() {
    // With one position the head rows are trivially back to back: the decode step's q.
    let raw = uniform(&[1, 1, 4, 8], 2);
    let q = raw.view().permute(&[0, 2, 1, 3]).unwrap();
    let k = uniform(&[1, 2, 5, 8], 3);
    let v = uniform(&[1, 2, 5, 8], 4);
    let compact = q.to_tensor().unwrap();
    let o = opts(true, None);
    let want = sdpa(&compact, &k, &v, None, &o, &Sequential).unwrap();
    let got = sdpa(&q, &k, &v, None, &o, &Sequential).unwrap();
    assert_eq!(got.to_bits(), want.to_bits());
}

#[test]
fn a_mask_view_of_a_larger_buffer_gives_the_bits_of_its_compact_copy() {
    let (sq, sk, hd) = (6, 140, 16);
    let q = uniform(&[1, 2, sq, hd], 31);
    let k = uniform(&[1, 1, sk, hd], 32);
    let v = uniform(&[1, 1, sk, hd], 33);
    let big = sparse_mask(&[sq + 3, sk + 5], 34, 4);
    let window = big
        .view()
        .narrow(0, 2, sq)
        .unwrap()
        .narrow(1, 4, sk)
        .unwrap();
    assert_eq!(window.strides(), [sk + 5, 1]);
    let compact = window.to_tensor().unwrap();
    for causal in [false, true] {
        let o = opts(causal, None);
        let got = sdpa(&q, &k, &v, Some(window.clone()), &o, &Sequential).unwrap();
        let want = sdpa(&q, &k, &v, Some(compact.view()), &o, &Sequential).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "causal={causal}");
    }
}

#[test]
fn a_mask_whose_rows_are_not_back_to_back_is_a_layout_error_naming_the_mask() {
    let (sq, sk, hd) = (3, 5, 4);
    let q = uniform(&[1, 1, sq, hd], 35);
    let k = uniform(&[1, 1, sk, hd], 36);
    let stored = uniform(&[sk, sq], 37);
    let transposed = stored.view().permute(&[1, 0]).unwrap();
    let err = sdpa(
        &q,
        &k,
        &k,
        Some(transposed),
        &opts(false, None),
        &Sequential,
    )
    .unwrap_err();
    assert_eq!(
        err,
        KernelError::Shape(ShapeError::Layout {
            op: "sdpa",
            operand: "mask",
            shape: vec![sq, sk],
            strides: vec![1, sq],
            expected: "the last stride 1",
        })
    );
}

/// One row over 300 keys (tiles of 128) whose mask hides the whole first tile.
fn first_tile_hidden(sk: usize, nan_at: Option<usize>) -> Tensor {
    Tensor::from_fn(vec![1, sk], |j| match j {
        j if Some(j) == nan_at => f32::NAN,
        0..128 => f32::NEG_INFINITY,
        _ => 0.0,
    })
    .unwrap()
}

#[test]
fn nan_in_a_value_of_a_fully_hidden_tile_reaches_a_row_that_sees_a_later_tile() {
    let (sk, hd) = (300, 8);
    let q = uniform(&[1, 1, 1, hd], 38);
    let k = uniform(&[1, 1, sk, hd], 39);
    let mut values = uniform(&[1, 1, sk, hd], 40).data().to_vec();
    values[5 * hd + 3] = f32::NAN;
    let v = Tensor::new(vec![1, 1, sk, hd], values).unwrap();
    let mask = first_tile_hidden(sk, None);
    let out = sdpa(
        &q,
        &k,
        &v,
        Some(mask.view()),
        &opts(false, None),
        &Sequential,
    )
    .unwrap();
    for (d, x) in out.data().iter().enumerate() {
        assert_eq!(x.is_nan(), d == 3, "element {d}: {x}");
    }
}

#[test]
fn a_nan_score_in_a_fully_hidden_tile_makes_the_row_nan_though_later_tiles_are_seen() {
    let (sk, hd) = (300, 8);
    let q = uniform(&[1, 1, 1, hd], 41);
    let k = uniform(&[1, 1, sk, hd], 42);
    let v = uniform(&[1, 1, sk, hd], 43);
    let mask = first_tile_hidden(sk, Some(7));
    let out = sdpa(
        &q,
        &k,
        &v,
        Some(mask.view()),
        &opts(false, None),
        &Sequential,
    )
    .unwrap();
    assert!(out.data().iter().all(|x| x.is_nan()), "{:?}", out.data());
}

#[test]
fn rows_whose_keys_start_tiles_later_match_the_f64_reference() {
    // Each row's mask hides a different prefix (0, 1, 2 or 3 whole tiles and a bit), so rows
    // of one block start weighing in different tiles.
    let (sq, sk, hd) = (8, 520, 32);
    let q = uniform(&[1, 1, sq, hd], 44);
    let k = uniform(&[1, 1, sk, hd], 45);
    let v = uniform(&[1, 1, sk, hd], 46);
    let mask = Tensor::from_fn(vec![sq, sk], |i| {
        let (r, j) = (i / sk, i % sk);
        if j < (r % 4) * 130 {
            f32::NEG_INFINITY
        } else {
            0.0
        }
    })
    .unwrap();
    for causal in [false, true] {
        let got = sdpa(
            &q,
            &k,
            &v,
            Some(mask.view()),
            &opts(causal, None),
            &Sequential,
        )
        .unwrap();
        let err = max_abs_diff(
            got.data(),
            &reference_sdpa(&q, &k, &v, Some(&mask), None, causal),
        );
        assert!(err <= 1e-5, "causal={causal}: max abs error {err:e}");
    }
}

/// Row `i` of `t` `[1, 1, rows, n]` as its own `[1, 1, 1, n]` tensor.
fn row_of(t: &Tensor, i: usize) -> Tensor {
    let n = t.shape()[3];
    Tensor::new(vec![1, 1, 1, n], t.data()[i * n..(i + 1) * n].to_vec()).unwrap()
}

#[test]
fn a_decode_row_has_the_bits_of_that_row_inside_a_prefill_block() {
    // Five query rows go through the packed key tiles (one block of four, one row on its
    // own); a single row reads the keys in place. Both must give each row the same bits, in
    // every variant and mode, on ragged head dims and key counts past several tiles.
    let variants = available_variants();
    for (hd, sk) in [(64, 300), (13, 17), (8, 129), (3, 9), (80, 700)] {
        let q = uniform(&[1, 1, 5, hd], 11);
        let k = uniform(&[1, 1, sk, hd], 12);
        let v = uniform(&[1, 1, sk, hd], 13);
        let mask = sparse_mask(&[1, 1, 5, sk], 14, 9);
        for variant in &variants {
            for precision in [Precision::Portable, Precision::Native] {
                let config = KernelConfig::new(variant.clone()).with_precision(precision);
                let run = |q: &Tensor, mask: &Tensor| {
                    scaled_dot_product_attention_with(
                        &config,
                        q,
                        &k,
                        &v,
                        Some(mask.view()),
                        &opts(false, None),
                        &Sequential,
                    )
                    .unwrap()
                };
                let block = run(&q, &mask);
                for i in 0..5 {
                    let alone = run(&row_of(&q, i), &row_of(&mask, i));
                    assert_eq!(
                        alone.to_bits(),
                        block.to_bits()[i * hd..(i + 1) * hd],
                        "{} {precision:?} hd={hd} sk={sk} row {i}",
                        variant.name()
                    );
                }
            }
        }
    }
}

#[test]
fn decode_steps_over_several_spans_of_key_tiles_have_the_bits_of_a_prefill_row() {
    // A decode group scores a span of key tiles (up to 16 of 128 keys) before it weighs any of
    // them, keeping each tile's weights and rescaling for its weighted sum. Over 4296 keys (two
    // whole spans and a ragged one), with a mask that hides every key of the first span and
    // some of the next (the running max stays -inf across a span boundary), each head's row
    // must have the bits of the same row inside a five-row prefill block, which goes a tile at
    // a time: lone rows, stacked heads below a block, a block, two blocks; and three causal
    // rows (each sees one key more, in the last tile) against the last three of a causal
    // block. In every variant and mode, at a head dim of whole 64-value rows and one that is
    // not.
    let variants = available_variants();
    let sk = 2 * 16 * 128 + 200;
    let mask = Tensor::from_fn(vec![1, 1, 1, sk], |j| match j {
        0..2100 => f32::NEG_INFINITY,
        j if j % 37 == 0 => f32::NEG_INFINITY,
        j => (j % 11) as f32 * 0.25,
    })
    .unwrap();
    let mask_rows = |n: usize| Tensor::new(vec![1, 1, n, sk], mask.data().repeat(n)).unwrap();
    let (rows3, rows5) = (mask_rows(3), mask_rows(5));
    for hd in [64, 72] {
        let k = uniform(&[1, 1, sk, hd], 61);
        let v = uniform(&[1, 1, sk, hd], 62);
        let others = uniform(&[1, 1, 4, hd], 63);
        for variant in &variants {
            for precision in [Precision::Portable, Precision::Native] {
                let config = KernelConfig::new(variant.clone()).with_precision(precision);
                let run = |q: &Tensor, mask: &Tensor, causal: bool| {
                    scaled_dot_product_attention_with(
                        &config,
                        q,
                        &k,
                        &v,
                        Some(mask.view()),
                        &opts(causal, None),
                        &Sequential,
                    )
                    .unwrap()
                    .to_bits()
                };
                let what = format!("{} {precision:?} hd={hd}", variant.name());
                for heads in [1, 2, 3, 4, 8] {
                    let q = uniform(&[1, heads, 1, hd], 64);
                    let decode = run(&q, &mask, false);
                    for h in 0..heads {
                        let row = &q.data()[h * hd..(h + 1) * hd];
                        let block = [row, others.data()].concat();
                        let block = Tensor::new(vec![1, 1, 5, hd], block).unwrap();
                        assert_eq!(
                            decode[h * hd..(h + 1) * hd],
                            run(&block, &rows5, false)[..hd],
                            "{what} heads={heads} head {h}"
                        );
                    }
                }
                let q = uniform(&[1, 1, 3, hd], 65);
                let block = [&others.data()[..2 * hd], q.data()].concat();
                let block = Tensor::new(vec![1, 1, 5, hd], block).unwrap();
                assert_eq!(
                    run(&q, &rows3, true),
                    run(&block, &rows5, true)[2 * hd..],
                    "{what} three causal rows"
                );
            }
        }
    }
}

#[test]
fn a_grouped_decode_step_has_the_bits_of_one_head_at_a_time_under_every_schedule() {
    // One query row per head: the heads sharing a K/V head are computed together (in a
    // block of four and more, row by row below that; groups of 2, 3, 6 and 7 padded to whole
    // blocks of four on the wide kernels), however a schedule splits the heads.
    let schedules = all_schedules();
    let (b, sk) = (2, 300);
    for (heads, kv_heads) in [
        (8, 2),
        (6, 3),
        (16, 2),
        (4, 4),
        (8, 1),
        (9, 3),
        (10, 2),
        (12, 2),
        (14, 2),
    ] {
        for hd in [13, 64] {
            let q = uniform(&[b, heads, 1, hd], 21);
            let k = uniform(&[b, kv_heads, sk, hd], 22);
            let v = uniform(&[b, kv_heads, sk, hd], 23);
            let (kt, vt) = (tile_heads(&k, heads), tile_heads(&v, heads));
            let per_head = sparse_mask(&[b, heads, 1, sk], 24, 7);
            let per_batch = sparse_mask(&[b, 1, 1, sk], 25, 5);
            for causal in [false, true] {
                for m in [None, Some(per_head.view()), Some(per_batch.view())] {
                    let o = opts(causal, None);
                    let want = sdpa(&q, &kt, &vt, m.clone(), &o, &Sequential)
                        .unwrap()
                        .to_bits();
                    let what = format!(
                        "H={heads} nKV={kv_heads} hd={hd} causal={causal} mask={:?}",
                        m.as_ref().map(|m| m.shape().to_vec())
                    );
                    let call = SdpaCall {
                        q: &q,
                        k: &k,
                        v: &v,
                        mask: m,
                        options: o,
                    };
                    assert_sdpa_bits_under(&schedules, &forking(), &call, &want, &what);
                }
            }
        }
    }
}

/// Asserts that a decode step (Sq 1) of each `(heads, kv_heads)` group over `sk` keys, at each
/// head dim, gives every stacked row its head's bits computed alone (K and V tiled per query
/// head), in every compiled variant and both modes.
fn assert_stacked_decode_rows_have_each_heads_bits(
    groups: &[(usize, usize)],
    dims: &[usize],
    sk: usize,
    seed: u32,
) {
    let variants = available_variants();
    for &(heads, kv_heads) in groups {
        for &hd in dims {
            let q = uniform(&[1, heads, 1, hd], seed);
            let k = uniform(&[1, kv_heads, sk, hd], seed + 1);
            let v = uniform(&[1, kv_heads, sk, hd], seed + 2);
            let (kt, vt) = (tile_heads(&k, heads), tile_heads(&v, heads));
            for variant in &variants {
                for precision in [Precision::Portable, Precision::Native] {
                    let config = KernelConfig::new(variant.clone()).with_precision(precision);
                    let run = |k: &Tensor, v: &Tensor| {
                        scaled_dot_product_attention_with(
                            &config,
                            &q,
                            k,
                            v,
                            None,
                            &opts(true, None),
                            &Sequential,
                        )
                        .unwrap()
                        .to_bits()
                    };
                    assert_eq!(
                        run(&k, &v),
                        run(&kt, &vt),
                        "{} {precision:?} H={heads} nKV={kv_heads} hd={hd}",
                        variant.name()
                    );
                }
            }
        }
    }
}

#[test]
fn stacked_decode_rows_of_groups_of_three_and_five_have_one_heads_bits_in_every_variant() {
    // Groups of 3 (SmolLM2's 9 over 3) and 5 go as one block of rows below four, or a block of
    // four and one row: each row must equal its head computed alone, in every compiled variant
    // and both modes.
    assert_stacked_decode_rows_have_each_heads_bits(&[(9, 3), (10, 2)], &[13, 64], 300, 31);
}

#[test]
fn stacked_decode_rows_of_groups_of_one_to_four_have_one_heads_bits_in_every_variant() {
    // Groups of 1, 2, 3 and 4 query heads on a K/V head: four stacked rows take the wide score
    // kernel where there is one (32 keys at a time, the values requested by the weighted sum),
    // fewer take the 8-lane ones; each row must equal its head computed alone, in every
    // compiled variant and both modes, over several tiles and a ragged last one, at head dims
    // whose values the wide weighted sum does (64, 128) and does not (80) take.
    assert_stacked_decode_rows_have_each_heads_bits(
        &[(3, 3), (6, 3), (9, 3), (12, 3)],
        &[64, 80, 128],
        700,
        41,
    );
}

/// Two tasks that run in order on the caller, counting the regions opened on them; their
/// helpers are asleep or not as told.
struct CountsRegions {
    asleep: bool,
    regions: std::sync::atomic::AtomicUsize,
}

impl skainet_schedule::Schedule for CountsRegions {
    fn parallelism(&self) -> usize {
        2
    }

    fn name(&self) -> &str {
        "counts-regions"
    }

    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        self.regions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Sequential.for_range(n, grain, body);
    }

    fn helpers_asleep(&self) -> bool {
        self.asleep
    }
}

/// How many regions one causal call of `heads` query heads on `kv_heads` K/V heads opens on
/// two tasks whose helpers are `asleep` or not, after checking it has `Sequential`'s bits.
fn regions_opened(
    config: &KernelConfig,
    asleep: bool,
    [heads, kv_heads, sq, sk]: [usize; 4],
) -> usize {
    let q = uniform(&[1, heads, sq, 64], 1);
    let k = uniform(&[1, kv_heads, sk, 64], 2);
    let v = uniform(&[1, kv_heads, sk, 64], 3);
    let o = opts(true, None);
    let counting = CountsRegions {
        asleep,
        regions: Default::default(),
    };
    let got = scaled_dot_product_attention_with(config, &q, &k, &v, None, &o, &counting).unwrap();
    let want = sdpa(&q, &k, &v, None, &o, &Sequential).unwrap();
    assert_eq!(got.to_bits(), want.to_bits());
    counting.regions.into_inner()
}

#[test]
fn a_call_of_few_pieces_per_task_on_sleeping_helpers_forks_only_from_a_late_helpers_work() {
    let default = KernelConfig::selected();
    // Two heads: 2·2·32·512·64 = 2^22 multiply-adds stay inline, twice that forks (2^23).
    assert_eq!(regions_opened(&default, true, [2, 2, 32, 512]), 0);
    assert_eq!(regions_opened(&default, true, [2, 2, 32, 1024]), 1);
    // Four heads (two pieces per task) fork from 2^22 · 4/3: 2^22 stays inline, 2^23 forks.
    assert_eq!(regions_opened(&default, true, [4, 4, 16, 512]), 0);
    assert_eq!(regions_opened(&default, true, [4, 4, 32, 512]), 1);
    // Eight heads (four pieces per task) fork from 2^18, as every call did before: 2^20 forks.
    assert_eq!(regions_opened(&default, true, [8, 8, 8, 128]), 1);
    // A decode step's pieces are its groups of heads: 8 heads on 2 K/V heads are two pieces,
    // whose late start is half a prefill's work: inline at 2·8·2048·64 = 2^21 and forked at
    // 2^22.
    assert_eq!(regions_opened(&default, true, [8, 2, 1, 2048]), 0);
    assert_eq!(regions_opened(&default, true, [8, 2, 1, 4096]), 1);
    // A threshold the caller sets replaces the bound.
    let set = KernelConfig::selected().with_min_parallel_work(1 << 18);
    assert_eq!(regions_opened(&set, true, [2, 2, 32, 512]), 1);
}

#[test]
fn a_call_of_few_pieces_per_task_on_awake_helpers_forks_from_the_minimum_work() {
    let default = KernelConfig::selected();
    // 2^18 (2 heads × 8 queries × 128 keys) forks; 2^17 (one head fewer) stays inline.
    assert_eq!(regions_opened(&default, false, [2, 2, 8, 128]), 1);
    assert_eq!(regions_opened(&default, false, [1, 1, 8, 128]), 0);
    assert_eq!(regions_opened(&default, false, [2, 2, 32, 512]), 1);
    assert_eq!(regions_opened(&default, false, [8, 2, 1, 2048]), 1);
}
