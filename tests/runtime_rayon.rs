//! The rayon adapter: same chunks, same failure semantics, name `rayon(N)`.
#![cfg(all(feature = "rayon", not(feature = "loom")))]

mod runtime_support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use runtime_support::{
    deliberate_panic, quiet_deliberate_panics, region_calls_fit, visit, watchdog, Deliberate,
    GRID_GRAIN, GRID_N,
};
use skainet_schedule::RayonSchedule;
use skainet_schedule::{CollectingSink, Schedule, ScheduleExt, TraceEvent};

fn adapter(threads: usize) -> RayonSchedule {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    RayonSchedule::with_pool(Arc::new(pool))
}

#[test]
fn the_adapter_cuts_the_grid_like_every_schedule() {
    let _dog = watchdog("rayon grid", Duration::from_secs(60));
    for threads in [1, 2, 3, 4, 8] {
        let schedule = adapter(threads);
        for n in GRID_N {
            for grain in GRID_GRAIN {
                let (seen, calls) = visit(&schedule, n, grain);
                assert_eq!(seen, vec![1; n], "n {n} grain {grain} threads {threads}");
                assert!(
                    region_calls_fit(calls, n, grain, threads),
                    "{calls} calls for n {n} grain {grain} threads {threads}"
                );
            }
        }
    }
}

#[test]
fn the_adapter_is_named_after_its_pool() {
    assert_eq!(adapter(3).name(), "rayon(3)");
    assert_eq!(adapter(3).parallelism(), 3);
    let global = RayonSchedule::global();
    assert_eq!(
        global.name(),
        format!("rayon({})", rayon::current_num_threads())
    );
}

#[test]
fn a_panic_in_an_adapter_chunk_reaches_the_caller_and_the_pool_survives() {
    let _dog = watchdog("rayon panic", Duration::from_secs(30));
    quiet_deliberate_panics();
    let schedule = adapter(4);
    let caught = catch_unwind(AssertUnwindSafe(|| {
        schedule.for_range(4, 1, &|start, _| {
            if start == 2 {
                deliberate_panic(2);
            }
        })
    }))
    .unwrap_err();
    assert_eq!(caught.downcast_ref::<Deliberate>(), Some(&Deliberate(2)));
    let (seen, calls) = visit(&schedule, 100, 1);
    // 4 tasks, 16 pieces of 7 units leave 15.
    assert_eq!((seen, calls), (vec![1; 100], 15));
}

#[test]
fn an_err_in_an_adapter_chunk_is_returned() {
    let schedule = adapter(4);
    let result = schedule.try_for_range(4, 1, &|start, _| {
        if start == 2 {
            Err(start)
        } else {
            Ok(())
        }
    });
    assert_eq!(result, Err(2));
}

#[test]
fn a_forked_adapter_region_emits_one_event() {
    let sink = Arc::new(CollectingSink::new());
    let schedule = adapter(2).with_trace(sink.clone());
    schedule.for_range(10, 1, &|_, _| {});
    schedule.for_range(1, 1, &|_, _| {});
    let events = sink.regions();
    assert_eq!(events.len(), 1);
    match &events[0] {
        TraceEvent::ScheduleRegion {
            op,
            schedule,
            elements,
            tasks,
            duration,
        } => {
            assert_eq!(
                (op.as_str(), schedule.as_str(), *elements, *tasks),
                ("for_range", "rayon(2)", 10, 2)
            );
            assert!(duration.is_some());
        }
        other => panic!("not a region event: {other:?}"),
    }
}
