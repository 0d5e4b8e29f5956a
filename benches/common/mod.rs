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

/// The sum of `xs` in one pass, the fastest plain read this crate knows of on the running CPU:
/// one core's read bandwidth, the reference for the memory-bound benches (`peak`'s streams, and
/// each decode group's stream over its own K and V). Whole 64-byte lines in 512-bit loads
/// where the CPU has AVX-512F ([`stream_sum_avx512`]), else 256-bit loads where it has AVX2,
/// else a 16-lane loop. (On the Zen 5 the benches ran on, the 512-bit read streamed 8–19 %
/// faster than the AVX2 one from 64 MiB, the same from 256 MiB: a line per load keeps more
/// lines in flight from the same out-of-order window.)
#[allow(dead_code)] // only the memory-bound benches (peak, sdpa_schedule) stream
pub fn stream_sum(xs: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F was detected just above.
            return unsafe { stream_sum_avx512(xs) };
        }
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 was detected just above.
            return unsafe { stream_sum_avx2(xs) };
        }
    }
    let mut acc = [0.0f32; 16];
    for chunk in xs.chunks_exact(16) {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += x;
        }
    }
    acc.iter().sum::<f32>() + xs.chunks_exact(16).remainder().iter().sum::<f32>()
}

/// The sum of every slice of `parts` by two cores at once, each streaming its half of each
/// (the front halves here, the back halves on a scoped thread started per call: a few tens of
/// microseconds against milliseconds of streaming): two cores' read bandwidth, the reference
/// for the two-task one-row products and decode steps.
#[allow(dead_code)] // only the memory-bound benches (peak, sdpa_schedule) stream
pub fn stream_sum_two_cores(parts: &[&[f32]]) -> f32 {
    let halves = |back: bool| {
        parts.iter().map(move |part| {
            let (front, rest) = part.split_at(part.len() / 2);
            if back {
                rest
            } else {
                front
            }
        })
    };
    std::thread::scope(|scope| {
        let other = scope.spawn(|| halves(true).map(stream_sum).sum::<f32>());
        let mine = halves(false).map(stream_sum).sum::<f32>();
        mine + other.join().unwrap_or(0.0)
    })
}

/// The sum of `xs`: the values before its first 64-byte line and after its last whole
/// 256-byte block one by one, the lines between in 512-bit loads into four accumulators,
/// four lines per step (inline assembly: AVX-512's intrinsics are newer than the crate's
/// minimum Rust).
///
/// # Safety
///
/// The CPU must have AVX-512F.
#[cfg(target_arch = "x86_64")]
#[allow(dead_code)] // only the memory-bound benches (peak, sdpa_schedule) stream
unsafe fn stream_sum_avx512(xs: &[f32]) -> f32 {
    let skip = xs.as_ptr().align_offset(64).min(xs.len());
    let (head, rest) = xs.split_at(skip);
    let (body, tail) = rest.split_at(rest.len() - rest.len() % 64);
    let mut lanes = [0.0f32; 16];
    if !body.is_empty() {
        // SAFETY: the caller has AVX-512F. The loop reads `body` in 256-byte steps from its
        // first value (on a 64-byte line) to its end (a multiple of 256 bytes on), so every
        // load is inside it and aligned; it writes the 16 values of `lanes`. Every vector
        // register it uses is call-clobbered (`clobber_abi`).
        unsafe {
            core::arch::asm!(
                "vpxord zmm0, zmm0, zmm0",
                "vpxord zmm1, zmm1, zmm1",
                "vpxord zmm2, zmm2, zmm2",
                "vpxord zmm3, zmm3, zmm3",
                "2:",
                "vaddps zmm0, zmm0, [rsi]",
                "vaddps zmm1, zmm1, [rsi + 64]",
                "vaddps zmm2, zmm2, [rsi + 128]",
                "vaddps zmm3, zmm3, [rsi + 192]",
                "add rsi, 256",
                "cmp rsi, rdx",
                "jb 2b",
                "vaddps zmm0, zmm0, zmm1",
                "vaddps zmm2, zmm2, zmm3",
                "vaddps zmm0, zmm0, zmm2",
                "vmovups [rdi], zmm0",
                inout("rsi") body.as_ptr() => _,
                in("rdx") body.as_ptr_range().end,
                in("rdi") lanes.as_mut_ptr(),
                clobber_abi("C"),
                options(nostack),
            );
        }
    }
    head.iter().chain(tail).sum::<f32>() + lanes.iter().sum::<f32>()
}

/// The sum of `xs` over four independent 8-lane accumulators (AVX2), named so they stay in
/// registers.
///
/// # Safety
///
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(dead_code)] // only the memory-bound benches (peak, sdpa_schedule) stream
unsafe fn stream_sum_avx2(xs: &[f32]) -> f32 {
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
    out.iter().sum::<f32>() + xs.chunks_exact(32).remainder().iter().sum::<f32>()
}
