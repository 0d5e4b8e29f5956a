//! Safe disjoint writes from inside a region.
//!
//! A region's bodies run on several threads at once and each must write its own part of one
//! output buffer. [`DisjointSlice`] hands out `&mut` sub-slices of whole units, and checks —
//! with one atomic bit per unit — that no unit is ever handed out twice. So the aliasing
//! guarantee does not rest on every `Schedule` implementation being correct: a schedule that
//! broke its contract gets an error, never two `&mut` to the same element.

use core::fmt;
use core::marker::PhantomData;
use core::ops::Range;
use core::ptr::NonNull;

use alloc::string::String;
use alloc::vec::Vec;

use crate::sync::{AtomicUsize, Ordering};

const BITS: usize = usize::BITS as usize;

/// What went wrong when splitting or taking from a [`DisjointSlice`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DisjointError {
    /// `unit_len` was zero.
    ZeroUnitLen,
    /// The buffer's length is not a whole number of units.
    RaggedLength {
        /// The buffer's length in elements.
        len: usize,
        /// The requested unit length in elements.
        unit_len: usize,
    },
    /// A range of units reached past the end (or was inverted).
    OutOfBounds {
        /// The requested units.
        units: Range<usize>,
        /// How many units the buffer has.
        available: usize,
    },
    /// A unit was requested twice.
    Overlap {
        /// The first unit found already taken.
        unit: usize,
    },
    /// A region ended without running some unit: its schedule broke the
    /// [`for_range`](crate::Schedule::for_range) contract, and the output is incomplete.
    Unwritten {
        /// The schedule's [`name`](crate::Schedule::name).
        schedule: String,
        /// The first unit no body was given.
        unit: usize,
        /// How many units the region had.
        units: usize,
    },
}

impl fmt::Display for DisjointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroUnitLen => write!(f, "disjoint split: unit length is 0"),
            Self::RaggedLength { len, unit_len } => write!(
                f,
                "disjoint split: buffer of {len} elements is not a whole number of {unit_len}-element units"
            ),
            Self::OutOfBounds { units, available } => write!(
                f,
                "disjoint split: units {}..{} out of bounds for {available} units",
                units.start, units.end
            ),
            Self::Overlap { unit } => {
                write!(f, "disjoint split: unit {unit} was already taken")
            }
            Self::Unwritten {
                schedule,
                unit,
                units,
            } => write!(
                f,
                "schedule {schedule} never ran unit {unit} of {units}: it broke the for_range contract"
            ),
        }
    }
}

impl core::error::Error for DisjointError {}

/// Bitmaps of at most this many words (2^18 units) go back to their thread when a region's
/// split is done with them ([`DisjointSlice::recycle`]), so that a caller running regions back to back (a decoder's step) allocates
/// none once its largest has been made.
#[cfg(all(feature = "std", not(feature = "loom")))]
const KEPT_WORDS: usize = 1 << 12;

#[cfg(all(feature = "std", not(feature = "loom")))]
std::thread_local! {
    /// The calling thread's last bitmap (empty while a split holds it).
    static KEPT_BITS: core::cell::Cell<Vec<AtomicUsize>> = const { core::cell::Cell::new(Vec::new()) };
}

/// `words` cleared words: this thread's kept bitmap where it has room, else a new one. Without
/// `std`, and in loom builds, always a new one.
fn bitmap(words: usize) -> Vec<AtomicUsize> {
    #[cfg(all(feature = "std", not(feature = "loom")))]
    let mut bits = KEPT_BITS
        .try_with(core::cell::Cell::take)
        .unwrap_or_default();
    #[cfg(not(all(feature = "std", not(feature = "loom"))))]
    let mut bits = Vec::new();
    bits.clear();
    bits.extend((0..words).map(|_| AtomicUsize::new(0)));
    bits
}

/// A mutable buffer split into equal units that several threads may take disjoint ranges of.
///
/// Each unit can be taken once; [`take`](DisjointSlice::take) returns the units' elements as
/// an exclusive `&mut [T]`.
///
/// ```
/// # #[cfg(not(feature = "loom"))] { // loom primitives only work inside a model
/// use skainet_schedule::DisjointSlice;
/// let mut data = [0u8; 6];
/// let split = DisjointSlice::new(&mut data, 2).unwrap();
/// let a = split.take(0..1).unwrap();
/// let b = split.take(1..3).unwrap();
/// a.fill(1);
/// b.fill(2);
/// assert!(split.take(2..3).is_err()); // unit 2 is already taken
/// assert_eq!(data, [1, 1, 2, 2, 2, 2]);
/// # }
/// ```
pub struct DisjointSlice<'a, T> {
    ptr: NonNull<T>,
    units: usize,
    unit_len: usize,
    taken: Vec<AtomicUsize>,
    _borrow: PhantomData<&'a mut [T]>,
}

// SAFETY: a `DisjointSlice` only ever gives out `&mut [T]` to units no one else holds (the
// `taken` bits guarantee it), so sharing it across threads is sending `&mut T`s: sound for
// `T: Send`.
unsafe impl<T: Send> Sync for DisjointSlice<'_, T> {}
// SAFETY: it owns nothing but the exclusive borrow of a `[T]`; moving it moves that borrow.
unsafe impl<T: Send> Send for DisjointSlice<'_, T> {}

impl<'a, T> DisjointSlice<'a, T> {
    /// Splits `buf` into units of `unit_len` elements.
    ///
    /// # Errors
    ///
    /// [`DisjointError::ZeroUnitLen`] when `unit_len == 0`; [`DisjointError::RaggedLength`]
    /// when `buf.len()` is not a multiple of `unit_len`.
    pub fn new(buf: &'a mut [T], unit_len: usize) -> Result<Self, DisjointError> {
        if unit_len == 0 {
            return Err(DisjointError::ZeroUnitLen);
        }
        if !buf.len().is_multiple_of(unit_len) {
            return Err(DisjointError::RaggedLength {
                len: buf.len(),
                unit_len,
            });
        }
        let units = buf.len() / unit_len;
        let taken = bitmap(units.div_ceil(BITS));
        Ok(Self {
            ptr: NonNull::from(buf).cast(),
            units,
            unit_len,
            taken,
            _borrow: PhantomData,
        })
    }

    /// Gives the bitmap back to this thread for its next split (where it is at most
    /// [`KEPT_WORDS`] long; without `std`, and in loom builds, it is freed).
    pub(crate) fn recycle(self) {
        #[cfg(all(feature = "std", not(feature = "loom")))]
        if self.taken.capacity() <= KEPT_WORDS {
            // Replaces (and frees) what a nested split gave back meanwhile; a thread whose
            // thread-locals are being destroyed frees it.
            let _ = KEPT_BITS.try_with(|kept| kept.set(self.taken));
        }
    }

    /// The number of units.
    pub fn units(&self) -> usize {
        self.units
    }

    /// The number of elements per unit.
    pub fn unit_len(&self) -> usize {
        self.unit_len
    }

    /// Takes units `units` and returns their elements, exclusively.
    ///
    /// An empty range returns an empty slice and takes nothing.
    ///
    /// # Errors
    ///
    /// [`DisjointError::OutOfBounds`] for a range past the end or inverted;
    /// [`DisjointError::Overlap`] when any of the units was taken before (after such an error
    /// the units of this request that were free may stay marked as taken).
    #[allow(clippy::mut_from_ref)] // exclusivity is enforced at run time by the `taken` bits
    pub fn take(&self, units: Range<usize>) -> Result<&mut [T], DisjointError> {
        if units.start > units.end || units.end > self.units {
            return Err(DisjointError::OutOfBounds {
                units,
                available: self.units,
            });
        }
        self.claim(units.clone())?;
        let offset = units.start * self.unit_len;
        let len = (units.end - units.start) * self.unit_len;
        // SAFETY: `offset + len <= units * unit_len == buf.len()` (checked above), so the range
        // lies inside the buffer borrowed for `'a`, which outlives `&self`. `claim` set the bit
        // of every unit in the range and succeeded only if none was set before, so no other
        // `&mut` to these elements exists or will ever be created from this split.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr().add(offset), len) })
    }

    /// The first unit nobody has taken, or `None` when every unit was handed out.
    ///
    /// Read it after the region that took the units has returned (its return orders every
    /// take before this call).
    pub fn first_untaken(&self) -> Option<usize> {
        self.taken.iter().enumerate().find_map(|(word, bits)| {
            // Acquire: pairs with the takes' AcqRel, though the region's end already orders them.
            let free = !bits.load(Ordering::Acquire);
            let unit = word * BITS + free.trailing_zeros() as usize;
            (free != 0 && unit < self.units).then_some(unit)
        })
    }

    /// Sets the bits of `units`, word by word; fails if any was set already.
    fn claim(&self, units: Range<usize>) -> Result<(), DisjointError> {
        let mut unit = units.start;
        while unit < units.end {
            let word = unit / BITS;
            let first = unit % BITS;
            let last = (units.end - word * BITS).min(BITS); // exclusive, within this word
            let width = last - first;
            let mask = if width == BITS {
                usize::MAX
            } else {
                ((1usize << width) - 1) << first
            };
            // AcqRel: a take that loses the race must see the winner's claim; the data itself
            // is published by the region's own completion (see `Schedule::for_range`).
            let before = self.taken[word].fetch_or(mask, Ordering::AcqRel);
            let clash = before & mask;
            if clash != 0 {
                return Err(DisjointError::Overlap {
                    unit: word * BITS + clash.trailing_zeros() as usize,
                });
            }
            unit = word * BITS + last;
        }
        Ok(())
    }
}

impl<T> fmt::Debug for DisjointSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DisjointSlice")
            .field("units", &self.units)
            .field("unit_len", &self.unit_len)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn first_untaken_names_the_first_gap() {
        let mut data = [0u8; 70];
        let split = DisjointSlice::new(&mut data, 1).unwrap();
        assert_eq!(split.first_untaken(), Some(0));
        split.take(0..65).unwrap();
        assert_eq!(split.first_untaken(), Some(65));
        split.take(66..70).unwrap();
        assert_eq!(split.first_untaken(), Some(65));
        split.take(65..66).unwrap();
        assert_eq!(split.first_untaken(), None);
    }

    #[test]
    fn rejects_zero_unit_len() {
        let mut v = [0u8; 4];
        assert_eq!(
            DisjointSlice::new(&mut v, 0).unwrap_err(),
            DisjointError::ZeroUnitLen
        );
    }

    #[test]
    fn rejects_ragged_length() {
        let mut v = [0u8; 5];
        assert_eq!(
            DisjointSlice::new(&mut v, 2).unwrap_err(),
            DisjointError::RaggedLength {
                len: 5,
                unit_len: 2
            }
        );
    }

    #[test]
    fn take_out_of_bounds_and_inverted() {
        let mut v = [0u8; 4];
        let s = DisjointSlice::new(&mut v, 1).unwrap();
        assert_eq!(
            s.take(3..5).unwrap_err(),
            DisjointError::OutOfBounds {
                units: 3..5,
                available: 4
            }
        );
        #[allow(clippy::reversed_empty_ranges)]
        let inverted = 3..2;
        assert!(matches!(
            s.take(inverted),
            Err(DisjointError::OutOfBounds { .. })
        ));
    }

    #[test]
    fn overlap_is_reported_across_word_boundaries() {
        let mut v = vec![0u32; 200];
        let s = DisjointSlice::new(&mut v, 1).unwrap();
        let a = s.take(60..130).unwrap();
        assert_eq!(a.len(), 70);
        assert_eq!(
            s.take(129..131).unwrap_err(),
            DisjointError::Overlap { unit: 129 }
        );
        assert_eq!(s.take(0..60).unwrap().len(), 60);
        assert_eq!(s.take(131..200).unwrap().len(), 69);
        assert_eq!(
            s.take(130..131).unwrap_err(),
            DisjointError::Overlap { unit: 130 }
        );
    }

    #[test]
    fn whole_words_and_empty_ranges() {
        let mut v = vec![0u8; 128 * 3];
        let s = DisjointSlice::new(&mut v, 3).unwrap();
        assert_eq!(s.units(), 128);
        assert_eq!(s.take(5..5).unwrap().len(), 0);
        let all = s.take(0..128).unwrap();
        all.fill(7);
        assert_eq!(
            s.take(64..65).unwrap_err(),
            DisjointError::Overlap { unit: 64 }
        );
        assert!(v.iter().all(|&x| x == 7));
    }
}
