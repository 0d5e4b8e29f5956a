//! The latch a region's caller waits on: a count of chunks that have not ended yet.

use core::time::Duration;

use crate::sync::{poll_for, wait, AtomicUsize, Condvar, Mutex, Ordering, Polled};

/// Counts down to zero as chunks end (run, failed or skipped); the caller waits for zero.
///
/// # Happens-before
///
/// Every [`count_down`](CountLatch::count_down) is an `AcqRel` read-modify-write on the same
/// atomic, so the decrements form one release sequence: the caller's `Acquire` load that sees
/// zero (or the decrement of its own that reaches zero) synchronises with every earlier
/// decrement, and so with every write a chunk made before its thread counted it down. When the
/// caller blocks instead, the same holds through the mutex: the last decrement happens before
/// the finisher locks `sleeper`, which happens before the caller's re-check under that lock.
pub(crate) struct CountLatch {
    remaining: AtomicUsize,
    /// Whether the caller is blocked on `woken` (only then is a notification needed).
    sleeper: Mutex<bool>,
    woken: Condvar,
}

impl CountLatch {
    /// A latch that opens after `count` chunks have ended.
    pub(crate) fn new(count: usize) -> Self {
        Self {
            remaining: AtomicUsize::new(count),
            sleeper: Mutex::new(false),
            woken: Condvar::new(),
        }
    }

    /// Marks `ended` chunks as ended; `true` when this brought the count to zero.
    #[inline]
    pub(crate) fn count_down(&self, ended: usize) -> bool {
        ended > 0 && self.remaining.fetch_sub(ended, Ordering::AcqRel) == ended
    }

    /// Wakes the caller if it is blocked; called by the thread whose `count_down` reached zero.
    pub(crate) fn wake(&self) {
        let sleeping = self.sleeper.lock();
        if *sleeping {
            self.woken.notify_one();
        }
    }

    /// Whether every chunk has ended (`Acquire`: see the type's docs).
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        self.remaining.load(Ordering::Acquire) == 0
    }

    /// Returns once every chunk has ended: polls for up to `poll`, then blocks. Blocking costs
    /// the last chunk's thread a wake-up call and this one a wake-up's latency, so a caller
    /// that expects the chunks still running to end soon should poll about that long.
    pub(crate) fn wait(&self, poll: Duration) {
        if poll_for(poll, || self.is_open()) == Polled::Ready {
            return;
        }
        let mut sleeping = self.sleeper.lock();
        // Re-checked under the lock: the finisher decrements before it locks, so either we see
        // zero here or it sees `*sleeping == true` after we released the lock in `wait`.
        while !self.is_open() {
            *sleeping = true;
            sleeping = wait(&self.woken, sleeping);
        }
        *sleeping = false;
    }
}

/// Model checking of the latch alone. The region models reach the latch only through the
/// region's own bookkeeping, which spends loom's preemption budget before the latch's
/// orderings matter; here two chunks' writes meet the caller's read with nothing else around,
/// so a weakened ordering in `count_down` or `is_open` shows up as a data race on a non-atomic
/// cell at `LOOM_MAX_PREEMPTIONS=2`.
#[cfg(all(test, feature = "loom"))]
mod loom_models {
    use super::CountLatch;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// The latch and one non-atomic cell per helper, written before its `count_down`.
    struct Shared {
        latch: CountLatch,
        cells: [UnsafeCell<usize>; 2],
    }

    // SAFETY: helper `i` is the only writer of `cells[i]`, and the caller reads the cells only
    // after the latch opened; loom checks every access for that happens-before edge.
    unsafe impl Sync for Shared {}

    /// Runs `f` under loom with the env's `LOOM_MAX_PREEMPTIONS`, else a bound of 3.
    fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        builder.check(f);
    }

    /// The region's protocol on the latch alone: two helpers write, count down and wake; the
    /// caller counts its own chunk down and, unless that opened the latch, waits. Its reads
    /// must see both writes (and the wait must end: a lost wake-up is a loom deadlock).
    #[test]
    fn writes_before_count_down_happen_before_the_caller_reads() {
        model(|| {
            let shared = Arc::new(Shared {
                latch: CountLatch::new(3),
                cells: [UnsafeCell::new(0), UnsafeCell::new(0)],
            });
            let helpers: [_; 2] = core::array::from_fn(|i| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || {
                    // SAFETY: this helper is the only writer of cell `i` (see `Shared`).
                    shared.cells[i].with_mut(|p| unsafe { *p = i + 1 });
                    if shared.latch.count_down(1) {
                        shared.latch.wake();
                    }
                })
            });
            if !shared.latch.count_down(1) {
                shared.latch.wait(core::time::Duration::ZERO);
            }
            // SAFETY: the latch is open, so both helpers' writes are done (what this checks).
            let seen = shared.cells.each_ref().map(|c| c.with(|p| unsafe { *p }));
            assert_eq!(seen, [1, 2]);
            for helper in helpers {
                helper.join().unwrap();
            }
        });
    }
}
