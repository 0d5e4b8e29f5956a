#![cfg(not(feature = "loom"))]
//! matmul and linear (output tiles, or output columns for a few rows) and conv2d (batch ×
//! out_channels): bit parity under every schedule in both precision modes, f64 numerics within
//! the documented bound, one error per invalid input class.

mod common;

use common::{all_schedules, max_abs_diff, uniform};
use skainet_schedule::KernelProvider;
use skainet_schedule::Sequential;
use skainet_schedule::ShapeError;
use skainet_schedule::Tensor;
use skainet_schedule::{
    conv2d, conv2d_with, cpu_kernels, linear, linear_with, matmul, matmul_with, Conv2dOptions,
    KernelConfig, KernelError, Precision,
};

fn forking() -> KernelConfig {
    KernelConfig::selected().with_min_parallel_work(0)
}

fn reference_matmul(a: &Tensor, b: &Tensor) -> Vec<f64> {
    let k = *a.shape().last().unwrap();
    let n = b.shape()[1];
    let rows: usize = a.shape()[..a.rank() - 1].iter().product();
    let mut out = vec![0.0; rows * n];
    for r in 0..rows {
        for c in 0..n {
            for p in 0..k {
                out[r * n + c] += f64::from(a.data()[r * k + p]) * f64::from(b.data()[p * n + c]);
            }
        }
    }
    out
}

fn reference_conv(
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    o: &Conv2dOptions,
) -> (Vec<usize>, Vec<f64>) {
    let [n, c, h, w] = *input.shape() else {
        panic!()
    };
    let [oc, _, kh, kw] = *weight.shape() else {
        panic!()
    };
    let oh = (h + 2 * o.padding[0] - kh) / o.stride[0] + 1;
    let ow = (w + 2 * o.padding[1] - kw) / o.stride[1] + 1;
    let mut out = vec![0.0; n * oc * oh * ow];
    for bi in 0..n {
        for f in 0..oc {
            for y in 0..oh {
                for x in 0..ow {
                    let mut acc = bias.map_or(0.0, |b| f64::from(b.data()[f]));
                    for ch in 0..c {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (y * o.stride[0] + ky) as isize - o.padding[0] as isize;
                                let ix = (x * o.stride[1] + kx) as isize - o.padding[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let iv = input.data()
                                    [((bi * c + ch) * h + iy as usize) * w + ix as usize];
                                let wv = weight.data()[((f * c + ch) * kh + ky) * kw + kx];
                                acc += f64::from(iv) * f64::from(wv);
                            }
                        }
                    }
                    out[((bi * oc + f) * oh + y) * ow + x] = acc;
                }
            }
        }
    }
    (vec![n, oc, oh, ow], out)
}

// ---- matmul ----

/// Shapes `(rows, k, n)` that are multiples of no blocking constant: one row, the few-row path
/// (3), a ragged micro-tile edge (7, 129), more than one `KC` slice (300), more than one column
/// tile (1000), more than one pass of the few-row path over a `[k, n]` weight (600 columns for
/// two rows, 4100 for one).
const RAGGED: [(usize, usize, usize); 8] = [
    (1, 129, 1000),
    (3, 7, 129),
    (7, 300, 129),
    (129, 1, 7),
    (100, 300, 1000),
    (1, 1000, 7),
    (2, 9, 600),
    (1, 3, 4100),
];

fn precisions() -> [KernelConfig; 2] {
    [forking(), forking().with_precision(Precision::Native)]
}

/// The f64 product of `a [m, k]` with `b` (`[k, n]`, or `[n, k]` when `transposed`), and the
/// bound each f32 element must meet: `k · 2⁻²³ · Σ|aᵢ·bᵢ|` — twice the first-order bound
/// `k·u·Σ|aᵢ·bᵢ|` (u = 2⁻²⁴) of any summation order, fused or not.
fn reference(
    a: &[f32],
    b: &[f32],
    m: usize,
    k: usize,
    n: usize,
    transposed: bool,
) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(m * n);
    for r in 0..m {
        for c in 0..n {
            let (mut sum, mut abs) = (0.0f64, 0.0f64);
            for p in 0..k {
                let bv = if transposed {
                    b[c * k + p]
                } else {
                    b[p * n + c]
                };
                let t = f64::from(a[r * k + p]) * f64::from(bv);
                sum += t;
                abs += t.abs();
            }
            out.push((sum, k as f64 * f64::powi(2.0, -23) * abs));
        }
    }
    out
}

fn assert_within_bound(got: &[f32], want: &[(f64, f64)], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (&g, &(w, bound))) in got.iter().zip(want).enumerate() {
        assert!(
            (f64::from(g) - w).abs() <= bound,
            "{what}: element {i} = {g}, reference {w}, bound {bound:e}"
        );
    }
}

#[test]
fn matmul_is_bit_identical_under_every_schedule_in_both_precisions_on_ragged_shapes() {
    let schedules = all_schedules();
    for (m, k, n) in RAGGED {
        let (a, b) = (uniform(&[m, k], 5), uniform(&[k, n], 6));
        for config in precisions() {
            let want = matmul_with(&config, &a, &b, &Sequential).unwrap();
            for s in &schedules {
                let got = matmul_with(&config, &a, &b, s.as_ref()).unwrap();
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{} {:?} [{m}, {k}]x[{k}, {n}]",
                    s.name(),
                    config.precision()
                );
            }
        }
    }
}

#[test]
fn a_one_row_matmul_wider_than_one_pass_has_the_bits_of_its_narrow_pieces() {
    // Sequential runs the whole 4133-column range with the output as its accumulators; the
    // other schedules cut it into pieces narrower than a pass, which accumulate on the stack.
    let (m, k, n) = (1, 19, 4133);
    let (a, b) = (uniform(&[m, k], 7), uniform(&[k, n], 8));
    let want_bound = reference(a.data(), b.data(), m, k, n, false);
    for config in precisions() {
        let want = matmul_with(&config, &a, &b, &Sequential).unwrap();
        assert_within_bound(want.data(), &want_bound, "sequential one-row matmul");
        for s in all_schedules() {
            let got = matmul_with(&config, &a, &b, s.as_ref()).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{}", s.name());
        }
    }
}

#[test]
fn a_few_row_matmul_over_a_weight_above_16_mib_keeps_the_sequential_order() {
    // 70 × 60 000 values (16.8 MB): the few-row path requests the weight rows ahead (a larger
    // weight than the last-level cache is taken to be read from memory). The portable mode's
    // every element is `((0 + a₀·b₀) + a₁·b₁) + …` in increasing inner index, whatever is
    // requested; both modes give one answer under every schedule.
    let (k, n) = (70, 60_000);
    let b = uniform(&[k, n], 14);
    for m in [1, 2] {
        let a = uniform(&[m, k], 15);
        let portable = matmul_with(&forking(), &a, &b, &Sequential).unwrap();
        for (i, &got) in portable.data().iter().enumerate() {
            let (r, c) = (i / n, i % n);
            let want = (0..k).fold(0.0f32, |acc, p| {
                acc + a.data()[r * k + p] * b.data()[p * n + c]
            });
            assert_eq!(got.to_bits(), want.to_bits(), "{m} rows, element {i}");
        }
        for config in precisions() {
            let want = matmul_with(&config, &a, &b, &Sequential).unwrap();
            for s in all_schedules() {
                let got = matmul_with(&config, &a, &b, s.as_ref()).unwrap();
                assert_eq!(got.to_bits(), want.to_bits(), "{} {m} rows", s.name());
            }
        }
    }
}

/// A two-task schedule that records the `(n, grain)` of every region and runs it inline.
#[derive(Default)]
struct RecordsGrains(std::sync::Mutex<Vec<(usize, usize)>>);

impl skainet_schedule::Schedule for RecordsGrains {
    fn parallelism(&self) -> usize {
        2
    }

    fn name(&self) -> &str {
        "records-grains"
    }

    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        self.0.lock().unwrap().push((n, grain));
        Sequential.for_range(n, grain, body);
    }
}

#[test]
fn a_one_row_linear_lets_the_schedule_cut_its_columns_one_by_one() {
    // A grain of one column: the pool cuts the region into four pieces per task, so the caller
    // takes the share of a helper that wakes late (one range per task would wait for it).
    let (x, w) = (uniform(&[1, 96], 1), uniform(&[1000, 96], 2));
    for config in precisions() {
        let recorder = RecordsGrains::default();
        let forked = config.clone().with_min_parallel_work(0);
        let got = linear_with(&forked, &x, &w, &recorder).unwrap();
        let want = linear_with(&config, &x, &w, &Sequential).unwrap();
        assert_eq!(got.to_bits(), want.to_bits());
        assert_eq!(*recorder.0.lock().unwrap(), [(1000, 1)]);
    }
}

#[test]
fn linear_is_bit_identical_under_every_schedule_in_both_precisions_on_ragged_shapes() {
    let schedules = all_schedules();
    for (m, k, n) in RAGGED {
        let (x, w) = (uniform(&[m, k], 7), uniform(&[n, k], 8));
        for config in precisions() {
            let want = linear_with(&config, &x, &w, &Sequential).unwrap();
            for s in &schedules {
                let got = linear_with(&config, &x, &w, s.as_ref()).unwrap();
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{} {:?} [{m}, {k}]x[{n}, {k}]T",
                    s.name(),
                    config.precision()
                );
            }
        }
    }
}

#[test]
fn matmul_and_linear_meet_the_f64_bound_in_both_precisions() {
    for (m, k, n) in RAGGED {
        let (a, b) = (uniform(&[m, k], 9), uniform(&[k, n], 10));
        let w = uniform(&[n, k], 11);
        for config in precisions() {
            let what = format!("{:?} [{m}, {k}, {n}]", config.precision());
            let got = matmul_with(&config, &a, &b, &Sequential).unwrap();
            let want = reference(a.data(), b.data(), m, k, n, false);
            assert_within_bound(got.data(), &want, &format!("matmul {what}"));
            let got = linear_with(&config, &a, &w, &Sequential).unwrap();
            let want = reference(a.data(), w.data(), m, k, n, true);
            assert_within_bound(got.data(), &want, &format!("linear {what}"));
        }
    }
}

#[test]
fn linear_above_four_rows_is_matmul_with_the_transposed_weight_bit_for_bit() {
    let (m, k, n) = (9, 300, 37);
    let (x, w) = (uniform(&[m, k], 12), uniform(&[n, k], 13));
    let wt = Tensor::from_fn(vec![k, n], |i| w.data()[(i % n) * k + i / n]).unwrap();
    for config in precisions() {
        assert_eq!(
            linear_with(&config, &x, &w, &Sequential).unwrap().to_bits(),
            matmul_with(&config, &x, &wt, &Sequential)
                .unwrap()
                .to_bits(),
            "{:?}",
            config.precision()
        );
    }
}

#[test]
fn linear_keeps_the_leading_dimensions_of_x() {
    let x = uniform(&[2, 3, 5], 14);
    let w = uniform(&[4, 5], 15);
    let out = linear(&x, &w, &Sequential).unwrap();
    assert_eq!(out.shape(), [2, 3, 4]);
    let flat = linear(
        &Tensor::new(vec![6, 5], x.data().to_vec()).unwrap(),
        &w,
        &Sequential,
    );
    assert_eq!(out.to_bits(), flat.unwrap().to_bits());
}

#[test]
fn linear_rejects_a_weight_whose_inner_dimension_differs() {
    let e = linear(&uniform(&[2, 5], 1), &uniform(&[4, 6], 2), &Sequential).unwrap_err();
    assert_eq!(
        e,
        KernelError::Shape(ShapeError::MatmulInnerMismatch {
            a: vec![2, 5],
            b: vec![4, 6]
        })
    );
}

#[test]
fn linear_rejects_a_scalar_input() {
    let x = Tensor::new(vec![], vec![1.0]).unwrap();
    let e = linear(&x, &uniform(&[4, 1], 2), &Sequential).unwrap_err();
    assert_eq!(
        e,
        KernelError::Shape(ShapeError::Rank {
            op: "linear",
            operand: "x",
            expected: ">= 1",
            shape: vec![]
        })
    );
}

/// `-(1 + 2⁻¹¹) + x·x` with `x = 1 + 2⁻¹²`: `x·x` rounds to `1 + 2⁻¹¹` (its `2⁻²⁴` is a tie to
/// even), so two roundings give `0`; one gives `2⁻²⁴`. The pair sits at inner indices 0 and
/// 32, the same accumulator of every path (32, 16 or 8 lanes, or one sequential sum).
fn cancelling_pair(rows: usize, n: usize) -> (Tensor, Tensor, Tensor) {
    let x = 1.0 + f32::powi(2.0, -12);
    let k = 33;
    let a = Tensor::from_fn(vec![rows, k], |i| match i % k {
        0 => -(1.0 + f32::powi(2.0, -11)),
        32 => x,
        _ => 0.0,
    })
    .unwrap();
    let b = Tensor::from_fn(vec![k, n], |i| match i / n {
        0 => 1.0,
        32 => x,
        _ => 0.0,
    })
    .unwrap();
    let w = Tensor::from_fn(vec![n, k], |i| match i % k {
        0 => 1.0,
        32 => x,
        _ => 0.0,
    })
    .unwrap();
    (a, b, w)
}

fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[test]
fn portable_rounds_twice_and_native_fuses_where_the_cpu_has_fma() {
    let fused = if has_fma() && cpu_kernels().find("avx2").is_some() {
        f32::powi(2.0, -24)
    } else {
        0.0
    };
    for rows in [1, 3, 6, 13] {
        let (a, b, w) = cancelling_pair(rows, 19);
        for (precision, want) in [(Precision::Portable, 0.0f32), (Precision::Native, fused)] {
            let config = KernelConfig::selected().with_precision(precision);
            for out in [
                matmul_with(&config, &a, &b, &Sequential).unwrap(),
                linear_with(&config, &a, &w, &Sequential).unwrap(),
            ] {
                let bits: Vec<u32> = out.data().iter().map(|v| v.to_bits()).collect();
                assert_eq!(
                    bits,
                    vec![want.to_bits(); rows * 19],
                    "{precision:?} {rows} rows"
                );
            }
        }
    }
}

#[test]
fn matmul_is_bit_identical_under_every_schedule() {
    let schedules = all_schedules();
    for (a_shape, n) in [
        (vec![1, 1], 1),
        (vec![7, 13], 9),
        (vec![2, 3, 33, 64], 40),
        (vec![65, 80], 17),
    ] {
        let k = *a_shape.last().unwrap();
        let a = uniform(&a_shape, 1);
        let b = uniform(&[k, n], 2);
        let want = matmul(&a, &b, &Sequential).unwrap();
        for s in &schedules {
            let got = matmul_with(&forking(), &a, &b, s.as_ref()).unwrap();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} {a_shape:?}x[{k}, {n}]",
                s.name()
            );
        }
    }
}

#[test]
fn matmul_matches_the_f64_reference() {
    for (a_shape, n) in [(vec![3, 5], 4), (vec![2, 7, 31], 9), (vec![64, 128], 33)] {
        let k = *a_shape.last().unwrap();
        let a = uniform(&a_shape, 3);
        let b = uniform(&[k, n], 4);
        let got = matmul(&a, &b, &Sequential).unwrap();
        let mut want_shape = a_shape.clone();
        *want_shape.last_mut().unwrap() = n;
        assert_eq!(got.shape(), want_shape.as_slice());
        let err = max_abs_diff(got.data(), &reference_matmul(&a, &b));
        assert!(err <= 1e-5 * k as f64, "{a_shape:?}: {err:e}");
    }
}

#[test]
fn matmul_with_an_empty_inner_dimension_is_zeros() {
    let a = Tensor::zeros(vec![3, 0]).unwrap();
    let b = Tensor::zeros(vec![0, 2]).unwrap();
    let out = matmul(&a, &b, &Sequential).unwrap();
    assert_eq!(out.shape(), [3, 2]);
    assert!(out.data().iter().all(|x| x.to_bits() == 0));
}

#[test]
fn matmul_rejects_a_rank_one_left_operand() {
    let e = matmul(&uniform(&[4], 1), &uniform(&[4, 2], 2), &Sequential).unwrap_err();
    assert_eq!(
        e,
        KernelError::Shape(ShapeError::Rank {
            op: "matmul",
            operand: "a",
            expected: ">= 2",
            shape: vec![4]
        })
    );
}

#[test]
fn matmul_rejects_a_right_operand_that_is_not_rank_2() {
    let e = matmul(&uniform(&[3, 4], 1), &uniform(&[1, 4, 2], 2), &Sequential).unwrap_err();
    assert_eq!(
        e,
        KernelError::Shape(ShapeError::Rank {
            op: "matmul",
            operand: "b",
            expected: "2",
            shape: vec![1, 4, 2]
        })
    );
}

#[cfg(target_pointer_width = "64")]
#[test]
fn matmul_rejects_an_output_too_large_to_index() {
    // Both operands are empty (k = 0), but the output would hold 2^80 values.
    let a = Tensor::zeros(vec![1 << 40, 0]).unwrap();
    let b = Tensor::zeros(vec![0, 1 << 40]).unwrap();
    assert_eq!(
        matmul(&a, &b, &Sequential).unwrap_err(),
        KernelError::Shape(ShapeError::TooLarge {
            op: "matmul",
            shapes: vec![vec![1 << 40, 0], vec![0, 1 << 40]]
        })
    );
}

#[test]
fn matmul_rejects_mismatched_inner_dimensions() {
    let e = matmul(&uniform(&[3, 4], 1), &uniform(&[5, 2], 2), &Sequential).unwrap_err();
    assert_eq!(
        e,
        KernelError::Shape(ShapeError::MatmulInnerMismatch {
            a: vec![3, 4],
            b: vec![5, 2]
        })
    );
    assert_eq!(
        e.to_string(),
        "matmul: inner dimensions of a [3, 4] and b [5, 2] differ"
    );
}

// ---- conv2d ----

fn conv_cases() -> Vec<(Vec<usize>, Vec<usize>, Conv2dOptions, bool)> {
    let o = |s: usize, p: usize| Conv2dOptions {
        stride: [s, s],
        padding: [p, p],
    };
    vec![
        (vec![1, 1, 3, 3], vec![1, 1, 2, 2], o(1, 0), false),
        (vec![2, 3, 9, 11], vec![4, 3, 3, 3], o(1, 1), true),
        (vec![2, 2, 10, 7], vec![3, 2, 3, 2], o(2, 1), true),
        (
            vec![1, 4, 8, 8],
            vec![5, 4, 1, 1],
            Conv2dOptions {
                stride: [1, 2],
                padding: [0, 3],
            },
            false,
        ),
        (vec![2, 3, 16, 16], vec![8, 3, 5, 5], o(1, 2), true),
    ]
}

#[test]
fn conv2d_is_bit_identical_under_every_schedule() {
    let schedules = all_schedules();
    for (ishape, wshape, o, with_bias) in conv_cases() {
        let input = uniform(&ishape, 1);
        let weight = uniform(&wshape, 2);
        let bias = with_bias.then(|| uniform(&[wshape[0]], 3));
        let want = conv2d(&input, &weight, bias.as_ref(), &o, &Sequential).unwrap();
        for s in &schedules {
            let got =
                conv2d_with(&forking(), &input, &weight, bias.as_ref(), &o, s.as_ref()).unwrap();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} {ishape:?} {wshape:?}",
                s.name()
            );
        }
    }
}

#[test]
fn conv2d_is_bit_identical_under_every_schedule_in_both_precisions_across_tiles() {
    // 750 pixels: two column tiles; 13 output channels: a ragged micro-tile; 27 taps.
    let input = uniform(&[2, 3, 30, 25], 30);
    let weight = uniform(&[13, 3, 3, 3], 31);
    let bias = uniform(&[13], 32);
    let o = Conv2dOptions {
        stride: [1, 1],
        padding: [1, 1],
    };
    for config in precisions() {
        let want = conv2d_with(&config, &input, &weight, Some(&bias), &o, &Sequential).unwrap();
        for s in &all_schedules() {
            let got = conv2d_with(&config, &input, &weight, Some(&bias), &o, s.as_ref()).unwrap();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} {:?}",
                s.name(),
                config.precision()
            );
        }
    }
}

#[test]
fn conv2d_with_a_one_by_one_kernel_is_the_weight_times_the_input_bit_for_bit() {
    let (c, h, w, oc) = (5, 7, 9, 11);
    let input = uniform(&[1, c, h, w], 33);
    let weight = uniform(&[oc, c, 1, 1], 34);
    let conv = conv2d(
        &input,
        &weight,
        None,
        &Conv2dOptions::default(),
        &Sequential,
    )
    .unwrap();
    let w2 = Tensor::new(vec![oc, c], weight.data().to_vec()).unwrap();
    let x2 = Tensor::new(vec![c, h * w], input.data().to_vec()).unwrap();
    let product = matmul(&w2, &x2, &Sequential).unwrap();
    assert_eq!(conv.to_bits(), product.to_bits());
}

#[test]
fn conv2d_matches_the_f64_reference() {
    for (ishape, wshape, o, with_bias) in conv_cases() {
        let input = uniform(&ishape, 4);
        let weight = uniform(&wshape, 5);
        let bias = with_bias.then(|| uniform(&[wshape[0]], 6));
        let got = conv2d(&input, &weight, bias.as_ref(), &o, &Sequential).unwrap();
        let (shape, want) = reference_conv(&input, &weight, bias.as_ref(), &o);
        assert_eq!(got.shape(), shape.as_slice());
        let err = max_abs_diff(got.data(), &want);
        assert!(err <= 1e-5, "{ishape:?} {wshape:?}: {err:e}");
    }
}

#[test]
fn every_available_variant_gives_the_portable_bits_for_matmul_and_conv2d() {
    let registry = cpu_kernels();
    let portable = KernelConfig::new(registry.find("portable").unwrap());
    let a = uniform(&[2, 9, 37], 1);
    let b = uniform(&[37, 21], 2);
    let (input, weight) = (uniform(&[2, 3, 12, 13], 3), uniform(&[4, 3, 3, 3], 4));
    let o = Conv2dOptions {
        stride: [1, 1],
        padding: [1, 1],
    };
    let mm = matmul_with(&portable, &a, &b, &Sequential).unwrap();
    let cv = conv2d_with(&portable, &input, &weight, None, &o, &Sequential).unwrap();
    for variant in registry.providers().iter().filter(|p| p.is_available()) {
        let config = KernelConfig::new(variant.clone());
        assert_eq!(
            matmul_with(&config, &a, &b, &Sequential).unwrap().to_bits(),
            mm.to_bits(),
            "{}",
            variant.name()
        );
        assert_eq!(
            conv2d_with(&config, &input, &weight, None, &o, &Sequential)
                .unwrap()
                .to_bits(),
            cv.to_bits(),
            "{}",
            variant.name()
        );
    }
}

fn conv_err(i: &[usize], w: &[usize], b: Option<&[usize]>, o: Conv2dOptions) -> KernelError {
    let bias = b.map(|s| Tensor::zeros(s.to_vec()).unwrap());
    conv2d(
        &Tensor::zeros(i.to_vec()).unwrap(),
        &Tensor::zeros(w.to_vec()).unwrap(),
        bias.as_ref(),
        &o,
        &Sequential,
    )
    .unwrap_err()
}

#[test]
fn conv2d_rejects_inputs_and_weights_that_are_not_rank_4() {
    let d = Conv2dOptions::default();
    assert_eq!(
        conv_err(&[1, 3, 8], &[2, 3, 3, 3], None, d),
        KernelError::Shape(ShapeError::Rank {
            op: "conv2d",
            operand: "input",
            expected: "4",
            shape: vec![1, 3, 8]
        })
    );
    assert_eq!(
        conv_err(&[1, 3, 8, 8], &[2, 3, 3], None, d),
        KernelError::Shape(ShapeError::Rank {
            op: "conv2d",
            operand: "weight",
            expected: "4",
            shape: vec![2, 3, 3]
        })
    );
}

#[test]
fn conv2d_rejects_a_channel_mismatch() {
    assert_eq!(
        conv_err(&[1, 3, 8, 8], &[2, 4, 3, 3], None, Conv2dOptions::default()),
        KernelError::Shape(ShapeError::ConvChannelMismatch {
            input: vec![1, 3, 8, 8],
            weight: vec![2, 4, 3, 3]
        })
    );
}

#[test]
fn conv2d_rejects_a_bias_that_is_not_one_per_output_channel() {
    let d = Conv2dOptions::default();
    assert_eq!(
        conv_err(&[1, 3, 8, 8], &[2, 3, 3, 3], Some(&[3]), d),
        KernelError::Shape(ShapeError::ConvBiasShape {
            bias: vec![3],
            weight: vec![2, 3, 3, 3]
        })
    );
    assert_eq!(
        conv_err(&[1, 3, 8, 8], &[2, 3, 3, 3], Some(&[1, 2]), d),
        KernelError::Shape(ShapeError::Rank {
            op: "conv2d",
            operand: "bias",
            expected: "1",
            shape: vec![1, 2]
        })
    );
}

#[test]
fn conv2d_rejects_a_zero_stride() {
    let o = Conv2dOptions {
        stride: [1, 0],
        padding: [0, 0],
    };
    assert_eq!(
        conv_err(&[1, 3, 8, 8], &[2, 3, 3, 3], None, o),
        KernelError::Shape(ShapeError::ConvZeroStride { stride: [1, 0] })
    );
}

#[test]
fn conv2d_rejects_a_kernel_larger_than_the_padded_input() {
    let o = Conv2dOptions {
        stride: [1, 1],
        padding: [1, 0],
    };
    assert_eq!(
        conv_err(&[1, 3, 4, 4], &[2, 3, 3, 5], None, o),
        KernelError::Shape(ShapeError::ConvKernelTooLarge {
            input: vec![1, 3, 4, 4],
            weight: vec![2, 3, 3, 5],
            padding: [1, 0]
        })
    );
}

#[test]
fn conv2d_options_default_to_unit_stride_and_no_padding() {
    assert_eq!(
        Conv2dOptions::default(),
        Conv2dOptions {
            stride: [1, 1],
            padding: [0, 0]
        }
    );
}

#[test]
fn conv2d_rejects_padding_too_large_to_index() {
    let o = Conv2dOptions {
        stride: [1, 1],
        padding: [usize::MAX / 2, 0],
    };
    assert_eq!(
        conv_err(&[1, 1, 2, 2], &[1, 1, 1, 1], None, o),
        KernelError::Shape(ShapeError::TooLarge {
            op: "conv2d",
            shapes: vec![vec![1, 1, 2, 2], vec![1, 1, 1, 1]]
        })
    );
}

/// Shapes that cross the packing blocks (144 rows of A, 512 columns of B) in each split: many
/// rows (split over rows), few rows for many columns (split over column tiles wider than one
/// block), and a tile taller than one block under four tasks.
#[test]
fn matmul_is_bit_identical_under_every_schedule_in_both_precisions_across_packing_blocks() {
    let schedules = all_schedules();
    for (m, k, n) in [(150, 20, 530), (20, 300, 1100), (150, 200, 600)] {
        let (a, b) = (uniform(&[m, k], 12), uniform(&[k, n], 13));
        for config in precisions() {
            let want = matmul_with(&config, &a, &b, &Sequential).unwrap();
            assert_within_bound(
                want.data(),
                &reference(a.data(), b.data(), m, k, n, false),
                &format!("{:?} [{m}, {k}, {n}]", config.precision()),
            );
            for s in &schedules {
                let got = matmul_with(&config, &a, &b, s.as_ref()).unwrap();
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{} {:?} [{m}, {k}]x[{k}, {n}]",
                    s.name(),
                    config.precision()
                );
            }
        }
    }
}

/// Three batches of sixteen output channels: split over rows, two or four tasks cut a batch.
#[test]
fn conv2d_is_bit_identical_under_every_schedule_when_tasks_share_a_batch() {
    let input = uniform(&[3, 2, 5, 5], 40);
    let weight = uniform(&[16, 2, 3, 3], 41);
    let bias = uniform(&[16], 42);
    let o = Conv2dOptions {
        stride: [1, 1],
        padding: [1, 1],
    };
    for config in precisions() {
        let want = conv2d_with(&config, &input, &weight, Some(&bias), &o, &Sequential).unwrap();
        for s in &all_schedules() {
            let got = conv2d_with(&config, &input, &weight, Some(&bias), &o, s.as_ref()).unwrap();
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} {:?}",
                s.name(),
                config.precision()
            );
        }
    }
}

/// A weight that is one at a single tap `(channel 1, ky, kx)` and zero elsewhere copies the
/// input under that tap: each output is exactly `x[1][y·sy + ky - py][x·sx + kx - px]`, or zero
/// in the padding. Widths from 1 to 40 put a panel's pixels on one, several or part of an
/// output row, and the paddings put whole runs of pixels in the padding.
#[test]
fn conv2d_with_a_one_hot_weight_reads_the_input_under_that_tap_exactly() {
    for width in [1, 2, 5, 9, 40] {
        for (py, px) in [(0, 0), (1, 2), (2, 4)] {
            for (sy, sx) in [(1, 1), (2, 1), (1, 3)] {
                for (ky, kx) in [(0, 0), (1, 2), (2, 1)] {
                    let (h, w) = (3, width);
                    if w + 2 * px < 3 {
                        continue;
                    }
                    let input = uniform(&[1, 2, h, w], 50);
                    let weight = Tensor::from_fn(vec![1, 2, 3, 3], |i| {
                        if i == 9 + ky * 3 + kx {
                            1.0
                        } else {
                            0.0
                        }
                    })
                    .unwrap();
                    let o = Conv2dOptions {
                        stride: [sy, sx],
                        padding: [py, px],
                    };
                    let got = conv2d(&input, &weight, None, &o, &Sequential).unwrap();
                    let (oh, ow) = (got.shape()[2], got.shape()[3]);
                    assert_eq!(oh, (h + 2 * py - 3) / sy + 1);
                    assert_eq!(ow, (w + 2 * px - 3) / sx + 1);
                    for y in 0..oh {
                        for x in 0..ow {
                            let (iy, ix) = (y * sy + ky, x * sx + kx);
                            let want = if iy < py || ix < px || iy - py >= h || ix - px >= w {
                                0.0
                            } else {
                                input.data()[h * w + (iy - py) * w + (ix - px)]
                            };
                            assert_eq!(
                                got.data()[y * ow + x],
                                want,
                                "width {width} padding ({py}, {px}) stride ({sy}, {sx}) tap \
                                 ({ky}, {kx}) at ({y}, {x})"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The AVX-512 micro-kernel (16 lanes, 12 × 32 tiles) runs each element's steps as the AVX2
/// one does (8 lanes): in the native mode, one fused multiply-add per inner index in the same
/// order, so the two give the same bits on products large enough for the packed path, with
/// ragged edges in every dimension.
#[test]
fn the_avx512_and_avx2_variants_give_the_same_native_bits() {
    let variants: Vec<_> = ["avx512", "avx2"]
        .iter()
        .filter_map(|name| cpu_kernels().find(name))
        .filter(|v| v.is_available())
        .collect();
    if variants.len() < 2 || !has_fma() {
        return; // Nothing to compare on this CPU.
    }
    for (m, k, n) in [(37, 250, 75), (128, 576, 100), (13, 1000, 33)] {
        let (a, b) = (uniform(&[m, k], 3), uniform(&[k, n], 4));
        let bits: Vec<Vec<u32>> = variants
            .iter()
            .map(|v| {
                let config = KernelConfig::new(v.clone()).with_precision(Precision::Native);
                matmul_with(&config, &a, &b, &Sequential).unwrap().to_bits()
            })
            .collect();
        assert_eq!(bits[0], bits[1], "{m}x{k}x{n}");
        // And the native mode really fused: it differs from the portable bits somewhere.
        let portable = matmul_with(&KernelConfig::new(variants[0].clone()), &a, &b, &Sequential);
        assert_ne!(portable.unwrap().to_bits(), bits[0], "{m}x{k}x{n}");
    }
}
