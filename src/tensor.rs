//! The small owned f32 tensor the kernels and the graph executor exchange.

use alloc::vec;
use alloc::vec::Vec;
use core::fmt;

/// A dense, row-major f32 tensor: a shape and exactly `shape.iter().product()` values.
///
/// ```
/// use skainet_schedule::tensor::Tensor;
/// let t = Tensor::new(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
/// assert_eq!(t.shape(), [2, 3]);
/// assert_eq!(t.get(&[1, 2]), Some(5.0));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Vec<f32>,
}

/// Why a tensor could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// The shape's element count overflows `usize`.
    TooLarge {
        /// The shape given.
        shape: Vec<usize>,
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
            Self::TooLarge { shape } => {
                write!(
                    f,
                    "tensor of shape {shape:?} has more elements than usize holds"
                )
            }
        }
    }
}

impl core::error::Error for TensorError {}

/// The number of elements of `shape`, or `None` on overflow.
pub fn element_count(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

impl Tensor {
    /// A tensor of `shape` holding `data` (row-major).
    ///
    /// # Errors
    ///
    /// [`TensorError::LengthMismatch`] when `data.len()` is not the shape's element count;
    /// [`TensorError::TooLarge`] when that count overflows.
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Result<Self, TensorError> {
        let expected = element_count(&shape).ok_or_else(|| TensorError::TooLarge {
            shape: shape.clone(),
        })?;
        if data.len() != expected {
            return Err(TensorError::LengthMismatch {
                shape,
                expected,
                actual: data.len(),
            });
        }
        Ok(Self { shape, data })
    }

    /// A tensor of zeros.
    ///
    /// # Errors
    ///
    /// [`TensorError::TooLarge`] when the element count overflows.
    pub fn zeros(shape: Vec<usize>) -> Result<Self, TensorError> {
        let n = element_count(&shape).ok_or_else(|| TensorError::TooLarge {
            shape: shape.clone(),
        })?;
        Ok(Self {
            shape,
            data: vec![0.0; n],
        })
    }

    /// A tensor whose element at flat (row-major) index `i` is `f(i)`.
    ///
    /// # Errors
    ///
    /// [`TensorError::TooLarge`] when the element count overflows.
    pub fn from_fn(shape: Vec<usize>, f: impl FnMut(usize) -> f32) -> Result<Self, TensorError> {
        let n = element_count(&shape).ok_or_else(|| TensorError::TooLarge {
            shape: shape.clone(),
        })?;
        Ok(Self {
            shape,
            data: (0..n).map(f).collect(),
        })
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

    /// Consumes the tensor, returning its shape and values.
    pub fn into_parts(self) -> (Vec<usize>, Vec<f32>) {
        (self.shape, self.data)
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
        Self::new(shape, self.data)
    }

    /// The bit patterns of every value, for exact comparisons.
    pub fn to_bits(&self) -> Vec<u32> {
        self.data.iter().map(|x| x.to_bits()).collect()
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;

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
        assert!(r.reshape(vec![3]).is_err());
    }
}
