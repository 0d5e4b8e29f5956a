#![cfg(not(feature = "loom"))]
//! quant_linear (exact and q8 activations) and quant_embedding over every block format: bit
//! parity under every schedule, exact mode within f32 rounding of an f64 reference computed
//! from the decoded weight (and `linear`'s bits for one row), q8 mode against hand-computed
//! cases, and one error per invalid input class.

mod common;

use common::{all_schedules, uniform};
use skainet_schedule::quant::{decode_row, f32_to_f16, BlockQ4_1, BlockQ8_0, GgmlType, QuantError};
use skainet_schedule::{
    linear, quant_embedding, quant_embedding_with, quant_linear, quant_linear_many,
    quant_linear_many_with, quant_linear_with, Activations, KernelConfig, KernelError, QMatrix,
    Sequential, ShapeError, Tensor,
};

/// Random blocks of `ty` with every f16 scale set to a moderate value of either sign, so
/// no value is infinite or NaN.
fn random_weight(ty: GgmlType, rows: usize, cols: usize, seed: u32) -> Vec<u8> {
    let len = rows * ty.row_bytes(cols).unwrap();
    let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    let mut next = move || {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        state
    };
    let mut bytes: Vec<u8> = (0..len).map(|_| (next() >> 24) as u8).collect();
    let fields: &[usize] = match ty {
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q5_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        GgmlType::F16 => &[0],
        _ => &[],
    };
    for block in bytes.chunks_exact_mut(ty.block_bytes()) {
        match ty {
            GgmlType::F32 => {
                let v = (next() >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                block.copy_from_slice(&v.to_le_bytes());
            }
            GgmlType::BF16 => {
                let v = (next() >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                block.copy_from_slice(&((v.to_bits() >> 16) as u16).to_le_bytes());
            }
            _ => {
                for &at in fields {
                    let v = ((next() >> 8) as f32 / (1u32 << 24) as f32 - 0.5) * 0.1;
                    block[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
                }
            }
        }
    }
    bytes
}

fn decoded(w: &QMatrix<'_>) -> Vec<f32> {
    let mut out = vec![0.0f32; w.rows() * w.cols()];
    for (r, o) in out.chunks_exact_mut(w.cols()).enumerate() {
        decode_row(w.ty(), w.row(r).unwrap(), o).unwrap();
    }
    out
}

fn always_fork() -> KernelConfig {
    KernelConfig::selected().with_min_parallel_work(0)
}

#[test]
fn quant_linear_is_bit_identical_under_every_schedule_for_every_type_and_mode() {
    let schedules = all_schedules();
    let config = always_fork();
    for ty in GgmlType::ALL {
        let (n, k) = (40, 512);
        let bytes = random_weight(ty, n, k, ty.id());
        let w = QMatrix::new(ty, n, k, &bytes).unwrap();
        for rows in [1, 3] {
            let x = uniform(&[rows, k], 7 + rows as u32);
            for mode in [Activations::Exact, Activations::Q8] {
                let want = quant_linear_with(&config, &x, &w, mode, &Sequential).unwrap();
                assert_eq!(want.shape(), [rows, n]);
                for s in &schedules {
                    let got = quant_linear_with(&config, &x, &w, mode, &**s).unwrap();
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty} {mode:?} rows {rows} under {}",
                        s.name()
                    );
                }
            }
        }
    }
}

#[test]
fn quant_linear_many_gives_each_weights_own_bits_under_every_schedule() {
    let schedules = all_schedules();
    let config = always_fork();
    // Widths that are not multiples of the kernels' eight-row chunks or of the grain, so that
    // a region's pieces straddle two weights.
    let (k, widths) = (256, [37, 9, 50]);
    for ty in GgmlType::ALL {
        let bytes: Vec<Vec<u8>> = widths
            .iter()
            .enumerate()
            .map(|(i, &n)| random_weight(ty, n, k, ty.id() * 3 + i as u32))
            .collect();
        let ws: Vec<QMatrix<'_>> = bytes
            .iter()
            .zip(widths)
            .map(|(b, n)| QMatrix::new(ty, n, k, b).unwrap())
            .collect();
        for rows in [1, 3] {
            let x = uniform(&[rows, k], 11 + rows as u32);
            for mode in [Activations::Exact, Activations::Q8] {
                let want: Vec<Vec<u32>> = ws
                    .iter()
                    .map(|w| {
                        quant_linear_with(&config, &x, w, mode, &Sequential)
                            .unwrap()
                            .to_bits()
                    })
                    .collect();
                for s in &schedules {
                    let got = quant_linear_many_with(&config, &x, &ws, mode, &**s).unwrap();
                    let got: Vec<Vec<u32>> = got.iter().map(Tensor::to_bits).collect();
                    assert_eq!(got, want, "{ty} {mode:?} rows {rows} under {}", s.name());
                }
            }
        }
    }
}

#[test]
fn quant_linear_many_runs_weights_of_different_formats_one_by_one() {
    let k = 256;
    let a = random_weight(GgmlType::Q4_1, 20, k, 1);
    let b = random_weight(GgmlType::Q6_K, 12, k, 2);
    let ws = [
        QMatrix::new(GgmlType::Q4_1, 20, k, &a).unwrap(),
        QMatrix::new(GgmlType::Q6_K, 12, k, &b).unwrap(),
    ];
    let x = uniform(&[2, k], 5);
    for mode in [Activations::Exact, Activations::Q8] {
        let got = quant_linear_many(&x, &ws, mode, &Sequential).unwrap();
        assert_eq!(got.len(), 2);
        for (got, w) in got.iter().zip(&ws) {
            let want = quant_linear(&x, w, mode, &Sequential).unwrap();
            assert_eq!((got.shape(), got.to_bits()), (want.shape(), want.to_bits()));
        }
    }
    assert!(quant_linear_many(&x, &[], Activations::Q8, &Sequential)
        .unwrap()
        .is_empty());
}

#[test]
fn quant_linear_many_rejects_a_weight_of_another_width_naming_it() {
    let a = random_weight(GgmlType::Q8_0, 2, 64, 1);
    let b = random_weight(GgmlType::Q8_0, 3, 32, 2);
    let ws = [
        QMatrix::new(GgmlType::Q8_0, 2, 64, &a).unwrap(),
        QMatrix::new(GgmlType::Q8_0, 3, 32, &b).unwrap(),
    ];
    let x = uniform(&[1, 64], 1);
    assert_eq!(
        quant_linear_many(&x, &ws, Activations::Q8, &Sequential).unwrap_err(),
        KernelError::Shape(ShapeError::MatmulInnerMismatch {
            a: vec![1, 64],
            b: vec![3, 32]
        })
    );
}

#[test]
fn every_available_variant_gives_the_portable_bits_for_every_type_mode_and_row_count() {
    use skainet_schedule::{cpu_kernels, KernelProvider, Precision};
    let registry = cpu_kernels();
    let portable = KernelConfig::new(registry.find("portable").unwrap());
    let variants: Vec<_> = registry
        .providers()
        .iter()
        .filter(|p| p.is_available())
        .cloned()
        .collect();
    assert!(variants.len() >= 2 || !cfg!(target_arch = "x86_64"));
    for ty in GgmlType::ALL {
        // Two K-quant blocks a row (512); 40 = two whole 16-row calls and a ragged one.
        let (n, k) = (40, 512);
        let bytes = random_weight(ty, n, k, 3 + ty.id());
        let w = QMatrix::new(ty, n, k, &bytes).unwrap();
        for rows in [1, 2, 3, 4, 5, 7, 9] {
            let x = uniform(&[rows, k], 11 + rows as u32);
            for mode in [Activations::Exact, Activations::Q8] {
                let want = quant_linear_with(&portable, &x, &w, mode, &Sequential).unwrap();
                for v in &variants {
                    let config = KernelConfig::new(v.clone());
                    let got = quant_linear_with(&config, &x, &w, mode, &Sequential).unwrap();
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty} {mode:?} rows {rows} on {}",
                        v.name()
                    );
                    // The native mode may fuse; it stays within a few roundings.
                    let native = config.with_precision(Precision::Native);
                    let fused = quant_linear_with(&native, &x, &w, mode, &Sequential).unwrap();
                    for (f, p) in fused.data().iter().zip(want.data()) {
                        assert!(
                            (f - p).abs() <= 1e-4 * (1.0 + p.abs()),
                            "{ty} {mode:?} rows {rows} native on {}: {f} vs {p}",
                            v.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_available_variant_gives_the_portable_bits_for_float_rows_whole_or_ragged() {
    use skainet_schedule::{cpu_kernels, KernelProvider};
    let registry = cpu_kernels();
    let portable = KernelConfig::new(registry.find("portable").unwrap());
    // 96 is three whole groups of 32 (the vector loops read the floats as blocks of 32), 72
    // and 13 end ragged (the generic loop).
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        for k in [96, 72, 13] {
            let bytes = random_weight(ty, 21, k, 17 + ty.id());
            let w = QMatrix::new(ty, 21, k, &bytes).unwrap();
            for rows in [1, 4, 6] {
                let x = uniform(&[rows, k], 5 + rows as u32);
                let want =
                    quant_linear_with(&portable, &x, &w, Activations::Exact, &Sequential).unwrap();
                assert!(want.data().iter().all(|v| v.is_finite() && *v != 0.0));
                for v in registry.providers().iter().filter(|p| p.is_available()) {
                    let config = KernelConfig::new(v.clone());
                    let got = quant_linear_with(&config, &x, &w, Activations::Exact, &Sequential)
                        .unwrap();
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{ty} k {k} rows {rows} on {}",
                        v.name()
                    );
                }
            }
        }
    }
}

#[test]
fn exact_mode_is_within_f32_rounding_of_an_f64_reference_of_the_decoded_weight() {
    for ty in GgmlType::ALL {
        let (n, k, rows) = (9, 768, 2);
        let bytes = random_weight(ty, n, k, 100 + ty.id());
        let w = QMatrix::new(ty, n, k, &bytes).unwrap();
        let wd = decoded(&w);
        let x = uniform(&[rows, k], 3);
        let y = quant_linear(&x, &w, Activations::Exact, &Sequential).unwrap();
        for r in 0..rows {
            for j in 0..n {
                let xr = &x.data()[r * k..(r + 1) * k];
                let wr = &wd[j * k..(j + 1) * k];
                let reference: f64 = xr.iter().zip(wr).map(|(&a, &b)| a as f64 * b as f64).sum();
                let magnitude: f64 = xr
                    .iter()
                    .zip(wr)
                    .map(|(&a, &b)| (a as f64 * b as f64).abs())
                    .sum();
                // A sum of k products in f32: each step rounds at most 2^-24 relative.
                let bound = (k as f64 + 2.0) * f64::from(f32::EPSILON) / 2.0 * magnitude;
                let got = y.data()[r * n + j] as f64;
                assert!(
                    (got - reference).abs() <= bound,
                    "{ty} ({r}, {j}): {got} vs {reference} (bound {bound})"
                );
            }
        }
    }
}

#[test]
fn exact_mode_of_one_row_has_the_bits_of_linear_over_the_decoded_weight() {
    for ty in GgmlType::ALL {
        let (n, k) = (5, 256);
        let bytes = random_weight(ty, n, k, 200 + ty.id());
        let w = QMatrix::new(ty, n, k, &bytes).unwrap();
        let wd = Tensor::new(vec![n, k], decoded(&w)).unwrap();
        let x = uniform(&[k], 11);
        let ours = quant_linear(&x, &w, Activations::Exact, &Sequential).unwrap();
        let theirs = linear(&x, &wd, &Sequential).unwrap();
        assert_eq!(ours.shape(), [n]);
        assert_eq!(ours.to_bits(), theirs.to_bits(), "{ty}");
    }
}

#[test]
fn exact_mode_of_a_float_row_with_a_ragged_length_has_linears_bits_too() {
    let (n, k) = (3, 45);
    let bytes = random_weight(GgmlType::F16, n, k, 5);
    let w = QMatrix::new(GgmlType::F16, n, k, &bytes).unwrap();
    let wd = Tensor::new(vec![n, k], decoded(&w)).unwrap();
    let x = uniform(&[1, k], 2);
    let ours = quant_linear(&x, &w, Activations::Q8, &Sequential).unwrap();
    assert_eq!(
        ours.to_bits(),
        linear(&x, &wd, &Sequential).unwrap().to_bits()
    );
}

#[test]
fn q8_mode_of_q8_0_weights_is_the_integer_dot_times_the_scales() {
    // Activations whose largest magnitude is 127 quantize to themselves with d = 1.
    let xs: Vec<f32> = (0..64)
        .map(|i| if i == 5 { 127.0 } else { (i % 7) as f32 - 3.0 })
        .collect();
    let w = [
        BlockQ8_0 {
            d: f32_to_f16(0.5),
            qs: core::array::from_fn(|j| j as i8 - 10),
        },
        BlockQ8_0 {
            d: f32_to_f16(0.25),
            qs: [3; 32],
        },
    ];
    let bytes: Vec<u8> = w.iter().flat_map(|b| b.to_le_bytes()).collect();
    let m = QMatrix::new(GgmlType::Q8_0, 1, 64, &bytes).unwrap();
    let x = Tensor::new(vec![1, 64], xs.clone()).unwrap();
    let y = quant_linear(&x, &m, Activations::Q8, &Sequential).unwrap();
    // Block 0 quantizes to itself (amax 127, d = 1): Σ (j − 10)·x[j] = −625. Block 1 has
    // amax 3: d = 3/127, id = 127/3, so ±3, ±2, ±1 become ±127, ±85, ±42; it holds five −3,
    // four −2, four −1, four 0, five 1, five 2 and five 3: 3·(127·0 + 85·1 + 42·1) = 381.
    let (i0, i1) = (-625i32, 381i32);
    let d1 = skainet_schedule::quant::f16_to_f32(f32_to_f16(3.0 / 127.0));
    let mut want = 0.0f32;
    want += i0 as f32 * (0.5f32 * 1.0);
    want += i1 as f32 * (0.25f32 * d1);
    assert_eq!(y.data()[0].to_bits(), want.to_bits());
}

#[test]
fn q8_mode_of_q4_1_weights_adds_the_minimum_times_the_activation_sum_for_each_row() {
    let w = BlockQ4_1 {
        d: f32_to_f16(1.0),
        m: f32_to_f16(-2.0),
        qs: [0x31; 16], // values 1 (first 16) and 3 (last 16)
    };
    let bytes = w.to_le_bytes();
    let m = QMatrix::new(GgmlType::Q4_1, 1, 32, &bytes).unwrap();
    let mut x = vec![0.0f32; 64];
    x[0] = 127.0; // row 0: q = [127, 0.., -1 at 16], d = 1, s = 126
    x[16] = -1.0;
    x[32 + 3] = -127.0; // row 1: q = [.., -127 at 3, .., 5 at 20], s = -122
    x[32 + 20] = 5.0;
    let x = Tensor::new(vec![2, 32], x).unwrap();
    let y = quant_linear(&x, &m, Activations::Q8, &Sequential).unwrap();
    // (1·1)·(1·127 + 3·(−1)) + (−2)·126 = 124 − 252; (1·1)·(1·(−127) + 3·5) + (−2)·(−122).
    assert_eq!(y.shape(), [2, 1]);
    assert_eq!(y.data(), [-128.0, 132.0]);
}

#[test]
fn q8_mode_is_close_to_exact_mode_for_every_quantized_type() {
    for ty in GgmlType::ALL {
        let (n, k) = (6, 512);
        let bytes = random_weight(ty, n, k, 300 + ty.id());
        let w = QMatrix::new(ty, n, k, &bytes).unwrap();
        let x = uniform(&[2, k], 9);
        let exact = quant_linear(&x, &w, Activations::Exact, &Sequential).unwrap();
        let q8 = quant_linear(&x, &w, Activations::Q8, &Sequential).unwrap();
        let wd = decoded(&w);
        for (i, (a, b)) in exact.data().iter().zip(q8.data()).enumerate() {
            let (r, j) = (i / n, i % n);
            let scale: f32 = x.data()[r * k..(r + 1) * k]
                .iter()
                .zip(&wd[j * k..(j + 1) * k])
                .map(|(x, w)| (x * w).abs())
                .sum();
            assert!(
                (a - b).abs() <= 0.02 * scale,
                "{ty} {i}: {a} vs {b} ({scale})"
            );
        }
    }
}

#[test]
fn quant_linear_keeps_leading_dimensions_and_handles_empty_shapes() {
    let bytes = random_weight(GgmlType::Q4_0, 3, 32, 1);
    let w = QMatrix::new(GgmlType::Q4_0, 3, 32, &bytes).unwrap();
    let x = uniform(&[2, 2, 32], 4);
    let y = quant_linear(&x, &w, Activations::Q8, &Sequential).unwrap();
    assert_eq!(y.shape(), [2, 2, 3]);
    let x = Tensor::zeros(vec![0, 32]).unwrap();
    assert_eq!(
        quant_linear(&x, &w, Activations::Exact, &Sequential)
            .unwrap()
            .shape(),
        [0, 3]
    );
    let w0 = QMatrix::new(GgmlType::Q4_0, 2, 0, &[]).unwrap();
    let x = Tensor::zeros(vec![1, 0]).unwrap();
    let y = quant_linear(&x, &w0, Activations::Q8, &Sequential).unwrap();
    assert_eq!(y.to_bits(), [0, 0]);
}

#[test]
fn quant_linear_rejects_a_k_that_is_not_the_weights_columns() {
    let bytes = random_weight(GgmlType::Q8_0, 2, 32, 1);
    let w = QMatrix::new(GgmlType::Q8_0, 2, 32, &bytes).unwrap();
    let x = uniform(&[1, 64], 1);
    assert_eq!(
        quant_linear(&x, &w, Activations::Exact, &Sequential).unwrap_err(),
        KernelError::Shape(ShapeError::MatmulInnerMismatch {
            a: vec![1, 64],
            b: vec![2, 32]
        })
    );
}

#[test]
fn quant_linear_rejects_activations_whose_rows_are_not_contiguous() {
    let bytes = random_weight(GgmlType::Q8_0, 2, 32, 1);
    let w = QMatrix::new(GgmlType::Q8_0, 2, 32, &bytes).unwrap();
    let t = uniform(&[32, 3], 1);
    let x = t.view().permute(&[1, 0]).unwrap(); // [3, 32] with strides [1, 3]
    assert_eq!(
        quant_linear(&x, &w, Activations::Q8, &Sequential).unwrap_err(),
        KernelError::Shape(ShapeError::Layout {
            op: "quant_linear",
            operand: "x",
            shape: vec![3, 32],
            strides: vec![1, 3],
            expected: "the last stride 1"
        })
    );
}

#[test]
fn qmatrix_rejects_a_wrong_byte_length_naming_the_sizes() {
    let err = QMatrix::new(GgmlType::Q4_1, 3, 64, &[0; 119]).unwrap_err();
    assert_eq!(
        err,
        QuantError::MatrixBytes {
            ty: GgmlType::Q4_1,
            rows: 3,
            cols: 64,
            expected: 120,
            got: 119
        }
    );
    assert_eq!(
        err.to_string(),
        "q4_1: a 3 x 64 matrix takes 120 bytes, got 119"
    );
}

#[test]
fn qmatrix_rejects_columns_that_are_not_whole_blocks() {
    assert_eq!(
        QMatrix::new(GgmlType::Q4_K, 1, 320, &[0; 180]).unwrap_err(),
        QuantError::PartialBlock {
            ty: GgmlType::Q4_K,
            values: 320
        }
    );
}

#[test]
fn qmatrix_rejects_sizes_that_overflow_usize() {
    assert_eq!(
        QMatrix::new(GgmlType::Q8_0, usize::MAX, 32, &[]).unwrap_err(),
        QuantError::MatrixTooLarge {
            ty: GgmlType::Q8_0,
            rows: usize::MAX,
            cols: 32
        }
    );
    let cols = usize::MAX / 32 * 32;
    assert_eq!(
        QMatrix::new(GgmlType::Q8_0, 1, cols, &[]).unwrap_err(),
        QuantError::TooLarge {
            ty: GgmlType::Q8_0,
            values: cols
        }
    );
    let err: KernelError = QMatrix::new(GgmlType::Q8_0, 1, cols, &[])
        .unwrap_err()
        .into();
    assert_eq!(
        err.to_string(),
        format!("q8_0: the bytes of a row of {cols} values overflow usize")
    );
}

#[test]
fn quant_embedding_decodes_the_rows_exactly_under_every_schedule() {
    let (vocab, d) = (20, 64);
    let config = always_fork();
    for ty in GgmlType::ALL {
        let cols = if ty.block_len() == 256 { 256 } else { d };
        let bytes = random_weight(ty, vocab, cols, 400 + ty.id());
        let table = QMatrix::new(ty, vocab, cols, &bytes).unwrap();
        let ids = [3u32, 0, 19, 3, 7];
        let want = quant_embedding_with(&config, &ids, &table, &Sequential).unwrap();
        assert_eq!(want.shape(), [5, cols]);
        let mut row = vec![0.0f32; cols];
        decode_row(ty, table.row(19).unwrap(), &mut row).unwrap();
        let bits: Vec<u32> = row.iter().map(|v| v.to_bits()).collect();
        assert_eq!(&want.to_bits()[2 * cols..3 * cols], &bits[..], "{ty}");
        for s in all_schedules() {
            let got = quant_embedding_with(&config, &ids, &table, &*s).unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{ty} under {}", s.name());
        }
    }
}

#[test]
fn quant_embedding_rejects_an_id_past_the_table_naming_it() {
    let bytes = random_weight(GgmlType::Q8_0, 4, 32, 1);
    let table = QMatrix::new(GgmlType::Q8_0, 4, 32, &bytes).unwrap();
    let err = quant_embedding(&[1, 3, 4, 9], &table, &Sequential).unwrap_err();
    assert_eq!(
        err,
        KernelError::Shape(ShapeError::EmbeddingId {
            table: vec![4, 32],
            index: 2,
            id: 4
        })
    );
    assert_eq!(
        err.to_string(),
        "embedding: token id 4 (at index 2) is not a row of the table [4, 32]"
    );
    assert!(matches!(
        quant_embedding(&[u32::MAX], &table, &Sequential),
        Err(KernelError::Shape(ShapeError::EmbeddingId { id, index: 0, .. })) if id == u32::MAX as usize
    ));
}
