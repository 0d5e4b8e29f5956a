//! Transparent huge pages for large, long-lived buffers: the weights a decode step streams,
//! a K/V cache.
//!
//! A read that streams hundreds of MiB crosses a 4 KiB page every 64 cache lines; each
//! crossing can miss the TLB and walk the page table, and the CPU's stream prefetchers stop
//! at it. A kernel that keeps arithmetic in flight beside its reads (attention over a large
//! cache) loses more to that than a plain stream does: on this project's machine a decode
//! step over 256 MiB of K and V read 1 to 21 % faster from 2 MiB pages than from 4 KiB ones,
//! depending on the host's moment (docs/design/memory.md).
//!
//! Linux backs anonymous memory with 2 MiB pages where a process asks for them
//! (`madvise(MADV_HUGEPAGE)`, the `madvise` mode of `/sys/kernel/mm/transparent_hugepage`,
//! its default on most distributions) or everywhere (its `always` mode). The advice is given
//! before the buffer is first written, so its first writes fault whole huge pages in; memory
//! already written stays in small pages until the kernel's background collapse reaches it.
//! Everywhere else (other systems, no `std`, miri) a buffer is allocated as usual.

use alloc::vec::Vec;

/// The span the advice is given in: 2 MiB, the huge page of x86_64 and of aarch64 with 4 KiB
/// base pages (and a multiple of every base page size Linux uses, which `madvise` needs).
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// The whole [`HUGE_PAGE`]s inside `bytes` bytes from address `start`, as (first, length);
/// `None` when not one fits.
pub(crate) fn whole_huge_pages(start: usize, bytes: usize) -> Option<(usize, usize)> {
    let first = start.checked_next_multiple_of(HUGE_PAGE)?;
    let end = start.checked_add(bytes)?;
    let last = end - end % HUGE_PAGE;
    (first < last).then(|| (first, last - first))
}

/// Asks the kernel to back the whole huge pages of `buffer`'s spare capacity with transparent
/// huge pages; the bytes advised (0 where nothing was: no whole huge page, another system, or
/// the kernel refused, as it does where it has no transparent huge pages).
fn advise_spare(buffer: &mut Vec<f32>) -> usize {
    let spare = buffer.spare_capacity_mut();
    let Some((first, len)) = whole_huge_pages(spare.as_ptr() as usize, size_of_val(spare)) else {
        return 0;
    };
    advise(first, len)
}

#[cfg(all(feature = "std", target_os = "linux", not(miri)))]
fn advise(first: usize, len: usize) -> usize {
    // SAFETY: `[first, first + len)` lies inside the caller's own allocation, whose pages are
    // mapped; `MADV_HUGEPAGE` changes how the kernel backs them, never their contents.
    let status = unsafe { libc::madvise(first as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
    if status == 0 {
        len
    } else {
        0
    }
}

#[cfg(not(all(feature = "std", target_os = "linux", not(miri))))]
fn advise(_first: usize, _len: usize) -> usize {
    0
}

/// Where the first value of every buffer the crate allocates sits: on a multiple of 64 bytes,
/// a cache line and a 512-bit vector on x86_64 and aarch64.
///
/// A kernel reads its rows with whole vectors from the row's first value on. From an address
/// 16 bytes past a line (where the system allocator puts a large block) every 64-byte load
/// spans two lines, and a core serves half as many of them per cycle: on this project's machine
/// a decode step over K and V in the last-level cache read 8–25 % more from aligned rows.
pub(crate) const LINE: usize = 64;

/// Values the caller can slice as one `[f32]`, allocated with [`LINE`]`/4 - 1` spare values in
/// front so that the first one is on a line ([`try_zeroed_in`]), or taken from a caller's
/// `Vec` as they are ([`from_vec`](Self::from_vec)).
#[derive(Default)]
pub(crate) struct Values {
    vec: Vec<f32>,
    /// The spare values in front of the first.
    start: usize,
}

impl Values {
    /// No values, without allocating.
    pub(crate) const fn new() -> Self {
        Self {
            vec: Vec::new(),
            start: 0,
        }
    }

    /// The caller's values, where they are: aligned only as their allocation happens to be.
    pub(crate) fn from_vec(vec: Vec<f32>) -> Self {
        Self { vec, start: 0 }
    }

    /// The values as a `Vec` of exactly their length, moved to the front of the allocation
    /// where there were spare values before them (no allocation).
    pub(crate) fn into_vec(self) -> Vec<f32> {
        let Self { mut vec, start } = self;
        vec.drain(..start);
        vec
    }

    /// An empty, aligned allocation with room for `len` values, or `None` when it cannot be
    /// had; the spare values in front are written, the rest is left to the caller.
    fn try_with_room(len: usize, huge: bool) -> Option<Self> {
        const SPARE: usize = LINE / size_of::<f32>() - 1;
        let mut vec = Vec::new();
        vec.try_reserve_exact(len.checked_add(SPARE)?).ok()?;
        if huge {
            advise_spare(&mut vec);
        }
        // A `Vec<f32>` starts on a multiple of 4 bytes, so the distance to the next line is
        // a whole number of values, at most `SPARE`.
        let start = (LINE - vec.as_ptr().addr() % LINE) % LINE / size_of::<f32>();
        vec.resize(start, 0.0);
        Some(Self { vec, start })
    }
}

impl core::ops::Deref for Values {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        &self.vec[self.start..]
    }
}

impl core::ops::DerefMut for Values {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.vec[self.start..]
    }
}

/// A copy in an allocation of its own, aligned as [`try_zeroed_in`]'s where the spare values
/// can be had, else as a `Vec`'s clone is (which aborts where the memory cannot be had).
impl Clone for Values {
    fn clone(&self) -> Self {
        match Self::try_with_room(self.len(), false) {
            Some(mut copy) => {
                copy.vec.extend_from_slice(self);
                copy
            }
            None => Self::from_vec(self.to_vec()),
        }
    }
}

impl PartialEq for Values {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl core::fmt::Debug for Values {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        (**self).fmt(f)
    }
}

/// `len` zeros whose first is on a [`LINE`], or `None` when they cannot be allocated (never an
/// abort); with `huge`, the whole huge pages of the allocation are advised before the zeros
/// are written.
pub(crate) fn try_zeroed_in(len: usize, huge: bool) -> Option<Values> {
    let mut values = Values::try_with_room(len, huge)?;
    values.vec.resize(values.start + len, 0.0);
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_huge_pages_of_a_span_are_those_it_covers_entirely() {
        const H: usize = HUGE_PAGE;
        assert_eq!(whole_huge_pages(0, 2 * H), Some((0, 2 * H)));
        assert_eq!(whole_huge_pages(H, H), Some((H, H)));
        assert_eq!(whole_huge_pages(16, 3 * H), Some((H, 2 * H)));
        assert_eq!(whole_huge_pages(16, 2 * H), Some((H, H)));
        assert_eq!(whole_huge_pages(H + 4096, 2 * H - 4096), Some((2 * H, H)));
        assert_eq!(whole_huge_pages(H + 4096, 2 * H - 8192), None);
        assert_eq!(whole_huge_pages(16, H), None);
        assert_eq!(whole_huge_pages(0, 0), None);
        assert_eq!(whole_huge_pages(3 * H, H - 1), None);
        // Near the top of the address space: no overflow, no page.
        assert_eq!(whole_huge_pages(usize::MAX - 10, 5), None);
        assert_eq!(whole_huge_pages(usize::MAX - H, usize::MAX), None);
        let top = usize::MAX - usize::MAX % H - H;
        assert_eq!(whole_huge_pages(top, H), Some((top, H)));
    }

    #[test]
    fn zeros_in_huge_pages_are_zeros_and_a_refused_length_is_none() {
        // Six whole huge pages at most natively; a few values under miri, which runs no advice.
        let len = if cfg!(miri) {
            1000
        } else {
            3 * HUGE_PAGE / 4 + 5
        };
        for huge in [false, true] {
            let zeros = try_zeroed_in(len, huge).expect("6 MiB");
            assert_eq!(zeros.len(), len);
            assert!(zeros.iter().all(|x| x.to_bits() == 0));
            assert_eq!(zeros.as_ptr().addr() % LINE, 0);
            assert_eq!(try_zeroed_in(usize::MAX / 2, huge), None);
            // The spare values in front would overflow the count: refused, not wrapped.
            assert_eq!(try_zeroed_in(usize::MAX - 3, huge), None);
            assert_eq!(try_zeroed_in(0, huge).map(|v| v.len()), Some(0));
        }
    }

    #[test]
    fn values_start_on_a_line_whatever_the_length_and_leave_it_as_a_vec_of_their_own() {
        for len in [1, 3, 15, 16, 17, 100, 1000] {
            let mut values = try_zeroed_in(len, false).unwrap();
            assert_eq!((values.len(), values.as_ptr().addr() % LINE), (len, 0));
            values
                .iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = i as f32);
            let copy = values.clone();
            assert_eq!((copy.as_ptr().addr() % LINE, &*copy), (0, &*values));
            assert_ne!(copy.as_ptr(), values.as_ptr());
            let expected: Vec<f32> = (0..len).map(|i| i as f32).collect();
            assert_eq!(values.into_vec(), expected);
        }
    }

    #[test]
    fn a_callers_vec_is_kept_where_it_is() {
        let vec = alloc::vec![1.0, 2.0, 3.0];
        let at = vec.as_ptr();
        let values = Values::from_vec(vec);
        assert_eq!((values.as_ptr(), &*values), (at, &[1.0, 2.0, 3.0][..]));
        assert_eq!(alloc::format!("{values:?}"), "[1.0, 2.0, 3.0]");
        let back = values.into_vec();
        assert_eq!((back.as_ptr(), back), (at, alloc::vec![1.0, 2.0, 3.0]));
    }
}
