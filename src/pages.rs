//! Transparent huge pages for large, long-lived buffers: the weights a decode step streams,
//! a K/V cache.
//!
//! A read that streams hundreds of MiB crosses a 4 KiB page every 64 cache lines; each
//! crossing can miss the TLB and walk the page table, and the CPU's stream prefetchers stop
//! at it. A kernel that keeps arithmetic in flight beside its reads (attention over a large
//! cache) loses more to that than a plain stream does: on this project's machine a decode
//! step over 256 MiB of K and V read 1 to 21 % faster from 2 MiB pages than from 4 KiB ones,
//! depending on the host's moment (features.md, "Huge pages").
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

/// `len` zeros, or `None` when they cannot be allocated (never an abort); with `huge`, the
/// whole huge pages of the allocation are advised before the zeros are written.
pub(crate) fn try_zeroed_in(len: usize, huge: bool) -> Option<Vec<f32>> {
    let mut data = Vec::new();
    data.try_reserve_exact(len).ok()?;
    if huge {
        advise_spare(&mut data);
    }
    data.resize(len, 0.0);
    Some(data)
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
            assert_eq!(try_zeroed_in(usize::MAX / 2, huge), None);
            assert_eq!(try_zeroed_in(0, huge), Some(Vec::new()));
        }
    }
}
