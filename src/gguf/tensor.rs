//! One tensor of a file: name, type, dimensions, and its bytes borrowed from the file.

use core::fmt;

use super::MAX_DIMS;
use crate::quant::GgmlType;

/// A tensor's description and data, borrowed from the file.
///
/// Dimensions are in GGUF's order, ggml's `ne`: `dims()[0]` is the row length (the values
/// stored next to each other), so a weight of `n` output rows over `k` inputs is `[k, n]`.
#[derive(Clone, Copy, PartialEq)]
pub struct TensorInfo<'a> {
    name: &'a str,
    ty: GgmlType,
    dims: [usize; MAX_DIMS],
    n_dims: usize,
    offset: u64,
    /// The size in bytes, checked at parse; `data` has exactly this length once placed.
    size: usize,
    data: &'a [u8],
}

impl<'a> TensorInfo<'a> {
    pub(crate) fn unplaced(
        name: &'a str,
        ty: GgmlType,
        dims: [usize; MAX_DIMS],
        n_dims: usize,
        offset: u64,
        size: usize,
    ) -> Self {
        TensorInfo {
            name,
            ty,
            dims,
            n_dims,
            offset,
            size,
            data: &[],
        }
    }

    pub(crate) fn byte_len_unplaced(&self) -> usize {
        self.size
    }

    pub(crate) fn place(&mut self, data: &'a [u8]) {
        self.data = data;
    }

    /// The tensor's name, e.g. `blk.0.attn_q.weight`.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// Its element type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// Its dimensions, GGUF order (row length first); up to four, none for a scalar.
    pub fn dims(&self) -> &[usize] {
        self.dims.get(..self.n_dims).unwrap_or(&self.dims)
    }

    /// The values in one row: the first dimension (1 for a scalar).
    pub fn row_len(&self) -> usize {
        self.dims[0]
    }

    /// The number of rows: the product of the dimensions after the first (1 for a scalar or a
    /// vector).
    pub fn rows(&self) -> usize {
        // The parse checked the product of all dimensions fits, so this one does too.
        self.dims[1..].iter().product()
    }

    /// The number of values.
    pub fn element_count(&self) -> usize {
        self.dims.iter().product()
    }

    /// Where its data starts, in bytes from the start of the data section (a multiple of the
    /// file's alignment).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The size of its data in bytes: whole blocks of its type.
    pub fn byte_len(&self) -> usize {
        self.data.len()
    }

    /// Its data, borrowed from the file: `byte_len()` bytes in ggml's layout for its type.
    pub fn data(&self) -> &'a [u8] {
        self.data
    }
}

impl fmt::Debug for TensorInfo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TensorInfo")
            .field("name", &self.name)
            .field("ty", &self.ty)
            .field("dims", &self.dims())
            .field("offset", &self.offset)
            .field("bytes", &self.data.len())
            .finish()
    }
}
