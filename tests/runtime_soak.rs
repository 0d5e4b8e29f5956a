//! Soak: 100 000 small regions from 4 threads on one pool, a panic in every 97th.
#![cfg(all(feature = "parallel", not(feature = "loom")))]

mod runtime_support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use runtime_support::{deliberate_panic, quiet_deliberate_panics, watchdog, Deliberate};
use skainet_schedule::PoolSchedule;
use skainet_schedule::Schedule;

const THREADS: usize = 4;
const REGIONS: usize = 100_000;
const UNITS: usize = 8;

/// Resident set size in bytes, from `/proc/self/statm` (Linux).
fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Runs regions `first..first + count` (region `r` panics in its unit `r % UNITS` when
/// `r % 97 == 0`); returns how many units the non-panicking regions visited and how many
/// panics came back with the right payload.
fn run_regions(pool: &PoolSchedule, first: usize, count: usize) -> (usize, usize) {
    let (mut visited, mut panics) = (0, 0);
    for region in first..first + count {
        let seen = AtomicUsize::new(0);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            pool.for_range(UNITS, 1, &|start, end| {
                for unit in start..end {
                    if region % 97 == 0 && unit == region % UNITS {
                        deliberate_panic(region);
                    }
                    seen.fetch_add(1, Ordering::Relaxed);
                }
            })
        }));
        match outcome {
            Ok(()) => {
                assert_eq!(seen.into_inner(), UNITS, "region {region} lost units");
                visited += UNITS;
            }
            Err(payload) => {
                assert_eq!(
                    payload.downcast_ref::<Deliberate>(),
                    Some(&Deliberate(region))
                );
                panics += 1;
            }
        }
    }
    (visited, panics)
}

#[test]
fn a_hundred_thousand_regions_with_panics_lose_nothing_and_keep_memory_flat() {
    let _dog = watchdog("soak", Duration::from_secs(120));
    quiet_deliberate_panics();
    let pool = skainet_schedule::dedicated(4).unwrap();
    let per_thread = REGIONS / THREADS;
    let warm_up = per_thread / 10;

    // A first tenth warms allocator caches and the queue; memory is measured from there.
    let run_all = |offset: usize, count: usize| -> (usize, usize) {
        thread::scope(|scope| {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let pool = &pool;
                    scope.spawn(move || run_regions(pool, offset + t * per_thread, count))
                })
                .collect();
            workers.into_iter().fold((0, 0), |(v, p), w| {
                let (dv, dp) = w.join().unwrap();
                (v + dv, p + dp)
            })
        })
    };
    let (v0, p0) = run_all(0, warm_up);
    let before = resident_bytes();
    let (v1, p1) = run_all(warm_up, per_thread - warm_up);
    let after = resident_bytes();

    let panicking = (0..THREADS)
        .flat_map(|t| t * per_thread..(t + 1) * per_thread)
        .filter(|r| r % 97 == 0)
        .count();
    assert_eq!(p0 + p1, panicking);
    assert_eq!(v0 + v1, (REGIONS - panicking) * UNITS);
    if let (Some(before), Some(after)) = (before, after) {
        assert!(
            after <= before + (16 << 20),
            "resident memory grew from {before} to {after} bytes"
        );
    }
    // The pool still works.
    assert_eq!(run_regions(&pool, 1, 1), (UNITS, 0));
}
