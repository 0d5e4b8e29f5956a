//! The heap of the bare-metal examples: a bump allocator over a static buffer of 256 KiB. It
//! never frees (each program runs once); an exhausted heap returns null, which `alloc` reports.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};

// The examples' tensors and scratch take a few KiB; the smallest board they target has far more.
const HEAP_SIZE: usize = 256 * 1024;

/// A bump allocator over a static buffer.
struct Bump {
    heap: UnsafeCell<[u8; HEAP_SIZE]>,
    next: AtomicUsize,
}

// SAFETY: `next` is only advanced with an atomic compare-exchange, so two allocations never
// hand out overlapping parts of `heap`.
unsafe impl Sync for Bump {}

// SAFETY: every returned block is inside `heap`, aligned as `layout` asks, and handed out
// once; a null pointer is returned when the heap is exhausted.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let base = self.heap.get() as usize;
        let mut current = self.next.load(Ordering::Relaxed);
        loop {
            let start = (base + current).next_multiple_of(layout.align()) - base;
            let end = start + layout.size();
            if end > HEAP_SIZE {
                return core::ptr::null_mut();
            }
            match self.next.compare_exchange_weak(
                current,
                end,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return (base + start) as *mut u8,
                Err(seen) => current = seen,
            }
        }
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static ALLOCATOR: Bump = Bump {
    heap: UnsafeCell::new([0; HEAP_SIZE]),
    next: AtomicUsize::new(0),
};
