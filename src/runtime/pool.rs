//! The pool: worker threads that take helper jobs from one shared queue.
//!
//! A worker never waits for anything but the queue, so every job it takes runs to the end.
//! A region's helper job may find its region already drained; it then leaves at once.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::ToString;
use alloc::vec::Vec;
use core::time::Duration;

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::error::{ScheduleError, MAX_PARALLELISM};
use super::region::{Region, Wake};
use crate::sync::{
    poll_for, thread, wait, Arc, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering, Polled,
    TrackedArc,
};

/// Something a worker runs.
pub(crate) enum Job {
    /// Join a region: claim and run its chunks until none are left.
    Help(TrackedArc<Region>),
    /// Run a closure outside any region (tests and models use it to put a worker into a
    /// region of its own, which nothing in the public API can do).
    #[cfg(any(test, feature = "loom"))]
    Detached(Box<dyn FnOnce() + Send>),
}

impl Job {
    fn run(self) {
        match self {
            Job::Help(region) => region.help(),
            #[cfg(any(test, feature = "loom"))]
            Job::Detached(f) => f(),
        }
    }

    /// Another copy of the job, for one more worker (`None` for a one-off job).
    fn duplicate(&self) -> Option<Job> {
        match self {
            Job::Help(region) => Some(Job::Help(TrackedArc::clone(region))),
            #[cfg(any(test, feature = "loom"))]
            Job::Detached(_) => None,
        }
    }

    /// Whether running the job would do nothing.
    fn is_stale(&self) -> bool {
        match self {
            Job::Help(region) => region.is_drained(),
            #[cfg(any(test, feature = "loom"))]
            Job::Detached(_) => false,
        }
    }
}

/// A queued job that `copies` workers may each take (a region's helpers share one entry).
struct Entry {
    job: Job,
    copies: usize,
}

struct Queue {
    entries: VecDeque<Entry>,
    /// Workers blocked on `PoolShared::work`.
    sleeping: usize,
    shutdown: bool,
}

/// What the workers share with the pool's handles.
pub(crate) struct PoolShared {
    queue: Mutex<Queue>,
    work: Condvar,
    /// Job copies in the queue; lets an idle worker poll without the lock before it sleeps.
    queued: AtomicUsize,
    /// Whether the last two regions were worth waking a helper for (see [`Wake`]): bit 0 the
    /// last one's verdict, bit 1 the one before it.
    verdicts: AtomicUsize,
    /// Set when the pool shuts down, so that a polling worker stops at once.
    closing: AtomicBool,
    /// The longest poll after a region worth a wake-up, in µs (see [`PollWindow`]).
    block_time: AtomicUsize,
    /// Where the pool's clock starts (region ends and idle gaps are kept in µs since it).
    #[cfg(not(feature = "loom"))]
    epoch: std::time::Instant,
    /// When the last region ended, in µs since `epoch`, plus one (0: none yet).
    #[cfg(not(feature = "loom"))]
    last_end: AtomicUsize,
    /// How long the pool sat idle (no region open on it; a region that stays on a caller of
    /// the sleeping pool does not count) before the last region began, in µs
    /// (`usize::MAX`: not known yet).
    #[cfg(not(feature = "loom"))]
    last_gap: AtomicUsize,
    /// Workers that are not asleep (running a job or polling for one).
    #[cfg(not(feature = "loom"))]
    awake: AtomicUsize,
}

impl PoolShared {
    fn new() -> Self {
        Self {
            queue: Mutex::new(Queue {
                entries: VecDeque::new(),
                sleeping: 0,
                shutdown: false,
            }),
            work: Condvar::new(),
            queued: AtomicUsize::new(0),
            verdicts: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            block_time: AtomicUsize::new(micros(BLOCK_TIME)),
            #[cfg(not(feature = "loom"))]
            epoch: std::time::Instant::now(),
            #[cfg(not(feature = "loom"))]
            last_end: AtomicUsize::new(0),
            #[cfg(not(feature = "loom"))]
            last_gap: AtomicUsize::new(usize::MAX),
            #[cfg(not(feature = "loom"))]
            awake: AtomicUsize::new(0),
        }
    }

    /// Queues a region's helper job for up to `helpers` workers without waking any: workers
    /// that are awake (polling after their last job) take it; [`PoolShared::wake`] rouses
    /// sleeping ones once the region's caller knows the work is worth it.
    pub(crate) fn offer(&self, region: TrackedArc<Region>, helpers: usize) {
        if helpers == 0 {
            return;
        }
        let mut queue = self.queue.lock();
        self.enqueue(&mut queue, Job::Help(region), helpers);
    }

    /// Queues `job` for `copies` workers and wakes as many sleeping ones as can help.
    #[cfg(any(test, feature = "loom"))]
    pub(crate) fn push(&self, job: Job, copies: usize) {
        if copies == 0 {
            return;
        }
        let mut queue = self.queue.lock();
        self.enqueue(&mut queue, job, copies);
        self.notify(&queue, copies);
    }

    fn enqueue(&self, queue: &mut Queue, job: Job, copies: usize) {
        // Regions mostly end in the order they were opened, so dropping drained entries at
        // the front keeps the queue short even while every worker is busy.
        self.drop_stale_front(queue);
        queue.entries.push_back(Entry { job, copies });
        self.queued.fetch_add(copies, Ordering::Relaxed);
    }

    /// Wakes as many sleeping workers as `copies` can use (called with the queue locked, so no
    /// worker can be between its last look at the queue and its sleep).
    fn notify(&self, queue: &Queue, copies: usize) {
        let wake = queue.sleeping.min(copies);
        if wake == queue.sleeping {
            if wake > 0 {
                self.work.notify_all();
            }
        } else {
            for _ in 0..wake {
                self.work.notify_one();
            }
        }
    }

    /// The next job for a worker, or `None` once the pool shuts down. First polls for as long
    /// as `window` says (see [`PollWindow`]), then sleeps until woken.
    fn next_job(&self, window: &mut PollWindow) -> Option<Job> {
        let poll = window.get(self.last_was_worth(), self.block_time());
        let polled = poll_for(poll, || {
            self.queued.load(Ordering::Relaxed) > 0 || self.closing.load(Ordering::Relaxed)
        });
        window.update(polled);
        let mut queue = self.queue.lock();
        loop {
            if let Some(job) = self.take(&mut queue) {
                #[cfg(not(feature = "loom"))]
                if let Some(gap) = self.last_gap() {
                    window.idle(gap);
                }
                return Some(job);
            }
            if queue.shutdown {
                return None;
            }
            queue.sleeping += 1;
            #[cfg(not(feature = "loom"))]
            self.awake.fetch_sub(1, Ordering::Relaxed);
            queue = wait(&self.work, queue);
            #[cfg(not(feature = "loom"))]
            self.awake.fetch_add(1, Ordering::Relaxed);
            queue.sleeping -= 1;
        }
    }

    /// Whether the last region was worth a wake-up: a worker then blocks for the next one
    /// (see [`PollWindow`]), even if the region before it was not.
    pub(crate) fn last_was_worth(&self) -> bool {
        self.verdicts.load(Ordering::Relaxed) & LAST_WORTH != 0
    }

    /// Drops the entries at the front of the queue whose regions are drained.
    fn drop_stale_front(&self, queue: &mut Queue) {
        while let Some(entry) = queue.entries.front() {
            if !entry.job.is_stale() {
                break;
            }
            self.queued.fetch_sub(entry.copies, Ordering::Relaxed);
            queue.entries.pop_front();
        }
    }

    /// Takes one copy of the first live entry, dropping drained regions' entries on the way.
    fn take(&self, queue: &mut Queue) -> Option<Job> {
        self.drop_stale_front(queue);
        let entry = queue.entries.front_mut()?;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        if entry.copies > 1 {
            if let Some(job) = entry.job.duplicate() {
                entry.copies -= 1;
                return Some(job);
            }
        }
        queue.entries.pop_front().map(|entry| entry.job)
    }

    /// `now` in microseconds since the pool's epoch.
    #[cfg(not(feature = "loom"))]
    fn micros_at(&self, now: std::time::Instant) -> usize {
        usize::try_from(now.saturating_duration_since(self.epoch).as_micros())
            .unwrap_or(usize::MAX - 1)
    }

    /// How long the pool sat idle before its last region, if known. Measured by the regions'
    /// callers, so a worker that slept through the gap and woke late does not count its own
    /// wake-up latency as idle time.
    #[cfg(not(feature = "loom"))]
    pub(crate) fn last_gap(&self) -> Option<Duration> {
        match self.last_gap.load(Ordering::Relaxed) {
            usize::MAX => None,
            gap => Some(Duration::from_micros(gap as u64)),
        }
    }

    /// The longest a worker polls after a region worth a wake-up.
    pub(crate) fn block_time(&self) -> Duration {
        // Inside a model time decides nothing (`poll_for` does not poll): no load to explore.
        #[cfg(feature = "loom")]
        return BLOCK_TIME;
        #[cfg(not(feature = "loom"))]
        Duration::from_micros(self.block_time.load(Ordering::Relaxed) as u64)
    }

    /// Sets [`PoolShared::block_time`]; `block_time` is at most [`MAX_BLOCK_TIME`].
    pub(crate) fn set_block_time(&self, block_time: Duration) {
        self.block_time
            .store(micros(block_time.min(MAX_BLOCK_TIME)), Ordering::Relaxed);
    }

    fn shut_down(&self) {
        self.closing.store(true, Ordering::Relaxed);
        let mut queue = self.queue.lock();
        queue.shutdown = true;
        self.work.notify_all();
    }
}

/// [`PoolShared::verdicts`]: the last region was worth a wake-up.
const LAST_WORTH: usize = 0b01;
/// [`PoolShared::verdicts`]: the last two regions were worth a wake-up.
const BOTH_WORTH: usize = 0b11;

/// How long an idle worker polls for the next job before it sleeps.
///
/// After a short region, the poll is short: back-to-back regions (a decoder's products and
/// attention, a few microseconds apart) then find the worker awake and need no wake-up, while
/// a pool whose regions come rarely goes to sleep at once. This window doubles (up to
/// [`POLL_MAX`]) each time polling found a job and halves (down to [`POLL_MIN`]) each time it
/// did not, so a worker polls long only while that keeps paying.
///
/// After a region that was worth waking a helper for, the worker blocks longer, like
/// OpenMP's `KMP_BLOCKTIME`: a worker that slept takes tens of microseconds to run again on
/// real hardware and up to a millisecond on a virtual machine whose idle virtual CPU the
/// host halted, which is a large region's whole gain. It polls for twice the time the pool
/// sat idle before its last region (at least [`POLL_MAX`], at most [`BLOCK_TIME`]), so a
/// stream of large regions a millisecond apart finds it awake, and it stops soon after such a
/// stream stops. When that idle time was longer than [`BLOCK_TIME`] (large regions that come
/// rarely), the worker does not block: polling would not have caught them. Nor does it block
/// while its core is contended (a poll ended [`Polled::Contended`], and no poll since has run
/// its window out with quick yields): a yield then hands the core to another thread for a time
/// slice, while a sleeper that is woken runs again at once.
pub(crate) struct PollWindow {
    /// The poll after a short region.
    short: Duration,
    /// How long the pool sat idle before the last region this worker joined; `None` before
    /// its first.
    last_idle: Option<Duration>,
    /// Whether a yield found the core contended, and no clean poll has run since.
    contended: bool,
}

/// The longest poll after a short region: about what a wake-up costs on real hardware, so a
/// worker never spends much more on polling than the wake-up it saves.
pub(crate) const POLL_MAX: Duration = Duration::from_micros(100);
/// The shortest poll, for a worker whose jobs come rarely.
pub(crate) const POLL_MIN: Duration = Duration::from_micros(2);
/// The longest poll after a region worth a wake-up, unless the pool was told otherwise
/// ([`PoolSchedule::set_block_time`](super::PoolSchedule::set_block_time)): about twice what a
/// wake-up costs on a virtual machine, and what a stream of large regions a millisecond apart
/// needs.
pub(crate) const BLOCK_TIME: Duration = Duration::from_millis(2);

/// The longest block time a pool accepts: libomp's default `KMP_BLOCKTIME`. A worker that polls
/// longer than this between regions no longer saves a wake-up worth its CPU time.
pub const MAX_BLOCK_TIME: Duration = Duration::from_millis(200);

/// `d` in whole microseconds (at most [`MAX_BLOCK_TIME`]'s, so it fits any `usize`).
fn micros(d: Duration) -> usize {
    usize::try_from(d.min(MAX_BLOCK_TIME).as_micros()).unwrap_or(usize::MAX)
}

impl PollWindow {
    pub(crate) fn new() -> Self {
        Self {
            short: POLL_MAX,
            last_idle: None,
            contended: false,
        }
    }

    /// How long to poll, given whether the last region was worth a wake-up and the pool's
    /// block time. A block time below the short poll leaves the short poll: a block time of
    /// zero makes a large region's worker poll as a short one's.
    pub(crate) fn get(&self, worth: bool, block_time: Duration) -> Duration {
        if self.contended {
            return self.short;
        }
        let block = match self.last_idle {
            Some(idle) if worth && idle <= block_time => {
                idle.saturating_mul(2).max(POLL_MAX).min(block_time)
            }
            None if worth => block_time,
            _ => Duration::ZERO,
        };
        block.max(self.short)
    }

    /// Records how the last poll ended.
    pub(crate) fn update(&mut self, polled: Polled) {
        self.short = if polled == Polled::Ready {
            self.short.saturating_mul(2).min(POLL_MAX)
        } else {
            (self.short / 2).max(POLL_MIN)
        };
        match polled {
            Polled::Contended => self.contended = true,
            Polled::TimedOut => self.contended = false,
            // Found in time, maybe before any yield: says nothing about the core.
            Polled::Ready => {}
        }
    }

    /// Records how long the pool sat idle before the region whose job the worker just got.
    #[cfg_attr(feature = "loom", allow(dead_code))] // time decides nothing in a model
    pub(crate) fn idle(&mut self, idle: Duration) {
        self.last_idle = Some(idle);
    }
}

impl Wake for PoolShared {
    /// Wakes up to `helpers` sleeping workers.
    fn wake(&self, helpers: usize) {
        let queue = self.queue.lock();
        self.notify(&queue, helpers);
    }

    /// Only after two regions in a row that were: one region slowed down by the host (a
    /// hiccup of tens of microseconds in a 10 µs region) must not make the next one of a
    /// stream of tiny regions pay a wake-up (cold 8 × 128 × 1 attention: 10 → 16–21 µs).
    fn expects_worth(&self) -> bool {
        self.verdicts.load(Ordering::Relaxed) == BOTH_WORTH
    }

    #[cfg(not(feature = "loom"))]
    fn starting(&self, now: std::time::Instant) {
        let end = self.last_end.load(Ordering::Relaxed);
        if end != 0 {
            let gap = self.micros_at(now).saturating_sub(end - 1);
            self.last_gap
                .store(gap.min(usize::MAX - 1), Ordering::Relaxed);
        }
    }

    #[cfg(not(feature = "loom"))]
    fn helpers_awake(&self) -> bool {
        self.awake.load(Ordering::Relaxed) > 0
    }

    #[cfg(not(feature = "loom"))]
    fn ended(&self, now: std::time::Instant) {
        self.last_end
            .store(self.micros_at(now).saturating_add(1), Ordering::Relaxed);
    }

    /// A pool's offer only queues the jobs; its workers are woken by `wake` alone.
    fn offer_is_quiet(&self) -> bool {
        true
    }

    fn learn(&self, worth: bool) {
        let before = self.verdicts.load(Ordering::Relaxed);
        let after = ((before << 1) | usize::from(worth)) & BOTH_WORTH;
        // Most regions repeat the last two verdicts: skip the write (and the cache line's
        // trip between cores) then.
        if after != before {
            self.verdicts.store(after, Ordering::Relaxed);
        }
    }
}

fn worker_main(shared: Arc<PoolShared>) {
    #[cfg(not(feature = "loom"))]
    shared.awake.fetch_add(1, Ordering::Relaxed);
    let mut window = PollWindow::new();
    while let Some(job) = shared.next_job(&mut window) {
        // A region's helper never unwinds; anything else that does must not take the worker
        // (and every later region's help) down with it.
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| job.run())) {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
        }
    }
}

/// How a pool starts one worker: `(index, builder named for it, the worker's main)`.
type Spawn<'a> =
    dyn FnMut(usize, thread::Builder, WorkerMain) -> io::Result<thread::JoinHandle<()>> + 'a;

/// What a worker thread runs.
pub(crate) type WorkerMain = Box<dyn FnOnce() + Send + 'static>;

/// A pool of `parallelism - 1` worker threads; the caller of a region is the remaining task.
/// Dropping it shuts the workers down and joins them.
pub(crate) struct Pool {
    shared: Arc<PoolShared>,
    threads: Vec<thread::JoinHandle<()>>,
    parallelism: usize,
}

impl Pool {
    /// Starts `parallelism - 1` workers named `skainet-schedule-1`, ...
    ///
    /// # Errors
    ///
    /// `ZeroParallelism` for 0, `ParallelismTooLarge` above [`MAX_PARALLELISM`] (checked before
    /// anything is allocated or started), `SpawnFailed` when a thread does not start; the
    /// workers started before it are shut down and joined before this returns.
    pub(crate) fn new(parallelism: usize) -> Result<Self, ScheduleError> {
        Self::start(parallelism, &mut |_, builder, main| builder.spawn(main))
    }

    /// [`Pool::new`] with the thread spawning supplied, so that tests can refuse a thread.
    pub(crate) fn start(parallelism: usize, spawn: &mut Spawn<'_>) -> Result<Self, ScheduleError> {
        if parallelism == 0 {
            return Err(ScheduleError::ZeroParallelism);
        }
        if parallelism > MAX_PARALLELISM {
            return Err(ScheduleError::ParallelismTooLarge {
                requested: parallelism,
            });
        }
        let mut pool = Self {
            shared: Arc::new(PoolShared::new()),
            threads: Vec::with_capacity(parallelism - 1),
            parallelism,
        };
        for index in 1..parallelism {
            let name = format!("skainet-schedule-{index}");
            let shared = Arc::clone(&pool.shared);
            let builder = thread::Builder::new().name(name.clone());
            match spawn(index, builder, Box::new(move || worker_main(shared))) {
                Ok(handle) => pool.threads.push(handle),
                // Dropping `pool` shuts down and joins the workers that did start.
                Err(err) => {
                    return Err(ScheduleError::SpawnFailed {
                        thread: name,
                        reason: err.to_string(),
                    })
                }
            }
        }
        Ok(pool)
    }

    /// A pool without workers: parallelism 1, every region inline. Cannot fail.
    pub(crate) fn inline() -> Self {
        Self {
            shared: Arc::new(PoolShared::new()),
            threads: Vec::new(),
            parallelism: 1,
        }
    }

    /// The most tasks a region on this pool runs at once (workers + the caller).
    pub(crate) fn parallelism(&self) -> usize {
        self.parallelism
    }

    /// The queue helpers are offered on.
    pub(crate) fn shared(&self) -> &PoolShared {
        &self.shared
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shut_down();
        let me = thread::current().id();
        for handle in self.threads.drain(..) {
            // The last handle may be dropped by a chunk running on one of our own workers;
            // that worker cannot join itself, and leaves on its own once its job returns.
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
    }
}
