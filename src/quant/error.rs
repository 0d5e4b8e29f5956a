//! [`QuantError`]: why quantized bytes could not be read, naming the type and the sizes.

use core::fmt;

use super::format::GgmlType;

/// Why a row or matrix of quantized values could not be decoded or quantized. Every variant
/// names the type and the sizes involved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantError {
    /// A row of `values` values is not a whole number of blocks of `ty`.
    PartialBlock {
        /// The block format.
        ty: GgmlType,
        /// The row's length in values.
        values: usize,
    },
    /// The bytes of a row of `values` values of `ty` do not fit in a `usize`.
    TooLarge {
        /// The block format.
        ty: GgmlType,
        /// The row's length in values.
        values: usize,
    },
    /// The bytes given are not those of a row of `values` values of `ty`.
    ByteLength {
        /// The block format.
        ty: GgmlType,
        /// The row's length in values.
        values: usize,
        /// The bytes such a row takes.
        expected: usize,
        /// The bytes given.
        got: usize,
    },
    /// The bytes of a `rows × cols` matrix of `ty` do not fit in a `usize`.
    MatrixTooLarge {
        /// The block format.
        ty: GgmlType,
        /// Rows.
        rows: usize,
        /// Values per row.
        cols: usize,
    },
    /// The bytes given are not those of a `rows × cols` matrix of `ty`.
    MatrixBytes {
        /// The block format.
        ty: GgmlType,
        /// Rows.
        rows: usize,
        /// Values per row.
        cols: usize,
        /// The bytes such a matrix takes.
        expected: usize,
        /// The bytes given.
        got: usize,
    },
    /// Activations to quantize are not `blocks` whole blocks of the activation format.
    ActivationLength {
        /// The activation format (`q8_0`, `q8_1`, `q8_K`).
        format: &'static str,
        /// The values given.
        values: usize,
        /// The blocks given to write them to.
        blocks: usize,
    },
}

impl fmt::Display for QuantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::PartialBlock { ty, values } => write!(
                f,
                "{ty}: a row of {values} values is not a whole number of blocks of {}",
                ty.block_len()
            ),
            Self::TooLarge { ty, values } => {
                write!(
                    f,
                    "{ty}: the bytes of a row of {values} values overflow usize"
                )
            }
            Self::ByteLength {
                ty,
                values,
                expected,
                got,
            } => write!(
                f,
                "{ty}: a row of {values} values takes {expected} bytes, got {got}"
            ),
            Self::MatrixTooLarge { ty, rows, cols } => write!(
                f,
                "{ty}: the bytes of a {rows} x {cols} matrix overflow usize"
            ),
            Self::MatrixBytes {
                ty,
                rows,
                cols,
                expected,
                got,
            } => write!(
                f,
                "{ty}: a {rows} x {cols} matrix takes {expected} bytes, got {got}"
            ),
            Self::ActivationLength {
                format,
                values,
                blocks,
            } => write!(
                f,
                "{format}: {values} values are not the values of {blocks} blocks"
            ),
        }
    }
}

impl core::error::Error for QuantError {}

/// The bytes of a row of `values` values of `ty`, or why there is no such row.
pub(crate) fn row_bytes(ty: GgmlType, values: usize) -> Result<usize, QuantError> {
    if !values.is_multiple_of(ty.block_len()) {
        return Err(QuantError::PartialBlock { ty, values });
    }
    ty.row_bytes(values)
        .ok_or(QuantError::TooLarge { ty, values })
}
