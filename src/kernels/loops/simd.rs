//! [`Simd`]: eight f32 lanes and the exactly rounded primitives the kernels are made of, on
//! every backend.
//!
//! A reduction keeps [`LANES`] = 8 independent accumulators: element `d` of a dot product goes
//! to lane `d % 8` in increasing `d` (a ragged tail is a zero-padded last chunk), and the lanes
//! fold in a fixed tree, `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`. That order is the contract;
//! [`Simd`] is how it is executed. Each backend implements the same primitives — lane-wise IEEE
//! `+` and `*` (never fused) and that fold — so the generic kernels compiled on any backend
//! return the same bits: [`Scalar`] (plain Rust, every target), `Sse2` (x86_64 baseline),
//! `Avx2` (detected at run time) and `Neon` (the aarch64 baseline). Explicit vectors, rather than arrays left to the
//! auto-vectoriser, because LLVM's SLP vectoriser splits fold trees and multi-accumulator loops
//! unpredictably (measured: 3× slower dot products).

/// The number of independent accumulators of a reduction.
pub(crate) const LANES: usize = 8;

/// Eight f32 lanes and the primitives the kernels use. `Self` is a token proving the CPU
/// supports the backend; every method is lane-wise and exactly rounded.
pub(crate) trait Simd: Copy {
    /// Eight lanes.
    type V: Copy;
    /// All lanes `+0.0`.
    fn zero(self) -> Self::V;
    /// All lanes `x`.
    fn splat(self, x: f32) -> Self::V;
    /// `s[0..8]` (`s` must hold at least 8 values).
    fn load(self, s: &[f32]) -> Self::V;
    /// Writes the lanes to `s[0..8]`.
    fn store(self, v: Self::V, s: &mut [f32]);
    /// Lane-wise `a + b`.
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise `a * b`.
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// Lane-wise `if a > b { a } else { b }` (x86's `maxps` exactly).
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    /// `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`.
    fn fold(self, v: Self::V) -> f32;

    /// Runs `phase` in a function of its own, compiled for this backend. The attention kernel
    /// runs each phase (dot products, softmax, weighted sum) this way: inlined together, the
    /// constants and broadcasts LLVM hoists out of one phase stay in vector registers across
    /// the others and push their accumulators onto the stack (measured on the dot products).
    #[inline(always)]
    fn outlined<P: Phase<Self>>(self, phase: P) -> P::Output {
        outlined_baseline(self, phase)
    }

    /// Lane-wise `acc + a * b` (two roundings).
    #[inline(always)]
    fn mul_add(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
        self.add(acc, self.mul(a, b))
    }

    /// Lane-wise `acc + a * b` rounded once where the backend has a hardware fused
    /// multiply-add (`Avx2Fma`), else exactly [`mul_add`](Self::mul_add): the step of the
    /// native precision mode, whose bits may differ between backends.
    #[inline(always)]
    fn mul_add_native(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
        self.mul_add(acc, a, b)
    }

    /// The first `s.len() % 8` values after the last whole chunk, zero-padded to 8 lanes.
    #[inline(always)]
    fn load_tail(self, s: &[f32]) -> Self::V {
        let mut pad = [0.0f32; LANES];
        let full = s.len() - s.len() % LANES;
        pad[..s.len() - full].copy_from_slice(&s[full..]);
        self.load(&pad)
    }

    /// The 8 × 8 transpose: lane `c` of result `r` is lane `r` of `rows[c]`. Moves only, so
    /// exact on every backend; packs a key tile for the attention's score kernel.
    #[inline(always)]
    fn transpose8(self, rows: [Self::V; LANES]) -> [Self::V; LANES] {
        let mut m = [[0.0f32; LANES]; LANES];
        for (row, v) in m.iter_mut().zip(rows) {
            self.store(v, row);
        }
        // Loops, not `array::from_fn`: a closure would not inline the vector loads.
        let mut out = [self.zero(); LANES];
        for (r, o) in out.iter_mut().enumerate() {
            let mut column = [0.0f32; LANES];
            for (c, x) in column.iter_mut().enumerate() {
                *x = m[c][r];
            }
            *o = self.load(&column);
        }
        out
    }
}

/// Which multiply-add a kernel's reduction steps use: one type per precision mode, so the
/// mode is compiled into the loop rather than branched on inside it.
pub(crate) trait MulAdd: Copy {
    /// `acc + a * b` in this mode on backend `s`.
    fn step<S: Simd>(self, s: S, acc: S::V, a: S::V, b: S::V) -> S::V;
    /// The same on one value (ragged edges), rounded as [`step`](Self::step) rounds a lane.
    fn step1<S: Simd>(self, s: S, acc: f32, a: f32, b: f32) -> f32;
}

/// Two roundings, the same bits on every backend and target ([`Simd::mul_add`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unfused;

impl MulAdd for Unfused {
    #[inline(always)]
    fn step<S: Simd>(self, s: S, acc: S::V, a: S::V, b: S::V) -> S::V {
        s.mul_add(acc, a, b)
    }

    #[inline(always)]
    fn step1<S: Simd>(self, _: S, acc: f32, a: f32, b: f32) -> f32 {
        acc + a * b
    }
}

/// The backend's own multiply-add ([`Simd::mul_add_native`]): fused where it has one.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Native;

impl MulAdd for Native {
    #[inline(always)]
    fn step<S: Simd>(self, s: S, acc: S::V, a: S::V, b: S::V) -> S::V {
        s.mul_add_native(acc, a, b)
    }

    #[inline(always)]
    fn step1<S: Simd>(self, s: S, acc: f32, a: f32, b: f32) -> f32 {
        let mut out = [0.0f32; LANES];
        s.store(
            s.mul_add_native(s.splat(acc), s.splat(a), s.splat(b)),
            &mut out,
        );
        out[0]
    }
}

/// A step of a kernel run through [`Simd::outlined`]; `run` must be `#[inline(always)]` so
/// that it is compiled inside the backend's own function (a closure would not be, and its
/// intrinsics would turn into calls).
pub(crate) trait Phase<S: Simd> {
    /// What the step returns.
    type Output;
    /// Runs the step on backend `s`.
    fn run(self, s: S) -> Self::Output;
}

#[inline(never)]
fn outlined_baseline<S: Simd, P: Phase<S>>(s: S, phase: P) -> P::Output {
    phase.run(s)
}

/// The backend every target has: plain Rust on `[f32; 8]`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Scalar;

impl Simd for Scalar {
    type V = [f32; LANES];

    #[inline(always)]
    fn zero(self) -> Self::V {
        [0.0; LANES]
    }

    #[inline(always)]
    fn splat(self, x: f32) -> Self::V {
        [x; LANES]
    }

    #[inline(always)]
    fn load(self, s: &[f32]) -> Self::V {
        let mut v = [0.0; LANES];
        v.copy_from_slice(&s[..LANES]);
        v
    }

    #[inline(always)]
    fn store(self, v: Self::V, s: &mut [f32]) {
        s[..LANES].copy_from_slice(&v);
    }

    #[inline(always)]
    fn add(self, a: Self::V, b: Self::V) -> Self::V {
        core::array::from_fn(|l| a[l] + b[l])
    }

    #[inline(always)]
    fn mul(self, a: Self::V, b: Self::V) -> Self::V {
        core::array::from_fn(|l| a[l] * b[l])
    }

    #[inline(always)]
    fn max(self, a: Self::V, b: Self::V) -> Self::V {
        core::array::from_fn(|l| if a[l] > b[l] { a[l] } else { b[l] })
    }

    #[inline(always)]
    fn fold(self, v: Self::V) -> f32 {
        ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]))
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) use x86::Sse2;
#[cfg(all(target_arch = "x86_64", feature = "std"))]
pub(crate) use x86::{Avx2, Avx2Fma};

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{Simd, LANES};
    use core::arch::x86_64::*;

    /// SSE2, part of the x86_64 baseline: two 4-lane registers.
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) struct Sse2;

    impl Simd for Sse2 {
        type V = (__m128, __m128);

        #[inline(always)]
        fn zero(self) -> Self::V {
            // SAFETY: SSE2 is part of the x86_64 baseline; the intrinsic reads no memory.
            unsafe { (_mm_setzero_ps(), _mm_setzero_ps()) }
        }

        #[inline(always)]
        fn splat(self, x: f32) -> Self::V {
            // SAFETY: SSE2 is part of the x86_64 baseline.
            unsafe { (_mm_set1_ps(x), _mm_set1_ps(x)) }
        }

        #[inline(always)]
        fn load(self, s: &[f32]) -> Self::V {
            let s = &s[..LANES];
            // SAFETY: SSE2 is baseline; `s` holds 8 values, so both unaligned 16-byte loads
            // stay inside it.
            unsafe { (_mm_loadu_ps(s.as_ptr()), _mm_loadu_ps(s.as_ptr().add(4))) }
        }

        #[inline(always)]
        fn store(self, v: Self::V, s: &mut [f32]) {
            let s = &mut s[..LANES];
            // SAFETY: SSE2 is baseline; `s` holds 8 values, exclusively borrowed.
            unsafe {
                _mm_storeu_ps(s.as_mut_ptr(), v.0);
                _mm_storeu_ps(s.as_mut_ptr().add(4), v.1);
            }
        }

        #[inline(always)]
        fn add(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: SSE2 is baseline; register-only arithmetic.
            unsafe { (_mm_add_ps(a.0, b.0), _mm_add_ps(a.1, b.1)) }
        }

        #[inline(always)]
        fn mul(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: SSE2 is baseline; register-only arithmetic.
            unsafe { (_mm_mul_ps(a.0, b.0), _mm_mul_ps(a.1, b.1)) }
        }

        #[inline(always)]
        fn max(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: SSE2 is baseline; register-only arithmetic.
            unsafe { (_mm_max_ps(a.0, b.0), _mm_max_ps(a.1, b.1)) }
        }

        #[inline(always)]
        fn fold(self, v: Self::V) -> f32 {
            // SAFETY: SSE2 is baseline; register-only arithmetic.
            unsafe { fold4(_mm_add_ps(v.0, v.1)) }
        }
    }

    /// `(h0+h2) + (h1+h3)` of `h = [l0+l4, l1+l5, l2+l6, l3+l7]`.
    #[inline(always)]
    unsafe fn fold4(h: __m128) -> f32 {
        let q = _mm_add_ps(h, _mm_movehl_ps(h, h));
        _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps::<1>(q, q)))
    }

    /// The 8 × 8 transpose of [`Simd::transpose8`] in three rounds of shuffles (AVX).
    #[cfg(feature = "std")]
    #[inline(always)]
    unsafe fn transpose8_avx(r: [__m256; LANES]) -> [__m256; LANES] {
        // Interleave pairs of rows, then pairs of pairs, then swap 128-bit halves.
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ]
    }

    /// AVX2 (one 8-lane register); a value exists only where the CPU has it.
    #[cfg(feature = "std")]
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Avx2 {
        _detected: (),
    }

    #[cfg(feature = "std")]
    impl Avx2 {
        /// The token, if this CPU supports AVX2.
        #[inline(always)]
        pub(crate) fn detect() -> Option<Self> {
            std::is_x86_feature_detected!("avx2").then_some(Self { _detected: () })
        }
    }

    #[cfg(feature = "std")]
    #[inline(never)]
    #[target_feature(enable = "avx2")]
    unsafe fn outlined_avx2<P: super::Phase<Avx2>>(s: Avx2, phase: P) -> P::Output {
        phase.run(s)
    }

    #[cfg(feature = "std")]
    impl Simd for Avx2 {
        type V = __m256;

        #[inline(always)]
        fn outlined<P: super::Phase<Self>>(self, phase: P) -> P::Output {
            // SAFETY: an `Avx2` token exists only after AVX2 was detected — the one
            // requirement of a `target_feature(enable = "avx2")` function; `phase` is safe code.
            unsafe { outlined_avx2(self, phase) }
        }

        #[inline(always)]
        fn zero(self) -> Self::V {
            // SAFETY: an `Avx2` token exists only after AVX2 was detected.
            unsafe { _mm256_setzero_ps() }
        }

        #[inline(always)]
        fn splat(self, x: f32) -> Self::V {
            // SAFETY: AVX2 was detected (the token exists).
            unsafe { _mm256_set1_ps(x) }
        }

        #[inline(always)]
        fn load(self, s: &[f32]) -> Self::V {
            let s = &s[..LANES];
            // SAFETY: AVX2 was detected; `s` holds 8 values, so the 32-byte load is in bounds.
            unsafe { _mm256_loadu_ps(s.as_ptr()) }
        }

        #[inline(always)]
        fn store(self, v: Self::V, s: &mut [f32]) {
            let s = &mut s[..LANES];
            // SAFETY: AVX2 was detected; `s` holds 8 values, exclusively borrowed.
            unsafe { _mm256_storeu_ps(s.as_mut_ptr(), v) }
        }

        #[inline(always)]
        fn add(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: AVX2 was detected; register-only arithmetic.
            unsafe { _mm256_add_ps(a, b) }
        }

        #[inline(always)]
        fn mul(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: AVX2 was detected; register-only arithmetic.
            unsafe { _mm256_mul_ps(a, b) }
        }

        #[inline(always)]
        fn max(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: AVX2 was detected; register-only arithmetic.
            unsafe { _mm256_max_ps(a, b) }
        }

        #[inline(always)]
        fn transpose8(self, rows: [Self::V; LANES]) -> [Self::V; LANES] {
            // SAFETY: AVX2 was detected; register-only shuffles.
            unsafe { transpose8_avx(rows) }
        }

        #[inline(always)]
        fn fold(self, v: Self::V) -> f32 {
            // SAFETY: AVX2 was detected; register-only arithmetic.
            unsafe {
                fold4(_mm_add_ps(
                    _mm256_castps256_ps128(v),
                    _mm256_extractf128_ps::<1>(v),
                ))
            }
        }
    }

    /// AVX2 with FMA: [`Avx2`]'s primitives, plus a fused [`Simd::mul_add_native`]. A value
    /// exists only where the CPU reports both (FMA is a CPUID bit of its own).
    #[cfg(feature = "std")]
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Avx2Fma {
        avx2: Avx2,
    }

    #[cfg(feature = "std")]
    impl Avx2Fma {
        /// The token, if this CPU supports AVX2 and FMA.
        #[inline(always)]
        pub(crate) fn detect() -> Option<Self> {
            let avx2 = Avx2::detect()?;
            std::is_x86_feature_detected!("fma").then_some(Self { avx2 })
        }
    }

    #[cfg(feature = "std")]
    #[inline(never)]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn outlined_avx2_fma<P: super::Phase<Avx2Fma>>(s: Avx2Fma, phase: P) -> P::Output {
        phase.run(s)
    }

    #[cfg(feature = "std")]
    impl Simd for Avx2Fma {
        type V = __m256;

        #[inline(always)]
        fn outlined<P: super::Phase<Self>>(self, phase: P) -> P::Output {
            // SAFETY: an `Avx2Fma` token exists only after AVX2 and FMA were detected — the
            // requirements of the `target_feature` function; `phase` is safe code.
            unsafe { outlined_avx2_fma(self, phase) }
        }

        #[inline(always)]
        fn zero(self) -> Self::V {
            self.avx2.zero()
        }

        #[inline(always)]
        fn splat(self, x: f32) -> Self::V {
            self.avx2.splat(x)
        }

        #[inline(always)]
        fn load(self, s: &[f32]) -> Self::V {
            self.avx2.load(s)
        }

        #[inline(always)]
        fn store(self, v: Self::V, s: &mut [f32]) {
            self.avx2.store(v, s)
        }

        #[inline(always)]
        fn add(self, a: Self::V, b: Self::V) -> Self::V {
            self.avx2.add(a, b)
        }

        #[inline(always)]
        fn mul(self, a: Self::V, b: Self::V) -> Self::V {
            self.avx2.mul(a, b)
        }

        #[inline(always)]
        fn max(self, a: Self::V, b: Self::V) -> Self::V {
            self.avx2.max(a, b)
        }

        #[inline(always)]
        fn transpose8(self, rows: [Self::V; LANES]) -> [Self::V; LANES] {
            self.avx2.transpose8(rows)
        }

        #[inline(always)]
        fn fold(self, v: Self::V) -> f32 {
            self.avx2.fold(v)
        }

        #[inline(always)]
        fn mul_add_native(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: the token exists only after FMA was detected; register-only arithmetic.
            unsafe { _mm256_fmadd_ps(a, b, acc) }
        }
    }
}

#[cfg(target_arch = "aarch64")]
pub(crate) use neon::Neon;
#[cfg(target_arch = "aarch64")]
pub(crate) use neon_fma::NeonFma;

#[cfg(target_arch = "aarch64")]
mod neon {
    //! NEON, part of the aarch64 baseline: two 4-lane registers, the layout of `Sse2`. The
    //! primitives are chosen for x86's bits, not NEON's idioms: `max` is a compare and a select
    //! (`vmaxq_f32` returns NaN for a NaN operand and orders `-0.0 < +0.0`, where `maxps`
    //! returns the second operand), and `add`/`mul` are never fused.
    use super::{Simd, LANES};
    use core::arch::aarch64::*;

    /// NEON's 128-bit vectors; every aarch64 CPU has them, so no detection.
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) struct Neon;

    impl Simd for Neon {
        type V = (float32x4_t, float32x4_t);

        #[inline(always)]
        fn zero(self) -> Self::V {
            // SAFETY: NEON is part of the aarch64 baseline; register-only.
            unsafe { (vdupq_n_f32(0.0), vdupq_n_f32(0.0)) }
        }

        #[inline(always)]
        fn splat(self, x: f32) -> Self::V {
            // SAFETY: NEON is part of the aarch64 baseline; register-only.
            unsafe { (vdupq_n_f32(x), vdupq_n_f32(x)) }
        }

        #[inline(always)]
        fn load(self, s: &[f32]) -> Self::V {
            let s = &s[..LANES];
            // SAFETY: NEON is baseline; `s` holds 8 values, so both 16-byte loads (which need
            // only f32 alignment) stay inside it.
            unsafe { (vld1q_f32(s.as_ptr()), vld1q_f32(s.as_ptr().add(4))) }
        }

        #[inline(always)]
        fn store(self, v: Self::V, s: &mut [f32]) {
            let s = &mut s[..LANES];
            // SAFETY: NEON is baseline; `s` holds 8 values, exclusively borrowed.
            unsafe {
                vst1q_f32(s.as_mut_ptr(), v.0);
                vst1q_f32(s.as_mut_ptr().add(4), v.1);
            }
        }

        #[inline(always)]
        fn add(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: NEON is baseline; register-only arithmetic.
            unsafe { (vaddq_f32(a.0, b.0), vaddq_f32(a.1, b.1)) }
        }

        #[inline(always)]
        fn mul(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: NEON is baseline; register-only arithmetic.
            unsafe { (vmulq_f32(a.0, b.0), vmulq_f32(a.1, b.1)) }
        }

        #[inline(always)]
        fn max(self, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: NEON is baseline; register-only. `a > b` is false for NaN and for
            // `±0.0` against `∓0.0`, so those lanes take `b`, as `maxps` does.
            unsafe {
                (
                    vbslq_f32(vcgtq_f32(a.0, b.0), a.0, b.0),
                    vbslq_f32(vcgtq_f32(a.1, b.1), a.1, b.1),
                )
            }
        }

        #[inline(always)]
        fn fold(self, v: Self::V) -> f32 {
            // SAFETY: NEON is baseline; register-only arithmetic.
            unsafe {
                // h = [l0+l4, l1+l5, l2+l6, l3+l7]; p = [h0+h2, h1+h3]; then p0 + p1.
                let h = vaddq_f32(v.0, v.1);
                let p = vadd_f32(vget_low_f32(h), vget_high_f32(h));
                vget_lane_f32::<0>(p) + vget_lane_f32::<1>(p)
            }
        }
    }
}

/// Asks the CPU to bring the cache lines of `s` into the second-level cache (a hint: no effect
/// on any value, and nothing on targets without one), so that memory latency overlaps the
/// arithmetic; not into L1, where rows needed later would evict the tile in use.
#[inline(always)]
pub(crate) fn prefetch_l2(s: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    prefetch::<{ core::arch::x86_64::_MM_HINT_T1 }>(s);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = s;
}

/// [`prefetch_l2`] into the first-level cache: for a stream read once, soon, and in order (a
/// one-row product's weight).
#[inline(always)]
pub(crate) fn prefetch_l1(s: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(s);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = s;
}

/// One prefetch with `HINT` per 16 values (a 64-byte line) of `s`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch<const HINT: i32>(s: &[f32]) {
    for line in s.chunks(16) {
        // SAFETY: SSE is part of the x86_64 baseline; a prefetch reads no value and cannot
        // fault, and the address is inside `s`.
        unsafe { core::arch::x86_64::_mm_prefetch::<HINT>(line.as_ptr().cast()) }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon_fma {
    //! [`Neon`] with a fused [`Simd::mul_add_native`] (`vfmaq_f32`, part of the aarch64
    //! baseline), for the kernels whose native mode fuses on aarch64.
    use super::{Neon, Simd, LANES};
    use core::arch::aarch64::*;

    /// NEON whose native multiply-add is fused; every other primitive is [`Neon`]'s.
    #[derive(Debug, Clone, Copy, Default)]
    pub(crate) struct NeonFma;

    impl Simd for NeonFma {
        type V = (float32x4_t, float32x4_t);

        #[inline(always)]
        fn zero(self) -> Self::V {
            Neon.zero()
        }

        #[inline(always)]
        fn splat(self, x: f32) -> Self::V {
            Neon.splat(x)
        }

        #[inline(always)]
        fn load(self, s: &[f32]) -> Self::V {
            Neon.load(s)
        }

        #[inline(always)]
        fn store(self, v: Self::V, s: &mut [f32]) {
            Neon.store(v, s)
        }

        #[inline(always)]
        fn add(self, a: Self::V, b: Self::V) -> Self::V {
            Neon.add(a, b)
        }

        #[inline(always)]
        fn mul(self, a: Self::V, b: Self::V) -> Self::V {
            Neon.mul(a, b)
        }

        #[inline(always)]
        fn max(self, a: Self::V, b: Self::V) -> Self::V {
            Neon.max(a, b)
        }

        #[inline(always)]
        fn fold(self, v: Self::V) -> f32 {
            Neon.fold(v)
        }

        #[inline(always)]
        fn transpose8(self, rows: [Self::V; LANES]) -> [Self::V; LANES] {
            Neon.transpose8(rows)
        }

        #[inline(always)]
        fn mul_add_native(self, acc: Self::V, a: Self::V, b: Self::V) -> Self::V {
            // SAFETY: NEON (with its fused multiply-add) is part of the aarch64 baseline;
            // register-only arithmetic.
            unsafe { (vfmaq_f32(acc.0, a.0, b.0), vfmaq_f32(acc.1, a.1, b.1)) }
        }
    }
}
