#![cfg(not(feature = "loom"))]
//! SPEC §4: registries under contention lose nothing and install once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use skainet_schedule::{KernelDispatch, KernelProvider, KernelRegistry};

struct Provider {
    name: String,
    priority: i32,
    available: bool,
}

impl KernelProvider for Provider {
    fn name(&self) -> &str {
        &self.name
    }
    fn priority(&self) -> i32 {
        self.priority
    }
    fn is_available(&self) -> bool {
        self.available
    }
}

fn provider(name: &str, priority: i32, available: bool) -> Arc<Provider> {
    Arc::new(Provider {
        name: name.into(),
        priority,
        available,
    })
}

const THREADS: usize = 16;
const PER_THREAD: usize = 200;

#[test]
fn sixteen_threads_registering_and_finding_lose_nothing() {
    let registry = Arc::new(KernelRegistry::<Provider>::new());
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let registry = registry.clone();
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                for i in 0..PER_THREAD {
                    let name = format!("Kernel-{t}-{i}");
                    assert!(registry.register(provider(&name, (i % 7) as i32, true)));
                    let found = registry
                        .find(&name.to_uppercase())
                        .expect("a provider is visible right after its registration");
                    assert_eq!(found.name(), name);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let snapshot = registry.providers();
    assert_eq!(snapshot.len(), THREADS * PER_THREAD);
    assert!(snapshot
        .windows(2)
        .all(|w| w[0].priority() >= w[1].priority()));
}

#[test]
fn sixteen_threads_dispatching_lose_nothing_and_latest_wins() {
    let dispatch = Arc::new(KernelDispatch::<usize>::new());
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let dispatch = dispatch.clone();
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                for i in 0..PER_THREAD {
                    let key = format!("k{t}");
                    dispatch.register(key.clone(), Arc::new(i));
                    // Only this thread writes this key, so it reads its own latest value.
                    assert_eq!(dispatch.get(&key).as_deref(), Some(&i));
                    dispatch.register(format!("k{t}-{i}"), Arc::new(t * PER_THREAD + i));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let snapshot = dispatch.snapshot();
    assert_eq!(snapshot.len(), THREADS + THREADS * PER_THREAD);
    for t in 0..THREADS {
        assert_eq!(snapshot[&format!("k{t}")].as_ref(), &(PER_THREAD - 1));
        for i in 0..PER_THREAD {
            assert_eq!(
                snapshot[&format!("k{t}-{i}")].as_ref(),
                &(t * PER_THREAD + i)
            );
        }
    }
}

#[test]
fn contended_ensure_installed_installs_exactly_once() {
    let dispatch = Arc::new(KernelDispatch::<&'static str>::new());
    let installs = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (dispatch, installs, start) = (dispatch.clone(), installs.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                dispatch.ensure_installed(|d| {
                    installs.fetch_add(1, Ordering::SeqCst);
                    // Slow on purpose: the others must wait, not skip ahead.
                    thread::sleep(std::time::Duration::from_millis(20));
                    d.register("sdpa", Arc::new("portable"));
                });
                // Every caller returns only after the installation finished.
                assert_eq!(dispatch.get("sdpa").as_deref(), Some(&"portable"));
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(installs.load(Ordering::SeqCst), 1);
    assert!(dispatch.is_installed());
}

#[test]
fn best_available_skips_unavailable_providers() {
    let registry = KernelRegistry::new();
    registry.register(provider("scalar", 0, true));
    registry.register(provider("wide", 10, false));
    assert_eq!(registry.best_available().unwrap().name(), "scalar");
    assert_eq!(registry.find("WIDE").unwrap().name(), "wide");
    assert!(registry.find("missing").is_none());
}

#[test]
fn an_empty_registry_has_no_best() {
    let registry = KernelRegistry::<Provider>::new();
    assert!(registry.is_empty());
    assert!(registry.best_available().is_none());
}
