//! The inner loops, compiled more than once, chosen at run time through a [`KernelRegistry`].
//!
//! Every variant is the *same* portable source ([`attend_head`], the matmul rows, the conv
//! plane) compiled for a different instruction set: the portable one for the build's baseline
//! target, and — on x86/x86_64 with `std` — one with AVX2 enabled, registered with a higher
//! priority and available when the CPU reports AVX2. Since the source never fuses `a*b+c` and
//! fixes its lane structure, every variant returns the same bits; only the speed differs.
//! The ops look the variant up on every call ([`selected_kernels`]), so the registry really
//! decides what runs.

use super::attend::{attend_head, Head};
use super::conv::{conv_plane, ConvPlane};
use super::lanes::accumulate_rows;
use crate::registry::{KernelProvider, KernelRegistry};
use crate::sync::{Arc, Once};

type AttendFn = fn(&Head<'_>, &mut [f32], &mut [f32]);
type MatmulRowsFn = fn(&[f32], &[f32], usize, usize, &mut [f32]);
type ConvPlaneFn = fn(&ConvPlane<'_>, &mut [f32]);

/// One compilation of the CPU inner loops: attention per (batch, head), matmul rows, and a conv
/// output plane. Providers of [`cpu_kernels`].
pub struct CpuKernels {
    name: &'static str,
    priority: i32,
    available: fn() -> bool,
    pub(crate) attend: AttendFn,
    pub(crate) matmul_rows: MatmulRowsFn,
    pub(crate) conv_plane: ConvPlaneFn,
}

impl core::fmt::Debug for CpuKernels {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CpuKernels")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .finish_non_exhaustive()
    }
}

impl KernelProvider for CpuKernels {
    fn name(&self) -> &str {
        self.name
    }

    fn priority(&self) -> i32 {
        self.priority
    }

    fn is_available(&self) -> bool {
        (self.available)()
    }
}

/// `out[r] = a[r] · b` for each row `r` of `a` (`k` values each), `b` being `[k, n]`:
/// `out[r][c] = ((0 + a[r][0]·b[0][c]) + a[r][1]·b[1][c]) + …`.
#[inline(always)]
fn matmul_rows(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut [f32]) {
    out.fill(0.0);
    if k == 0 || n == 0 {
        return;
    }
    for (a_row, out_row) in a.chunks_exact(k).zip(out.chunks_exact_mut(n)) {
        accumulate_rows(out_row, a_row, b, n);
    }
}

fn always() -> bool {
    true
}

fn portable_attend(h: &Head<'_>, out: &mut [f32], scores: &mut [f32]) {
    attend_head(h, out, scores);
}

fn portable_matmul_rows(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut [f32]) {
    matmul_rows(a, b, k, n, out);
}

fn portable_conv_plane(p: &ConvPlane<'_>, out: &mut [f32]) {
    conv_plane(p, out);
}

impl CpuKernels {
    /// The variant compiled for the build's baseline target; available everywhere.
    pub fn portable() -> Self {
        Self {
            name: "portable",
            priority: 0,
            available: always,
            attend: portable_attend,
            matmul_rows: portable_matmul_rows,
            conv_plane: portable_conv_plane,
        }
    }
}

#[cfg(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64")))]
mod x86 {
    //! The portable source compiled with AVX2. Each entry point re-checks the CPU (a cached
    //! atomic load) and falls back to the portable code, so calling one is always sound.
    use super::*;

    fn has_avx2() -> bool {
        std::is_x86_feature_detected!("avx2")
    }

    #[target_feature(enable = "avx2")]
    unsafe fn attend_avx2(h: &Head<'_>, out: &mut [f32], scores: &mut [f32]) {
        attend_head(h, out, scores);
    }

    #[target_feature(enable = "avx2")]
    unsafe fn matmul_rows_avx2(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut [f32]) {
        matmul_rows(a, b, k, n, out);
    }

    #[target_feature(enable = "avx2")]
    unsafe fn conv_plane_avx2(p: &ConvPlane<'_>, out: &mut [f32]) {
        conv_plane(p, out);
    }

    fn attend(h: &Head<'_>, out: &mut [f32], scores: &mut [f32]) {
        if has_avx2() {
            // SAFETY: the CPU supports AVX2 (checked just above), the one requirement of a
            // `target_feature(enable = "avx2")` function; its body is safe code.
            unsafe { attend_avx2(h, out, scores) }
        } else {
            attend_head(h, out, scores);
        }
    }

    fn matmul(a: &[f32], b: &[f32], k: usize, n: usize, out: &mut [f32]) {
        if has_avx2() {
            // SAFETY: AVX2 is present (checked just above); the body is safe code.
            unsafe { matmul_rows_avx2(a, b, k, n, out) }
        } else {
            matmul_rows(a, b, k, n, out);
        }
    }

    fn conv(p: &ConvPlane<'_>, out: &mut [f32]) {
        if has_avx2() {
            // SAFETY: AVX2 is present (checked just above); the body is safe code.
            unsafe { conv_plane_avx2(p, out) }
        } else {
            conv_plane(p, out);
        }
    }

    pub(super) fn avx2() -> CpuKernels {
        CpuKernels {
            name: "avx2",
            priority: 10,
            available: has_avx2,
            attend,
            matmul_rows: matmul,
            conv_plane: conv,
        }
    }
}

static REGISTRY: Once<KernelRegistry<CpuKernels>> = Once::new();

/// The registry of CPU kernel variants, filled on first use with `portable` (priority 0) and,
/// on x86/x86_64 with `std`, `avx2` (priority 10, available when the CPU has AVX2).
///
/// ```
/// use skainet_schedule::kernels::cpu_kernels;
/// use skainet_schedule::registry::KernelProvider;
/// assert!(cpu_kernels().find("portable").is_some());
/// ```
pub fn cpu_kernels() -> &'static KernelRegistry<CpuKernels> {
    REGISTRY.call_once(|| {
        let registry = KernelRegistry::new();
        registry.register(Arc::new(CpuKernels::portable()));
        #[cfg(all(feature = "std", any(target_arch = "x86", target_arch = "x86_64")))]
        registry.register(Arc::new(x86::avx2()));
        registry
    })
}

/// The variant the kernels run now: the highest-priority available provider of
/// [`cpu_kernels`].
pub fn selected_kernels() -> Arc<CpuKernels> {
    cpu_kernels()
        .best_available()
        .unwrap_or_else(|| Arc::new(CpuKernels::portable()))
}
