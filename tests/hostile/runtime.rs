//! The schedules and registries against sizes at the edge of `usize`, absurd pool sizes and
//! re-entrant installers: exact coverage or a clean `Err` / panic with a message, never an
//! overflow inside the machinery, a hang, or a lost worker.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use skainet_schedule::KernelDispatch;
use skainet_schedule::{Chunks, Schedule, ScheduleExt, Sequential};

use super::support::{visit, watchdog};

const HALF: usize = 1 << (usize::BITS - 1);

/// The sizes every schedule must cover exactly.
const HUGE_N: [usize; 3] = [usize::MAX, usize::MAX - 1, usize::MAX / 2 + 1];

/// The ranges `schedule.for_range(n, 1, ..)` called its body with, sorted by start. The body
/// only records its range: iterating over it would take centuries.
fn ranges(schedule: &dyn Schedule, n: usize) -> Vec<(usize, usize)> {
    let seen = Mutex::new(Vec::new());
    schedule.for_range(n, 1, &|start, end| seen.lock().unwrap().push((start, end)));
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    seen
}

/// The ranges a schedule of `parallelism` tasks cuts a huge `n` (grain 1) into: one range
/// with one task, else four pieces per task (`n` leaves room for them), each exact.
fn pieces(n: usize, parallelism: usize) -> Vec<(usize, usize)> {
    let tasks = Chunks::new(n, 1, parallelism).len();
    let pieces = if tasks < 2 { tasks } else { tasks * 4 };
    Chunks::new(n, 1, pieces)
        .iter()
        .map(|r| (r.start, r.end))
        .collect()
}

/// Whether `got` (sorted) is exactly the region's [`pieces`], or its first piece and the rest
/// as one range (a caller that ran every piece alone makes that one call).
fn pieces_or_first_and_rest(got: &[(usize, usize)], n: usize, parallelism: usize) -> bool {
    let pieces = pieces(n, parallelism);
    let first_and_rest = match pieces.as_slice() {
        [first, second, ..] if pieces.len() > 2 => vec![*first, (second.0, n)],
        _ => pieces.clone(),
    };
    got == pieces || got == first_and_rest
}

/// Checks that `ranges` (sorted) are non-empty, disjoint, and cover `[0, n)` exactly: the
/// lengths add up to `n` without overflow, and they are the region's [`pieces`] (or its first
/// piece and the rest).
fn assert_exact_cover(schedule: &dyn Schedule, n: usize) {
    let got = ranges(schedule, n);
    let name = schedule.name();
    assert!(
        got.iter().all(|&(start, end)| start < end),
        "{name}, n = {n}: an empty or inverted range in {got:?}"
    );
    assert!(
        got.windows(2).all(|pair| pair[0].1 <= pair[1].0),
        "{name}, n = {n}: overlapping ranges {got:?}"
    );
    let total = got
        .iter()
        .try_fold(0usize, |sum, &(start, end)| sum.checked_add(end - start));
    assert_eq!(total, Some(n), "{name}: lengths of {got:?}");
    assert!(
        pieces_or_first_and_rest(&got, n, schedule.parallelism()),
        "{name}, n = {n}: {got:?}"
    );
}

/// Every huge `n` on `schedule`, then a small region on the same schedule: still whole.
fn assert_huge_regions_cover_exactly(schedule: &dyn Schedule) {
    for n in HUGE_N {
        assert_exact_cover(schedule, n);
    }
    let (seen, _) = visit(schedule, 1000, 1);
    assert_eq!(
        seen,
        vec![1; 1000],
        "{} after huge regions",
        schedule.name()
    );
}

#[test]
fn chunks_of_usize_max_over_two_tasks_are_exact() {
    assert_eq!(
        Chunks::new(usize::MAX, 1, 2).iter().collect::<Vec<_>>(),
        vec![0..HALF, HALF..usize::MAX]
    );
}

#[test]
fn sequential_covers_huge_n_in_one_range() {
    let _dog = watchdog("sequential huge n", Duration::from_secs(30));
    assert_huge_regions_cover_exactly(&Sequential);
}

#[test]
fn try_for_range_covers_usize_max_exactly() {
    let _dog = watchdog("try_for_range huge n", Duration::from_secs(30));
    let schedule = threaded_if_built();
    let seen = Mutex::new(Vec::new());
    let outcome: Result<(), ()> = schedule.try_for_range(usize::MAX, 1, &|start, end| {
        seen.lock().unwrap().push((start, end));
        Ok(())
    });
    assert_eq!(outcome, Ok(()));
    let mut seen = seen.into_inner().unwrap();
    seen.sort_unstable();
    assert!(
        pieces_or_first_and_rest(&seen, usize::MAX, schedule.parallelism()),
        "{seen:?}"
    );
}

/// The schedule `try_for_range_covers_usize_max_exactly` runs on: a threaded one if built.
fn threaded_if_built() -> Box<dyn Schedule> {
    #[cfg(feature = "parallel")]
    {
        Box::new(skainet_schedule::dedicated(3).unwrap())
    }
    #[cfg(not(feature = "parallel"))]
    {
        Box::new(Sequential)
    }
}

#[cfg(feature = "parallel")]
mod pool {
    use super::*;
    use skainet_schedule::{ScheduleError, MAX_PARALLELISM};

    #[test]
    fn hardware_covers_huge_n_exactly_and_stays_whole() {
        let _dog = watchdog("hardware huge n", Duration::from_secs(30));
        assert_huge_regions_cover_exactly(&skainet_schedule::hardware());
    }

    #[test]
    fn dedicated_one_to_four_cover_huge_n_exactly_and_stay_whole() {
        let _dog = watchdog("dedicated huge n", Duration::from_secs(30));
        for parallelism in 1..=4 {
            assert_huge_regions_cover_exactly(&skainet_schedule::dedicated(parallelism).unwrap());
        }
    }

    #[test]
    fn dedicated_usize_max_is_an_error_naming_the_value_and_the_maximum() {
        let err = skainet_schedule::dedicated(usize::MAX).unwrap_err();
        assert_eq!(
            err,
            ScheduleError::ParallelismTooLarge {
                requested: usize::MAX
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "a pool's parallelism must be at most 1024 (MAX_PARALLELISM), got {}",
                usize::MAX
            )
        );
    }

    #[test]
    fn dedicated_two_to_the_forty_is_an_error_naming_the_value_and_the_maximum() {
        let err = skainet_schedule::dedicated(1 << 40).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a pool's parallelism must be at most 1024 (MAX_PARALLELISM), got 1099511627776"
        );
    }

    #[test]
    fn dedicated_one_above_the_maximum_is_an_error() {
        assert_eq!(MAX_PARALLELISM, 1024);
        let err = skainet_schedule::dedicated(MAX_PARALLELISM + 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a pool's parallelism must be at most 1024 (MAX_PARALLELISM), got 1025"
        );
    }

    #[test]
    fn dedicated_below_the_maximum_still_builds() {
        let pool = skainet_schedule::dedicated(4).unwrap();
        assert_eq!((pool.name(), pool.parallelism()), ("dedicated(4)", 4));
    }

    #[test]
    fn task_groups_above_the_maximum_are_refused_with_the_value() {
        for value in [
            "1025",
            "1000000000000",
            "18446744073709551615",
            "99999999999999999999999",
        ] {
            let err = skainet_schedule::parse_task_groups(value).unwrap_err();
            assert_eq!(
                err,
                ScheduleError::TaskGroupsTooLarge {
                    value: value.into()
                }
            );
            assert_eq!(
                err.to_string(),
                format!(
                    "SKAINET_TASK_GROUPS must be at most 1024 (MAX_PARALLELISM), got {value:?}"
                )
            );
        }
    }

    #[test]
    fn task_groups_at_the_maximum_are_accepted() {
        assert_eq!(skainet_schedule::parse_task_groups("1024"), Ok(1024));
    }
}

#[cfg(feature = "rayon")]
mod rayon_adapter {
    use super::*;
    use skainet_schedule::RayonSchedule;

    #[test]
    fn rayon_covers_huge_n_exactly_and_stays_whole() {
        let _dog = watchdog("rayon huge n", Duration::from_secs(30));
        for threads in [2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            assert_huge_regions_cover_exactly(&RayonSchedule::with_pool(Arc::new(pool)));
        }
        assert_huge_regions_cover_exactly(&RayonSchedule::global());
    }
}

/// The message a caught panic carries.
fn message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("<not a string>")
}

const REENTRANT: &str = "KernelDispatch::ensure_installed was called from inside its own \
     installer; the installer must register kernels with `register`, not call ensure_installed";

#[test]
fn ensure_installed_from_its_own_installer_panics_and_the_dispatch_stays_usable() {
    let _dog = watchdog("re-entrant ensure_installed", Duration::from_secs(30));
    let dispatch: KernelDispatch<u32> = KernelDispatch::new();
    let outer = catch_unwind(AssertUnwindSafe(|| {
        dispatch.ensure_installed(|d| {
            d.register("half", Arc::new(1));
            d.ensure_installed(|d| {
                d.register("never", Arc::new(2));
            });
        })
    }));
    assert_eq!(message(&*outer.unwrap_err()), REENTRANT);
    assert!(!dispatch.is_installed());
    dispatch.ensure_installed(|d| {
        d.register("k", Arc::new(3));
    });
    assert!(dispatch.is_installed());
    assert_eq!(dispatch.get("k").as_deref(), Some(&3));
    assert_eq!(dispatch.get("never"), None);
}

#[test]
fn ensure_installed_from_another_thread_waits_for_a_running_installer() {
    let _dog = watchdog("concurrent ensure_installed", Duration::from_secs(30));
    let dispatch: Arc<KernelDispatch<u32>> = Arc::new(KernelDispatch::new());
    let (started, installing) = mpsc::channel();
    let (release, gate) = mpsc::channel::<()>();
    let installer = {
        let dispatch = Arc::clone(&dispatch);
        thread::spawn(move || {
            dispatch.ensure_installed(|d| {
                started.send(()).unwrap();
                gate.recv().unwrap();
                d.register("k", Arc::new(4));
            })
        })
    };
    installing.recv().unwrap();
    let waiter = {
        let dispatch = Arc::clone(&dispatch);
        thread::spawn(move || {
            dispatch.ensure_installed(|_| unreachable!("installed by the other thread"));
            dispatch.get("k").as_deref().copied()
        })
    };
    // Give the waiter time to reach the install lock while the installer still holds it.
    thread::sleep(Duration::from_millis(50));
    release.send(()).unwrap();
    installer.join().unwrap();
    assert_eq!(waiter.join().unwrap(), Some(4));
}
