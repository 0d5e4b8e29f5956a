//! What every bench shares: deterministic inputs and the list of schedules to compare.

use skainet_schedule::Tensor;
use skainet_schedule::{Schedule, Sequential};

/// Deterministic inputs in [-1, 1] (a 32-bit LCG; no dependency).
pub fn tensor(shape: Vec<usize>, seed: u32) -> Tensor {
    let mut t = Tensor::zeros(shape).expect("bench shapes are small");
    fill(&mut t, seed);
    t
}

/// [`tensor`]'s values in a tensor whose memory was advised for transparent huge pages.
#[allow(dead_code)] // only the decode benches
pub fn tensor_in_huge_pages(shape: Vec<usize>, seed: u32) -> Tensor {
    let mut t = Tensor::zeros_in_huge_pages(shape).expect("bench shapes are small");
    fill(&mut t, seed);
    t
}

fn fill(t: &mut Tensor, seed: u32) {
    let mut state = seed.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    for x in t.data_mut() {
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        *x = (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0;
    }
}

/// `Sequential`, plus `hardware()` with `parallel` and `RayonSchedule` with `rayon`.
pub fn schedules() -> Vec<(&'static str, Box<dyn Schedule>)> {
    #[allow(unused_mut)]
    let mut list: Vec<(&'static str, Box<dyn Schedule>)> =
        vec![("sequential", Box::new(Sequential))];
    #[cfg(feature = "parallel")]
    list.push(("hardware", Box::new(skainet_schedule::hardware())));
    #[cfg(feature = "rayon")]
    list.push(("rayon", Box::new(skainet_schedule::RayonSchedule::global())));
    list
}

/// The sum of `xs` over four independent 8-lane accumulators (AVX2), named so they stay in
/// registers: one core's read bandwidth from memory, the reference for the memory-bound benches
/// (`peak`'s streams, and each decode group's stream over its own K and V).
///
/// # Safety
///
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(dead_code)] // only the memory-bound benches (peak, sdpa_schedule) stream
pub unsafe fn stream_sum_avx2(xs: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let (mut a0, mut a1, mut a2, mut a3) = (
        _mm256_setzero_ps(),
        _mm256_setzero_ps(),
        _mm256_setzero_ps(),
        _mm256_setzero_ps(),
    );
    for block in xs.chunks_exact(32) {
        let p = block.as_ptr();
        // SAFETY: `block` holds 32 values: the four 8-value loads stay inside it.
        unsafe {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p.add(8)));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p.add(16)));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p.add(24)));
        }
    }
    let total = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    let mut out = [0.0f32; 8];
    // SAFETY: `out` holds 8 values.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), total) };
    out.iter().sum()
}
