//! [`RayonSchedule`]: the same regions, with rayon's threads as the helpers.

use alloc::format;
use alloc::string::String;
use core::fmt;

use super::dispatch::{self, Forking};
use crate::schedule::{Schedule, ScheduleRef};
use crate::sync::Arc;
use crate::trace::TraceSinkRef;

/// A schedule whose helper jobs run on a rayon pool: the global one or a given
/// [`rayon::ThreadPool`]. Named `rayon(N)`, `N` being the pool's thread count.
///
/// It sizes regions exactly like every other schedule (tasks from [`Chunks`](crate::Chunks),
/// each region cut into up to four pieces per task) and shares the threaded schedule's region:
/// the caller runs piece 0 and drains the queue, each of the `tasks - 1` jobs spawned on rayon
/// claims pieces while any are left, a panic skips the unclaimed pieces and is resumed on the
/// caller after every claimed piece ended, and a region opened inside a piece (of this or any
/// threaded schedule) runs inline. rayon wakes its own threads, at once.
///
/// Differences from [`PoolSchedule`](super::PoolSchedule), as far as rayon goes:
///
/// * the parallelism is the pool's thread count, and the caller counts as one of the tasks
///   even when it is not a thread of that pool, so up to `N + 1` threads may run chunks;
/// * when the caller is a rayon worker waiting for a claimed chunk, it blocks instead of
///   stealing other rayon work (the wait is only for chunks that are already running);
/// * [`global()`](RayonSchedule::global) spawns with `rayon::spawn`, which, called from inside
///   another rayon pool's worker, lands in that pool; use
///   [`with_pool`](RayonSchedule::with_pool) to pin a pool.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use skainet_schedule::prelude::*;
/// use skainet_schedule::RayonSchedule;
///
/// let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
/// let schedule = RayonSchedule::with_pool(std::sync::Arc::new(pool));
/// assert_eq!(schedule.name(), "rayon(2)");
/// let calls = AtomicUsize::new(0);
/// schedule.for_range(10, 1, &|_start, _end| {
///     calls.fetch_add(1, Ordering::Relaxed);
/// });
/// // 2 tasks; 8 pieces would be of 2 units, which leaves 5.
/// assert_eq!(calls.into_inner(), 5);
/// ```
#[derive(Clone)]
pub struct RayonSchedule {
    pool: Option<Arc<rayon::ThreadPool>>,
    parallelism: usize,
    name: String,
    trace: Option<TraceSinkRef>,
}

impl RayonSchedule {
    /// Over rayon's global pool, sized by `rayon::current_num_threads()` when called.
    pub fn global() -> Self {
        Self::sized(None, rayon::current_num_threads())
    }

    /// Over `pool`.
    pub fn with_pool(pool: Arc<rayon::ThreadPool>) -> Self {
        let threads = pool.current_num_threads();
        Self::sized(Some(pool), threads)
    }

    fn sized(pool: Option<Arc<rayon::ThreadPool>>, threads: usize) -> Self {
        let parallelism = threads.max(1);
        Self {
            pool,
            parallelism,
            name: format!("rayon({parallelism})"),
            trace: None,
        }
    }

    /// This schedule, reporting every region that really forked to `sink` (see
    /// [`PoolSchedule::with_trace`](super::PoolSchedule::with_trace)).
    pub fn with_trace(mut self, sink: TraceSinkRef) -> Self {
        self.trace = Some(sink);
        self
    }

    /// A shareable `Arc<dyn Schedule>` of this handle.
    pub fn shared(&self) -> ScheduleRef {
        Arc::new(self.clone())
    }
}

impl fmt::Debug for RayonSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RayonSchedule")
            .field("name", &self.name)
            .field("traced", &self.trace.is_some())
            .finish()
    }
}

impl Schedule for RayonSchedule {
    fn parallelism(&self) -> usize {
        self.parallelism
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        self.for_range_op("for_range", n, grain, body);
    }

    fn for_range_op(&self, op: &str, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        let forking = Forking {
            name: &self.name,
            parallelism: self.parallelism,
            trace: self.trace.as_ref(),
        };
        // rayon wakes its own workers when a job is spawned, so there is nothing to `wake`.
        dispatch::for_range(
            forking,
            op,
            n,
            grain,
            body,
            |region, helpers| {
                for _ in 0..helpers {
                    let region = region.clone();
                    let job = move || region.help();
                    match &self.pool {
                        Some(pool) => pool.spawn(job),
                        None => rayon::spawn(job),
                    }
                }
            },
            &|_| {},
        );
    }
}
