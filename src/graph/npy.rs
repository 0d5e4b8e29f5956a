//! The `.npy` format for f32 tensors: how inputs and outputs travel to and from
//! `iree-run-module` (`--input=@x.npy`, `--output=@y.npy`).
//!
//! Only what that exchange needs: little-endian `f32` (`'<f4'`), C order, format versions 1
//! to 3 when reading, version 1 when writing (header padded to 64 bytes, as NumPy does).
//!
//! ```
//! use skainet_schedule::graph::npy;
//! use skainet_schedule::Tensor;
//! let t = Tensor::new(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
//! let bytes = npy::to_bytes(&t);
//! assert_eq!(&bytes[..6], b"\x93NUMPY");
//! assert_eq!(npy::from_bytes(&bytes).unwrap(), t);
//! ```

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::tensor::{Tensor, TensorError};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Why bytes are not an f32 `.npy` array this module reads.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NpyError {
    /// The file does not start with `\x93NUMPY`.
    BadMagic,
    /// A format version other than 1.x, 2.x or 3.x.
    UnsupportedVersion {
        /// The major version found.
        major: u8,
    },
    /// Fewer bytes than the header or the shape requires.
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        present: usize,
    },
    /// The header is not the dictionary NumPy writes.
    BadHeader {
        /// The header text.
        header: String,
    },
    /// An element type other than little-endian f32.
    UnsupportedDtype {
        /// The `descr` found.
        descr: String,
    },
    /// Fortran (column-major) order.
    FortranOrder,
    /// The shape does not describe the data (or overflows).
    Tensor(TensorError),
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMagic => write!(f, "not a .npy file: bad magic"),
            Self::UnsupportedVersion { major } => {
                write!(f, ".npy version {major}.x is not supported")
            }
            Self::Truncated { needed, present } => {
                write!(f, ".npy truncated: needs {needed} bytes, has {present}")
            }
            Self::BadHeader { header } => write!(f, ".npy header not understood: {header:?}"),
            Self::UnsupportedDtype { descr } => {
                write!(f, ".npy dtype {descr:?} is not little-endian f32 ('<f4')")
            }
            Self::FortranOrder => write!(f, ".npy in Fortran order is not supported"),
            Self::Tensor(e) => write!(f, ".npy shape: {e}"),
        }
    }
}

impl core::error::Error for NpyError {}

/// The `.npy` (version 1.0) bytes of `tensor`.
pub fn to_bytes(tensor: &Tensor) -> Vec<u8> {
    let shape = match tensor.shape() {
        [] => String::from("()"),
        [d] => format!("({d},)"),
        dims => {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    let unpadded = MAGIC.len() + 4 + header.len() + 1;
    header.extend(core::iter::repeat_n(
        ' ',
        unpadded.next_multiple_of(64) - unpadded,
    ));
    header.push('\n');

    let mut out = Vec::with_capacity(10 + header.len() + 4 * tensor.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    // A shape needs more than 64 KiB of text only with thousands of dims.
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for x in tensor.data() {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// The tensor in `.npy` bytes.
///
/// # Errors
///
/// See [`NpyError`].
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor, NpyError> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(NpyError::BadMagic);
    }
    let (header_len, header_start) = match bytes[6] {
        1 => (usize::from(u16::from_le_bytes([bytes[8], bytes[9]])), 10),
        2 | 3 => {
            let needed = 12;
            let b = bytes.get(8..12).ok_or(NpyError::Truncated {
                needed,
                present: bytes.len(),
            })?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        major => return Err(NpyError::UnsupportedVersion { major }),
    };
    let data_start = header_start + header_len;
    let header = bytes
        .get(header_start..data_start)
        .ok_or(NpyError::Truncated {
            needed: data_start,
            present: bytes.len(),
        })?;
    let header = String::from_utf8_lossy(header).into_owned();
    let bad = || NpyError::BadHeader {
        header: header.clone(),
    };

    let descr = value_after(&header, "'descr'")
        .and_then(|v| v.strip_prefix('\''))
        .and_then(|v| v.split('\'').next())
        .ok_or_else(bad)?;
    if descr != "<f4" {
        return Err(NpyError::UnsupportedDtype {
            descr: descr.to_string(),
        });
    }
    let fortran = value_after(&header, "'fortran_order'").ok_or_else(bad)?;
    if fortran.starts_with("True") {
        return Err(NpyError::FortranOrder);
    }
    if !fortran.starts_with("False") {
        return Err(bad());
    }
    let tuple = value_after(&header, "'shape'")
        .and_then(|v| v.strip_prefix('('))
        .and_then(|v| v.split(')').next())
        .ok_or_else(bad)?;
    let shape = tuple
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| bad()))
        .collect::<Result<Vec<usize>, NpyError>>()?;

    let count = crate::tensor::element_count(&shape).ok_or_else(|| {
        NpyError::Tensor(TensorError::TooLarge {
            shape: shape.clone(),
        })
    })?;
    let needed = count
        .checked_mul(4)
        .and_then(|n| n.checked_add(data_start))
        .ok_or_else(|| {
            NpyError::Tensor(TensorError::TooLarge {
                shape: shape.clone(),
            })
        })?;
    let data = bytes.get(data_start..needed).ok_or(NpyError::Truncated {
        needed,
        present: bytes.len(),
    })?;
    let values = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Tensor::new(shape, values).map_err(NpyError::Tensor)
}

/// The text after `key` and its `:`, with leading spaces trimmed.
fn value_after<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let at = header.find(key)? + key.len();
    header[at..]
        .trim_start()
        .strip_prefix(':')
        .map(str::trim_start)
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn headers_are_padded_to_64_bytes() {
        let t = Tensor::new(vec![2, 4], vec![0.0; 8]).unwrap();
        let bytes = to_bytes(&t);
        let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
        assert_eq!((10 + header_len) % 64, 0);
        assert_eq!(bytes.len(), 10 + header_len + 32);
        assert_eq!(bytes[10 + header_len - 1], b'\n');
    }

    #[test]
    fn rank_zero_and_rank_one_round_trip() {
        for t in [
            Tensor::new(vec![], vec![2.5]).unwrap(),
            Tensor::new(vec![3], vec![1.0, -0.0, f32::NEG_INFINITY]).unwrap(),
        ] {
            let back = from_bytes(&to_bytes(&t)).unwrap();
            assert_eq!(back.shape(), t.shape());
            assert_eq!(back.to_bits(), t.to_bits());
        }
    }

    #[test]
    fn reads_what_numpy_writes() {
        // np.save of np.arange(3, dtype=np.float32).reshape(1, 3), header padded to 64 bytes.
        let mut bytes = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        let mut header =
            String::from("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        assert_eq!(header.len(), 0x76);
        bytes.extend_from_slice(header.as_bytes());
        for x in [0.0f32, 1.0, 2.0] {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        let t = from_bytes(&bytes).unwrap();
        assert_eq!(t.shape(), [1, 3]);
        assert_eq!(t.data(), [0.0, 1.0, 2.0]);
    }

    #[test]
    fn other_dtypes_and_truncation_are_errors() {
        let t = Tensor::new(vec![2], vec![1.0, 2.0]).unwrap();
        let bytes = to_bytes(&t);
        assert_eq!(
            from_bytes(&bytes[..bytes.len() - 1]),
            Err(NpyError::Truncated {
                needed: bytes.len(),
                present: bytes.len() - 1
            })
        );
        let mut f8 = bytes.clone();
        let at = f8.windows(3).position(|w| w == b"<f4").unwrap();
        f8[at + 2] = b'8';
        assert_eq!(
            from_bytes(&f8),
            Err(NpyError::UnsupportedDtype {
                descr: "<f8".into()
            })
        );
        assert_eq!(from_bytes(b"PK\x03\x04zipfile"), Err(NpyError::BadMagic));
    }
}
