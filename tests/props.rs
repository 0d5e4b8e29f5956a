#![cfg(not(feature = "loom"))]
//! Properties of the scheduled kernels on random shapes (zeros and dimensions near `usize::MAX`
//! included), random masks (`-inf` entries, fully masked rows) and every schedule (Sequential,
//! `hardware()`, `dedicated(1..=4)`, rayon, and test schedules that run chunks reversed or
//! shuffled from several threads): `scaled_dot_product_attention`, `matmul` and `conv2d` either
//! return `Err` or agree bit for bit with `Sequential`, and with an f64 reference within
//! `1e-5 · (1 + |ref|)`.
//!
//! Reproducible: the case count, the RNG and its seed are fixed in code (so `PROPTEST_CASES` or
//! `PROPTEST_RNG_SEED` in the environment change nothing) and no failure files are written, so
//! every run, CI's included, draws the same cases: 256 per property, well under a second in a
//! debug build.

mod common;

use std::sync::{Arc, OnceLock};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, RngSeed};

use common::{all_schedules, reference_sdpa, uniform};
use skainet_schedule::{
    conv2d_with, matmul_with, scaled_dot_product_attention_with, Conv2dOptions, KernelConfig,
    KernelError, Precision, Schedule, SdpaOptions, Sequential, Tensor,
};

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0x5ca1_ab1e),
        max_shrink_iters: 256,
        ..Config::default()
    }
}

/// Every schedule, built once: their pools live for the whole file.
fn schedules() -> &'static [Arc<dyn Schedule>] {
    static LIST: OnceLock<Vec<Arc<dyn Schedule>>> = OnceLock::new();
    LIST.get_or_init(|| {
        let mut list: Vec<Arc<dyn Schedule>> = vec![Arc::new(Sequential)];
        list.extend(all_schedules());
        list
    })
}

/// Opens a region whatever the size, so even tiny shapes split across tasks.
fn forking() -> KernelConfig {
    KernelConfig::selected().with_min_parallel_work(0)
}

/// `call` under `Sequential` with the default threshold, then under every schedule with
/// regions forced: all `Err`, or all `Ok` with the same bits. Returns the sequential result.
fn same_under_every_schedule(
    call: impl Fn(&KernelConfig, &dyn Schedule) -> Result<Tensor, KernelError>,
) -> Result<Result<Tensor, KernelError>, TestCaseError> {
    let want = call(&KernelConfig::selected(), &Sequential);
    for schedule in schedules() {
        let got = call(&forking(), schedule.as_ref());
        match (&want, &got) {
            (Ok(w), Ok(g)) => {
                prop_assert_eq!(w.shape(), g.shape(), "{}", schedule.name());
                prop_assert!(
                    w.to_bits() == g.to_bits(),
                    "{}: bits differ",
                    schedule.name()
                );
            }
            (Err(w), Err(g)) => prop_assert_eq!(w, g, "{}", schedule.name()),
            _ => prop_assert!(
                false,
                "{}: {:?} under Sequential, {:?} here",
                schedule.name(),
                want.as_ref().map(Tensor::shape),
                got.as_ref().map(Tensor::shape)
            ),
        }
    }
    Ok(want)
}

/// `|x - ref| <= 1e-5 · (1 + |ref|)` element by element (NaN never passes).
fn close(got: &[f32], want: &[f64]) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (&x, &r)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(x) - r).abs();
        prop_assert!(
            err <= 1e-5 * (1.0 + r.abs()),
            "element {}: {} vs {}",
            i,
            x,
            r
        );
    }
    Ok(())
}

/// Where a mask hides keys: every `period`-th entry (0: none) and, if given, one whole row.
#[derive(Debug, Clone)]
struct MaskSpec {
    /// 0 `[Sq, Sk]`, 1 `[b, 1, Sq, Sk]`, 2 `[1, H, Sq, Sk]`, 3 `[b, H, Sq, Sk]`, 4 `[1, 1, 1, Sk]`.
    form: usize,
    period: usize,
    dead_row: Option<usize>,
    seed: u32,
}

fn mask_spec() -> impl Strategy<Value = Option<MaskSpec>> {
    proptest::option::weighted(
        0.7,
        (
            0..5usize,
            0..4usize,
            proptest::option::of(0..8usize),
            any::<u32>(),
        )
            .prop_map(|(form, period, dead_row, seed)| MaskSpec {
                form,
                period,
                dead_row,
                seed,
            }),
    )
}

fn mask(spec: &MaskSpec, b: usize, h: usize, sq: usize, sk: usize) -> Tensor {
    let shape = match spec.form {
        0 => vec![sq, sk],
        1 => vec![b, 1, sq, sk],
        2 => vec![1, h, sq, sk],
        3 => vec![b, h, sq, sk],
        _ => vec![1, 1, 1, sk],
    };
    let rows = shape[shape.len() - 2];
    let noise = uniform(&shape, spec.seed);
    Tensor::from_fn(shape, |at| {
        let (row, _) = ((at / sk.max(1)) % rows.max(1), at % sk.max(1));
        let hidden = (spec.period > 0 && at % spec.period == 0) || spec.dead_row == Some(row);
        if hidden {
            f32::NEG_INFINITY
        } else {
            2.0 * noise.data()[at]
        }
    })
    .unwrap()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn sdpa_is_err_or_matches_sequential_and_the_f64_reference(
        (b, kv, group) in (0..=2usize, 1..=2usize, 1..=3usize),
        (sq, sk, hd) in (0..=6usize, 0..=9usize, 0..=10usize),
        causal in any::<bool>(),
        scale in proptest::option::of(0.05f32..1.0),
        mask_spec in mask_spec(),
        seed in any::<u32>(),
    ) {
        let h = kv * group;
        let q = uniform(&[b, h, sq, hd], seed);
        let k = uniform(&[b, kv, sk, hd], seed ^ 1);
        let v = uniform(&[b, kv, sk, hd], seed ^ 2);
        let m = mask_spec.as_ref().map(|s| mask(s, b, h, sq, sk));
        let options = SdpaOptions { scale, causal };
        let got = same_under_every_schedule(|config, schedule| {
            scaled_dot_product_attention_with(config, &q, &k, &v, m.as_ref().map(Tensor::view), &options, schedule)
        })?;
        if causal && sq > sk {
            prop_assert!(got.is_err(), "causal with Sq > Sk must be refused");
        } else {
            let got = got.map_err(|e| TestCaseError::fail(format!("refused: {e}")))?;
            prop_assert_eq!(got.shape(), [b, h, sq, hd]);
            close(got.data(), &reference_sdpa(&q, &k, &v, m.as_ref(), scale, causal))?;
        }
    }

    #[test]
    fn native_sdpa_is_the_same_under_every_schedule_and_within_1e_5_of_the_f64_reference(
        (b, kv, group) in (1..=2usize, 1..=2usize, 1..=2usize),
        (sq, sk) in (1..=9usize, 1..=200usize),
        hd in prop_oneof![1..=20usize, Just(64usize)],
        causal in any::<bool>(),
        mask_spec in mask_spec(),
        seed in any::<u32>(),
    ) {
        let h = kv * group;
        let sq = if causal { sq.min(sk) } else { sq };
        let q = uniform(&[b, h, sq, hd], seed);
        let k = uniform(&[b, kv, sk, hd], seed ^ 1);
        let v = uniform(&[b, kv, sk, hd], seed ^ 2);
        let m = mask_spec.as_ref().map(|s| mask(s, b, h, sq, sk));
        let options = SdpaOptions { scale: None, causal };
        let native = KernelConfig::selected().with_precision(Precision::Native);
        let call = |config: &KernelConfig, schedule: &dyn Schedule| {
            scaled_dot_product_attention_with(config, &q, &k, &v, m.as_ref().map(Tensor::view), &options, schedule)
                .map_err(|e| TestCaseError::fail(format!("refused: {e}")))
        };
        let want = call(&native, &Sequential)?;
        for schedule in schedules() {
            let got = call(&native.clone().with_min_parallel_work(0), schedule.as_ref())?;
            prop_assert!(got.to_bits() == want.to_bits(), "{}: bits differ", schedule.name());
        }
        close(want.data(), &reference_sdpa(&q, &k, &v, m.as_ref(), None, causal))?;
    }

    #[test]
    fn matmul_is_err_or_matches_sequential_and_the_f64_reference(
        batch in proptest::option::of(0..=3usize),
        (m, k, n) in (0..=7usize, 0..=12usize, 0..=11usize),
        inner_off_by_one in proptest::bool::weighted(0.2),
        seed in any::<u32>(),
    ) {
        let mut a_shape: Vec<usize> = batch.into_iter().collect();
        a_shape.extend([m, k]);
        let kb = if inner_off_by_one { k + 1 } else { k };
        let a = uniform(&a_shape, seed);
        let w = uniform(&[kb, n], seed ^ 1);
        let got = same_under_every_schedule(|config, schedule| matmul_with(config, &a, &w, schedule))?;
        if inner_off_by_one {
            prop_assert!(got.is_err(), "inner sizes {} and {} must be refused", k, kb);
        } else {
            let got = got.map_err(|e| TestCaseError::fail(format!("refused: {e}")))?;
            let rows: usize = a_shape[..a_shape.len() - 1].iter().product();
            let mut want = vec![0.0f64; rows * n];
            for r in 0..rows {
                for c in 0..n {
                    want[r * n + c] = (0..k)
                        .map(|i| f64::from(a.data()[r * k + i]) * f64::from(w.data()[i * n + c]))
                        .sum();
                }
            }
            close(got.data(), &want)?;
        }
    }

    #[test]
    fn conv2d_is_err_or_matches_sequential_and_the_f64_reference(
        (n, c, o) in (0..=2usize, 1..=3usize, 1..=3usize),
        (h, w, kh, kw) in (0..=6usize, 0..=6usize, 1..=3usize, 1..=3usize),
        stride in [0..=2usize, 0..=2usize],
        padding in [0..=2usize, 0..=2usize],
        bias in any::<bool>(),
        seed in any::<u32>(),
    ) {
        let x = uniform(&[n, c, h, w], seed);
        let weight = uniform(&[o, c, kh, kw], seed ^ 1);
        let b = bias.then(|| uniform(&[o], seed ^ 2));
        let options = Conv2dOptions { stride, padding };
        let got = same_under_every_schedule(|config, schedule| {
            conv2d_with(config, &x, &weight, b.as_ref(), &options, schedule)
        })?;
        let (ph, pw) = (h + 2 * padding[0], w + 2 * padding[1]);
        if stride.contains(&0) || ph < kh || pw < kw {
            prop_assert!(got.is_err(), "stride {:?}, padded {}x{} under kernel {}x{}", stride, ph, pw, kh, kw);
        } else {
            let got = got.map_err(|e| TestCaseError::fail(format!("refused: {e}")))?;
            let (oh, ow) = ((ph - kh) / stride[0] + 1, (pw - kw) / stride[1] + 1);
            prop_assert_eq!(got.shape(), [n, o, oh, ow]);
            let mut want = vec![0.0f64; n * o * oh * ow];
            for ni in 0..n {
                for oc in 0..o {
                    for y in 0..oh {
                        for xx in 0..ow {
                            let mut acc = b.as_ref().map_or(0.0, |b| f64::from(b.data()[oc]));
                            for ic in 0..c {
                                for dy in 0..kh {
                                    for dx in 0..kw {
                                        let iy = (y * stride[0] + dy).checked_sub(padding[0]);
                                        let ix = (xx * stride[1] + dx).checked_sub(padding[1]);
                                        let (Some(iy), Some(ix)) = (iy, ix) else { continue };
                                        if iy >= h || ix >= w {
                                            continue;
                                        }
                                        let xv = x.data()[((ni * c + ic) * h + iy) * w + ix];
                                        let wv = weight.data()[((oc * c + ic) * kh + dy) * kw + dx];
                                        acc += f64::from(xv) * f64::from(wv);
                                    }
                                }
                            }
                            want[((ni * o + oc) * oh + y) * ow + xx] = acc;
                        }
                    }
                }
            }
            close(got.data(), &want)?;
        }
    }
}

/// A dimension that is zero, small, or near `usize::MAX` (the tensor stays empty through
/// another zero dimension, so it can exist).
fn edge_dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        Just(0usize),
        1..=3usize,
        Just(usize::MAX),
        Just(usize::MAX / 2 + 1),
        Just(1usize << (usize::BITS / 2)),
    ]
}

/// An empty tensor of `shape` with one dimension forced to zero (at `zero_at % rank`).
fn empty(mut shape: Vec<usize>, zero_at: usize) -> Tensor {
    let at = zero_at % shape.len();
    shape[at] = 0;
    Tensor::new(shape, Vec::new()).unwrap()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn sdpa_on_near_overflow_dims_is_err_or_the_same_empty_result(
        dims in proptest::collection::vec(edge_dim(), 7),
        zero_at in any::<usize>(),
        causal in any::<bool>(),
    ) {
        let [b, h, kv, sq, sk, hd, _] = dims[..] else { unreachable!() };
        let q = empty(vec![b, h, sq, hd], zero_at);
        let k = uniform_or_empty(&[b, kv, sk, hd]);
        let v = uniform_or_empty(&[b, kv, sk, hd]);
        let options = SdpaOptions { scale: None, causal };
        if let Ok(out) = same_under_every_schedule(|config, schedule| {
            scaled_dot_product_attention_with(config, &q, &k, &v, None, &options, schedule)
        })? {
            prop_assert!(out.is_empty());
        }
    }

    #[test]
    fn matmul_on_near_overflow_dims_is_err_or_the_same_empty_result(
        dims in proptest::collection::vec(edge_dim(), 4),
        zero_at in any::<usize>(),
    ) {
        let [batch, m, k, n] = dims[..] else { unreachable!() };
        let a = empty(vec![batch, m, k], zero_at);
        let w = uniform_or_empty(&[k, n]);
        if let Ok(out) = same_under_every_schedule(|config, schedule| matmul_with(config, &a, &w, schedule))? {
            prop_assert!(out.data().iter().all(|x| x.to_bits() == 0));
        }
    }

    #[test]
    fn conv2d_on_near_overflow_dims_is_err_or_the_same_empty_result(
        dims in proptest::collection::vec(edge_dim(), 7),
        zero_at in any::<usize>(),
        stride in [1..=2usize, 1..=2usize],
        pad_rows in prop_oneof![Just(0usize), Just(usize::MAX / 2)],
    ) {
        let padding = [pad_rows, 0];
        let [n, c, h, w, o, kh, kw] = dims[..] else { unreachable!() };
        let x = empty(vec![n, c, h, w], zero_at);
        let weight = uniform_or_empty(&[o, c, kh, kw]);
        let options = Conv2dOptions { stride, padding };
        let _ = same_under_every_schedule(|config, schedule| {
            conv2d_with(config, &x, &weight, None, &options, schedule)
        })?;
    }
}

/// Small random values for a small `shape`, or an empty tensor when it has a zero; a shape
/// too large for either becomes an empty tensor with its first dimension zeroed.
fn uniform_or_empty(shape: &[usize]) -> Tensor {
    match skainet_schedule::shape::element_count(shape) {
        Some(n) if n <= 4096 => uniform(shape, 9),
        _ => empty(shape.to_vec(), 0),
    }
}
