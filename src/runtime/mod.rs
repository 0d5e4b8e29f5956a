//! The threaded schedules: a pool of worker threads (feature `parallel`) and a rayon adapter
//! (feature `rayon`), both running the same *caller-drained region*.
//!
//! # What `parallel` adds
//!
//! [`hardware()`], the process-wide pool; [`dedicated()`], pools that own their threads;
//! [`PoolSchedule`], the schedule over either; and the platform default:
//! `platform_default_schedule()` returns `hardware()` instead of `Sequential`. The `rayon`
//! feature adds [`RayonSchedule`] (it does not need `parallel`).
//!
//! # How a region runs
//!
//! `for_range(n, grain, body)` sizes `[0, n)` into [`Chunks`](crate::Chunks): its tasks. With
//! one task, or when the calling thread is already running a chunk of some region (any pool,
//! any schedule of this module), it runs inline as `body(0, n)` and emits nothing. Otherwise
//! the region cuts `[0, n)` into up to four *pieces* per task, each at least `grain` units
//! (`Chunks::new(n, 1, pieces)`), and the pieces become one shared queue: `tasks - 1` helper
//! jobs are published to the pool, the caller runs piece 0, keeps claiming pieces until the
//! queue is empty, then waits only for pieces that another thread has already claimed. More
//! pieces than tasks let whoever is running take what a late helper would have had.
//!
//! Workers that are awake take published jobs by themselves: after a short region each polls
//! for up to 100 µs (less while polling finds nothing), after one worth a wake-up for twice the
//! time the pool sat idle before that region, up to 2 ms (a block time, as OpenMP's
//! `KMP_BLOCKTIME`), so a stream of large regions up to a millisecond apart finds them awake.
//! Sleeping ones are woken only when the pieces left after the caller's first one hold at
//! least 50 µs of work by that piece's time: a wake-up costs the caller a system call and the
//! helper tens of microseconds (up to a millisecond on a virtual machine) to start, so a short
//! region on an idle pool runs on the caller alone and costs nothing on other cores; while
//! every worker sleeps, that caller runs the pieces after its first as one body call. A region that really forked
//! emits one
//! `TraceEvent::ScheduleRegion` to an attached sink ([`PoolSchedule::with_trace`]). Only the
//! chunks of a forked region mark their thread as nested; a one-chunk region leaves it
//! unmarked, so a region its body opens may still fork (nothing else is running to
//! oversubscribe).
//!
//! # Why it cannot deadlock
//!
//! The caller never waits for a helper to *start*: every chunk nobody has claimed, it claims
//! and runs itself. It waits only for chunks that are running on some thread, and a running
//! chunk never waits for the pool either — a region it opens runs inline. So every wait ends
//! after a bounded amount of the body's own work, whether the pool has no free worker, one
//! thread, or is the very pool whose worker opened the region. A helper job that starts after
//! its region returned finds the queue empty and leaves; it owns a reference to the region's
//! state, so nothing it touches has been freed, and it never calls the body.
//!
//! # Failure and visibility
//!
//! A panicking chunk is caught; the first payload wins, chunks not yet claimed are skipped,
//! and the caller resumes the payload once every claimed chunk has ended. `try_for_range`
//! works the same way with the first `Err`. The pool survives both. Every write a chunk made
//! happens-before the region returns: chunks count down a latch with `AcqRel` and the caller
//! observes it with `Acquire` (or through the latch's mutex when it sleeps).
//!
//! # The knob
//!
//! `SKAINET_TASK_GROUPS=N` (a positive integer) sets the parallelism of [`hardware()`] — the
//! same number an IREE device takes as `--task_topology_group_count`. Unset, it is
//! `std::thread::available_parallelism()`. An invalid value is reported: see
//! [`hardware_parallelism()`] and [`hardware_fallback()`].

mod dispatch;
mod latch;
mod nesting;
mod region;

#[cfg(feature = "parallel")]
mod error;
#[cfg(feature = "parallel")]
mod pool;
#[cfg(feature = "parallel")]
mod pool_schedule;
#[cfg(feature = "rayon")]
mod rayon;

#[cfg(feature = "rayon")]
pub use self::rayon::RayonSchedule;
#[cfg(feature = "parallel")]
pub use error::{parse_task_groups, ScheduleError, MAX_PARALLELISM, TASK_GROUPS_VAR};
#[cfg(feature = "parallel")]
pub use pool::MAX_BLOCK_TIME;
#[cfg(feature = "parallel")]
pub use pool_schedule::{
    dedicated, hardware, hardware_fallback, hardware_parallelism, PoolSchedule,
};

#[cfg(feature = "parallel")]
pub(crate) use pool_schedule::platform_default;

/// Hooks for the loom models: what they need that the public API does not offer.
#[cfg(feature = "loom")]
#[doc(hidden)]
pub mod model_hooks {
    use alloc::boxed::Box;

    use super::pool::Job;
    use super::PoolSchedule;

    /// Runs `job` on one of `pool`'s workers, outside any region, so that the worker can open
    /// a region of its own (a chunk could not: its regions run inline).
    pub fn run_on_worker(pool: &PoolSchedule, job: impl FnOnce() + Send + 'static) {
        pool.pool().shared().push(Job::Detached(Box::new(job)), 1);
    }
}

#[cfg(all(test, feature = "parallel", not(feature = "loom")))]
mod tests;
