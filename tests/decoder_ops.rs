#![cfg(not(feature = "loom"))]
//! The decoder ops (RMSNorm, RoPE, SiLU gate, broadcasting add, embedding): bit parity
//! under every schedule and compiled variant, f64 references within 1e-5, one error per
//! invalid input class.

mod common;

use common::{all_schedules, uniform};
use skainet_schedule::{
    add_broadcast_with, cpu_kernels, embedding_with, rms_norm, rms_norm_with, rope,
    rope_interleaved, rope_interleaved_with, rope_with, silu_mul, silu_mul_with, KernelConfig,
    KernelError, KernelProvider, Schedule, Sequential, ShapeError, Tensor, TensorView,
};

/// Every available compiled variant, each forced to open a region on any size.
fn configs() -> Vec<(String, KernelConfig)> {
    cpu_kernels()
        .providers()
        .iter()
        .filter(|p| p.is_available())
        .map(|p| {
            (
                p.name().to_string(),
                KernelConfig::new(p.clone()).with_min_parallel_work(0),
            )
        })
        .collect()
}

/// Asserts that `run` gives `want`'s bits under every schedule and every variant.
fn assert_parity(want: &Tensor, run: impl Fn(&KernelConfig, &dyn Schedule) -> Tensor) {
    for (name, config) in configs() {
        let got = run(&config, &Sequential);
        assert_eq!(got.to_bits(), want.to_bits(), "variant {name}");
        for s in all_schedules() {
            let got = run(&config, s.as_ref());
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "variant {name}, {}",
                s.name()
            );
        }
    }
}

fn max_err(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (f64::from(g) - w).abs())
        .fold(0.0, f64::max)
}

fn shape_err(err: KernelError) -> ShapeError {
    match err {
        KernelError::Shape(e) => e,
        other => panic!("not a shape error: {other:?}"),
    }
}

// ---- rms_norm ----

fn reference_rms_norm(x: &Tensor, w: &Tensor, eps: f32) -> Vec<f64> {
    let d = w.len();
    let mut out = Vec::new();
    for row in x.data().chunks(d) {
        let ms = row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / d as f64;
        let inv = 1.0 / (ms + f64::from(eps)).sqrt();
        out.extend(
            row.iter()
                .zip(w.data())
                .map(|(&v, &g)| f64::from(v) * inv * f64::from(g)),
        );
    }
    out
}

#[test]
fn rms_norm_is_bit_identical_under_every_schedule_and_variant() {
    for d in [1, 7, 64, 576] {
        let x = uniform(&[3, 37, d], 1);
        let w = uniform(&[d], 2);
        let want = rms_norm(&x, &w, 1e-5, &Sequential).unwrap();
        assert_parity(&want, |c, s| rms_norm_with(c, &x, &w, 1e-5, s).unwrap());
    }
}

#[test]
fn rms_norm_matches_the_f64_reference_within_1e_5() {
    let x = uniform(&[40, 576], 3);
    let w = uniform(&[576], 4);
    let got = rms_norm(&x, &w, 1e-5, &Sequential).unwrap();
    let err = max_err(got.data(), &reference_rms_norm(&x, &w, 1e-5));
    assert!(err <= 1e-5, "max abs error {err:e}");
}

#[test]
fn rms_norm_of_a_strided_view_equals_rms_norm_of_its_copy() {
    let buf = uniform(&[4, 10], 5);
    let view = TensorView::strided(buf.data(), vec![4, 6], vec![10, 1], 2).unwrap();
    let w = uniform(&[6], 6);
    let want = rms_norm(&view.to_tensor().unwrap(), &w, 1e-6, &Sequential).unwrap();
    let got = rms_norm(&view, &w, 1e-6, &Sequential).unwrap();
    assert_eq!(got.to_bits(), want.to_bits());
}

#[test]
fn rms_norm_weight_of_another_length_is_an_error() {
    let err = rms_norm(&uniform(&[2, 8], 1), &uniform(&[4], 2), 1e-5, &Sequential).unwrap_err();
    assert_eq!(
        shape_err(err.clone()),
        ShapeError::NormWeight {
            op: "rms_norm",
            x: vec![2, 8],
            weight: vec![4]
        }
    );
    assert_eq!(
        err.to_string(),
        "rms_norm: weight [4] is not one value per feature of x [2, 8]"
    );
}

#[test]
fn rms_norm_of_a_scalar_is_a_rank_error() {
    let x = Tensor::new(vec![], vec![1.0]).unwrap();
    let err = rms_norm(&x, &uniform(&[1], 2), 1e-5, &Sequential).unwrap_err();
    assert!(matches!(
        shape_err(err),
        ShapeError::Rank {
            op: "rms_norm",
            operand: "x",
            ..
        }
    ));
}

#[test]
fn rms_norm_rejects_a_view_whose_rows_are_strided() {
    let t = uniform(&[4, 3], 1);
    let x = t.view().permute(&[1, 0]).unwrap();
    let err = rms_norm(&x, &uniform(&[4], 2), 1e-5, &Sequential).unwrap_err();
    assert_eq!(
        shape_err(err),
        ShapeError::Layout {
            op: "rms_norm",
            operand: "x",
            shape: vec![3, 4],
            strides: vec![1, 3],
            expected: "the last stride 1"
        }
    );
}

// ---- rope ----

fn reference_rope(x: &Tensor, offset: usize, theta: f64) -> Vec<f64> {
    let [_, _, s, hd] = *x.shape() else { panic!() };
    let half = hd / 2;
    let mut out = vec![0.0; x.len()];
    for (r, row) in x.data().chunks(hd).enumerate() {
        let pos = (offset + r % s) as f64;
        for j in 0..half {
            let a = pos * theta.powf(-((2 * j) as f64) / hd as f64);
            let (x1, x2) = (f64::from(row[j]), f64::from(row[j + half]));
            out[r * hd + j] = x1 * a.cos() - x2 * a.sin();
            out[r * hd + j + half] = x2 * a.cos() + x1 * a.sin();
        }
    }
    out
}

#[test]
fn rope_is_bit_identical_under_every_schedule_and_variant() {
    for (s, hd, offset) in [
        (1, 64, 0),
        (1, 64, 300),
        (33, 64, 0),
        (5, 2, 7),
        (16, 18, 2040),
    ] {
        let x = uniform(&[2, 3, s, hd], 1);
        let want = rope(&x, offset, 10_000.0, &Sequential).unwrap();
        assert_parity(&want, |c, sch| {
            rope_with(c, &x, offset, 10_000.0, sch).unwrap()
        });
    }
}

#[test]
fn rope_matches_the_f64_reference_within_1e_5_up_to_position_4096() {
    for offset in [0, 1000, 4000] {
        let x = uniform(&[1, 3, 96, 64], 7);
        let got = rope(&x, offset, 10_000.0, &Sequential).unwrap();
        let err = max_err(got.data(), &reference_rope(&x, offset, 10_000.0));
        assert!(err <= 1e-5, "offset {offset}: max abs error {err:e}");
    }
}

#[test]
fn rope_of_one_position_at_an_offset_equals_that_row_of_a_longer_call() {
    // The decode step's rope (one row at position p) is the prefill's row p.
    let x = uniform(&[1, 2, 9, 16], 8);
    let all = rope(&x, 0, 10_000.0, &Sequential).unwrap();
    let view = x.view().narrow(2, 6, 1).unwrap();
    let one = rope(&view, 6, 10_000.0, &Sequential).unwrap();
    let want = all.view().narrow(2, 6, 1).unwrap().to_tensor().unwrap();
    assert_eq!(one.to_bits(), want.to_bits());
}

#[test]
fn rope_reads_a_permuted_projection_without_a_copy() {
    // [b, s, heads, hd] as produced by a projection, seen as [b, heads, s, hd].
    let raw = uniform(&[1, 5, 3, 8], 9);
    let x = raw.view().permute(&[0, 2, 1, 3]).unwrap();
    let want = rope(&x.to_tensor().unwrap(), 4, 500.0, &Sequential).unwrap();
    let got = rope(&x, 4, 500.0, &Sequential).unwrap();
    assert_eq!(got.to_bits(), want.to_bits());
}

/// `x` with each row's adjacent pairs `(2j, 2j + 1)` moved to `(j, j + hd/2)` (`back` undoes it).
fn deinterleave(x: &Tensor, back: bool) -> Tensor {
    let hd = *x.shape().last().unwrap();
    let half = hd / 2;
    let mut out = x.data().to_vec();
    for (o, row) in out.chunks_mut(hd).zip(x.data().chunks(hd)) {
        for j in 0..half {
            if back {
                (o[2 * j], o[2 * j + 1]) = (row[j], row[j + half]);
            } else {
                (o[j], o[j + half]) = (row[2 * j], row[2 * j + 1]);
            }
        }
    }
    Tensor::new(x.shape().to_vec(), out).unwrap()
}

#[test]
fn rope_interleaved_is_rope_on_the_pairs_moved_to_halves_bit_for_bit() {
    // The same angles and the same two operations per value: only the pairing differs.
    for (s, hd, offset) in [(1, 64, 0), (7, 64, 4000), (3, 2, 1)] {
        let x = uniform(&[1, 3, s, hd], 11);
        let got = rope_interleaved(&x, offset, 100_000.0, &Sequential).unwrap();
        let halves = rope(&deinterleave(&x, false), offset, 100_000.0, &Sequential).unwrap();
        assert_eq!(
            got.to_bits(),
            deinterleave(&halves, true).to_bits(),
            "s {s}, hd {hd}"
        );
    }
}

#[test]
fn rope_interleaved_is_bit_identical_under_every_schedule_and_variant() {
    let x = uniform(&[2, 3, 17, 64], 12);
    let want = rope_interleaved(&x, 5, 100_000.0, &Sequential).unwrap();
    assert_parity(&want, |c, sch| {
        rope_interleaved_with(c, &x, 5, 100_000.0, sch).unwrap()
    });
}

#[test]
fn rope_interleaved_rejects_an_odd_head_dim_as_rope_does() {
    let err = rope_interleaved(&uniform(&[1, 2, 3, 5], 1), 0, 10_000.0, &Sequential).unwrap_err();
    assert_eq!(
        shape_err(err),
        ShapeError::RopeOddHeadDim {
            x: vec![1, 2, 3, 5]
        }
    );
}

#[test]
fn rope_with_an_odd_head_dim_is_an_error() {
    let err = rope(&uniform(&[1, 2, 3, 5], 1), 0, 10_000.0, &Sequential).unwrap_err();
    assert_eq!(
        shape_err(err.clone()),
        ShapeError::RopeOddHeadDim {
            x: vec![1, 2, 3, 5]
        }
    );
    assert_eq!(
        err.to_string(),
        "rope: head dimension of x [1, 2, 3, 5] is odd; it must split into pairs"
    );
}

#[test]
fn rope_positions_that_overflow_are_an_error() {
    let err = rope(
        &uniform(&[1, 1, 2, 4], 1),
        usize::MAX,
        10_000.0,
        &Sequential,
    )
    .unwrap_err();
    assert_eq!(
        shape_err(err),
        ShapeError::RopePositions {
            x: vec![1, 1, 2, 4],
            offset: usize::MAX
        }
    );
}

#[test]
fn rope_needs_rank_4() {
    let err = rope(&uniform(&[2, 4], 1), 0, 10_000.0, &Sequential).unwrap_err();
    assert!(matches!(
        shape_err(err),
        ShapeError::Rank {
            op: "rope",
            operand: "x",
            expected: "4",
            ..
        }
    ));
}

// ---- silu_mul ----

#[test]
fn silu_mul_is_bit_identical_under_every_schedule_and_variant() {
    let g = uniform(&[130, 1536], 1);
    let u = uniform(&[130, 1536], 2);
    let want = silu_mul(&g, &u, &Sequential).unwrap();
    assert_parity(&want, |c, s| silu_mul_with(c, &g, &u, s).unwrap());
}

#[test]
fn silu_mul_matches_the_f64_reference_within_1e_5() {
    // Gates over [-12, 12): the range where silu is neither 0 nor the identity.
    let g = Tensor::from_fn(vec![4, 1000], |i| (i as f32 - 2000.0) * 0.006).unwrap();
    let u = uniform(&[4, 1000], 3);
    let got = silu_mul(&g, &u, &Sequential).unwrap();
    let want: Vec<f64> = g
        .data()
        .iter()
        .zip(u.data())
        .map(|(&g, &u)| {
            let g = f64::from(g);
            g / (1.0 + (-g).exp()) * f64::from(u)
        })
        .collect();
    let err = max_err(got.data(), &want);
    assert!(err <= 1e-5, "max abs error {err:e}");
}

#[test]
fn silu_mul_of_extreme_gates_is_finite() {
    let g = Tensor::new(vec![4], vec![-1000.0, -90.0, 90.0, 1000.0]).unwrap();
    let u = Tensor::new(vec![4], vec![1.0; 4]).unwrap();
    let got = silu_mul(&g, &u, &Sequential).unwrap();
    assert_eq!(got.data(), [-0.0, -0.0, 90.0, 1000.0]);
}

#[test]
fn silu_mul_of_different_shapes_is_an_error() {
    let err = silu_mul(&uniform(&[2, 3], 1), &uniform(&[3, 2], 2), &Sequential).unwrap_err();
    assert_eq!(
        err.to_string(),
        "silu_mul: operands [2, 3] and [3, 2] have different shapes"
    );
}

// ---- add_broadcast ----

#[test]
fn add_broadcast_is_bit_identical_under_every_schedule_and_variant() {
    for (a, b) in [
        (vec![130, 576], vec![130, 576]),
        (vec![130, 576], vec![576]),
        (vec![2, 1, 576], vec![65, 1]),
        (vec![], vec![3, 4]),
    ] {
        let (x, y) = (uniform(&a, 1), uniform(&b, 2));
        let want = add_broadcast_with(&KernelConfig::selected(), &x, &y, &Sequential).unwrap();
        assert_parity(&want, |c, s| add_broadcast_with(c, &x, &y, s).unwrap());
    }
}

#[test]
fn add_broadcast_adds_each_element_once() {
    let x = uniform(&[2, 3, 4], 1);
    let y = uniform(&[3, 1], 2);
    let got = add_broadcast_with(&KernelConfig::selected(), &x, &y, &Sequential).unwrap();
    assert_eq!(got.shape(), [2, 3, 4]);
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                let want = x.get(&[i, j, k]).unwrap() + y.get(&[j, 0]).unwrap();
                assert_eq!(got.get(&[i, j, k]).unwrap().to_bits(), want.to_bits());
            }
        }
    }
}

#[test]
fn add_broadcast_reads_strided_views() {
    let t = uniform(&[4, 3], 1);
    let x = t.view().permute(&[1, 0]).unwrap();
    let y = uniform(&[3, 4], 2);
    let cfg = KernelConfig::selected();
    let want = add_broadcast_with(&cfg, &x.to_tensor().unwrap(), &y, &Sequential).unwrap();
    let got = add_broadcast_with(&cfg, &x, &y, &Sequential).unwrap();
    assert_eq!(got.to_bits(), want.to_bits());
}

#[test]
fn shapes_that_do_not_broadcast_are_an_error() {
    let cfg = KernelConfig::selected();
    let err =
        add_broadcast_with(&cfg, &uniform(&[2, 3], 1), &uniform(&[2], 2), &Sequential).unwrap_err();
    assert_eq!(
        shape_err(err.clone()),
        ShapeError::Broadcast {
            op: "add",
            a: vec![2, 3],
            b: vec![2]
        }
    );
    assert_eq!(
        err.to_string(),
        "add: operands [2, 3] and [2] do not broadcast together"
    );
}

// ---- embedding ----

#[test]
fn embedding_is_bit_identical_under_every_schedule_and_variant() {
    let table = uniform(&[1000, 64], 1);
    let ids: Vec<usize> = (0..300).map(|i| (i * 7919) % 1000).collect();
    let cfg = KernelConfig::selected();
    let want = embedding_with(&cfg, &table, &ids, &Sequential).unwrap();
    assert_parity(&want, |c, s| embedding_with(c, &table, &ids, s).unwrap());
}

#[test]
fn embedding_copies_the_named_rows() {
    let table = uniform(&[10, 3], 1);
    let got = embedding_with(&KernelConfig::selected(), &table, &[9, 0, 9], &Sequential).unwrap();
    assert_eq!(got.shape(), [3, 3]);
    let row = |i: usize| table.data()[i * 3..i * 3 + 3].to_vec();
    assert_eq!(got.data(), [row(9), row(0), row(9)].concat());
}

#[test]
fn an_embedding_id_past_the_vocabulary_is_an_error() {
    let table = uniform(&[10, 3], 1);
    let err =
        embedding_with(&KernelConfig::selected(), &table, &[1, 10, 11], &Sequential).unwrap_err();
    assert_eq!(
        shape_err(err.clone()),
        ShapeError::EmbeddingId {
            table: vec![10, 3],
            index: 1,
            id: 10
        }
    );
    assert_eq!(
        err.to_string(),
        "embedding: token id 10 (at index 1) is not a row of the table [10, 3]"
    );
}

#[test]
fn an_embedding_table_of_rank_1_is_an_error() {
    let err = embedding_with(
        &KernelConfig::selected(),
        &uniform(&[10], 1),
        &[0],
        &Sequential,
    )
    .unwrap_err();
    assert!(matches!(
        shape_err(err),
        ShapeError::Rank {
            op: "embedding",
            operand: "table",
            ..
        }
    ));
}
