//! [`TensorView`]: a shape and strides over borrowed f32 values, so kernels read a KV cache, a
//! transposed operand or a prefix without copying it.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

use super::{Tensor, TensorError};
use crate::shape::element_count;

/// A borrowed, strided, read-only view of f32 values: element `[i0, i1, ..]` is
/// `data[offset + i0·strides[0] + i1·strides[1] + ..]`.
///
/// Every view is checked when it is made: its strides match its rank and every element it can
/// name lies inside the borrowed slice, so reading one is never out of bounds. `&Tensor`
/// converts into a contiguous view for free (`From`), which is how every kernel taking
/// `impl Into<TensorView>` still accepts a tensor.
///
/// ```
/// use skainet_schedule::{Tensor, TensorView};
///
/// // A buffer of 2 rows × 4 columns; view the first 3 columns of each row.
/// let values = [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0];
/// let view = TensorView::strided(&values, vec![2, 3], vec![4, 1], 0).unwrap();
/// assert_eq!(view.get(&[1, 2]), Some(12.0));
/// assert_eq!(view.to_tensor().unwrap().data(), [0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
///
/// // Strides that reach past the buffer are an error, never a wild read.
/// assert!(TensorView::strided(&values, vec![2, 3], vec![6, 1], 0).is_err());
///
/// // A tensor is a contiguous view of itself.
/// let t = Tensor::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
/// let v = TensorView::from(&t);
/// assert_eq!(v.strides(), [2, 1]);
/// assert_eq!(v.permute(&[1, 0]).unwrap().to_tensor().unwrap().data(), [1.0, 3.0, 2.0, 4.0]);
/// ```
#[derive(Clone)]
pub struct TensorView<'a> {
    data: &'a [f32],
    offset: usize,
    shape: Vec<usize>,
    strides: Vec<usize>,
}

/// The row-major strides of `shape`: the last dimension has stride 1. Overflow cannot happen
/// for a shape whose element count fits ([`element_count`]); it saturates otherwise, and such
/// a shape is rejected before the strides are used.
pub(crate) fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1].saturating_mul(shape[d + 1]);
    }
    strides
}

impl<'a> TensorView<'a> {
    /// A contiguous, row-major view of all of `data` as `shape`.
    ///
    /// # Errors
    ///
    /// [`TensorError::LengthMismatch`] when `data.len()` is not the shape's element count;
    /// [`TensorError::TooLarge`] when that count overflows.
    pub fn new(data: &'a [f32], shape: Vec<usize>) -> Result<Self, TensorError> {
        let Some(expected) = element_count(&shape) else {
            return Err(TensorError::TooLarge { shape });
        };
        if data.len() != expected {
            return Err(TensorError::LengthMismatch {
                shape,
                expected,
                actual: data.len(),
            });
        }
        let strides = contiguous_strides(&shape);
        Ok(Self {
            data,
            offset: 0,
            shape,
            strides,
        })
    }

    /// A view of `data` whose element `[i0, i1, ..]` is `data[offset + Σ i_d·strides[d]]`.
    /// Strides may be anything — zero (broadcast), larger than the row (a prefix of a longer
    /// buffer), permuted — as long as every element lies in `data`.
    ///
    /// # Errors
    ///
    /// [`TensorError::StrideRank`] when `strides` and `shape` differ in length;
    /// [`TensorError::TooLarge`] when the element count overflows;
    /// [`TensorError::ViewOutOfBounds`] when the last element (or the offset of an empty view)
    /// lies past `data`, or its position overflows.
    pub fn strided(
        data: &'a [f32],
        shape: Vec<usize>,
        strides: Vec<usize>,
        offset: usize,
    ) -> Result<Self, TensorError> {
        if strides.len() != shape.len() {
            return Err(TensorError::StrideRank { shape, strides });
        }
        let Some(count) = element_count(&shape) else {
            return Err(TensorError::TooLarge { shape });
        };
        // The largest position the view names: offset + Σ (d - 1)·stride.
        let last = if count == 0 {
            Some(offset)
        } else {
            shape
                .iter()
                .zip(&strides)
                .try_fold(offset, |acc, (&d, &s)| {
                    (d - 1).checked_mul(s).and_then(|x| acc.checked_add(x))
                })
        };
        let inside = match last {
            // An empty view may sit exactly at the end of the slice.
            Some(p) if count == 0 => p <= data.len(),
            Some(p) => p < data.len(),
            None => false,
        };
        if !inside {
            return Err(TensorError::ViewOutOfBounds {
                shape,
                strides,
                offset,
                len: data.len(),
            });
        }
        Ok(Self {
            data,
            offset,
            shape,
            strides,
        })
    }

    /// A view the caller knows to be in bounds (a prefix of a buffer it allocated itself).
    /// Reading it stays bounds-checked; a wrong view would panic, never read wild memory.
    pub(crate) fn trusted(
        data: &'a [f32],
        shape: Vec<usize>,
        strides: Vec<usize>,
        offset: usize,
    ) -> Self {
        debug_assert!(Self::strided(data, shape.clone(), strides.clone(), offset).is_ok());
        Self {
            data,
            offset,
            shape,
            strides,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The distance, in values, between neighbours along each dimension.
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Where element `[0, 0, ..]` lies in the borrowed values.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// The borrowed values the view reads (all of them, not just the ones it names).
    pub fn buffer(&self) -> &'a [f32] {
        self.data
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements the view names.
    pub fn len(&self) -> usize {
        // Checked at construction.
        element_count(&self.shape).unwrap_or(0)
    }

    /// Whether it names no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the elements lie back to back in row-major order (dimensions of size 1 may have
    /// any stride).
    pub fn is_contiguous(&self) -> bool {
        let row_major = contiguous_strides(&self.shape);
        self.shape
            .iter()
            .zip(self.strides.iter().zip(&row_major))
            .all(|(&d, (&s, &r))| d <= 1 || s == r)
    }

    /// The named elements as one row-major slice, when the view [`is_contiguous`](Self::is_contiguous).
    pub fn as_slice(&self) -> Option<&'a [f32]> {
        if !self.is_contiguous() {
            return None;
        }
        let n = self.len();
        if n == 0 {
            return Some(&[]);
        }
        self.data.get(self.offset..self.offset + n)
    }

    /// The element at `index` (one coordinate per dimension), or `None` if it is out of range.
    pub fn get(&self, index: &[usize]) -> Option<f32> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut at = self.offset;
        for ((&i, &d), &s) in index.iter().zip(&self.shape).zip(&self.strides) {
            if i >= d {
                return None;
            }
            at += i * s;
        }
        self.data.get(at).copied()
    }

    /// The same values with dimension `i` of the result being dimension `permutation[i]` of
    /// this view: a transpose without a copy.
    ///
    /// # Errors
    ///
    /// [`TensorError::Permutation`] when `permutation` is not a permutation of the dimensions.
    pub fn permute(&self, permutation: &[usize]) -> Result<Self, TensorError> {
        let shape = crate::shape::transpose(&self.shape, permutation).map_err(|_| {
            TensorError::Permutation {
                shape: self.shape.clone(),
                permutation: permutation.to_vec(),
            }
        })?;
        Ok(Self {
            data: self.data,
            offset: self.offset,
            shape,
            strides: permutation.iter().map(|&p| self.strides[p]).collect(),
        })
    }

    /// The positions `start..start + len` of dimension `dim` (a prefix of a cache, a window),
    /// without a copy.
    ///
    /// # Errors
    ///
    /// [`TensorError::Narrow`] when `dim` is not a dimension or the range leaves it.
    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Self, TensorError> {
        let fits = self
            .shape
            .get(dim)
            .is_some_and(|&d| start.checked_add(len).is_some_and(|end| end <= d));
        if !fits {
            return Err(TensorError::Narrow {
                shape: self.shape.clone(),
                dim,
                start,
                len,
            });
        }
        let mut shape = self.shape.clone();
        shape[dim] = len;
        // A non-empty range starts at an element the view names; an empty one moves nowhere.
        let offset = if len == 0 || self.is_empty() {
            self.offset
        } else {
            self.offset + start * self.strides[dim]
        };
        Ok(Self {
            data: self.data,
            offset,
            shape,
            strides: self.strides.clone(),
        })
    }

    /// Row `r` of the view seen as `[rows, last]` (every dimension but the last flattened,
    /// row-major), when the last stride is 1 (or the last dimension has at most one element).
    /// `None` when `r` is out of range or the rows are not contiguous.
    pub(crate) fn row(&self, r: usize) -> Option<&'a [f32]> {
        let (&last, outer) = self.shape.split_last()?;
        if last > 1 && self.strides[self.shape.len() - 1] != 1 {
            return None;
        }
        let mut at = self.offset;
        let mut rest = r;
        for (&d, &s) in outer.iter().zip(&self.strides).rev() {
            if d == 0 {
                return None;
            }
            at += (rest % d) * s;
            rest /= d;
        }
        if rest != 0 {
            return None;
        }
        if last == 0 {
            return Some(&[]);
        }
        self.data.get(at..at + last)
    }

    /// Copies the named elements, row-major, into `out` (exactly [`len`](Self::len) values).
    pub(crate) fn copy_into(&self, out: &mut [f32]) {
        if out.is_empty() {
            return;
        }
        let rank = self.shape.len();
        if rank == 0 {
            out[0] = self.data[self.offset];
            return;
        }
        let last = self.shape[rank - 1];
        let last_stride = self.strides[rank - 1];
        let mut index = vec![0usize; rank - 1];
        for row in out.chunks_exact_mut(last) {
            let start = self.offset
                + index
                    .iter()
                    .zip(&self.strides)
                    .map(|(&i, &s)| i * s)
                    .sum::<usize>();
            if last_stride == 1 {
                row.copy_from_slice(&self.data[start..start + last]);
            } else {
                for (j, x) in row.iter_mut().enumerate() {
                    *x = self.data[start + j * last_stride];
                }
            }
            // The odometer over the outer dimensions, last fastest.
            for d in (0..rank - 1).rev() {
                index[d] += 1;
                if index[d] < self.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }

    /// A compact, row-major copy of the named elements.
    ///
    /// # Errors
    ///
    /// [`TensorError::Alloc`] when the copy cannot be allocated.
    pub fn to_tensor(&self) -> Result<Tensor, TensorError> {
        let mut t = Tensor::zeros(self.shape.clone())?;
        self.copy_into(t.data_mut());
        Ok(t)
    }
}

/// The shape, strides and offset, not the borrowed values (a cache's buffer can hold millions).
impl fmt::Debug for TensorView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorView")
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("offset", &self.offset)
            .field("buffer_len", &self.data.len())
            .finish()
    }
}

/// Two views are equal when they have the same shape and equal values at every index (as
/// `f32 ==`, like [`Tensor`]'s equality), whatever their strides and buffers.
impl PartialEq for TensorView<'_> {
    fn eq(&self, other: &Self) -> bool {
        if self.shape != other.shape {
            return false;
        }
        if self.is_empty() {
            return true;
        }
        let mut index = vec![0usize; self.rank()];
        let at = |v: &Self, index: &[usize]| {
            v.offset
                + index
                    .iter()
                    .zip(&v.strides)
                    .map(|(&i, &s)| i * s)
                    .sum::<usize>()
        };
        loop {
            if self.data[at(self, &index)] != other.data[at(other, &index)] {
                return false;
            }
            // The odometer, last dimension fastest; done when it wraps around.
            let mut d = self.rank();
            loop {
                if d == 0 {
                    return true;
                }
                d -= 1;
                index[d] += 1;
                if index[d] < self.shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
}

impl<'a> From<&'a Tensor> for TensorView<'a> {
    fn from(t: &'a Tensor) -> Self {
        t.view()
    }
}

impl<'a> From<&TensorView<'a>> for TensorView<'a> {
    fn from(v: &TensorView<'a>) -> Self {
        v.clone()
    }
}

impl Tensor {
    /// A contiguous view of the whole tensor (no copy).
    pub fn view(&self) -> TensorView<'_> {
        TensorView {
            data: self.data(),
            offset: 0,
            shape: self.shape().to_vec(),
            strides: contiguous_strides(self.shape()),
        }
    }
}
