//! The threaded schedule's contract on real threads: coverage, inline cases, names,
//! construction errors, joining on drop, nesting and tracing.
#![cfg(all(feature = "parallel", not(feature = "loom")))]

mod runtime_support;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use runtime_support::{region_calls_fit, visit, watchdog, GRID_GRAIN, GRID_N};
use skainet_schedule::ScheduleError;
use skainet_schedule::{
    platform_default_schedule, CollectingSink, Schedule, ScheduleExt, TraceEvent, TraceSink,
};

#[test]
fn every_index_is_visited_once_and_body_calls_match_the_chunk_count() {
    let _dog = watchdog("coverage grid", Duration::from_secs(60));
    for parallelism in [1, 2, 3, 4, 8] {
        let pool = skainet_schedule::dedicated(parallelism).unwrap();
        for n in GRID_N {
            for grain in GRID_GRAIN {
                let (seen, calls) = visit(&pool, n, grain);
                assert_eq!(seen, vec![1; n], "n {n} grain {grain} p {parallelism}");
                assert!(
                    region_calls_fit(calls, n, grain, parallelism),
                    "{calls} calls for n {n} grain {grain} p {parallelism}"
                );
            }
        }
    }
}

#[test]
fn hardware_covers_the_grid_with_its_own_parallelism() {
    let _dog = watchdog("hardware grid", Duration::from_secs(60));
    let pool = skainet_schedule::hardware();
    for n in GRID_N {
        for grain in GRID_GRAIN {
            let (seen, calls) = visit(&pool, n, grain);
            assert_eq!(seen, vec![1; n]);
            assert!(
                region_calls_fit(calls, n, grain, pool.parallelism()),
                "{calls} calls for n {n} grain {grain}"
            );
        }
    }
}

#[test]
fn parallelism_one_runs_the_whole_range_on_the_caller() {
    let pool = skainet_schedule::dedicated(1).unwrap();
    let calls = Mutex::new(Vec::new());
    pool.for_range(1000, 1, &|start, end| {
        calls
            .lock()
            .unwrap()
            .push((start, end, thread::current().id()));
    });
    assert_eq!(
        calls.into_inner().unwrap(),
        vec![(0, 1000, thread::current().id())]
    );
}

#[test]
fn a_single_chunk_region_runs_on_the_caller() {
    let pool = skainet_schedule::dedicated(4).unwrap();
    let calls = Mutex::new(Vec::new());
    pool.for_range(10, 100, &|start, end| {
        calls
            .lock()
            .unwrap()
            .push((start, end, thread::current().id()));
    });
    assert_eq!(
        calls.into_inner().unwrap(),
        vec![(0, 10, thread::current().id())]
    );
}

#[test]
fn zero_units_call_nothing() {
    let pool = skainet_schedule::dedicated(2).unwrap();
    let calls = AtomicUsize::new(0);
    pool.for_range(0, 1, &|_, _| {
        calls.fetch_add(1, Ordering::Relaxed);
    });
    assert_eq!(calls.into_inner(), 0);
}

#[test]
fn dedicated_three_is_named_and_covers() {
    let pool = skainet_schedule::dedicated(3).unwrap();
    assert_eq!(pool.name(), "dedicated(3)");
    assert_eq!(pool.parallelism(), 3);
    let (seen, calls) = visit(&pool, 100, 1);
    assert_eq!(seen, vec![1; 100]);
    // 3 tasks, 12 pieces of 9 units (the last of 1), or the first and the rest.
    assert!(calls == 12 || calls == 2, "{calls} calls");
}

#[test]
fn dedicated_zero_is_an_error() {
    assert_eq!(
        skainet_schedule::dedicated(0).unwrap_err(),
        ScheduleError::ZeroParallelism
    );
    assert_eq!(
        ScheduleError::ZeroParallelism.to_string(),
        "a pool needs parallelism >= 1 (the caller is one of its tasks), got 0"
    );
}

#[test]
fn hardware_is_one_process_wide_pool_named_after_its_parallelism() {
    let a = skainet_schedule::hardware();
    let b = skainet_schedule::hardware();
    assert_eq!(a.name(), format!("hardware({})", a.parallelism()));
    assert_eq!(a.name(), b.name());
    assert_eq!(platform_default_schedule().name(), a.name());
}

#[test]
fn task_groups_values_parse_or_name_the_bad_value() {
    assert_eq!(skainet_schedule::parse_task_groups("8"), Ok(8));
    assert_eq!(skainet_schedule::parse_task_groups(" 2\n"), Ok(2));
    for bad in ["0", "", "-1", "four", "2.5"] {
        let err = skainet_schedule::parse_task_groups(bad).unwrap_err();
        assert_eq!(err, ScheduleError::InvalidTaskGroups { value: bad.into() });
    }
    assert_eq!(
        skainet_schedule::parse_task_groups("four")
            .unwrap_err()
            .to_string(),
        "SKAINET_TASK_GROUPS must be a positive integer, got \"four\""
    );
}

/// Decrements its counter when the thread that owns it exits.
struct ExitCounter(Arc<AtomicUsize>);

impl Drop for ExitCounter {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

thread_local! {
    static ON_EXIT: RefCell<Option<ExitCounter>> = const { RefCell::new(None) };
}

#[test]
fn dropping_a_dedicated_pool_joins_its_named_threads() {
    let _dog = watchdog("drop joins", Duration::from_secs(30));
    let pool = skainet_schedule::dedicated(3).unwrap();
    let alive = Arc::new(AtomicUsize::new(0));
    let names = Mutex::new(BTreeSet::new());
    // All three chunks meet at the barrier, so they run on three threads at once: the caller
    // and both workers. Each worker leaves a counter in its thread-locals that only its exit
    // drops.
    let meet = Barrier::new(3);
    pool.for_range(3, 1, &|_, _| {
        meet.wait();
        let me = thread::current();
        if let Some(name) = me.name().filter(|n| n.starts_with("skainet-schedule-")) {
            names.lock().unwrap().insert(name.to_string());
            alive.fetch_add(1, Ordering::SeqCst);
            ON_EXIT.with(|slot| *slot.borrow_mut() = Some(ExitCounter(Arc::clone(&alive))));
        }
    });
    assert_eq!(
        names.into_inner().unwrap(),
        BTreeSet::from([
            "skainet-schedule-1".to_string(),
            "skainet-schedule-2".to_string()
        ])
    );
    assert_eq!(alive.load(Ordering::SeqCst), 2);
    drop(pool);
    assert_eq!(
        alive.load(Ordering::SeqCst),
        0,
        "a worker outlived its pool"
    );
}

#[test]
fn a_clone_keeps_the_pool_alive_until_the_last_handle_drops() {
    let pool = skainet_schedule::dedicated(2).unwrap();
    let other = pool.clone();
    drop(pool);
    let (seen, calls) = visit(&other, 10, 1);
    assert_eq!(seen, vec![1; 10]);
    // 2 tasks; 8 pieces would be of 2 units, which leaves 5.
    assert_eq!(calls, 5);
}

#[test]
fn a_nested_region_runs_inline_on_the_thread_that_opened_it() {
    let _dog = watchdog("nested", Duration::from_secs(30));
    let pool = skainet_schedule::dedicated(4).unwrap();
    let other = skainet_schedule::dedicated(2).unwrap();
    let inner = Mutex::new(Vec::new());
    pool.for_range(4, 1, &|start, _| {
        let outer = thread::current().id();
        for schedule in [&pool as &dyn Schedule, &other] {
            schedule.for_range(100, 1, &|s, e| {
                inner
                    .lock()
                    .unwrap()
                    .push((start, s, e, thread::current().id() == outer));
            });
        }
    });
    let mut inner = inner.into_inner().unwrap();
    inner.sort();
    let expected: Vec<_> = (0..4)
        .flat_map(|chunk| [(chunk, 0, 100, true), (chunk, 0, 100, true)])
        .collect();
    assert_eq!(inner, expected);
}

#[test]
fn every_worker_inside_a_region_opening_another_on_the_same_pool_finishes() {
    // dedicated(3): both workers and the caller are inside chunks, and each chunk opens a
    // region of parallelism 4 worth of work on that same pool.
    let _dog = watchdog("saturated nesting", Duration::from_secs(30));
    let pool = skainet_schedule::dedicated(3).unwrap();
    let total = AtomicUsize::new(0);
    let meet = Barrier::new(3);
    pool.for_range(3, 1, &|_, _| {
        meet.wait();
        let (seen, _) = visit(&pool, 64, 16);
        total.fetch_add(seen.iter().sum::<usize>(), Ordering::Relaxed);
    });
    assert_eq!(total.into_inner(), 3 * 64);
}

fn region_events(sink: &CollectingSink) -> Vec<(String, String, usize, usize, bool)> {
    sink.regions()
        .into_iter()
        .map(|event| match event {
            TraceEvent::ScheduleRegion {
                op,
                schedule,
                elements,
                tasks,
                duration,
            } => (op, schedule, elements, tasks, duration.is_some()),
            other => panic!("not a region event: {other:?}"),
        })
        .collect()
}

#[test]
fn a_forked_region_emits_exactly_one_event() {
    let sink = Arc::new(CollectingSink::new());
    let pool = skainet_schedule::dedicated(2)
        .unwrap()
        .with_trace(sink.clone());
    pool.for_range(10, 1, &|_, _| {});
    assert_eq!(
        region_events(&sink),
        vec![("for_range".into(), "dedicated(2)".into(), 10, 2, true)]
    );
}

#[test]
fn an_inline_region_emits_nothing() {
    let sink = Arc::new(CollectingSink::new());
    let pool = skainet_schedule::dedicated(2)
        .unwrap()
        .with_trace(sink.clone());
    pool.for_range(1, 1, &|_, _| {});
    pool.for_range(0, 1, &|_, _| {});
    assert_eq!(sink.events(), vec![]);
}

#[test]
fn a_nested_region_emits_only_the_outer_event() {
    let sink = Arc::new(CollectingSink::new());
    let pool = skainet_schedule::dedicated(2)
        .unwrap()
        .with_trace(sink.clone());
    pool.for_range(2, 1, &|_, _| pool.for_range(10, 1, &|_, _| {}));
    assert_eq!(
        region_events(&sink),
        vec![("for_range".into(), "dedicated(2)".into(), 2, 2, true)]
    );
}

#[test]
fn a_region_names_the_op_that_opened_it() {
    let sink = Arc::new(CollectingSink::new());
    let pool = skainet_schedule::dedicated(3)
        .unwrap()
        .with_trace(sink.clone());
    pool.for_range_op("sdpa", 5, 1, &|_, _| {});
    pool.try_for_range_op::<()>("matmul", 7, 3, &|_, _| Ok(()))
        .unwrap();
    assert_eq!(
        region_events(&sink),
        vec![
            ("sdpa".into(), "dedicated(3)".into(), 5, 3, true),
            ("matmul".into(), "dedicated(3)".into(), 7, 3, true),
        ]
    );
}

/// A sink that is off and counts what it was sent anyway.
#[derive(Default)]
struct OffSink(AtomicUsize);

impl TraceSink for OffSink {
    fn enabled(&self) -> bool {
        false
    }

    fn emit(&self, _event: TraceEvent) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn a_disabled_sink_is_sent_nothing() {
    let sink = Arc::new(OffSink::default());
    let pool = skainet_schedule::dedicated(2)
        .unwrap()
        .with_trace(sink.clone());
    pool.for_range(10, 1, &|_, _| {});
    assert_eq!(sink.0.load(Ordering::Relaxed), 0);
}

#[test]
fn a_cold_pool_wakes_its_helper_at_once_for_one_unit_per_task() {
    // Once its worker has gone to sleep, a region of one unit per task must still run both
    // units at once: the first unit is half the work, too much to run before deciding to wake.
    // Each unit waits for the other, so running them one after the other never ends.
    let _dog = watchdog("cold coarse region", Duration::from_secs(30));
    let pool = skainet_schedule::dedicated(2).unwrap();
    for _ in 0..3 {
        thread::sleep(Duration::from_millis(20));
        let meet = Barrier::new(2);
        let threads = Mutex::new(Vec::new());
        pool.for_range(2, 1, &|_, _| {
            meet.wait();
            threads.lock().unwrap().push(thread::current().id());
        });
        let threads = threads.into_inner().unwrap();
        assert_eq!(threads.len(), 2);
        assert_ne!(threads[0], threads[1]);
    }
}

#[test]
fn a_block_time_above_the_maximum_is_an_error_naming_both_and_changes_nothing() {
    let pool = skainet_schedule::dedicated(2).unwrap();
    pool.set_block_time(Duration::from_micros(700)).unwrap();
    let too_long = skainet_schedule::MAX_BLOCK_TIME + Duration::from_nanos(1);
    let err = pool.set_block_time(too_long).unwrap_err();
    assert_eq!(
        err,
        ScheduleError::BlockTimeTooLong {
            requested: too_long
        }
    );
    assert_eq!(
        err.to_string(),
        "a pool's block time must be at most 200ms (MAX_BLOCK_TIME), got 200.000001ms"
    );
    assert_eq!(pool.block_time(), Duration::from_micros(700));
}

#[test]
fn a_block_time_is_the_pools_and_every_handle_sees_it() {
    let pool = skainet_schedule::dedicated(3).unwrap();
    let other = pool.clone();
    assert_eq!(pool.block_time(), Duration::from_millis(2), "the default");
    other
        .set_block_time(skainet_schedule::MAX_BLOCK_TIME)
        .unwrap();
    assert_eq!(pool.block_time(), Duration::from_millis(200));
    pool.set_block_time(Duration::ZERO).unwrap();
    assert_eq!(other.block_time(), Duration::ZERO);
    // A pool with no block time still runs every region to the end.
    let sum = AtomicUsize::new(0);
    for _ in 0..50 {
        pool.for_range(1000, 10, &|start, end| {
            sum.fetch_add((start..end).sum::<usize>(), Ordering::Relaxed);
        });
    }
    assert_eq!(sum.into_inner(), 50 * 499_500);
}
