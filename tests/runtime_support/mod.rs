//! Shared by the `runtime_*` test files: a watchdog that turns a deadlock into a failure, a
//! panic hook that keeps deliberate panics quiet, and an exactly-once visit recorder.
#![allow(dead_code)]

use std::panic;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::thread;
use std::time::{Duration, Instant};

use skainet_schedule::{Chunks, Schedule};

/// Aborts the test process with a message if it is still alive after `limit`.
#[must_use = "the watchdog stops watching when dropped"]
pub struct Watchdog {
    done: Arc<AtomicBool>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Release);
    }
}

/// Starts a watchdog for the test `what`.
pub fn watchdog(what: &'static str, limit: Duration) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let watched = Arc::clone(&done);
    thread::spawn(move || {
        let started = Instant::now();
        while !watched.load(Ordering::Acquire) {
            if started.elapsed() > limit {
                eprintln!("watchdog: `{what}` did not finish within {limit:?}: deadlock?");
                std::process::abort();
            }
            thread::sleep(Duration::from_millis(50));
        }
    });
    Watchdog { done }
}

/// The payload of a panic a test raises on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deliberate(pub usize);

/// Raises a deliberate panic carrying `id`.
pub fn deliberate_panic(id: usize) -> ! {
    panic::panic_any(Deliberate(id))
}

/// Keeps deliberate panics out of the test output; every other panic is reported as usual.
pub fn quiet_deliberate_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<Deliberate>().is_none() {
                default(info);
            }
        }));
    });
}

/// Runs `schedule.for_range(n, grain, ..)` and returns how often each index was visited and
/// how many times the body was called.
pub fn visit(schedule: &dyn Schedule, n: usize, grain: usize) -> (Vec<usize>, usize) {
    let seen: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    let calls = AtomicUsize::new(0);
    schedule.for_range(n, grain, &|start, end| {
        assert!(
            start < end && end <= n,
            "bad range {start}..{end} for n = {n}"
        );
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

/// The coverage grid every threaded schedule is checked on.
pub const GRID_N: [usize; 6] = [0, 1, 7, 255, 1000, 4097];
/// Grains of the coverage grid.
pub const GRID_GRAIN: [usize; 3] = [1, 17, 10_000];

/// How many times a region of `n` units with `grain` calls its body under a schedule of
/// `parallelism` tasks (outside any region): once when it has one task; else it is cut into
/// up to four pieces per task, each at least `grain` units, never fewer than its tasks.
pub fn pieces(n: usize, grain: usize, parallelism: usize) -> usize {
    let tasks = Chunks::new(n, grain, parallelism).len();
    if tasks < 2 {
        return tasks;
    }
    let count = (tasks * 4).min(n / grain.max(1));
    if count <= tasks {
        tasks
    } else {
        Chunks::new(n, 1, count).len()
    }
}

/// Whether `calls` body calls fit a region of `n` units with `grain` under a schedule of
/// `parallelism` tasks (outside any region): one per piece, or two when the region has a full
/// four pieces per task and its caller ran them all alone (its first piece, then the rest as
/// one call).
pub fn region_calls_fit(calls: usize, n: usize, grain: usize, parallelism: usize) -> bool {
    let pieces = pieces(n, grain, parallelism);
    let tasks = Chunks::new(n, grain, parallelism).len();
    calls == pieces || (tasks >= 2 && pieces == tasks * 4 && calls == 2)
}
