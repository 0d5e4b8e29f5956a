//! Model checking of the threaded schedule's region with loom.
//!
//! Under the `loom` feature the crate's sync shim (locks, atomics, threads, thread-locals and
//! the region's reference count) is loom's, so these models explore the interleavings of the
//! very code the library ships. Run:
//!
//! ```text
//! LOOM_MAX_PREEMPTIONS=2 cargo test --release --features loom --target-dir target/loom
//! ```
//!
//! (Without `LOOM_MAX_PREEMPTIONS` the models use a bound of 3.) Each model stays within
//! loom's thread limit: the test thread plus at most two workers. The latch's orderings are
//! checked by a smaller model of the latch alone in `src/runtime/latch.rs`, which the same
//! command runs; `features.md` lists the mutations each model catches.
#![cfg(feature = "loom")]

use std::panic::{catch_unwind, AssertUnwindSafe};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use skainet_schedule::{model_hooks, PoolSchedule};
use skainet_schedule::{Schedule, ScheduleExt};

/// Runs `f` under loom with a preemption bound (the env's `LOOM_MAX_PREEMPTIONS`, else 3).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// A model's pool: shut down and joined when the model ends normally, leaked when it unwinds
/// from a failed assertion. Loom runs every model thread on one OS thread, so while one of them
/// unwinds, a lock another one releases is poisoned, and the shutdown's next lock would panic
/// inside the unwind — aborting the test binary and hiding every other model's result. A
/// failed model's execution is abandoned anyway, so leaking its pool loses nothing.
struct ModelPool(Option<PoolSchedule>);

impl ModelPool {
    fn dedicated(parallelism: usize) -> Self {
        Self(Some(skainet_schedule::dedicated(parallelism).unwrap()))
    }

    fn share(&self) -> Self {
        Self(Some(PoolSchedule::clone(self)))
    }
}

impl std::ops::Deref for ModelPool {
    type Target = PoolSchedule;

    fn deref(&self) -> &PoolSchedule {
        self.0.as_ref().expect("present until dropped")
    }
}

impl Drop for ModelPool {
    fn drop(&mut self) {
        if std::thread::panicking() {
            std::mem::forget(self.0.take());
        }
    }
}

/// The payload of the model's deliberate panics; kept out of the output.
struct Deliberate;

fn quiet_deliberate_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Deliberate>().is_none() {
                default(info);
            }
        }));
    });
}

/// (a) What a helper's chunk wrote is visible to the caller after the region returns: loom
/// checks every `UnsafeCell` access for a happens-before edge from the conflicting one.
#[test]
fn helper_writes_happen_before_the_region_returns() {
    model(|| {
        let pool = ModelPool::dedicated(2);
        let cells = [UnsafeCell::new(0usize), UnsafeCell::new(0usize)];
        struct Cells<'a>(&'a [UnsafeCell<usize>; 2]);
        // SAFETY: chunk `i` is the only writer of cell `i` during the region (loom checks it).
        unsafe impl Sync for Cells<'_> {}
        let shared = Cells(&cells);
        pool.for_range(2, 1, &|start, end| {
            let shared = &shared;
            for i in start..end {
                // SAFETY: the region hands index `i` to exactly one chunk.
                shared.0[i].with_mut(|p| unsafe { *p = i + 1 });
            }
        });
        // SAFETY: the region has returned; no chunk runs any more.
        let read: Vec<usize> = cells.iter().map(|c| c.with(|p| unsafe { *p })).collect();
        assert_eq!(read, [1, 2]);
    });
}

/// (b) A panicking chunk skips the chunks nobody claimed yet, and the caller resumes the panic
/// only after every claimed chunk has finished.
#[test]
fn a_panic_skips_unclaimed_chunks_and_waits_for_claimed_ones() {
    quiet_deliberate_panics();
    model(|| {
        let pool = ModelPool::dedicated(3);
        let started: [AtomicBool; 3] = Default::default();
        let finished: [AtomicBool; 3] = Default::default();
        let on_caller: [AtomicBool; 3] = Default::default();
        let caller = thread::current().id();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            pool.for_range(3, 1, &|start, _| {
                started[start].store(true, Ordering::Relaxed);
                on_caller[start].store(thread::current().id() == caller, Ordering::Relaxed);
                if start == 1 {
                    std::panic::panic_any(Deliberate);
                }
                finished[start].store(true, Ordering::Relaxed);
            });
        }));
        let payload = outcome.expect_err("the panic reaches the caller");
        assert!(payload.downcast_ref::<Deliberate>().is_some());
        let load = |flags: &[AtomicBool; 3], i: usize| flags[i].load(Ordering::Relaxed);
        // Every chunk that started (except the panicking one) has finished by now.
        for i in [0, 2] {
            assert_eq!(load(&started, i), load(&finished, i), "chunk {i}");
        }
        assert!(
            load(&started, 0) && load(&on_caller, 0),
            "the caller runs chunk 0"
        );
        // The caller claims in order: if it ran the panicking chunk 1 itself, chunk 2 was
        // either claimed by a worker before the panic, or skipped — never run by the caller.
        if load(&on_caller, 1) {
            assert!(!(load(&started, 2) && load(&on_caller, 2)));
        }
        drop(pool);
    });
}

/// (b') The same with `try_for_range` and an `Err`.
#[test]
fn an_err_is_returned_after_claimed_chunks_finished() {
    model(|| {
        let pool = ModelPool::dedicated(2);
        let started: [AtomicBool; 2] = Default::default();
        let finished: [AtomicBool; 2] = Default::default();
        let result = pool.try_for_range(2, 1, &|start, _| {
            started[start].store(true, Ordering::Relaxed);
            if start == 0 {
                return Err("chunk 0");
            }
            finished[start].store(true, Ordering::Relaxed);
            Ok(())
        });
        assert_eq!(result, Err("chunk 0"));
        assert_eq!(
            started[1].load(Ordering::Relaxed),
            finished[1].load(Ordering::Relaxed)
        );
    });
}

/// (c) A region opened inside a chunk runs inline, as one `body(0, n)` on the same thread.
#[test]
fn a_nested_region_runs_inline() {
    model(|| {
        let pool = ModelPool::dedicated(2);
        let inner_calls = AtomicUsize::new(0);
        pool.for_range(2, 1, &|_, _| {
            let outer = thread::current().id();
            pool.for_range(4, 1, &|start, end| {
                assert_eq!((start, end), (0, 4));
                assert_eq!(thread::current().id(), outer);
                inner_calls.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(inner_calls.load(Ordering::Relaxed), 2);
    });
}

/// (d) Both workers of a two-worker pool open a region on that same pool at once (nobody is
/// left to help): both regions finish.
#[test]
fn both_workers_opening_regions_on_their_own_pool_finish() {
    model(|| {
        let pool = ModelPool::dedicated(3);
        let done = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let mine = pool.share();
            let done = Arc::clone(&done);
            model_hooks::run_on_worker(&pool, move || {
                let visited = AtomicUsize::new(0);
                mine.for_range(2, 1, &|start, end| {
                    visited.fetch_add(end - start, Ordering::Relaxed);
                });
                assert_eq!(visited.load(Ordering::Relaxed), 2);
                drop(mine);
                done.fetch_add(1, Ordering::Release);
            });
        }
        while done.load(Ordering::Acquire) < 2 {
            thread::yield_now();
        }
        drop(pool);
    });
}

/// (e) A helper job that starts after its region returned never calls the body (whose frame is
/// gone) and leaves the region state to be freed exactly once (loom's `Arc` reports a leak or
/// an unsynchronised free). Here the only worker is held by another job until the region has
/// returned, so its helper job always starts late.
#[test]
fn a_helper_held_until_the_region_returned_touches_nothing_freed() {
    model(|| {
        let pool = ModelPool::dedicated(2);
        let returned = Arc::new(AtomicBool::new(false));
        {
            let returned = Arc::clone(&returned);
            model_hooks::run_on_worker(&pool, move || {
                while !returned.load(Ordering::Acquire) {
                    thread::yield_now();
                }
            });
        }
        {
            let returned = &returned;
            let body = move |_: usize, _: usize| {
                assert!(
                    !returned.load(Ordering::Acquire),
                    "body called after return"
                );
            };
            pool.for_range(2, 1, &body);
        }
        returned.store(true, Ordering::Release);
        drop(pool);
    });
}

/// (e') The same with a free worker: whenever its helper job starts, it never calls the body
/// after the region returned.
#[test]
fn a_late_helper_touches_nothing_freed() {
    model(|| {
        let pool = ModelPool::dedicated(2);
        let returned = AtomicBool::new(false);
        // The body outlives the pool (and so every helper), so that a late call would be
        // caught by the flag rather than be undefined behaviour.
        let body = |_: usize, _: usize| {
            assert!(
                !returned.load(Ordering::Acquire),
                "body called after return"
            );
        };
        pool.for_range(2, 1, &body);
        returned.store(true, Ordering::Release);
        drop(pool);
    });
}

/// (f) A region with more pieces than tasks (three units on a two-task pool: three pieces, one
/// helper): caller and helper claim from one queue, every piece runs exactly once, and what
/// the helper wrote is visible when the region returns, whichever pieces it took.
#[test]
fn more_pieces_than_tasks_each_run_once_and_are_visible_at_return() {
    model(|| {
        let pool = ModelPool::dedicated(2);
        let cells = [
            UnsafeCell::new(0usize),
            UnsafeCell::new(0usize),
            UnsafeCell::new(0usize),
        ];
        struct Cells<'a>(&'a [UnsafeCell<usize>; 3]);
        // SAFETY: piece `i` is the only writer of cell `i` during the region (loom checks it).
        unsafe impl Sync for Cells<'_> {}
        let shared = Cells(&cells);
        let calls = AtomicUsize::new(0);
        pool.for_range(3, 1, &|start, end| {
            let shared = &shared;
            calls.fetch_add(1, Ordering::Relaxed);
            for i in start..end {
                // SAFETY: the region hands index `i` to exactly one piece; a second write
                // would be a race loom reports.
                shared.0[i].with_mut(|p| unsafe { *p += i + 1 });
            }
        });
        // SAFETY: the region has returned; no piece runs any more.
        let read: Vec<usize> = cells.iter().map(|c| c.with(|p| unsafe { *p })).collect();
        assert_eq!(read, [1, 2, 3]);
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        drop(pool);
    });
}
