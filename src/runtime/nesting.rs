//! The per-thread mark that says "this thread is running a chunk of a forked region".
//!
//! A region opened while the mark is set runs inline as `body(0, n)`: the outer region already
//! occupies every task it was given, so forking again would only oversubscribe the machine.
//! The mark is shared by every pool and by the rayon adapter, so nesting across them is
//! inline too.

use core::cell::Cell;

#[cfg(not(feature = "loom"))]
crate::sync::thread_local! {
    static IN_REGION: Cell<bool> = const { Cell::new(false) };
}

// loom's `thread_local!` takes no `const` initialiser.
#[cfg(feature = "loom")]
crate::sync::thread_local! {
    static IN_REGION: Cell<bool> = Cell::new(false);
}

/// Whether the calling thread is inside a chunk of a forked region. A thread whose
/// thread-locals are already being destroyed counts as nested: running inline is always safe.
#[inline]
pub(crate) fn is_nested() -> bool {
    IN_REGION.try_with(Cell::get).unwrap_or(true)
}

/// Sets the mark for as long as it lives, restoring the previous value when dropped (also
/// when a chunk unwinds).
pub(crate) struct RegionMark {
    previous: bool,
}

impl RegionMark {
    /// Marks the calling thread as inside a region.
    #[inline]
    pub(crate) fn enter() -> Self {
        Self {
            previous: IN_REGION.with(|mark| mark.replace(true)),
        }
    }
}

impl Drop for RegionMark {
    #[inline]
    fn drop(&mut self) {
        let previous = self.previous;
        IN_REGION.with(|mark| mark.set(previous));
    }
}
