//! The one way kernels open a region: [`parallel_chunks`], sized by a [`Work`].

use super::KernelError;
use crate::schedule::{Schedule, ScheduleExt, Sequential, TryChunkBody};

/// How much work a kernel call holds, and from how much it opens a region: named fields, so
/// the two numbers cannot be swapped at a call site.
///
/// ```
/// use skainet_schedule::Work;
/// assert!(Work { total: 1 << 20, fork_from: 1 << 16 }.forks());
/// assert!(!Work { total: 100, fork_from: 1 << 16 }.forks());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    /// The whole call's work, in multiply-adds (saturating: an estimate, not an index).
    pub total: u64,
    /// The least work that opens a region; below it the call runs inline on the caller.
    pub fork_from: u64,
}

impl Work {
    /// Whether a call of this size opens a region.
    pub fn forks(&self) -> bool {
        self.total >= self.fork_from
    }
}

/// Runs `body(units, chunk)` over the output `out`, split into units of `unit_len` elements,
/// under `schedule` — or inline on the caller when [`Work::forks`] says the call is too small
/// to pay for a region.
///
/// `chunk` is exactly `out[units.start * unit_len .. units.end * unit_len]`, exclusively
/// borrowed, so kernels write their disjoint outputs without `unsafe`. Ranges have a grain of
/// one unit; `op` names the region in trace events (`ScheduleRegion { op, .. }`). An inline call
/// runs as [`Sequential`] does (one `body(0..n)`) and emits nothing. An empty output calls
/// nothing. The first `Err` of a body skips the chunks not yet started and is returned.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{parallel_chunks, Sequential, Work};
/// let mut out = [0.0f32; 6];
/// let work = Work { total: 6, fork_from: 1 << 20 };
/// parallel_chunks("fill", &Sequential, &mut out, 3, work, &|units, chunk| {
///     for (k, x) in chunk.iter_mut().enumerate() {
///         *x = (units.start * 3 + k) as f32;
///     }
///     Ok(())
/// })
/// .unwrap();
/// assert_eq!(out, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
/// # }
/// ```
///
/// # Errors
///
/// The body's first error; [`KernelError::DisjointSplit`] when `out` is not a whole number of
/// units, or when the schedule broke its contract — it ran a unit twice or out of range (that
/// chunk's body is not called), or never ran some unit
/// ([`DisjointError::Unwritten`](crate::DisjointError::Unwritten), naming the schedule).
pub fn parallel_chunks<T: Send>(
    op: &str,
    schedule: &dyn Schedule,
    out: &mut [T],
    unit_len: usize,
    work: Work,
    body: &TryChunkBody<'_, T, KernelError>,
) -> Result<(), KernelError> {
    parallel_chunks_grained(op, schedule, out, unit_len, 1, work, body)
}

/// [`parallel_chunks`] with at least `grain` units per body call: for a kernel whose body
/// pays a fixed cost per call (packing a whole operand), so that a region's pieces do not
/// multiply it. Ranges (and so the bits) are still the kernel's business, never the grain's.
pub(crate) fn parallel_chunks_grained<T: Send>(
    op: &str,
    schedule: &dyn Schedule,
    out: &mut [T],
    unit_len: usize,
    grain: usize,
    work: Work,
    body: &TryChunkBody<'_, T, KernelError>,
) -> Result<(), KernelError> {
    if out.is_empty() && unit_len == 0 {
        return Ok(());
    }
    if work.forks() {
        schedule.try_for_chunks_mut(op, out, unit_len, grain, body)
    } else {
        Sequential.try_for_chunks_mut(op, out, unit_len, grain, body)
    }
}
