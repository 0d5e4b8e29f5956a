//! First-failure semantics on real threads: a panic or an `Err` in chunk 2 of 4.
#![cfg(all(feature = "parallel", not(feature = "loom")))]

mod runtime_support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use runtime_support::{deliberate_panic, quiet_deliberate_panics, visit, watchdog, Deliberate};
use skainet_schedule::PoolSchedule;
use skainet_schedule::{Schedule, ScheduleExt};

/// Per-chunk flags of a 4-chunk region.
#[derive(Default)]
struct Marks {
    started: [AtomicBool; 4],
    finished: [AtomicBool; 4],
}

impl Marks {
    fn started(&self) -> [bool; 4] {
        self.started.each_ref().map(|f| f.load(Ordering::SeqCst))
    }
    fn finished(&self) -> [bool; 4] {
        self.finished.each_ref().map(|f| f.load(Ordering::SeqCst))
    }
}

/// Occupies all three workers of a `dedicated(4)` pool with a region opened from another
/// thread, until the returned closure is called. While they are held, a region opened by the
/// test thread gets no helper: its chunks are claimed in order by the caller alone.
fn hold_every_worker(pool: &PoolSchedule) -> impl FnOnce() {
    let all_in = Arc::new(Barrier::new(5));
    let release = Arc::new(Barrier::new(4));
    let holder = {
        let pool = pool.clone();
        let all_in = Arc::clone(&all_in);
        let release = Arc::clone(&release);
        thread::spawn(move || {
            // The holder thread runs chunk 0, so chunks 1..4 must be taken by the 3 workers
            // before the barrier (4 chunks + the test thread) opens.
            pool.for_range(4, 1, &|start, _| {
                if start == 0 {
                    all_in.wait();
                } else {
                    all_in.wait();
                    release.wait();
                }
            });
        })
    };
    all_in.wait();
    move || {
        // The holder's own chunk has returned; release the three workers.
        release.wait();
        holder.join().unwrap();
    }
}

fn region_with_panicking_chunk_two(pool: &PoolSchedule, marks: &Marks) -> Deliberate {
    let caught = catch_unwind(AssertUnwindSafe(|| {
        pool.for_range(4, 1, &|start, _| {
            marks.started[start].store(true, Ordering::SeqCst);
            if start == 2 {
                deliberate_panic(2);
            }
            // Long enough that a caller returning early would see `finished` unset.
            thread::sleep(Duration::from_millis(20));
            marks.finished[start].store(true, Ordering::SeqCst);
        });
    }))
    .expect_err("the panic reaches the caller");
    *caught
        .downcast_ref::<Deliberate>()
        .expect("the chunk's own payload")
}

#[test]
fn a_panic_cancels_unclaimed_chunks_and_is_resumed_after_the_claimed_ones() {
    let _dog = watchdog("panic with held workers", Duration::from_secs(30));
    quiet_deliberate_panics();
    let pool = skainet_schedule::dedicated(4).unwrap();
    let release = hold_every_worker(&pool);
    let marks = Marks::default();
    assert_eq!(
        region_with_panicking_chunk_two(&pool, &marks),
        Deliberate(2)
    );
    release();
    // The caller claimed 0, 1, 2 in order; 2 panicked; 3 was never claimed.
    assert_eq!(marks.started(), [true, true, true, false]);
    assert_eq!(marks.finished(), [true, true, false, false]);
    let (seen, calls) = visit(&pool, 100, 1);
    // 4 tasks, 16 pieces of 7 units leave 15.
    assert_eq!((seen, calls), (vec![1; 100], 15));
}

#[test]
fn a_panic_is_resumed_only_after_every_started_chunk_finished() {
    let _dog = watchdog("panic with free workers", Duration::from_secs(30));
    quiet_deliberate_panics();
    let pool = skainet_schedule::dedicated(4).unwrap();
    for _ in 0..5 {
        let marks = Marks::default();
        assert_eq!(
            region_with_panicking_chunk_two(&pool, &marks),
            Deliberate(2)
        );
        let (started, finished) = (marks.started(), marks.finished());
        for chunk in [0, 1, 3] {
            assert_eq!(
                started[chunk], finished[chunk],
                "chunk {chunk} still running"
            );
        }
        assert!(started[0] && started[2]);
    }
    let (seen, calls) = visit(&pool, 100, 1);
    // 4 tasks, 16 pieces of 7 units leave 15.
    assert_eq!((seen, calls), (vec![1; 100], 15));
}

fn try_region_failing_in_chunk_two(pool: &PoolSchedule, marks: &Marks) -> Result<(), String> {
    pool.try_for_range(4, 1, &|start, _| {
        marks.started[start].store(true, Ordering::SeqCst);
        if start == 2 {
            return Err(format!("chunk {start} failed"));
        }
        thread::sleep(Duration::from_millis(20));
        marks.finished[start].store(true, Ordering::SeqCst);
        Ok(())
    })
}

#[test]
fn an_err_cancels_unclaimed_chunks_and_is_returned_after_the_claimed_ones() {
    let _dog = watchdog("err with held workers", Duration::from_secs(30));
    let pool = skainet_schedule::dedicated(4).unwrap();
    let release = hold_every_worker(&pool);
    let marks = Marks::default();
    let result = try_region_failing_in_chunk_two(&pool, &marks);
    release();
    assert_eq!(result, Err("chunk 2 failed".to_string()));
    assert_eq!(marks.started(), [true, true, true, false]);
    assert_eq!(marks.finished(), [true, true, false, false]);
    let (seen, calls) = visit(&pool, 100, 1);
    // 4 tasks, 16 pieces of 7 units leave 15.
    assert_eq!((seen, calls), (vec![1; 100], 15));
}

#[test]
fn an_err_is_returned_only_after_every_started_chunk_finished() {
    let _dog = watchdog("err with free workers", Duration::from_secs(30));
    let pool = skainet_schedule::dedicated(4).unwrap();
    for _ in 0..5 {
        let marks = Marks::default();
        let result = try_region_failing_in_chunk_two(&pool, &marks);
        assert_eq!(result, Err("chunk 2 failed".to_string()));
        let (started, finished) = (marks.started(), marks.finished());
        for chunk in [0, 1, 3] {
            assert_eq!(
                started[chunk], finished[chunk],
                "chunk {chunk} still running"
            );
        }
    }
    assert_eq!(pool.try_for_range::<()>(10, 1, &|_, _| Ok(())), Ok(()));
}
