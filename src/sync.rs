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

#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) use std::sync::Condvar;
#[cfg(feature = "loom")]
pub(crate) use loom::sync::Condvar;

/// Threads: std's, or loom's inside a model.
#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) use std::thread;
#[cfg(feature = "loom")]
pub(crate) use loom::thread;

/// `thread_local!`: std's, or loom's (which resets per model execution).
#[cfg(all(feature = "std", not(feature = "loom")))]
pub(crate) use std::thread_local;
#[cfg(feature = "loom")]
pub(crate) use loom::thread_local;

/// A value initialised once on first use, for process-wide statics (the kernel registry).
/// spin's, in every build: initialisation is a one-off that no loom model explores.
pub(crate) use spin::Once;
