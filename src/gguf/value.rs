//! Metadata values: the thirteen GGUF types, borrowed strings and lazily decoded arrays.

use core::fmt;
use core::marker::PhantomData;

use super::read::{At, Cursor};

/// A metadata value type as GGUF numbers it (`enum gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueType {
    /// `u8` (id 0).
    U8,
    /// `i8` (id 1).
    I8,
    /// `u16` (id 2).
    U16,
    /// `i16` (id 3).
    I16,
    /// `u32` (id 4).
    U32,
    /// `i32` (id 5).
    I32,
    /// `f32` (id 6).
    F32,
    /// A byte that is 0 or 1 (id 7).
    Bool,
    /// A `u64` length and that many bytes of UTF-8 (id 8).
    String,
    /// An element type, a `u64` count and the elements (id 9).
    Array,
    /// `u64` (id 10).
    U64,
    /// `i64` (id 11).
    I64,
    /// `f64` (id 12).
    F64,
}

impl ValueType {
    /// Every type, in id order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::String,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// GGUF's id of the type.
    pub const fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    /// The type of a GGUF id, `None` for an id GGUF does not define.
    pub const fn from_id(id: u32) -> Option<ValueType> {
        if id < 13 {
            Some(Self::ALL[id as usize])
        } else {
            None
        }
    }

    /// Its name in errors: `"u8"`, …, `"bool"`, `"string"`, `"array"`.
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }

    /// The name of an array of this type in errors: `"array of u32"`, `"array of string"`.
    pub const fn array_name(self) -> &'static str {
        match self {
            ValueType::U8 => "array of u8",
            ValueType::I8 => "array of i8",
            ValueType::U16 => "array of u16",
            ValueType::I16 => "array of i16",
            ValueType::U32 => "array of u32",
            ValueType::I32 => "array of i32",
            ValueType::F32 => "array of f32",
            ValueType::Bool => "array of bool",
            ValueType::String => "array of string",
            ValueType::Array => "array of array",
            ValueType::U64 => "array of u64",
            ValueType::I64 => "array of i64",
            ValueType::F64 => "array of f64",
        }
    }

    /// The encoded size of one value, `None` for strings and arrays.
    pub const fn fixed_len(self) -> Option<usize> {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => Some(1),
            ValueType::U16 | ValueType::I16 => Some(2),
            ValueType::U32 | ValueType::I32 | ValueType::F32 => Some(4),
            ValueType::U64 | ValueType::I64 | ValueType::F64 => Some(8),
            ValueType::String | ValueType::Array => None,
        }
    }

    /// The fewest bytes one value takes: an empty string is its 8-byte length, an empty array
    /// its 4-byte element type and 8-byte count.
    pub(crate) const fn min_encoded_len(self) -> usize {
        match self.fixed_len() {
            Some(len) => len,
            None => match self {
                ValueType::String => 8,
                _ => 12,
            },
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One metadata value, borrowed from the file: strings are `&'a str` into it, arrays are views
/// of its bytes decoded as they are read.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Value<'a> {
    /// A `u8`.
    U8(u8),
    /// An `i8`.
    I8(i8),
    /// A `u16`.
    U16(u16),
    /// An `i16`.
    I16(i16),
    /// A `u32`.
    U32(u32),
    /// An `i32`.
    I32(i32),
    /// An `f32`.
    F32(f32),
    /// A bool.
    Bool(bool),
    /// A UTF-8 string.
    String(&'a str),
    /// An array of any type, arrays included.
    Array(Array<'a>),
    /// A `u64`.
    U64(u64),
    /// An `i64`.
    I64(i64),
    /// An `f64`.
    F64(f64),
}

impl<'a> Value<'a> {
    /// The value's type.
    pub const fn ty(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// Its type in the words of errors: `"u32"`, `"string"`, `"array of f32"`.
    pub const fn type_name(&self) -> &'static str {
        match self {
            Value::Array(array) => array.element_type.array_name(),
            other => other.ty().name(),
        }
    }

    /// The string, if this is one.
    pub const fn as_str(&self) -> Option<&'a str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The array, if this is one.
    pub const fn as_array(&self) -> Option<Array<'a>> {
        match self {
            Value::Array(a) => Some(*a),
            _ => None,
        }
    }
}

/// An array value: its element type, its length and its encoded elements, borrowed from the
/// file. The parse checked every element (lengths, UTF-8, bools, nested arrays), so reading
/// them back cannot fail; fixed-size elements are read in place, in O(1) each.
///
/// ```
/// use skainet_schedule::gguf::{Gguf, Value, ValueType};
/// # let file = {
/// #     fn s(f: &mut Vec<u8>, s: &str) {
/// #         f.extend((s.len() as u64).to_le_bytes());
/// #         f.extend(s.as_bytes());
/// #     }
/// #     let mut f = b"GGUF".to_vec();
/// #     f.extend(3u32.to_le_bytes());
/// #     f.extend(0u64.to_le_bytes());
/// #     f.extend(2u64.to_le_bytes());
/// #     s(&mut f, "tokenizer.ggml.tokens");
/// #     f.extend(9u32.to_le_bytes()); // array
/// #     f.extend(8u32.to_le_bytes()); // of string
/// #     f.extend(2u64.to_le_bytes());
/// #     s(&mut f, "<s>");
/// #     s(&mut f, "é");
/// #     s(&mut f, "tokenizer.ggml.scores");
/// #     f.extend(9u32.to_le_bytes()); // array
/// #     f.extend(6u32.to_le_bytes()); // of f32
/// #     f.extend(2u64.to_le_bytes());
/// #     f.extend(0.0f32.to_le_bytes());
/// #     f.extend((-1.5f32).to_le_bytes());
/// #     f
/// # };
/// let gguf = Gguf::parse(&file)?;
/// let tokens = gguf.get_strings("tokenizer.ggml.tokens")?;
/// assert_eq!(tokens.collect::<Vec<_>>(), ["<s>", "é"]);
///
/// let scores = gguf.get_array("tokenizer.ggml.scores")?;
/// assert_eq!((scores.element_type(), scores.len()), (ValueType::F32, 2));
/// assert_eq!(scores.get(1), Some(Value::F32(-1.5)));
/// assert_eq!(scores.scalars::<f32>().unwrap().collect::<Vec<_>>(), [0.0, -1.5]);
/// assert!(scores.strings().is_none());
/// # Ok::<(), skainet_schedule::gguf::GgufError>(())
/// ```
#[derive(Clone, Copy, PartialEq)]
pub struct Array<'a> {
    element_type: ValueType,
    len: usize,
    bytes: &'a [u8],
}

impl<'a> Array<'a> {
    pub(crate) fn new(element_type: ValueType, len: usize, bytes: &'a [u8]) -> Self {
        Array {
            element_type,
            len,
            bytes,
        }
    }

    /// The type of every element.
    pub const fn element_type(&self) -> ValueType {
        self.element_type
    }

    /// The number of elements.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no elements.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements as the file encodes them (little-endian; strings with their lengths).
    pub const fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The elements, in order.
    pub fn iter(&self) -> ArrayIter<'a> {
        ArrayIter {
            element_type: self.element_type,
            left: self.len,
            cursor: Cursor::new(self.bytes),
        }
    }

    /// Element `i`: O(1) for fixed-size types, O(i) for strings and arrays.
    pub fn get(&self, i: usize) -> Option<Value<'a>> {
        match self.element_type.fixed_len() {
            Some(size) if i < self.len => {
                let start = i.checked_mul(size)?;
                let mut cursor = Cursor::new(self.bytes.get(start..start.checked_add(size)?)?);
                cursor.value(self.element_type, &At::Header, 0).ok()
            }
            Some(_) => None,
            None => self.iter().nth(i),
        }
    }

    /// The elements as `&str`, if they are strings.
    pub fn strings(&self) -> Option<Strings<'a>> {
        (self.element_type == ValueType::String).then(|| Strings {
            left: self.len,
            cursor: Cursor::new(self.bytes),
        })
    }

    /// The elements as `T`, if they are of `T`'s type (`u8`, …, `f64`, `bool`).
    pub fn scalars<T: Scalar>(&self) -> Option<Scalars<'a, T>> {
        (self.element_type == T::TYPE).then_some(Scalars {
            bytes: self.bytes,
            ty: PhantomData,
        })
    }
}

impl fmt::Debug for Array<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Array")
            .field("element_type", &self.element_type)
            .field("len", &self.len)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

impl<'a> IntoIterator for Array<'a> {
    type Item = Value<'a>;
    type IntoIter = ArrayIter<'a>;

    fn into_iter(self) -> ArrayIter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &Array<'a> {
    type Item = Value<'a>;
    type IntoIter = ArrayIter<'a>;

    fn into_iter(self) -> ArrayIter<'a> {
        self.iter()
    }
}

/// The elements of an [`Array`] as [`Value`]s.
#[derive(Clone, Debug)]
pub struct ArrayIter<'a> {
    element_type: ValueType,
    left: usize,
    cursor: Cursor<'a>,
}

impl<'a> Iterator for ArrayIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The parse read these very bytes without error.
        match self.cursor.value(self.element_type, &At::Header, 0) {
            Ok(value) => Some(value),
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ArrayIter<'_> {}

/// The elements of an array of strings, borrowed from the file.
#[derive(Clone, Debug)]
pub struct Strings<'a> {
    left: usize,
    cursor: Cursor<'a>,
}

impl<'a> Iterator for Strings<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The parse read these very bytes without error.
        match self.cursor.string(&At::Header, super::read::STRING_VALUE) {
            Ok(s) => Some(s),
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Strings<'_> {}

/// The elements of an array of a fixed-size type, decoded in place; `nth` is O(1).
#[derive(Clone, Debug)]
pub struct Scalars<'a, T> {
    bytes: &'a [u8],
    ty: PhantomData<T>,
}

impl<T: Scalar> Iterator for Scalars<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let (head, rest) = self.bytes.split_at_checked(T::LEN)?;
        self.bytes = rest;
        T::from_le(head)
    }

    fn nth(&mut self, n: usize) -> Option<T> {
        let skip = n.saturating_mul(T::LEN);
        self.bytes = self.bytes.get(skip..).unwrap_or_default();
        self.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.bytes.len() / T::LEN;
        (n, Some(n))
    }
}

impl<T: Scalar> DoubleEndedIterator for Scalars<'_, T> {
    fn next_back(&mut self) -> Option<T> {
        let split = self.bytes.len().checked_sub(T::LEN)?;
        let (rest, tail) = self.bytes.split_at_checked(split)?;
        self.bytes = rest;
        T::from_le(tail)
    }
}

impl<T: Scalar> ExactSizeIterator for Scalars<'_, T> {}

pub(crate) mod sealed {
    pub trait Sealed: Sized {
        /// Encoded bytes of one value.
        const LEN: usize;
        /// Decodes exactly `LEN` little-endian bytes (`None` for another length).
        fn from_le(bytes: &[u8]) -> Option<Self>;
        /// The value, if it has this type.
        fn from_value(value: &super::Value<'_>) -> Option<Self>;
    }
}

/// The fixed-size metadata types, for [`Array::scalars`] and
/// [`Gguf::get_scalars`](super::Gguf::get_scalars): `u8`, `i8`, `u16`, `i16`, `u32`, `i32`,
/// `f32`, `bool`, `u64`, `i64`, `f64`. Sealed.
pub trait Scalar: sealed::Sealed + Copy {
    /// The GGUF type of the values.
    const TYPE: ValueType;
}

macro_rules! scalar {
    ($t:ty, $variant:ident, $len:literal, |$b:ident| $decode:expr) => {
        impl sealed::Sealed for $t {
            const LEN: usize = $len;
            fn from_le(bytes: &[u8]) -> Option<Self> {
                let $b = *bytes
                    .first_chunk::<$len>()
                    .filter(|_| bytes.len() == $len)?;
                Some($decode)
            }
            fn from_value(value: &Value<'_>) -> Option<Self> {
                match *value {
                    Value::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
        impl Scalar for $t {
            const TYPE: ValueType = ValueType::$variant;
        }
    };
}

scalar!(u8, U8, 1, |b| b[0]);
scalar!(i8, I8, 1, |b| b[0] as i8);
scalar!(u16, U16, 2, |b| u16::from_le_bytes(b));
scalar!(i16, I16, 2, |b| i16::from_le_bytes(b));
scalar!(u32, U32, 4, |b| u32::from_le_bytes(b));
scalar!(i32, I32, 4, |b| i32::from_le_bytes(b));
scalar!(f32, F32, 4, |b| f32::from_le_bytes(b));
// The parse refused every byte other than 0 and 1.
scalar!(bool, Bool, 1, |b| b[0] != 0);
scalar!(u64, U64, 8, |b| u64::from_le_bytes(b));
scalar!(i64, I64, 8, |b| i64::from_le_bytes(b));
scalar!(f64, F64, 8, |b| f64::from_le_bytes(b));
