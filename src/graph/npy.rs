//! The `.npy` format for f32 tensors: how inputs and outputs travel to and from
//! `iree-run-module` (`--input=@x.npy`, `--output=@y.npy`).
//!
//! Only what that exchange needs: little-endian `f32` (`'<f4'`), C order. Like NumPy, the
//! writer emits format version 1.0 when the header's length fits its `u16` field and 2.0 (a
//! `u32` length) otherwise, header padded so the data starts on a 64-byte boundary; the reader
//! takes 1.0, 2.0 and 3.0 (2.0 with a UTF-8 header). The reader is strict: the header must be
//! the dictionary NumPy writes (each of `descr`, `fortran_order` and `shape` exactly once, a
//! boolean order, a tuple of non-negative integers), and the data must be exactly as long as the
//! shape says — a short file is [`NpyError::Truncated`], a long one [`NpyError::TrailingBytes`].
//! The length check uses checked arithmetic and comes before any allocation, so a small file
//! claiming a huge shape costs nothing. No input makes either direction panic.
//!
//! ```
//! use skainet_schedule::graph::npy;
//! use skainet_schedule::Tensor;
//! let t = Tensor::new(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
//! let bytes = npy::try_to_bytes(&t).unwrap();
//! assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
//! assert_eq!(npy::from_bytes(&bytes).unwrap(), t);
//! ```

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::tensor::{Tensor, TensorError};

const MAGIC: &[u8] = b"\x93NUMPY";
/// The data starts on a multiple of this, as NumPy aligns it.
const ALIGN: usize = 64;
/// The header text before the shape tuple and after it, as NumPy writes them.
const HEADER_HEAD: &[u8] = b"{'descr': '<f4', 'fortran_order': False, 'shape': ";
const HEADER_TAIL: &[u8] = b", }";

/// Why bytes are not an f32 `.npy` array this module reads, or why a tensor has no `.npy` form.
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
    /// The header is not the dictionary NumPy writes: not a `{...}` of quoted keys and values,
    /// a key other than `descr`, `fortran_order` and `shape`, one of them missing, text after
    /// the closing brace, or (version 3.0) not UTF-8.
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
    /// Major version 1, 2 or 3 with a minor version other than 0 (NumPy defines none).
    UnsupportedMinorVersion {
        /// The major version found.
        major: u8,
        /// The minor version found.
        minor: u8,
    },
    /// A header key appears more than once.
    DuplicateKey {
        /// The repeated key.
        key: &'static str,
    },
    /// A header value that NumPy never writes for its key: `descr` not a quoted string,
    /// `fortran_order` not `True`/`False`, `shape` not a tuple of non-negative decimal integers
    /// that fit `usize` (`()`, `(3,)`, `(3, 4)`).
    BadValue {
        /// The key.
        key: &'static str,
        /// The value's text.
        value: String,
    },
    /// More bytes after the header than the shape's data needs.
    TrailingBytes {
        /// Bytes the header and the shape's data take.
        expected: usize,
        /// Bytes present.
        present: usize,
    },
    /// A header longer than the `u32` length field of format version 2.0 can state (a shape
    /// with hundreds of millions of dimensions); there is no `.npy` form for it.
    HeaderTooLarge {
        /// The header's length in bytes before padding.
        len: usize,
    },
    /// Memory for the result could not be allocated.
    AllocationFailed {
        /// Bytes asked for.
        bytes: usize,
    },
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadMagic => write!(f, "not a .npy file: bad magic"),
            Self::UnsupportedVersion { major } => {
                write!(f, ".npy version {major}.x is not supported")
            }
            Self::UnsupportedMinorVersion { major, minor } => {
                write!(
                    f,
                    ".npy version {major}.{minor} is not supported (only {major}.0)"
                )
            }
            Self::Truncated { needed, present } => {
                write!(f, ".npy truncated: needs {needed} bytes, has {present}")
            }
            Self::TrailingBytes { expected, present } => write!(
                f,
                ".npy has trailing bytes: header and data take {expected} bytes, the file has {present}"
            ),
            Self::BadHeader { header } => write!(f, ".npy header not understood: {header:?}"),
            Self::DuplicateKey { key } => write!(f, ".npy header states '{key}' twice"),
            Self::BadValue { key, value } => {
                let expected = match *key {
                    "shape" => "a tuple of non-negative integers that fit usize",
                    "fortran_order" => "True or False",
                    _ => "a quoted string",
                };
                write!(f, ".npy header: '{key}' is {value:?}, not {expected}")
            }
            Self::UnsupportedDtype { descr } => {
                write!(f, ".npy dtype {descr:?} is not little-endian f32 ('<f4')")
            }
            Self::FortranOrder => write!(f, ".npy in Fortran order is not supported"),
            Self::Tensor(e) => write!(f, ".npy shape: {e}"),
            Self::HeaderTooLarge { len } => write!(
                f,
                ".npy header of {len} bytes is longer than a version 2.0 length field (u32) states"
            ),
            Self::AllocationFailed { bytes } => {
                write!(f, ".npy: could not allocate {bytes} bytes")
            }
        }
    }
}

impl core::error::Error for NpyError {}

/// The `.npy` bytes of `tensor` (see [`try_to_bytes`]).
///
/// # Panics
///
/// When [`try_to_bytes`] fails: the header would exceed 4 GiB (a shape with hundreds of
/// millions of dimensions), or memory runs out. Use [`try_to_bytes`] to get an error instead.
pub fn to_bytes(tensor: &Tensor) -> Vec<u8> {
    match try_to_bytes(tensor) {
        Ok(bytes) => bytes,
        Err(e) => panic!("{e}"),
    }
}

/// The `.npy` bytes of `tensor`: format version 1.0 when the padded header's length fits a
/// `u16`, else 2.0, as NumPy chooses.
///
/// # Errors
///
/// [`NpyError::HeaderTooLarge`] when even version 2.0 cannot state the header's length;
/// [`NpyError::AllocationFailed`] when the output buffer cannot be allocated.
pub fn try_to_bytes(tensor: &Tensor) -> Result<Vec<u8>, NpyError> {
    try_to_bytes_from(tensor, 1)
}

/// [`try_to_bytes`] with a format version of at least `min_major` (1 or 2).
fn try_to_bytes_from(tensor: &Tensor, min_major: u8) -> Result<Vec<u8>, NpyError> {
    let shape = tensor.shape();
    let text_len = shape_text_len(shape)
        .and_then(|n| n.checked_add(HEADER_HEAD.len() + HEADER_TAIL.len()))
        .ok_or(NpyError::HeaderTooLarge { len: usize::MAX })?;
    let layout = HeaderLayout::for_text(text_len, min_major)?;
    let data_len = tensor.len().checked_mul(4);
    let total = data_len
        .and_then(|n| n.checked_add(layout.data_start()))
        .ok_or(NpyError::AllocationFailed { bytes: usize::MAX })?;
    let mut out = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|_| NpyError::AllocationFailed { bytes: total })?;

    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[layout.major, 0]);
    let too_large = NpyError::HeaderTooLarge { len: text_len };
    if layout.major == 1 {
        let len = u16::try_from(layout.header_len).map_err(|_| too_large)?;
        out.extend_from_slice(&len.to_le_bytes());
    } else {
        let len = u32::try_from(layout.header_len).map_err(|_| too_large)?;
        out.extend_from_slice(&len.to_le_bytes());
    }
    out.extend_from_slice(HEADER_HEAD);
    push_shape(&mut out, shape);
    out.extend_from_slice(HEADER_TAIL);
    out.resize(layout.data_start() - 1, b' ');
    out.push(b'\n');
    debug_assert_eq!(out.len(), layout.data_start());
    for x in tensor.data() {
        out.extend_from_slice(&x.to_le_bytes());
    }
    Ok(out)
}

/// Where a written header puts things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeaderLayout {
    /// The format's major version: 1 or 2.
    major: u8,
    /// Magic, version and length field: 10 bytes in 1.0, 12 in 2.0.
    preamble: usize,
    /// The header's length as stated: text, padding and the final `'\n'`.
    header_len: usize,
}

impl HeaderLayout {
    /// The layout of a header whose text (without padding and `'\n'`) is `text_len` bytes:
    /// the first version from `min_major` on whose length field holds the padded length.
    fn for_text(text_len: usize, min_major: u8) -> Result<Self, NpyError> {
        let u32_max = usize::try_from(u32::MAX).unwrap_or(usize::MAX);
        for (major, preamble, max) in [(1, 10, usize::from(u16::MAX)), (2, 12, u32_max)] {
            if major < min_major {
                continue;
            }
            let padded = text_len
                .checked_add(preamble + 1)
                .and_then(|n| n.checked_next_multiple_of(ALIGN));
            if let Some(end) = padded {
                let header_len = end - preamble;
                if header_len <= max {
                    return Ok(Self {
                        major,
                        preamble,
                        header_len,
                    });
                }
            }
        }
        Err(NpyError::HeaderTooLarge { len: text_len })
    }

    fn data_start(self) -> usize {
        self.preamble + self.header_len
    }
}

/// Decimal digits of `d`.
fn decimal_len(d: usize) -> usize {
    d.checked_ilog10().map_or(1, |l| l as usize + 1)
}

/// The length of the shape tuple as written: `()`, `(3,)`, `(3, 4)`.
fn shape_text_len(shape: &[usize]) -> Option<usize> {
    let separators = match shape.len() {
        0 => 0,
        1 => 1,
        n => (n - 1).checked_mul(2)?,
    };
    shape
        .iter()
        .try_fold(2 + separators, |acc, &d| acc.checked_add(decimal_len(d)))
}

fn push_shape(out: &mut Vec<u8>, shape: &[usize]) {
    out.push(b'(');
    for (i, &d) in shape.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b", ");
        }
        push_decimal(out, d);
    }
    if shape.len() == 1 {
        out.push(b',');
    }
    out.push(b')');
}

fn push_decimal(out: &mut Vec<u8>, mut d: usize) {
    let mut digits = [0u8; 40];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (d % 10) as u8;
        d /= 10;
        if d == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// The tensor in `.npy` bytes.
///
/// # Errors
///
/// See [`NpyError`]: every way `bytes` differ from an f32, C-order `.npy` file of format 1.0,
/// 2.0 or 3.0, header and data exactly as long as stated, is an error, never a panic.
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor, NpyError> {
    let present = bytes.len();
    let prefix = present.min(MAGIC.len());
    if bytes[..prefix] != MAGIC[..prefix] {
        return Err(NpyError::BadMagic);
    }
    // The version decides how long the preamble is; until it is there, ask for the shortest.
    let (major, preamble) = match bytes.get(6) {
        None => (1, 10),
        Some(&major @ 1) => (major, 10),
        Some(&major @ (2 | 3)) => (major, 12),
        Some(&major) => return Err(NpyError::UnsupportedVersion { major }),
    };
    let Some(fixed) = bytes.get(..preamble) else {
        return Err(NpyError::Truncated {
            needed: preamble,
            present,
        });
    };
    if fixed[7] != 0 {
        return Err(NpyError::UnsupportedMinorVersion {
            major,
            minor: fixed[7],
        });
    }
    let header_len = if major == 1 {
        usize::from(u16::from_le_bytes([fixed[8], fixed[9]]))
    } else {
        let len = u32::from_le_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]);
        usize::try_from(len).unwrap_or(usize::MAX)
    };
    let data_start = preamble.saturating_add(header_len);
    let header = bytes.get(preamble..data_start).ok_or(NpyError::Truncated {
        needed: data_start,
        present,
    })?;
    if major == 3 && core::str::from_utf8(header).is_err() {
        return Err(NpyError::BadHeader {
            header: header_text(major, header),
        });
    }
    let fields = parse_header(header).map_err(|e| e.into_error(major, header))?;
    if fields.descr != b"<f4" {
        return Err(NpyError::UnsupportedDtype {
            descr: header_text(major, fields.descr),
        });
    }
    if fields.fortran_order {
        return Err(NpyError::FortranOrder);
    }
    let shape = fields.shape;

    let too_large = |shape: Vec<usize>| NpyError::Tensor(TensorError::TooLarge { shape });
    let Some(count) = crate::tensor::element_count(&shape) else {
        return Err(too_large(shape));
    };
    let Some((data_len, expected)) = count
        .checked_mul(4)
        .and_then(|n| Some((n, n.checked_add(data_start)?)))
    else {
        return Err(too_large(shape));
    };
    let data = &bytes[data_start..];
    if data.len() < data_len {
        return Err(NpyError::Truncated {
            needed: expected,
            present,
        });
    }
    if data.len() > data_len {
        return Err(NpyError::TrailingBytes { expected, present });
    }
    let mut values = Vec::new();
    values
        .try_reserve_exact(count)
        .map_err(|_| NpyError::AllocationFailed { bytes: data_len })?;
    values.extend(
        data.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    Tensor::new(shape, values).map_err(NpyError::Tensor)
}

/// Header bytes as text: Latin-1 in versions 1.0 and 2.0, UTF-8 in 3.0 (as NumPy decodes them).
fn header_text(major: u8, bytes: &[u8]) -> String {
    if major == 3 {
        String::from_utf8_lossy(bytes).into_owned()
    } else {
        bytes.iter().map(|&b| char::from(b)).collect()
    }
}

/// The three entries of a header.
struct Fields<'h> {
    descr: &'h [u8],
    fortran_order: bool,
    shape: Vec<usize>,
}

/// Why a header did not parse; turned into an [`NpyError`] with the header's text.
enum HeaderFault {
    Syntax,
    Duplicate(&'static str),
    Value(&'static str, usize),
    Alloc(usize),
}

impl HeaderFault {
    fn into_error(self, major: u8, header: &[u8]) -> NpyError {
        match self {
            Self::Syntax => NpyError::BadHeader {
                header: header_text(major, header),
            },
            Self::Duplicate(key) => NpyError::DuplicateKey { key },
            Self::Value(key, at) => NpyError::BadValue {
                key,
                value: header_text(major, value_extent(header, at)),
            },
            Self::Alloc(bytes) => NpyError::AllocationFailed { bytes },
        }
    }
}

const KEYS: [&str; 3] = ["descr", "fortran_order", "shape"];

/// Parses the subset of Python literal syntax NumPy writes: `{'descr': '<f4', 'fortran_order':
/// False, 'shape': (2, 3), }` with any whitespace between tokens and either quote.
fn parse_header(header: &[u8]) -> Result<Fields<'_>, HeaderFault> {
    let mut p = Cursor {
        bytes: header,
        at: 0,
    };
    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    p.skip_ws();
    p.expect(b'{')?;
    loop {
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        let key = p.string().ok_or(HeaderFault::Syntax)?;
        let key = *KEYS
            .iter()
            .find(|k| k.as_bytes() == key)
            .ok_or(HeaderFault::Syntax)?;
        p.skip_ws();
        p.expect(b':')?;
        p.skip_ws();
        let at = p.at;
        let fresh = match key {
            "descr" => descr
                .replace(p.string().ok_or(HeaderFault::Value(key, at))?)
                .is_none(),
            "fortran_order" => fortran_order
                .replace(p.boolean().ok_or(HeaderFault::Value(key, at))?)
                .is_none(),
            _ => shape.replace(p.shape(at)?).is_none(),
        };
        if !fresh {
            return Err(HeaderFault::Duplicate(key));
        }
        p.skip_ws();
        if p.eat(b'}') {
            break;
        }
        p.expect(b',')?;
    }
    p.skip_ws();
    if p.at != header.len() {
        return Err(HeaderFault::Syntax);
    }
    match (descr, fortran_order, shape) {
        (Some(descr), Some(fortran_order), Some(shape)) => Ok(Fields {
            descr,
            fortran_order,
            shape,
        }),
        _ => Err(HeaderFault::Syntax),
    }
}

struct Cursor<'h> {
    bytes: &'h [u8],
    at: usize,
}

impl<'h> Cursor<'h> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn expect(&mut self, b: u8) -> Result<(), HeaderFault> {
        if self.eat(b) {
            Ok(())
        } else {
            Err(HeaderFault::Syntax)
        }
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r' | b'\x0c')) {
            self.at += 1;
        }
    }

    /// A `'...'` or `"..."` string without escapes or line breaks; its contents.
    fn string(&mut self) -> Option<&'h [u8]> {
        let quote = self.peek().filter(|q| matches!(q, b'\'' | b'"'))?;
        let start = self.at + 1;
        let len = self.bytes[start..].iter().position(|&b| b == quote)?;
        let contents = &self.bytes[start..start + len];
        if contents.iter().any(|b| matches!(b, b'\\' | b'\n' | b'\r')) {
            return None;
        }
        self.at = start + len + 1;
        Some(contents)
    }

    /// `True` or `False`, as a whole word.
    fn boolean(&mut self) -> Option<bool> {
        let rest = &self.bytes[self.at..];
        let word = rest
            .iter()
            .position(|b| !b.is_ascii_alphanumeric() && *b != b'_')
            .map_or(rest, |end| &rest[..end]);
        let value = match word {
            b"True" => true,
            b"False" => false,
            _ => return None,
        };
        self.at += word.len();
        Some(value)
    }

    /// A tuple of non-negative decimal integers: `()`, `(3,)`, `(3, 4)`, `(3, 4,)`. `(3)` is an
    /// integer in Python, not a tuple, and is refused like NumPy refuses it.
    fn shape(&mut self, at: usize) -> Result<Vec<usize>, HeaderFault> {
        let bad = HeaderFault::Value("shape", at);
        let mut dims: Vec<usize> = Vec::new();
        if !self.eat(b'(') {
            return Err(bad);
        }
        self.skip_ws();
        if self.eat(b')') {
            return Ok(dims);
        }
        loop {
            let Some(d) = self.integer() else {
                return Err(bad);
            };
            dims.try_reserve(1).map_err(|_| {
                HeaderFault::Alloc(dims.len().saturating_mul(2 * size_of::<usize>()))
            })?;
            dims.push(d);
            self.skip_ws();
            if self.eat(b',') {
                self.skip_ws();
                if self.eat(b')') {
                    return Ok(dims);
                }
            } else if self.eat(b')') && dims.len() > 1 {
                return Ok(dims);
            } else {
                return Err(bad);
            }
        }
    }

    /// Decimal digits without sign, underscore or leading zero, that fit `usize`.
    fn integer(&mut self) -> Option<usize> {
        let rest = &self.bytes[self.at..];
        let len = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let digits = &rest[..len];
        if digits.is_empty() || (digits[0] == b'0' && len > 1) {
            return None;
        }
        let value = digits.iter().try_fold(0usize, |acc, &b| {
            acc.checked_mul(10)?.checked_add(usize::from(b - b'0'))
        })?;
        self.at += len;
        Some(value)
    }
}

/// The text of the value starting at `at`: up to the `,` or `}` that ends it outside brackets
/// and quotes, without trailing whitespace.
fn value_extent(header: &[u8], at: usize) -> &[u8] {
    let rest = header.get(at..).unwrap_or_default();
    let mut depth = 0usize;
    let mut quote = None;
    let mut end = rest.len();
    for (i, &b) in rest.iter().enumerate() {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'\'' | b'"') => quote = Some(b),
            (None, b'(' | b'[' | b'{') => depth += 1,
            (None, b')' | b']' | b'}') if depth > 0 => depth -= 1,
            (None, b',' | b'}') if depth == 0 => {
                end = i;
                break;
            }
            _ => {}
        }
    }
    rest[..end].trim_ascii_end()
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
    fn the_header_is_the_dictionary_numpy_writes() {
        let t = Tensor::new(vec![1, 3], vec![0.0; 3]).unwrap();
        let bytes = to_bytes(&t);
        let header = core::str::from_utf8(&bytes[10..128]).unwrap();
        assert_eq!(
            header.trim_end(),
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }"
        );
        assert_eq!(&bytes[..10], b"\x93NUMPY\x01\x00\x76\x00");
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
    fn a_header_of_at_most_65535_bytes_stays_version_1() {
        // 10 + 65526 = 65536: the longest aligned header a u16 states.
        assert_eq!(
            HeaderLayout::for_text(65525, 1),
            Ok(HeaderLayout {
                major: 1,
                preamble: 10,
                header_len: 65526
            })
        );
        assert_eq!(
            HeaderLayout::for_text(65526, 1),
            Ok(HeaderLayout {
                major: 2,
                preamble: 12,
                header_len: 65588
            })
        );
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_header_over_u32_max_has_no_layout() {
        let u32_max = usize::try_from(u32::MAX).unwrap();
        // 12 + (2^32 - 12): the longest aligned header a u32 states, text plus '\n'.
        assert_eq!(
            HeaderLayout::for_text(u32_max - 12, 1),
            Ok(HeaderLayout {
                major: 2,
                preamble: 12,
                header_len: u32_max - 11
            })
        );
        assert_eq!(
            HeaderLayout::for_text(u32_max - 11, 1),
            Err(NpyError::HeaderTooLarge { len: u32_max - 11 })
        );
        assert_eq!(
            HeaderLayout::for_text(usize::MAX, 1),
            Err(NpyError::HeaderTooLarge { len: usize::MAX })
        );
    }

    #[test]
    fn a_small_version_2_file_round_trips() {
        let t = Tensor::new(vec![2, 3], vec![0.5, 1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
        let bytes = try_to_bytes_from(&t, 2).unwrap();
        assert_eq!(&bytes[..12], b"\x93NUMPY\x02\x00\x74\x00\x00\x00");
        assert_eq!(bytes.len(), 128 + 24);
        assert_eq!(from_bytes(&bytes), Ok(t));
    }

    #[test]
    fn decimal_lengths_match_the_written_digits() {
        for d in [0, 9, 10, 99, 100, 12345, usize::MAX] {
            let mut out = Vec::new();
            push_decimal(&mut out, d);
            assert_eq!(out, alloc::format!("{d}").as_bytes());
            assert_eq!(decimal_len(d), out.len());
        }
    }
}
