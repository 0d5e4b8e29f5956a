//! The q8 mode's dot products on AVX2 and AVX-512: the integer part of each block in vectors,
//! the float part exactly as the portable loop of `qdot.rs` combines it.
//!
//! A block's integer dot `Σ q·a` is exact in any order (its terms and partial sums are small
//! integers), so it is free to take the instructions that suit the machine:
//!
//! * the unsigned-quant formats (`Q4_0`, `Q4_1`, `Q5_0`, `Q5_1`: quants `0..32`) multiply the
//!   quants as unsigned bytes into the activations' signed bytes, pairs summed into i16
//!   (`vpmaddubsw`: at most `2·31·128`, never saturating), then into i32 (`vpmaddwd` by ones);
//!   a format's offset (`−8`, `−16`) comes off afterwards as `offset · Σa`, the activation
//!   block's quant sum computed once per call ([`Q8Side`]);
//! * `Q8_0`'s signed quants widen to i16 and multiply pairwise into i32 (`vpmaddwd`), exact
//!   for every byte (−128 included, where the sign trick of llama.cpp's AVX2 code is not);
//! * with AVX-512 VNNI (`WIDE`), four weight rows share a 512-bit vector, one row's block per
//!   128-bit group: two `vpdpbusd` (values `0..16`, then `16..32`) leave four partial sums per
//!   row, half what a 256-bit row would, so the reduction is short; `Q8_0` takes its signed
//!   quants on the signed side against `a + 128`, then `128·Σq` comes off.
//!
//! Eight weight rows run side by side, one per lane of a vector: for each block, the eight rows'
//! integer dots are reduced into one vector of eight i32, their scales loaded from the eight
//! rows (scalar loads: a gather was the loop's bottleneck) and widened (`vcvtph2ps`, which is
//! exact), and each lane takes the portable float step with the same operands in the same
//! order, block after block; so every output has the portable bits. The weights two chunks of
//! eight rows on are prefetched into L2 while a chunk runs (measured best of 1, 2 and 4 on decode).
//! Not into L1: two chunks of rows of 2048 `Q8_0` values are 35 KB, and lines asked for that far
//! ahead left L1 before they were read (1B-shaped decode then streamed at half the rate it does
//! from L2). The rows left over (fewer than eight) take one row at a time in AVX2, four blocks'
//! integer dots reduced at once and the float step in scalar code. The K-quants take `qdot8k_x86`,
//! on the same plan.

use core::arch::x86_64::*;
use core::ops::Range;

use super::qdot::{Q8Acts, Q8Rows, Q8Side};
use super::qdot8k_x86::{self, Q4K, Q5K, Q6K};
use crate::quant::{f16_to_f32, BlockQ8_0, BlockQ8_1};

/// A 32-value weight format on the AVX2 path. Its methods may only run inside a function
/// compiled with AVX2, on a CPU that has it.
trait Small {
    /// Bytes per block.
    const BYTES: usize;
    /// Subtracted from each of [`quants`](Self::quants)' bytes to give the block's integer.
    const OFFSET: i32;
    /// The activation block.
    type Act;
    /// The activation block's 32 quants.
    fn act_quants(a: &Self::Act) -> &[i8; 32];
    /// The 32 quants of the block `b` (at least [`BYTES`](Self::BYTES) bytes), value order:
    /// unsigned bytes, or signed ones for `Q8_0`.
    unsafe fn quants(b: &[u8]) -> __m256i;
    /// Eight i32 partial sums of `Σ quants · a` (`a`: the activation's 32 signed bytes).
    #[inline(always)]
    unsafe fn dot(q: __m256i, a: __m256i) -> __m256i {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1)) }
    }
    /// The portable step: `sum` after a block whose integer dot is `i`, of the weight block `b`
    /// and the activation block with the side values `s`.
    fn step(sum: f32, i: i32, b: &[u8], s: &Q8Side) -> f32;
    /// [`step`](Self::step) for a vector of columns at once, lane by lane with the same
    /// operations in the same order: `i` the blocks' integer dots as f32, `dw` and `mw` their
    /// scales and mins.
    unsafe fn step_lanes<V: FloatLanes>(sum: V, i: V, dw: V, mw: V, s: &Q8Side) -> V;
    /// Where the quant bytes of a nibble format's block begin.
    const QS: usize = 0;
    /// Where the fifth bits of a five-bit format's block begin.
    const QH: Option<usize> = None;
    /// What comes off each integer dot of [`rows16`](Self::rows16)'s unsigned bytes: `OFFSET`
    /// (nibble formats) times the activation's quant sum.
    const LANE_OFFSET: i32 = Self::OFFSET;
    /// Sixteen weight rows' blocks (row `c` at `p + c·rb`) with one row per i32 of a 512-bit
    /// vector: vector `k` holds each row's values `4k..4k + 4` as unsigned bytes, so that one
    /// `vpdpbusd` per `k` against four broadcast activation bytes leaves the sixteen rows'
    /// whole integer dots in the lanes, less `LANE_OFFSET · Σa`. AVX-512 F and BW per the
    /// caller; each `p + c·rb` begins a block.
    #[inline(always)]
    unsafe fn rows16(p: *const u8, rb: usize) -> [__m512i; 8] {
        // SAFETY: as the caller promises; the rest is register-only.
        unsafe {
            let t = transposed16(p, rb, Self::QS);
            let m = _mm512_set1_epi8(0x0f);
            let mut q = [_mm512_setzero_si512(); 8];
            for (k, &t) in t.iter().enumerate() {
                q[k] = _mm512_and_si512(t, m);
                q[k + 4] = _mm512_and_si512(_mm512_srli_epi16::<4>(t), m);
            }
            if let Some(at) = Self::QH {
                fifth16(&mut q, p, rb, at);
            }
            q
        }
    }
    /// The quants of one block of four rows, values `0..16` then `16..32`: 128-bit group `g`
    /// of each holds row `r[g]`'s (AVX-512 F, BW, VL and VNNI per the caller; each pointer
    /// begins a block).
    unsafe fn quad(r: [*const u8; 4]) -> [__m512i; 2];
    /// The activation's quants (values `0..16` or `16..32`, in every 128-bit group) as
    /// [`dot4`](Self::dot4) takes them.
    #[inline(always)]
    unsafe fn prep(a: __m512i) -> __m512i {
        a
    }
    /// Per 128-bit group, four i32 partial sums of its row's `Σ quants · a` (`q` from
    /// [`quad`](Self::quad), `a` from [`prep`](Self::prep)): two `vpdpbusd` into one
    /// accumulator, unsigned quants into signed activations.
    #[inline(always)]
    unsafe fn dot4(q: [__m512i; 2], a: [__m512i; 2]) -> __m512i {
        // SAFETY: register-only; AVX-512 VNNI per the caller.
        unsafe {
            let lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], a[0]);
            _mm512_dpbusd_epi32(lo, q[1], a[1])
        }
    }
}

/// The 16 bytes at `r[g] + at` in the 128-bit group `g`. AVX-512 F per the caller.
#[inline(always)]
unsafe fn four_rows(r: [*const u8; 4], at: usize) -> __m512i {
    // SAFETY: each `r[g] + at` begins 16 readable bytes, as the callers promise; the rest is
    // register-only.
    unsafe {
        let v = _mm512_castsi128_si512(_mm_loadu_si128(r[0].add(at) as *const __m128i));
        let v = _mm512_inserti32x4::<1>(v, _mm_loadu_si128(r[1].add(at) as *const __m128i));
        let v = _mm512_inserti32x4::<2>(v, _mm_loadu_si128(r[2].add(at) as *const __m128i));
        _mm512_inserti32x4::<3>(v, _mm_loadu_si128(r[3].add(at) as *const __m128i))
    }
}

/// Four rows' 16 nibble bytes at `at` as their values `0..16` (the low nibbles) and `16..32`
/// (the high ones), row `g` in the 128-bit group `g`. AVX-512 F and BW per the caller.
#[inline(always)]
unsafe fn nibble_quad(r: [*const u8; 4], at: usize) -> [__m512i; 2] {
    // SAFETY: each pointer begins a block whose 16 quant bytes start at `at`; the rest is
    // register-only.
    unsafe {
        let v = four_rows(r, at);
        let m = _mm512_set1_epi8(0x0f);
        [
            _mm512_and_si512(v, m),
            _mm512_and_si512(_mm512_srli_epi16::<4>(v), m),
        ]
    }
}

/// `0x10` added to each value of `q` (from [`nibble_quad`]) whose fifth bit is set: bit `j` of
/// the little-endian `qh` at `r[g] + at` for value `j` of row `g`.
#[inline(always)]
unsafe fn fifth_quad(q: [__m512i; 2], r: [*const u8; 4], at: usize) -> [__m512i; 2] {
    // SAFETY: each pointer begins a block whose `qh` is the four bytes at `at`; the rest is
    // register-only with AVX-512 BW per the caller.
    unsafe {
        let (mut lo, mut hi) = (0u64, 0u64);
        for (g, &r) in r.iter().enumerate() {
            let qh = u64::from(core::ptr::read_unaligned(r.add(at) as *const u32));
            lo |= (qh & 0xffff) << (16 * g);
            hi |= (qh >> 16) << (16 * g);
        }
        let bit = _mm512_set1_epi8(0x10);
        [
            _mm512_mask_add_epi8(q[0], _cvtu64_mask64(lo), q[0], bit),
            _mm512_mask_add_epi8(q[1], _cvtu64_mask64(hi), q[1], bit),
        ]
    }
}

/// The 16 bytes at `p + c·rb + at` of the sixteen rows `c`, transposed: vector `k` holds
/// bytes `4k..4k + 4` of row `c` in its i32 `c`. AVX-512 F per the caller; each `p + c·rb + at`
/// begins 16 readable bytes.
#[inline(always)]
pub(super) unsafe fn transposed16(p: *const u8, rb: usize, at: usize) -> [__m512i; 4] {
    // SAFETY: as the caller promises; the rest is register-only.
    unsafe {
        let row = |c: usize| p.add(c * rb);
        // x[r]: row 4g + r in the 128-bit group g.
        let x: [__m512i; 4] = [
            four_rows([row(0), row(4), row(8), row(12)], at),
            four_rows([row(1), row(5), row(9), row(13)], at),
            four_rows([row(2), row(6), row(10), row(14)], at),
            four_rows([row(3), row(7), row(11), row(15)], at),
        ];
        // A 4 × 4 transpose of i32 in each group: group g of vector k, i32 r, is row 4g + r's
        // i32 k.
        let (a, b) = (
            _mm512_unpacklo_epi32(x[0], x[1]),
            _mm512_unpackhi_epi32(x[0], x[1]),
        );
        let (c, d) = (
            _mm512_unpacklo_epi32(x[2], x[3]),
            _mm512_unpackhi_epi32(x[2], x[3]),
        );
        [
            _mm512_unpacklo_epi64(a, c),
            _mm512_unpackhi_epi64(a, c),
            _mm512_unpacklo_epi64(b, d),
            _mm512_unpackhi_epi64(b, d),
        ]
    }
}

/// The i32 at `p + c·rb + at` of the sixteen rows `c`, in i32 `c`. AVX-512 F per the caller;
/// each `p + c·rb + at` begins four readable bytes.
#[inline(always)]
pub(super) unsafe fn words16(p: *const u8, rb: usize, at: usize) -> __m512i {
    // SAFETY: as the caller promises; the rest is register-only.
    unsafe {
        let r = |c: usize| core::ptr::read_unaligned(p.add(c * rb + at) as *const i32);
        _mm512_setr_epi32(
            r(0),
            r(1),
            r(2),
            r(3),
            r(4),
            r(5),
            r(6),
            r(7),
            r(8),
            r(9),
            r(10),
            r(11),
            r(12),
            r(13),
            r(14),
            r(15),
        )
    }
}

/// The f16 pairs at `p + c·rb` of the sixteen rows `c`, widened: the first half of each pair
/// (a block's `d`), then the second (`Q4_1`'s and `Q5_1`'s `m`; quant bytes otherwise).
/// AVX-512 F per the caller; each `p + c·rb` begins four readable bytes.
#[inline(always)]
pub(super) unsafe fn halves16(p: *const u8, rb: usize) -> (__m512, __m512) {
    // SAFETY: as the caller promises; the rest is register-only.
    unsafe {
        let pairs = words16(p, rb, 0);
        (
            widen16(_mm512_cvtepi32_epi16(pairs)),
            widen16(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(pairs))),
        )
    }
}

/// Sixteen f16 widened, eight at a time (`vcvtph2ps` on 256 bits, which miri runs; the 512-bit
/// form gives the same values). AVX-512 F and F16C per the caller.
#[inline(always)]
pub(super) unsafe fn widen16(h: __m256i) -> __m512 {
    // SAFETY: register-only; the features per the caller.
    unsafe {
        let lo = _mm256_castps_pd(_mm256_cvtph_ps(_mm256_castsi256_si128(h)));
        let hi = _mm256_castps_pd(_mm256_cvtph_ps(_mm256_extracti128_si256::<1>(h)));
        _mm512_castpd_ps(_mm512_insertf64x4::<1>(_mm512_castpd256_pd512(lo), hi))
    }
}

/// `0x10` added to each value of the sixteen rows' `q` (from [`Small::rows16`]'s nibbles)
/// whose fifth bit is set: bit `j` of the little-endian `qh` at `p + c·rb + at` for value `j`
/// of row `c`. AVX-512 F and BW per the caller; each `p + c·rb + at` begins four readable bytes.
#[inline(always)]
unsafe fn fifth16(q: &mut [__m512i; 8], p: *const u8, rb: usize, at: usize) {
    // SAFETY: as the caller promises; the rest is register-only.
    unsafe {
        let qh = words16(p, rb, at);
        // Byte t of i32 c in vector k is value 4k + t of row c: bit 4k + t of its `qh`, so
        // byte k / 2 of the i32, bit 4·(k % 2) + t.
        // `vpshufb` indices within each 128-bit group: the first byte of each i32, to add to.
        let base = _mm512_broadcast_i32x4(_mm_setr_epi32(0, 0x0404_0404, 0x0808_0808, 0x0c0c_0c0c));
        let bit = _mm512_set1_epi8(0x10);
        for (k, q) in q.iter_mut().enumerate() {
            let spread =
                _mm512_shuffle_epi8(qh, _mm512_add_epi8(base, _mm512_set1_epi8((k / 2) as i8)));
            let pattern = if k % 2 == 0 {
                0x0804_0201
            } else {
                0x8040_2010u32 as i32
            };
            let set = _mm512_test_epi8_mask(spread, _mm512_set1_epi32(pattern));
            *q = _mm512_mask_add_epi8(*q, set, *q, bit);
        }
    }
}

/// An f16 scale at `b[at..at + 2]`, widened (`0` past the end, which no caller reaches).
#[inline(always)]
fn half(b: &[u8], at: usize) -> f32 {
    match b.get(at..at + 2) {
        Some(&[lo, hi]) => f16_to_f32(u16::from_le_bytes([lo, hi])),
        _ => 0.0,
    }
}

/// The 32 nibbles of `qs[0..16]` as bytes: the low ones first, then the high ones.
#[inline(always)]
unsafe fn nibbles(b: &[u8], at: usize) -> __m256i {
    debug_assert!(b.len() >= at + 16);
    // SAFETY: the callers pass a block of `BYTES` bytes whose 16 quant bytes start at `at`.
    unsafe {
        let v = _mm_loadu_si128(b.as_ptr().add(at) as *const __m128i);
        let m = _mm_set1_epi8(0x0f);
        _mm256_set_m128i(
            _mm_and_si128(_mm_srli_epi16::<4>(v), m),
            _mm_and_si128(v, m),
        )
    }
}

/// `0x10` in byte `j` where bit `j` of the little-endian `qh` at `b[at..at + 4]` is set.
#[inline(always)]
unsafe fn fifth_bits(b: &[u8], at: usize) -> __m256i {
    let qh = match b.get(at..at + 4) {
        Some(&[b0, b1, b2, b3]) => u32::from_le_bytes([b0, b1, b2, b3]),
        _ => 0,
    };
    // SAFETY: register-only; the caller runs with AVX2.
    unsafe {
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(qh as i32),
            _mm256_setr_epi8(
                0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                3, 3, 3, 3,
            ),
        );
        let bit = _mm256_set1_epi64x(0x8040_2010_0804_0201_u64 as i64);
        let set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        _mm256_and_si256(set, _mm256_set1_epi8(0x10))
    }
}

#[derive(Clone, Copy)]
struct Q8_0;
#[derive(Clone, Copy)]
struct Q4_0;
#[derive(Clone, Copy)]
struct Q5_0;
#[derive(Clone, Copy)]
struct Q4_1;
#[derive(Clone, Copy)]
struct Q5_1;

impl Small for Q8_0 {
    const BYTES: usize = crate::quant::BlockQ8_0::BYTES;
    const OFFSET: i32 = 0;
    /// The quants go unsigned as `q + 128`, so `128·Σa` comes off.
    const LANE_OFFSET: i32 = 128;
    type Act = BlockQ8_0;
    fn act_quants(a: &BlockQ8_0) -> &[i8; 32] {
        &a.qs
    }
    #[inline(always)]
    unsafe fn quants(b: &[u8]) -> __m256i {
        debug_assert!(b.len() >= Self::BYTES);
        // SAFETY: `b` holds a block; its 32 quant bytes start at 2.
        unsafe { _mm256_loadu_si256(b.as_ptr().add(2) as *const __m256i) }
    }
    #[inline(always)]
    unsafe fn dot(q: __m256i, a: __m256i) -> __m256i {
        // SAFETY: register-only; the caller runs with AVX2.
        unsafe {
            let lo = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)),
                _mm256_cvtepi8_epi16(_mm256_castsi256_si128(a)),
            );
            let hi = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(q)),
                _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(a)),
            );
            _mm256_add_epi32(lo, hi)
        }
    }
    #[inline(always)]
    unsafe fn quad(r: [*const u8; 4]) -> [__m512i; 2] {
        // SAFETY: each pointer begins a block; its 32 quant bytes start at 2.
        unsafe { [four_rows(r, 2), four_rows(r, 18)] }
    }
    /// The quants as unsigned bytes `q + 128`: 16 bytes from 2, then 16 from 18.
    #[inline(always)]
    unsafe fn rows16(p: *const u8, rb: usize) -> [__m512i; 8] {
        // SAFETY: each `p + c·rb` begins a block, its 32 quant bytes from 2; the rest is
        // register-only with AVX-512 F per the caller.
        unsafe {
            let (lo, hi) = (transposed16(p, rb, 2), transposed16(p, rb, 18));
            let flip = _mm512_set1_epi8(-128);
            let mut q = [_mm512_setzero_si512(); 8];
            for (k, (&lo, &hi)) in lo.iter().zip(&hi).enumerate() {
                q[k] = _mm512_xor_si512(lo, flip);
                q[k + 4] = _mm512_xor_si512(hi, flip);
            }
            q
        }
    }
    /// The activations as unsigned bytes `a + 128`, for [`dot4`](Small::dot4).
    #[inline(always)]
    unsafe fn prep(a: __m512i) -> __m512i {
        // SAFETY: register-only; AVX-512 F per the caller.
        unsafe { _mm512_xor_si512(a, _mm512_set1_epi8(-128)) }
    }
    /// `Σ (a + 128)·q − Σ 128·q`: the signed quants take `vpdpbusd`'s signed side, and the
    /// sum is exact for every byte (each term below 2^15, each lane below 2^18).
    #[inline(always)]
    unsafe fn dot4(q: [__m512i; 2], a: [__m512i; 2]) -> __m512i {
        // SAFETY: register-only; AVX-512 VNNI per the caller.
        unsafe {
            let zero = _mm512_setzero_si512();
            let shifted = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, a[0], q[0]), a[1], q[1]);
            let c = _mm512_set1_epi8(-128);
            let offset = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, c, q[0]), c, q[1]);
            _mm512_sub_epi32(shifted, offset)
        }
    }
    #[inline(always)]
    fn step(sum: f32, i: i32, b: &[u8], s: &Q8Side) -> f32 {
        sum + i as f32 * (half(b, 0) * s.scale)
    }
    #[inline(always)]
    unsafe fn step_lanes<V: FloatLanes>(sum: V, i: V, dw: V, _: V, s: &Q8Side) -> V {
        // SAFETY: register-only; the caller runs with `V`'s features.
        unsafe { sum.add(i.mul(dw.mul(V::splat(s.scale)))) }
    }
}

impl Small for Q4_0 {
    const BYTES: usize = crate::quant::BlockQ4_0::BYTES;
    const OFFSET: i32 = 8;
    const QS: usize = 2;
    type Act = BlockQ8_0;
    fn act_quants(a: &BlockQ8_0) -> &[i8; 32] {
        &a.qs
    }
    #[inline(always)]
    unsafe fn quants(b: &[u8]) -> __m256i {
        // SAFETY: `b` holds a block; its 16 quant bytes start at 2.
        unsafe { nibbles(b, 2) }
    }
    #[inline(always)]
    unsafe fn quad(r: [*const u8; 4]) -> [__m512i; 2] {
        // SAFETY: each pointer begins a block; its 16 quant bytes start at 2.
        unsafe { nibble_quad(r, 2) }
    }
    #[inline(always)]
    fn step(sum: f32, i: i32, b: &[u8], s: &Q8Side) -> f32 {
        sum + i as f32 * half(b, 0) * s.scale
    }
    #[inline(always)]
    unsafe fn step_lanes<V: FloatLanes>(sum: V, i: V, dw: V, _: V, s: &Q8Side) -> V {
        // SAFETY: register-only; the caller runs with `V`'s features.
        unsafe { sum.add(i.mul(dw).mul(V::splat(s.scale))) }
    }
}

impl Small for Q5_0 {
    const BYTES: usize = crate::quant::BlockQ5_0::BYTES;
    const OFFSET: i32 = 16;
    const QS: usize = 6;
    const QH: Option<usize> = Some(2);
    type Act = BlockQ8_0;
    fn act_quants(a: &BlockQ8_0) -> &[i8; 32] {
        &a.qs
    }
    #[inline(always)]
    unsafe fn quants(b: &[u8]) -> __m256i {
        // SAFETY: `b` holds a block: `qh` at 2, the 16 quant bytes at 6.
        unsafe { _mm256_or_si256(nibbles(b, 6), fifth_bits(b, 2)) }
    }
    #[inline(always)]
    unsafe fn quad(r: [*const u8; 4]) -> [__m512i; 2] {
        // SAFETY: each pointer begins a block: `qh` at 2, the 16 quant bytes at 6.
        unsafe { fifth_quad(nibble_quad(r, 6), r, 2) }
    }
    #[inline(always)]
    fn step(sum: f32, i: i32, b: &[u8], s: &Q8Side) -> f32 {
        sum + (half(b, 0) * s.scale) * i as f32
    }
    #[inline(always)]
    unsafe fn step_lanes<V: FloatLanes>(sum: V, i: V, dw: V, _: V, s: &Q8Side) -> V {
        // SAFETY: register-only; the caller runs with `V`'s features.
        unsafe { sum.add(dw.mul(V::splat(s.scale)).mul(i)) }
    }
}

impl Small for Q4_1 {
    const BYTES: usize = crate::quant::BlockQ4_1::BYTES;
    const OFFSET: i32 = 0;
    const QS: usize = 4;
    type Act = BlockQ8_1;
    fn act_quants(a: &BlockQ8_1) -> &[i8; 32] {
        &a.qs
    }
    #[inline(always)]
    unsafe fn quants(b: &[u8]) -> __m256i {
        // SAFETY: `b` holds a block; its 16 quant bytes start at 4.
        unsafe { nibbles(b, 4) }
    }
    #[inline(always)]
    unsafe fn quad(r: [*const u8; 4]) -> [__m512i; 2] {
        // SAFETY: each pointer begins a block; its 16 quant bytes start at 4.
        unsafe { nibble_quad(r, 4) }
    }
    #[inline(always)]
    fn step(sum: f32, i: i32, b: &[u8], s: &Q8Side) -> f32 {
        sum + ((half(b, 0) * s.scale) * i as f32 + half(b, 2) * s.min)
    }
    #[inline(always)]
    unsafe fn step_lanes<V: FloatLanes>(sum: V, i: V, dw: V, mw: V, s: &Q8Side) -> V {
        // SAFETY: register-only; the caller runs with `V`'s features.
        unsafe { min_step(sum, i, dw, mw, s) }
    }
}

impl Small for Q5_1 {
    const BYTES: usize = crate::quant::BlockQ5_1::BYTES;
    const OFFSET: i32 = 0;
    const QS: usize = 8;
    const QH: Option<usize> = Some(4);
    type Act = BlockQ8_1;
    fn act_quants(a: &BlockQ8_1) -> &[i8; 32] {
        &a.qs
    }
    #[inline(always)]
    unsafe fn quants(b: &[u8]) -> __m256i {
        // SAFETY: `b` holds a block: `qh` at 4, the 16 quant bytes at 8.
        unsafe { _mm256_or_si256(nibbles(b, 8), fifth_bits(b, 4)) }
    }
    #[inline(always)]
    unsafe fn quad(r: [*const u8; 4]) -> [__m512i; 2] {
        // SAFETY: each pointer begins a block: `qh` at 4, the 16 quant bytes at 8.
        unsafe { fifth_quad(nibble_quad(r, 8), r, 4) }
    }
    #[inline(always)]
    fn step(sum: f32, i: i32, b: &[u8], s: &Q8Side) -> f32 {
        sum + ((half(b, 0) * s.scale) * i as f32 + half(b, 2) * s.min)
    }
    #[inline(always)]
    unsafe fn step_lanes<V: FloatLanes>(sum: V, i: V, dw: V, mw: V, s: &Q8Side) -> V {
        // SAFETY: register-only; the caller runs with `V`'s features.
        unsafe { min_step(sum, i, dw, mw, s) }
    }
}

/// The step of `Q4_1` and `Q5_1` for a vector of columns: `sum + ((dw·da)·i + mw·sa)` lane by
/// lane.
#[inline(always)]
unsafe fn min_step<V: FloatLanes>(sum: V, i: V, dw: V, mw: V, s: &Q8Side) -> V {
    // SAFETY: register-only; the caller runs with `V`'s features.
    unsafe {
        let scaled = dw.mul(V::splat(s.scale)).mul(i);
        sum.add(scaled.add(mw.mul(V::splat(s.min))))
    }
}

/// A vector of f32 lanes: the operations of a q8 float step, each lane by lane and rounded
/// once. Its methods may only run inside a function compiled with the vector's features (AVX
/// for `__m256`, AVX-512 F for `__m512`), on a CPU that has them.
pub(super) trait FloatLanes: Copy {
    /// `x` in every lane.
    unsafe fn splat(x: f32) -> Self;
    /// `self + o`.
    unsafe fn add(self, o: Self) -> Self;
    /// `self · o`.
    unsafe fn mul(self, o: Self) -> Self;
    /// `self − o`.
    unsafe fn sub(self, o: Self) -> Self;
}

impl FloatLanes for __m256 {
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        // SAFETY: register-only; AVX per the caller.
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        // SAFETY: register-only; AVX per the caller.
        unsafe { _mm256_add_ps(self, o) }
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        // SAFETY: register-only; AVX per the caller.
        unsafe { _mm256_mul_ps(self, o) }
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        // SAFETY: register-only; AVX per the caller.
        unsafe { _mm256_sub_ps(self, o) }
    }
}

impl FloatLanes for __m512 {
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        // SAFETY: register-only; AVX-512 F per the caller.
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        // SAFETY: register-only; AVX-512 F per the caller.
        unsafe { _mm512_add_ps(self, o) }
    }
    #[inline(always)]
    unsafe fn mul(self, o: Self) -> Self {
        // SAFETY: register-only; AVX-512 F per the caller.
        unsafe { _mm512_mul_ps(self, o) }
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        // SAFETY: register-only; AVX-512 F per the caller.
        unsafe { _mm512_sub_ps(self, o) }
    }
}

/// `[Σv0, Σv1, Σv2, Σv3]` of four vectors of eight i32.
#[inline(always)]
unsafe fn hsum4(v: [__m256i; 4]) -> [i32; 4] {
    // SAFETY: register-only, then a store to a local array of four i32; AVX2 per the caller.
    unsafe {
        let s = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let s = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256::<1>(s));
        let mut out = [0i32; 4];
        _mm_storeu_si128(out.as_mut_ptr() as *mut __m128i, s);
        out
    }
}

/// `N` blocks from `b0` of one weight row `w` against `G` activation rows (`acts` and `side`:
/// `G` rows of `blocks` each), stepping each row's `sums` in block order.
#[inline(always)]
unsafe fn group<B: Small, const G: usize, const N: usize>(
    w: &[u8],
    acts: &[B::Act],
    side: &[Q8Side],
    blocks: usize,
    b0: usize,
    sums: &mut [f32; G],
) {
    let wb = |i: usize| &w[(b0 + i) * B::BYTES..(b0 + i + 1) * B::BYTES];
    // SAFETY: each `wb(i)` is a whole block; AVX2 per the caller.
    // Loops, not `array::from_fn`: a closure there would not inline the intrinsics.
    // SAFETY: register-only.
    let mut q = [unsafe { _mm256_setzero_si256() }; N];
    for (i, q) in q.iter_mut().enumerate() {
        // SAFETY: `wb(i)` is a whole block; AVX2 per the caller.
        *q = unsafe { B::quants(wb(i)) };
    }
    for (g, sum) in sums.iter_mut().enumerate() {
        let at = g * blocks + b0;
        let mut v = [
            // SAFETY: register-only.
            unsafe { _mm256_setzero_si256() };
            4
        ];
        for (i, (v, q)) in v.iter_mut().zip(q).enumerate() {
            let a = B::act_quants(&acts[at + i]);
            // SAFETY: `a` is 32 bytes; AVX2 per the caller.
            *v = unsafe { B::dot(q, _mm256_loadu_si256(a.as_ptr() as *const __m256i)) };
        }
        // SAFETY: AVX2 per the caller.
        let ints = unsafe { hsum4(v) };
        for (i, &int) in ints.iter().take(N).enumerate() {
            let s = &side[at + i];
            *sum = B::step(*sum, int - B::OFFSET * s.qsum, wb(i), s);
        }
    }
}

/// The dots of weight row `w` (`blocks` whole blocks) with `G` activation rows.
#[inline(always)]
unsafe fn dots<B: Small, const G: usize>(
    w: &[u8],
    acts: &[B::Act],
    side: &[Q8Side],
    blocks: usize,
    out: &mut [f32],
) {
    let mut sums = [0.0f32; G];
    let mut b0 = 0;
    while b0 + 4 <= blocks {
        // SAFETY: AVX2 per the caller; blocks `b0..b0 + 4` lie in `w`, `acts` and `side`.
        unsafe { group::<B, G, 4>(w, acts, side, blocks, b0, &mut sums) };
        b0 += 4;
    }
    // SAFETY (each arm): AVX2 per the caller; the last blocks from `b0` lie in the operands.
    match blocks - b0 {
        // SAFETY: as above, three blocks.
        3 => unsafe { group::<B, G, 3>(w, acts, side, blocks, b0, &mut sums) },
        // SAFETY: as above, two blocks.
        2 => unsafe { group::<B, G, 2>(w, acts, side, blocks, b0, &mut sums) },
        // SAFETY: as above, one block.
        1 => unsafe { group::<B, G, 1>(w, acts, side, blocks, b0, &mut sums) },
        _ => {}
    }
    for (o, s) in out.iter_mut().zip(sums) {
        *o = s;
    }
}

/// Lane `c` of the result is `Σ v[c]`: eight columns' block dots reduced at once.
#[inline(always)]
pub(super) unsafe fn hsum8(v: [__m256i; 8]) -> __m256i {
    // SAFETY: register-only; AVX2 per the caller.
    unsafe {
        let ab = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
        let cd = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
        _mm256_add_epi32(
            _mm256_permute2x128_si256::<0x20>(ab, cd),
            _mm256_permute2x128_si256::<0x31>(ab, cd),
        )
    }
}

/// The f16 pairs at `base + c·rb` for the eight lanes `c`, widened: the first half of each
/// pair (a block's `d`), then the second (`Q4_1`'s and `Q5_1`'s `m`; quant bytes otherwise).
/// Eight scalar loads, not `vpgatherdd`: the gather was the loop's bottleneck (with it, the
/// 49152-row head streamed at 17 GB/s in `Q8_0`; without, at 28).
///
/// # Safety
///
/// AVX2 and F16C; each `base + c·rb` begins four readable bytes.
#[inline(always)]
pub(super) unsafe fn halves8(base: *const u8, rb: usize) -> (__m256, __m256) {
    // SAFETY: the loads read four bytes at each `base + c·rb`, as the caller promised; the
    // rest is register-only.
    unsafe {
        let r = |c: usize| core::ptr::read_unaligned(base.add(c * rb) as *const i32);
        let pairs = _mm256_setr_epi32(r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
        let split = _mm256_shuffle_epi8(
            pairs,
            _mm256_setr_epi8(
                0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15, 0, 1, 4, 5, 8, 9, 12, 13, 2,
                3, 6, 7, 10, 11, 14, 15,
            ),
        );
        // Quadwords [first 0..4, first 4..8, second 0..4, second 4..8].
        let split = _mm256_permute4x64_epi64::<0b11_01_10_00>(split);
        (
            _mm256_cvtph_ps(_mm256_castsi256_si128(split)),
            _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(split)),
        )
    }
}

/// Weight rows per chunk of [`chunk`].
const LANES: usize = 8;

/// How many chunks of eight rows ahead [`chunk`] asks for the weights.
const AHEAD: usize = 2;

/// Lane `c` of the result is the sum of row `c`'s four partial sums: rows `0..4` in the
/// 128-bit groups of `v[0]`, rows `4..8` in those of `v[1]`, as [`Small::dot4`] leaves them.
/// AVX-512 F per the caller.
#[inline(always)]
unsafe fn reduce8(v: [__m512i; 2]) -> __m256i {
    // SAFETY: register-only; AVX-512 F per the caller.
    unsafe {
        // Per group g: [v0 0+2, v1 0+2, v0 1+3, v1 1+3], then in lanes 0 and 1 rows g, g + 4.
        let lo = _mm512_unpacklo_epi32(v[0], v[1]);
        let u = _mm512_add_epi32(lo, _mm512_unpackhi_epi32(v[0], v[1]));
        let x = _mm512_add_epi32(u, _mm512_shuffle_epi32::<0x4e>(u));
        let rows = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
        _mm512_castsi512_si256(_mm512_permutexvar_epi32(rows, x))
    }
}

/// One block's float step for eight columns in the lanes of `sum`: their integer dots `ints`
/// less the format's offset times the activation's quant sum, then [`Small::step_lanes`]. A
/// function, not a closure in [`chunk`]: a closure does not inherit its caller's target
/// features, so its intrinsics could stay calls. The caller runs with AVX2 and F16C.
#[inline(always)]
unsafe fn step8<B: Small>(sum: &mut __m256, ints: __m256i, dw: __m256, mw: __m256, s: &Q8Side) {
    // SAFETY: register-only; AVX2 and F16C per the caller.
    unsafe {
        let ints = _mm256_sub_epi32(ints, _mm256_set1_epi32(B::OFFSET * s.qsum));
        *sum = B::step_lanes(*sum, _mm256_cvtepi32_ps(ints), dw, mw, s);
    }
}

/// Eight weight rows back to back in `w` (`rb` bytes each: `blocks` whole blocks) against `R` activation rows (`acts`, `side`: `R` rows of
/// `blocks`), every output stepped in block order in its own lane; `out[c][g]` gets column
/// `c`, row `g`. `ahead`: where the rows [`AHEAD`] chunks on begin (perhaps past the end:
/// only prefetched). `WIDE`: the integer dots two rows to a 512-bit vector with `vpdpbusd`
/// (AVX-512 F, BW, VL and VNNI per the caller), else in AVX2.
#[inline(always)]
unsafe fn chunk<B: Small, const R: usize, const WIDE: bool>(
    w: &[u8],
    rb: usize,
    ahead: *const u8,
    acts: &[B::Act],
    side: &[Q8Side],
    blocks: usize,
) -> [[f32; R]; LANES] {
    debug_assert!(w.len() == LANES * rb && rb == blocks * B::BYTES);
    debug_assert!(acts.len() >= R * blocks && side.len() >= R * blocks);
    // SAFETY (the block): AVX2 and F16C per the caller, and the AVX-512 features with `WIDE`.
    // Block `b` of row `c` is the `BYTES` bytes at `c·rb + b·BYTES < w.len()`, as the caller
    // checked; `acts` and `side` are read through bounds checks; prefetches read nothing.
    unsafe {
        let mut sums = [_mm256_setzero_ps(); R];
        for b in 0..blocks {
            let p = w.as_ptr().add(b * B::BYTES);
            let next = ahead.wrapping_add(b * LANES * B::BYTES);
            for line in 0..(LANES * B::BYTES).div_ceil(64) {
                _mm_prefetch::<_MM_HINT_T1>(next.wrapping_add(64 * line) as *const i8);
            }
            // Every block has at least four bytes.
            let (dw, mw) = halves8(p, rb);
            if WIDE {
                let rows = |g: usize| {
                    let r = |c: usize| p.add((4 * g + c) * rb);
                    [r(0), r(1), r(2), r(3)]
                };
                let q = [B::quad(rows(0)), B::quad(rows(1))];
                for (g, sum) in sums.iter_mut().enumerate() {
                    let i = g * blocks + b;
                    let a = B::act_quants(&acts[i]).as_ptr() as *const __m128i;
                    let a = [
                        B::prep(_mm512_broadcast_i32x4(_mm_loadu_si128(a))),
                        B::prep(_mm512_broadcast_i32x4(_mm_loadu_si128(a.add(1)))),
                    ];
                    step8::<B>(
                        sum,
                        reduce8([B::dot4(q[0], a), B::dot4(q[1], a)]),
                        dw,
                        mw,
                        &side[i],
                    );
                }
            } else {
                // Loops, not `array::from_fn`: a closure there would not inline the intrinsics.
                let mut q = [_mm256_setzero_si256(); LANES];
                for (c, q) in q.iter_mut().enumerate() {
                    *q = B::quants(core::slice::from_raw_parts(p.add(c * rb), B::BYTES));
                }
                for (g, sum) in sums.iter_mut().enumerate() {
                    let i = g * blocks + b;
                    let a = B::act_quants(&acts[i]);
                    let a = _mm256_loadu_si256(a.as_ptr() as *const __m256i);
                    let mut v = [_mm256_setzero_si256(); LANES];
                    for (v, &q) in v.iter_mut().zip(&q) {
                        *v = B::dot(q, a);
                    }
                    step8::<B>(sum, hsum8(v), dw, mw, &side[i]);
                }
            }
        }
        let mut lanes = [[0.0f32; LANES]; R];
        for (l, s) in lanes.iter_mut().zip(sums) {
            _mm256_storeu_ps(l.as_mut_ptr(), s);
        }
        // Loops, not `array::from_fn`: the closures would be calls.
        let mut out = [[0.0f32; R]; LANES];
        for (g, l) in lanes.iter().enumerate() {
            for (c, &v) in l.iter().enumerate() {
                out[c][g] = v;
            }
        }
        out
    }
}

/// Weight rows one wide pass ([`sixteen`]) holds, one to each i32 of a 512-bit vector.
pub(super) const WIDE_ROWS: usize = 16;

/// Activation rows one wide pass serves at most: their sums stay on the stack.
pub(super) const TILE: usize = 64;

/// The fewest activation rows that take the wide passes: with fewer, transposing the weight
/// blocks costs more than the lanes save.
const WIDE_FROM: usize = 2;

/// Sixteen weight rows back to back in `w` (`rb` bytes each: `blocks` whole blocks) against
/// `rows` activation rows (at most [`TILE`]; `acts`, `side`: `rows` rows of `blocks`), one
/// weight row to each lane: for each block, the rows' quants transposed once
/// ([`Small::rows16`]), then for each activation row eight `vpdpbusd` against its bytes
/// broadcast four at a time leave the sixteen whole integer dots in the lanes, and each lane
/// takes the portable float step, block after block. `out[c·stride + g]` gets column `c`, row
/// `g`. AVX-512 F, BW and VNNI, AVX2 and F16C per the caller.
#[inline(always)]
unsafe fn sixteen<B: Small>(
    w: &[u8],
    rb: usize,
    acts: &[B::Act],
    side: &[Q8Side],
    (blocks, rows): (usize, usize),
    out: &mut [f32],
    stride: usize,
) {
    debug_assert!(w.len() == WIDE_ROWS * rb && rb == blocks * B::BYTES && rows <= TILE);
    debug_assert!(acts.len() >= rows * blocks && side.len() >= rows * blocks);
    // SAFETY (the block): the features per the caller. Block `b` of row `c` is the `BYTES`
    // bytes at `c·rb + b·BYTES < w.len()`, as the caller checked; `acts`, `side` and `out` are
    // read and written through bounds checks.
    unsafe {
        let mut sums = [_mm512_setzero_ps(); TILE];
        for b in 0..blocks {
            let p = w.as_ptr().add(b * B::BYTES);
            let q = B::rows16(p, rb);
            let (dw, mw) = halves16(p, rb);
            for (g, sum) in sums.iter_mut().take(rows).enumerate() {
                let i = g * blocks + b;
                let a = B::act_quants(&acts[i]);
                // Two chains, for the latency of `vpdpbusd`.
                let mut acc = [_mm512_setzero_si512(); 2];
                for (k, &q) in q.iter().enumerate() {
                    let four = i32::from_le_bytes([
                        a[4 * k] as u8,
                        a[4 * k + 1] as u8,
                        a[4 * k + 2] as u8,
                        a[4 * k + 3] as u8,
                    ]);
                    acc[k % 2] = _mm512_dpbusd_epi32(acc[k % 2], q, _mm512_set1_epi32(four));
                }
                let s = &side[i];
                let ints = _mm512_sub_epi32(
                    _mm512_add_epi32(acc[0], acc[1]),
                    _mm512_set1_epi32(B::LANE_OFFSET * s.qsum),
                );
                *sum = B::step_lanes(*sum, _mm512_cvtepi32_ps(ints), dw, mw, s);
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

/// Eight columns from `j` into `out` (eight columns of `r.m` values): the activation rows four
/// at a time, then one by one. Columns `j..j + 8` exist.
#[inline(always)]
unsafe fn eight<B: Small, const WIDE: bool>(
    r: &Q8Rows<'_>,
    acts: &[B::Act],
    j: usize,
    out: &mut [f32],
) {
    const R: usize = 4;
    let (m, blocks, rb) = (r.m, r.blocks, r.row_bytes);
    let w = &r.w[j * rb..(j + LANES) * rb];
    let ahead = w.as_ptr().wrapping_add(AHEAD * LANES * rb);
    let mut row = 0;
    while row < m {
        let (a, s) = (&acts[row * blocks..], &r.side[row * blocks..]);
        if row + R <= m {
            // SAFETY: AVX2 and F16C per the caller; `w` is eight rows; `R` rows from `row` exist.
            let v = unsafe { chunk::<B, R, WIDE>(w, rb, ahead, a, s, blocks) };
            for (c, v) in v.iter().enumerate() {
                out[c * m + row..][..R].copy_from_slice(v);
            }
            row += R;
        } else {
            // SAFETY: as above, for one row.
            let v = unsafe { chunk::<B, 1, WIDE>(w, rb, ahead, a, s, blocks) };
            for (c, v) in v.iter().enumerate() {
                out[c * m + row] = v[0];
            }
            row += 1;
        }
    }
}

/// The columns `cols` of format `B` with the activations `acts`: eight columns at a time in
/// the lanes of a vector, the rest one by one, four activation rows at a time.
#[inline(always)]
unsafe fn columns<B: Small, const WIDE: bool>(
    r: &Q8Rows<'_>,
    acts: &[B::Act],
    cols: Range<usize>,
    out: &mut [f32],
) {
    const G: usize = 4;
    let (m, blocks) = (r.m, r.blocks);
    // `quant_linear` built the operands; others would only read short.
    let fits = r.row_bytes == blocks * B::BYTES
        && acts.len() == m * blocks
        && r.side.len() == acts.len()
        && r.w.len() / r.row_bytes.max(1) >= cols.end
        && out.len() == cols.len() * m;
    debug_assert!(fits);
    if !fits || m == 0 {
        return;
    }
    let (rb, mut j) = (r.row_bytes, cols.start);
    if WIDE && m >= WIDE_FROM {
        while j + WIDE_ROWS <= cols.end {
            let w = &r.w[j * rb..(j + WIDE_ROWS) * rb];
            let o = &mut out[(j - cols.start) * m..][..WIDE_ROWS * m];
            let mut row = 0;
            while row < m {
                let rows = (m - row).min(TILE);
                let span = row * blocks..(row + rows) * blocks;
                let (a, s) = (&acts[span.clone()], &r.side[span]);
                // SAFETY: the features per the caller (`WIDE`); `w` is sixteen rows of
                // `blocks` whole blocks and `a`, `s` are `rows` rows of them.
                unsafe { sixteen::<B>(w, rb, a, s, (blocks, rows), &mut o[row..], m) };
                row += rows;
            }
            j += WIDE_ROWS;
        }
    }
    while j + LANES <= cols.end {
        let o = &mut out[(j - cols.start) * m..][..LANES * m];
        // SAFETY: AVX2 and F16C per the caller; columns `j..j + 8` exist.
        unsafe { eight::<B, WIDE>(r, acts, j, o) };
        j += LANES;
    }
    let tail = &mut out[(j - cols.start) * m..];
    let per = G * blocks;
    for (j, column) in (j..cols.end).zip(tail.chunks_exact_mut(m)) {
        let w = r.row(j);
        let mut outs = column.chunks_exact_mut(G);
        let mut row = 0;
        for o in &mut outs {
            let (a, s) = (&acts[row * blocks..][..per], &r.side[row * blocks..][..per]);
            // SAFETY: AVX2 per the caller.
            unsafe { dots::<B, G>(w, a, s, blocks, o) };
            row += G;
        }
        for o in outs.into_remainder() {
            let (a, s) = (
                &acts[row * blocks..][..blocks],
                &r.side[row * blocks..][..blocks],
            );
            // SAFETY: AVX2 per the caller.
            unsafe { dots::<B, 1>(w, a, s, blocks, core::slice::from_mut(o)) };
            row += 1;
        }
    }
}

/// Whether this CPU runs [`q8_avx2`]: AVX2 and F16C (every AVX2 CPU made has both).
pub(crate) fn supported() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("f16c")
}

/// Whether this CPU runs [`q8_avx512`]: [`supported`] and AVX-512 F, BW, VL and VNNI.
pub(crate) fn supported_avx512() -> bool {
    supported()
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vl")
        && std::is_x86_feature_detected!("avx512vnni")
}

/// The columns of the 32-value formats, in AVX2 or (`WIDE`) AVX-512; the K-quants in AVX2
/// ([`qdot8k_x86`]).
#[inline(always)]
unsafe fn formats<const WIDE: bool>(r: &Q8Rows<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY (the calls): the callers run with the features `WIDE` asks for.
    unsafe {
        match r.acts {
            Q8Acts::Q8_0(a) => columns::<Q8_0, WIDE>(r, a, cols, out),
            Q8Acts::Q4_0(a) => columns::<Q4_0, WIDE>(r, a, cols, out),
            Q8Acts::Q5_0(a) => columns::<Q5_0, WIDE>(r, a, cols, out),
            Q8Acts::Q4_1(a) => columns::<Q4_1, WIDE>(r, a, cols, out),
            Q8Acts::Q5_1(a) => columns::<Q5_1, WIDE>(r, a, cols, out),
            Q8Acts::Q4K(a) => qdot8k_x86::columns::<Q4K, WIDE>(r, a, cols, out),
            Q8Acts::Q6K(a) => qdot8k_x86::columns::<Q6K, WIDE>(r, a, cols, out),
            Q8Acts::Q5K(a) => qdot8k_x86::columns::<Q5K, WIDE>(r, a, cols, out),
        }
    }
}

/// The q8-mode columns `cols` of `r` into `out` (column-major), with the portable bits.
///
/// # Safety
///
/// The CPU must support AVX2 and F16C.
#[target_feature(enable = "avx2,f16c")]
pub(crate) unsafe fn q8_avx2(r: &Q8Rows<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY: this function runs with AVX2 and F16C.
    unsafe { formats::<false>(r, cols, out) }
}

/// [`q8_avx2`] with the blocks' integer dots in AVX-512 VNNI (`vpdpbusd`), two weight rows
/// to a vector; the same bits.
///
/// # Safety
///
/// The CPU must support what [`supported_avx512`] asks.
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn q8_avx512(r: &Q8Rows<'_>, cols: Range<usize>, out: &mut [f32]) {
    // SAFETY: this function runs with every feature the wide path needs.
    unsafe { formats::<true>(r, cols, out) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::loops::qdot::q8_portable;
    use crate::quant::GgmlType;

    /// Bytes from a small linear congruential generator.
    fn noise(len: usize, seed: u32) -> Vec<u8> {
        let mut state = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (state >> 24) as u8
            })
            .collect()
    }

    /// A finite half of either sign between 2^-7 and 2 from two noise bytes.
    fn scale(lo: u8, hi: u8) -> u16 {
        (u16::from(hi & 0x80) << 8)
            | (0x2000 + (u16::from(hi & 0x3f) << 8 | u16::from(lo)) % 0x1c00)
    }

    fn run(acts: Q8Acts<'_>, side: &[Q8Side], w: &[u8], row_bytes: usize, m: usize, n: usize) {
        let blocks = side.len() / m;
        let r = Q8Rows {
            acts,
            side,
            w,
            row_bytes,
            blocks,
            m,
        };
        // All the columns, then (not under miri, for time) from an offset.
        let starts: &[usize] = if cfg!(miri) { &[0] } else { &[0, 1] };
        for cols in starts.iter().map(|&start| start..n) {
            let len = cols.len() * m;
            let mut want = vec![0.0f32; len];
            q8_portable(&r, cols.clone(), &mut want);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            let mut got = vec![f32::NAN; len];
            // SAFETY: the caller checked that the CPU has AVX2 and F16C.
            unsafe { q8_avx2(&r, cols.clone(), &mut got) };
            assert_eq!(
                bits(&got),
                bits(&want),
                "avx2: blocks {blocks}, rows {m}, {cols:?}"
            );
            if supported_avx512() {
                let mut got = vec![f32::NAN; len];
                // SAFETY: the CPU has what `q8_avx512` needs, as checked.
                unsafe { q8_avx512(&r, cols.clone(), &mut got) };
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "avx512: blocks {blocks}, rows {m}, {cols:?}"
                );
            }
            assert!(want.iter().all(|v| v.is_finite()));
        }
    }

    #[test]
    fn avx2_q8_dots_give_the_portable_bits_for_every_32_value_format() {
        if !supported() {
            return;
        }
        // Sixteen columns in lanes (two passes, then one from an offset) with eight and a tail
        // of two or three beside them.
        let n = if cfg!(miri) { 26 } else { 42 };
        // Activation rows over a tile and a part of one, outside miri.
        let shapes: &[(usize, usize)] = if cfg!(miri) {
            &[(1, 1), (3, 1), (4, 5), (5, 2)]
        } else {
            &[(1, 1), (3, 1), (4, 5), (5, 2), (9, 6), (2, TILE + 3)]
        };
        for (seed, &(blocks, m)) in shapes.iter().enumerate() {
            let seed = seed as u32 * 7;
            // Activations over every byte, -128 included (what a NaN quantizes to).
            let raw = noise(m * blocks * 36, seed);
            let q8_0: Vec<BlockQ8_0> = raw
                .chunks_exact(36)
                .map(|b| BlockQ8_0 {
                    d: scale(b[0], b[1]),
                    qs: core::array::from_fn(|i| b[4 + i] as i8),
                })
                .collect();
            let q8_1: Vec<BlockQ8_1> = raw
                .chunks_exact(36)
                .map(|b| BlockQ8_1 {
                    d: scale(b[0], b[1]),
                    s: scale(b[2], b[3]),
                    qs: core::array::from_fn(|i| b[4 + i] as i8),
                })
                .collect();
            let side_0: Vec<Q8Side> = q8_0.iter().map(Q8Side::of).collect();
            let side_1: Vec<Q8Side> = q8_1.iter().map(Q8Side::of).collect();
            for ty in [
                GgmlType::Q8_0,
                GgmlType::Q4_0,
                GgmlType::Q5_0,
                GgmlType::Q4_1,
                GgmlType::Q5_1,
            ] {
                let row_bytes = blocks * ty.block_bytes();
                let mut w = noise(n * row_bytes, seed + 1 + ty.id());
                for b in w.chunks_exact_mut(ty.block_bytes()) {
                    let d = scale(b[0], b[1]).to_le_bytes();
                    b[..2].copy_from_slice(&d);
                    if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                        let m = scale(b[2], b[3]).to_le_bytes();
                        b[2..4].copy_from_slice(&m);
                    }
                }
                let acts = match ty {
                    GgmlType::Q8_0 => Q8Acts::Q8_0(&q8_0),
                    GgmlType::Q4_0 => Q8Acts::Q4_0(&q8_0),
                    GgmlType::Q5_0 => Q8Acts::Q5_0(&q8_0),
                    GgmlType::Q4_1 => Q8Acts::Q4_1(&q8_1),
                    _ => Q8Acts::Q5_1(&q8_1),
                };
                let side = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                    &side_1
                } else {
                    &side_0
                };
                run(acts, side, &w, row_bytes, m, n);
            }
        }
    }
}
