//! The q8 mode's K-quant dots (`Q4_K`, `Q5_K`, `Q6_K` against `Q8_K`) on AVX2, with the
//! portable bits. The AVX-512 variant runs them too.
//!
//! The portable order (`qdot.rs`) keeps eight integer lanes per block, value `e` in lane
//! `e % 8`, each term `scale · q · a`, then steps eight float lanes `lanes[l] += (dw·da)·ints[l]`
//! and (`Q4_K`, `Q5_K`) a scalar `sum −= (dminw·da)·Σ bsums·min`, and ends `sum += lanes[0]`,
//! …, `lanes[7]`. The lanes' integers are exact in any order, so they are free to take the
//! multiply-add instructions, provided that every i32 they leave gathers values of one lane:
//!
//! * **The lane order.** `vpmaddubsw` sums the products of two adjacent bytes, `vpmaddwd` two
//!   adjacent i16 pairs, so an i32 holds the values of its four bytes. The activations are
//!   rearranged once per call ([`KLanes`], filled here in AVX2) so that the four bytes of i32
//!   `s` of each 32-byte half hold values `s`, `s + 8` of one piece of 32 values and `s`,
//!   `s + 8` of the next: one lane, two scales (the i16 pair of `vpmaddwd`). A weight block is
//!   rearranged the same way (`vpshufb`, `vpunpck*wd`, `vperm2i128`), so the eight i32 of
//!   every product are the eight lanes in order and need no reduction. A byte-granular
//!   permute across halves could gather four values of one scale instead, but AVX2 has none.
//! * **The signs.** `vpmaddubsw` takes one side unsigned. `Q4_K`'s and `Q5_K`'s quants
//!   (`0..16`, `0..32`) are that side; `Q6_K`'s (`−32..32`) are signed, so its activations are
//!   stored as `a + 128` (unsigned for every byte, −128 included, where llama.cpp's sign trick
//!   is not exact) and each block's lanes start from `−128 · Σ scale·q`, computed once with
//!   the block. No pair saturates: `2·31·128` and `2·255·32` are below 2^15.
//! * **The rows.** A weight block is rearranged once and dotted with up to [`ROWS`]
//!   activation rows (prefill's many rows share it), each row's float lanes stepped block
//!   after block with the portable operations in the portable order; the minima are reduced
//!   eight rows at a time (`vphaddd`) and stepped in a vector, lane by lane as the portable
//!   scalar. Every output has the portable bits. One row (decode) pays the rearrangement per
//!   block, still below the multiplies it replaces.
//!
//! VNNI's `vpdpwssd` (the `vpmaddwd` and its add in one) measured no faster on Zen 4, where the
//! multiplies' two pipes bound the loop either way, and miri cannot run it; so the AVX-512
//! variant takes this loop as it is.

use core::arch::x86_64::*;
use core::ops::Range;

use super::qdot::{q8_portable, KLanes, Q8Acts, Q8Rows};
use super::qdot8_x86::hsum8;
use crate::quant::{f16_to_f32, BlockQ8_K};

/// Activation rows one pass over a weight row serves: each weight block is rearranged once per
/// pass, and the rows' running sums stay on the stack.
const ROWS: usize = 16;
// The minima go eight rows to a vector.
const _: () = assert!(ROWS.is_multiple_of(8));

/// One weight block in the activations' lane order ([`KLanes`]), with what its dots with every
/// activation row share.
pub(crate) struct Prepped {
    /// Piece `c` (values `64c..64c + 64`), half `h`: the quants, as [`KQuant::SHIFTED`] says.
    w: [[__m256i; 2]; 4],
    /// Per i32 of `w[c][h]`: the i16 scale of its first two bytes, then of its last two.
    s: [[__m256i; 2]; 4],
    /// Where each block's integer lanes start: `−128 · Σ scale·q` where the activations are
    /// `a + 128`, else zero.
    start: __m256i,
    /// `Q4_K`: `min[j / 2]` at i16 `j`, against the activation's `bsums`.
    mins: __m256i,
    /// The block's scale, widened.
    d: f32,
    /// `Q4_K`'s scale of the minima, widened.
    dmin: f32,
}

/// A K-quant format on this path. Its methods may only run inside a function compiled with
/// AVX2, on a CPU that has it.
pub(crate) trait KQuant {
    /// Bytes per block.
    const BYTES: usize;
    /// Whether the format has minima (`sum −= (dminw·da)·Σ bsums·min` per block).
    const MINS: bool;
    /// Whether the activation lanes are `a + 128` (the unsigned side of `vpmaddubsw`, the
    /// quants signed) rather than `a` (the signed side, the quants unsigned).
    const SHIFTED: bool;
    /// The bits [`fill_lanes`] flips in the format's activations.
    const FLIP: u8 = if Self::SHIFTED { 0x80 } else { 0 };
    /// The block `b` (at least [`BYTES`](Self::BYTES) bytes) rearranged.
    unsafe fn prep(b: &[u8]) -> Prepped;
}

/// The byte order, in each 128-bit half, that puts values `s` and `s + 8` side by side.
#[inline(always)]
unsafe fn pair_order() -> __m256i {
    // SAFETY: register-only; AVX2 per the caller.
    unsafe {
        _mm256_setr_epi8(
            0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12,
            5, 13, 6, 14, 7, 15,
        )
    }
}

/// The 32 bytes at `p` in the byte `order`.
#[inline(always)]
unsafe fn ordered(p: *const u8, order: __m256i) -> __m256i {
    // SAFETY: the callers pass 32 readable bytes; AVX2 per the caller.
    unsafe { _mm256_shuffle_epi8(_mm256_loadu_si256(p as *const __m256i), order) }
}

/// Two pieces of 32 values `x`, `y` (each in [`pair_order`]) as the halves of their
/// [`KLanes`]: i32 `s` of half `h` holds `x`'s values `16h + s`, `16h + s + 8`, then `y`'s.
#[inline(always)]
unsafe fn interleave(x: __m256i, y: __m256i) -> [__m256i; 2] {
    // SAFETY: register-only; AVX2 per the caller.
    unsafe {
        // Per 128-bit half (values 0..16, then 16..32): lanes 0..4, then 4..8.
        let (u, v) = (_mm256_unpacklo_epi16(x, y), _mm256_unpackhi_epi16(x, y));
        [
            _mm256_permute2x128_si256::<0x20>(u, v),
            _mm256_permute2x128_si256::<0x31>(u, v),
        ]
    }
}

/// Fills `out` with the [`KLanes`] of `acts` where this CPU runs a loop that reads them (the
/// K-quants with AVX2: `Q4_K`'s signed, `Q6_K`'s as `a + 128`), else leaves it empty. `false`
/// where `out` could not grow.
pub(crate) fn fill_lanes(acts: Q8Acts<'_>, out: &mut Vec<KLanes>) -> bool {
    out.clear();
    let (acts, flip) = match acts {
        Q8Acts::Q4K(a) => (a, Q4K::FLIP),
        Q8Acts::Q5K(a) => (a, Q5K::FLIP),
        Q8Acts::Q6K(a) => (a, Q6K::FLIP),
        _ => return true,
    };
    if !std::is_x86_feature_detected!("avx2") {
        return true;
    }
    if out.try_reserve_exact(acts.len()).is_err() {
        return false;
    }
    // SAFETY: the CPU has AVX2, as checked.
    unsafe { lanes_avx2(acts, flip, out) };
    true
}

/// [`KLanes::of`] of each block of `acts`, pushed to `out`: each piece of 64 values
/// rearranged as a weight's are ([`interleave`]).
#[target_feature(enable = "avx2")]
unsafe fn lanes_avx2(acts: &[BlockQ8_K], flip: u8, out: &mut Vec<KLanes>) {
    let (order, flip) = (pair_order(), _mm256_set1_epi8(flip as i8));
    for a in acts {
        let mut l = KLanes([0; 256]);
        let (q, o) = (a.qs.as_ptr() as *const u8, l.0.as_mut_ptr() as *mut __m256i);
        for c in 0..4 {
            // SAFETY: `q` is 256 bytes and `o` 256 bytes aligned to 32; the rest is
            // register-only with AVX2.
            unsafe {
                let halves = interleave(
                    ordered(q.add(64 * c), order),
                    ordered(q.add(64 * c + 32), order),
                );
                _mm256_store_si256(o.add(2 * c), _mm256_xor_si256(halves[0], flip));
                _mm256_store_si256(o.add(2 * c + 1), _mm256_xor_si256(halves[1], flip));
            }
        }
        out.push(l);
    }
}

/// Sixteen i16 as eight pairs, pair `k` in every i32 of `out[k]`.
#[inline(always)]
unsafe fn broadcast_pairs(v: __m256i) -> [__m256i; 8] {
    let mut out = [v; 8];
    for (k, o) in out.iter_mut().enumerate() {
        // SAFETY: register-only; AVX2 per the caller.
        *o = unsafe { _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(k as i32)) };
    }
    out
}

/// An f16 at `b[at..at + 2]`, widened.
#[inline(always)]
fn half(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
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

/// A `Q4_K` or (`FIFTH`) `Q5_K` block `b` rearranged: `d`, `dmin`, twelve bytes of 6-bit
/// scales and minima, with `FIFTH` 32 bytes of fifth bits (bits `2c`, `2c + 1` of byte `p`
/// for values `64c + p`, `64c + 32 + p`), then 128 bytes of nibbles.
#[inline(always)]
unsafe fn min_prep<const FIFTH: bool>(b: &[u8]) -> Prepped {
    let qs = if FIFTH { 48 } else { 16 };
    debug_assert!(b.len() >= qs + 128);
    let (scales, mins) = k4_scales(&b[4..16]);
    // SAFETY: `b` is a block (its 128 quant bytes from `qs`, with `FIFTH` its 32 bytes of fifth
    // bits from 16); the rest is register-only with AVX2 per the caller.
    unsafe {
        let (order, low) = (pair_order(), _mm256_set1_epi8(0x0f));
        let fifth = ordered(b.as_ptr().add(16), order);
        // Pair c: the scales of sub-blocks 2c and 2c + 1.
        let pairs = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(scales as i64));
        let pairs = broadcast_pairs(_mm256_castsi128_si256(pairs));
        let mut w = [[_mm256_setzero_si256(); 2]; 4];
        let mut s = w;
        for c in 0..4 {
            let bytes = ordered(b.as_ptr().add(qs + 32 * c), order);
            // Values 64c + p in the low nibbles (scale 2c), 64c + 32 + p in the high ones.
            let mut x = _mm256_and_si256(bytes, low);
            let mut y = _mm256_and_si256(_mm256_srli_epi16::<4>(bytes), low);
            if FIFTH {
                x = _mm256_or_si256(x, fifth_bit(fifth, 2 * c));
                y = _mm256_or_si256(y, fifth_bit(fifth, 2 * c + 1));
            }
            w[c] = interleave(x, y);
            s[c] = [pairs[c], pairs[c]];
        }
        let m = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(mins as i64));
        Prepped {
            w,
            s,
            start: _mm256_setzero_si256(),
            mins: _mm256_set_m128i(_mm_unpackhi_epi16(m, m), _mm_unpacklo_epi16(m, m)),
            d: half(b, 0),
            dmin: half(b, 2),
        }
    }
}

/// `Q4_K`: `d`, `dmin`, twelve bytes of 6-bit scales and minima, 128 bytes of nibbles.
pub(crate) struct Q4K;

impl KQuant for Q4K {
    const BYTES: usize = crate::quant::BlockQ4_K::BYTES;
    const MINS: bool = true;
    const SHIFTED: bool = false;
    #[inline(always)]
    unsafe fn prep(b: &[u8]) -> Prepped {
        debug_assert!(b.len() >= Self::BYTES);
        // SAFETY: `b` is a block; AVX2 per the caller.
        unsafe { min_prep::<false>(b) }
    }
}

/// `Q5_K`: `Q4_K`'s fields with 32 bytes of fifth bits before the nibbles.
pub(crate) struct Q5K;

impl KQuant for Q5K {
    const BYTES: usize = crate::quant::BlockQ5_K::BYTES;
    const MINS: bool = true;
    const SHIFTED: bool = false;
    #[inline(always)]
    unsafe fn prep(b: &[u8]) -> Prepped {
        debug_assert!(b.len() >= Self::BYTES);
        // SAFETY: `b` is a block; AVX2 per the caller.
        unsafe { min_prep::<true>(b) }
    }
}

/// `Q6_K`: 128 bytes of low nibbles, 64 of high bit pairs, sixteen i8 scales, `d`.
pub(crate) struct Q6K;

impl KQuant for Q6K {
    const BYTES: usize = crate::quant::BlockQ6_K::BYTES;
    const MINS: bool = false;
    const SHIFTED: bool = true;
    #[inline(always)]
    unsafe fn prep(b: &[u8]) -> Prepped {
        debug_assert!(b.len() >= Self::BYTES);
        // SAFETY: `b` is a block (`ql` at 0, `qh` at 128, the scales at 192); the rest is
        // register-only with AVX2 per the caller.
        unsafe {
            let (p, order) = (b.as_ptr(), pair_order());
            let (low, two, off) = (
                _mm256_set1_epi8(0x0f),
                _mm256_set1_epi8(0x30),
                _mm256_set1_epi8(32),
            );
            let mut w = [[_mm256_setzero_si256(); 2]; 4];
            for h in 0..2 {
                let ql0 = ordered(p.add(64 * h), order);
                let ql1 = ordered(p.add(64 * h + 32), order);
                let qh = ordered(p.add(128 + 32 * h), order);
                // Values 128h + 32k + p for k = 0..4 (the high bit pairs of qh[p] in order).
                let mut v = [
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
                for v in &mut v {
                    *v = _mm256_sub_epi8(*v, off);
                }
                w[2 * h] = interleave(v[0], v[1]);
                w[2 * h + 1] = interleave(v[2], v[3]);
            }
            // Piece c's values 64c + 16h + p (scale 4c + h) and 64c + 32 + 16h + p (4c + 2 + h):
            // pair 2c + h of the scales in the order 0, 2, 1, 3 within each four.
            let scales = _mm_loadu_si128(p.add(192) as *const __m128i);
            let scales = _mm_shuffle_epi8(
                scales,
                _mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15),
            );
            let pairs = broadcast_pairs(_mm256_cvtepi8_epi16(scales));
            let mut s = [[_mm256_setzero_si256(); 2]; 4];
            for (c, s) in s.iter_mut().enumerate() {
                *s = [pairs[2 * c], pairs[2 * c + 1]];
            }
            let (shift, mut sum) = (_mm256_set1_epi8(-128), _mm256_setzero_si256());
            for (w, s) in w.iter().zip(&s) {
                for (&w, &s) in w.iter().zip(s) {
                    let q = _mm256_maddubs_epi16(shift, w);
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(q, s));
                }
            }
            Prepped {
                w,
                s,
                start: _mm256_sub_epi32(_mm256_setzero_si256(), sum),
                mins: _mm256_setzero_si256(),
                d: half(b, 208),
                dmin: 0.0,
            }
        }
    }
}

/// The eight integer lanes of the block `p` against the activation block's lanes `a`:
/// `vpmaddubsw`, then `vpmaddwd` and an add.
#[inline(always)]
unsafe fn ints<K: KQuant>(p: &Prepped, a: &KLanes) -> __m256i {
    // SAFETY: `a` is 256 bytes aligned to 32 (`KLanes`); the rest is register-only with AVX2
    // per the caller.
    unsafe {
        let a = a.0.as_ptr() as *const __m256i;
        // Two chains, one per half, for the latency of the multiply-adds.
        let mut acc = [p.start, _mm256_setzero_si256()];
        for c in 0..4 {
            for (h, acc) in acc.iter_mut().enumerate() {
                let a = _mm256_load_si256(a.add(2 * c + h));
                let w = p.w[c][h];
                let q = if K::SHIFTED {
                    _mm256_maddubs_epi16(a, w)
                } else {
                    _mm256_maddubs_epi16(w, a)
                };
                *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(q, p.s[c][h]));
            }
        }
        _mm256_add_epi32(acc[0], acc[1])
    }
}

/// `Σ bsums·min` of the activation block `a` against the block `p`'s minima.
#[inline(always)]
unsafe fn mins_sum(p: &Prepped, a: &BlockQ8_K) -> i32 {
    // SAFETY: `bsums` is sixteen i16; the rest is register-only with AVX2 per the caller.
    unsafe {
        let v = _mm256_madd_epi16(_mm256_loadu_si256(a.bsums.as_ptr() as _), p.mins);
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<1>(s)))
    }
}

/// The minima's step of the eight rows from `row` at once, lane `t` for row `row + t`:
/// `sums −= (dminw·da)·Σ bsums·min` with block `b` of each row (`blocks` a row in `acts`).
#[inline(always)]
unsafe fn mins_step8(
    p: &Prepped,
    acts: &[BlockQ8_K],
    blocks: usize,
    b: usize,
    row: usize,
    sums: __m256,
) -> __m256 {
    let a: [&BlockQ8_K; 8] = core::array::from_fn(|t| &acts[(row + t) * blocks + b]);
    // SAFETY: each `bsums` is sixteen i16; the rest is register-only with AVX2 per the caller.
    unsafe {
        let mut v = [_mm256_setzero_si256(); 8];
        for (v, a) in v.iter_mut().zip(a) {
            *v = _mm256_madd_epi16(_mm256_loadu_si256(a.bsums.as_ptr() as _), p.mins);
        }
        let da = _mm256_setr_ps(
            a[0].d, a[1].d, a[2].d, a[3].d, a[4].d, a[5].d, a[6].d, a[7].d,
        );
        let dm = _mm256_mul_ps(_mm256_set1_ps(p.dmin), da);
        _mm256_sub_ps(sums, _mm256_mul_ps(dm, _mm256_cvtepi32_ps(hsum8(v))))
    }
}

/// One row's end, as the portable row's: `sum` plus the eight float lanes in order.
#[inline(always)]
unsafe fn finish(mut sum: f32, lanes: __m256) -> f32 {
    let mut l = [0.0f32; 8];
    // SAFETY: a store to a local array of eight f32; AVX per the caller.
    unsafe { _mm256_storeu_ps(l.as_mut_ptr(), lanes) };
    for l in l {
        sum += l;
    }
    sum
}

/// The activation rows `rows` (at most [`ROWS`]) of weight row `w` (`blocks` whole blocks)
/// into `out[g]` for row `rows.start + g`.
#[inline(always)]
unsafe fn pass<K: KQuant>(
    w: &[u8],
    acts: &[BlockQ8_K],
    lanes: &[KLanes],
    blocks: usize,
    rows: Range<usize>,
    out: &mut [f32],
) {
    debug_assert!(rows.len() <= ROWS && w.len() == blocks * K::BYTES);
    // SAFETY (the block): AVX2 per the caller; each
    // `w[at..]` is one block; the activations are read through bounds checks.
    unsafe {
        let mut sums = [_mm256_setzero_ps(); ROWS];
        // The minima's sums: whole eights of rows in vectors, the rest one by one.
        let eights = rows.len() / 8;
        let mut mins8 = [_mm256_setzero_ps(); ROWS / 8];
        let mut mins = [0.0f32; ROWS];
        for (b, wb) in w.chunks_exact(K::BYTES).enumerate() {
            let p = K::prep(wb);
            for (g, row) in rows.clone().enumerate() {
                let i = row * blocks + b;
                let ints = _mm256_cvtepi32_ps(ints::<K>(&p, &lanes[i]));
                let dd = _mm256_set1_ps(p.d * acts[i].d);
                sums[g] = _mm256_add_ps(sums[g], _mm256_mul_ps(dd, ints));
            }
            if K::MINS {
                for (k, m) in mins8.iter_mut().take(eights).enumerate() {
                    *m = mins_step8(&p, acts, blocks, b, rows.start + 8 * k, *m);
                }
                for (g, row) in rows.clone().enumerate().skip(8 * eights) {
                    let a = &acts[row * blocks + b];
                    mins[g] -= (p.dmin * a.d) * mins_sum(&p, a) as f32;
                }
            }
        }
        for (m, v) in mins.chunks_exact_mut(8).zip(mins8).take(eights) {
            _mm256_storeu_ps(m.as_mut_ptr(), v);
        }
        for ((o, &s), &m) in out.iter_mut().zip(&sums).zip(&mins) {
            *o = finish(m, s);
        }
    }
}

/// The columns `cols` of `r` (format `K`, activations `acts`) into `out`, column-major: up to
/// [`ROWS`] activation rows per pass over a weight row. Operands `quant_linear` did not build
/// (no [`KLanes`]) take the portable loop.
///
/// # Safety
///
/// The CPU must support AVX2.
#[inline(always)]
pub(crate) unsafe fn columns<K: KQuant>(
    r: &Q8Rows<'_>,
    acts: &[BlockQ8_K],
    cols: Range<usize>,
    out: &mut [f32],
) {
    let (m, blocks) = (r.m, r.blocks);
    let fits = r.row_bytes == blocks * K::BYTES
        && acts.len() == m * blocks
        && r.lanes.len() == acts.len()
        && r.w.len() / r.row_bytes.max(1) >= cols.end
        && out.len() == cols.len() * m;
    if !fits {
        return q8_portable(r, cols, out);
    }
    let mut from = 0;
    while from < m {
        let rows = from..(from + ROWS).min(m);
        for (j, column) in cols.clone().zip(out.chunks_exact_mut(m)) {
            let o = &mut column[rows.clone()];
            // SAFETY: AVX2 per the caller; row `j` is
            // `blocks` whole blocks and the rows `rows` have theirs, as checked.
            unsafe { pass::<K>(r.row(j), acts, r.lanes, blocks, rows.clone(), o) };
        }
        from = rows.end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::loops::qdot::{k_scales_mins, Q8Acts, Q8Side};
    use crate::kernels::loops::qdot8_x86::{q8_avx2, q8_avx512, supported, supported_avx512};
    use crate::quant::{f32_to_f16, quantize_row_q8_K, GgmlType};

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

    /// The operands of `ty` against `acts`, with their lanes and side values.
    fn rows<'a>(
        ty: GgmlType,
        acts: &'a [BlockQ8_K],
        side: &'a [Q8Side],
        lanes: &'a mut Vec<KLanes>,
        w: &'a [u8],
        blocks: usize,
    ) -> Q8Rows<'a> {
        let acts = match ty {
            GgmlType::Q4_K => Q8Acts::Q4K(acts),
            GgmlType::Q5_K => Q8Acts::Q5K(acts),
            _ => Q8Acts::Q6K(acts),
        };
        assert!(fill_lanes(acts, lanes));
        Q8Rows {
            acts,
            side,
            lanes,
            w,
            row_bytes: blocks * ty.block_bytes(),
            blocks,
            m: side.len() / blocks,
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    // `k4_scales` unpacks all eight 6-bit pairs at once where the portable loop calls
    // `quant::scale_min_k4` per sub-block: every bit of each of the twelve bytes, alone and in
    // noise, gives the same scales and minima.
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
        for s in cases {
            let (scales, mins) = k4_scales(&s);
            let want = k_scales_mins(&s);
            assert_eq!((scales.to_le_bytes(), mins.to_le_bytes()), want, "{s:?}");
        }
    }

    #[test]
    fn avx2_k_quant_dots_give_the_portable_bits() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let (blocks, m, n) = (2, 2, 3);
        let x: Vec<f32> = noise(m * blocks * 256, 1)
            .iter()
            .map(|&b| (b as f32 - 127.5) / 37.0)
            .collect();
        let mut acts = vec![BlockQ8_K::ZERO; m * blocks];
        quantize_row_q8_K(&x, &mut acts).unwrap();
        let side: Vec<Q8Side> = acts.iter().map(Q8Side::of).collect();
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let w = weight(ty, n, blocks, ty.id());
            let mut lanes = Vec::new();
            let r = rows(ty, &acts, &side, &mut lanes, &w, blocks);
            let mut want = vec![0.0f32; n * m];
            q8_portable(&r, 0..n, &mut want);
            let mut got = vec![f32::NAN; n * m];
            // SAFETY: the CPU has AVX2, as checked.
            unsafe {
                if ty == GgmlType::Q4_K {
                    columns::<Q4K>(&r, &acts, 0..n, &mut got)
                } else {
                    columns::<Q6K>(&r, &acts, 0..n, &mut got)
                }
            };
            assert_eq!(bits(&got), bits(&want), "{ty}");
            assert!(want.iter().all(|v| v.is_finite() && *v != 0.0), "{ty}");
        }
    }

    /// Every activation byte (−128 included, what a non-finite input can quantize to), random
    /// `bsums` and scales of either sign, against both formats, on every row count up to
    /// past [`ROWS`] and on column ranges that start past 0 with odd counts, for every format.
    #[test]
    fn k_quant_dots_give_the_portable_bits_on_any_rows_and_columns() {
        if !supported() {
            return;
        }
        let (blocks, n) = (2, 5);
        let ms: &[usize] = if cfg!(miri) {
            &[3, 17]
        } else {
            &[1, 2, 3, 5, 8, 13, 16, 17, 33]
        };
        let ranges: &[(usize, usize)] = if cfg!(miri) {
            &[(1, 4)]
        } else {
            &[(0, n), (1, 4), (2, 5), (4, 5)]
        };
        for &m in ms {
            let raw = noise(m * blocks * 292, m as u32);
            let mut acts: Vec<BlockQ8_K> = raw
                .chunks_exact(292)
                .map(|b| BlockQ8_K {
                    d: (b[0] as f32 - 127.5) / 4096.0,
                    qs: core::array::from_fn(|i| b[4 + i] as i8),
                    bsums: core::array::from_fn(|j| {
                        i16::from_le_bytes([b[260 + 2 * j], b[261 + 2 * j]])
                    }),
                })
                .collect();
            for (i, a) in acts.iter_mut().enumerate() {
                a.qs[(37 * i + 5) % 256] = i8::MIN;
            }
            let side: Vec<Q8Side> = acts.iter().map(Q8Side::of).collect();
            for ty in [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K] {
                let w = weight(ty, n, blocks, ty.id() + m as u32);
                let mut lanes = Vec::new();
                let r = rows(ty, &acts, &side, &mut lanes, &w, blocks);
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

    #[test]
    fn the_lanes_filled_are_the_defined_ones() {
        if !supported() {
            return;
        }
        let raw = noise(3 * 256, 11);
        let acts: Vec<BlockQ8_K> = raw
            .chunks_exact(256)
            .map(|b| BlockQ8_K {
                d: 1.0,
                qs: core::array::from_fn(|i| b[i] as i8),
                bsums: [0; 16],
            })
            .collect();
        for (acts_of, flip) in [
            (Q8Acts::Q4K as fn(_) -> _, 0),
            (Q8Acts::Q5K, 0),
            (Q8Acts::Q6K, 0x80),
        ] {
            let mut lanes = Vec::new();
            assert!(fill_lanes(acts_of(&acts), &mut lanes));
            let want: Vec<KLanes> = acts.iter().map(|a| KLanes::of(a, flip)).collect();
            assert_eq!(lanes, want);
        }
        let mut lanes = vec![KLanes([0; 256])];
        assert!(fill_lanes(Q8Acts::Q8_0(&[]), &mut lanes));
        assert!(lanes.is_empty());
    }

    #[test]
    fn operands_without_lanes_take_the_portable_loop() {
        if !supported() {
            return;
        }
        let acts = [BlockQ8_K {
            d: 0.5,
            qs: core::array::from_fn(|i| i as i8),
            bsums: [3; 16],
        }];
        let side = [Q8Side::of(&acts[0])];
        let w = weight(GgmlType::Q4_K, 1, 1, 3);
        let mut lanes = Vec::new();
        let mut r = rows(GgmlType::Q4_K, &acts, &side, &mut lanes, &w, 1);
        let mut want = [0.0f32];
        q8_portable(&r, 0..1, &mut want);
        r.lanes = &[];
        let mut got = [f32::NAN];
        // SAFETY: the CPU has AVX2 and F16C, as checked.
        unsafe { q8_avx2(&r, 0..1, &mut got) };
        assert_eq!(got[0].to_bits(), want[0].to_bits());
    }
}
