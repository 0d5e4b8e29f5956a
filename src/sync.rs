//! The crate's only door to synchronisation primitives.
//!
//! Everything else in the crate imports its locks, atomics, threads and thread-locals from
//! here, so one switch decides what they are:
//!
//! * `std` (without `loom`): `std::sync`, `std::thread`, `std::thread_local!`;
//! * no `std`: `spin` locks and `core` atomics — there are no threads to spawn;
//! * `loom`: loom's model-checked versions of all of them, so the region code that the
//!   library ships is the code the models explore.
//!
//! Public handles (`Arc<dyn Schedule>`, `Arc<dyn TraceSink>`) always use `alloc`'s `Arc`:
//! they need unsized coercion, which loom's `Arc` cannot offer, and they carry no
//! synchronisation of their own that a model would need to see.
#![allow(dead_code, unused_imports)]

pub(crate) use alloc::sync::Arc;

#[cfg(not(feature = "loom"))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
#[cfg(feature = "loom")]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A process-wide counter handing out ids. It orders nothing between tasks, so it is core's
/// atomic under every build: loom's atomics cannot be `static` and work only inside a model.
pub(crate) struct IdCounter(core::sync::atomic::AtomicUsize);

impl IdCounter {
    pub(crate) const fn new() -> Self {
        Self(core::sync::atomic::AtomicUsize::new(0))
    }

    /// The next id: distinct from every other this counter gave.
    pub(crate) fn next(&self) -> usize {
        self.0.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
    }
}

/// A mutex whose `lock` never reports poisoning: a panic inside a critical section of this
/// crate leaves the data consistent (every critical section is a swap or a push), so the
/// next user may proceed.
pub(crate) struct Mutex<T: ?Sized> {
    inner: MutexInner<T>,
}

#[cfg(all(feature = "std", not(feature = "loom")))]
type MutexInner<T> = std::sync::Mutex<T>;
#[cfg(not(feature = "std"))]
type MutexInner<T> = spin::Mutex<T>;
#[cfg(feature = "loom")]
type MutexInner<T> = loom::sync::Mutex<T>;

#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;
#[cfg(not(feature = "std"))]
pub(crate) type MutexGuard<'a, T> = spin::MutexGuard<'a, T>;
#[cfg(feature = "loom")]
pub(crate) type MutexGuard<'a, T> = loom::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub(crate) fn new(value: T) -> Self {
        Self {
            inner: MutexInner::new(value),
        }
    }
}

impl<T> Mutex<T> {
    /// Consumes the mutex, returning its value (ignoring poisoning).
    pub(crate) fn into_inner(self) -> T {
        #[cfg(feature = "std")]
        {
            self.inner
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.into_inner()
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks, ignoring poisoning (see the type's docs).
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        #[cfg(feature = "std")]
        {
            self.inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        #[cfg(not(feature = "std"))]
        {
            self.inner.lock()
        }
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: core::fmt::Debug> core::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Mutex { .. }")
    }
}

#[cfg(feature = "loom")]
pub(crate) use loom::sync::Condvar;
#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) use std::sync::Condvar;

#[cfg(feature = "loom")]
pub(crate) use loom::thread;
/// Threads: std's, or loom's inside a model.
#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) use std::thread;

#[cfg(feature = "loom")]
pub(crate) use loom::thread_local;
/// `thread_local!`: std's, or loom's (which resets per model execution).
#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) use std::thread_local;

/// An `Arc` whose reference counting loom models: loom's inside a model (so a model sees when
/// region state is freed, and reports it if it leaks), `alloc`'s otherwise. Only for sized,
/// crate-internal state; public handles use [`Arc`].
#[cfg(not(feature = "loom"))]
pub(crate) use alloc::sync::Arc as TrackedArc;
#[cfg(feature = "loom")]
pub(crate) use loom::sync::Arc as TrackedArc;

/// Blocks on `condvar` until notified (or spuriously woken), ignoring poisoning like
/// [`Mutex::lock`].
#[cfg(feature = "std")]
pub(crate) fn wait<'a, T>(condvar: &Condvar, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    condvar
        .wait(guard)
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Spins with a CPU hint before a poller starts yielding (about a microsecond).
#[cfg(feature = "std")]
const SPINS: u32 = 64;

/// A yield that takes longer than this gave the core to another runnable thread: the core is
/// contended, and a poller that keeps yielding gets it back only a time slice later (ms),
/// while a sleeper that is woken runs again at once (the scheduler favours it).
#[cfg(feature = "std")]
const CONTENDED_YIELD: core::time::Duration = core::time::Duration::from_micros(100);

/// How [`poll_for`] ended.
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polled {
    /// `ready` returned `true`.
    Ready,
    /// The window passed.
    TimedOut,
    /// A yield gave the core away for longer than [`CONTENDED_YIELD`]: sleeping serves the
    /// poller better than polling on. `ready` may hold by now; the poller checks again.
    Contended,
}

/// Polls `ready` until it returns `true`, `window` of wall-clock time has passed, or the core
/// turns out to be contended (see [`Polled`]). The first microsecond or so spins with a CPU
/// hint, the rest yields to the OS between polls, so a poller on a busy machine gives its core
/// to whoever needs it.
/// Inside a loom model it does not poll at all (and returns `TimedOut`): time decides nothing
/// there, and every extra load would multiply the interleavings to explore; the waiter's
/// blocking path, which the models check, comes right after.
#[cfg(feature = "std")]
pub(crate) fn poll_for(window: core::time::Duration, mut ready: impl FnMut() -> bool) -> Polled {
    #[cfg(feature = "loom")]
    {
        let _ = (window, &mut ready);
        Polled::TimedOut
    }
    #[cfg(not(feature = "loom"))]
    {
        for _ in 0..SPINS {
            if ready() {
                return Polled::Ready;
            }
            core::hint::spin_loop();
        }
        let started = std::time::Instant::now();
        let mut now = started;
        loop {
            if ready() {
                return Polled::Ready;
            }
            if now.duration_since(started) >= window {
                return Polled::TimedOut;
            }
            std::thread::yield_now();
            let before = now;
            now = std::time::Instant::now();
            if now.duration_since(before) >= CONTENDED_YIELD {
                // Even if `ready` holds by now: the poller must learn that polling did not pay.
                return Polled::Contended;
            }
        }
    }
}

/// A process-wide value initialised once (std only; loom models build their pools locally).
#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) use std::sync::OnceLock;

/// A value initialised once on first use, for process-wide statics (the kernel registry).
/// spin's, in every build: initialisation is a one-off that no loom model explores.
pub(crate) use spin::Once;
