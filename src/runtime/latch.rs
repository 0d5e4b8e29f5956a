//! The latch a region's caller waits on: a count of chunks that have not ended yet.

use crate::sync::{spin_round, spin_rounds, wait, AtomicUsize, Condvar, Mutex, Ordering};

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

    /// Returns once every chunk has ended: polls briefly, then blocks.
    pub(crate) fn wait(&self) {
        for round in 0..spin_rounds() {
            if self.is_open() {
                return;
            }
            spin_round(round);
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
