//! Every registered variant of the inner loops against the portable one, bit for bit, on shapes
//! small enough for miri: these are what run the vector backends' `unsafe` code (the SSE2 and
//! AVX2 intrinsics, the `target_feature` entry points) under the interpreter. The shapes pick
//! the code paths: `sq` of 5 runs a four-row block and a lone row; head dims of 5, 13 and 123
//! run the zero-padded tail with no, one and every size of whole-chunk pass.
//!
//! Every *registered* variant runs, available or not: an unavailable AVX2 variant falls back to
//! SSE2 by design, and that fallback must give the same bits too.

use alloc::vec;
use alloc::vec::Vec;

use super::loops::attend::{scratch_len, Head};
use super::loops::simd::{Scalar, Simd, LANES};
use super::{
    conv2d_with, cpu_kernels, linear_with, matmul_with, scaled_dot_product_attention_with,
    Conv2dOptions, CpuKernels, KernelConfig, Precision, SdpaOptions,
};
use crate::registry::KernelProvider;
use crate::sync::Arc;
use crate::tensor::Tensor;
use crate::Sequential;

/// Deterministic values in `[-1, 1)` (a 32-bit LCG; `seed` picks the stream).
fn values(len: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

fn tensor(shape: &[usize], seed: u32) -> Tensor {
    let len = shape.iter().product();
    Tensor::new(shape.to_vec(), values(len, seed)).unwrap()
}

fn portable() -> KernelConfig {
    KernelConfig::new(cpu_kernels().find("portable").unwrap())
}

/// Every registered variant, highest priority first.
fn registered() -> Vec<Arc<CpuKernels>> {
    cpu_kernels().providers().iter().cloned().collect()
}

/// Asserts every registered variant's sdpa output has the portable bits; returns those.
fn sdpa_parity(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    options: &SdpaOptions,
) -> Tensor {
    let mask = || mask.map(Tensor::view);
    let want =
        scaled_dot_product_attention_with(&portable(), q, k, v, mask(), options, &Sequential)
            .unwrap();
    for variant in registered() {
        let config = KernelConfig::new(variant.clone());
        let got = scaled_dot_product_attention_with(&config, q, k, v, mask(), options, &Sequential)
            .unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "variant {}", variant.name());
    }
    want
}

/// Non-causal with an explicit scale.
fn scaled(scale: f32) -> SdpaOptions {
    SdpaOptions {
        scale: Some(scale),
        causal: false,
    }
}

/// `[rows, cols]` of zeros with `-inf` at every `every`-th position (offset by `phase`).
fn sparse_mask(rows: usize, cols: usize, every: usize, phase: usize) -> Tensor {
    Tensor::from_fn(vec![rows, cols], |i| {
        if (i + phase).is_multiple_of(every) {
            f32::NEG_INFINITY
        } else {
            0.0
        }
    })
    .unwrap()
}

#[test]
fn the_registry_holds_every_backend_compiled_for_this_target() {
    let providers = registered();
    let names: Vec<&str> = providers.iter().map(|p| p.name()).collect();
    let mut expected = vec![];
    if cfg!(all(target_arch = "x86_64", feature = "std")) {
        expected.extend(["avx512", "avx2"]);
    }
    if cfg!(target_arch = "x86_64") {
        expected.push("sse2");
    }
    if cfg!(target_arch = "aarch64") {
        expected.push("neon");
    }
    expected.push("portable");
    assert_eq!(names, expected);
}

/// Built with AVX2 enabled (as the second miri run of CI is), detection — which under miri
/// reports only the compile-time features — finds it, so the AVX2 intrinsics really run.
#[cfg(all(target_arch = "x86_64", feature = "std", target_feature = "avx2"))]
#[test]
fn the_avx2_variant_is_selected_when_built_for_avx2() {
    assert!(super::loops::simd::Avx2::detect().is_some());
    let avx512 = super::loops::gemm_avx512::Avx512::detect(super::loops::gemm_avx512::Step::Fused);
    let want = if avx512.is_some() { "avx512" } else { "avx2" };
    assert_eq!(super::selected_kernels().name(), want);
}

#[test]
fn sdpa_variants_agree_with_gqa_causal_mask_and_a_ragged_head_dim() {
    let (sq, sk, hd) = (5, 11, 13);
    let q = tensor(&[2, 4, sq, hd], 1);
    let k = tensor(&[2, 2, sk, hd], 2);
    let v = tensor(&[2, 2, sk, hd], 3);
    let mask = sparse_mask(sq, sk, 4, 1);
    let options = SdpaOptions {
        scale: Some(0.3),
        causal: true,
    };
    sdpa_parity(&q, &k, &v, Some(&mask), &options);
}

#[test]
fn sdpa_variants_agree_on_a_head_dim_below_one_chunk() {
    let (sq, sk, hd) = (6, 9, 5);
    let q = tensor(&[1, 2, sq, hd], 4);
    let k = tensor(&[1, 1, sk, hd], 5);
    let v = tensor(&[1, 1, sk, hd], 6);
    sdpa_parity(&q, &k, &v, None, &scaled(0.75));
}

#[test]
fn sdpa_variants_agree_under_the_default_scale() {
    // `1/sqrt(hd)` through libm's pure-Rust `sqrtf` (its `arch` feature is off), so miri runs it.
    let (sq, sk, hd) = (3, 7, 13);
    let q = tensor(&[1, 2, sq, hd], 7);
    let k = tensor(&[1, 2, sk, hd], 8);
    let v = tensor(&[1, 2, sk, hd], 9);
    let options = SdpaOptions {
        scale: None,
        causal: true,
    };
    let out = sdpa_parity(&q, &k, &v, None, &options);
    let explicit = SdpaOptions {
        scale: Some(1.0 / (hd as f32).sqrt()),
        causal: true,
    };
    assert_eq!(
        out.to_bits(),
        sdpa_parity(&q, &k, &v, None, &explicit).to_bits()
    );
}

#[test]
fn sdpa_variants_agree_on_a_head_dim_running_every_chunk_pass() {
    // 123 = 64 + 32 + 16 + 8 + 3: one pass of 8, 4, 2 and 1 chunks, then the tail.
    let (sq, sk, hd) = (5, 6, 123);
    let q = tensor(&[1, 1, sq, hd], 7);
    let k = tensor(&[1, 1, sk, hd], 8);
    let v = tensor(&[1, 1, sk, hd], 9);
    let mask = Tensor::from_fn(vec![1, 1, 1, sk], |j| j as f32 * -0.25).unwrap();
    sdpa_parity(&q, &k, &v, Some(&mask), &scaled(0.09));
}

#[test]
fn sdpa_variants_agree_on_lone_decode_rows_over_blocks_of_32_keys() {
    // 171 keys: a tile of 128 (four blocks of 32) and one of 43 (a block of 32, one of 8 and
    // three single keys). Head dims 64 and 80 run the wide 32-key kernel where there is one;
    // 72 (not a multiple of 16) does not. Miri, which never detects AVX-512, runs one tile of
    // 43 keys at head dim 64: the 8-key and single-key paths around the wide kernel.
    let (sk, dims): (usize, &[usize]) = match cfg!(miri) {
        true => (43, &[64]),
        false => (171, &[64, 72, 80]),
    };
    for &hd in dims {
        let q = tensor(&[1, 3, 1, hd], 10);
        let k = tensor(&[1, 3, sk, hd], 11);
        let v = tensor(&[1, 3, sk, hd], 12);
        let mask = sparse_mask(1, sk, 7, 3);
        sdpa_parity(&q, &k, &v, Some(&mask), &scaled(0.2));
    }
}

#[test]
fn a_decode_group_has_the_same_bits_whether_its_keys_are_taken_to_be_cached_or_not() {
    // Cached, a lone row scores 32 keys at a time on the wide kernel where there is one; not
    // cached, a group of fewer than four rows (unless the wide kernels pad it to four) scores
    // 16 or 8 keys at a time and weighs the values eight keys at a time, requesting them close
    // ahead. Every variant in both modes gives one answer for both, for groups of one to five
    // stacked decode rows (five: a block of four and a lone row) and for as many causal rows of
    // one head (each sees one key more than the last, so they weigh different keys), with and
    // without a mask (under miri, which never detects AVX-512: one tile, one and three stacked
    // rows, masked).
    let (sk, hd) = (if cfg!(miri) { 43 } else { 171 }, 64);
    let group_sizes: &[usize] = if cfg!(miri) {
        &[1, 3]
    } else {
        &[1, 2, 3, 4, 5]
    };
    let masks: &[bool] = if cfg!(miri) { &[true] } else { &[false, true] };
    let stacking: &[bool] = if cfg!(miri) { &[true] } else { &[true, false] };
    let (k, v) = (values(sk * hd, 14), values(sk * hd, 15));
    for &rows in group_sizes {
        let q = values(rows * hd, 13);
        // Row r masks every key j with (j + r) % 5 == 0 and leans on the others.
        let mask: Vec<f32> = (0..rows * sk)
            .map(|i| match (i % sk + i / sk) % 5 {
                0 => f32::NEG_INFINITY,
                m => m as f32 * -0.125,
            })
            .collect();
        for (&masked, &stacked) in masks
            .iter()
            .flat_map(|m| stacking.iter().map(move |s| (m, s)))
        {
            for variant in registered() {
                for attend in [variant.attend.portable, variant.attend.native] {
                    let run = |cached| {
                        let head = Head {
                            q: &q,
                            k: &k,
                            v: &v,
                            mask: masked.then_some((&mask[..], sk)),
                            sq: rows,
                            sk,
                            hd,
                            scale: 0.125,
                            causal: rows == 1 || !stacked,
                            decode: stacked,
                            cached,
                        };
                        let mut out = vec![0.0f32; rows * hd];
                        let mut scratch = vec![0.0f32; scratch_len(hd)];
                        attend(&head, &mut out, &mut scratch);
                        out.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                    };
                    assert_eq!(
                        run(true),
                        run(false),
                        "variant {}, {rows} rows, masked {masked}, stacked {stacked}",
                        variant.name()
                    );
                }
            }
        }
    }
}

#[test]
fn sdpa_variants_agree_on_a_fully_masked_row_and_give_it_zeros() {
    let (sq, sk, hd) = (5, 9, 13);
    let q = tensor(&[1, 2, sq, hd], 10);
    let k = tensor(&[1, 1, sk, hd], 11);
    let v = tensor(&[1, 1, sk, hd], 12);
    // Row 2 sees no key; the others lose every third.
    let mask = Tensor::from_fn(vec![sq, sk], |i| {
        if i / sk == 2 || i % 3 == 0 {
            f32::NEG_INFINITY
        } else {
            0.0
        }
    })
    .unwrap();
    let out = sdpa_parity(&q, &k, &v, Some(&mask), &scaled(0.3));
    for head in 0..2 {
        let row = &out.to_bits()[(head * sq + 2) * hd..(head * sq + 3) * hd];
        assert_eq!(row, [0.0f32.to_bits(); 13]);
    }
}

fn matmul_parity(a: &Tensor, b: &Tensor) {
    let want = matmul_with(&portable(), a, b, &Sequential).unwrap();
    for variant in registered() {
        let got = matmul_with(&KernelConfig::new(variant.clone()), a, b, &Sequential).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "variant {}", variant.name());
    }
}

fn linear_parity(x: &Tensor, w: &Tensor) {
    let want = linear_with(&portable(), x, w, &Sequential).unwrap();
    for variant in registered() {
        let got = linear_with(&KernelConfig::new(variant.clone()), x, w, &Sequential).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "variant {}", variant.name());
    }
}

#[test]
fn matmul_variants_agree_on_ragged_inner_and_outer_sizes() {
    // Six rows and more run the packed tiles: 7 rows leave a one-row micro-tile, n = 19 a
    // three-column one; k = 9 is no vector width.
    matmul_parity(&tensor(&[1, 7, 9], 13), &tensor(&[9, 19], 14));
    // Four rows or fewer run the column path: vectors of columns, then single columns.
    matmul_parity(&tensor(&[2, 3, 9], 15), &tensor(&[9, 21], 16));
    matmul_parity(&tensor(&[1, 2], 17), &tensor(&[2, 1], 18));
}

/// Two row tiles of 60 rows that do not divide the 100 rows: each task copies its tiles' rows
/// into the shared output (the `unsafe` row-segment writes), here from two threads.
#[cfg(feature = "parallel")]
#[test]
fn tiles_copied_in_from_two_threads_give_the_sequential_bits() {
    let (a, b) = (tensor(&[100, 5], 29), tensor(&[5, 40], 30));
    let config = portable().with_min_parallel_work(0);
    let two = crate::dedicated(2).unwrap();
    assert_eq!(
        matmul_with(&config, &a, &b, &two).unwrap().to_bits(),
        matmul_with(&config, &a, &b, &Sequential).unwrap().to_bits()
    );
}

#[test]
fn linear_variants_agree_on_both_paths() {
    // One and three rows: the lane-order dot products, with a ragged chunk (k = 11) and a
    // column count (n = 7) that is no multiple of the four dot products done at once.
    linear_parity(&tensor(&[1, 11], 19), &tensor(&[7, 11], 20));
    linear_parity(&tensor(&[3, 11], 21), &tensor(&[7, 11], 22));
    // k = 75: nine whole chunks — two groups of four accumulator vectors (one row) or four
    // of two (two rows), one chunk left over — and a ragged one.
    linear_parity(&tensor(&[1, 75], 31), &tensor(&[3, 75], 32));
    linear_parity(&tensor(&[2, 75], 33), &tensor(&[3, 75], 34));
    // Seven rows: the packed tiles, reading the weight along its rows.
    linear_parity(&tensor(&[7, 11], 23), &tensor(&[5, 11], 24));
}

#[test]
fn native_precision_of_a_variant_without_fma_is_the_portable_one() {
    let (a, b) = (tensor(&[7, 9], 25), tensor(&[9, 19], 26));
    let native = portable().with_precision(Precision::Native);
    assert_eq!(
        matmul_with(&native, &a, &b, &Sequential).unwrap().to_bits(),
        matmul_with(&portable(), &a, &b, &Sequential)
            .unwrap()
            .to_bits()
    );
    let (x, w) = (tensor(&[1, 11], 27), tensor(&[7, 11], 28));
    assert_eq!(
        linear_with(&native, &x, &w, &Sequential).unwrap().to_bits(),
        linear_with(&portable(), &x, &w, &Sequential)
            .unwrap()
            .to_bits()
    );
}

fn conv_parity(input: &Tensor, weight: &Tensor, bias: Option<&Tensor>, options: &Conv2dOptions) {
    let want = conv2d_with(&portable(), input, weight, bias, options, &Sequential).unwrap();
    for variant in registered() {
        let config = KernelConfig::new(variant.clone());
        let got = conv2d_with(&config, input, weight, bias, options, &Sequential).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "variant {}", variant.name());
    }
}

#[test]
fn conv2d_variants_agree_with_stride_and_padding() {
    let input = tensor(&[2, 3, 5, 6], 17);
    let weight = tensor(&[2, 3, 3, 2], 18);
    let bias = tensor(&[2], 19);
    let strided = Conv2dOptions {
        stride: [2, 3],
        padding: [1, 2],
    };
    conv_parity(&input, &weight, Some(&bias), &strided);
    let padded = Conv2dOptions {
        stride: [1, 1],
        padding: [2, 1],
    };
    conv_parity(&input, &weight, None, &padded);
}

/// Every lane primitive of `s` against [`Scalar`], bit for bit, on operands with `-0.0`, NaN
/// and infinities (x86's `maxps` returns the second operand unless the first is larger).
fn primitives_match_scalar<S: Simd>(s: S) {
    let mut a: Vec<f32> = values(LANES, 20);
    let mut b: Vec<f32> = values(LANES, 21);
    a[0] = -0.0;
    b[0] = 0.0;
    a[1] = f32::NAN;
    b[2] = f32::NAN;
    a[3] = f32::INFINITY;
    b[4] = f32::NEG_INFINITY;
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let run = |f: &dyn Fn([f32; LANES], [f32; LANES]) -> [f32; LANES]| {
        let (x, y): ([f32; LANES], [f32; LANES]) =
            (a[..].try_into().unwrap(), b[..].try_into().unwrap());
        bits(&f(x, y))
    };
    let on_s = |op: fn(S, S::V, S::V) -> S::V| {
        run(&|x, y| {
            let mut out = [7.0f32; LANES];
            s.store(op(s, s.load(&x), s.load(&y)), &mut out);
            out
        })
    };
    let on_scalar =
        |op: fn(Scalar, [f32; LANES], [f32; LANES]) -> [f32; LANES]| run(&|x, y| op(Scalar, x, y));
    // An arithmetic NaN's sign and payload are not specified by Rust (miri picks them at
    // random), so `add` and `mul` compare NaN lanes as "a NaN"; `max` only selects, so it
    // keeps every bit.
    let nan_as_one = |v: Vec<u32>| {
        v.into_iter()
            .map(|b| {
                if f32::from_bits(b).is_nan() {
                    u32::MAX
                } else {
                    b
                }
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(nan_as_one(on_s(S::add)), nan_as_one(on_scalar(Scalar::add)));
    assert_eq!(nan_as_one(on_s(S::mul)), nan_as_one(on_scalar(Scalar::mul)));
    assert_eq!(on_s(S::max), on_scalar(Scalar::max));
    let finite = values(LANES, 22);
    assert_eq!(
        s.fold(s.load(&finite)).to_bits(),
        Scalar.fold(Scalar.load(&finite)).to_bits()
    );
    for len in [0, 3, LANES + 5] {
        let xs = values(len, 23);
        let (mut got, mut want) = ([0.0f32; LANES], [0.0f32; LANES]);
        s.store(s.load_tail(&xs), &mut got);
        Scalar.store(Scalar.load_tail(&xs), &mut want);
        assert_eq!(bits(&got), bits(&want), "load_tail of {len}");
    }
    let (mut z, mut k) = ([1.0f32; LANES], [0.0f32; LANES]);
    s.store(s.zero(), &mut z);
    s.store(s.splat(-2.5), &mut k);
    assert_eq!(bits(&z), bits(&[0.0; LANES]));
    assert_eq!(bits(&k), bits(&[-2.5; LANES]));
}

#[cfg(target_arch = "x86_64")]
#[test]
fn sse2_primitives_give_the_scalar_bits() {
    primitives_match_scalar(super::loops::simd::Sse2);
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[test]
fn avx2_primitives_give_the_scalar_bits_where_detected() {
    if let Some(s) = super::loops::simd::Avx2::detect() {
        primitives_match_scalar(s);
    }
}

#[cfg(target_arch = "aarch64")]
#[test]
fn neon_primitives_give_the_scalar_bits() {
    primitives_match_scalar(super::loops::simd::Neon);
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[test]
fn avx2_fma_primitives_give_the_scalar_bits_and_fuse_where_detected() {
    use super::loops::simd::Avx2Fma;
    let Some(s) = Avx2Fma::detect() else {
        return;
    };
    primitives_match_scalar(s);
    // x·x = 1 + 2⁻¹¹ + 2⁻²⁴ exactly: one rounding keeps the 2⁻²⁴ against -(1 + 2⁻¹¹).
    let x = 1.0 + f32::powi(2.0, -12);
    let acc = s.splat(-(1.0 + f32::powi(2.0, -11)));
    let mut out = [0.0f32; LANES];
    s.store(s.mul_add_native(acc, s.splat(x), s.splat(x)), &mut out);
    assert_eq!(out, [f32::powi(2.0, -24); LANES]);
    s.store(s.mul_add(acc, s.splat(x), s.splat(x)), &mut out);
    assert_eq!(out, [0.0; LANES]);
}

/// Attention's output for each registered variant and precision, run on this thread after its
/// reused scratch was filled with `poison`.
#[cfg(feature = "std")]
fn sdpa_after_poison(
    poison: f32,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    options: &SdpaOptions,
) -> Vec<Vec<u32>> {
    let mut outs = Vec::new();
    for variant in registered() {
        for precision in [Precision::Portable, Precision::Native] {
            let config = KernelConfig::new(Arc::clone(&variant)).with_precision(precision);
            let len = super::loops::attend::scratch_len(q.shape()[3]);
            super::error::poison_reused_scratch(len, poison);
            let out = scaled_dot_product_attention_with(
                &config,
                q,
                k,
                v,
                mask.map(Tensor::view),
                options,
                &Sequential,
            )
            .unwrap();
            outs.push(out.to_bits());
        }
    }
    outs
}

#[test]
#[cfg(feature = "std")]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own (the kernels' is run under miri by the tests above), and \
              60 calls take minutes interpreted"
)]
fn sdpa_bits_do_not_depend_on_what_the_threads_reused_scratch_held() {
    // Two key tiles (128 + 5 keys), a four-row block and a lone row, a ragged head dim, and a
    // masked and causal grouped prefill; then a grouped decode step (stacked rows).
    let (sq, sk, hd) = (5, 133, 13);
    let q = tensor(&[1, 4, sq, hd], 21);
    let k = tensor(&[1, 2, sk, hd], 22);
    let v = tensor(&[1, 2, sk, hd], 23);
    let mask = sparse_mask(sq, sk, 5, 2);
    let options = SdpaOptions {
        scale: Some(0.3),
        causal: true,
    };
    let q1 = tensor(&[1, 4, 1, hd], 24);
    let clean = [
        sdpa_after_poison(0.0, &q, &k, &v, Some(&mask), &options),
        sdpa_after_poison(0.0, &q1, &k, &v, None, &options),
    ];
    for poison in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -1.5] {
        assert_eq!(
            sdpa_after_poison(poison, &q, &k, &v, Some(&mask), &options),
            clean[0],
            "prefill after {poison}"
        );
        assert_eq!(
            sdpa_after_poison(poison, &q1, &k, &v, None, &options),
            clean[1],
            "decode after {poison}"
        );
    }
}

/// Two tasks' chunks ([`Chunks`](crate::Chunks), as every schedule cuts them) run one after
/// the other on the calling thread: a matrix product splits for two tasks (over rows or over
/// tiles) and every body call takes this thread's reused scratch. With a config that always
/// forks, any kernel's region is cut as a pool of two would cut it.
#[cfg(feature = "std")]
pub(super) struct TwoTasksInline;

#[cfg(feature = "std")]
impl crate::Schedule for TwoTasksInline {
    fn parallelism(&self) -> usize {
        2
    }

    fn name(&self) -> &str {
        "two-tasks-inline"
    }

    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        for range in crate::Chunks::new(n, grain, 2).iter() {
            body(range.start, range.end);
        }
    }
}

#[test]
#[cfg(feature = "std")]
#[cfg_attr(
    miri,
    ignore = "no unsafe code of its own (the packed product's is run under miri by the tests \
              above), and 72 products take minutes interpreted"
)]
fn matmul_bits_do_not_depend_on_what_the_threads_reused_scratch_held() {
    // Ragged panels and a depth past one packed slice (300 > 256), which two tasks split over
    // rows; then few rows against many columns, which two tasks split over column tiles (the
    // tile and its packs in the scratch).
    for (m, k, n) in [(61, 300, 37), (5, 40, 2100)] {
        let a = tensor(&[m, k], 31);
        let b = tensor(&[k, n], 32);
        let run = |poison: f32| -> Vec<Vec<u32>> {
            let mut outs = Vec::new();
            for variant in registered() {
                for precision in [Precision::Portable, Precision::Native] {
                    let config = KernelConfig::new(Arc::clone(&variant))
                        .with_precision(precision)
                        .with_min_parallel_work(0);
                    for two in [false, true] {
                        super::error::poison_reused_scratch(1 << 17, poison);
                        let out = match two {
                            false => matmul_with(&config, &a, &b, &Sequential),
                            true => matmul_with(&config, &a, &b, &TwoTasksInline),
                        };
                        outs.push(out.unwrap().to_bits());
                    }
                }
            }
            outs
        };
        let clean = run(0.0);
        for poison in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, -1.5] {
            assert_eq!(run(poison), clean, "{m}x{k}x{n} after {poison}");
        }
    }
}

#[test]
fn attention_with_fewer_than_four_pieces_per_task_forks_only_past_a_late_helpers_work() {
    use super::sdpa::{fork_from, SDPA_LATE_HELPER_WORK, SDPA_PARALLEL_MIN_WORK};
    assert_eq!(SDPA_LATE_HELPER_WORK, 1 << 22);
    // Helpers asleep. Two pieces on two tasks: each piece must outlast a helper's late start.
    assert_eq!(fork_from(2, 2, true, false), 1 << 23);
    assert_eq!(fork_from(3, 2, true, false), 6_291_456); // 2^22 · 3 / 2
    assert_eq!(fork_from(4, 2, true, false), 5_592_405); // 2^22 · 4 / 3, rounded down
    assert_eq!(fork_from(7, 2, true, false), 4_893_354); // 2^22 · 7 / 6
                                                         // Five tasks of one piece each: 2^22 · 5 / 4.
    assert_eq!(fork_from(5, 16, true, false), 5_242_880);
    // A decode step's late start is half the work.
    assert_eq!(fork_from(2, 2, true, true), 1 << 22);
    assert_eq!(fork_from(4, 2, true, true), 2_796_202); // 2^21 · 4 / 3, rounded down
                                                        // Four pieces per task or more: the pool decides after the first piece.
    assert_eq!(fork_from(8, 2, true, false), SDPA_PARALLEL_MIN_WORK);
    assert_eq!(fork_from(64, 16, true, true), SDPA_PARALLEL_MIN_WORK);
    // One piece never forks; a huge count neither overflows nor divides by zero.
    assert_eq!(fork_from(1, 2, true, false), SDPA_PARALLEL_MIN_WORK);
    assert_eq!(fork_from(0, 2, true, false), SDPA_PARALLEL_MIN_WORK);
    assert_eq!(fork_from(usize::MAX, usize::MAX, true, false), 1 << 22);
    // Helpers awake: no late start to make up.
    assert_eq!(fork_from(2, 2, false, false), SDPA_PARALLEL_MIN_WORK);
    assert_eq!(fork_from(7, 2, false, true), SDPA_PARALLEL_MIN_WORK);
}
