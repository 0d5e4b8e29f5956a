//! The exact decode of every block format against the `gguf` Python package's
//! `gguf.quants.dequantize`, bit for bit, over the fixtures in `tests/fixtures/quant/`, and
//! the crate's f16/bf16 conversions against the `half` crate over every bit pattern.
//!
//! The fixtures were produced, from the repository root, by
//!
//! ```text
//! python3 scripts/quant_fixtures.py
//! ```
//!
//! (the script installs `gguf` and `numpy` into a virtual environment of its own outside the
//! repository; its header documents the file format). One difference is expected and checked:
//! numpy widens a signalling-NaN f16 without setting its quiet bit, where ggml, x86's
//! `vcvtph2ps`, aarch64's `fcvt` and this crate set it. And a NaN that arithmetic produced
//! (`inf·0`, a NaN scale times a quant) has the bits x86 gives it; other targets may choose
//! another NaN, so off x86_64 such a value is only checked to be a NaN.

use skainet_schedule::quant::{bf16_to_f32, decode_row, f16_to_f32, f32_to_f16, GgmlType};

struct Case {
    label: String,
    values: usize,
    bytes: Vec<u8>,
    bits: Vec<u32>,
}

fn hex_bytes(s: &str) -> Vec<u8> {
    assert_eq!(s.len() % 2, 0);
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn cases(name: &str) -> Vec<Case> {
    let path = format!(
        "{}/tests/fixtures/quant/{name}.txt",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            assert_eq!(f.len(), 4, "{path}: {l}");
            let bits_hex = f[3];
            let bits = (0..bits_hex.len())
                .step_by(8)
                .map(|i| u32::from_str_radix(&bits_hex[i..i + 8], 16).unwrap())
                .collect::<Vec<_>>();
            let values: usize = f[1].parse().unwrap();
            assert_eq!(bits.len(), values, "{path}: {}", f[0]);
            Case {
                label: f[0].to_string(),
                values,
                bytes: hex_bytes(f[2]),
                bits,
            }
        })
        .collect()
}

fn is_nan(bits: u32) -> bool {
    bits & 0x7fff_ffff > 0x7f80_0000
}

/// Decodes every case of `ty`'s fixture and compares bits; returns how many values were the
/// one expected difference (a signalling NaN numpy left signalling, quieted here).
fn check(ty: GgmlType) -> usize {
    let mut quieted = 0;
    let all = cases(ty.name());
    assert!(!all.is_empty(), "{ty}: no cases");
    for case in all {
        let mut out = vec![0.0f32; case.values];
        decode_row(ty, &case.bytes, &mut out).unwrap();
        for (i, (got, want)) in out.iter().map(|x| x.to_bits()).zip(&case.bits).enumerate() {
            let want = *want;
            if got == want {
                continue;
            }
            if ty == GgmlType::F16 && is_nan(want) && want & 0x0040_0000 == 0 {
                assert_eq!(got, want | 0x0040_0000, "{ty} {} value {i}", case.label);
                quieted += 1;
                continue;
            }
            let arithmetic_nan = !matches!(ty, GgmlType::F16 | GgmlType::BF16 | GgmlType::F32)
                && is_nan(want)
                && is_nan(got);
            assert!(
                arithmetic_nan && !cfg!(target_arch = "x86_64"),
                "{ty} {} value {i}: got {got:#010x}, gguf {want:#010x}",
                case.label
            );
        }
    }
    quieted
}

#[test]
fn q8_0_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q8_0), 0);
}

#[test]
fn q4_0_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q4_0), 0);
}

#[test]
fn q4_1_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q4_1), 0);
}

#[test]
fn q5_0_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q5_0), 0);
}

#[test]
fn q5_1_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q5_1), 0);
}

#[test]
fn q4_k_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q4_K), 0);
}

#[test]
fn q5_k_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q5_K), 0);
}

#[test]
fn q6_k_decodes_as_gguf() {
    assert_eq!(check(GgmlType::Q6_K), 0);
}

#[test]
fn f16_rows_decode_as_gguf_but_quiet_signalling_nans() {
    let signalling = cases("f16")
        .iter()
        .flat_map(|c| {
            c.bytes
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
        })
        .filter(|h| h & 0x7c00 == 0x7c00 && h & 0x03ff != 0 && h & 0x0200 == 0)
        .count();
    // The specials hold three (0x7c01, 0xfc01, 0x7d55); the random row may add some.
    assert!(signalling >= 3, "{signalling}");
    assert_eq!(check(GgmlType::F16), signalling);
}

#[test]
fn bf16_rows_decode_as_gguf() {
    assert_eq!(check(GgmlType::BF16), 0);
}

#[test]
fn f32_rows_decode_as_gguf() {
    assert_eq!(check(GgmlType::F32), 0);
}

#[test]
fn f16_widening_equals_the_half_crate_for_all_65536_patterns() {
    for bits in 0..=u16::MAX {
        let ours = f16_to_f32(bits).to_bits();
        let theirs = half::f16::from_bits(bits).to_f32().to_bits();
        assert_eq!(ours, theirs, "{bits:#06x}");
    }
}

#[test]
fn f16_narrowing_equals_the_half_crate_on_a_sweep_of_f32_patterns() {
    // Every f32 exponent, with mantissas stepping by a prime plus the rounding edges.
    let mut checked = 0u32;
    for exp in 0..=255u32 {
        for m in (0..0x0080_0000u32)
            .step_by(7919)
            .chain([0x0fff, 0x1000, 0x1001, 0x2fff, 0x3000, 0x3001, 0x7f_ffff])
        {
            for sign in [0, 0x8000_0000u32] {
                let x = f32::from_bits(sign | (exp << 23) | m);
                let theirs = half::f16::from_f32(x).to_bits();
                assert_eq!(f32_to_f16(x), theirs, "{:#010x}", x.to_bits());
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 256 * 1067 * 2);
}

#[test]
fn bf16_widening_equals_the_half_crate_for_all_65536_patterns_but_keeps_signalling_nans() {
    // ggml (`GGML_BF16_TO_FP32`) and gguf widen bf16 by a shift, so a signalling NaN stays
    // signalling; `half` quiets it. Every other pattern agrees.
    let mut signalling = 0;
    for bits in 0..=u16::MAX {
        let ours = bf16_to_f32(bits).to_bits();
        assert_eq!(ours, u32::from(bits) << 16);
        let theirs = half::bf16::from_bits(bits).to_f32().to_bits();
        if bits & 0x7f80 == 0x7f80 && bits & 0x007f != 0 && bits & 0x0040 == 0 {
            assert_eq!(theirs, ours | 0x0040_0000, "{bits:#06x}");
            signalling += 1;
        } else {
            assert_eq!(ours, theirs, "{bits:#06x}");
        }
    }
    assert_eq!(signalling, 2 * 63);
}
