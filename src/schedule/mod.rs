//! The schedule contract: how many tasks run a kernel's independent units.
//!
//! A kernel states *what* it computes over `n` independent units; a [`Schedule`] decides *how
//! many tasks* compute them. Every schedule splits `[0, n)` with the same arithmetic
//! ([`tasks_for`], [`chunk_for`], [`Chunks`]), and a body's per-unit arithmetic never depends on
//! where a range was cut, so the result is bit-identical whatever the schedule.
//!
//! This module is `no_std`: it only has [`Sequential`]. The threaded schedules live behind the
//! `parallel` and `rayon` features.

mod disjoint;

use core::ops::Range;

pub use disjoint::{DisjointError, DisjointSlice};

use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

/// A shareable handle to any schedule: what contexts, ops and kernels pass around.
pub type ScheduleRef = Arc<dyn Schedule>;

/// A fallible body over a chunk of disjoint output: `body(units, chunk)`, as
/// [`ScheduleExt::try_for_chunks_mut`] and `parallel_chunks` call it.
pub type TryChunkBody<'a, T, E> = dyn Fn(Range<usize>, &mut [T]) -> Result<(), E> + Sync + 'a;

/// Decides how many tasks run `n` independent units of work, and runs them.
///
/// The trait is object safe: kernels take `&dyn Schedule` and contexts hold a [`ScheduleRef`].
///
/// # The body contract
///
/// A body passed to [`for_range`](Schedule::for_range) (and every method built on it):
///
/// * is called with disjoint, non-empty, half-open ranges `start..end` that together cover
///   `[0, n)` exactly once; `n == 0` calls nothing;
/// * writes only pre-split, disjoint outputs (use [`DisjointSlice`] or
///   [`ScheduleExt::for_chunks_mut`] to get them safely) and reads only inputs that are immutable
///   for the duration of the call;
/// * never starts a nested region: a schedule runs a region opened from inside a body inline,
///   as a single `body(0, n)` on the calling thread;
/// * may run on any thread, in any order relative to its siblings.
///
/// In return the schedule guarantees: no task outlives the call; every write a body made
/// happens-before `for_range` returns; if a body panics, the first panic is resumed on the
/// caller after every sibling that had started has finished and the ones not yet started were
/// skipped.
pub trait Schedule: Send + Sync {
    /// The most tasks that run at once; `1` means sequential.
    fn parallelism(&self) -> usize;

    /// A stable, human-readable name: `sequential`, `hardware(8)`, `dedicated(3)`, `rayon(4)`.
    fn name(&self) -> &str;

    /// Runs `body(start, end)` over disjoint half-open ranges covering `[0, n)`.
    ///
    /// At most [`tasks_for`]`(n, grain, self.parallelism())` ranges are formed, each of at
    /// least `grain` units except possibly the last; see the [trait docs](Schedule) for the body
    /// contract.
    ///
    /// ```
    /// use core::sync::atomic::{AtomicUsize, Ordering};
    /// use skainet_schedule::{Schedule, Sequential};
    ///
    /// let sum = AtomicUsize::new(0);
    /// Sequential.for_range(10, 1, &|start, end| {
    ///     sum.fetch_add((start..end).sum::<usize>(), Ordering::Relaxed);
    /// });
    /// assert_eq!(sum.into_inner(), 45);
    /// ```
    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync));

    /// [`for_range`](Schedule::for_range), with the name of the operation that opened the
    /// region, for trace events (`ScheduleRegion { op, .. }`). Schedules that trace override
    /// it; the default ignores `op`.
    fn for_range_op(&self, op: &str, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        let _ = op;
        self.for_range(n, grain, body);
    }

    /// Runs `body(i)` once for every `i` in `[0, count)`, at least `min_per_task` indices per
    /// task (a task's indices run in increasing order).
    ///
    /// ```
    /// use core::sync::atomic::{AtomicUsize, Ordering};
    /// use skainet_schedule::{Schedule, Sequential};
    ///
    /// let visits = AtomicUsize::new(0);
    /// Sequential.for_each(5, 1, &|_i| {
    ///     visits.fetch_add(1, Ordering::Relaxed);
    /// });
    /// assert_eq!(visits.into_inner(), 5);
    /// ```
    fn for_each(&self, count: usize, min_per_task: usize, body: &(dyn Fn(usize) + Sync)) {
        self.for_range(count, min_per_task, &|start, end| {
            for i in start..end {
                body(i);
            }
        });
    }

    /// Whether a region opened now would first have to wake threads that sleep, tens of
    /// microseconds or more before any of them helps. A kernel whose call is too few pieces
    /// per task to make that up runs a small one inline then (see
    /// [`SDPA_LATE_HELPER_WORK`](crate::SDPA_LATE_HELPER_WORK)); a hint only, read without
    /// synchronization, and never a change to any result. The default, `false`, is for a
    /// schedule whose threads are ready or that cannot tell; the pools of `dedicated(p)` and
    /// `hardware()` answer `true` while every worker sleeps.
    ///
    /// ```
    /// use skainet_schedule::{Schedule, Sequential};
    /// assert!(!Sequential.helpers_asleep());
    /// ```
    fn helpers_asleep(&self) -> bool {
        false
    }
}

impl core::fmt::Debug for dyn Schedule {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether two schedules are the same request: the same object, or the same name (two
/// `sequential`s, or two pools of the same kind and size, split work identically).
pub fn same_schedule(a: &dyn Schedule, b: &dyn Schedule) -> bool {
    core::ptr::addr_eq(a as *const dyn Schedule, b as *const dyn Schedule) || a.name() == b.name()
}

/// Runs every range inline on the calling thread: parallelism 1, name `sequential`.
///
/// `for_range(n, grain, body)` calls `body(0, n)` once when `n > 0` (the grain is ignored) and
/// nothing when `n == 0`. It is the schedule of embedded and wasm builds, and the reference
/// every other schedule is bit-identical to.
///
/// ```
/// use skainet_schedule::{Schedule, Sequential};
/// assert_eq!(Sequential.name(), "sequential");
/// assert_eq!(Sequential.parallelism(), 1);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sequential;

impl Sequential {
    /// A shareable handle to `Sequential`.
    pub fn shared() -> ScheduleRef {
        Arc::new(Sequential)
    }
}

impl Schedule for Sequential {
    fn parallelism(&self) -> usize {
        1
    }

    fn name(&self) -> &str {
        "sequential"
    }

    fn for_range(&self, n: usize, _grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        if n > 0 {
            body(0, n);
        }
    }
}

/// How many tasks a region of `n` units with a minimum of `grain` units per task gets under
/// `parallelism`: `0` if `n == 0`, else `min(max(parallelism, 1), ceil(n / max(grain, 1)))`.
///
/// ```
/// use skainet_schedule::tasks_for;
/// assert_eq!(tasks_for(0, 1, 8), 0);
/// assert_eq!(tasks_for(1000, 1, 8), 8);
/// assert_eq!(tasks_for(100, 40, 8), 3);
/// assert_eq!(tasks_for(100, 1, 0), 1);
/// ```
pub const fn tasks_for(n: usize, grain: usize, parallelism: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let grain = if grain == 0 { 1 } else { grain };
    let parallelism = if parallelism == 0 { 1 } else { parallelism };
    let by_grain = n.div_ceil(grain);
    if by_grain < parallelism {
        by_grain
    } else {
        parallelism
    }
}

/// The chunk length for `n` units over `tasks` tasks: `ceil(n / tasks)` (`0` when either is 0).
///
/// Chunk `i` is `[i * chunk, min((i + 1) * chunk, n))`; see [`Chunks`], which also drops the
/// empty trailing chunks this arithmetic can produce (`n = 5`, `tasks = 4` gives chunks of 2:
/// `0..2, 2..4, 4..5` and an empty fourth).
pub const fn chunk_for(n: usize, tasks: usize) -> usize {
    if n == 0 || tasks == 0 {
        0
    } else {
        n.div_ceil(tasks)
    }
}

/// The ranges every schedule cuts `[0, n)` into: the single source of chunking arithmetic.
///
/// ```
/// use skainet_schedule::Chunks;
/// let chunks = Chunks::new(10, 1, 4);
/// assert_eq!(chunks.iter().collect::<Vec<_>>(), vec![0..3, 3..6, 6..9, 9..10]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunks {
    n: usize,
    chunk: usize,
    count: usize,
}

impl Chunks {
    /// The chunks of `n` units with at least `grain` per task under `parallelism`.
    pub const fn new(n: usize, grain: usize, parallelism: usize) -> Self {
        let tasks = tasks_for(n, grain, parallelism);
        let chunk = chunk_for(n, tasks);
        let count = if chunk == 0 { 0 } else { n.div_ceil(chunk) };
        Self { n, chunk, count }
    }

    /// The number of non-empty chunks: how many times a body is called. At most
    /// [`tasks_for`]; smaller only when the ceiling leaves empty trailing chunks.
    pub const fn len(&self) -> usize {
        self.count
    }

    /// Whether there is nothing to run (`n == 0`).
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The length of every chunk but possibly the last.
    pub const fn chunk_len(&self) -> usize {
        self.chunk
    }

    /// The number of units covered.
    pub const fn units(&self) -> usize {
        self.n
    }

    /// Chunk `i`, or `None` when `i >= self.len()`.
    ///
    /// Exact for every `n` up to `usize::MAX`: the last chunk ends at `n`, never past it.
    ///
    /// ```
    /// use skainet_schedule::Chunks;
    /// let chunks = Chunks::new(usize::MAX, 1, 2);
    /// assert_eq!(chunks.get(1), Some(1 << (usize::BITS - 1)..usize::MAX));
    /// assert_eq!(chunks.get(2), None);
    /// ```
    pub const fn get(&self, i: usize) -> Option<Range<usize>> {
        if i >= self.count {
            return None;
        }
        Some(self.bounds(i))
    }

    /// The chunks in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Range<usize>> + '_ {
        (0..self.count).map(move |i| self.bounds(i))
    }

    /// Chunk `i` for `i < self.count`. `count = ceil(n / chunk)`, so `i * chunk < n`, and the
    /// end is formed as `start + min(chunk, n - start)`: neither step can overflow, whatever `n`.
    const fn bounds(&self, i: usize) -> Range<usize> {
        let start = i * self.chunk;
        let rest = self.n - start;
        let len = if rest < self.chunk { rest } else { self.chunk };
        start..start + len
    }
}

/// Methods every schedule gets on top of [`Schedule::for_range`]: the fallible form and safe
/// disjoint writes. Implemented for every `Schedule`, including `dyn Schedule`.
pub trait ScheduleExt: Schedule {
    /// Like [`for_range`](Schedule::for_range), but a body may fail: the first `Err` makes
    /// every chunk that has not started yet return at once without calling `body`, and is
    /// returned after the region has ended. Chunks already running finish normally.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
    /// use skainet_schedule::{ScheduleExt, Sequential};
    /// let r = Sequential.try_for_range(8, 1, &|start, _end| {
    ///     if start == 0 { Err("unit 0 is bad") } else { Ok(()) }
    /// });
    /// assert_eq!(r, Err("unit 0 is bad"));
    /// # }
    /// ```
    fn try_for_range<E: Send>(
        &self,
        n: usize,
        grain: usize,
        body: &(dyn Fn(usize, usize) -> Result<(), E> + Sync),
    ) -> Result<(), E> {
        self.try_for_range_op("for_range", n, grain, body)
    }

    /// [`try_for_range`](ScheduleExt::try_for_range) naming the operation for trace events.
    fn try_for_range_op<E: Send>(
        &self,
        op: &str,
        n: usize,
        grain: usize,
        body: &(dyn Fn(usize, usize) -> Result<(), E> + Sync),
    ) -> Result<(), E> {
        let failed = AtomicBool::new(false);
        let first = Mutex::new(None);
        self.for_range_op(op, n, grain, &|start, end| {
            // Acquire pairs with the Release below: a chunk that sees the flag skips its work.
            if failed.load(Ordering::Acquire) {
                return;
            }
            if let Err(err) = body(start, end) {
                let mut slot = first.lock();
                if slot.is_none() {
                    *slot = Some(err);
                }
                failed.store(true, Ordering::Release);
            }
        });
        match first.into_inner() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// Splits `out` into units of `unit_len` elements and runs `body(units, chunk)` over the
    /// schedule's ranges of units, where `chunk` is exactly `out[units.start * unit_len ..
    /// units.end * unit_len]`, borrowed mutably and exclusively by that call.
    ///
    /// This is how a kernel writes disjoint outputs from a region without `unsafe`.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
    /// use skainet_schedule::{ScheduleExt, Sequential};
    /// let mut out = [0u32; 6];
    /// Sequential
    ///     .for_chunks_mut("fill", &mut out, 2, 1, &|units, chunk: &mut [u32]| {
    ///         for (k, x) in chunk.iter_mut().enumerate() {
    ///             *x = (units.start * 2 + k) as u32;
    ///         }
    ///     })
    ///     .unwrap();
    /// assert_eq!(out, [0, 1, 2, 3, 4, 5]);
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`DisjointError::ZeroUnitLen`] / [`DisjointError::RaggedLength`] when `out` does not split
    /// into whole units. Only if the schedule broke its contract: [`DisjointError::Overlap`] or
    /// [`DisjointError::OutOfBounds`] (the offending chunk's body is not called), or
    /// [`DisjointError::Unwritten`] when some unit was never run — so a broken schedule can
    /// never make this return `Ok` over output it did not write.
    fn for_chunks_mut<T: Send>(
        &self,
        op: &str,
        out: &mut [T],
        unit_len: usize,
        grain: usize,
        body: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
    ) -> Result<(), DisjointError> {
        self.try_for_chunks_mut(op, out, unit_len, grain, &|units, chunk| {
            body(units, chunk);
            Ok(())
        })
    }

    /// [`for_chunks_mut`](ScheduleExt::for_chunks_mut) with a body that may fail, as in
    /// [`try_for_range`](ScheduleExt::try_for_range): the first `Err` (the body's, or a
    /// [`DisjointError`] converted into `E`) skips the chunks not yet started and is returned.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
    /// use skainet_schedule::{DisjointError, ScheduleExt, Sequential};
    /// let mut out = [0u8; 4];
    /// let r: Result<(), DisjointError> =
    ///     Sequential.try_for_chunks_mut("fill", &mut out, 3, 1, &|_units, _chunk| Ok(()));
    /// assert_eq!(r, Err(DisjointError::RaggedLength { len: 4, unit_len: 3 }));
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// The body's first error, or any error of
    /// [`for_chunks_mut`](ScheduleExt::for_chunks_mut), converted into `E`.
    fn try_for_chunks_mut<T: Send, E: From<DisjointError> + Send>(
        &self,
        op: &str,
        out: &mut [T],
        unit_len: usize,
        grain: usize,
        body: &TryChunkBody<'_, T, E>,
    ) -> Result<(), E> {
        let slice = DisjointSlice::new(out, unit_len)?;
        let units = slice.units();
        self.try_for_range_op(op, units, grain, &|start, end| {
            let chunk = slice.take(start..end)?;
            body(start..end, chunk)
        })?;
        let untaken = slice.first_untaken();
        slice.recycle();
        match untaken {
            Some(unit) => Err(DisjointError::Unwritten {
                schedule: self.name().into(),
                unit,
                units,
            }
            .into()),
            None => Ok(()),
        }
    }
}

impl<S: Schedule + ?Sized> ScheduleExt for S {}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use alloc::vec;
    use alloc::vec::Vec;

    #[test]
    fn tasks_for_matches_the_spec_table() {
        assert_eq!(tasks_for(0, 1, 8), 0);
        assert_eq!(tasks_for(1, 1, 8), 1);
        assert_eq!(tasks_for(4, 1, 8), 4);
        assert_eq!(tasks_for(1000, 1, 8), 8);
        assert_eq!(tasks_for(100, 40, 8), 3);
        assert_eq!(tasks_for(100, 1, 0), 1);
        assert_eq!(tasks_for(100, 0, 8), 8);
    }

    #[test]
    fn chunk_for_is_the_ceiling() {
        assert_eq!(chunk_for(0, 4), 0);
        assert_eq!(chunk_for(10, 0), 0);
        assert_eq!(chunk_for(10, 4), 3);
        assert_eq!(chunk_for(8, 4), 2);
        assert_eq!(chunk_for(1, 8), 1);
    }

    #[test]
    fn chunks_cover_exactly_and_drop_empty_tails() {
        assert_eq!(
            Chunks::new(5, 1, 4).iter().collect::<Vec<_>>(),
            vec![0..2, 2..4, 4..5]
        );
        assert_eq!(Chunks::new(5, 1, 4).len(), 3);
        assert_eq!(
            Chunks::new(100, 40, 8).iter().collect::<Vec<_>>(),
            vec![0..34, 34..68, 68..100]
        );
        assert!(Chunks::new(0, 1, 8).is_empty());
        assert_eq!(Chunks::new(0, 1, 8).get(0), None);
        assert_eq!(Chunks::new(7, 3, 1).get(0), Some(0..7));
    }

    const HALF: usize = 1 << (usize::BITS - 1);

    #[test]
    fn chunks_of_usize_max_over_two_tasks_end_at_usize_max() {
        let chunks = Chunks::new(usize::MAX, 1, 2);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks.chunk_len(), HALF);
        assert_eq!(
            chunks.iter().collect::<Vec<_>>(),
            vec![0..HALF, HALF..usize::MAX]
        );
        assert_eq!(chunks.get(1), Some(HALF..usize::MAX));
        assert_eq!(chunks.get(2), None);
    }

    #[test]
    fn chunks_near_usize_max_cover_exactly_for_every_small_parallelism() {
        for n in [usize::MAX, usize::MAX - 1, HALF + 1, HALF, HALF - 1] {
            for parallelism in 1..=9 {
                let ranges: Vec<Range<usize>> = Chunks::new(n, 1, parallelism).iter().collect();
                assert_eq!(ranges.len(), parallelism, "n = {n}, p = {parallelism}");
                assert_eq!(ranges[0].start, 0);
                assert_eq!(ranges[ranges.len() - 1].end, n);
                for pair in ranges.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start, "n = {n}, p = {parallelism}");
                }
                assert!(ranges.iter().all(|r| r.start < r.end));
            }
        }
    }

    #[test]
    fn chunks_of_usize_max_over_three_tasks_are_exact() {
        // ceil((2^64 - 1) / 3) = (2^64 - 1) / 3 exactly, as 2^64 - 1 is divisible by 3.
        let third = usize::MAX / 3;
        assert_eq!(
            Chunks::new(usize::MAX, 1, 3).iter().collect::<Vec<_>>(),
            vec![0..third, third..2 * third, 2 * third..usize::MAX]
        );
    }

    #[test]
    fn chunks_with_grains_near_usize_max_are_exact() {
        assert_eq!(
            Chunks::new(usize::MAX, usize::MAX, 8)
                .iter()
                .collect::<Vec<_>>(),
            vec![0..usize::MAX]
        );
        // ceil((2^64 - 2) / 2^63) = 2 tasks of ceil((2^64 - 2) / 2) = 2^63 - 1 units.
        assert_eq!(
            Chunks::new(usize::MAX - 1, HALF, 8)
                .iter()
                .collect::<Vec<_>>(),
            vec![0..HALF - 1, HALF - 1..usize::MAX - 1]
        );
    }
}
