//! The AVX-512 micro-kernel of the attention: `c[4 × 64] += Σ_k a[k, r] · b[k, 0..64]` in 16
//! accumulators of 16 lanes, the step of both the score phase (queries against a transposed
//! key tile) and the weighted sum (weights against value rows).
//!
//! Written with `core::arch` intrinsics (it was inline assembly while the AVX-512 intrinsics
//! and `target_feature(enable = "avx512f")` were newer than the crate's minimum Rust
//! version): each kernel is an `avx512f` function whose accumulators are fixed arrays of
//! `__m512` the compiler keeps in registers, every index a constant once the loops over rows
//! and columns unroll. Each element is the chain of the 8-lane kernels (`scores_block`,
//! `weigh_rows` in `lanes.rs`): its steps in increasing `k`, each an `_mm512_mul_ps` then an
//! `_mm512_add_ps` (two roundings: Rust never contracts them into a fused multiply-add) or
//! one `_mm512_fmadd_ps` ([`mul_add`]), so the bits are those of every other backend in the
//! same mode; only 64 columns run at once. The decode score kernels read 16 key rows at a
//! time and turn them into 16 columns in registers ([`transpose16`]).
//!
//! The softmax's `exp(s - max)` runs 16 lanes at a time here too ([`Wide::exp_shifted`]):
//! in the portable mode the operations of the portable `exp`, one intrinsic each, in its
//! order, never fused ([`exp16_portable`]); in the native mode a shorter fused evaluation
//! ending in `vscalefps` (`exp_shifted_fused`), masked over a row's last partial chunk, so
//! that no value of a row is left to the scalar `exp`.

#[cfg(all(target_arch = "x86_64", feature = "std"))]
use super::super::gemm_avx512::Step;
#[cfg(all(target_arch = "x86_64", feature = "std"))]
use core::arch::x86_64::*;

/// A block kernel for the attention's two products; [`Narrow`] has none.
pub(crate) trait Wide: Copy {
    /// `c[r·c_row + x] += Σ_{k < depth} a[k·a_step + r·a_row] · b[k·b_step + x]` for `r < 4`,
    /// `x < 64`, in increasing `k`, rounding as `step`. Returns `false`, having done nothing,
    /// where it has no such kernel or the slices are too short for those positions.
    #[allow(clippy::too_many_arguments)]
    fn block_4x64(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool;

    /// [`block_4x64`](Self::block_4x64), also requesting into L1 the lines of `ahead` at the
    /// offsets it reads `b` at, one per line read, spread over its products: a stream's rows
    /// wanted later are requested at the pace the rows in use are read. Without such lines
    /// in `ahead` (an empty slice, a short one) it requests nothing.
    #[allow(clippy::too_many_arguments)]
    fn block_4x64_ahead(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
        ahead: &[f32],
    ) -> bool;

    /// `c[x] += Σ_{k < depth} a[k] · b[k·b_step + x]` for `x < 64`, in increasing `k`, rounding
    /// as `step` (one row of [`block_4x64`](Self::block_4x64): the chains of the 8-lane
    /// weighted sum, a lane of each per element), requesting into L1 the lines of `ahead` at
    /// the offsets it reads `b` at, one per line read: a lone decode row's values, read from
    /// memory with the rows wanted later requested at the pace it reads them. Where `ahead`
    /// holds fewer such rows, the steps past them request nothing. Returns `false`, having
    /// done nothing, where it has no such kernel or the slices are too short.
    fn weigh_1x64_ahead(
        self,
        a: &[f32],
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        ahead: &[f32],
    ) -> bool;

    /// [`block_4x64`](Self::block_4x64) with the sums starting at `+0.0`, as the 8-lane
    /// score kernel starts its chains: `c` is written, never read.
    #[allow(clippy::too_many_arguments)]
    fn block_4x64_from_zero(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool;

    /// [`block_4x64_from_zero`](Self::block_4x64_from_zero) over the first `16·chunks`
    /// columns only, `chunks` in `1..=4`, in the native mode: the chains of the other widths,
    /// so a row's last columns of scores need not go 8 at a time. Returns `false`, having done
    /// nothing, in the portable mode, where it has no such kernel or the slices are too short.
    #[allow(clippy::too_many_arguments)]
    fn block_4x16n_from_zero(
        self,
        chunks: usize,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool;

    /// Whether [`block_4x16n_from_zero`](Self::block_4x16n_from_zero) serves every width
    /// (the native mode's kernel): then the score phase reads the queries in place, with no
    /// packed copy (a block's `a_step` 1 and `a_row` the head dimension).
    fn scores_in_place(self) -> bool;

    /// Whether [`scores_4x32`](Self::scores_4x32) and
    /// [`block_4x64_ahead`](Self::block_4x64_ahead) run (for a head dimension they take): then
    /// a decode group of two or three rows runs as a block of four, its last row repeated.
    fn blocks_of_four(self) -> bool;

    /// Whether a lone decode row over K and V in memory scores on
    /// [`scores_1x32`](Self::scores_1x32) too, as it does from cache (the native mode's
    /// kernel); else it scores on the 8-lane loop.
    fn lone_from_memory(self) -> bool;

    /// Packs the first `16·⌊n/16⌋` keys of `keys` (`hd` values each) transposed,
    /// `kt[d·kt_stride + j] = keys[j·hd + d]`, in 16 × 16 blocks; returns how many keys it
    /// packed (0, having done nothing, where it has no such kernel, `hd` is not a multiple of
    /// 16 or the slices are too short), the rest are the caller's. Moves only: exact.
    fn pack_keys(
        self,
        keys: &[f32],
        hd: usize,
        n: usize,
        kt: &mut [f32],
        kt_stride: usize,
    ) -> usize;

    /// `xs[j] = exp(xs[j] - top)`. In the portable mode with the bits of
    /// [`exp`](super::super::exp::exp), over the whole chunks of 16 from the start of `xs`,
    /// adding each 8-value chunk of the results to `lanes` in increasing order (lane `l` gets
    /// `xs[8c + l]`, as [`sum_from`](super::super::lanes::sum_from) accumulates). In the native
    /// mode over all of `xs` with the native `exp` and its own order of the sum (see
    /// `exp_shifted_fused`). Returns how many values it did (0 where it has no such kernel,
    /// `lanes` untouched), the rest are the caller's.
    fn exp_shifted(self, xs: &mut [f32], top: f32, lanes: &mut [f32; 8]) -> usize;

    /// `out[x] = Σ_d q[d] · keys[x·hd + d]` for the 32 key rows `x < 32` of `keys` (read in
    /// place, `hd = q.len()` values each), each one chain over `d` in increasing order from
    /// `+0.0`, rounding as the mode does: the chains of the 8-lane row kernel, 16 keys at a
    /// time through 16 × 16 register transposes. Requests `later` (the key rows wanted next,
    /// 32 when whole) into L1, a line per step. Returns `false`, having done nothing, where it
    /// has no such kernel, `hd` is not a positive multiple of 16 or the slices are too short.
    fn scores_1x32(self, q: &[f32], keys: &[f32], later: &[f32], out: &mut [f32]) -> bool;

    /// `out[r·out_row + x] = Σ_{d < hd} q[r·hd + d] · keys[x·hd + d]` for `r < 4`, `x < 32`,
    /// each one chain from `+0.0` in increasing `d`, rounding as `step` (the chains of the
    /// decode score loop), reading the 32 key rows in place through 16 × 16 register
    /// transposes. `ahead` holds key rows wanted later: where it is 32 rows long, one of its
    /// lines goes to L1 per line of `keys` read, spread over the arithmetic (the caller
    /// requests rows of other lengths; the values wanted later are the weighted sum's to
    /// request, at its own pace). Returns `false`, having done nothing, where it has no such
    /// kernel, `hd` is not a positive multiple of 16 or the slices are too short.
    fn scores_4x32(
        self,
        q: &[f32],
        hd: usize,
        keys: &[f32],
        ahead: &[f32],
        out: &mut [f32],
        out_row: usize,
    ) -> bool;
}

/// No wide kernel: every block runs on the 8-lane backend.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Narrow;

impl Wide for Narrow {
    #[inline(always)]
    fn block_4x64(
        self,
        _: &[f32],
        _: usize,
        _: usize,
        _: &[f32],
        _: usize,
        _: usize,
        _: &mut [f32],
        _: usize,
    ) -> bool {
        false
    }

    #[inline(always)]
    fn block_4x64_ahead(
        self,
        _: &[f32],
        _: usize,
        _: usize,
        _: &[f32],
        _: usize,
        _: usize,
        _: &mut [f32],
        _: usize,
        _: &[f32],
    ) -> bool {
        false
    }

    #[inline(always)]
    fn weigh_1x64_ahead(
        self,
        _: &[f32],
        _: &[f32],
        _: usize,
        _: usize,
        _: &mut [f32],
        _: &[f32],
    ) -> bool {
        false
    }

    #[inline(always)]
    fn block_4x64_from_zero(
        self,
        _: &[f32],
        _: usize,
        _: usize,
        _: &[f32],
        _: usize,
        _: usize,
        _: &mut [f32],
        _: usize,
    ) -> bool {
        false
    }

    #[inline(always)]
    fn block_4x16n_from_zero(
        self,
        _: usize,
        _: &[f32],
        _: usize,
        _: usize,
        _: &[f32],
        _: usize,
        _: usize,
        _: &mut [f32],
        _: usize,
    ) -> bool {
        false
    }

    #[inline(always)]
    fn scores_in_place(self) -> bool {
        false
    }

    #[inline(always)]
    fn blocks_of_four(self) -> bool {
        false
    }

    #[inline(always)]
    fn lone_from_memory(self) -> bool {
        false
    }

    #[inline(always)]
    fn pack_keys(self, _: &[f32], _: usize, _: usize, _: &mut [f32], _: usize) -> usize {
        0
    }

    #[inline(always)]
    fn exp_shifted(self, _: &mut [f32], _: f32, _: &mut [f32; 8]) -> usize {
        0
    }

    #[inline(always)]
    fn scores_1x32(self, _: &[f32], _: &[f32], _: &[f32], _: &mut [f32]) -> bool {
        false
    }

    #[inline(always)]
    fn scores_4x32(
        self,
        _: &[f32],
        _: usize,
        _: &[f32],
        _: &[f32],
        _: &mut [f32],
        _: usize,
    ) -> bool {
        false
    }
}

/// The AVX-512 kernel; a value exists only where the CPU reports AVX-512F.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512Attend {
    step: Step,
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
impl Avx512Attend {
    /// The kernel running `step`, if this CPU supports AVX-512F.
    #[inline(always)]
    pub(crate) fn detect(step: Step) -> Option<Self> {
        std::is_x86_feature_detected!("avx512f").then_some(Self { step })
    }
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
/// The largest index `+ 1` that `len` positions `step` apart, starting `rows` of `row` apart, with
/// `width` values each, reach: `None` on overflow.
fn reach(len: usize, step: usize, row: usize, width: usize) -> Option<usize> {
    (len - 1)
        .checked_mul(step)?
        .checked_add(row.checked_mul(3)?)?
        .checked_add(width)
}

/// The constants of [`exp`](super::super::exp::exp) in the order [`exp16_portable`] uses
/// them (`c[i]`, each broadcast to 16 lanes).
#[cfg(all(target_arch = "x86_64", feature = "std"))]
static EXP_CONSTANTS: [u32; 16] = {
    use super::super::exp::{EXP_MAX_ARG, EXP_MIN_ARG};
    [
        EXP_MIN_ARG.to_bits(),               // 0
        EXP_MAX_ARG.to_bits(),               // 1
        core::f32::consts::LOG2_E.to_bits(), // 2
        12_582_912.0f32.to_bits(),           // 3: the rounding constant 1.5 · 2²³
        0.693_359_4f32.to_bits(),            // 4: ln 2, high part
        (-2.121_944_4e-4f32).to_bits(),      // 5: ln 2, low part
        1.987_569_1e-4f32.to_bits(),         // 6: the polynomial, highest degree first
        1.398_199_9e-3f32.to_bits(),         // 7
        8.333_452e-3f32.to_bits(),           // 8
        4.166_579_6e-2f32.to_bits(),         // 9
        0.166_666_65f32.to_bits(),           // 10
        0.5f32.to_bits(),                    // 11
        1.0f32.to_bits(),                    // 12
        127,                                 // 13: the exponent bias, an integer
        f32::INFINITY.to_bits(),             // 14
        0x7fc0_0000,                         // 15: f32::NAN
    ]
};

/// The constants of the native mode's `exp` ([`exp_shifted_fused`]), in the order [`exp16`]
/// uses them (`c[i]`, each broadcast to 16 lanes).
#[cfg(all(target_arch = "x86_64", feature = "std"))]
static EXP_FUSED_CONSTANTS: [u32; 12] = [
    (-104.0f32).to_bits(),               // 0: below it e^x < 2^-150 rounds to +0.0
    89.0f32.to_bits(),                   // 1: above it e^x overflows to +inf
    core::f32::consts::LOG2_E.to_bits(), // 2
    12_582_912.0f32.to_bits(),           // 3: the rounding constant 1.5 · 2²³
    (-0.693_359_4f32).to_bits(),         // 4: -ln 2, high part (few bits: n · it is exact)
    2.121_944_4e-4f32.to_bits(),         // 5: -ln 2, low part
    0x3c07_d407,                         // 6: the polynomial, degree 5 down to 1
    0x3d2b_9d43,                         // 7
    0x3e2a_ad36,                         // 8
    0x3eff_fee2,                         // 9
    0x3f7f_fffb,                         // 10
    1.0f32.to_bits(),                    // 11: degree 0, exactly 1 so that e^0 = 1
];

/// The native mode's `xs[j] = e^(xs[j] - top)` over all of `xs` (a masked last chunk), adding
/// the results to `lanes` (one 16-lane sum in increasing chunks, then lane `l` gets lanes `l`
/// and `l + 8` of it); returns `xs.len()`. Each lane's result is `exp_fused_reference`'s: a
/// fused multiply-add evaluation with a degree-5 polynomial and `vscalefps`, about a third of
/// the portable `exp`'s instructions, within `EXP_FUSED_MAX_REL_ERROR` (3·10⁻⁷) of the true
/// value (so a softmax of it within 1e-5 of the portable one). Every lane's arithmetic depends
/// on its own input only, and the sum on the length only, so any schedule gets the same bits.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[inline(always)]
fn exp_shifted_fused(xs: &mut [f32], top: f32, lanes: &mut [f32; 8]) -> usize {
    // SAFETY: the token exists only where AVX-512F was detected.
    unsafe { exp_shifted_fused_avx512(xs, top, lanes) }
}

/// [`exp_shifted_fused`]'s loop. Per chunk: `x = xs - top`; `xc = clamp(x)` (NaN kept: the
/// clamps return their second operand when it is NaN); `t = xc·log2 e + magic` (fused, so
/// rounded once to an integer `n`), `nf = t - magic`; `r = xc - nf·ln2_hi - nf·ln2_lo`
/// (fused); `p = ((((c5·r + c4)·r + c3)·r + c2)·r + c1)·r + 1`; `y = p · 2^nf` (`vscalefps`:
/// one rounding, to +0.0 below 2^-150 and +inf above the range).
///
/// # Safety
///
/// The CPU has AVX-512F.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
unsafe fn exp_shifted_fused_avx512(xs: &mut [f32], top: f32, lanes: &mut [f32; 8]) -> usize {
    let len = xs.len();
    let mut c = [_mm512_setzero_ps(); 12];
    for (c, &bits) in c.iter_mut().zip(&EXP_FUSED_CONSTANTS) {
        *c = _mm512_set1_ps(f32::from_bits(bits));
    }
    let top = _mm512_set1_ps(top);
    let mut sum = _mm512_setzero_ps();
    let mut chunks = xs.chunks_exact_mut(16);
    for chunk in &mut chunks {
        // SAFETY: 16 values of the slice.
        let y = exp16(unsafe { _mm512_loadu_ps(chunk.as_ptr()) }, top, &c);
        // SAFETY: as above.
        unsafe { _mm512_storeu_ps(chunk.as_mut_ptr(), y) };
        sum = _mm512_add_ps(sum, y);
    }
    let rest = chunks.into_remainder();
    // The lanes of the last, partial chunk (`< 16` of them, so the shift cannot overflow).
    let tail: __mmask16 = (1u16 << rest.len()).wrapping_sub(1);
    if tail != 0 {
        // SAFETY: lanes outside `tail` are neither read nor written (nor fault); the others
        // are the `rest.len()` values of the slice.
        let y = exp16(
            unsafe { _mm512_maskz_loadu_ps(tail, rest.as_ptr()) },
            top,
            &c,
        );
        // SAFETY: as above.
        unsafe { _mm512_mask_storeu_ps(rest.as_mut_ptr(), tail, y) };
        sum = _mm512_mask_add_ps(sum, tail, sum, y);
    }
    // lanes[l] += sum[l] + sum[l + 8].
    let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(sum)));
    let sum = _mm256_add_ps(_mm512_castps512_ps256(sum), high);
    // SAFETY: `lanes` is 8 values.
    unsafe {
        let acc = _mm256_add_ps(_mm256_loadu_ps(lanes.as_ptr()), sum);
        _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
    }
    len
}

/// One chunk of [`exp_shifted_fused_avx512`]: `e^(x - top)` in 16 lanes, with the constants
/// `c` ([`EXP_FUSED_CONSTANTS`], broadcast).
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
fn exp16(x: __m512, top: __m512, c: &[__m512; 12]) -> __m512 {
    let x = _mm512_min_ps(c[1], _mm512_max_ps(c[0], _mm512_sub_ps(x, top)));
    let nf = _mm512_sub_ps(_mm512_fmadd_ps(x, c[2], c[3]), c[3]);
    let r = _mm512_fmadd_ps(nf, c[5], _mm512_fmadd_ps(nf, c[4], x));
    let mut p = _mm512_fmadd_ps(r, c[6], c[7]);
    p = _mm512_fmadd_ps(p, r, c[8]);
    p = _mm512_fmadd_ps(p, r, c[9]);
    p = _mm512_fmadd_ps(p, r, c[10]);
    p = _mm512_fmadd_ps(p, r, c[11]);
    _mm512_scalef_ps(p, nf)
}

/// The portable mode's `xs[j] = exp(xs[j] - top)` over `xs`, whole chunks of 16, adding each
/// chunk's low then high eight results to `lanes`, chunk after chunk, as `sum` adds 8-lane
/// chunks in increasing order. Four chunks a pass, then two, then one ([`exp16_portable`]):
/// each chunk is one long chain of dependent steps, which alone would leave the units idle.
///
/// # Safety
///
/// The CPU has AVX-512F; `xs.len()` is a multiple of 16.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
unsafe fn exp_shifted_portable_avx512(xs: &mut [f32], top: f32, lanes: &mut [f32; 8]) {
    debug_assert!(xs.len().is_multiple_of(16));
    let top = _mm512_set1_ps(top);
    // SAFETY: `lanes` is 8 values.
    let mut sum = unsafe { _mm256_loadu_ps(lanes.as_ptr()) };
    let mut quads = xs.chunks_exact_mut(64);
    for quad in &mut quads {
        // SAFETY: 64 values of the slice.
        sum = unsafe { exp_chunks::<4>(quad.as_mut_ptr(), top, sum) };
    }
    let mut rest = quads.into_remainder();
    if rest.len() >= 32 {
        // SAFETY: 32 values of the slice.
        sum = unsafe { exp_chunks::<2>(rest.as_mut_ptr(), top, sum) };
        rest = &mut rest[32..];
    }
    if rest.len() == 16 {
        // SAFETY: 16 values of the slice.
        sum = unsafe { exp_chunks::<1>(rest.as_mut_ptr(), top, sum) };
    }
    // SAFETY: `lanes` is 8 values.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
}

/// `N` chunks of [`exp_shifted_portable_avx512`]: `xs[..16·N]` replaced by their
/// `exp(x - top)`, each chunk's low then high eight added to `sum`, which is returned.
///
/// # Safety
///
/// The CPU has AVX-512F; `xs` points to `16·N` values, read and written.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn exp_chunks<const N: usize>(xs: *mut f32, top: __m512, mut sum: __m256) -> __m256 {
    let mut x = [_mm512_setzero_ps(); N];
    for (i, x) in x.iter_mut().enumerate() {
        // SAFETY: chunk `i < N` of the caller's `16·N` values.
        *x = _mm512_sub_ps(unsafe { _mm512_loadu_ps(xs.add(16 * i)) }, top);
    }
    let y = exp16_portable(&x);
    for (i, &y) in y.iter().enumerate() {
        // SAFETY: as for the loads.
        unsafe { _mm512_storeu_ps(xs.add(16 * i), y) };
    }
    for y in y {
        sum = _mm256_add_ps(sum, _mm512_castps512_ps256(y));
        let high = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(y));
        sum = _mm256_add_ps(sum, _mm256_castpd_ps(high));
    }
    sum
}

/// The portable [`exp`](super::super::exp::exp) of `N` chunks of 16 lanes, the chunks' steps
/// side by side: each step is one IEEE operation of `exp`, in its order, rounded alone (no
/// fused multiply-add), so every lane gets `exp`'s bits. With `c` = [`EXP_CONSTANTS`]: `xc =
/// clamp(x)` (for NaN `x`, any value: the NaN is selected at the end); `t = xc·log2 e +
/// magic`, `n = bits(t) - bits(magic)`, `nf = t - magic`; `r = (xc - nf·ln2_hi) - nf·ln2_lo`;
/// `p = ((((c6·r + c7)·r + c8)·r + c9)·r + c10)·r + c11`; `er = (p·(r·r) + r) + 1`; `half =
/// n >> 1`, `a = (half + 127) << 23`, `b = (n - half + 127) << 23`; `y = (er·a)·b`; then on
/// `x`: below the range `+0.0`, above it `+inf`, NaN the NaN.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
fn exp16_portable<const N: usize>(x: &[__m512; N]) -> [__m512; N] {
    let mut c = [_mm512_setzero_ps(); 16];
    for (c, &bits) in c.iter_mut().zip(&EXP_CONSTANTS) {
        *c = _mm512_set1_ps(f32::from_bits(bits));
    }
    let (magic, bias) = (_mm512_castps_si512(c[3]), _mm512_castps_si512(c[13]));
    let mut xc = [_mm512_setzero_ps(); N];
    for i in 0..N {
        xc[i] = _mm512_min_ps(_mm512_max_ps(x[i], c[0]), c[1]);
    }
    let mut t = [_mm512_setzero_ps(); N];
    for i in 0..N {
        t[i] = _mm512_add_ps(_mm512_mul_ps(xc[i], c[2]), c[3]);
    }
    let mut n = [_mm512_setzero_si512(); N];
    for i in 0..N {
        n[i] = _mm512_sub_epi32(_mm512_castps_si512(t[i]), magic);
    }
    let mut r = [_mm512_setzero_ps(); N];
    for i in 0..N {
        let nf = _mm512_sub_ps(t[i], c[3]);
        let hi = _mm512_sub_ps(xc[i], _mm512_mul_ps(nf, c[4]));
        r[i] = _mm512_sub_ps(hi, _mm512_mul_ps(nf, c[5]));
    }
    let mut p = [_mm512_setzero_ps(); N];
    for i in 0..N {
        p[i] = _mm512_add_ps(_mm512_mul_ps(c[6], r[i]), c[7]);
    }
    for c in &c[8..12] {
        for i in 0..N {
            p[i] = _mm512_add_ps(_mm512_mul_ps(p[i], r[i]), *c);
        }
    }
    let mut y = [_mm512_setzero_ps(); N];
    for i in 0..N {
        let er = _mm512_mul_ps(p[i], _mm512_mul_ps(r[i], r[i]));
        let er = _mm512_add_ps(_mm512_add_ps(er, r[i]), c[12]);
        let half = _mm512_srai_epi32::<1>(n[i]);
        let a = _mm512_slli_epi32::<23>(_mm512_add_epi32(half, bias));
        let b = _mm512_slli_epi32::<23>(_mm512_add_epi32(_mm512_sub_epi32(n[i], half), bias));
        let v = _mm512_mul_ps(
            _mm512_mul_ps(er, _mm512_castsi512_ps(a)),
            _mm512_castsi512_ps(b),
        );
        let below = _mm512_cmp_ps_mask::<_CMP_LT_OS>(x[i], c[0]);
        let above = _mm512_cmp_ps_mask::<_CMP_GT_OS>(x[i], c[1]);
        let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x[i], x[i]);
        let v = _mm512_mask_mov_ps(v, below, _mm512_setzero_ps());
        let v = _mm512_mask_mov_ps(v, above, c[14]);
        y[i] = _mm512_mask_mov_ps(v, nan, c[15]);
    }
    y
}

/// The largest relative error of the native mode's `exp` ([`exp_fused_reference`]) against
/// f64 `exp`, for results that are normal f32 (the sweep of
/// `fused_exp_is_within_its_bound_of_f64_exp_wherever_the_result_is_normal` measures
/// 1.6·10⁻⁷, about 2.7 ulp; the portable `exp`'s is 8.1·10⁻⁸).
#[cfg(all(test, target_arch = "x86_64", feature = "std"))]
pub(crate) const EXP_FUSED_MAX_REL_ERROR: f64 = 3.0e-7;

/// What [`exp_shifted_fused`] computes for one lane, step by step in scalar code: the
/// specification its tests hold the vector code to.
#[cfg(all(test, target_arch = "x86_64", feature = "std"))]
pub(crate) fn exp_fused_reference(x: f32) -> f32 {
    let c = EXP_FUSED_CONSTANTS.map(f32::from_bits);
    // `maxps`/`minps` return their second operand when it is NaN.
    let xc = if x.is_nan() { x } else { x.clamp(c[0], c[1]) };
    let nf = xc.mul_add(c[2], c[3]) - c[3];
    let r = nf.mul_add(c[5], nf.mul_add(c[4], xc));
    let mut p = c[6].mul_add(r, c[7]);
    for &k in &c[8..] {
        p = p.mul_add(r, k);
    }
    if p.is_nan() || nf.is_nan() {
        return f32::NAN;
    }
    // vscalefps: p · 2^nf rounded once; exact in f64 (|nf| <= 150), then one rounding to f32.
    (f64::from(p) * 2f64.powi(nf as i32)) as f32
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
impl Wide for Avx512Attend {
    #[inline(always)]
    fn pack_keys(
        self,
        keys: &[f32],
        hd: usize,
        n: usize,
        kt: &mut [f32],
        kt_stride: usize,
    ) -> usize {
        let done = n - n % 16;
        if done == 0 || hd == 0 || !hd.is_multiple_of(16) {
            return 0;
        }
        let fits = done.checked_mul(hd).is_some_and(|len| len <= keys.len())
            && (hd - 1)
                .checked_mul(kt_stride)
                .and_then(|at| at.checked_add(done))
                .is_some_and(|len| len <= kt.len());
        if !fits {
            return 0;
        }
        // SAFETY: the token exists only where AVX-512F was detected; `done` and `hd` are
        // multiples of 16, `keys` holds `done·hd` values and `kt` `(hd - 1)·kt_stride + done`,
        // as just checked.
        unsafe { pack_keys_avx512(keys, hd, done, kt, kt_stride) };
        done
    }

    #[inline(always)]
    fn exp_shifted(self, xs: &mut [f32], top: f32, lanes: &mut [f32; 8]) -> usize {
        if let Step::Fused = self.step {
            return exp_shifted_fused(xs, top, lanes);
        }
        let done = xs.len() - xs.len() % 16;
        if done == 0 {
            return 0;
        }
        // SAFETY: the token exists only where AVX-512F was detected; the slice is whole chunks
        // of 16.
        unsafe { exp_shifted_portable_avx512(&mut xs[..done], top, lanes) };
        done
    }

    #[inline(always)]
    fn scores_in_place(self) -> bool {
        matches!(self.step, Step::Fused)
    }

    #[inline(always)]
    fn blocks_of_four(self) -> bool {
        true
    }

    #[inline(always)]
    fn lone_from_memory(self) -> bool {
        // Measured (8 heads, one process, alternating): from 64 MiB the fused kernel read
        // 10-18 % more than the 8-lane loop and the unfused one the same, from 256 MiB the
        // unfused one 7-15 % less.
        matches!(self.step, Step::Fused)
    }

    #[inline(always)]
    fn scores_1x32(self, q: &[f32], keys: &[f32], later: &[f32], out: &mut [f32]) -> bool {
        let hd = q.len();
        let fits = hd > 0
            && hd.is_multiple_of(16)
            && hd.checked_mul(32).is_some_and(|n| n <= keys.len())
            && out.len() >= 32;
        if !fits {
            return false;
        }
        // Whole, `later` is requested from the kernel, a line per step (32 lines per 16
        // dimensions, in address order); otherwise here, and the kernel requests the first 16
        // lines of `keys` again and again (a step of 0: cheap, and no branch among the
        // products).
        let (ahead, step) = match later.len() == 32 * hd {
            true => (later.as_ptr(), 256),
            false => {
                super::super::simd::prefetch_l1(later);
                (keys.as_ptr(), 0)
            }
        };
        match self.step {
            // SAFETY: the token exists only where AVX-512F was detected; `hd = q.len()` is a
            // positive multiple of 16, `keys` holds at least `32·hd` values and `out` at
            // least 32, as just checked.
            Step::Fused => unsafe { scores_1x32_avx512::<true>(q, keys, ahead, step, out) },
            // SAFETY: as above.
            Step::Unfused => unsafe { scores_1x32_avx512::<false>(q, keys, ahead, step, out) },
        }
        true
    }

    #[inline(always)]
    fn block_4x16n_from_zero(
        self,
        chunks: usize,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool {
        match (self.step, chunks) {
            (Step::Fused, 4) => self.block(a, a_step, a_row, b, b_step, depth, c, c_row, true, &[]),
            (Step::Fused, 1..=3) => {
                self.narrow_fused_from_zero(chunks, a, a_step, a_row, b, b_step, depth, c, c_row)
            }
            _ => false,
        }
    }

    #[inline(always)]
    fn scores_4x32(
        self,
        q: &[f32],
        hd: usize,
        keys: &[f32],
        ahead: &[f32],
        out: &mut [f32],
        out_row: usize,
    ) -> bool {
        let fits = hd > 0
            && hd.is_multiple_of(16)
            && hd.checked_mul(32).is_some_and(|n| n <= keys.len())
            && hd.checked_mul(4).is_some_and(|n| n <= q.len())
            && reach(1, 0, out_row, 32).is_some_and(|n| n <= out.len());
        if !fits {
            return false;
        }
        // Requests for a whole 32-row block; otherwise the kernel requests the keys it is
        // about to read (harmless, and no branch among the products).
        let ahead = match ahead.len() == 32 * hd {
            true => ahead.as_ptr(),
            false => keys.as_ptr(),
        };
        match self.step {
            // SAFETY: the token exists only where AVX-512F was detected; `hd` is a positive
            // multiple of 16, `keys` holds at least `32·hd` values, `q` `4·hd` and `out`
            // `3·out_row + 32`, as just checked.
            Step::Fused => unsafe { scores_4x32_avx512::<true>(q, hd, keys, ahead, out, out_row) },
            // SAFETY: as above.
            Step::Unfused => unsafe {
                scores_4x32_avx512::<false>(q, hd, keys, ahead, out, out_row)
            },
        }
        true
    }

    #[inline(always)]
    fn block_4x64(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool {
        self.block(a, a_step, a_row, b, b_step, depth, c, c_row, false, &[])
    }

    #[inline(always)]
    fn block_4x64_ahead(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
        ahead: &[f32],
    ) -> bool {
        self.block(a, a_step, a_row, b, b_step, depth, c, c_row, false, ahead)
    }

    #[inline(always)]
    fn weigh_1x64_ahead(
        self,
        a: &[f32],
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        ahead: &[f32],
    ) -> bool {
        let fits = depth <= a.len()
            && c.len() >= 64
            && (depth == 0 || reach(depth, b_step, 0, 64).is_some_and(|n| n <= b.len()));
        if !fits {
            return false;
        }
        if depth == 0 {
            return true;
        }
        // Requests for the first `early` steps: as many rows as `ahead` holds in full at the
        // offsets `b` is read at (the others go without).
        let early = match b_step {
            0 => 0,
            _ => (ahead.len() + b_step).saturating_sub(64) / b_step,
        }
        .min(depth);
        match self.step {
            // SAFETY: the token exists only where AVX-512F was detected; `depth` is positive
            // and at most `a.len()`, `b` holds `(depth - 1)·b_step + 64` values and `c` 64, as
            // just checked, and `early <= depth`.
            Step::Fused => unsafe {
                weigh_1x64_avx512::<true>(a, b, b_step, depth, c, ahead, early)
            },
            // SAFETY: as above.
            Step::Unfused => unsafe {
                weigh_1x64_avx512::<false>(a, b, b_step, depth, c, ahead, early)
            },
        }
        true
    }

    #[inline(always)]
    fn block_4x64_from_zero(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool {
        self.block(a, a_step, a_row, b, b_step, depth, c, c_row, true, &[])
    }
}

/// `$body` once for each `$i` in `0..16`, `$i` a constant in each copy: a loop unrolled
/// whatever the compiler's heuristics (an array of vectors indexed by a loop's variable would
/// live in memory, not in registers).
#[cfg(all(target_arch = "x86_64", feature = "std"))]
macro_rules! unroll16 {
    ($i:ident => $body:block) => {
        unroll16!(@ $i $body 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    (@ $i:ident $body:block $($n:literal)*) => {
        $({
            let $i: usize = $n;
            $body
        })*
    };
}

/// `acc + x·y`: one fused multiply-add (`FUSED`, the native mode), or a product then a sum,
/// each rounded alone (the portable mode): the step of every chain of the products here.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
fn mul_add<const FUSED: bool>(acc: __m512, x: __m512, y: __m512) -> __m512 {
    if FUSED {
        _mm512_fmadd_ps(x, y, acc)
    } else {
        _mm512_add_ps(acc, _mm512_mul_ps(x, y))
    }
}

/// Requests the line holding `p` into L1 (`prefetcht0`), there among the products: the
/// compiler fence after it keeps the compiler from gathering a pass's requests into one burst
/// at its end, which stalls the loads behind it (the assembly spread them by hand; gathered,
/// the four-row decode steps ran 3-10 % slower than it, spread they are within noise of it).
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[inline(always)]
fn request(p: *const f32) {
    // SAFETY: SSE is part of the x86_64 baseline; a prefetch reads no value and cannot fault,
    // whatever the address.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) }
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
}

/// [`Wide::scores_1x32`]: the chains of keys 0-15, then those of keys 16-31 ([`chain16`], per
/// 16 dimensions), each pass requesting the next 16 lines of `ahead`, `step` values apart.
///
/// # Safety
///
/// The CPU has AVX-512F; `hd = q.len()` is a positive multiple of 16, `keys` holds at least
/// `32·hd` values and `out` at least 32.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
unsafe fn scores_1x32_avx512<const FUSED: bool>(
    q: &[f32],
    keys: &[f32],
    ahead: *const f32,
    step: usize,
    out: &mut [f32],
) {
    let hd = q.len();
    debug_assert!(hd > 0 && hd.is_multiple_of(16) && 32 * hd <= keys.len() && out.len() >= 32);
    let (qp, kp, op) = (q.as_ptr(), keys.as_ptr(), out.as_mut_ptr());
    // Keys 0-15 then keys 16-31 (one chain in registers at a time), a pass per 16
    // dimensions, pass `p` requesting the 16 lines from `ahead + p·step`.
    for half in 0..2 {
        let mut acc = _mm512_setzero_ps();
        for d in (0..hd).step_by(16) {
            let later = ahead.wrapping_add((half * hd + d) / 16 * step);
            // SAFETY: `keys[(16·half + x)·hd + d..][..16]` for `x < 16` and `q[d..][..16]`:
            // inside the slices, since `d + 16 <= hd` (the caller's lengths).
            acc =
                unsafe { chain16::<FUSED>(acc, kp.add(16 * hd * half + d), hd, qp.add(d), later) };
        }
        // SAFETY: `out[16·half..][..16]`, inside `out`.
        unsafe { _mm512_storeu_ps(op.add(16 * half), acc) };
    }
}

/// 16 dimensions of 16 chains: `acc[x] + q[d]·keys[x·hd + d]` for `x < 16`, in increasing
/// `d < 16`, the 16 key rows read and transposed ([`transpose16`]: column `d` holds dimension
/// `d` of the 16 keys), each step requesting the line at `later + 16·d`.
///
/// # Safety
///
/// The CPU has AVX-512F; `keys[x·hd..][..16]` for `x < 16` and `q[..16]` can be read.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn chain16<const FUSED: bool>(
    mut acc: __m512,
    keys: *const f32,
    hd: usize,
    q: *const f32,
    later: *const f32,
) -> __m512 {
    let mut rows = [_mm512_setzero_ps(); 16];
    for (x, row) in rows.iter_mut().enumerate() {
        // SAFETY: key row `x < 16`, as the caller guarantees.
        *row = unsafe { _mm512_loadu_ps(keys.add(x * hd)) };
    }
    let columns = transpose16(&rows);
    unroll16!(d => {
        // SAFETY: `q[d]`, `d < 16`, as the caller guarantees.
        let w = _mm512_set1_ps(unsafe { *q.add(d) });
        acc = mul_add::<FUSED>(acc, w, columns[d]);
        request(later.wrapping_add(16 * d));
    });
    acc
}

/// [`Wide::scores_4x32`]: the chains of rows `r < 4` against keys 0-15, then against keys
/// 16-31 ([`chains16x4`], per 16 dimensions), each pass requesting the next 16 lines of
/// `ahead`, in address order (32 lines per 16 dimensions, `ahead`'s 32 rows in all).
///
/// # Safety
///
/// The CPU has AVX-512F; `hd` is a positive multiple of 16, `keys` holds at least `32·hd`
/// values, `q` at least `4·hd` and `out` at least `3·out_row + 32`.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
unsafe fn scores_4x32_avx512<const FUSED: bool>(
    q: &[f32],
    hd: usize,
    keys: &[f32],
    ahead: *const f32,
    out: &mut [f32],
    out_row: usize,
) {
    debug_assert!(hd > 0 && hd.is_multiple_of(16) && 32 * hd <= keys.len() && 4 * hd <= q.len());
    debug_assert!(3 * out_row + 32 <= out.len());
    let (qp, kp, op) = (q.as_ptr(), keys.as_ptr(), out.as_mut_ptr());
    // Keys 0-15 then keys 16-31 (four chains in registers at a time), a pass per 16
    // dimensions, pass `p` requesting the 16 lines from `ahead + 256·p`.
    for half in 0..2 {
        let mut acc = [_mm512_setzero_ps(); 4];
        for d in (0..hd).step_by(16) {
            let later = ahead.wrapping_add((half * hd + d) * 16);
            // SAFETY: `keys[(16·half + x)·hd + d..][..16]` for `x < 16` and `q[r·hd + d..][..16]`
            // for `r < 4`: inside the slices, since `d + 16 <= hd` (the caller's lengths).
            acc = unsafe {
                chains16x4::<FUSED>(acc, kp.add(16 * hd * half + d), hd, qp.add(d), later)
            };
        }
        for (r, &acc) in acc.iter().enumerate() {
            // SAFETY: `out[r·out_row + 16·half..][..16]`, `r < 4`: inside `out` (the caller's
            // length).
            unsafe { _mm512_storeu_ps(op.add(r * out_row + 16 * half), acc) };
        }
    }
}

/// 16 dimensions of the 4 × 16 chains `acc[r][x] + q[r·hd + d]·keys[x·hd + d]` for `r < 4`,
/// `x < 16`, in increasing `d < 16`: the 16 key rows read and transposed ([`transpose16`]),
/// then for each dimension the four rows' steps, the line at `later + 16·d` requested after
/// the second.
///
/// # Safety
///
/// The CPU has AVX-512F; `keys[x·hd..][..16]` for `x < 16` and `q[r·hd..][..16]` for `r < 4`
/// can be read.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn chains16x4<const FUSED: bool>(
    mut acc: [__m512; 4],
    keys: *const f32,
    hd: usize,
    q: *const f32,
    later: *const f32,
) -> [__m512; 4] {
    let mut rows = [_mm512_setzero_ps(); 16];
    for (x, row) in rows.iter_mut().enumerate() {
        // SAFETY: key row `x < 16`, as the caller guarantees.
        *row = unsafe { _mm512_loadu_ps(keys.add(x * hd)) };
    }
    let columns = transpose16(&rows);
    unroll16!(d => {
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `q[r·hd + d]`, `r < 4`, `d < 16`, as the caller guarantees.
            let w = _mm512_set1_ps(unsafe { *q.add(r * hd + d) });
            *acc = mul_add::<FUSED>(*acc, columns[d], w);
            if r == 1 {
                request(later.wrapping_add(16 * d));
            }
        }
    });
    acc
}

/// [`Wide::pack_keys`] over the first `done` keys: per 16 keys and 16 dimensions, the 16 key
/// rows in, [`transpose16`], the 16 columns out.
///
/// # Safety
///
/// The CPU has AVX-512F; `done` and `hd` are multiples of 16, `keys` holds at least `done·hd`
/// values and `kt` at least `(hd - 1)·kt_stride + done`.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
unsafe fn pack_keys_avx512(keys: &[f32], hd: usize, done: usize, kt: &mut [f32], kt_stride: usize) {
    debug_assert!(done * hd <= keys.len() && (hd - 1) * kt_stride + done <= kt.len());
    let (src, dst) = (keys.as_ptr(), kt.as_mut_ptr());
    for j in (0..done).step_by(16) {
        for d in (0..hd).step_by(16) {
            let mut rows = [_mm512_setzero_ps(); 16];
            for (r, row) in rows.iter_mut().enumerate() {
                // SAFETY: `keys[(j + r)·hd + d..][..16]`, inside `keys` since `j + r < done`
                // and `d + 16 <= hd` (the caller's lengths).
                *row = unsafe { _mm512_loadu_ps(src.add((j + r) * hd + d)) };
            }
            for (c, column) in transpose16(&rows).iter().enumerate() {
                // SAFETY: `kt[(d + c)·kt_stride + j..][..16]`, inside `kt` since `d + c < hd`
                // and `j + 16 <= done`.
                unsafe { _mm512_storeu_ps(dst.add((d + c) * kt_stride + j), *column) };
            }
        }
    }
}

/// The 16 × 16 transpose of `rows`: lane `r` of column `c` is lane `c` of row `r`. Pairs of
/// rows interleaved value by value (`vunpcklps`, `vunpckhps`), then pair by pair
/// (`vunpcklpd`, `vunpckhpd`), then their 128-bit quarters exchanged in two rounds
/// (`vshuff32x4`): moves only, exact.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose16(rows: &[__m512; 16]) -> [__m512; 16] {
    // a[2i], a[2i + 1]: rows 2i and 2i + 1 interleaved, the low then the high half of each
    // 128-bit quarter.
    let mut a = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        a[2 * i] = _mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
    }
    // b[4g + j]: in quarter `l`, column 4l + j of rows 4g..4g + 4.
    let mut b = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let (p, q) = (_mm512_castps_pd(a[4 * g]), _mm512_castps_pd(a[4 * g + 1]));
        let (r, s) = (
            _mm512_castps_pd(a[4 * g + 2]),
            _mm512_castps_pd(a[4 * g + 3]),
        );
        b[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(p, r));
        b[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(p, r));
        b[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(q, s));
        b[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(q, s));
    }
    // c[j], c[4 + j]: columns j and 8 + j, and 4 + j and 12 + j, of rows 0..8; c[8 + j],
    // c[12 + j] the same of rows 8..16.
    let mut c = [_mm512_setzero_ps(); 16];
    for j in 0..4 {
        c[j] = _mm512_shuffle_f32x4::<0x88>(b[j], b[4 + j]);
        c[4 + j] = _mm512_shuffle_f32x4::<0xdd>(b[j], b[4 + j]);
        c[8 + j] = _mm512_shuffle_f32x4::<0x88>(b[8 + j], b[12 + j]);
        c[12 + j] = _mm512_shuffle_f32x4::<0xdd>(b[8 + j], b[12 + j]);
    }
    let mut columns = [_mm512_setzero_ps(); 16];
    for j in 0..8 {
        columns[j] = _mm512_shuffle_f32x4::<0x88>(c[j], c[8 + j]);
        columns[8 + j] = _mm512_shuffle_f32x4::<0xdd>(c[j], c[8 + j]);
    }
    columns
}

#[cfg(all(target_arch = "x86_64", feature = "std"))]
impl Avx512Attend {
    /// [`Wide::block_4x64`], its accumulators starting at `+0.0` when `zero` (then `c` is
    /// written, never read; a product from zero needs no cleared output to load).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn block(
        self,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
        zero: bool,
        ahead: &[f32],
    ) -> bool {
        if depth == 0 {
            if zero {
                // No step: the sums are the starting zeros.
                if reach(1, 0, c_row, 64).is_none_or(|n| n > c.len()) {
                    return false;
                }
                for r in 0..4 {
                    c[r * c_row..r * c_row + 64].fill(0.0);
                }
            }
            return true;
        }
        let fits = reach(depth, a_step, a_row, 1).is_some_and(|n| n <= a.len())
            && reach(depth, b_step, 0, 64).is_some_and(|n| n <= b.len())
            && reach(1, 0, c_row, 64).is_some_and(|n| n <= c.len());
        if !fits {
            return false;
        }
        // Requests for the first `early` steps: as many rows as `ahead` holds in full at the
        // offsets `b` is read at (the others go without).
        let early = match b_step {
            0 => 0,
            _ => (ahead.len() + b_step).saturating_sub(64) / b_step,
        }
        .min(depth);
        let (a, b) = ((a, a_step, a_row), (b, b_step));
        match self.step {
            // SAFETY: the token exists only where AVX-512F was detected; `depth` is positive,
            // `a` holds `(depth - 1)·a_step + 3·a_row + 1` values, `b` `(depth - 1)·b_step +
            // 64` and `c` `3·c_row + 64`, as just checked, and `early <= depth`.
            Step::Fused => unsafe {
                product_avx512::<true, 4>(a, b, depth, c, c_row, zero, ahead, early)
            },
            // SAFETY: as above.
            Step::Unfused => unsafe {
                product_avx512::<false, 4>(a, b, depth, c, c_row, zero, ahead, early)
            },
        }
        true
    }

    /// The native mode's product from zero over `16·chunks` columns, `chunks` in `1..=3`: the
    /// loop of [`block`](Self::block) with fewer accumulators (`4·chunks`), each element the
    /// same chain. Returns `false`, having done nothing, for another `chunks` or slices too
    /// short.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn narrow_fused_from_zero(
        self,
        chunks: usize,
        a: &[f32],
        a_step: usize,
        a_row: usize,
        b: &[f32],
        b_step: usize,
        depth: usize,
        c: &mut [f32],
        c_row: usize,
    ) -> bool {
        let width = 16 * chunks;
        let fits = depth > 0
            && (1..=3).contains(&chunks)
            && reach(depth, a_step, a_row, 1).is_some_and(|n| n <= a.len())
            && reach(depth, b_step, 0, width).is_some_and(|n| n <= b.len())
            && reach(1, 0, c_row, width).is_some_and(|n| n <= c.len());
        if !fits {
            return false;
        }
        let (a, b) = ((a, a_step, a_row), (b, b_step));
        // SAFETY: the token exists only where AVX-512F was detected; `chunks` is in `1..=3`,
        // `depth` is positive, `a` holds `(depth - 1)·a_step + 3·a_row + 1` values, `b`
        // `(depth - 1)·b_step + 16·chunks` and `c` `3·c_row + 16·chunks`, as just checked;
        // no step requests (`early` 0).
        unsafe {
            match chunks {
                1 => product_avx512::<true, 1>(a, b, depth, c, c_row, true, &[], 0),
                2 => product_avx512::<true, 2>(a, b, depth, c, c_row, true, &[], 0),
                _ => product_avx512::<true, 3>(a, b, depth, c, c_row, true, &[], 0),
            }
        }
        true
    }
}

/// [`Wide::weigh_1x64_ahead`]: the 64 values of `c` in four accumulators, a
/// [`weigh_step`] per value row, the first `early` steps each requesting the four lines of
/// `ahead` at the offsets of `b`'s.
///
/// # Safety
///
/// The CPU has AVX-512F; `depth` is positive and at most `a.len()`, `b` holds at least
/// `(depth - 1)·b_step + 64` values and `c` at least 64; `early <= depth`.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
unsafe fn weigh_1x64_avx512<const FUSED: bool>(
    a: &[f32],
    b: &[f32],
    b_step: usize,
    depth: usize,
    c: &mut [f32],
    ahead: &[f32],
    early: usize,
) {
    debug_assert!(0 < depth && depth <= a.len() && early <= depth && c.len() >= 64);
    debug_assert!((depth - 1) * b_step + 64 <= b.len());
    let (bp, cp, later) = (b.as_ptr(), c.as_mut_ptr(), ahead.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    for (j, acc) in acc.iter_mut().enumerate() {
        // SAFETY: `c[16·j..][..16]`, `j < 4`: inside `c` (the caller's length).
        *acc = unsafe { _mm512_loadu_ps(cp.add(16 * j)) };
    }
    let a = &a[..depth];
    for (k, &w) in a[..early].iter().enumerate() {
        // SAFETY: `b[k·b_step..][..64]`, `k < depth`: inside `b` (the caller's length).
        acc = unsafe { weigh_step::<FUSED>(acc, w, bp.add(k * b_step)) };
        for j in 0..4 {
            request(later.wrapping_add(k * b_step + 16 * j));
        }
    }
    for (k, &w) in a.iter().enumerate().skip(early) {
        // SAFETY: as above.
        acc = unsafe { weigh_step::<FUSED>(acc, w, bp.add(k * b_step)) };
    }
    for (j, &acc) in acc.iter().enumerate() {
        // SAFETY: as for the loads.
        unsafe { _mm512_storeu_ps(cp.add(16 * j), acc) };
    }
}

/// One step of [`weigh_1x64_avx512`]: `acc[j] + w·b[16·j..][..16]` for `j < 4`.
///
/// # Safety
///
/// The CPU has AVX-512F; `b[..64]` can be read.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn weigh_step<const FUSED: bool>(acc: [__m512; 4], w: f32, b: *const f32) -> [__m512; 4] {
    let w = _mm512_set1_ps(w);
    let mut sums = acc;
    for (j, sum) in sums.iter_mut().enumerate() {
        // SAFETY: `b[16·j..][..16]`, `j < 4`, as the caller guarantees.
        *sum = mul_add::<FUSED>(*sum, w, unsafe { _mm512_loadu_ps(b.add(16 * j)) });
    }
    sums
}

/// The four rows' product over `16·N` columns, `N` in `1..=4`, with `a = (a, a_step, a_row)`
/// and `b = (b, b_step)`: `c[r·c_row + x] + Σ_k a[k·a_step + r·a_row] · b[k·b_step + x]` for
/// `r < 4`, `x < 16·N`, from `+0.0` instead of `c` when `zero` (then `c` is written, never
/// read), in increasing `k`: `4·N` accumulators, a [`product_step`] per `k`, the first `early`
/// steps each requesting the lines of `ahead` at the offsets of `b`'s.
///
/// # Safety
///
/// The CPU has AVX-512F; `N` is in `1..=4`, `depth` is positive, `a` holds at least `(depth -
/// 1)·a_step + 3·a_row + 1` values, `b` at least `(depth - 1)·b_step + 16·N` and `c` at least
/// `3·c_row + 16·N`; `early <= depth`.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn product_avx512<const FUSED: bool, const N: usize>(
    (a, a_step, a_row): (&[f32], usize, usize),
    (b, b_step): (&[f32], usize),
    depth: usize,
    c: &mut [f32],
    c_row: usize,
    zero: bool,
    ahead: &[f32],
    early: usize,
) {
    debug_assert!((1..=4).contains(&N) && 0 < depth && early <= depth);
    debug_assert!((depth - 1) * a_step + 3 * a_row < a.len());
    debug_assert!((depth - 1) * b_step + 16 * N <= b.len() && 3 * c_row + 16 * N <= c.len());
    let (ap, bp, cp, later) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), ahead.as_ptr());
    // acc[N·r + j]: row `r`, columns `16·j..16·j + 16`.
    let mut acc = [_mm512_setzero_ps(); 16];
    if !zero {
        for r in 0..4 {
            for j in 0..N {
                // SAFETY: `c[r·c_row + 16·j..][..16]`, `r < 4`, `j < N`: inside `c` (the
                // caller's length).
                acc[N * r + j] = unsafe { _mm512_loadu_ps(cp.add(r * c_row + 16 * j)) };
            }
        }
    }
    for k in 0..early {
        // SAFETY: `a[k·a_step + r·a_row]` for `r < 4` and `b[k·b_step..][..16·N]`, `k <
        // depth`: inside the slices (the caller's lengths).
        acc = unsafe {
            let (a, b) = (ap.add(k * a_step), bp.add(k * b_step));
            product_step::<FUSED, N, true>(acc, a, a_row, b, later.wrapping_add(k * b_step))
        };
    }
    for k in early..depth {
        // SAFETY: as above.
        acc = unsafe {
            let (a, b) = (ap.add(k * a_step), bp.add(k * b_step));
            product_step::<FUSED, N, false>(acc, a, a_row, b, later)
        };
    }
    for r in 0..4 {
        for j in 0..N {
            // SAFETY: as for the loads.
            unsafe { _mm512_storeu_ps(cp.add(r * c_row + 16 * j), acc[N * r + j]) };
        }
    }
}

/// One step `k` of [`product_avx512`]: `acc[N·r + j] + a[r·a_row] · b[16·j..][..16]` for
/// `r < 4`, `j < N`, as the mode rounds ([`mul_add`]); with `REQUEST`, the line at `later +
/// 16·r` requested after row `r`'s products.
///
/// # Safety
///
/// The CPU has AVX-512F; `a[r·a_row]` for `r < 4` and `b[..16·N]` can be read.
#[cfg(all(target_arch = "x86_64", feature = "std"))]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn product_step<const FUSED: bool, const N: usize, const REQUEST: bool>(
    mut acc: [__m512; 16],
    a: *const f32,
    a_row: usize,
    b: *const f32,
    later: *const f32,
) -> [__m512; 16] {
    let mut row = [_mm512_setzero_ps(); 4];
    for (j, row) in row.iter_mut().enumerate().take(N) {
        // SAFETY: `b[16·j..][..16]`, `j < N`, as the caller guarantees.
        *row = unsafe { _mm512_loadu_ps(b.add(16 * j)) };
    }
    for r in 0..4 {
        // SAFETY: `a[r·a_row]`, `r < 4`, as the caller guarantees.
        let x = _mm512_set1_ps(unsafe { *a.add(r * a_row) });
        for j in 0..N {
            acc[N * r + j] = mul_add::<FUSED>(acc[N * r + j], row[j], x);
        }
        if REQUEST {
            request(later.wrapping_add(16 * r));
        }
    }
    acc
}

#[cfg(all(test, target_arch = "x86_64", feature = "std", not(feature = "loom")))]
mod tests {
    use super::super::super::exp::{exp, EXP_MAX_ARG, EXP_MIN_ARG};
    use super::super::super::gemm_avx512::Step;
    use super::{exp_fused_reference, Avx512Attend, Wide, EXP_FUSED_MAX_REL_ERROR};

    #[test]
    fn wide_exp_has_the_bits_of_exp_on_every_class_of_input() {
        let Some(wide) = Avx512Attend::detect(Step::Unfused) else {
            return;
        };
        // Every 4099th bit pattern: normals, subnormals, zeros, infinities and NaNs of both
        // signs, plus a ragged tail of 5 that the kernel must leave alone.
        let inputs: Vec<f32> = (0..=u32::MAX)
            .step_by(4099)
            .map(f32::from_bits)
            .chain([-87.3365, -87.3366, 88.72283, 88.7229, -0.0, 0.0, 1e-30])
            .collect();
        for top in [0.0f32, 1.5, -3.25, 80.0, f32::INFINITY] {
            let mut got = inputs.clone();
            let done = wide.exp_shifted(&mut got, top, &mut [0.0; 8]);
            assert_eq!(done, inputs.len() - inputs.len() % 16);
            for (i, (&x, &y)) in inputs.iter().zip(&got).enumerate() {
                let want = if i < done { exp(x - top) } else { x };
                assert_eq!(
                    y.to_bits(),
                    want.to_bits(),
                    "x = {x:e} ({:#x}), top = {top}",
                    x.to_bits()
                );
            }
        }
    }

    /// Every 4099th bit pattern (normals, subnormals, zeros, infinities and NaNs of both signs)
    /// and the edges of the ranges.
    fn every_class_of_input() -> Vec<f32> {
        (0..=u32::MAX)
            .step_by(4099)
            .map(f32::from_bits)
            .chain([
                -104.0, -103.99, -87.3365, -87.3366, 88.72283, 88.7229, 89.0, -0.0, 0.0, 1e-30,
            ])
            .collect()
    }

    #[test]
    fn fused_exp_has_the_bits_of_its_reference_on_every_class_of_input() {
        let Some(wide) = Avx512Attend::detect(Step::Fused) else {
            return;
        };
        let inputs = every_class_of_input();
        for top in [0.0f32, 1.5, -3.25, 80.0, f32::INFINITY] {
            let mut got = inputs.clone();
            assert_eq!(wide.exp_shifted(&mut got, top, &mut [0.0; 8]), inputs.len());
            for (&x, &y) in inputs.iter().zip(&got) {
                let want = exp_fused_reference(x - top);
                assert!(
                    y.to_bits() == want.to_bits() || (y.is_nan() && want.is_nan()),
                    "x = {x:e} ({:#x}), top = {top}: {y:e} != {want:e}",
                    x.to_bits()
                );
            }
        }
    }

    #[test]
    fn fused_exp_gives_exact_values_at_the_special_inputs() {
        let cases = [
            (0.0f32, 1.0f32),
            (-0.0, 1.0),
            (f32::NEG_INFINITY, 0.0),
            (-104.0, 0.0),
            (-1000.0, 0.0),
            (89.0, f32::INFINITY),
            (f32::INFINITY, f32::INFINITY),
        ];
        for (x, want) in cases {
            assert_eq!(exp_fused_reference(x).to_bits(), want.to_bits(), "x = {x}");
        }
        assert!(exp_fused_reference(f32::NAN).is_nan());
        // Between -104 and the normal range the result is subnormal, never negative.
        let y = exp_fused_reference(-95.0);
        assert!(y > 0.0 && y < f32::MIN_POSITIVE, "{y:e}");
    }

    #[test]
    fn fused_exp_is_within_its_bound_of_f64_exp_wherever_the_result_is_normal() {
        // 2·10⁶ points over the normal range, and densely around 0 where softmax weights live
        // (a ten-thousandth of them under miri, which runs this scalar arithmetic a million times
        // slower and has no unsafe code to check here).
        let (points, near) = if cfg!(miri) {
            (2_000, 200)
        } else {
            (2_000_000, 200_000)
        };
        let (lo, hi) = (EXP_MIN_ARG, EXP_MAX_ARG);
        let sweep = (0..=points).map(|i| lo + (hi - lo) * (i as f32 / points as f32));
        let near = (-near..=near).map(|i| i as f32 * (2.0 / near as f32));
        let mut worst = 0.0f64;
        for x in sweep.chain(near).filter(|x| (lo..=hi).contains(x)) {
            let want = f64::from(x).exp();
            let rel = ((f64::from(exp_fused_reference(x)) - want) / want).abs();
            worst = worst.max(rel);
        }
        assert!(worst <= EXP_FUSED_MAX_REL_ERROR, "{worst:e}");
        // Against the portable `exp`: at most 5 ulp apart over the same range.
        let points = points / 10;
        for x in (0..=points).map(|i| lo + (hi - lo) * (i as f32 / points as f32)) {
            let (a, b) = (exp_fused_reference(x), exp(x));
            assert!(
                a.to_bits().abs_diff(b.to_bits()) <= 5,
                "x = {x:e}: {a:e} vs {b:e}"
            );
        }
    }

    #[test]
    fn fused_exp_touches_only_its_slice_and_sums_in_its_order() {
        let Some(wide) = Avx512Attend::detect(Step::Fused) else {
            return;
        };
        // Every length from 0 to 40 (no chunk, whole chunks, ragged tails) inside a longer
        // buffer whose values past the slice must stay.
        let buffer: Vec<f32> = (0..48).map(|i| (i as f32) * -0.37).collect();
        let start = [1.0e-3f32, -2.5, 7.0, 0.0, -0.0, 3.0e4, 1.0, 0.1];
        for len in 0..=40 {
            let mut got = buffer.clone();
            let mut lanes = start;
            assert_eq!(wide.exp_shifted(&mut got[..len], 0.75, &mut lanes), len);
            let want: Vec<f32> = buffer[..len]
                .iter()
                .map(|&x| exp_fused_reference(x - 0.75))
                .collect();
            assert_eq!(got[..len], want[..], "len {len}");
            assert_eq!(got[len..], buffer[len..], "len {len}");
            let mut sum = [0.0f32; 16];
            for chunk in want.chunks(16) {
                for (s, &y) in sum.iter_mut().zip(chunk) {
                    *s += y;
                }
            }
            let want_lanes: [f32; 8] = core::array::from_fn(|l| start[l] + (sum[l] + sum[l + 8]));
            assert_eq!(
                lanes.map(f32::to_bits),
                want_lanes.map(f32::to_bits),
                "len {len}"
            );
        }
    }

    #[test]
    fn wide_exp_adds_each_eight_results_to_the_lanes_in_order() {
        let Some(wide) = Avx512Attend::detect(Step::Unfused) else {
            return;
        };
        // Three chunks (one pass of two and a lone one) and a ragged tail of 5 left alone;
        // values whose sums round differently in another order.
        let inputs: Vec<f32> = (0..53).map(|i| (i as f32) * 0.37 - 9.0).collect();
        let start = [1.0e-3f32, -2.5, 7.0, 0.0, -0.0, 3.0e4, 1.0, 0.1];
        let mut lanes = start;
        let mut got = inputs.clone();
        let done = wide.exp_shifted(&mut got, 0.75, &mut lanes);
        assert_eq!(done, 48);
        let mut want = start;
        for chunk in got[..done].chunks_exact(8) {
            for (w, &y) in want.iter_mut().zip(chunk) {
                *w += y;
            }
        }
        assert_eq!(lanes.map(f32::to_bits), want.map(f32::to_bits));
        assert_eq!(got[done..], inputs[done..]);
    }

    #[test]
    fn wide_product_from_zero_is_the_product_into_zeros_whatever_c_held() {
        for step in [Step::Unfused, Step::Fused] {
            let Some(wide) = Avx512Attend::detect(step) else {
                return;
            };
            let a: Vec<f32> = (0..4 * 37).map(|i| (i as f32 * 0.61).sin()).collect();
            let b: Vec<f32> = (0..80 * 37).map(|i| (i as f32 * 0.37).cos()).collect();
            for depth in [0, 1, 37] {
                let mut want = vec![0.0f32; 3 * 80 + 64];
                assert!(wide.block_4x64(&a, 4, 1, &b, 80, depth, &mut want, 80));
                let mut got = vec![f32::NAN; 3 * 80 + 64];
                assert!(wide.block_4x64_from_zero(&a, 4, 1, &b, 80, depth, &mut got, 80));
                for r in 0..4 {
                    let row = r * 80..r * 80 + 64;
                    assert_eq!(
                        got[row.clone()]
                            .iter()
                            .map(|x| x.to_bits())
                            .collect::<Vec<_>>(),
                        want[row].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        "{step:?}, depth {depth}, row {r}"
                    );
                }
            }
        }
    }

    #[test]
    fn fused_product_over_16_chunk_columns_has_the_bits_of_the_64_column_one() {
        let Some(wide) = Avx512Attend::detect(Step::Fused) else {
            return;
        };
        let a: Vec<f32> = (0..4 * 37).map(|i| (i as f32 * 0.61).sin()).collect();
        let b: Vec<f32> = (0..80 * 37).map(|i| (i as f32 * 0.37).cos()).collect();
        for depth in [1, 37] {
            let mut want = vec![f32::NAN; 3 * 80 + 64];
            assert!(wide.block_4x64_from_zero(&a, 4, 1, &b, 80, depth, &mut want, 80));
            for chunks in 1..=4 {
                let mut got = vec![-7.0f32; 3 * 80 + 64];
                let width = 16 * chunks;
                assert!(wide.block_4x16n_from_zero(chunks, &a, 4, 1, &b, 80, depth, &mut got, 80));
                for r in 0..4 {
                    let row = &got[r * 80..r * 80 + 64];
                    let wanted = &want[r * 80..r * 80 + width];
                    assert_eq!(
                        row[..width].iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        wanted.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                        "depth {depth}, chunks {chunks}, row {r}"
                    );
                    assert!(row[width..].iter().all(|&x| x == -7.0), "{chunks}, row {r}");
                }
            }
        }
    }

    #[test]
    fn product_over_16_chunk_columns_is_refused_in_the_portable_mode_and_out_of_range() {
        let (a, b) = (vec![1.0f32; 4 * 8], vec![1.0f32; 64 * 8]);
        let mut c = vec![-7.0f32; 4 * 64];
        if let Some(wide) = Avx512Attend::detect(Step::Unfused) {
            assert!(!wide.block_4x16n_from_zero(1, &a, 4, 1, &b, 64, 8, &mut c, 64));
        }
        if let Some(wide) = Avx512Attend::detect(Step::Fused) {
            for chunks in [0, 5] {
                assert!(!wide.block_4x16n_from_zero(chunks, &a, 4, 1, &b, 64, 8, &mut c, 64));
            }
            // Too short an output for the fourth row's 16 columns.
            assert!(!wide.block_4x16n_from_zero(1, &a, 4, 1, &b, 64, 8, &mut c[..3 * 64 + 15], 64));
        }
        assert!(c.iter().all(|&x| x == -7.0));
    }

    /// `Σ_d q[d] · key[d]` as one chain from `+0.0` in increasing `d`, rounded as `step`.
    fn row_chain(step: Step, q: &[f32], key: &[f32]) -> f32 {
        q.iter().zip(key).fold(0.0f32, |acc, (&a, &b)| match step {
            Step::Unfused => acc + a * b,
            Step::Fused => a.mul_add(b, acc),
        })
    }

    #[test]
    fn one_row_scores_over_32_keys_have_the_bits_of_each_keys_chain() {
        for step in [Step::Unfused, Step::Fused] {
            let Some(wide) = Avx512Attend::detect(step) else {
                return;
            };
            for hd in [16, 64, 80] {
                // Values of every magnitude, plus a NaN, infinities and signed zeros among
                // the keys, so that a lane out of place or a fused step shows in the bits.
                let q: Vec<f32> = (0..hd).map(|d| (d as f32 * 0.73).sin() * 3.0).collect();
                let mut keys: Vec<f32> = (0..33 * hd)
                    .map(|i| (i as f32 * 0.377).cos() * (1 << (i % 9)) as f32)
                    .collect();
                keys[5 * hd + 3] = f32::NAN;
                keys[17 * hd] = f32::INFINITY;
                keys[30 * hd + hd - 1] = -0.0;
                let ahead = vec![0.0f32; 32 * hd];
                // Requests from the kernel (32 whole rows) and from the caller (a part).
                for later in [&ahead[..], &ahead[..hd]] {
                    let mut got = vec![-7.0f32; 33];
                    assert!(wide.scores_1x32(&q, &keys, later, &mut got));
                    for (x, &y) in got[..32].iter().enumerate() {
                        let want = row_chain(step, &q, &keys[x * hd..(x + 1) * hd]);
                        assert_eq!(y.to_bits(), want.to_bits(), "{step:?}, hd {hd}, key {x}");
                    }
                    assert_eq!(got[32], -7.0, "only 32 scores are written");
                }
            }
        }
    }

    #[test]
    fn one_row_scores_are_refused_for_a_ragged_head_or_too_few_keys_or_outputs() {
        for step in [Step::Unfused, Step::Fused] {
            let Some(wide) = Avx512Attend::detect(step) else {
                return;
            };
            let keys = vec![1.0f32; 32 * 64];
            let mut out = vec![-7.0f32; 32];
            let none: &[f32] = &[];
            // hd 0 and 8 (not a multiple of 16), 31 keys, 31 outputs.
            assert!(!wide.scores_1x32(&[], &keys, none, &mut out));
            assert!(!wide.scores_1x32(&[1.0; 8], &keys, none, &mut out));
            assert!(!wide.scores_1x32(&[1.0; 64], &keys[..31 * 64 + 63], none, &mut out));
            assert!(!wide.scores_1x32(&[1.0; 64], &keys, none, &mut out[..31]));
            assert!(out.iter().all(|&x| x == -7.0));
        }
    }

    #[test]
    fn one_row_weighted_sum_adds_each_value_row_in_increasing_order() {
        for step in [Step::Unfused, Step::Fused] {
            let Some(wide) = Avx512Attend::detect(step) else {
                return;
            };
            // 37 value rows of 80 (the 64 columns from 8 on), onto a row that starts
            // nonzero, with a NaN, an infinity and signed zeros among the values, so that a
            // lane out of place, a row out of order or a fused step shows in the bits.
            let (depth, b_step) = (37, 80);
            let a: Vec<f32> = (0..depth).map(|k| (k as f32 * 0.29).sin() * 2.0).collect();
            let mut b: Vec<f32> = (0..depth * b_step)
                .map(|i| (i as f32 * 0.37).cos() * (1 << (i % 7)) as f32)
                .collect();
            b[5 * b_step + 8 + 3] = f32::NAN;
            b[17 * b_step + 8 + 40] = f32::INFINITY;
            b[30 * b_step + 8 + 63] = -0.0;
            let start: Vec<f32> = (0..65).map(|x| (x as f32 * 0.11).tan()).collect();
            let later = vec![0.0f32; depth * b_step];
            // Requests for every step, for the first few (a short `ahead`), and none.
            for ahead in [&later[..], &later[..5 * b_step + 64], &[][..]] {
                let mut got = start.clone();
                assert!(wide.weigh_1x64_ahead(&a, &b[8..], b_step, depth, &mut got, ahead));
                for x in 0..64 {
                    let want = (0..depth).fold(start[x], |acc, k| {
                        let (w, v) = (a[k], b[k * b_step + 8 + x]);
                        match step {
                            Step::Unfused => acc + w * v,
                            Step::Fused => w.mul_add(v, acc),
                        }
                    });
                    assert_eq!(got[x].to_bits(), want.to_bits(), "{step:?}, column {x}");
                }
                assert_eq!(got[64], start[64], "only 64 values are written");
            }
            // No step: the row is left as it was.
            let mut got = start.clone();
            assert!(wide.weigh_1x64_ahead(&a, &b, b_step, 0, &mut got, &later));
            assert_eq!(got, start);
        }
    }

    #[test]
    fn one_row_weighted_sum_is_refused_for_short_slices() {
        let Some(wide) = Avx512Attend::detect(Step::Unfused) else {
            return;
        };
        let (a, b) = (vec![1.0f32; 4], vec![1.0f32; 3 * 80 + 64]);
        let mut c = vec![-7.0f32; 64];
        // Too few weights, a last value row short of 64, an output row short of 64, and a
        // step that reaches past the values.
        assert!(!wide.weigh_1x64_ahead(&a[..3], &b, 80, 4, &mut c, &[]));
        assert!(!wide.weigh_1x64_ahead(&a, &b[..3 * 80 + 63], 80, 4, &mut c, &[]));
        assert!(!wide.weigh_1x64_ahead(&a, &b, 80, 4, &mut c[..63], &[]));
        assert!(!wide.weigh_1x64_ahead(&a, &b, usize::MAX / 2, 2, &mut c, &[]));
        assert!(c.iter().all(|&x| x == -7.0));
    }

    #[test]
    fn wide_pack_keys_transposes_whole_blocks_of_16_keys_and_leaves_the_rest() {
        let Some(wide) = Avx512Attend::detect(Step::Unfused) else {
            return;
        };
        let (hd, n, stride) = (48, 37, 40);
        let keys: Vec<f32> = (0..n * hd).map(|i| i as f32).collect();
        let mut kt = vec![-1.0f32; hd * stride];
        assert_eq!(wide.pack_keys(&keys, hd, n, &mut kt, stride), 32);
        for d in 0..hd {
            for j in 0..stride {
                let want = if j < 32 { keys[j * hd + d] } else { -1.0 };
                assert_eq!(kt[d * stride + j], want, "d {d}, j {j}");
            }
        }
        // A head dimension that is not a multiple of 16: nothing.
        assert_eq!(wide.pack_keys(&keys[..36 * 8], 8, 36, &mut kt, stride), 0);
    }

    #[test]
    fn wide_scores_4x32_are_the_chains_of_each_row_and_key_in_increasing_dimension() {
        for step in [Step::Unfused, Step::Fused] {
            let Some(wide) = Avx512Attend::detect(step) else {
                return;
            };
            for hd in [16, 64, 80] {
                let q: Vec<f32> = (0..4 * hd).map(|i| (i as f32 * 0.61).sin() * 3.0).collect();
                let keys: Vec<f32> = (0..32 * hd).map(|i| (i as f32 * 0.37).cos()).collect();
                // The key rows to request: a whole block, a short one and none.
                let later: Vec<f32> = (0..32 * hd).map(|i| i as f32).collect();
                for ahead in [&later[..], &later[..hd], &[][..]] {
                    let out_row = 40;
                    let mut got = vec![f32::NAN; 3 * out_row + 32];
                    assert!(wide.scores_4x32(&q, hd, &keys, ahead, &mut got, out_row));
                    for r in 0..4 {
                        for x in 0..32 {
                            let mut acc = 0.0f32;
                            for d in 0..hd {
                                let (a, b) = (q[r * hd + d], keys[x * hd + d]);
                                acc = match step {
                                    Step::Fused => a.mul_add(b, acc),
                                    Step::Unfused => acc + a * b,
                                };
                            }
                            assert_eq!(
                                got[r * out_row + x].to_bits(),
                                acc.to_bits(),
                                "{step:?}, hd {hd}, row {r}, key {x}"
                            );
                        }
                    }
                    // Nothing between the rows is written.
                    assert!(got[32..out_row].iter().all(|x| x.is_nan()));
                }
            }
        }
    }

    #[test]
    fn wide_scores_4x32_refuse_ragged_head_dimensions_and_short_slices() {
        let Some(wide) = Avx512Attend::detect(Step::Fused) else {
            return;
        };
        let (q, keys) = (vec![1.0f32; 4 * 72], vec![1.0f32; 32 * 72]);
        let mut out = vec![0.0f32; 4 * 32];
        // 72 is no multiple of 16; 64 needs 32 · 64 key values, and `out` 3 · 40 + 32 values.
        assert!(!wide.scores_4x32(&q, 72, &keys, &[], &mut out, 32));
        assert!(!wide.scores_4x32(&q, 64, &keys[..32 * 64 - 1], &[], &mut out, 32));
        assert!(!wide.scores_4x32(&q, 64, &keys, &[], &mut out, 40));
        assert!(!wide.scores_4x32(&q, 0, &keys, &[], &mut out, 32));
        assert_eq!(out, vec![0.0f32; 4 * 32]);
    }

    #[test]
    fn wide_product_requesting_rows_ahead_is_the_product() {
        for step in [Step::Unfused, Step::Fused] {
            let Some(wide) = Avx512Attend::detect(step) else {
                return;
            };
            // Four rows of weights 70 apart, 37 value rows of 80 (the 64 columns from 8 on),
            // accumulated into rows 72 apart that start nonzero.
            let (depth, b_step, a_row, c_row) = (37, 80, 70, 72);
            let a: Vec<f32> = (0..3 * a_row + depth)
                .map(|i| (i as f32 * 0.29).sin())
                .collect();
            let b: Vec<f32> = (0..depth * b_step)
                .map(|i| (i as f32 * 0.41).cos())
                .collect();
            let c0: Vec<f32> = (0..3 * c_row + 64).map(|i| i as f32 * 0.125).collect();
            let mut want = c0.clone();
            assert!(wide.block_4x64(&a, 1, a_row, &b[8..], b_step, depth, &mut want, c_row));
            let later: Vec<f32> = (0..depth * b_step).map(|i| -(i as f32)).collect();
            // Rows for every step, for some (one short of a row), for none.
            for ahead in [&later[8..], &later[8..20 * b_step], &later[..10], &[][..]] {
                let mut got = c0.clone();
                let (b, c) = (&b[8..], &mut got);
                assert!(wide.block_4x64_ahead(&a, 1, a_row, b, b_step, depth, c, c_row, ahead));
                let bits = |v: &[f32]| {
                    v.iter()
                        .map(|x| if x.is_nan() { 1 } else { x.to_bits() })
                        .collect::<Vec<_>>()
                };
                assert_eq!(bits(&got), bits(&want), "{step:?}, {} ahead", ahead.len());
            }
        }
    }
}
