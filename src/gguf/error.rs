//! The one error type of the reader: what is wrong, where in the file, and the values.

use alloc::string::String;
use core::fmt;

use crate::quant::GgmlType;

/// The longest key or tensor name an error quotes, in bytes; a longer one is cut at a character
/// boundary and ends in `…`, so an error about a hostile name never holds that name whole.
pub const MAX_QUOTED_NAME: usize = 64;

/// A copy of `name` for an error message, at most [`MAX_QUOTED_NAME`] bytes plus `…`.
pub(crate) fn quote(name: &str) -> String {
    if name.len() <= MAX_QUOTED_NAME {
        return String::from(name);
    }
    let mut end = MAX_QUOTED_NAME;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let mut quoted = String::from(&name[..end]);
    quoted.push('…');
    quoted
}

/// Which part of the file an error is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// The fixed header: magic, version and the two counts, or the layout of the whole file.
    Header,
    /// The metadata entry of this index (0-based, in file order), with its key once it was read,
    /// and the element of an array value the error is in (the innermost one, for nested arrays).
    Key {
        /// Position of the entry in the file.
        index: u64,
        /// The key, quoted (see [`MAX_QUOTED_NAME`]); `None` while the key itself is read.
        key: Option<String>,
        /// The array element, when the error is inside an array value.
        element: Option<u64>,
    },
    /// The tensor info of this index (0-based, in file order), with its name once it was read.
    Tensor {
        /// Position of the tensor info in the file.
        index: u64,
        /// The name, quoted (see [`MAX_QUOTED_NAME`]); `None` while the name itself is read.
        name: Option<String>,
    },
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Item::Header => f.write_str("header"),
            Item::Key {
                index,
                key,
                element,
            } => {
                write!(f, "metadata key {index}")?;
                if let Some(key) = key {
                    write!(f, " ({key})")?;
                }
                if let Some(element) = element {
                    write!(f, ", array element {element}")?;
                }
                Ok(())
            }
            Item::Tensor { index, name } => {
                write!(f, "tensor {index}")?;
                match name {
                    Some(name) => write!(f, " ({name})"),
                    None => Ok(()),
                }
            }
        }
    }
}

/// Everything that can be wrong with a GGUF file, or with a question asked of one.
///
/// Each variant names the part of the file ([`Item`]) and the field, and carries the offending
/// values; `Display` gives one line. Offsets are bytes from the start of the file unless the
/// variant says otherwise.
#[derive(Debug)]
#[non_exhaustive]
pub enum GgufError {
    /// The first four bytes are not `GGUF`.
    BadMagic {
        /// The four bytes found.
        found: [u8; 4],
    },
    /// A version other than 2 or 3 (version 1 stored its counts in 32 bits and is long gone).
    UnsupportedVersion {
        /// The version the header states.
        version: u32,
    },
    /// A fixed-size field runs past the end of the file.
    Truncated {
        /// Where.
        at: Item,
        /// The field, e.g. `"tensor count"`.
        field: &'static str,
        /// Where the field starts.
        offset: u64,
        /// Its size in bytes.
        needed: u64,
        /// The file's length.
        file_len: u64,
    },
    /// A count (of tensors, metadata entries or array elements) that the bytes left cannot hold,
    /// even at the smallest encoding of each entry: refused before anything is allocated.
    CountTooLarge {
        /// Where.
        at: Item,
        /// The field, e.g. `"tensor count"`.
        field: &'static str,
        /// The count the file states.
        count: u64,
        /// The fewest bytes one entry takes.
        min_entry_bytes: u64,
        /// The bytes left after the count.
        remaining: u64,
    },
    /// A string length beyond the bytes left.
    StringTooLong {
        /// Where.
        at: Item,
        /// The field, e.g. `"key"`.
        field: &'static str,
        /// The length the file states.
        len: u64,
        /// The bytes left after the length.
        remaining: u64,
    },
    /// A key, tensor name or string value that is not UTF-8.
    InvalidUtf8 {
        /// Where.
        at: Item,
        /// The field, e.g. `"string value"`.
        field: &'static str,
        /// The length of its longest valid UTF-8 prefix.
        valid_up_to: u64,
    },
    /// An empty metadata key (ggml refuses them too).
    EmptyKey {
        /// Position of the entry.
        index: u64,
    },
    /// A key that an earlier entry already has.
    DuplicateKey {
        /// Position of the later entry.
        index: u64,
        /// The key, quoted.
        key: String,
        /// Position of the first entry with that key.
        first: u64,
    },
    /// A metadata value type id that GGUF does not define.
    UnknownValueType {
        /// Where.
        at: Item,
        /// `"value type"` or `"array element type"`.
        field: &'static str,
        /// The id found.
        id: u32,
    },
    /// A bool byte other than 0 or 1.
    InvalidBool {
        /// Where.
        at: Item,
        /// The byte found.
        byte: u8,
    },
    /// Arrays nested deeper than [`MAX_ARRAY_DEPTH`](super::MAX_ARRAY_DEPTH).
    ArrayTooDeep {
        /// Where.
        at: Item,
        /// The depth reached.
        depth: usize,
    },
    /// `general.alignment` is zero or not a power of two.
    BadAlignment {
        /// The value found.
        alignment: u32,
    },
    /// More than four dimensions (ggml's `GGML_MAX_DIMS`).
    TooManyDims {
        /// Where.
        at: Item,
        /// The dimension count found.
        n_dims: u32,
    },
    /// A dimension above [`MAX_DIM`](super::MAX_DIM): `i64::MAX`, ggml's limit (it reads a
    /// larger one as negative), or `usize::MAX` on a 32-bit machine.
    DimTooLarge {
        /// Where.
        at: Item,
        /// The axis (0 is GGUF's first, the row length).
        axis: usize,
        /// The value found.
        dim: u64,
    },
    /// Dimensions whose product, zeros left out, exceeds [`MAX_DIM`](super::MAX_DIM): no count
    /// of rows or values may overflow, even in a tensor with no values.
    ElementCountOverflow {
        /// Where.
        at: Item,
        /// The dimensions, GGUF order (`ne[0]` first).
        dims: [u64; 4],
        /// How many of `dims` the tensor has.
        n_dims: usize,
    },
    /// A ggml type id this crate does not read.
    UnknownTensorType {
        /// Where.
        at: Item,
        /// The id found.
        id: u32,
    },
    /// A row (the first dimension) that is not a whole number of the type's blocks.
    PartialBlock {
        /// Where.
        at: Item,
        /// The tensor's type.
        ty: GgmlType,
        /// The row length in values.
        row_len: u64,
    },
    /// A tensor whose size in bytes overflows `usize`.
    ByteSizeOverflow {
        /// Where.
        at: Item,
        /// The tensor's type.
        ty: GgmlType,
        /// Its element count.
        elements: u64,
    },
    /// A tensor name that an earlier tensor already has.
    DuplicateTensor {
        /// Position of the later tensor.
        index: u64,
        /// The name, quoted.
        name: String,
        /// Position of the first tensor with that name.
        first: u64,
    },
    /// The data section would start past the end of a file that has tensors.
    DataSectionPastEnd {
        /// Where it would start: the end of the tensor infos rounded up to the alignment.
        start: u64,
        /// The file's length.
        file_len: u64,
    },
    /// A tensor offset that is not a multiple of the alignment.
    MisalignedOffset {
        /// Where.
        at: Item,
        /// The offset, from the start of the data section.
        offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// Tensor data that runs past the end of the file.
    DataPastEnd {
        /// Where.
        at: Item,
        /// The offset, from the start of the data section.
        offset: u64,
        /// The tensor's size in bytes.
        size: u64,
        /// The data section's length.
        data_len: u64,
    },
    /// Two tensors whose data overlap.
    DataOverlap {
        /// The tensor that starts later (or at the same offset, later in the file).
        at: Item,
        /// Its offset, from the start of the data section.
        offset: u64,
        /// The tensor it overlaps.
        other: Item,
        /// That tensor's offset.
        other_offset: u64,
        /// That tensor's size in bytes.
        other_size: u64,
    },
    /// A metadata key the file does not have.
    MissingKey {
        /// The key asked for, quoted.
        key: String,
    },
    /// A metadata value of another type than the one asked for.
    WrongType {
        /// The key, quoted.
        key: String,
        /// The type asked for, e.g. `"u32"` or `"array of string"`.
        expected: &'static str,
        /// The type in the file, in the same words.
        found: &'static str,
    },
    /// A tensor the file does not have.
    MissingTensor {
        /// The name asked for, quoted.
        name: String,
    },
    /// Fallible allocation of the parsed tables failed.
    AllocationFailed {
        /// What was being allocated, e.g. `"tensor infos"`.
        what: &'static str,
        /// How many entries.
        count: u64,
    },
    /// The file could not be opened or mapped.
    #[cfg(feature = "model")]
    Io {
        /// The path given.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

impl fmt::Display for GgufError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GgufError::BadMagic { found } => {
                write!(
                    f,
                    "not a GGUF file: the magic is {:02x} {:02x} {:02x} {:02x} ",
                    found[0], found[1], found[2], found[3]
                )?;
                f.write_str("(\"")?;
                for &b in found {
                    if b.is_ascii_graphic() || b == b' ' {
                        write!(f, "{}", char::from(b))?;
                    } else {
                        write!(f, "\\x{b:02x}")?;
                    }
                }
                f.write_str("\"), not \"GGUF\"")
            }
            GgufError::UnsupportedVersion { version } => {
                write!(
                    f,
                    "GGUF version {version} is not supported: this reader reads versions 2 and 3"
                )?;
                if matches!(version.swap_bytes(), 2 | 3) {
                    write!(
                        f,
                        " (a big-endian file of version {}?)",
                        version.swap_bytes()
                    )?;
                }
                Ok(())
            }
            GgufError::Truncated {
                at,
                field,
                offset,
                needed,
                file_len,
            } => write!(
                f,
                "{at}: the {field} ({needed} byte{} at offset {offset}) runs past the end of \
                 the {file_len}-byte file",
                if *needed == 1 { "" } else { "s" }
            ),
            GgufError::CountTooLarge {
                at,
                field,
                count,
                min_entry_bytes,
                remaining,
            } => write!(
                f,
                "{at}: {field} {count} cannot fit in the {remaining} bytes left \
                 (each takes at least {min_entry_bytes})"
            ),
            GgufError::StringTooLong {
                at,
                field,
                len,
                remaining,
            } => write!(
                f,
                "{at}: {field} length {len} exceeds the {remaining} bytes left"
            ),
            GgufError::InvalidUtf8 {
                at,
                field,
                valid_up_to,
            } => write!(
                f,
                "{at}: the {field} is not valid UTF-8 (valid up to byte {valid_up_to})"
            ),
            GgufError::EmptyKey { index } => write!(f, "metadata key {index}: the key is empty"),
            GgufError::DuplicateKey { index, key, first } => write!(
                f,
                "metadata key {index} ({key}): duplicate of metadata key {first}"
            ),
            GgufError::UnknownValueType { at, field, id } => {
                write!(f, "{at}: {field} {id} is not a GGUF value type (0 to 12)")
            }
            GgufError::InvalidBool { at, byte } => {
                write!(f, "{at}: bool byte {byte} is neither 0 nor 1")
            }
            GgufError::ArrayTooDeep { at, depth } => write!(
                f,
                "{at}: arrays nested {depth} deep (at most {} are read)",
                super::MAX_ARRAY_DEPTH
            ),
            GgufError::BadAlignment { alignment } => write!(
                f,
                "general.alignment {alignment} is not a nonzero power of two"
            ),
            GgufError::TooManyDims { at, n_dims } => {
                write!(f, "{at}: {n_dims} dimensions (ggml allows at most 4)")
            }
            GgufError::DimTooLarge { at, axis, dim } => write!(
                f,
                "{at}: dimension {axis} is {dim}, above the largest this reader accepts ({})",
                super::MAX_DIM
            ),
            GgufError::ElementCountOverflow { at, dims, n_dims } => {
                write!(
                    f,
                    "{at}: dimensions {:?} multiply to more than {} (zeros left out)",
                    dims.get(..*n_dims).unwrap_or(dims),
                    super::MAX_DIM
                )
            }
            GgufError::UnknownTensorType { at, id } => {
                write!(f, "{at}: ggml type {id} is not one this crate reads")
            }
            GgufError::PartialBlock { at, ty, row_len } => write!(
                f,
                "{at}: a row of {row_len} values is not a whole number of {ty} blocks of {}",
                ty.block_len()
            ),
            GgufError::ByteSizeOverflow { at, ty, elements } => write!(
                f,
                "{at}: the size in bytes of {elements} {ty} values overflows usize"
            ),
            GgufError::DuplicateTensor { index, name, first } => {
                write!(f, "tensor {index} ({name}): duplicate of tensor {first}")
            }
            GgufError::DataSectionPastEnd { start, file_len } => write!(
                f,
                "the tensor data would start at offset {start}, past the end of the \
                 {file_len}-byte file"
            ),
            GgufError::MisalignedOffset {
                at,
                offset,
                alignment,
            } => write!(
                f,
                "{at}: offset {offset} is not a multiple of the alignment {alignment}"
            ),
            GgufError::DataPastEnd {
                at,
                offset,
                size,
                data_len,
            } => write!(
                f,
                "{at}: {size} bytes at offset {offset} run past the end of the \
                 {data_len}-byte data section"
            ),
            GgufError::DataOverlap {
                at,
                offset,
                other,
                other_offset,
                other_size,
            } => write!(
                f,
                "{at}: data at offset {offset} overlaps {other} ({other_size} bytes at offset \
                 {other_offset})"
            ),
            GgufError::MissingKey { key } => write!(f, "metadata key {key} is missing"),
            GgufError::WrongType {
                key,
                expected,
                found,
            } => write!(f, "metadata key {key}: expected {expected}, found {found}"),
            GgufError::MissingTensor { name } => write!(f, "tensor {name} is missing"),
            GgufError::AllocationFailed { what, count } => {
                write!(f, "could not allocate {count} {what}")
            }
            #[cfg(feature = "model")]
            GgufError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl core::error::Error for GgufError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            #[cfg(feature = "model")]
            GgufError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
