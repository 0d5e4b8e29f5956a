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
//! claimed chunk has not ended (see [`Region::run_claimed`]).

use alloc::boxed::Box;
use core::any::Any;
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
}

impl Region {
    /// Runs `body` over `chunks` (at least two), offering `chunks.len() - 1` helper jobs
    /// through `offer`, and returns once every chunk has ended: `Err` with the first panic's
    /// payload if a chunk panicked (the chunks not yet claimed by then were skipped).
    ///
    /// Must not be called from inside a chunk (the schedule runs nested regions inline).
    pub(crate) fn run(
        chunks: Chunks,
        body: &Body<'_>,
        offer: impl FnOnce(TrackedArc<Region>, usize),
    ) -> Result<(), Payload> {
        let count = chunks.len();
        debug_assert!(count >= 2, "a region that does not fork runs inline");
        // SAFETY: only the lifetime changes (same layout and vtable). The erased pointer is
        // dereferenced only in `run_claimed`, whose argument shows it is still alive.
        let body = unsafe { core::mem::transmute::<*const Body<'_>, *const Body<'static>>(body) };
        let region = TrackedArc::new(Region {
            chunks,
            // Chunk 0 is the caller's before any helper exists.
            next: AtomicUsize::new(1),
            latch: CountLatch::new(count),
            panic: Mutex::new(None),
            body: ErasedBody(body),
        });
        // From here on, whatever happens (even an unwind out of `offer`), this frame is not
        // left before every claimed chunk has ended: `CallerDrain::drop` waits for it.
        let mut caller = CallerDrain {
            region: &region,
            ended: 0,
            owes_first: true,
        };
        offer(TrackedArc::clone(&region), count - 1);
        {
            let _mark = RegionMark::enter();
            caller.owes_first = false;
            caller.ended += region.run_claimed(0);
            while let Some(index) = region.claim() {
                caller.ended += region.run_claimed(index);
            }
        }
        drop(caller);
        let first_panic = region.panic.lock().take();
        match first_panic {
            None => Ok(()),
            Some(payload) => Err(payload),
        }
    }

    /// What a helper job does: claims and runs chunks until none are left, then counts them
    /// down. A helper that starts after the queue emptied touches only this (kept alive) state.
    pub(crate) fn help(&self) {
        if self.is_drained() {
            return;
        }
        let _mark = RegionMark::enter();
        let mut ended = 0;
        while let Some(index) = self.claim() {
            ended += self.run_claimed(index);
        }
        if self.latch.count_down(ended) {
            self.latch.wake();
        }
    }

    /// Whether every chunk has been claimed (or skipped): a queued helper job for this region
    /// has nothing left to do.
    #[inline]
    pub(crate) fn is_drained(&self) -> bool {
        self.next.load(Ordering::Relaxed) >= self.chunks.len()
    }

    /// Claims the next chunk. `Relaxed` suffices: the claim only needs `next`'s modification
    /// order (every index is handed out once); what a chunk wrote is published by the latch.
    #[inline]
    fn claim(&self) -> Option<usize> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        (index < self.chunks.len()).then_some(index)
    }

    /// Marks every chunk not yet claimed as skipped; returns how many that was. A claim that
    /// comes after this in `next`'s modification order finds the queue empty.
    fn skip_unclaimed(&self) -> usize {
        let count = self.chunks.len();
        let before = self.next.fetch_max(count, Ordering::Relaxed);
        count.saturating_sub(before)
    }

    /// Runs claimed chunk `index`, catching a panic; returns how many chunks ended (this one,
    /// plus the unclaimed ones a panic skipped). Never unwinds.
    fn run_claimed(&self, index: usize) -> usize {
        let chunk = self.chunks.chunk_len();
        let start = index * chunk;
        let end = (start + chunk).min(self.chunks.units());
        // SAFETY: `index` was claimed by this thread (`next` handed it out, or it is chunk 0
        // and this is the caller). The latch started at `chunks.len()` and opens only after
        // every index has been counted down by the thread that claimed or skipped it; this
        // thread counts `index` down only after this call returns. The caller stays inside
        // `Region::run` (in `CallerDrain::drop`) until the latch is open, and the body it
        // borrowed outlives that frame. So the body is alive for the whole call.
        let body = unsafe { &*self.body.0 };
        match catch_unwind(AssertUnwindSafe(|| body(start, end))) {
            Ok(()) => 1,
            Err(payload) => 1 + self.fail(payload),
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

/// The caller's share of the latch; dropping it is the caller's wait.
struct CallerDrain<'a> {
    region: &'a Region,
    ended: usize,
    /// Chunk 0 is claimed at construction; if we unwind before running it, it counts as skipped.
    owes_first: bool,
}

impl Drop for CallerDrain<'_> {
    fn drop(&mut self) {
        let region = self.region;
        if self.owes_first {
            self.ended += 1;
        }
        // Normally the queue is empty already; on an unwind this skips what is left so that
        // the latch can open without any helper.
        self.ended += region.skip_unclaimed();
        if !region.latch.count_down(self.ended) {
            region.latch.wait();
        }
    }
}
