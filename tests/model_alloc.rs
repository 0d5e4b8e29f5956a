#![cfg(all(feature = "model", feature = "parallel", not(feature = "loom")))]
//! Once warm, a decode step of the real model allocates nothing: a counting global allocator
//! says so, under `Sequential` and under a pool of two threads, in both activation modes.
//!
//! One test in its own binary, so no other test's allocations run beside it. It needs the
//! real model, as `tests/model_llama.rs` does (`scripts/fetch_model.sh`, or `$SKAINET_MODEL`).

#[path = "common/model_file.rs"]
mod model_file;

use model_file::model_path;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use skainet_schedule::gguf::GgufFile;
use skainet_schedule::model::{argmax, CacheKind, Llama, Logits};
use skainet_schedule::{dedicated, Activations, Schedule, Sequential};

/// The system allocator, counting every allocation and reallocation of every thread.
struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator, whose contract is the
// caller's; the counter is only an atomic add.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as the caller's `alloc`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as the caller's `alloc_zeroed`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as the caller's `realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as the caller's `dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by 16 greedy steps after `warm` warming ones, after a prompt, and by one
/// more token through `forward` (which returns a new tensor: the counter does count).
fn allocations(
    model: &Llama<'_>,
    mode: Activations,
    s: &dyn Schedule,
    warm: usize,
) -> (usize, usize) {
    let prompt = [1u32, 504, 3575, 282, 4649, 314];
    let steps = 16;
    let mut cache = model
        .cache(CacheKind::Positional, prompt.len() + warm + steps + 1)
        .unwrap();
    let logits = model
        .forward(&prompt, &mut cache, Logits::Last, mode, s)
        .unwrap();
    let mut next = argmax(logits.data()).unwrap();
    for _ in 0..warm {
        next = argmax(model.step(next, &mut cache, mode, s).unwrap()).unwrap();
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..steps {
        next = argmax(model.step(next, &mut cache, mode, s).unwrap()).unwrap();
    }
    let stepping = ALLOCATIONS.load(Ordering::SeqCst) - before;
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    model
        .forward(&[next], &mut cache, Logits::Last, mode, s)
        .unwrap();
    (stepping, ALLOCATIONS.load(Ordering::SeqCst) - before)
}

#[test]
fn real_model_a_warm_decode_step_allocates_nothing() {
    let path = model_path();
    assert!(
        path.is_file(),
        "this test needs the model file {}: run scripts/fetch_model.sh, or set SKAINET_MODEL",
        path.display()
    );
    let file = GgufFile::open(&path).unwrap();
    let model = Llama::from_gguf(file.gguf()).unwrap();
    // Two threads, whatever the machine: a caller and one helper (see the pool's spare
    // regions).
    let pool = dedicated(2).unwrap();
    for mode in [Activations::Exact, Activations::Q8] {
        let (steps, forward) = allocations(&model, mode, &Sequential, 2);
        assert_eq!(steps, 0, "{mode:?} Sequential");
        assert!(
            forward > 0,
            "{mode:?}: the counter counts a forward's allocations"
        );
        let (steps, forward) = allocations(&model, mode, &pool, 2);
        assert_eq!(steps, 0, "{mode:?} dedicated(2)");
        assert!(forward > 0, "{mode:?}");
    }
}
