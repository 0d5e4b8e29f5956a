//! A region: one shared queue of chunks that the caller drains and helpers may join.
//!
//! The caller claims chunk 0 before anyone else can, offers `count - 1` helper jobs to an
//! executor (a [`Pool`](super::pool) or rayon), runs chunk 0, then keeps claiming chunks until
//! the queue is empty, and finally waits — on the [`CountLatch`] — only for chunks that another
//! thread has already claimed and is running. A claimed chunk is running on a live thread, so
//! that wait always ends: a region finishes even if no helper ever starts.
//!
//! A helper job holds a [`TrackedArc`] of the region, so everything it can reach outlives it.
//! The only borrowed thing is the body, and a helper dereferences it only after a successful
//! claim; claims are impossible once the queue is empty, and the caller cannot return while a
//! claimed chunk has not ended (see [`Region::run_claimed`]). Chunk bounds come from
//! [`Chunks::get`], exact for every `n`; a panic anywhere in this machinery still pays every
//! claimed chunk into the latch, so it can neither hang the caller nor kill a worker.

use alloc::boxed::Box;
use core::any::Any;
use core::ops::Range;
use core::time::Duration;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::latch::CountLatch;
use super::nesting::RegionMark;
use crate::schedule::Chunks;
use crate::sync::{AtomicUsize, Mutex, Ordering, TrackedArc};

/// What a region runs on each chunk.
pub(crate) type Body<'a> = dyn Fn(usize, usize) + Sync + 'a;

/// A caught panic.
pub(crate) type Payload = Box<dyn Any + Send + 'static>;

/// The body with its lifetime erased, so that helper jobs can be `'static`.
struct ErasedBody(*const Body<'static>);

// SAFETY: the pointee is `Sync`, so calling it from any thread is fine; whether it is still
// alive when it is called is the claim protocol's business (see `Region::run_claimed`), not
// the thread's.
unsafe impl Send for ErasedBody {}
// SAFETY: as above; the pointer itself is never written after construction.
unsafe impl Sync for ErasedBody {}

/// Shared regions a thread keeps after they end, to build its next ones in (see [`shared`]):
/// one more than a helper of a two-thread pool and the queue's drained entry can still hold.
#[cfg(not(feature = "loom"))]
const SPARES: usize = 3;

#[cfg(not(feature = "loom"))]
std::thread_local! {
    /// This thread's ended regions, the newest first.
    static SPARE_REGIONS: core::cell::RefCell<[Option<TrackedArc<Region>>; SPARES]> =
        const { core::cell::RefCell::new([None, None, None]) };
}

/// `region` behind a shared pointer: one of this thread's ended regions that nobody else holds
/// any more, rewritten in place, else a new allocation. A caller running region after region
/// (a decoder's step) then allocates none. In loom builds, always a new one.
fn shared(region: Region) -> TrackedArc<Region> {
    #[cfg(not(feature = "loom"))]
    {
        let spare = SPARE_REGIONS.try_with(|spares| {
            let mut spares = spares.try_borrow_mut().ok()?;
            spares.iter_mut().find_map(|slot| {
                // Unique: every helper's clone and the queue's entry are gone, and their
                // drops (release) happen before this check (acquire).
                TrackedArc::get_mut(slot.as_mut()?)?;
                slot.take()
            })
        });
        if let Some(mut spare) = spare.ok().flatten() {
            if let Some(slot) = TrackedArc::get_mut(&mut spare) {
                *slot = region;
                return spare;
            }
        }
    }
    TrackedArc::new(region)
}

/// Keeps the ended `region` for [`shared`]: in the place [`shared`] took one from, else in
/// place of this thread's oldest spare. From its first region on, a thread keeps [`SPARES`]
/// of them (the first fills the others with ended regions of no chunks), so that its steady
/// state does not wait on chance to gather them.
fn keep(region: TrackedArc<Region>) {
    #[cfg(not(feature = "loom"))]
    {
        let _ = SPARE_REGIONS.try_with(|spares| {
            if let Ok(mut spares) = spares.try_borrow_mut() {
                if spares.iter().all(Option::is_none) {
                    for slot in spares.iter_mut().skip(1) {
                        *slot = Some(TrackedArc::new(region.ended()));
                    }
                }
                match spares.iter_mut().find(|slot| slot.is_none()) {
                    Some(slot) => *slot = Some(region),
                    None => {
                        spares.rotate_right(1);
                        spares[0] = Some(region);
                    }
                }
            }
        });
    }
    #[cfg(feature = "loom")]
    drop(region);
}

/// The state a region's caller and its helpers share.
pub(crate) struct Region {
    chunks: Chunks,
    /// The next chunk index to hand out; indices `>= chunks.len()` mean "nothing left".
    next: AtomicUsize,
    /// Counts chunks that ended (ran, panicked, or were skipped).
    latch: CountLatch,
    /// The first panic's payload.
    panic: Mutex<Option<Payload>>,
    body: ErasedBody,
    /// A chunk index whose run panics in the machinery, outside the body's `catch_unwind`
    /// (`usize::MAX`: none), so that tests can check such a panic still releases everyone.
    #[cfg(all(test, not(feature = "loom")))]
    machinery_fault: AtomicUsize,
}

/// How a region's caller began it, before the region was shared.
struct Start {
    /// When the caller began the region.
    #[cfg(not(feature = "loom"))]
    started: std::time::Instant,
    /// Whether its helpers are to be woken before its first chunk.
    #[cfg(not(feature = "loom"))]
    woken: bool,
    /// How long chunk 0 took, if the caller already ran it before sharing the region.
    #[cfg(not(feature = "loom"))]
    first: Option<Duration>,
}

impl Region {
    /// Runs `body` over `chunks` (at least two), offering `helpers` helper jobs through
    /// `offer`, and returns once every chunk has ended: `Err` with the first panic's payload if
    /// a chunk panicked (the chunks not yet claimed by then were skipped).
    ///
    /// `offer` only publishes the jobs; `wake` is asked to rouse sleeping helpers, and only when
    /// the chunks left after the caller's first one are worth a helper's late start (see
    /// [`worth_waking`]): a helper that is awake takes a published job by itself, and the
    /// caller can finish alone, so a region too short to pay for a wake-up never pays for one.
    /// A caller that does not wake anyone, while no helper is awake, and finds none joined
    /// during its first chunk claims the rest at once and runs it as one body call over their
    /// units: it would run them all anyway, and a body's per-call work is then paid once.
    ///
    /// When nobody can join before a wake-up (every helper sleeps and an offer wakes none, see
    /// [`Wake::offer_is_quiet`]), nothing is published until the first chunk shows the rest
    /// worth a wake-up: a region that stays on the caller costs two body calls and no shared
    /// state.
    ///
    /// Must not be called from inside a chunk (the schedule runs nested regions inline).
    pub(crate) fn run(
        chunks: Chunks,
        helpers: usize,
        body: &Body<'_>,
        offer: impl FnOnce(TrackedArc<Region>, usize),
        wake: &dyn Wake,
    ) -> Result<(), Payload> {
        let count = chunks.len();
        debug_assert!(count >= 2, "a region that does not fork runs inline");
        #[cfg(feature = "loom")]
        return Self::run_shared(chunks, helpers, body, offer, wake, Start {});
        #[cfg(not(feature = "loom"))]
        {
            let started = std::time::Instant::now();
            // A region after ones that were worth a wake-up wakes before its first chunk
            // rather than after it (a stream of large regions loses no chunk's time).
            // So does a region of fewer chunks than a full set of pieces per task: there the
            // first chunk is too large a share of the work to run it before deciding (a
            // region of one unit per task would otherwise run alone on a cold pool).
            let coarse = count < (helpers + 1).saturating_mul(PIECES_PER_TASK);
            let early = coarse || wake.expects_worth();
            if !early && wake.offer_is_quiet() && !wake.helpers_awake() {
                if let (Some(first), Some(last)) = (chunks.get(0), chunks.get(count - 1)) {
                    return Self::run_unshared(
                        chunks,
                        helpers,
                        body,
                        offer,
                        wake,
                        started,
                        (first, last),
                    );
                }
            }
            wake.starting(started);
            let start = Start {
                started,
                woken: early,
                first: None,
            };
            Self::run_shared(chunks, helpers, body, offer, wake, start)
        }
    }

    /// [`Region::run`] on a pool whose helpers all sleep: runs the first chunk `ends.0` on the
    /// caller, unpublished, and then the rest (up to `ends.1`) as one body call, unless the
    /// first chunk shows the rest worth a wake-up; only then is the region built, offered and
    /// its helpers woken. A region that stays on the caller skips the shared state (an
    /// allocation, the queue's lock, the latch), about a microsecond of a 10 µs region, and
    /// does not count as pool activity: the pool's idle time runs on through it.
    #[cfg(not(feature = "loom"))]
    fn run_unshared(
        chunks: Chunks,
        helpers: usize,
        body: &Body<'_>,
        offer: impl FnOnce(TrackedArc<Region>, usize),
        wake: &dyn Wake,
        started: std::time::Instant,
        ends: (Range<usize>, Range<usize>),
    ) -> Result<(), Payload> {
        let count = chunks.len();
        let run = |start: usize, end: usize| {
            let _mark = RegionMark::enter();
            catch_unwind(AssertUnwindSafe(|| body(start, end)))
        };
        let (first, last) = ends;
        let outcome = run(first.start, first.end);
        let first_time = started.elapsed();
        // The shared path's rule (see `run_shared`): against a verdict of "not worth it",
        // the first chunk must show twice the work.
        if outcome.is_ok() && worth_waking(first_time / 2, count - 1) {
            // The pool's idle time ends where the region began.
            wake.starting(started);
            let start = Start {
                started,
                woken: false,
                first: Some(first_time),
            };
            return Self::run_shared(chunks, helpers, body, offer, wake, start);
        }
        // A panic in the first chunk skips the rest, as a failed claimed chunk does.
        let ran = if outcome.is_ok() { count } else { 1 };
        let outcome = outcome.and_then(|()| run(first.end, last.end));
        let ended = std::time::Instant::now();
        // No `starting` or `ended`: the pool sat idle through this region, and its shared
        // state is left alone (its lines may sit in a sleeping worker's cache).
        wake.learn(worth_waking(
            ended.saturating_duration_since(started) / u32::try_from(ran).unwrap_or(u32::MAX),
            count - 1,
        ));
        outcome
    }

    /// [`Region::run`] with the region built and its helpers offered; from `start.first` on
    /// when the caller already ran chunk 0 unpublished (and found the rest worth a wake-up).
    fn run_shared(
        chunks: Chunks,
        helpers: usize,
        body: &Body<'_>,
        offer: impl FnOnce(TrackedArc<Region>, usize),
        wake: &dyn Wake,
        start: Start,
    ) -> Result<(), Payload> {
        let count = chunks.len();
        // SAFETY: only the lifetime changes (same layout and vtable). The erased pointer is
        // dereferenced only in `run_claimed`, whose argument shows it is still alive.
        let body = unsafe { core::mem::transmute::<*const Body<'_>, *const Body<'static>>(body) };
        let region = shared(Region {
            chunks,
            // Chunk 0 is the caller's before any helper exists.
            next: AtomicUsize::new(1),
            latch: CountLatch::new(count),
            panic: Mutex::new(None),
            body: ErasedBody(body),
            #[cfg(all(test, not(feature = "loom")))]
            machinery_fault: AtomicUsize::new(usize::MAX),
        });
        // From here on, whatever happens (even an unwind out of `offer` or out of the region
        // machinery), this frame is not left before every claimed chunk has ended:
        // `LatchShare::drop` waits for it. Chunk 0 is already claimed, so it is already owed.
        let mut caller = LatchShare {
            region: &region,
            ended: 1,
            caller: true,
            poll: Duration::ZERO,
        };
        offer(TrackedArc::clone(&region), helpers);
        {
            let _mark = RegionMark::enter();
            // Inside a model, time decides nothing: helpers are always woken, at once.
            #[cfg(feature = "loom")]
            {
                let _ = start;
                wake.wake(helpers);
                caller.ended += region.run_claimed(0..1);
            }
            // Chunks the caller ran itself (the first included).
            let mut ran = 1usize;
            #[cfg(not(feature = "loom"))]
            {
                if start.woken {
                    wake.wake(helpers);
                }
                let first = match start.first {
                    // Chunk 0 ran before the region was published and found the rest worth
                    // a wake-up.
                    Some(first) => {
                        wake.wake(helpers);
                        first
                    }
                    None => {
                        caller.ended += region.run_claimed(0..1);
                        start.started.elapsed()
                    }
                };
                // A helper's last chunk should end within about one chunk's time of the
                // caller running out of chunks: poll that long before sleeping.
                caller.poll = first.saturating_mul(2).clamp(POLL_LEAST, POLL_MOST);
                if !start.woken && start.first.is_none() {
                    // The last region was not worth a wake-up (or this one would have woken
                    // its helpers already): against that verdict, one first chunk, maybe run
                    // cold, must show twice the work. A region near the threshold otherwise
                    // woke a helper that arrived late, on a cold core, to claim one of the last
                    // chunks and hold the caller up (cold 32 × 128 × 1 attention: 46 → 83 µs).
                    if worth_waking(first / 2, region.unclaimed()) {
                        wake.wake(helpers);
                    } else if let Some(rest) = (!wake.helpers_awake())
                        .then(|| region.claim_rest_untouched())
                        .flatten()
                    {
                        // Nobody joined during the first piece, every helper sleeps and none
                        // will be woken: the rest is the caller's, and one body call pays the
                        // body's own per-call work (scratch, bookkeeping) once, not per piece.
                        caller.ended += rest.len();
                        ran += rest.len();
                        caller.ended += region.run_claimed(rest);
                    }
                }
            }
            while let Some(index) = region.claim() {
                caller.ended += 1;
                ran += 1;
                caller.ended += region.run_claimed(index..index + 1);
            }
            // The verdict the next region starts from: the caller's mean chunk time, not its
            // first chunk's alone. A first chunk run cold, or beside a wake-up that the
            // hypervisor makes the caller's core pay for, can take several chunks' time; judged
            // on it, a 10 µs region looked worth a wake-up, so the next one woke its helper at
            // once, whose wake-up slowed that one's first chunk in turn, and a stream of tiny
            // regions each paid a wake-up (cold 8 × 128 × 1 attention: 9.4 → 20 µs).
            #[cfg(not(feature = "loom"))]
            wake.learn(worth_waking(
                start.started.elapsed() / u32::try_from(ran).unwrap_or(u32::MAX),
                count - 1,
            ));
            #[cfg(feature = "loom")]
            let _ = ran;
        }
        drop(caller);
        #[cfg(not(feature = "loom"))]
        wake.ended(std::time::Instant::now());
        let first_panic = region.panic.lock().take();
        keep(region);
        match first_panic {
            None => Ok(()),
            Some(payload) => Err(payload),
        }
    }

    /// A region of no chunks, ended, with this one's (never called) body pointer: a spare for
    /// [`keep`].
    #[cfg(not(feature = "loom"))]
    fn ended(&self) -> Region {
        Region {
            chunks: Chunks::new(0, 1, 1),
            next: AtomicUsize::new(0),
            latch: CountLatch::new(0),
            panic: Mutex::new(None),
            body: ErasedBody(self.body.0),
            #[cfg(all(test, not(feature = "loom")))]
            machinery_fault: AtomicUsize::new(usize::MAX),
        }
    }

    /// What a helper job does: claims and runs chunks until none are left, then counts them
    /// down. A helper that starts after the queue emptied touches only this (kept alive) state.
    ///
    /// Never unwinds: a panic in the machinery itself is recorded like a chunk's (and resumed on
    /// the caller), and every chunk this helper claimed is still counted down, so neither the
    /// caller nor the worker that ran the job is lost.
    pub(crate) fn help(&self) {
        if self.is_drained() {
            return;
        }
        let mut share = LatchShare {
            region: self,
            ended: 0,
            caller: false,
            poll: Duration::ZERO,
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let _mark = RegionMark::enter();
            while let Some(index) = self.claim() {
                // Owed from the moment of the claim: if running it unwinds, the share's drop
                // still counts it (by then it is no longer running).
                share.ended += 1;
                share.ended += self.run_claimed(index..index + 1);
            }
        }));
        if let Err(payload) = outcome {
            share.ended += self.fail(payload);
        }
    }

    /// Whether every chunk has been claimed (or skipped): a queued helper job for this region
    /// has nothing left to do.
    #[inline]
    pub(crate) fn is_drained(&self) -> bool {
        self.next.load(Ordering::Relaxed) >= self.chunks.len()
    }

    /// How many chunks nobody has claimed yet.
    #[cfg(not(feature = "loom"))]
    fn unclaimed(&self) -> usize {
        self.chunks
            .len()
            .saturating_sub(self.next.load(Ordering::Relaxed))
    }

    /// Claims the next chunk. `Relaxed` suffices: the claim only needs `next`'s modification
    /// order (every index is handed out once); what a chunk wrote is published by the latch.
    #[inline]
    fn claim(&self) -> Option<usize> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.chunks.len()).then_some(index)
    }

    /// Claims every chunk after the caller's first, if nobody has claimed one yet; `None` once
    /// a helper has joined (it and the caller then share what is left, piece by piece).
    #[cfg(not(feature = "loom"))]
    fn claim_rest_untouched(&self) -> Option<Range<usize>> {
        let count = self.chunks.len();
        self.next
            .compare_exchange(1, count, Ordering::Relaxed, Ordering::Relaxed)
            .ok()
            .map(|_| 1..count)
    }

    /// Marks every chunk not yet claimed as skipped; returns how many that was. A claim that
    /// comes after this in `next`'s modification order finds the queue empty.
    fn skip_unclaimed(&self) -> usize {
        let count = self.chunks.len();
        let before = self.next.fetch_max(count, Ordering::Relaxed);
        count.saturating_sub(before)
    }

    /// Runs the claimed chunks `span` (consecutive, non-empty) as one body call over their
    /// units, catching a panic (the body's, or one in computing the bounds); returns how many
    /// unclaimed chunks a panic skipped (the claimed ones are counted by whoever claimed them).
    fn run_claimed(&self, span: Range<usize>) -> usize {
        #[cfg(all(test, not(feature = "loom")))]
        {
            let fault = self.machinery_fault.load(Ordering::Relaxed);
            if span.contains(&fault) {
                std::panic::panic_any(MachineryFault(fault));
            }
        }
        // SAFETY: every index of `span` was claimed by this thread (`next` handed it out, or it
        // is chunk 0 and this is the caller). The latch started at `chunks.len()` and opens only
        // after every index has been counted down by the thread that claimed or skipped it;
        // this thread counts `span` down only after this call has returned or unwound (its
        // `LatchShare` is dropped after it). The caller stays inside `Region::run` (in
        // `LatchShare::drop`) until the latch is open, and the body it borrowed outlives that
        // frame. So the body is alive for the whole call.
        let body = unsafe { &*self.body.0 };
        let run = || {
            // Claimed indices are below `chunks.len()`, so `get` always has their chunks, and
            // consecutive chunks are back to back.
            let last = span
                .end
                .checked_sub(1)
                .and_then(|last| self.chunks.get(last));
            if let (Some(first), Some(last)) = (self.chunks.get(span.start), last) {
                body(first.start, last.end);
            }
        };
        match catch_unwind(AssertUnwindSafe(run)) {
            Ok(()) => 0,
            Err(payload) => self.fail(payload),
        }
    }

    /// Records a panic (the first one wins) and skips the unclaimed chunks.
    fn fail(&self, payload: Payload) -> usize {
        let skipped = self.skip_unclaimed();
        let loser = {
            let mut slot = self.panic.lock();
            match *slot {
                None => {
                    *slot = Some(payload);
                    None
                }
                Some(_) => Some(payload),
            }
        };
        // A payload's destructor may itself panic; it must not take a worker (and the latch
        // count it owes) down with it.
        let _ = catch_unwind(AssertUnwindSafe(move || drop(loser)));
        skipped
    }
}

/// The least work, in time on the caller alone, that pays for waking a sleeping helper: a
/// woken thread starts tens of microseconds later (the wake-up, then a core and a warm cache),
/// and it shortens the region only by half of what is left when it arrives. Below this the
/// caller finishes alone and the wake-up's own cost (a system call on the caller) is saved.
#[cfg(not(feature = "loom"))]
pub(crate) const WAKE_WORTH: Duration = Duration::from_micros(50);

/// Whether `unclaimed` chunks, each estimated to take as long as the caller's first one took
/// (`first`), hold enough work to wake a sleeping helper for: at least [`WAKE_WORTH`].
#[cfg(not(feature = "loom"))]
pub(crate) fn worth_waking(first: Duration, unclaimed: usize) -> bool {
    unclaimed > 0
        && first.saturating_mul(u32::try_from(unclaimed).unwrap_or(u32::MAX)) >= WAKE_WORTH
}

/// The least and most time a caller polls for its helpers' last chunks before it sleeps:
/// sleeping costs the helper that ends last a wake-up call (about 10 µs on a virtual machine)
/// and the caller as much again before it runs.
#[cfg(not(feature = "loom"))]
const POLL_LEAST: Duration = Duration::from_micros(20);
#[cfg(not(feature = "loom"))]
const POLL_MOST: Duration = Duration::from_millis(1);

/// How many chunks a region of `tasks` tasks cuts `n` units into: up to [`PIECES_PER_TASK`]
/// per task, each still at least `grain` units, and never fewer than the tasks'
/// [`Chunks::new`]`(n, grain, tasks)`. More chunks than tasks let whoever is running take the
/// work a late helper would have had, so a helper that starts late delays the caller by one
/// small chunk at most, not by half the region.
pub(crate) fn pieces(n: usize, grain: usize, tasks: usize) -> Chunks {
    let fit = n / grain.max(1);
    let count = tasks.saturating_mul(PIECES_PER_TASK).min(fit);
    if count <= tasks {
        Chunks::new(n, grain, tasks)
    } else {
        Chunks::new(n, 1, count)
    }
}

/// The most chunks per task a region cuts its units into (see [`pieces`]).
pub(crate) const PIECES_PER_TASK: usize = 4;

/// How a region rouses sleeping helpers, and what it remembers about the last region.
pub(crate) trait Wake {
    /// Wakes up to `helpers` sleeping helpers.
    fn wake(&self, helpers: usize);

    /// Whether the regions before this one were worth a wake-up (a pool asks for the last
    /// two): then the next one wakes its helpers before its first chunk instead of after it.
    #[cfg_attr(feature = "loom", allow(dead_code))] // models always wake at once
    fn expects_worth(&self) -> bool {
        false
    }

    /// Records whether this region was worth a wake-up, whoever ran its chunks.
    #[cfg_attr(feature = "loom", allow(dead_code))]
    fn learn(&self, worth: bool) {
        let _ = worth;
    }

    /// Whether some helper is awake (running or polling) and so may join a region late
    /// without a wake-up; `false` when not known.
    #[cfg_attr(feature = "loom", allow(dead_code))]
    fn helpers_awake(&self) -> bool {
        false
    }

    /// Whether offering a region's helper jobs wakes nobody, so that a region may hold them
    /// back until it decides to wake; `false` for an executor that wakes its threads when it
    /// is given work (rayon's), which must be offered the jobs at once to be of any help.
    #[cfg_attr(feature = "loom", allow(dead_code))]
    fn offer_is_quiet(&self) -> bool {
        false
    }

    /// Notes that a region that involves the pool begins at `now` (a pool measures how long it
    /// sat idle before it; a region that stays on its caller of a sleeping pool leaves it idle).
    #[cfg(not(feature = "loom"))]
    fn starting(&self, now: std::time::Instant) {
        let _ = now;
    }

    /// Notes that a region ended at `now`.
    #[cfg(not(feature = "loom"))]
    fn ended(&self, now: std::time::Instant) {
        let _ = now;
    }
}

/// A closure wakes and remembers nothing.
impl<F: Fn(usize)> Wake for F {
    fn wake(&self, helpers: usize) {
        self(helpers);
    }
}

/// What one thread owes the latch: the chunks it claimed (run or not) plus the ones its
/// failures skipped. Dropping it pays the debt — also while unwinding — and, for the caller,
/// is the wait; a helper that brings the count to zero wakes the caller.
struct LatchShare<'a> {
    region: &'a Region,
    ended: usize,
    caller: bool,
    /// How long the caller polls the latch before it sleeps.
    poll: Duration,
}

impl Drop for LatchShare<'_> {
    fn drop(&mut self) {
        let region = self.region;
        if self.caller {
            // Normally the queue is empty already; on an unwind this skips what is left so that
            // the latch can open without any helper.
            self.ended += region.skip_unclaimed();
            if !region.latch.count_down(self.ended) {
                region.latch.wait(self.poll);
            }
        } else if region.latch.count_down(self.ended) {
            region.latch.wake();
        }
    }
}

/// The payload of a panic injected into the region machinery by a test.
#[cfg(all(test, not(feature = "loom")))]
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MachineryFault(pub(crate) usize);

#[cfg(all(test, not(feature = "loom")))]
impl Region {
    /// Makes the run of chunk `index` panic outside the body's `catch_unwind`, on whichever
    /// thread claimed it.
    pub(crate) fn inject_machinery_fault(&self, index: usize) {
        self.machinery_fault.store(index, Ordering::Relaxed);
    }
}
