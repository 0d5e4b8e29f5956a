//! Deadlock regressions: saturated pools, many concurrent callers, rayon on both sides.
#![cfg(all(feature = "parallel", not(feature = "loom")))]

mod runtime_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use runtime_support::{visit, watchdog};
use skainet_schedule::Schedule;

#[test]
fn sixty_four_regions_from_eight_outside_threads_on_one_pool_finish() {
    let _dog = watchdog("64 regions / 8 threads", Duration::from_secs(60));
    let pool = skainet_schedule::dedicated(4).unwrap();
    let start = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let pool = pool.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                (0..8)
                    .map(|_| visit(&pool, 1000, 1))
                    .all(|(seen, calls)| seen == vec![1; 1000] && (calls == 16 || calls == 2))
            })
        })
        .collect();
    for handle in threads {
        assert!(handle.join().unwrap());
    }
}

#[test]
fn a_two_worker_pool_whose_workers_all_open_regions_on_it_finishes() {
    // dedicated(3) has two workers; every task of this region (both workers and the caller)
    // opens a region on the same pool at the same moment. Those run inline (nested), and the
    // outer region finishes with every unit visited.
    let _dog = watchdog("saturated two-worker pool", Duration::from_secs(30));
    let pool = skainet_schedule::dedicated(3).unwrap();
    let meet = Barrier::new(3);
    let visited = AtomicUsize::new(0);
    pool.for_range(3, 1, &|_, _| {
        meet.wait();
        let (seen, _) = visit(&pool, 400, 1);
        visited.fetch_add(seen.iter().sum(), Ordering::Relaxed);
    });
    assert_eq!(visited.into_inner(), 3 * 400);
}

#[cfg(feature = "rayon")]
mod rayon_crossings {
    use super::*;
    use rayon::prelude::*;
    use skainet_schedule::RayonSchedule;

    #[test]
    fn a_region_opened_inside_a_rayon_worker_finishes() {
        let _dog = watchdog("region inside rayon", Duration::from_secs(60));
        let rayon_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let pool = skainet_schedule::dedicated(3).unwrap();
        // Every rayon worker (and more tasks than workers) opens a region on our pool.
        let ok = rayon_pool.install(|| {
            (0..16)
                .into_par_iter()
                .map(|_| visit(&pool, 300, 1))
                .all(|(seen, calls)| seen == vec![1; 300] && (calls == 12 || calls == 2))
        });
        assert!(ok);
    }

    #[test]
    fn rayon_work_inside_a_region_finishes() {
        let _dog = watchdog("rayon inside region", Duration::from_secs(60));
        let rayon_pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap(),
        );
        let pool = skainet_schedule::dedicated(3).unwrap();
        let adapter = RayonSchedule::with_pool(Arc::clone(&rayon_pool));
        let sum = AtomicUsize::new(0);
        pool.for_range(6, 1, &|start, end| {
            // rayon's own parallel iterator, called from our workers and the caller...
            let s: usize = rayon_pool.install(|| (start * 100..end * 100).into_par_iter().sum());
            sum.fetch_add(s, Ordering::Relaxed);
            // ...and a region of the adapter, which runs inline (nested).
            let (seen, calls) = visit(&adapter, 50, 1);
            assert_eq!((seen, calls), (vec![1; 50], 1));
        });
        assert_eq!(sum.into_inner(), (0..600).sum::<usize>());
    }

    #[test]
    fn an_adapter_region_opened_inside_its_own_pools_workers_finishes() {
        let _dog = watchdog("adapter inside its own pool", Duration::from_secs(60));
        let rayon_pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .build()
                .unwrap(),
        );
        let adapter = RayonSchedule::with_pool(Arc::clone(&rayon_pool));
        let ok = rayon_pool.install(|| {
            (0..16)
                .into_par_iter()
                .map(|_| visit(&adapter, 300, 1))
                .all(|(seen, calls)| seen == vec![1; 300] && (calls == 8 || calls == 2))
        });
        assert!(ok);
    }
}
