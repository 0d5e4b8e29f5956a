//! The one way kernels open a region: [`parallel_chunks`].

use core::ops::Range;

use super::KernelError;
use crate::schedule::{Schedule, ScheduleExt, Sequential};

/// Runs `body(units, chunk)` over the output `out`, split into units of `unit_len` elements,
/// under `schedule` — or inline on the caller when the call holds less than `min_work` units of
/// work (`work` is the whole call's, in multiply-adds), so small calls pay no region.
///
/// `chunk` is exactly `out[units.start * unit_len .. units.end * unit_len]`, exclusively
/// borrowed, so kernels write their disjoint outputs without `unsafe`. Ranges have a grain of
/// one unit; `op` names the region in trace events (`ScheduleRegion { op, .. }`). An inline call
/// runs as [`Sequential`] does (one `body(0..n)`) and emits nothing. An empty output calls
/// nothing.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::kernels::parallel_chunks;
/// use skainet_schedule::Sequential;
/// let mut out = [0.0f32; 6];
/// parallel_chunks("fill", &Sequential, &mut out, 3, 6, 1 << 20, &|units, chunk| {
///     for (k, x) in chunk.iter_mut().enumerate() {
///         *x = (units.start * 3 + k) as f32;
///     }
/// })
/// .unwrap();
/// assert_eq!(out, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
/// # }
/// ```
///
/// # Errors
///
/// [`KernelError::DisjointSplit`] when `out` is not a whole number of units, or when the
/// schedule broke its contract (then the offending chunk's body was not called).
pub fn parallel_chunks<T: Send>(
    op: &str,
    schedule: &dyn Schedule,
    out: &mut [T],
    unit_len: usize,
    work: u64,
    min_work: u64,
    body: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) -> Result<(), KernelError> {
    if out.is_empty() && unit_len == 0 {
        return Ok(());
    }
    if work < min_work {
        Sequential.for_chunks_mut(op, out, unit_len, 1, body)?;
    } else {
        schedule.for_chunks_mut(op, out, unit_len, 1, body)?;
    }
    Ok(())
}
