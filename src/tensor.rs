//! The small owned f32 tensor the kernels and the graph executor exchange.

use alloc::vec::Vec;
use core::fmt;

use crate::pages::Values;

mod view;

pub use view::TensorView;

// The graph lane's readers count elements here too.
pub(crate) use crate::shape::element_count;

/// A dense, row-major f32 tensor: a shape and exactly `shape.iter().product()` values.
///
/// ```
/// use skainet_schedule::Tensor;
/// let t = Tensor::new(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
/// assert_eq!(t.shape(), [2, 3]);
/// assert_eq!(t.get(&[1, 2]), Some(5.0));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Values,
}

/// Why a tensor could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TensorError {
    /// The number of values does not match the shape.
    LengthMismatch {
        /// The shape given.
        shape: Vec<usize>,
        /// `shape.iter().product()`.
        expected: usize,
        /// The number of values given.
        actual: usize,
    },
    /// The shape holds more than [`MAX_ELEMENTS`](crate::shape::MAX_ELEMENTS) values: no
    /// allocation can hold it.
    TooLarge {
        /// The shape given.
        shape: Vec<usize>,
    },
    /// The values could not be allocated (the system is out of memory for this size).
    Alloc {
        /// The shape given.
        shape: Vec<usize>,
    },
    /// A view was given another number of strides than dimensions.
    StrideRank {
        /// The shape given.
        shape: Vec<usize>,
        /// The strides given.
        strides: Vec<usize>,
    },
    /// A view's elements would reach past the values it borrows.
    ViewOutOfBounds {
        /// The shape given.
        shape: Vec<usize>,
        /// The strides given.
        strides: Vec<usize>,
        /// The position of the first element.
        offset: usize,
        /// How many values the view borrows.
        len: usize,
    },
    /// A view's dimensions were permuted by something that is not a permutation of them.
    Permutation {
        /// The view's shape.
        shape: Vec<usize>,
        /// The permutation given.
        permutation: Vec<usize>,
    },
    /// A view was narrowed to a range outside one of its dimensions (or a dimension it lacks).
    Narrow {
        /// The view's shape.
        shape: Vec<usize>,
        /// The dimension given.
        dim: usize,
        /// The first position asked for.
        start: usize,
        /// The number of positions asked for.
        len: usize,
    },
}

impl fmt::Display for TensorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LengthMismatch {
                shape,
                expected,
                actual,
            } => write!(
                f,
                "tensor of shape {shape:?} needs {expected} values, got {actual}"
            ),
            Self::TooLarge { shape } => write!(
                f,
                "tensor of shape {shape:?} has more elements than one allocation can hold"
            ),
            Self::Alloc { shape } => {
                write!(f, "tensor of shape {shape:?} could not be allocated")
            }
            Self::StrideRank { shape, strides } => write!(
                f,
                "view of shape {shape:?} needs one stride per dimension, got {strides:?}"
            ),
            Self::ViewOutOfBounds {
                shape,
                strides,
                offset,
                len,
            } => write!(
                f,
                "view of shape {shape:?} with strides {strides:?} at offset {offset} reaches past the {len} values it borrows"
            ),
            Self::Permutation { shape, permutation } => write!(
                f,
                "view of shape {shape:?}: {permutation:?} is not a permutation of its dimensions"
            ),
            Self::Narrow {
                shape,
                dim,
                start,
                len,
            } => write!(
                f,
                "view of shape {shape:?}: positions {start}..{start}+{len} of dimension {dim} are out of range"
            ),
        }
    }
}

impl core::error::Error for TensorError {}

/// `len` zeros, or `None` when they cannot be allocated: never an abort.
pub(crate) fn try_zeroed(len: usize) -> Option<Values> {
    crate::pages::try_zeroed_in(len, false)
}

impl Tensor {
    /// A tensor of `shape` holding `data` (row-major).
    ///
    /// # Errors
    ///
    /// [`TensorError::LengthMismatch`] when `data.len()` is not the shape's element count;
    /// [`TensorError::TooLarge`] when that count overflows.
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Result<Self, TensorError> {
        let expected = checked_count(&shape)?;
        if data.len() != expected {
            return Err(TensorError::LengthMismatch {
                shape,
                expected,
                actual: data.len(),
            });
        }
        Ok(Self {
            shape,
            data: Values::from_vec(data),
        })
    }

    /// A tensor of zeros.
    ///
    /// Its first value sits on a multiple of 64 bytes (a cache line, a 512-bit vector), as
    /// does that of every tensor the crate allocates: those of
    /// [`zeros_in_huge_pages`](Self::zeros_in_huge_pages) and [`from_fn`](Self::from_fn), a
    /// clone, the kernels' outputs. The kernels read rows with whole vectors, and from a row
    /// that starts inside a line each load spans two. A tensor built with [`new`](Self::new)
    /// keeps the caller's values where they are.
    ///
    /// # Errors
    ///
    /// [`TensorError::TooLarge`] when the element count is above
    /// [`MAX_ELEMENTS`](crate::shape::MAX_ELEMENTS); [`TensorError::Alloc`] when the memory
    /// cannot be had.
    pub fn zeros(shape: Vec<usize>) -> Result<Self, TensorError> {
        Self::zeros_in(shape, false)
    }

    /// A tensor of zeros whose memory the OS is asked to back with transparent huge pages, for
    /// a large tensor that is read again and again: weights, the keys and values of a long
    /// context. Fill it through [`data_mut`](Self::data_mut).
    ///
    /// On Linux with `std`, the whole 2 MiB pages of the allocation are advised
    /// (`madvise(MADV_HUGEPAGE)`) before the zeros are written, so that those writes fault huge
    /// pages in where the kernel has them to give (its transparent huge pages in the `madvise`
    /// or `always` mode). A stream through hundreds of MiB then crosses a page boundary every
    /// 2 MiB instead of every 4 KiB: on this project's machine a decode step over 256 MiB of
    /// keys and values read 1 to 21 % faster, depending on the host's moment. Elsewhere, and
    /// where the kernel declines, this is [`zeros`](Self::zeros): the advice never changes a
    /// value.
    ///
    /// ```
    /// use skainet_schedule::Tensor;
    ///
    /// let mut weights = Tensor::zeros_in_huge_pages(vec![1536, 576]).unwrap();
    /// weights.data_mut().iter_mut().enumerate().for_each(|(i, w)| *w = (i % 7) as f32);
    /// assert_eq!(weights.data()[8], 1.0);
    /// ```
    ///
    /// # Errors
    ///
    /// As [`zeros`](Self::zeros): [`TensorError::TooLarge`] above
    /// [`MAX_ELEMENTS`](crate::shape::MAX_ELEMENTS), [`TensorError::Alloc`] when the memory
    /// cannot be had.
    pub fn zeros_in_huge_pages(shape: Vec<usize>) -> Result<Self, TensorError> {
        Self::zeros_in(shape, true)
    }

    fn zeros_in(shape: Vec<usize>, huge: bool) -> Result<Self, TensorError> {
        let n = checked_count(&shape)?;
        match crate::pages::try_zeroed_in(n, huge) {
            Some(data) => Ok(Self { shape, data }),
            None => Err(TensorError::Alloc { shape }),
        }
    }

    /// A tensor whose element at flat (row-major) index `i` is `f(i)`.
    ///
    /// # Errors
    ///
    /// As [`zeros`](Self::zeros).
    pub fn from_fn(
        shape: Vec<usize>,
        mut f: impl FnMut(usize) -> f32,
    ) -> Result<Self, TensorError> {
        let mut t = Self::zeros(shape)?;
        t.data.iter_mut().enumerate().for_each(|(i, x)| *x = f(i));
        Ok(t)
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether it has no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The values, row-major.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// The values, row-major, mutably.
    pub fn data_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }

    /// Consumes the tensor, returning its shape and values. The values of a tensor the crate
    /// allocated (see [`zeros`](Self::zeros)) are moved to the front of their allocation
    /// first, a copy within it; those given to [`new`](Self::new) come back as they went in.
    pub fn into_parts(self) -> (Vec<usize>, Vec<f32>) {
        (self.shape, self.data.into_vec())
    }

    /// The element at `index` (one coordinate per dimension), or `None` if it is out of range.
    pub fn get(&self, index: &[usize]) -> Option<f32> {
        if index.len() != self.shape.len() {
            return None;
        }
        let mut flat = 0usize;
        for (&i, &d) in index.iter().zip(&self.shape) {
            if i >= d {
                return None;
            }
            flat = flat * d + i;
        }
        self.data.get(flat).copied()
    }

    /// The same values under another shape with the same element count.
    ///
    /// # Errors
    ///
    /// [`TensorError::LengthMismatch`] when the counts differ.
    pub fn reshape(self, shape: Vec<usize>) -> Result<Self, TensorError> {
        let expected = checked_count(&shape)?;
        if self.data.len() != expected {
            return Err(TensorError::LengthMismatch {
                shape,
                expected,
                actual: self.data.len(),
            });
        }
        Ok(Self {
            shape,
            data: self.data,
        })
    }

    /// The bit patterns of every value, for exact comparisons.
    pub fn to_bits(&self) -> Vec<u32> {
        self.data.iter().map(|x| x.to_bits()).collect()
    }
}

fn checked_count(shape: &[usize]) -> Result<usize, TensorError> {
    element_count(shape).ok_or_else(|| TensorError::TooLarge {
        shape: shape.to_vec(),
    })
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn new_rejects_a_length_mismatch() {
        assert_eq!(
            Tensor::new(vec![2, 3], vec![0.0; 5]),
            Err(TensorError::LengthMismatch {
                shape: vec![2, 3],
                expected: 6,
                actual: 5
            })
        );
    }

    #[test]
    fn overflowing_shapes_are_rejected() {
        assert_eq!(
            Tensor::zeros(vec![usize::MAX, 2]),
            Err(TensorError::TooLarge {
                shape: vec![usize::MAX, 2]
            })
        );
    }

    #[test]
    fn get_and_reshape() {
        let t = Tensor::from_fn(vec![2, 2, 2], |i| i as f32).unwrap();
        assert_eq!(t.get(&[1, 0, 1]), Some(5.0));
        assert_eq!(t.get(&[2, 0, 0]), None);
        assert_eq!(t.get(&[0, 0]), None);
        let r = t.reshape(vec![4, 2]).unwrap();
        assert_eq!(r.get(&[3, 1]), Some(7.0));
        assert_eq!(
            r.reshape(vec![3]),
            Err(TensorError::LengthMismatch {
                shape: vec![3],
                expected: 3,
                actual: 8
            })
        );
        assert_eq!(
            Tensor::zeros(vec![2]).unwrap().reshape(vec![usize::MAX, 2]),
            Err(TensorError::TooLarge {
                shape: vec![usize::MAX, 2]
            })
        );
    }

    #[test]
    fn tensors_the_crate_allocates_start_on_a_line_and_a_callers_values_stay_where_they_are() {
        let line = crate::pages::LINE;
        for n in [1, 5, 16, 33, 1000] {
            let made = [
                Tensor::zeros(vec![n]).unwrap(),
                Tensor::zeros_in_huge_pages(vec![n]).unwrap(),
                Tensor::from_fn(vec![n], |i| i as f32).unwrap(),
                Tensor::from_fn(vec![n], |i| i as f32).unwrap().clone(),
                Tensor::zeros(vec![n, 1])
                    .unwrap()
                    .reshape(vec![1, n])
                    .unwrap(),
            ];
            for t in &made {
                assert_eq!((t.len(), t.data().as_ptr().addr() % line), (n, 0));
            }
            let expected: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let (shape, values) = made[2].clone().into_parts();
            assert_eq!((shape, values), (vec![n], expected.clone()));
            let at = expected.as_ptr();
            let theirs = Tensor::new(vec![n], expected).unwrap();
            assert_eq!(theirs.data().as_ptr(), at);
            assert_eq!(theirs, made[2]);
            assert_eq!(theirs.into_parts().1.as_ptr(), at);
        }
    }
}
