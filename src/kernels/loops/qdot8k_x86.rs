//! The q8 mode's K-quant dots (`Q4_K`, `Q5_K`, `Q6_K` against `Q8_K`) on AVX2 and AVX-512,
//! with the portable bits.
//!
//! The portable order (`qdot.rs`) takes each block's integer dot `isum = Σ scale·q·a` (and,
//! `Q4_K` and `Q5_K`, `msum = Σ bsums·min`) whole, then one float step per block. The integers
//! are exact in any order, so they are free to take the multiply-add instructions:
//!
//! * **The signs.** `vpmaddubsw` and `vpdpbusd` take one side unsigned: the weights' quants
//!   (`0..16`, `0..32`, and `Q6_K`'s `0..64` before its offset of −32), against the signed
//!   activations. `Q6_K`'s offset comes off per block as `32·Σ scale·bsums`, exact for every
//!   activation byte, −128 included (llama.cpp's sign trick is not), given `bsums` that are
//!   the sums of their sixteen quants, as `quantize_row_q8_K` leaves them (and only
//!   `quant_linear`, which quantizes the activations itself, builds these operands). No pair
//!   saturates: `2·63·128` is below 2^15.
//! * **One activation row (decode), AVX2.** A weight row's block in its own order: 32 quants a
//!   vector, `vpmaddubsw` against the activation's 32 bytes, `vpmaddwd` by the sub-block's
//!   scale (broadcast by `vpshufb`), eight i32 partial sums per block. Eight blocks at a time
//!   are reduced together, block `b` to lane `b`, and their float steps' products taken in one
//!   vector (`d` and `dmin` widened by `vcvtph2ps`); only the additions into the row's sum go
//!   one by one, in block order. The weight rows go one after another: one stream of reads
//!   measured faster from memory than eight rows side by side. For a few activation rows
//!   without AVX-512, eight weight rows run side by side, their partial sums reduced into one
//!   vector (`vphaddd`), one row to a lane.
//! * **Many rows (prefill), AVX-512 VNNI.** Sixteen weight rows to the sixteen i32 lanes of a
//!   vector, as the 32-value formats' wide pass: each block's quants transposed once per tile of
//!   activation rows, so that vector `k` of a sub-block holds every row's values `4k..4k + 4`;
//!   `vpdpbusd` against four activation bytes broadcast leaves each row's sub-block dot in its
//!   lane, times its scale (`vpmulld`) into the block's `isum`. The minima (`Q4_K`, `Q5_K`) and
//!   `Q6_K`'s offset go the same way, pairs of `bsums` against pairs of minima or scales
//!   (`vpmaddwd`).

use core::arch::x86_64::*;
use core::ops::Range;

use super::qdot::{q8_portable, Q8Rows};
use super::qdot8_x86::{
    halves16, halves8, hsum8, transposed16, words16, FloatLanes, TILE, WIDE_ROWS,
};
use crate::quant::BlockQ8_K;

/// The fewest activation rows that take the wide pass (below, eight rows in AVX2 lanes).
const WIDE_FROM: usize = 2;

/// Weight rows in the lanes of the AVX2 pass.
const LANES: usize = 8;

/// Blocks of one weight row whose float steps [`one`] takes in a vector.
const GROUP: usize = 8;

/// How many passes of eight rows ahead the AVX2 pass asks for the weights.
const AHEAD: usize = 2;

/// A K-quant format on these paths. Its methods may only run inside a function compiled with
/// AVX2 and F16C (and, for the `wide` ones, AVX-512 F, BW, VL and VNNI), on a CPU that has them.
pub(crate) trait KQuant {
    /// Bytes per block.
    const BYTES: usize;
    /// Whether the format has minima (`msum`).
    const MINS: bool;
    /// Where four bytes whose second half is the block's `d` begin (the first half is
    /// `Q4_K`'s and `Q5_K`'s `d` as well, then `dmin`).
    const HALVES: usize;
    /// Eight i32 partial sums of block `b`'s `isum` against the activation block `a`, and of
    /// its `msum` (zero without minima); `b` begins [`BYTES`](Self::BYTES) readable bytes.
    unsafe fn ints8(b: *const u8, a: &BlockQ8_K) -> (__m256i, __m256i);
    /// The `isum`s (and `msum`s: `msums[g]`, without minima untouched) of sixteen weight rows'
    /// block at `p` (row `c` at `p + c·rb`) against activation block `b` of each of the `rows`
    /// rows of `acts` (`blocks` a row), row `g`'s into `isums[g]`, one weight row to a lane.
    unsafe fn wide(
        p: *const u8,
        rb: usize,
        acts: (&[BlockQ8_K], usize, usize),
        rows: usize,
        isums: &mut [__m512i; TILE],
        msums: &mut [__m512i; TILE],
    );
}

/// `Q4_K`'s eight 6-bit scales and eight minima from its twelve bytes, each as eight bytes
/// of a little-endian u64 (`quant::scale_min_k4` for all eight at once).
#[inline(always)]
fn k4_scales(s: &[u8]) -> (u64, u64) {
    let word = |i: usize| u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]]);
    let (u0, u1, u2) = (word(0), word(1), word(2));
    let (six, four, two) = (0x3f3f_3f3f, 0x0f0f_0f0f, 0x0303_0303);
    let scales = u64::from(u0 & six) | u64::from((u2 & four) | ((u0 >> 6) & two) << 4) << 32;
    let mins = u64::from(u1 & six) | u64::from(((u2 >> 4) & four) | ((u1 >> 6) & two) << 4) << 32;
    (scales, mins)
}

/// The twelve bytes at `b + 4` (a `Q4_K` or `Q5_K` block's scales and minima).
#[inline(always)]
unsafe fn twelve(b: *const u8) -> [u8; 12] {
    // SAFETY: the caller passes a block, whose scales are the twelve bytes from 4.
    unsafe { core::ptr::read_unaligned(b.add(4) as *const [u8; 12]) }
}

/// `0x10` in each byte of `fifth` whose bit `k` is set.
#[inline(always)]
unsafe fn fifth_bit(fifth: __m256i, k: usize) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller.
    unsafe {
        let m = _mm256_set1_epi8((1u8 << k) as i8);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(fifth, m), m);
        _mm256_and_si256(set, _mm256_set1_epi8(0x10))
    }
}

/// The i16 `j` of each 128-bit half of `v` in all eight i16 of that half.
#[inline(always)]
unsafe fn spread16(v: __m256i, j: usize) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller.
    unsafe {
        let pair = (2 * j) as i16 | ((2 * j + 1) as i16) << 8;
        _mm256_shuffle_epi8(v, _mm256_set1_epi16(pair))
    }
}

/// The 32 bytes at `p`.
#[inline(always)]
unsafe fn load(p: *const u8) -> __m256i {
    // SAFETY: the callers pass 32 readable bytes.
    unsafe { _mm256_loadu_si256(p as *const __m256i) }
}

/// `Q4_K` or (`FIFTH`) `Q5_K` block `b` against `a`, `isum` and `msum`: `d`, `dmin`, twelve
/// bytes of 6-bit scales and minima, with `FIFTH` 32 bytes of fifth bits (bits `2c`, `2c + 1`
/// of byte `p` for values `64c + p`, `64c + 32 + p`), then 128 bytes of nibbles (byte `32c + p`:
/// value `64c + p` low, `64c + 32 + p` high).
#[inline(always)]
unsafe fn min_ints8<const FIFTH: bool>(b: *const u8, a: &BlockQ8_K) -> (__m256i, __m256i) {
    let qs = if FIFTH { 48 } else { 16 };
    let (scales, mins) = k4_scales(&{
        // SAFETY: `b` is a block.
        unsafe { twelve(b) }
    });
    // SAFETY: `b` is a block (its quant bytes from `qs`, with `FIFTH` its fifth bits from 16)
    // and `a.qs` 256 bytes; the rest is register-only with AVX2 per the caller.
    unsafe {
        let low = _mm256_set1_epi8(0x0f);
        // The eight scales as i16, in each half.
        let sc = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64));
        let sc = _mm256_set_m128i(sc, sc);
        let fifth = if FIFTH {
            load(b.add(16))
        } else {
            _mm256_setzero_si256()
        };
        let act = a.qs.as_ptr() as *const u8;
        let mut acc = [_mm256_setzero_si256(); 2];
        for c in 0..4 {
            let bytes = load(b.add(qs + 32 * c));
            let mut x = _mm256_and_si256(bytes, low);
            let mut y = _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), low);
            if FIFTH {
                x = _mm256_or_si256(x, fifth_bit(fifth, 2 * c));
                y = _mm256_or_si256(y, fifth_bit(fifth, 2 * c + 1));
            }
            let px = _mm256_maddubs_epi16(x, load(act.add(64 * c)));
            let py = _mm256_maddubs_epi16(y, load(act.add(64 * c + 32)));
            acc[0] = _mm256_add_epi32(acc[0], _mm256_madd_epi16(px, spread16(sc, 2 * c)));
            acc[1] = _mm256_add_epi32(acc[1], _mm256_madd_epi16(py, spread16(sc, 2 * c + 1)));
        }
        // `Σ bsums·min`, minimum `j / 2` at i16 `j`.
        let m = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins as i64));
        let m = _mm256_set_m128i(_mm_unpackhi_epi16(m, m), _mm_unpacklo_epi16(m, m));
        let msum = _mm256_madd_epi16(_mm256_loadu_si256(a.bsums.as_ptr() as _), m);
        (_mm256_add_epi32(acc[0], acc[1]), msum)
    }
}

/// The sixteen rows' 6-bit scales (`j < 8`: `S[j]`) and minima (`M[j]`) of `Q4_K`/`Q5_K` blocks
/// at `p + c·rb`, one row to an i32 (`quant::scale_min_k4` in each lane).
#[inline(always)]
unsafe fn k4_scales16(p: *const u8, rb: usize) -> ([__m512i; 8], [__m512i; 8]) {
    // SAFETY: each `p + c·rb` begins a block, its twelve scale bytes from 4; the rest is
    // register-only with AVX-512 F per the caller.
    unsafe {
        let (u0, u1, u2) = (words16(p, rb, 4), words16(p, rb, 8), words16(p, rb, 12));
        // No closures here: they would not inherit the features, and each intrinsic in one
        // would be a call.
        let six = _mm512_set1_epi32(0x3f3f_3f3f);
        let (four, two) = (
            _mm512_set1_epi32(0x0f0f_0f0f),
            _mm512_set1_epi32(0x0303_0303),
        );
        let s = [
            _mm512_and_si512(u0, six),
            _mm512_or_si512(
                _mm512_and_si512(u2, four),
                _mm512_slli_epi32::<4>(_mm512_and_si512(_mm512_srli_epi32::<6>(u0), two)),
            ),
        ];
        let m = [
            _mm512_and_si512(u1, six),
            _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi32::<4>(u2), four),
                _mm512_slli_epi32::<4>(_mm512_and_si512(_mm512_srli_epi32::<6>(u1), two)),
            ),
        ];
        let ff = _mm512_set1_epi32(0xff);
        let mut scales = [_mm512_setzero_si512(); 8];
        let mut mins = scales;
        for h in 0..2 {
            scales[4 * h] = _mm512_and_si512(s[h], ff);
            scales[4 * h + 1] = _mm512_and_si512(_mm512_srli_epi32::<8>(s[h]), ff);
            scales[4 * h + 2] = _mm512_and_si512(_mm512_srli_epi32::<16>(s[h]), ff);
            scales[4 * h + 3] = _mm512_srli_epi32::<24>(s[h]);
            mins[4 * h] = _mm512_and_si512(m[h], ff);
            mins[4 * h + 1] = _mm512_and_si512(_mm512_srli_epi32::<8>(m[h]), ff);
            mins[4 * h + 2] = _mm512_and_si512(_mm512_srli_epi32::<16>(m[h]), ff);
            mins[4 * h + 3] = _mm512_srli_epi32::<24>(m[h]);
        }
        (scales, mins)
    }
}

/// The eight i32 partial dots of `vpdpbusd` over four vectors `q` (values `4k..4k + 4` of each
/// lane's row) against the activation bytes at `a` (sixteen, four to a broadcast), in two
/// chains for the latency.
#[inline(always)]
unsafe fn dot16(q: &[__m512i], a: *const u8, acc: [__m512i; 2]) -> [__m512i; 2] {
    // SAFETY: the callers pass `4·q.len()` readable bytes at `a`; register-only otherwise, with
    // AVX-512 VNNI per the caller.
    unsafe {
        let mut acc = acc;
        for (k, &q) in q.iter().enumerate() {
            let four = core::ptr::read_unaligned(a.add(4 * k) as *const i32);
            acc[k % 2] = _mm512_dpbusd_epi32(acc[k % 2], q, _mm512_set1_epi32(four));
        }
        acc
    }
}

/// `Σ_q pairs[q]·(bsums[2q], bsums[2q + 1])` (`vpmaddwd`, one i16 pair of each lane's row in
/// `pairs[q]`), for the activation block `a`.
#[inline(always)]
unsafe fn bsum_pairs(pairs: &[__m512i; 8], a: &BlockQ8_K) -> __m512i {
    // SAFETY: `bsums` is sixteen i16; the rest is register-only with AVX-512 BW per the caller.
    unsafe {
        let bs = a.bsums.as_ptr() as *const i32;
        let mut acc = [_mm512_setzero_si512(); 2];
        for (q, &pair) in pairs.iter().enumerate() {
            let two = _mm512_set1_epi32(core::ptr::read_unaligned(bs.add(q)));
            acc[q % 2] = _mm512_add_epi32(acc[q % 2], _mm512_madd_epi16(pair, two));
        }
        _mm512_add_epi32(acc[0], acc[1])
    }
}

/// The wide pass of `Q4_K` or (`FIFTH`) `Q5_K`: see [`KQuant::wide`].
#[inline(always)]
unsafe fn min_wide<const FIFTH: bool>(
    p: *const u8,
    rb: usize,
    (acts, blocks, b): (&[BlockQ8_K], usize, usize),
    rows: usize,
    isums: &mut [__m512i; TILE],
    msums: &mut [__m512i; TILE],
) {
    let qs = if FIFTH { 48 } else { 16 };
    // SAFETY: each `p + c·rb` begins a block; the activation blocks are read through bounds
    // checks; the rest is register-only with the features per the caller.
    unsafe {
        let (scales, mins) = k4_scales16(p, rb);
        // Both bytes of each i32 pair `q`: minimum `q`, for `bsums[2q]` and `bsums[2q + 1]`.
        // A loop, not `map`: the closure would not inline the intrinsics.
        let mut pairs = mins;
        for m in &mut pairs {
            *m = _mm512_or_si512(*m, _mm512_slli_epi32::<16>(*m));
        }
        // Half `s` of each row's fifth bits (bytes `16s..16s + 16`), transposed.
        let fifth = if FIFTH {
            [transposed16(p, rb, 16), transposed16(p, rb, 32)]
        } else {
            [[_mm512_setzero_si512(); 4]; 2]
        };
        let low = _mm512_set1_epi8(0x0f);
        for c in 0..4 {
            // Values 64c + 16s + 4k + t (`x`) and 64c + 32 + 16s + 4k + t (`y`) at [4s + k].
            let mut x = [_mm512_setzero_si512(); 8];
            let mut y = x;
            for s in 0..2 {
                let t = transposed16(p, rb, qs + 32 * c + 16 * s);
                for k in 0..4 {
                    x[4 * s + k] = _mm512_and_si512(t[k], low);
                    y[4 * s + k] = _mm512_and_si512(_mm512_srli_epi16::<4>(t[k]), low);
                    if FIFTH {
                        let bit = _mm512_set1_epi8(0x10);
                        let f = fifth[s][k];
                        let lo = _mm512_test_epi8_mask(f, _mm512_set1_epi8(1 << (2 * c)));
                        let hi = _mm512_test_epi8_mask(f, _mm512_set1_epi8(2 << (2 * c)));
                        x[4 * s + k] = _mm512_mask_add_epi8(x[4 * s + k], lo, x[4 * s + k], bit);
                        y[4 * s + k] = _mm512_mask_add_epi8(y[4 * s + k], hi, y[4 * s + k], bit);
                    }
                }
            }
            for (g, isum) in isums.iter_mut().take(rows).enumerate() {
                let a = (acts[g * blocks + b].qs.as_ptr() as *const u8).add(64 * c);
                let zero = [_mm512_setzero_si512(); 2];
                let dx = dot16(&x, a, zero);
                let dy = dot16(&y, a.add(32), zero);
                let dx = _mm512_mullo_epi32(_mm512_add_epi32(dx[0], dx[1]), scales[2 * c]);
                let dy = _mm512_mullo_epi32(_mm512_add_epi32(dy[0], dy[1]), scales[2 * c + 1]);
                let d = _mm512_add_epi32(dx, dy);
                *isum = if c == 0 {
                    d
                } else {
                    _mm512_add_epi32(*isum, d)
                };
            }
        }
        for (g, msum) in msums.iter_mut().take(rows).enumerate() {
            *msum = bsum_pairs(&pairs, &acts[g * blocks + b]);
        }
    }
}

/// `Q4_K`: `d`, `dmin`, twelve bytes of 6-bit scales and minima, 128 bytes of nibbles.
pub(crate) struct Q4K;

impl KQuant for Q4K {
    const BYTES: usize = crate::quant::BlockQ4_K::BYTES;
    const MINS: bool = true;
    const HALVES: usize = 0;
    #[inline(always)]
    unsafe fn ints8(b: *const u8, a: &BlockQ8_K) -> (__m256i, __m256i) {
        // SAFETY: as the trait's contract.
        unsafe { min_ints8::<false>(b, a) }
    }
    #[inline(always)]
    unsafe fn wide(
        p: *const u8,
        rb: usize,
        acts: (&[BlockQ8_K], usize, usize),
        rows: usize,
        isums: &mut [__m512i; TILE],
        msums: &mut [__m512i; TILE],
    ) {
        // SAFETY: as the trait's contract.
        unsafe { min_wide::<false>(p, rb, acts, rows, isums, msums) }
    }
}

/// `Q5_K`: `Q4_K`'s fields with 32 bytes of fifth bits before the nibbles.
pub(crate) struct Q5K;

impl KQuant for Q5K {
    const BYTES: usize = crate::quant::BlockQ5_K::BYTES;
    const MINS: bool = true;
    const HALVES: usize = 0;
    #[inline(always)]
    unsafe fn ints8(b: *const u8, a: &BlockQ8_K) -> (__m256i, __m256i) {
        // SAFETY: as the trait's contract.
        unsafe { min_ints8::<true>(b, a) }
    }
    #[inline(always)]
    unsafe fn wide(
        p: *const u8,
        rb: usize,
        acts: (&[BlockQ8_K], usize, usize),
        rows: usize,
        isums: &mut [__m512i; TILE],
        msums: &mut [__m512i; TILE],
    ) {
        // SAFETY: as the trait's contract.
        unsafe { min_wide::<true>(p, rb, acts, rows, isums, msums) }
    }
}

/// `Q6_K`: 128 bytes of low nibbles, 64 of high bit pairs, sixteen i8 scales, `d`. Value
/// `128h + 32i + p` (`p < 32`) is nibble `i / 2` of `ql[64h + 32·(i % 2) + p]` with bits
/// `2i, 2i + 1` of `qh[32h + p]` above it, less 32; its scale is `scales[(128h + 32i + p) / 16]`.
pub(crate) struct Q6K;

impl KQuant for Q6K {
    const BYTES: usize = crate::quant::BlockQ6_K::BYTES;
    const MINS: bool = false;
    // The last two scales, then `d`.
    const HALVES: usize = 206;
    #[inline(always)]
    unsafe fn ints8(b: *const u8, a: &BlockQ8_K) -> (__m256i, __m256i) {
        // SAFETY: `b` is a block (`ql` at 0, `qh` at 128, the scales at 192) and `a.qs` 256
        // bytes; the rest is register-only with AVX2 per the caller.
        unsafe {
            let (low, two) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0x30));
            let scales = _mm_loadu_si128(b.add(192) as *const __m128i);
            // Scale j as i16 j.
            let sc = _mm256_cvtepi8_epi16(scales);
            let act = a.qs.as_ptr() as *const u8;
            let mut acc = [_mm256_setzero_si256(); 2];
            for h in 0..2 {
                let ql0 = load(b.add(64 * h));
                let ql1 = load(b.add(64 * h + 32));
                let qh = load(b.add(128 + 32 * h));
                let v = [
                    _mm256_or_si256(
                        _mm256_and_si256(ql0, low),
                        _mm256_and_si256(_mm256_slli_epi16::<4>(qh), two),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, low),
                        _mm256_and_si256(_mm256_slli_epi16::<2>(qh), two),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), low),
                        _mm256_and_si256(qh, two),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), low),
                        _mm256_and_si256(_mm256_srli_epi16::<2>(qh), two),
                    ),
                ];
                for (i, &v) in v.iter().enumerate() {
                    // Scales 2m and 2m + 1 (m = 4h + i) in every i32, then the first in the
                    // low half's i16, the second in the high half's.
                    let m = _mm256_set1_epi32((4 * h + i) as i32);
                    let pair = _mm256_permutevar8x32_epi32(sc, m);
                    let s = _mm256_shuffle_epi8(
                        pair,
                        _mm256_setr_epi8(
                            0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,
                            2, 3, 2, 3, 2, 3, 2, 3,
                        ),
                    );
                    let q = _mm256_maddubs_epi16(v, load(act.add(128 * h + 32 * i)));
                    acc[i % 2] = _mm256_add_epi32(acc[i % 2], _mm256_madd_epi16(q, s));
                }
            }
            // The offset: 32·Σ scale·bsums.
            let offset = _mm256_madd_epi16(_mm256_loadu_si256(a.bsums.as_ptr() as _), sc);
            let isum = _mm256_sub_epi32(
                _mm256_add_epi32(acc[0], acc[1]),
                _mm256_slli_epi32::<5>(offset),
            );
            (isum, _mm256_setzero_si256())
        }
    }
    #[inline(always)]
    unsafe fn wide(
        p: *const u8,
        rb: usize,
        (acts, blocks, b): (&[BlockQ8_K], usize, usize),
        rows: usize,
        isums: &mut [__m512i; TILE],
        _: &mut [__m512i; TILE],
    ) {
        // SAFETY: each `p + c·rb` begins a block (`ql` at 0, `qh` at 128, the scales at 192);
        // the activation blocks are read through bounds checks; the rest is register-only with
        // the features per the caller.
        unsafe {
            // Scale j of each row, sign-extended into its i32, and the pairs (2q, 2q + 1) as
            // i16 pairs.
            let mut scales = [_mm512_setzero_si512(); 16];
            let mut pairs = [_mm512_setzero_si512(); 8];
            for w in 0..4 {
                let word = words16(p, rb, 192 + 4 * w);
                // Byte t to the top, then back with its sign.
                scales[4 * w] = _mm512_srai_epi32::<24>(_mm512_slli_epi32::<24>(word));
                scales[4 * w + 1] = _mm512_srai_epi32::<24>(_mm512_slli_epi32::<16>(word));
                scales[4 * w + 2] = _mm512_srai_epi32::<24>(_mm512_slli_epi32::<8>(word));
                scales[4 * w + 3] = _mm512_srai_epi32::<24>(word);
                for t in 0..2 {
                    let (lo, hi) = (scales[4 * w + 2 * t], scales[4 * w + 2 * t + 1]);
                    pairs[2 * w + t] = _mm512_or_si512(
                        _mm512_and_si512(lo, _mm512_set1_epi32(0xffff)),
                        _mm512_slli_epi32::<16>(hi),
                    );
                }
            }
            let (low, two) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x30));
            for h in 0..2 {
                for s in 0..2 {
                    // Values 128h + 32i + 16s + 4k + t at [i][k].
                    let ql0 = transposed16(p, rb, 64 * h + 16 * s);
                    let ql1 = transposed16(p, rb, 64 * h + 32 + 16 * s);
                    let qh = transposed16(p, rb, 128 + 32 * h + 16 * s);
                    let mut v = [[_mm512_setzero_si512(); 4]; 4];
                    for k in 0..4 {
                        v[0][k] = _mm512_or_si512(
                            _mm512_and_si512(ql0[k], low),
                            _mm512_and_si512(_mm512_slli_epi16::<4>(qh[k]), two),
                        );
                        v[1][k] = _mm512_or_si512(
                            _mm512_and_si512(ql1[k], low),
                            _mm512_and_si512(_mm512_slli_epi16::<2>(qh[k]), two),
                        );
                        v[2][k] = _mm512_or_si512(
                            _mm512_and_si512(_mm512_srli_epi16::<4>(ql0[k]), low),
                            _mm512_and_si512(qh[k], two),
                        );
                        v[3][k] = _mm512_or_si512(
                            _mm512_and_si512(_mm512_srli_epi16::<4>(ql1[k]), low),
                            _mm512_and_si512(_mm512_srli_epi16::<2>(qh[k]), two),
                        );
                    }
                    let first = h == 0 && s == 0;
                    for (g, isum) in isums.iter_mut().take(rows).enumerate() {
                        let a = acts[g * blocks + b].qs.as_ptr() as *const u8;
                        let mut d = _mm512_setzero_si512();
                        for (i, v) in v.iter().enumerate() {
                            let at = 128 * h + 32 * i + 16 * s;
                            let x = dot16(v, a.add(at), [_mm512_setzero_si512(); 2]);
                            let x = _mm512_add_epi32(x[0], x[1]);
                            d = _mm512_add_epi32(d, _mm512_mullo_epi32(x, scales[at / 16]));
                        }
                        *isum = if first { d } else { _mm512_add_epi32(*isum, d) };
                    }
                }
            }
            for (g, isum) in isums.iter_mut().take(rows).enumerate() {
                let offset = bsum_pairs(&pairs, &acts[g * blocks + b]);
                *isum = _mm512_sub_epi32(*isum, _mm512_slli_epi32::<5>(offset));
            }
        }
    }
}

/// The portable step of a block for a vector of weight rows: `sum + ((dw·da)·isum −
/// (dminw·da)·msum)`, or without minima `sum + (dw·da)·isum`, lane by lane.
#[inline(always)]
unsafe fn step<K: KQuant, V: FloatLanes>(sum: V, isum: V, msum: V, dw: V, dmin: V, da: f32) -> V {
    // SAFETY: register-only; the caller runs with `V`'s features.
    unsafe {
        let da = V::splat(da);
        let scaled = dw.mul(da).mul(isum);
        if K::MINS {
            sum.add(scaled.sub(dmin.mul(da).mul(msum)))
        } else {
            sum.add(scaled)
        }
    }
}

/// Eight weight rows back to back in `w` (`rb` bytes each: `blocks` whole blocks) against one
/// activation row (`acts`, `blocks` blocks), one row to each lane; `out[c·stride]` gets
/// column `c`. `ahead`: where the rows [`AHEAD`] passes on begin (perhaps past the end: only
/// prefetched, at the pace this pass reads its own). AVX2 and F16C per the caller.
#[inline(always)]
unsafe fn eight<K: KQuant>(
    w: &[u8],
    rb: usize,
    ahead: *const u8,
    acts: &[BlockQ8_K],
    out: &mut [f32],
    stride: usize,
) {
    debug_assert!(w.len() == LANES * rb && acts.len() * K::BYTES == rb);
    // SAFETY (the block): the features per the caller. Block `b` of row `c` is the `BYTES`
    // bytes at `c·rb + b·BYTES < w.len()`, as the caller checked; prefetches read nothing.
    unsafe {
        let mut sum = _mm256_setzero_ps();
        for (b, a) in acts.iter().enumerate() {
            let p = w.as_ptr().add(b * K::BYTES);
            let next = ahead.wrapping_add(b * LANES * K::BYTES);
            for line in 0..(LANES * K::BYTES).div_ceil(64) {
                _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64 * line) as *const i8);
            }
            let mut v = [_mm256_setzero_si256(); LANES];
            let mut m = v;
            for c in 0..LANES {
                (v[c], m[c]) = K::ints8(p.add(c * rb), a);
            }
            let (first, second) = halves8(p.add(K::HALVES), rb);
            let (dw, dmin) = if K::MINS {
                (first, second)
            } else {
                (second, first)
            };
            let isum = _mm256_cvtepi32_ps(hsum8(v));
            let msum = if K::MINS {
                _mm256_cvtepi32_ps(hsum8(m))
            } else {
                _mm256_setzero_ps()
            };
            sum = step::<K, __m256>(sum, isum, msum, dw, dmin, a.d);
        }
        let mut lanes = [0.0f32; LANES];
        _mm256_storeu_ps(lanes.as_mut_ptr(), sum);
        for (c, v) in lanes.into_iter().enumerate() {
            out[c * stride] = v;
        }
    }
}

/// One weight row `w` (`blocks` whole blocks) against one activation row: the portable
/// definition's float steps, the integers in AVX2. [`GROUP`] blocks at a time take their
/// integer sums reduced together (block `b` to lane `b`) and their steps' products in one
/// vector; only the additions into `sum` go one by one, in block order.
#[inline(always)]
unsafe fn one<K: KQuant>(w: &[u8], acts: &[BlockQ8_K]) -> f32 {
    debug_assert!(w.len() == acts.len() * K::BYTES);
    let mut sum = 0.0f32;
    let whole = acts.len() / GROUP * GROUP;
    for (g, a) in acts[..whole].chunks_exact(GROUP).enumerate() {
        // SAFETY: block `b` of the group is the `BYTES` bytes at `(g·GROUP + b)·BYTES <
        // w.len()`; the rest is register-only with AVX2 and F16C per the caller.
        unsafe {
            let p = w.as_ptr().add(g * GROUP * K::BYTES);
            let mut v = [_mm256_setzero_si256(); GROUP];
            let mut m = v;
            for b in 0..GROUP {
                (v[b], m[b]) = K::ints8(p.add(b * K::BYTES), &a[b]);
            }
            let isum = _mm256_cvtepi32_ps(hsum8(v));
            let (first, second) = halves8(p.add(K::HALVES), K::BYTES);
            let da = _mm256_setr_ps(
                a[0].d, a[1].d, a[2].d, a[3].d, a[4].d, a[5].d, a[6].d, a[7].d,
            );
            let mut term = _mm256_mul_ps(
                _mm256_mul_ps(if K::MINS { first } else { second }, da),
                isum,
            );
            if K::MINS {
                let msum = _mm256_cvtepi32_ps(hsum8(m));
                term = _mm256_sub_ps(term, _mm256_mul_ps(_mm256_mul_ps(second, da), msum));
            }
            let mut terms = [0.0f32; GROUP];
            _mm256_storeu_ps(terms.as_mut_ptr(), term);
            for t in terms {
                sum += t;
            }
        }
    }
    for (b, a) in acts.iter().enumerate().skip(whole) {
        // SAFETY: block `b` is the `BYTES` bytes at `b·BYTES < w.len()`; the rest is
        // register-only with AVX2 per the caller.
        unsafe {
            let p = w.as_ptr().add(b * K::BYTES);
            let (isum, msum) = K::ints8(p, a);
            // Both reduced at once: `isum` in the low i32, `msum` in the one above.
            let both = _mm256_hadd_epi32(isum, msum);
            let both = _mm_add_epi32(
                _mm256_castsi256_si128(both),
                _mm256_extracti128_si256::<1>(both),
            );
            // [i0 + i1, i2 + i3, m0 + m1, m2 + m3]
            let both = _mm_hadd_epi32(both, both);
            let isum = _mm_cvtsi128_si32(both) as f32;
            let msum = _mm_extract_epi32::<1>(both) as f32;
            let half = |at: usize| {
                let h = core::ptr::read_unaligned(p.add(at) as *const [u8; 2]);
                crate::quant::f16_to_f32(u16::from_le_bytes(h))
            };
            let dw = half(K::HALVES + if K::MINS { 0 } else { 2 });
            let da = a.d;
            sum = if K::MINS {
                sum + (dw * da * isum - half(2) * da * msum)
            } else {
                sum + dw * da * isum
            };
        }
    }
    sum
}

/// Sixteen weight rows back to back in `w` (`rb` bytes each: `blocks` whole blocks) against
/// `rows` activation rows (at most [`TILE`]; `acts`: `rows` rows of `blocks`), one weight row
/// to each lane; `out[c·stride + g]` gets column `c`, row `g`. AVX-512 F, BW, VL and VNNI,
/// AVX2 and F16C per the caller.
#[inline(always)]
unsafe fn sixteen<K: KQuant>(
    w: &[u8],
    rb: usize,
    acts: &[BlockQ8_K],
    (blocks, rows): (usize, usize),
    out: &mut [f32],
    stride: usize,
) {
    debug_assert!(w.len() == WIDE_ROWS * rb && rb == blocks * K::BYTES && rows <= TILE);
    debug_assert!(acts.len() >= rows * blocks);
    // SAFETY (the block): the features per the caller. Block `b` of row `c` is the `BYTES`
    // bytes at `c·rb + b·BYTES < w.len()`, as the caller checked; `acts` and `out` are read and
    // written through bounds checks.
    unsafe {
        let mut sums = [_mm512_setzero_ps(); TILE];
        let mut isums = [_mm512_setzero_si512(); TILE];
        let mut msums = isums;
        for b in 0..blocks {
            let p = w.as_ptr().add(b * K::BYTES);
            K::wide(p, rb, (acts, blocks, b), rows, &mut isums, &mut msums);
            let (first, second) = halves16(p.add(K::HALVES), rb);
            let (dw, dmin) = if K::MINS {
                (first, second)
            } else {
                (second, first)
            };
            for (g, sum) in sums.iter_mut().take(rows).enumerate() {
                let isum = _mm512_cvtepi32_ps(isums[g]);
                let msum = _mm512_cvtepi32_ps(msums[g]);
                let da = acts[g * blocks + b].d;
                *sum = step::<K, __m512>(*sum, isum, msum, dw, dmin, da);
            }
        }
        let mut lanes = [0.0f32; WIDE_ROWS];
        for (g, s) in sums.iter().take(rows).enumerate() {
            _mm512_storeu_ps(lanes.as_mut_ptr(), *s);
            for (c, &v) in lanes.iter().enumerate() {
                out[c * stride + g] = v;
            }
        }
    }
}

/// The columns `cols` of `r` (format `K`, activations `acts`) into `out`, column-major:
/// (`WIDE`) sixteen weight rows in lanes where there are [`WIDE_FROM`] activation rows or more,
/// else, for more than one activation row, eight in AVX2 lanes, each against one activation
/// row at a time; the rest (and one activation row's) one by one.
/// Operands `quant_linear` did not build take the portable loop.
///
/// # Safety
///
/// The CPU must support AVX2 and F16C, and with `WIDE` AVX-512 F, BW, VL and VNNI.
#[inline(always)]
pub(crate) unsafe fn columns<K: KQuant, const WIDE: bool>(
    r: &Q8Rows<'_>,
    acts: &[BlockQ8_K],
    cols: Range<usize>,
    out: &mut [f32],
) {
    let (m, blocks, rb) = (r.m, r.blocks, r.row_bytes);
    let fits = rb == blocks * K::BYTES
        && acts.len() == m * blocks
        && r.w.len() / rb.max(1) >= cols.end
        && out.len() == cols.len() * m;
    if !fits {
        return q8_portable(r, cols, out);
    }
    if m == 0 || blocks == 0 {
        return out.fill(0.0);
    }
    let mut j = cols.start;
    if WIDE && m >= WIDE_FROM {
        while j + WIDE_ROWS <= cols.end {
            let w = &r.w[j * rb..(j + WIDE_ROWS) * rb];
            let o = &mut out[(j - cols.start) * m..][..WIDE_ROWS * m];
            let mut row = 0;
            while row < m {
                let rows = (m - row).min(TILE);
                let a = &acts[row * blocks..(row + rows) * blocks];
                // SAFETY: the features per the caller (`WIDE`); `w` is sixteen rows of
                // `blocks` whole blocks and `a` `rows` rows of them.
                unsafe { sixteen::<K>(w, rb, a, (blocks, rows), &mut o[row..], m) };
                row += rows;
            }
            j += WIDE_ROWS;
        }
    }
    // One activation row (decode) reads the weight rows one after another: a single stream
    // measured faster there than eight rows side by side, prefetched or not.
    while m > 1 && j + LANES <= cols.end {
        let w = &r.w[j * rb..(j + LANES) * rb];
        let o = &mut out[(j - cols.start) * m..][..LANES * m];
        let ahead = w.as_ptr().wrapping_add(AHEAD * LANES * rb);
        for (g, a) in acts.chunks_exact(blocks).enumerate() {
            // SAFETY: the features per the caller; `w` is eight rows of `blocks` whole blocks
            // and `a` one row of them.
            unsafe { eight::<K>(w, rb, ahead, a, &mut o[g..], m) };
        }
        j += LANES;
    }
    for (j, column) in (j..cols.end).zip(out[(j - cols.start) * m..].chunks_exact_mut(m)) {
        let w = r.row(j);
        for (o, a) in column.iter_mut().zip(acts.chunks_exact(blocks)) {
            // SAFETY: AVX2 per the caller; `w` is one row of `blocks` whole blocks.
            *o = unsafe { one::<K>(w, a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::loops::qdot::{k_scales_mins, Q8Acts, Q8Side};
    use crate::kernels::loops::qdot8_x86::{q8_avx2, q8_avx512, supported, supported_avx512};
    use crate::quant::{f32_to_f16, GgmlType};

    /// Bytes from a small linear congruential generator.
    fn noise(len: usize, seed: u32) -> Vec<u8> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(7);
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect()
    }

    /// `n` rows of `blocks` blocks of `ty` of random bytes (so `Q6_K`'s i8 scales take both
    /// signs), the f16 scales set to moderate values of either sign.
    fn weight(ty: GgmlType, n: usize, blocks: usize, seed: u32) -> Vec<u8> {
        let mut w = noise(n * blocks * ty.block_bytes(), seed);
        for b in w.chunks_exact_mut(ty.block_bytes()) {
            let at: &[usize] = if ty == GgmlType::Q6_K {
                &[208]
            } else {
                &[0, 2]
            };
            for &at in at {
                let v = (b[at] as f32 - 127.5) / 900.0;
                b[at..at + 2].copy_from_slice(&f32_to_f16(v).to_le_bytes());
            }
        }
        w
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    // `k4_scales` unpacks all eight 6-bit pairs at once where the portable loop calls
    // `quant::scale_min_k4` per sub-block, and `k4_scales16` does it in each lane: every bit of
    // each of the twelve bytes, alone and in noise, gives the same scales and minima.
    #[test]
    fn the_packed_k4_scales_are_scale_min_k4s() {
        let mut cases: Vec<[u8; 12]> = (0..96)
            .map(|bit| {
                let mut s = [0u8; 12];
                s[bit / 8] = 1 << (bit % 8);
                s
            })
            .collect();
        let mut state = 0x2545_f491u32;
        for _ in 0..256 {
            cases.push(core::array::from_fn(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            }));
        }
        cases.push([0xff; 12]);
        for s in &cases {
            let (scales, mins) = k4_scales(s);
            let want = k_scales_mins(s);
            assert_eq!((scales.to_le_bytes(), mins.to_le_bytes()), want, "{s:?}");
        }
        if !supported_avx512() {
            return;
        }
        // Sixteen blocks' headers a row apart (16 bytes each: `d`, `dmin`, the twelve).
        for group in cases.chunks_exact(16) {
            let mut rows = [0u8; 16 * 16];
            for (row, s) in rows.chunks_exact_mut(16).zip(group) {
                row[4..].copy_from_slice(s);
            }
            let (mut scales, mut mins) = ([[0i32; 16]; 8], [[0i32; 16]; 8]);
            // SAFETY: the CPU has what `q8_avx512` needs, as checked; each row is 16 bytes.
            unsafe { lanes16(rows.as_ptr(), &mut scales, &mut mins) };
            for (c, s) in group.iter().enumerate() {
                let (sc, mn) = k_scales_mins(s);
                for j in 0..8 {
                    assert_eq!((scales[j][c], mins[j][c]), (sc[j] as i32, mn[j] as i32));
                }
            }
        }
    }

    /// [`k4_scales16`] of the sixteen 16-byte rows at `p`, stored.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    unsafe fn lanes16(p: *const u8, scales: &mut [[i32; 16]; 8], mins: &mut [[i32; 16]; 8]) {
        // SAFETY: sixteen rows of 16 bytes at `p`, as the caller promises.
        let (s, m) = unsafe { k4_scales16(p, 16) };
        for j in 0..8 {
            // SAFETY: stores to arrays of sixteen i32.
            unsafe {
                _mm512_storeu_si512(scales[j].as_mut_ptr() as *mut _, s[j]);
                _mm512_storeu_si512(mins[j].as_mut_ptr() as *mut _, m[j]);
            }
        }
    }

    /// Every activation byte (−128 included, what a non-finite input can quantize to) and
    /// scales of either sign, against every format, on row counts across both
    /// paths and past a tile, and on column ranges across sixteen, eight and single columns
    /// that start past 0.
    #[test]
    fn k_quant_dots_give_the_portable_bits_on_any_rows_and_columns() {
        if !supported() {
            return;
        }
        let ms: &[usize] = if cfg!(miri) {
            &[1, 3]
        } else {
            &[1, 2, 3, 5, 8, 13, 16, 17, 33, TILE + 5]
        };
        let (n, ranges): (usize, &[(usize, usize)]) = if cfg!(miri) {
            (27, &[(1, 27)])
        } else {
            (43, &[(0, 43), (1, 27), (2, 19), (4, 5)])
        };
        for &m in ms {
            k_quant_dots_match(m, 2, n, ranges);
        }
    }

    /// One activation row's blocks go [`GROUP`] at a time, then one by one.
    #[test]
    fn one_rows_blocks_in_groups_and_alone_give_the_portable_bits() {
        if !supported() {
            return;
        }
        let blocks: &[usize] = if cfg!(miri) {
            &[9]
        } else {
            &[1, 7, 8, 11, 16, 19]
        };
        for &b in blocks {
            k_quant_dots_match(1, b, 3, &[(0, 3)]);
        }
    }

    /// `q8_avx2` (and `q8_avx512` where the CPU has it) against `q8_portable` for `m`
    /// activation rows of `blocks` blocks, `n` weight rows of each K-quant, column `ranges`.
    fn k_quant_dots_match(m: usize, blocks: usize, n: usize, ranges: &[(usize, usize)]) {
        let raw = noise(m * blocks * 292, m as u32);
        let mut acts: Vec<BlockQ8_K> = raw
            .chunks_exact(292)
            .map(|b| BlockQ8_K {
                d: (b[0] as f32 - 127.5) / 4096.0,
                qs: core::array::from_fn(|i| b[4 + i] as i8),
                bsums: [0; 16],
            })
            .collect();
        // `bsums` as `quantize_row_q8_K` leaves them (`Q6_K`'s offset reads them).
        for (i, a) in acts.iter_mut().enumerate() {
            a.qs[(37 * i + 5) % 256] = i8::MIN;
            a.bsums =
                core::array::from_fn(|j| a.qs[16 * j..][..16].iter().map(|&q| q as i16).sum());
        }
        let side: Vec<Q8Side> = acts.iter().map(Q8Side::of).collect();
        for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
            let w = weight(ty, n, blocks, ty.id() + m as u32);
            let r = Q8Rows {
                acts: match ty {
                    GgmlType::Q4_K => Q8Acts::Q4K(&acts),
                    GgmlType::Q5_K => Q8Acts::Q5K(&acts),
                    _ => Q8Acts::Q6K(&acts),
                },
                side: &side,
                w: &w,
                row_bytes: blocks * ty.block_bytes(),
                blocks,
                m,
            };
            for cols in ranges.iter().map(|&(start, end)| start..end) {
                let len = cols.len() * m;
                let mut want = vec![0.0f32; len];
                q8_portable(&r, cols.clone(), &mut want);
                assert!(want.iter().all(|v| v.is_finite() && *v != 0.0));
                let mut got = vec![f32::NAN; len];
                // SAFETY: the CPU has AVX2 and F16C, as checked.
                unsafe { q8_avx2(&r, cols.clone(), &mut got) };
                assert_eq!(bits(&got), bits(&want), "avx2 {ty}: rows {m}, {cols:?}");
                if supported_avx512() {
                    let mut got = vec![f32::NAN; len];
                    // SAFETY: the CPU has what `q8_avx512` needs, as checked.
                    unsafe { q8_avx512(&r, cols.clone(), &mut got) };
                    assert_eq!(bits(&got), bits(&want), "avx512 {ty}: rows {m}, {cols:?}");
                }
            }
        }
    }
}
