//! GGUF, the model files of llama.cpp, read in place (`no_std` + `alloc`).
//!
//! A GGUF file is a header (`GGUF`, version, tensor count, metadata count), metadata entries
//! (a key and a typed value each: integers, floats, bools, strings, arrays of any of them),
//! tensor infos (name, up to four dimensions, ggml type, offset), then, at the next multiple of
//! `general.alignment` (32 by default), the tensor data. Versions 2 and 3 are read (they differ
//! only in that 3 may be big-endian, which this reader refuses by way of the version check);
//! version 1, with 32-bit counts, is refused by name.
//!
//! [`Gguf::parse`] reads a `&[u8]` and checks every count, length, offset and size against the
//! bytes before using it: a count is refused before anything is allocated if the bytes left
//! cannot hold that many of its smallest entries, strings must fit and be UTF-8, dimensions
//! must multiply without overflow into whole blocks of the tensor's type, and each tensor's
//! data must be aligned, inside the file and apart from every other tensor's. Keys and tensor
//! names are unique. Every failure is a [`GgufError`] naming where and what.
//!
//! Nothing is copied: keys, names and string values are `&str` into the bytes, arrays are
//! [`Array`] views decoded as they are read, and [`TensorInfo::data`] is the tensor's bytes.
//! With the `model` feature, `GgufFile::open` maps a file and parses it in place.
//!
//! ```
//! use skainet_schedule::gguf::{Gguf, GgufError};
//!
//! // A file too short for its header says where it ends.
//! let err = Gguf::parse(b"GGUF\x03\x00\x00\x00").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "header: the tensor count (8 bytes at offset 8) runs past the end of the 8-byte file"
//! );
//! assert!(matches!(
//!     Gguf::parse(b"GGUF\x01\x00\x00\x00"),
//!     Err(GgufError::UnsupportedVersion { version: 1 })
//! ));
//! ```

mod error;
#[cfg(feature = "model")]
mod mapped;
mod parse;
mod read;
mod tensor;
mod value;

pub use error::{GgufError, Item, MAX_QUOTED_NAME};
#[cfg(feature = "model")]
pub use mapped::GgufFile;
pub use parse::Gguf;
pub use tensor::TensorInfo;
pub use value::{Array, ArrayIter, Scalar, Scalars, Strings, Value, ValueType};

/// The alignment of the data section when the file has no `general.alignment`.
pub const DEFAULT_ALIGNMENT: usize = 32;

/// The most dimensions a tensor has (ggml's `GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// The largest dimension, and the largest product of dimensions, the reader accepts:
/// `i64::MAX` (ggml's dimensions are signed), or `usize::MAX` where that is smaller.
pub const MAX_DIM: u64 = if (usize::MAX as u64) < i64::MAX as u64 {
    usize::MAX as u64
} else {
    i64::MAX as u64
};

/// The deepest nesting of arrays in a metadata value (an array of arrays is depth 2). ggml
/// writes no nested arrays at all; the bound keeps the reader's recursion shallow.
pub const MAX_ARRAY_DEPTH: usize = 16;
