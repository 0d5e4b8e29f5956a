//! [`PoolSchedule`]: the schedule over a pool, and its two constructors, [`hardware()`] and
//! [`dedicated()`].

use alloc::format;
use alloc::string::String;
use core::fmt;
use core::time::Duration;

use super::dispatch::{self, Forking};
use super::error::{parse_task_groups, ScheduleError, MAX_PARALLELISM, TASK_GROUPS_VAR};
use super::pool::{Pool, MAX_BLOCK_TIME};
use super::region::Wake;
use crate::schedule::{Schedule, ScheduleRef};
use crate::sync::Arc;
use crate::trace::TraceSinkRef;

/// A schedule that runs regions on a pool of worker threads, the caller being one of the
/// tasks. A cheap handle: clones share the pool; the pool's threads are joined when the last
/// handle of a [`dedicated()`] pool is dropped.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use skainet_schedule::prelude::*;
///
/// let pool = skainet_schedule::dedicated(3)?;
/// assert_eq!(pool.name(), "dedicated(3)");
/// let sum = AtomicUsize::new(0);
/// pool.for_range(100, 1, &|start, end| {
///     sum.fetch_add((start..end).sum::<usize>(), Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 4950);
/// # }
/// # Ok::<(), skainet_schedule::ScheduleError>(())
/// ```
#[derive(Clone)]
pub struct PoolSchedule {
    inner: Arc<Named>,
    trace: Option<TraceSinkRef>,
}

struct Named {
    pool: Pool,
    name: String,
}

impl PoolSchedule {
    fn new(pool: Pool, name: String) -> Self {
        Self {
            inner: Arc::new(Named { pool, name }),
            trace: None,
        }
    }

    /// This schedule, reporting every region that really forked to `sink` as one
    /// `TraceEvent::ScheduleRegion` (inline runs report nothing; a disabled sink is never
    /// asked to build an event).
    pub fn with_trace(mut self, sink: TraceSinkRef) -> Self {
        self.trace = Some(sink);
        self
    }

    /// How long a worker of this pool keeps polling for the next region after one that was
    /// worth waking it for: 2 ms unless set with [`PoolSchedule::set_block_time`].
    pub fn block_time(&self) -> Duration {
        self.inner.pool.shared().block_time()
    }

    /// Sets how long a worker keeps polling (yielding its core between polls) for the next
    /// region after one that was worth waking it for, like OpenMP's `KMP_BLOCKTIME`; for the
    /// pool, so for every handle of it (for [`hardware()`], the process's).
    ///
    /// A worker that slept takes tens of microseconds to run again, and up to a millisecond
    /// on a virtual machine whose idle virtual CPU the host halted; polling through the gap
    /// between large regions saves that, at the price of the CPU time it polls. The default,
    /// 2 ms, makes large regions a millisecond apart find their workers awake; a longer one
    /// does the same for sparser streams; `Duration::ZERO` lets workers sleep after a large
    /// region as soon as after a short one (2–100 µs): the least CPU for a pool that shares the
    /// machine, each large region after a pause then paying for a wake-up. Workers read the
    /// new value the next time they look for work.
    ///
    /// ```
    /// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
    /// use std::time::Duration;
    ///
    /// let pool = skainet_schedule::dedicated(2)?;
    /// assert_eq!(pool.block_time(), Duration::from_millis(2));
    /// pool.set_block_time(Duration::ZERO)?;
    /// assert_eq!(pool.clone().block_time(), Duration::ZERO);
    /// # }
    /// # Ok::<(), skainet_schedule::ScheduleError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ScheduleError::BlockTimeTooLong`] above [`MAX_BLOCK_TIME`] (200 ms); the block time
    /// is then unchanged.
    pub fn set_block_time(&self, block_time: Duration) -> Result<(), ScheduleError> {
        if block_time > MAX_BLOCK_TIME {
            return Err(ScheduleError::BlockTimeTooLong {
                requested: block_time,
            });
        }
        self.inner.pool.shared().set_block_time(block_time);
        Ok(())
    }

    /// A shareable `Arc<dyn Schedule>` of this handle.
    pub fn shared(&self) -> ScheduleRef {
        Arc::new(self.clone())
    }

    /// How many handles share the pool.
    #[cfg(all(test, not(feature = "loom")))]
    pub(crate) fn handles(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The pool's queue, for the model-checking hooks.
    #[cfg(any(test, feature = "loom"))]
    pub(crate) fn pool(&self) -> &Pool {
        &self.inner.pool
    }
}

impl fmt::Debug for PoolSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolSchedule")
            .field("name", &self.inner.name)
            .field("traced", &self.trace.is_some())
            .finish()
    }
}

impl Schedule for PoolSchedule {
    fn parallelism(&self) -> usize {
        self.inner.pool.parallelism()
    }

    fn name(&self) -> &str {
        &self.inner.name
    }

    fn for_range(&self, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        self.for_range_op("for_range", n, grain, body);
    }

    fn for_range_op(&self, op: &str, n: usize, grain: usize, body: &(dyn Fn(usize, usize) + Sync)) {
        let forking = Forking {
            name: &self.inner.name,
            parallelism: self.inner.pool.parallelism(),
            trace: self.trace.as_ref(),
        };
        let shared = self.inner.pool.shared();
        dispatch::for_range(
            forking,
            op,
            n,
            grain,
            body,
            |region, helpers| shared.offer(region, helpers),
            shared,
        );
    }

    /// `true` while every worker sleeps (a pool without workers has none to wake).
    fn helpers_asleep(&self) -> bool {
        // The count of awake workers is kept outside loom's models (see `PoolShared`).
        cfg!(not(feature = "loom"))
            && self.inner.pool.parallelism() > 1
            && !self.inner.pool.shared().helpers_awake()
    }
}

/// A pool that owns `parallelism - 1` worker threads named `skainet-schedule-1`, ...; the
/// thread that opens a region is the remaining task. Named `dedicated(p)`. Dropping the last
/// handle shuts the workers down and joins them. `dedicated(1)` has no threads and runs
/// everything inline.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::prelude::*;
/// assert_eq!(skainet_schedule::dedicated(2)?.parallelism(), 2);
/// assert_eq!(skainet_schedule::dedicated(0).unwrap_err(), skainet_schedule::ScheduleError::ZeroParallelism);
/// # }
/// # Ok::<(), skainet_schedule::ScheduleError>(())
/// ```
///
/// At most [`MAX_PARALLELISM`] tasks; larger requests are refused before any thread starts:
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::{ScheduleError, MAX_PARALLELISM};
/// assert_eq!(
///     skainet_schedule::dedicated(MAX_PARALLELISM + 1).unwrap_err(),
///     ScheduleError::ParallelismTooLarge { requested: MAX_PARALLELISM + 1 }
/// );
/// # }
/// ```
///
/// # Errors
///
/// [`ScheduleError::ZeroParallelism`] when `parallelism == 0`;
/// [`ScheduleError::ParallelismTooLarge`] when `parallelism > MAX_PARALLELISM`;
/// [`ScheduleError::SpawnFailed`] when the system refuses a thread (the ones already started
/// are shut down and joined before this returns).
pub fn dedicated(parallelism: usize) -> Result<PoolSchedule, ScheduleError> {
    let pool = Pool::new(parallelism)?;
    Ok(PoolSchedule::new(pool, format!("dedicated({parallelism})")))
}

/// The parallelism [`hardware()`] asks for: the value of `SKAINET_TASK_GROUPS` when that is
/// set, else `std::thread::available_parallelism()` (1 when the platform cannot tell), capped
/// at [`MAX_PARALLELISM`].
///
/// # Errors
///
/// [`ScheduleError::InvalidTaskGroups`] when `SKAINET_TASK_GROUPS` is set to anything but a
/// positive integer, [`ScheduleError::TaskGroupsTooLarge`] when it is above
/// [`MAX_PARALLELISM`] (see [`parse_task_groups`]).
pub fn hardware_parallelism() -> Result<usize, ScheduleError> {
    match std::env::var_os(TASK_GROUPS_VAR) {
        Some(value) => parse_task_groups(&value.to_string_lossy()),
        None => Ok(available_parallelism()),
    }
}

/// The machine's parallelism, capped: a machine with more hardware threads than
/// [`MAX_PARALLELISM`] gets a pool of the maximum.
fn available_parallelism() -> usize {
    std::thread::available_parallelism()
        .map_or(1, core::num::NonZeroUsize::get)
        .min(MAX_PARALLELISM)
}

/// The process-wide pool, built on first use and never dropped.
struct Hardware {
    schedule: PoolSchedule,
    /// Why the pool is not what the environment asked for, if it is not.
    fallback: Option<ScheduleError>,
}

impl Hardware {
    fn build() -> Self {
        let (parallelism, mut fallback) = match hardware_parallelism() {
            Ok(parallelism) => (parallelism, None),
            Err(err) => (available_parallelism(), Some(err)),
        };
        let pool = match Pool::new(parallelism) {
            Ok(pool) => pool,
            Err(err) => {
                fallback = Some(err);
                Pool::inline()
            }
        };
        if let Some(err) = &fallback {
            // Reported once per process: a misconfigured knob must not pass unnoticed.
            std::eprintln!(
                "skainet-schedule: {err}; hardware() runs with parallelism {}",
                pool.parallelism()
            );
        }
        let name = format!("hardware({})", pool.parallelism());
        Self {
            schedule: PoolSchedule::new(pool, name),
            fallback,
        }
    }
}

#[cfg(not(feature = "loom"))]
fn hardware_state() -> &'static Hardware {
    static HARDWARE: crate::sync::OnceLock<Hardware> = crate::sync::OnceLock::new();
    HARDWARE.get_or_init(Hardware::build)
}

/// The process-wide pool, named `hardware(N)`: `N` is [`hardware_parallelism()`], built on
/// first use with `N - 1` worker threads that live as long as the process. Every call returns
/// a handle to the same pool.
///
/// Fallback rule: if `SKAINET_TASK_GROUPS` is invalid (not a positive integer, or above
/// [`MAX_PARALLELISM`]), the pool uses `available_parallelism()` (capped at
/// [`MAX_PARALLELISM`]) instead, writes one line to stderr, and [`hardware_fallback()`]
/// returns the error; if threads cannot be started it runs inline (`hardware(1)`) and reports
/// that the same way.
///
/// Under the `loom` feature every call builds a fresh pool (a process-wide one would outlive
/// the model that created it).
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::prelude::*;
/// let pool = skainet_schedule::hardware();
/// assert_eq!(pool.name(), format!("hardware({})", pool.parallelism()));
/// # }
/// ```
pub fn hardware() -> PoolSchedule {
    #[cfg(not(feature = "loom"))]
    {
        hardware_state().schedule.clone()
    }
    #[cfg(feature = "loom")]
    {
        Hardware::build().schedule
    }
}

/// Why [`hardware()`] is not sized as the environment asked (an invalid or too large
/// `SKAINET_TASK_GROUPS`, or threads that could not start), or `None` when it is. Builds the
/// pool if it does not exist yet.
pub fn hardware_fallback() -> Option<ScheduleError> {
    #[cfg(not(feature = "loom"))]
    {
        hardware_state().fallback.clone()
    }
    #[cfg(feature = "loom")]
    {
        Hardware::build().fallback
    }
}

/// The platform default under `parallel`: [`hardware()`].
pub(crate) fn platform_default() -> ScheduleRef {
    hardware().shared()
}
