//! The fixed-order lane arithmetic the inner loops are made of.
//!
//! A reduction keeps [`LANES`] = 8 independent accumulators: element `d` of a dot product goes
//! to lane `d % 8` in increasing `d` (a ragged tail is a zero-padded last chunk), and the lanes
//! fold in a fixed tree, `((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))`. That order is the contract;
//! [`Simd`] is how it is executed. Each backend implements the same primitives — lane-wise IEEE
//! `+` and `*` (never fused) and that fold — so the generic kernels compiled on any backend
//! return the same bits: [`Scalar`] (plain Rust, every target), `Sse2` (x86_64 baseline) and
//! `Avx2` (detected at run time). Explicit vectors, rather than arrays left to the
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

    /// Runs `f` in a function of its own, compiled for this backend. The attention kernel
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

    /// The first `s.len() % 8` values after the last whole chunk, zero-padded to 8 lanes.
    #[inline(always)]
    fn load_tail(self, s: &[f32]) -> Self::V {
        let mut pad = [0.0f32; LANES];
        let full = s.len() - s.len() % LANES;
        pad[..s.len() - full].copy_from_slice(&s[full..]);
        self.load(&pad)
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

#[cfg(all(target_arch = "x86_64", feature = "std"))]
pub(crate) use x86::Avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) use x86::Sse2;

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
}

/// `R × C` dot products of the rows `q[r·len..][..len]` with the rows `k[c·len..][..len]`,
/// in the lane order above; each result is the same whatever `R` and `C` (they only share
/// loads).
#[inline(always)]
pub(crate) fn dots<S: Simd, const R: usize, const C: usize>(
    s: S,
    q: &[f32],
    k: &[f32],
    len: usize,
) -> [[f32; C]; R] {
    let full = len - len % LANES;
    // Every row slice has length `full`, so the loop condition proves each chunk in bounds.
    let qf: [&[f32]; R] = core::array::from_fn(|r| &q[r * len..r * len + full]);
    let kf: [&[f32]; C] = core::array::from_fn(|t| &k[t * len..t * len + full]);
    let mut acc = [[s.zero(); C]; R];
    let mut c = 0;
    while c + LANES <= full {
        let kv: [S::V; C] = core::array::from_fn(|t| s.load(&kf[t][c..c + LANES]));
        for r in 0..R {
            let qv = s.load(&qf[r][c..c + LANES]);
            for t in 0..C {
                acc[r][t] = s.mul_add(acc[r][t], qv, kv[t]);
            }
        }
        c += LANES;
    }
    if full < len {
        let kv: [S::V; C] = core::array::from_fn(|t| s.load_tail(&k[t * len..(t + 1) * len]));
        for r in 0..R {
            let qv = s.load_tail(&q[r * len..(r + 1) * len]);
            for t in 0..C {
                acc[r][t] = s.mul_add(acc[r][t], qv, kv[t]);
            }
        }
    }
    let mut out = [[0.0f32; C]; R];
    for r in 0..R {
        for t in 0..C {
            out[r][t] = s.fold(acc[r][t]);
        }
    }
    out
}

/// [`dots`] for four rows and two keys, with the eight accumulators as named locals: the
/// generic array form ends up on the stack inside the large attention function.
#[inline(always)]
pub(crate) fn dots_4x2<S: Simd>(s: S, q: &[f32], k: &[f32], len: usize) -> [[f32; 2]; 4] {
    let full = len - len % LANES;
    let (q0, q1, q2, q3) = (
        &q[..full],
        &q[len..len + full],
        &q[2 * len..2 * len + full],
        &q[3 * len..3 * len + full],
    );
    let (k0, k1) = (&k[..full], &k[len..len + full]);
    let z = s.zero();
    let (mut a00, mut a01, mut a10, mut a11) = (z, z, z, z);
    let (mut a20, mut a21, mut a30, mut a31) = (z, z, z, z);
    let mut c = 0;
    while c + LANES <= full {
        let (x0, x1) = (s.load(&k0[c..c + LANES]), s.load(&k1[c..c + LANES]));
        let y = s.load(&q0[c..c + LANES]);
        a00 = s.mul_add(a00, y, x0);
        a01 = s.mul_add(a01, y, x1);
        let y = s.load(&q1[c..c + LANES]);
        a10 = s.mul_add(a10, y, x0);
        a11 = s.mul_add(a11, y, x1);
        let y = s.load(&q2[c..c + LANES]);
        a20 = s.mul_add(a20, y, x0);
        a21 = s.mul_add(a21, y, x1);
        let y = s.load(&q3[c..c + LANES]);
        a30 = s.mul_add(a30, y, x0);
        a31 = s.mul_add(a31, y, x1);
        c += LANES;
    }
    if full < len {
        let (x0, x1) = (s.load_tail(&k[..len]), s.load_tail(&k[len..2 * len]));
        let y = s.load_tail(&q[..len]);
        a00 = s.mul_add(a00, y, x0);
        a01 = s.mul_add(a01, y, x1);
        let y = s.load_tail(&q[len..2 * len]);
        a10 = s.mul_add(a10, y, x0);
        a11 = s.mul_add(a11, y, x1);
        let y = s.load_tail(&q[2 * len..3 * len]);
        a20 = s.mul_add(a20, y, x0);
        a21 = s.mul_add(a21, y, x1);
        let y = s.load_tail(&q[3 * len..4 * len]);
        a30 = s.mul_add(a30, y, x0);
        a31 = s.mul_add(a31, y, x1);
    }
    [
        [s.fold(a00), s.fold(a01)],
        [s.fold(a10), s.fold(a11)],
        [s.fold(a20), s.fold(a21)],
        [s.fold(a30), s.fold(a31)],
    ]
}

/// `Σ xs[i]` in the lane order above.
#[inline(always)]
pub(crate) fn sum<S: Simd>(s: S, xs: &[f32]) -> f32 {
    let full = xs.len() - xs.len() % LANES;
    let mut acc = s.zero();
    let mut c = 0;
    while c < full {
        acc = s.add(acc, s.load(&xs[c..]));
        c += LANES;
    }
    if full < xs.len() {
        acc = s.add(acc, s.load_tail(xs));
    }
    s.fold(acc)
}

/// [`accumulate_rows`] for `R` output rows `out[r·len..][..len]` at once, with weights
/// `w[r·w_stride + j]` over the same keys `j < n`: each element gets exactly the additions
/// `accumulate_rows` would give it (`((out + w0·r0) + w1·r1) + …` in increasing `j`). Two
/// vectors of each row stay in registers while `j` runs, so every load of `rows` serves all
/// `R` rows.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R` unroll into registers
pub(crate) fn accumulate_block<S: Simd, const R: usize>(
    s: S,
    out: &mut [f32],
    w: &[f32],
    w_stride: usize,
    n: usize,
    rows: &[f32],
    len: usize,
) {
    let wr: [&[f32]; R] = core::array::from_fn(|r| &w[r * w_stride..r * w_stride + n]);
    let rows = &rows[..n * len];
    let full = len - len % LANES;
    let mut c = 0;
    // As many chunks per pass over `rows` as the registers hold: a lone row keeps up to 8.
    if R == 1 {
        while c + 8 * LANES <= full {
            accumulate_pass::<S, R, 8>(s, out, &wr, rows, len, c);
            c += 8 * LANES;
        }
        while c + 4 * LANES <= full {
            accumulate_pass::<S, R, 4>(s, out, &wr, rows, len, c);
            c += 4 * LANES;
        }
    }
    while c + 2 * LANES <= full {
        accumulate_pass::<S, R, 2>(s, out, &wr, rows, len, c);
        c += 2 * LANES;
    }
    while c < full {
        accumulate_pass::<S, R, 1>(s, out, &wr, rows, len, c);
        c += LANES;
    }
    if full < len {
        for r in 0..R {
            let o = &mut out[r * len + full..(r + 1) * len];
            for j in 0..n {
                let wj = wr[r][j];
                for (x, &v) in o.iter_mut().zip(&rows[j * len + full..(j + 1) * len]) {
                    *x += wj * v;
                }
            }
        }
    }
}

/// One pass of [`accumulate_block`] over the `W` chunks starting at element `c`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over `0..R`, `0..W` unroll into registers
fn accumulate_pass<S: Simd, const R: usize, const W: usize>(
    s: S,
    out: &mut [f32],
    wr: &[&[f32]; R],
    rows: &[f32],
    len: usize,
    c: usize,
) {
    let n = wr[0].len();
    let mut acc = [[s.zero(); W]; R];
    for r in 0..R {
        for h in 0..W {
            acc[r][h] = s.load(&out[r * len + c + h * LANES..r * len + c + (h + 1) * LANES]);
        }
    }
    for j in 0..n {
        let v = &rows[j * len + c..j * len + c + W * LANES];
        let vv: [S::V; W] = core::array::from_fn(|h| s.load(&v[h * LANES..(h + 1) * LANES]));
        for r in 0..R {
            let p = s.splat(wr[r][j]);
            for h in 0..W {
                acc[r][h] = s.mul_add(acc[r][h], p, vv[h]);
            }
        }
    }
    for r in 0..R {
        for h in 0..W {
            let o = &mut out[r * len + c + h * LANES..r * len + c + (h + 1) * LANES];
            s.store(acc[r][h], o);
        }
    }
}

/// `out[d] += Σ_j w[j]·rows[j*stride + d]` for `j` in increasing order, element by element:
/// every `out[d]` is `((out[d] + w0·r0[d]) + w1·r1[d]) + …`, whatever the blocking below.
/// Element-wise with no reduction across lanes, so it is left to the loop vectoriser.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops are the shape the vectoriser wants
pub(crate) fn accumulate_rows(out: &mut [f32], w: &[f32], rows: &[f32], stride: usize) {
    let len = out.len();
    let mut j = 0;
    while j + 4 <= w.len() {
        let (w0, w1, w2, w3) = (w[j], w[j + 1], w[j + 2], w[j + 3]);
        let base = j * stride;
        let r0 = &rows[base..base + len];
        let r1 = &rows[base + stride..base + stride + len];
        let r2 = &rows[base + 2 * stride..base + 2 * stride + len];
        let r3 = &rows[base + 3 * stride..base + 3 * stride + len];
        for d in 0..len {
            out[d] = (((out[d] + w0 * r0[d]) + w1 * r1[d]) + w2 * r2[d]) + w3 * r3[d];
        }
        j += 4;
    }
    while j < w.len() {
        let wj = w[j];
        let r = &rows[j * stride..j * stride + len];
        for d in 0..len {
            out[d] += wj * r[d];
        }
        j += 1;
    }
}

/// Scales `row` in place by `scale`, adds `mask[..row.len()]` if given, and returns the largest
/// result (`-inf` for an empty row): lane maxima over whole chunks with [`Simd::max`], then the
/// eight lanes and the ragged tail in order, each step `if x > m { x } else { m }`.
#[inline(always)]
pub(crate) fn scale_mask_max<S: Simd>(
    s: S,
    row: &mut [f32],
    scale: f32,
    mask: Option<&[f32]>,
) -> f32 {
    let len = row.len();
    let full = len - len % LANES;
    let k = s.splat(scale);
    let mut m = s.splat(f32::NEG_INFINITY);
    let mut c = 0;
    while c + LANES <= full {
        let chunk = &mut row[c..c + LANES];
        let mut v = s.mul(s.load(chunk), k);
        if let Some(mask) = mask {
            v = s.add(v, s.load(&mask[c..c + LANES]));
        }
        s.store(v, chunk);
        m = s.max(v, m);
        c += LANES;
    }
    let mut lanes = [0.0f32; LANES];
    s.store(m, &mut lanes);
    let mut top = f32::NEG_INFINITY;
    for x in lanes {
        top = if x > top { x } else { top };
    }
    for (d, x) in row[full..].iter_mut().enumerate() {
        *x *= scale;
        if let Some(mask) = mask {
            *x += mask[full + d];
        }
        top = if *x > top { *x } else { top };
    }
    top
}
