#![cfg(all(feature = "model", feature = "parallel", not(feature = "loom")))]
//! Once warm, a decode step of the real model allocates nothing, and a prefill allocates only
//! the logits it returns: a counting global allocator says so, under `Sequential` and under a
//! pool of two threads, in both activation modes.
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

/// What a returned logits tensor allocates: its shape and its values.
const LOGITS_TENSOR: usize = 2;

/// Allocations made by a prefill of 128 tokens returning `logits`, on a cache that `warm`
/// prefills of as many tokens have warmed.
fn prefill_allocations(
    model: &Llama<'_>,
    mode: Activations,
    s: &dyn Schedule,
    logits: Logits,
    warm: usize,
) -> usize {
    // Long enough that every op of the prefill opens a region on the pool (the row-wise ops
    // from 2^16 values: 128 rows of 576).
    let vocab = model.config().vocab as u32;
    let prompt: Vec<u32> = (0..128).map(|i| (i * 7919 + 13) % vocab).collect();
    let mut cache = model
        .cache(CacheKind::Positional, prompt.len() * (warm + 1))
        .unwrap();
    for _ in 0..warm {
        model.forward(&prompt, &mut cache, logits, mode, s).unwrap();
    }
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    let out = model.forward(&prompt, &mut cache, logits, mode, s).unwrap();
    let made = ALLOCATIONS.load(Ordering::SeqCst) - before;
    assert_eq!(out.shape()[0], if logits == Logits::All { 128 } else { 1 });
    made
}

#[test]
fn real_model_a_warm_step_and_prefill_allocate_nothing_but_their_logits() {
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
    let schedules: [(&str, &dyn Schedule); 2] =
        [("Sequential", &Sequential), ("dedicated(2)", &pool)];
    for mode in [Activations::Exact, Activations::Q8] {
        for (name, s) in schedules {
            let (steps, forward) = allocations(&model, mode, s, 2);
            assert_eq!(steps, 0, "{mode:?} {name}: steps");
            // A token through `forward` on the cache its prompt warmed allocates the tensor it
            // returns, and nothing else: the counter does count.
            assert_eq!(
                forward, LOGITS_TENSOR,
                "{mode:?} {name}: one token's forward"
            );
            // A prefill on a cache that prefills as long have warmed writes into the buffers
            // they grew. Two warm it, as two steps warm the steps above: each thread of the
            // pool keeps its own attention scratch, grown when it first takes a head.
            let last = prefill_allocations(&model, mode, s, Logits::Last, 2);
            assert_eq!(last, LOGITS_TENSOR, "{mode:?} {name}: prefill, last logits");
            // Every row's logits add the head's column-major product, as large as the logits
            // themselves, which the cache does not keep.
            let all = prefill_allocations(&model, mode, s, Logits::All, 2);
            assert_eq!(
                all,
                LOGITS_TENSOR + 1,
                "{mode:?} {name}: prefill, all logits"
            );
        }
    }
    // And the first prefill on a cache grows its buffers: the warm counts above are not
    // counts of a prefill that never allocates.
    let cold = prefill_allocations(&model, Activations::Q8, &Sequential, Logits::Last, 0);
    assert!(cold > LOGITS_TENSOR, "a cold prefill allocates {cold}");
}
