//! Unit tests of the region and the pool, small enough for miri
//! (`cargo +nightly miri test --lib --features parallel`).

use alloc::vec::Vec;
use core::time::Duration;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use super::pool::Job;
use super::*;
use crate::schedule::{Chunks, Schedule, ScheduleExt};
use crate::sync::Polled;

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
fn region_visits_every_index_once_and_calls_the_body_once_per_piece_or_first_and_rest() {
    let pool = dedicated(3).unwrap();
    for grain in [1, 2, 100] {
        let (seen, calls) = visits(&pool, N, grain);
        assert_eq!(seen, alloc::vec![1; N]);
        let tasks = Chunks::new(N, grain, 3).len();
        let pieces = region::pieces(N, grain, tasks).len();
        let full = pieces == tasks * region::PIECES_PER_TASK;
        assert!(
            calls == pieces || (full && calls == 2),
            "{calls} calls, {pieces} pieces"
        );
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a timing policy: interpreted, every first piece takes long enough to be worth a wake-up"
)]
fn a_caller_on_a_sleeping_pool_runs_the_pieces_after_its_first_as_one_call() {
    // Its only worker asleep, a region too small to wake it for costs two body calls (the
    // first piece, timed, then the rest), not one per piece. A first piece slowed down by the
    // machine may look worth a wake-up (the caller then claims piece by piece, and the woken
    // worker may join), so this tries a few times, each once the worker sleeps again.
    use super::region::Wake;
    let pool = dedicated(2).unwrap();
    let shared = pool.pool().shared();
    let pieces: Vec<_> = region::pieces(8, 1, 2)
        .iter()
        .map(|r| (r.start, r.end))
        .collect();
    assert_eq!(pieces.len(), 8);
    let mut merged = false;
    for _ in 0..20 {
        let asleep = std::time::Instant::now();
        while shared.helpers_awake() {
            assert!(asleep.elapsed() < hang_limit(), "the worker never slept");
            std::thread::sleep(Duration::from_millis(1));
        }
        let calls = std::sync::Mutex::new(Vec::new());
        pool.for_range(8, 1, &|start, end| calls.lock().unwrap().push((start, end)));
        let mut calls = calls.into_inner().unwrap();
        calls.sort_unstable();
        assert!(calls == pieces || calls == [(0, 1), (1, 8)], "{calls:?}");
        if calls == [(0, 1), (1, 8)] {
            merged = true;
            break;
        }
    }
    assert!(merged, "the caller never ran the rest as one call");
}

#[test]
fn a_caller_runs_piece_by_piece_while_a_helper_is_awake() {
    // The worker is awake but busy: it may join at any time, so the caller keeps to pieces.
    let pool = dedicated(2).unwrap();
    let release = hold_worker(&pool);
    let calls = std::sync::Mutex::new(Vec::new());
    pool.for_range(8, 1, &|start, end| calls.lock().unwrap().push((start, end)));
    release.send(()).unwrap();
    let pieces: Vec<_> = region::pieces(8, 1, 2)
        .iter()
        .map(|r| (r.start, r.end))
        .collect();
    assert_eq!(calls.into_inner().unwrap(), pieces);
}

#[test]
fn a_pool_reports_its_helpers_asleep_only_while_every_worker_sleeps() {
    let pool = dedicated(2).unwrap();
    // Idle, the worker falls asleep once its poll window runs out.
    let idle = std::time::Instant::now();
    while !pool.helpers_asleep() {
        assert!(idle.elapsed() < hang_limit(), "the worker never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    // Running a job, it is awake.
    let release = hold_worker(&pool);
    assert!(!pool.helpers_asleep());
    release.send(()).unwrap();
    // A pool without workers has nobody to wake; `Sequential` never has.
    assert!(!dedicated(1).unwrap().helpers_asleep());
    assert!(!crate::Sequential.helpers_asleep());
}

#[test]
fn a_region_has_up_to_four_pieces_per_task_each_at_least_the_grain() {
    let counts = |n, grain, tasks| {
        let pieces = region::pieces(n, grain, tasks);
        (pieces.len(), pieces.chunk_len())
    };
    // 1000 units over 2 tasks: 8 pieces of 125.
    assert_eq!(counts(1000, 1, 2), (8, 125));
    // A grain of 300 leaves room for 3 pieces of at least 300 (334, 334, 332).
    assert_eq!(counts(1000, 300, 2), (3, 334));
    // No room for more pieces than tasks: the tasks' own chunks.
    assert_eq!(counts(100, 40, 3), (3, 34));
    assert_eq!(counts(2, 1, 2), (2, 1));
    // Exact at the top of the range.
    assert_eq!(counts(usize::MAX, 1, 2), (8, usize::MAX.div_ceil(8)));
}

#[test]
fn a_tiny_region_is_not_worth_waking_a_helper_for() {
    assert!(!region::worth_waking(Duration::from_nanos(100), 7));
    assert!(!region::worth_waking(Duration::from_secs(1), 0));
    assert!(region::worth_waking(Duration::from_micros(10), 5));
    assert!(!region::worth_waking(Duration::from_micros(10), 4));
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

/// Keeps one worker of `pool` busy on a job until the returned sender sends (or is dropped);
/// returns once the worker runs it.
fn hold_worker(pool: &PoolSchedule) -> mpsc::Sender<()> {
    let (release, held) = mpsc::channel::<()>();
    let (started, worker_busy) = mpsc::channel();
    on_worker(pool, move || {
        started.send(()).unwrap();
        let _ = held.recv();
    });
    worker_busy.recv().unwrap();
    release
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

/// How long a test waits before it calls the machinery hung: 10 s, six times that under
/// miri, whose interpreter may share the machine's cores with another test process.
fn hang_limit() -> Duration {
    Duration::from_secs(if cfg!(miri) { 60 } else { 10 })
}

/// Runs `f` on its own thread and fails (instead of hanging) if it has not returned within
/// [`hang_limit`].
fn within_hang_limit<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(f());
    });
    result
        .recv_timeout(hang_limit())
        .expect("did not return in time: the region machinery hung")
}

/// Runs a region of `n` units over `pool` directly, letting `offer` see the region before its
/// helpers are queued; returns what the body was called with (sorted) and the panic that
/// reached the caller, whether `Region::run` returned it or unwound with it.
fn run_region(
    pool: &PoolSchedule,
    n: usize,
    offer: impl FnOnce(&region::Region),
) -> (Vec<(usize, usize)>, Option<region::Payload>) {
    let calls = std::sync::Mutex::new(Vec::new());
    let body = |start: usize, end: usize| calls.lock().unwrap().push((start, end));
    let chunks = Chunks::new(n, 1, pool.parallelism());
    let shared = pool.pool().shared();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        region::Region::run(
            chunks,
            chunks.len() - 1,
            &body,
            |region, helpers| {
                offer(&region);
                shared.offer(region, helpers);
            },
            shared,
        )
    }));
    let mut calls = calls.into_inner().unwrap();
    calls.sort_unstable();
    let payload = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(payload)) | Err(payload) => Some(payload),
    };
    (calls, payload)
}

#[test]
fn a_machinery_panic_on_the_caller_still_waits_for_claimed_chunks_and_unwinds() {
    // No helpers run (the pool is inline): the caller runs chunk 0, then the fault hits
    // chunk 1 outside the body's catch; chunks 2 and 3 are skipped and the panic unwinds.
    let (calls, outcome) = within_hang_limit(|| {
        let pool = dedicated(1).unwrap();
        let chunks = Chunks::new(4, 1, 4);
        let calls = std::sync::Mutex::new(Vec::new());
        let body = |start: usize, end: usize| calls.lock().unwrap().push((start, end));
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            region::Region::run(
                chunks,
                3,
                &body,
                |region, helpers| {
                    region.inject_machinery_fault(1);
                    pool.pool().shared().offer(region, helpers);
                },
                pool.pool().shared(),
            )
        }));
        (calls.into_inner().unwrap(), outcome.map(|r| r.is_ok()))
    });
    assert_eq!(calls, alloc::vec![(0, 1)]);
    let payload = outcome.unwrap_err();
    assert_eq!(
        payload.downcast_ref::<region::MachineryFault>(),
        Some(&region::MachineryFault(1))
    );
}

#[test]
fn a_machinery_panic_on_a_helper_is_resumed_on_the_caller_and_the_helper_thread_lives() {
    // The helper runs to the end inside `offer`, before the caller's first chunk, so it is
    // the one that claims chunk 1 and hits the fault; it skips chunks 2..4 and returns.
    let (calls, outcome, helper) = within_hang_limit(|| {
        let chunks = Chunks::new(4, 1, 4);
        let calls = std::sync::Mutex::new(Vec::new());
        let body = |start: usize, end: usize| calls.lock().unwrap().push((start, end));
        let mut helper = None;
        let outcome = region::Region::run(
            chunks,
            3,
            &body,
            |region, _helpers| {
                region.inject_machinery_fault(1);
                helper = Some(std::thread::spawn(move || region.help()).join());
            },
            &|_| {},
        );
        (calls.into_inner().unwrap(), outcome, helper.unwrap())
    });
    assert!(helper.is_ok(), "the helper unwound out of `help`");
    assert_eq!(calls, alloc::vec![(0, 1)]);
    assert_eq!(
        outcome
            .unwrap_err()
            .downcast_ref::<region::MachineryFault>(),
        Some(&region::MachineryFault(1))
    );
}

#[test]
fn a_machinery_panic_anywhere_leaves_the_pool_whole() {
    let pool = dedicated(3).unwrap();
    for fault in 0..3 {
        let (calls, outcome) = within_hang_limit({
            let pool = pool.clone();
            move || {
                let (calls, payload) =
                    run_region(&pool, 3, |region| region.inject_machinery_fault(fault));
                let fault =
                    payload.map(|p| p.downcast_ref::<region::MachineryFault>().map(|f| f.0));
                (calls, fault)
            }
        });
        // Whoever claimed the faulty chunk (caller or helper), its panic reaches the caller,
        // and the body never ran for it.
        assert_eq!(outcome, Some(Some(fault)), "fault at chunk {fault}");
        assert!(
            !calls.contains(&(fault, fault + 1)),
            "fault at chunk {fault}"
        );
        // Both workers still take jobs, and a following region covers everything.
        let (alive, answered) = mpsc::channel();
        for worker in 0..2 {
            let alive = alive.clone();
            on_worker(&pool, move || alive.send(worker).unwrap());
        }
        let mut answers: Vec<usize> = (0..2)
            .map(|_| answered.recv_timeout(hang_limit()).unwrap())
            .collect();
        answers.sort_unstable();
        assert_eq!(answers, [0, 1]);
        let (seen, _) = visits(&pool, N, 1);
        assert_eq!(seen, alloc::vec![1; N]);
    }
}

#[test]
fn a_worker_survives_a_job_that_panics() {
    let pool = dedicated(2).unwrap();
    on_worker(&pool, || std::panic::panic_any(3usize));
    let (ran, done) = mpsc::channel();
    on_worker(&pool, move || ran.send(()).unwrap());
    done.recv_timeout(hang_limit())
        .expect("the only worker died with the panicking job");
}

#[test]
fn a_refused_thread_is_an_error_naming_it_and_the_started_workers_are_joined() {
    let running = Arc::new(AtomicUsize::new(0));
    let result = pool::Pool::start(5, &mut |index, builder, main| {
        if index == 3 {
            return Err(std::io::Error::other("no more threads"));
        }
        let running = Arc::clone(&running);
        running.fetch_add(1, Ordering::SeqCst);
        builder.spawn(move || {
            main();
            running.fetch_sub(1, Ordering::SeqCst);
        })
    });
    assert_eq!(
        result.err(),
        Some(ScheduleError::SpawnFailed {
            thread: "skainet-schedule-3".into(),
            reason: "no more threads".into(),
        })
    );
    // Workers 1 and 2 started; both had exited (been joined) before the error came back.
    assert_eq!(running.load(Ordering::SeqCst), 0);
}

#[test]
fn a_pool_above_the_maximum_is_refused_before_any_thread_starts() {
    let mut spawned = 0;
    let result = pool::Pool::start(MAX_PARALLELISM + 1, &mut |_, builder, main| {
        spawned += 1;
        builder.spawn(main)
    });
    assert_eq!(
        result.err(),
        Some(ScheduleError::ParallelismTooLarge {
            requested: MAX_PARALLELISM + 1
        })
    );
    assert_eq!(spawned, 0);
}

#[test]
fn a_pool_expects_a_region_worth_a_wake_up_only_after_two_in_a_row() {
    use super::region::Wake;
    let pool = dedicated(2).unwrap();
    let shared = pool.pool().shared();
    assert!(!shared.expects_worth(), "a new pool expects short regions");
    shared.learn(true);
    assert!(
        !shared.expects_worth(),
        "one region worth it may be a hiccup"
    );
    shared.learn(true);
    assert!(shared.expects_worth());
    shared.learn(false);
    assert!(!shared.expects_worth());
    shared.learn(true);
    assert!(!shared.expects_worth());
}

#[test]
fn a_pool_remembers_whether_the_last_region_alone_was_worth_a_wake_up() {
    use super::region::Wake;
    let pool = dedicated(2).unwrap();
    let shared = pool.pool().shared();
    assert!(!shared.last_was_worth());
    shared.learn(true);
    assert!(
        shared.last_was_worth(),
        "workers block after one region worth it"
    );
    shared.learn(false);
    assert!(!shared.last_was_worth());
}

#[test]
fn after_a_short_region_a_worker_polls_briefly_and_less_each_miss() {
    use super::pool::{PollWindow, BLOCK_TIME, POLL_MAX, POLL_MIN};
    let mut window = PollWindow::new();
    window.idle(Duration::from_micros(500));
    assert_eq!(window.get(false, BLOCK_TIME), POLL_MAX);
    window.update(Polled::TimedOut);
    assert_eq!(window.get(false, BLOCK_TIME), Duration::from_micros(50));
    for _ in 0..10 {
        window.update(Polled::TimedOut);
    }
    assert_eq!(window.get(false, BLOCK_TIME), POLL_MIN);
    window.update(Polled::Ready);
    assert_eq!(window.get(false, BLOCK_TIME), Duration::from_micros(4));
}

#[test]
fn after_a_large_region_a_worker_blocks_for_twice_its_last_idle_time() {
    use super::pool::{PollWindow, BLOCK_TIME, POLL_MAX};
    let mut window = PollWindow::new();
    assert_eq!(
        window.get(true, BLOCK_TIME),
        BLOCK_TIME,
        "no idle time seen yet"
    );
    window.idle(Duration::from_micros(700));
    assert_eq!(window.get(true, BLOCK_TIME), Duration::from_micros(1400));
    window.idle(Duration::from_micros(1500));
    assert_eq!(window.get(true, BLOCK_TIME), BLOCK_TIME);
    window.idle(Duration::from_micros(10));
    assert_eq!(window.get(true, BLOCK_TIME), POLL_MAX);
}

#[test]
fn after_large_regions_that_come_rarely_a_worker_does_not_block() {
    use super::pool::{PollWindow, BLOCK_TIME, POLL_MAX};
    let mut window = PollWindow::new();
    window.idle(BLOCK_TIME + Duration::from_micros(1));
    assert_eq!(window.get(true, BLOCK_TIME), POLL_MAX);
    window.update(Polled::TimedOut);
    assert_eq!(window.get(true, BLOCK_TIME), Duration::from_micros(50));
}

#[test]
fn a_shorter_block_time_caps_the_poll_after_a_large_region_and_zero_leaves_the_short_one() {
    use super::pool::{PollWindow, POLL_MAX};
    let mut window = PollWindow::new();
    assert_eq!(
        window.get(true, Duration::from_micros(300)),
        Duration::from_micros(300)
    );
    window.idle(Duration::from_micros(200));
    assert_eq!(
        window.get(true, Duration::from_micros(300)),
        Duration::from_micros(300)
    );
    window.idle(Duration::from_micros(120));
    assert_eq!(
        window.get(true, Duration::from_micros(300)),
        Duration::from_micros(240)
    );
    assert_eq!(
        window.get(true, Duration::ZERO),
        POLL_MAX,
        "the short poll stays"
    );
    window.update(Polled::TimedOut);
    assert_eq!(window.get(true, Duration::ZERO), Duration::from_micros(50));
    assert_eq!(
        window.get(true, Duration::from_millis(200)),
        Duration::from_micros(240),
        "twice the idle time, under a longer block time"
    );
}

#[test]
fn a_worker_on_a_contended_core_does_not_block_until_a_poll_runs_clean() {
    use super::pool::{PollWindow, BLOCK_TIME, POLL_MAX};
    let mut window = PollWindow::new();
    window.idle(Duration::from_micros(700));
    window.update(Polled::Contended);
    assert_eq!(window.get(true, BLOCK_TIME), Duration::from_micros(50));
    window.update(Polled::Ready);
    assert_eq!(
        window.get(true, BLOCK_TIME),
        POLL_MAX,
        "a poll found in time says nothing"
    );
    window.update(Polled::TimedOut);
    assert_eq!(window.get(true, BLOCK_TIME), Duration::from_micros(1400));
}

#[test]
fn a_pool_measures_how_long_it_sat_idle_before_a_region() {
    use super::region::Wake;
    let pool = dedicated(2).unwrap();
    let shared = pool.pool().shared();
    shared.starting(std::time::Instant::now());
    assert_eq!(shared.last_gap(), None, "no region has ended yet");
    shared.ended(std::time::Instant::now());
    std::thread::sleep(Duration::from_millis(3));
    shared.starting(std::time::Instant::now());
    let gap = shared.last_gap().unwrap();
    assert!(gap >= Duration::from_millis(3), "{gap:?}");
}

/// A [`region::Wake`] that wakes nobody, and keeps the verdicts it was told and how often it
/// was asked to wake.
#[derive(Default)]
struct Verdicts(std::sync::Mutex<Vec<bool>>, AtomicUsize);

impl region::Wake for Verdicts {
    fn wake(&self, _helpers: usize) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }

    fn learn(&self, worth: bool) {
        self.0.lock().unwrap().push(worth);
    }
}

/// Runs 8 one-unit chunks on the caller alone (nothing offered, on a pool whose last region was
/// not worth a wake-up), chunk `i` busy for `busy(i)`; returns the verdicts the region left and
/// how often it asked to wake its helper.
fn wakes_and_verdicts_of(busy: impl Fn(usize) -> Duration + Sync) -> (usize, Vec<bool>) {
    let body = |start: usize, end: usize| {
        for i in start..end {
            let until = std::time::Instant::now() + busy(i);
            while std::time::Instant::now() < until {
                core::hint::spin_loop();
            }
        }
    };
    let wake = Verdicts::default();
    region::Region::run(Chunks::new(8, 1, 8), 1, &body, |_, _| {}, &wake).unwrap();
    (wake.1.into_inner(), wake.0.into_inner().unwrap())
}

fn verdicts_of(busy: impl Fn(usize) -> Duration + Sync) -> Vec<bool> {
    wakes_and_verdicts_of(busy).1
}

#[test]
#[cfg_attr(miri, ignore = "a timing policy: interpreted, every chunk is slow")]
fn after_a_region_not_worth_a_wake_up_a_first_chunk_must_show_twice_the_work_to_wake() {
    // A 10 µs first chunk and seven more to go: 70 µs by it, worth a wake-up (50 µs) on its
    // own but not against the last region's verdict. A descheduled first chunk can still
    // look worth it, so any of a few tries that does not wake decides.
    let first = |us: u64| move |i: usize| Duration::from_micros(if i == 0 { us } else { 0 });
    assert_some_try_gives(0, || wakes_and_verdicts_of(first(10)).0);
    // 20 µs: 140 µs to go, twice the threshold and more.
    assert_eq!(wakes_and_verdicts_of(first(20)).0, 1);
}

#[test]
#[cfg_attr(miri, ignore = "a timing policy: interpreted, every chunk is slow")]
fn a_region_is_judged_by_its_mean_chunk_not_by_a_slow_first_one() {
    // A 15 µs first chunk and seven empty ones: on the first chunk alone the rest would look
    // like 105 µs, worth a wake-up; their mean says 13 µs. A thread descheduled during the
    // region can still look worth it, so any of a few tries that is not decides.
    let slow_first = |i: usize| Duration::from_micros(if i == 0 { 15 } else { 0 });
    let tries: Vec<Vec<bool>> = (0..5).map(|_| verdicts_of(slow_first)).collect();
    assert!(tries.iter().all(|v| v.len() == 1), "{tries:?}");
    assert!(tries.contains(&alloc::vec![false]), "{tries:?}");
    // Eight chunks of 10 µs are worth it whatever the machine does.
    assert_eq!(
        verdicts_of(|_| Duration::from_micros(10)),
        alloc::vec![true]
    );
}

/// A [`region::Wake`] for a pool whose helpers all sleep and whose offer wakes none (`quiet`),
/// or for an executor that wakes its threads when offered work; it logs what the region asked
/// of it, in order, next to the offers and body calls of [`logged_region`].
struct Logged {
    quiet: bool,
    log: std::sync::Mutex<Vec<String>>,
}

impl Logged {
    fn new(quiet: bool) -> Self {
        Self {
            quiet,
            log: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn push(&self, event: String) {
        self.log.lock().unwrap().push(event);
    }
}

impl region::Wake for Logged {
    fn wake(&self, helpers: usize) {
        self.push(alloc::format!("wake {helpers}"));
    }

    fn learn(&self, worth: bool) {
        self.push(alloc::format!("learn {worth}"));
    }

    fn offer_is_quiet(&self) -> bool {
        self.quiet
    }

    fn starting(&self, _now: std::time::Instant) {
        self.push("starting".into());
    }

    fn ended(&self, _now: std::time::Instant) {
        self.push("ended".into());
    }
}

/// Runs 8 one-unit pieces (one helper) on the caller, piece `i` busy for `busy(i)` and
/// panicking where `panics(i)`; returns the log of offers, wake-ups, verdicts and body calls,
/// and whether the region returned a panic. Offered jobs are dropped, never run.
fn logged_region(
    quiet: bool,
    busy: impl Fn(usize) -> Duration + Sync,
    panics: impl Fn(usize) -> bool + Sync,
) -> (Vec<String>, bool) {
    let wake = Logged::new(quiet);
    let body = |start: usize, end: usize| {
        wake.push(alloc::format!("body {start}..{end}"));
        for i in start..end {
            let until = std::time::Instant::now() + busy(i);
            while std::time::Instant::now() < until {
                core::hint::spin_loop();
            }
            if panics(i) {
                std::panic::panic_any(i);
            }
        }
    };
    let outcome = region::Region::run(
        region::pieces(8, 1, 2),
        1,
        &body,
        |_, helpers| wake.push(alloc::format!("offer {helpers}")),
        &wake,
    );
    (wake.log.into_inner().unwrap(), outcome.is_err())
}

/// The log without its verdicts: a panic's unwinding (a backtrace taken) may take long enough
/// to make any region look worth a wake-up.
fn without_verdicts((log, failed): (Vec<String>, bool)) -> (Vec<String>, bool) {
    let log = log
        .into_iter()
        .filter(|e| !e.starts_with("learn"))
        .collect();
    (log, failed)
}

/// Asserts that one of five runs of a timing-dependent check gives `want`: a machine that
/// slows one piece down can turn any single run's verdict.
fn assert_some_try_gives<T: PartialEq + core::fmt::Debug>(want: T, mut run: impl FnMut() -> T) {
    let tries: Vec<T> = (0..5).map(|_| run()).collect();
    assert!(tries.contains(&want), "{tries:?}");
}

fn strings(events: &[&str]) -> Vec<String> {
    events.iter().map(|e| (*e).into()).collect()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a timing policy: interpreted, every first piece is slow"
)]
fn a_region_that_stays_on_the_caller_of_a_sleeping_pool_is_never_published() {
    // Nothing worth a wake-up: no region built, no job queued; first piece, then the rest.
    // Nor does the pool count it as activity (no `starting`, no `ended`).
    // A first piece slowed down by the machine may look worth a wake-up, so any of a few
    // tries that stays on the caller decides.
    let alone = (strings(&["body 0..1", "body 1..8", "learn false"]), false);
    assert_some_try_gives(alone, || logged_region(true, |_| Duration::ZERO, |_| false));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a timing policy: interpreted, every first piece is slow"
)]
fn a_sleeping_pool_is_offered_the_region_after_a_first_piece_worth_a_wake_up() {
    // A 20 µs first piece with seven to go is worth a wake-up even against the last verdict:
    // the region is published then (without its first piece, which is done), and woken.
    let (log, failed) = without_verdicts(logged_region(
        true,
        |i| Duration::from_micros(if i == 0 { 20 } else { 0 }),
        |_| false,
    ));
    assert!(!failed);
    let mut expected = strings(&["body 0..1", "starting", "offer 1", "wake 1"]);
    expected.extend((1..8).map(|i| alloc::format!("body {i}..{}", i + 1)));
    expected.push("ended".into());
    assert_eq!(log, expected);
}

#[test]
fn a_region_on_an_executor_that_wakes_when_offered_is_offered_before_its_first_piece() {
    // rayon wakes its threads when given work: holding the offer back would leave them idle.
    let (log, _) = logged_region(false, |_| Duration::ZERO, |_| false);
    assert_eq!(log[..3], strings(&["starting", "offer 1", "body 0..1"]));
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a timing policy: interpreted, every first piece is slow"
)]
fn a_panic_in_an_unpublished_first_piece_skips_the_rest_and_is_returned() {
    let expected = (strings(&["body 0..1"]), true);
    assert_some_try_gives(expected, || {
        without_verdicts(logged_region(true, |_| Duration::ZERO, |i| i == 0))
    });
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a timing policy: interpreted, every first piece is slow"
)]
fn a_panic_in_the_unpublished_rest_is_returned() {
    // Without the verdict: the rest's unwinding (a backtrace taken, under RUST_BACKTRACE=1 as
    // in CI) counts in the region's time and turned it in every try of a CI run.
    let expected = (strings(&["body 0..1", "body 1..8"]), true);
    assert_some_try_gives(expected, || {
        without_verdicts(logged_region(true, |_| Duration::ZERO, |i| i == 5))
    });
}

#[test]
#[cfg_attr(
    miri,
    ignore = "a timing policy: interpreted, every first piece is slow"
)]
fn a_region_that_stays_on_the_caller_of_a_sleeping_pool_leaves_its_idle_time_running() {
    // The pool's workers take no part in it, so it neither ends the pool's idle time nor
    // starts a new one: no `starting`, no `ended`.
    let tries: Vec<_> = (0..5)
        .map(|_| logged_region(true, |_| Duration::ZERO, |_| false).0)
        .collect();
    let idle = |log: &Vec<String>| log.iter().all(|e| e != "starting" && e != "ended");
    assert!(tries.iter().any(idle), "{tries:?}");
}
