//! Unit tests of the region and the pool, small enough for miri
//! (`cargo +nightly miri test --lib --features parallel`).

use alloc::vec::Vec;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use super::pool::Job;
use super::*;
use crate::schedule::{Chunks, Schedule, ScheduleExt};

/// Sizes that keep miri runs short.
const N: usize = if cfg!(miri) { 9 } else { 257 };

fn visits(schedule: &dyn Schedule, n: usize, grain: usize) -> (Vec<usize>, usize) {
    let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    let calls = AtomicUsize::new(0);
    schedule.for_range(n, grain, &|start, end| {
        calls.fetch_add(1, Ordering::Relaxed);
        for slot in &seen[start..end] {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    });
    (
        seen.into_iter().map(AtomicUsize::into_inner).collect(),
        calls.into_inner(),
    )
}

#[test]
fn region_visits_every_index_once_and_calls_the_body_once_per_chunk() {
    let pool = dedicated(3).unwrap();
    for grain in [1, 2, 100] {
        let (seen, calls) = visits(&pool, N, grain);
        assert_eq!(seen, alloc::vec![1; N]);
        assert_eq!(calls, Chunks::new(N, grain, 3).len());
    }
}

#[test]
fn chunk_writes_are_visible_to_the_caller_after_return() {
    let pool = dedicated(2).unwrap();
    let mut out = alloc::vec![0usize; N];
    pool.for_chunks_mut("fill", &mut out, 1, 1, &|units, chunk: &mut [usize]| {
        for (k, x) in chunk.iter_mut().enumerate() {
            *x = units.start + k + 1;
        }
    })
    .unwrap();
    assert_eq!(out, (1..=N).collect::<Vec<_>>());
}

#[test]
fn panic_in_a_chunk_is_resumed_on_the_caller_and_the_pool_survives() {
    let pool = dedicated(2).unwrap();
    let caught = catch_unwind(AssertUnwindSafe(|| {
        pool.for_range(4, 1, &|start, _end| {
            if start == 2 {
                std::panic::panic_any(7usize);
            }
        })
    }))
    .unwrap_err();
    assert_eq!(caught.downcast_ref::<usize>(), Some(&7));
    let (seen, _) = visits(&pool, 4, 1);
    assert_eq!(seen, alloc::vec![1; 4]);
}

#[test]
fn a_nested_region_runs_inline_on_the_thread_that_opened_it() {
    let pool = dedicated(2).unwrap();
    let inner_calls = AtomicUsize::new(0);
    pool.for_range(2, 1, &|_start, _end| {
        let outer = std::thread::current().id();
        pool.for_range(8, 1, &|start, end| {
            assert_eq!((start, end), (0, 8));
            assert_eq!(std::thread::current().id(), outer);
            inner_calls.fetch_add(1, Ordering::Relaxed);
        });
    });
    assert_eq!(inner_calls.into_inner(), 2);
}

/// Puts a job on a worker outside any region.
fn on_worker(pool: &PoolSchedule, job: impl FnOnce() + Send + 'static) {
    pool.pool()
        .shared()
        .push(Job::Detached(alloc::boxed::Box::new(job)), 1);
}

#[test]
fn every_worker_of_a_pool_opening_a_region_on_it_finishes() {
    // dedicated(3): two workers, both kept busy opening regions on their own pool, while the
    // test thread opens one too. Nobody is free to help; each caller drains its own queue.
    let pool = dedicated(3).unwrap();
    let (done, finished) = mpsc::channel();
    for _ in 0..2 {
        let pool2 = pool.clone();
        let done = done.clone();
        on_worker(&pool, move || {
            let (seen, _) = visits(&pool2, N, 1);
            done.send(seen == alloc::vec![1; N]).unwrap();
        });
    }
    let (seen, _) = visits(&pool, N, 1);
    assert_eq!(seen, alloc::vec![1; N]);
    assert!(finished.recv().unwrap());
    assert!(finished.recv().unwrap());
}

#[test]
fn a_helper_that_starts_after_the_region_returned_never_calls_the_body() {
    // The only worker is held until the region has returned, so its helper job starts late.
    let pool = dedicated(2).unwrap();
    let (release, gate) = mpsc::channel::<()>();
    let (started, worker_busy) = mpsc::channel::<()>();
    on_worker(&pool, move || {
        started.send(()).unwrap();
        gate.recv().unwrap();
    });
    worker_busy.recv().unwrap();
    let returned = Arc::new(AtomicBool::new(false));
    {
        let returned = Arc::clone(&returned);
        let body = move |_start: usize, _end: usize| {
            assert!(!returned.load(Ordering::SeqCst), "body called after return");
        };
        pool.for_range(2, 1, &body);
    }
    returned.store(true, Ordering::SeqCst);
    release.send(()).unwrap();
    // The stale helper job found nothing to claim; the pool keeps working.
    let (seen, _) = visits(&pool, 2, 1);
    assert_eq!(seen, alloc::vec![1, 1]);
}

#[test]
fn dropping_a_dedicated_pool_joins_its_workers() {
    let pool = dedicated(3).unwrap();
    let workers = Arc::new(());
    for _ in 0..2 {
        let token = Arc::clone(&workers);
        on_worker(&pool, move || drop(token));
    }
    drop(pool);
    // Both detached jobs ran (the queue is drained before shutdown) and their threads exited.
    assert_eq!(Arc::strong_count(&workers), 1);
}

#[test]
fn the_last_handle_dropped_on_a_worker_does_not_join_that_worker() {
    let pool = dedicated(3).unwrap();
    let last = pool.clone();
    let (dropped, was_dropped) = mpsc::channel();
    on_worker(&pool, move || {
        // Wait until the test thread's handle is gone, so this drop is the last one.
        while last.handles() > 1 {
            std::thread::yield_now();
        }
        drop(last);
        dropped.send(()).unwrap();
    });
    drop(pool);
    was_dropped.recv().unwrap();
}
