//! NaN in the kernels' inputs: a NaN in q, k, mask or scale is not "masked" — it reaches the
//! output rows it touches as NaN, on every compiled variant, and never turns into zeros or a
//! finite number. (A row is fully masked, and zeros, only when every score is `-inf`.)

use skainet_schedule::{
    cpu_kernels, scaled_dot_product_attention_with, KernelConfig, KernelProvider, Precision,
    SdpaOptions, Sequential, Tensor,
};

/// `b = 1`, `H = 2` over one K/V head (GQA), `sq = 6` (a four-row block and two lone rows),
/// `sk = 9`, `hd = 11` (a ragged lane tail).
const H: usize = 2;
const SQ: usize = 6;
const SK: usize = 9;
const HD: usize = 11;

fn values(shape: &[usize], seed: u32) -> Tensor {
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    Tensor::from_fn(shape.to_vec(), |_| {
        x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (x >> 8) as f32 / (1u32 << 23) as f32 - 1.0
    })
    .unwrap()
}

struct Inputs {
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Option<Tensor>,
    options: SdpaOptions,
}

fn inputs(causal: bool) -> Inputs {
    Inputs {
        q: values(&[1, H, SQ, HD], 1),
        k: values(&[1, 1, SK, HD], 2),
        v: values(&[1, 1, SK, HD], 3),
        mask: None,
        options: SdpaOptions {
            scale: Some(0.3),
            causal,
        },
    }
}

/// A `[SQ, SK]` mask of `-inf` everywhere.
fn all_hidden() -> Tensor {
    Tensor::from_fn(vec![SQ, SK], |_| f32::NEG_INFINITY).unwrap()
}

/// What each output row `(head, i)` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Row {
    /// Every element NaN.
    Nan,
    /// Every element `+0.0`.
    Zeros,
    /// Every element finite, not all zero.
    Finite,
}

/// Runs every registered variant; asserts they agree bit for bit on every non-NaN element
/// and on where the NaNs are, and that no row mixes NaN and numbers. Returns the rows.
fn rows(x: &Inputs) -> Vec<Row> {
    let run = |config: &KernelConfig| {
        scaled_dot_product_attention_with(
            config,
            &x.q,
            &x.k,
            &x.v,
            x.mask.as_ref().map(Tensor::view),
            &x.options,
            &Sequential,
        )
        .unwrap()
    };
    let variants = cpu_kernels().providers();
    let want = run(&KernelConfig::new(variants[0].clone()));
    let canon = |t: &Tensor| -> Vec<Option<u32>> {
        t.data()
            .iter()
            .map(|x| (!x.is_nan()).then(|| x.to_bits()))
            .collect()
    };
    for variant in variants.iter() {
        let got = run(&KernelConfig::new(variant.clone()));
        assert_eq!(canon(&got), canon(&want), "variant {}", variant.name());
    }
    want.data()
        .chunks_exact(HD)
        .enumerate()
        .map(|(r, row)| {
            if row.iter().all(|x| x.is_nan()) {
                Row::Nan
            } else if row.iter().all(|x| x.to_bits() == 0) {
                Row::Zeros
            } else {
                assert!(
                    row.iter().all(|x| x.is_finite()),
                    "row {r} mixes NaN or inf with numbers: {row:?}"
                );
                Row::Finite
            }
        })
        .collect()
}

/// The rows `(head, i)` for which `f(i)` holds are `yes`, the others `no`, in both heads.
fn expect(f: impl Fn(usize) -> bool, yes: Row, no: Row) -> Vec<Row> {
    (0..H * SQ)
        .map(|r| if f(r % SQ) { yes } else { no })
        .collect()
}

#[test]
fn sdpa_nan_in_one_query_row_makes_exactly_that_row_nan() {
    let mut x = inputs(false);
    // Head 1, row 4 (a lone row after the four-row block), element 10 (in the lane tail).
    let at = (SQ + 4) * HD + 10;
    x.q.data_mut()[at] = f32::NAN;
    let mut want = vec![Row::Finite; H * SQ];
    want[SQ + 4] = Row::Nan;
    assert_eq!(rows(&x), want);
}

#[test]
fn sdpa_nan_in_a_masked_out_key_still_reaches_every_row_that_sees_it() {
    // Causal: row i sees keys j <= i + 3. Key 5 is NaN and the mask hides every key, so the
    // rows that see key 5 (i >= 2) have scores `-inf` and one `NaN + -inf = NaN`: not fully
    // masked. Rows 0 and 1 never compute key 5 and are fully masked: zeros.
    let mut x = inputs(true);
    x.k.data_mut()[5 * HD] = f32::NAN;
    x.mask = Some(all_hidden());
    assert_eq!(rows(&x), expect(|i| i >= 2, Row::Nan, Row::Zeros));
}

#[test]
fn sdpa_nan_scale_makes_every_row_nan() {
    let mut x = inputs(true);
    x.options.scale = Some(f32::NAN);
    assert_eq!(rows(&x), vec![Row::Nan; H * SQ]);
}

#[test]
fn sdpa_nan_scale_is_nan_even_where_the_mask_hides_every_key() {
    let mut x = inputs(false);
    x.options.scale = Some(f32::NAN);
    x.mask = Some(all_hidden());
    assert_eq!(rows(&x), vec![Row::Nan; H * SQ]);
}

#[test]
fn sdpa_nan_in_the_mask_makes_its_row_nan_even_when_the_rest_is_minus_inf() {
    let mut x = inputs(false);
    // Row 2 is all -inf but for one NaN; row 3 is all -inf (fully masked); the rest visible.
    let mask = Tensor::from_fn(vec![SQ, SK], |at| match (at / SK, at % SK) {
        (2, 7) => f32::NAN,
        (2 | 3, _) => f32::NEG_INFINITY,
        _ => 0.0,
    })
    .unwrap();
    x.mask = Some(mask);
    let want: Vec<Row> = (0..H * SQ)
        .map(|r| match r % SQ {
            2 => Row::Nan,
            3 => Row::Zeros,
            _ => Row::Finite,
        })
        .collect();
    assert_eq!(rows(&x), want);
}

#[test]
fn sdpa_nan_query_row_under_a_full_mask_is_nan_not_zeros() {
    let mut x = inputs(false);
    x.q.data_mut()[HD] = f32::NAN; // head 0, row 1
    x.mask = Some(all_hidden());
    let mut want = vec![Row::Zeros; H * SQ];
    want[1] = Row::Nan;
    assert_eq!(rows(&x), want);
}

#[test]
fn sdpa_with_no_units_and_a_head_size_that_overflows_is_an_empty_result() {
    // b = 0, so the output is empty, but one unit's `Sq · hd` is 2 · usize::MAX.
    let empty = |shape: Vec<usize>| Tensor::new(shape, Vec::new()).unwrap();
    let q = empty(vec![0, 1, 2, usize::MAX]);
    let kv = empty(vec![0, 1, 0, usize::MAX]);
    let out = skainet_schedule::scaled_dot_product_attention(
        &q,
        &kv,
        &kv,
        None,
        &SdpaOptions::default(),
        &Sequential,
    )
    .unwrap();
    assert_eq!(out.shape(), [0, 1, 2, usize::MAX]);
    assert!(out.is_empty());
}

/// [`rows`] of every variant in the native precision mode (whose finite bits may differ from
/// the portable ones, never where the NaN and zero rows are).
fn native_rows(x: &Inputs) -> Vec<Vec<Row>> {
    cpu_kernels()
        .providers()
        .iter()
        .map(|variant| {
            let config = KernelConfig::new(variant.clone()).with_precision(Precision::Native);
            let out = scaled_dot_product_attention_with(
                &config,
                &x.q,
                &x.k,
                &x.v,
                x.mask.as_ref().map(Tensor::view),
                &x.options,
                &Sequential,
            )
            .unwrap();
            out.data()
                .chunks_exact(HD)
                .map(|row| {
                    if row.iter().all(|x| x.is_nan()) {
                        Row::Nan
                    } else if row.iter().all(|x| x.to_bits() == 0) {
                        Row::Zeros
                    } else {
                        assert!(row.iter().all(|x| x.is_finite()), "{row:?}");
                        Row::Finite
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn sdpa_native_mode_keeps_the_nan_and_zero_rows_of_the_portable_mode() {
    let mut nan_query = inputs(false);
    nan_query.q.data_mut()[(SQ + 4) * HD + 10] = f32::NAN;
    let mut nan_hidden_key = inputs(true);
    nan_hidden_key.k.data_mut()[5 * HD] = f32::NAN;
    nan_hidden_key.mask = Some(all_hidden());
    let mut nan_scale = inputs(false);
    nan_scale.options.scale = Some(f32::NAN);
    let mut all_masked = inputs(true);
    all_masked.mask = Some(all_hidden());
    for (name, x) in [
        ("nan query", nan_query),
        ("nan hidden key", nan_hidden_key),
        ("nan scale", nan_scale),
        ("all masked", all_masked),
    ] {
        let want = rows(&x);
        for got in native_rows(&x) {
            assert_eq!(got, want, "{name}");
        }
    }
}
