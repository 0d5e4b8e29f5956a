//! The cursor every read goes through: bounds-checked little-endian fields, strings and values,
//! each failure an error that says where it happened.

use core::str;

use super::error::{quote, GgufError, Item};
use super::value::{Array, Value, ValueType};
use super::MAX_ARRAY_DEPTH;

/// Where a read is, without allocating: turned into an [`Item`] only when a read fails.
#[derive(Clone, Copy, Debug)]
pub(crate) enum At<'a> {
    Header,
    Key {
        index: u64,
        key: Option<&'a str>,
        element: Option<u64>,
    },
    Tensor {
        index: u64,
        name: Option<&'a str>,
    },
}

impl At<'_> {
    pub(crate) fn item(&self) -> Item {
        match *self {
            At::Header => Item::Header,
            At::Key {
                index,
                key,
                element,
            } => Item::Key {
                index,
                key: key.map(quote),
                element,
            },
            At::Tensor { index, name } => Item::Tensor {
                index,
                name: name.map(quote),
            },
        }
    }

    /// The same place, inside element `i` of an array.
    fn element(self, i: u64) -> Self {
        match self {
            At::Key { index, key, .. } => At::Key {
                index,
                key,
                element: Some(i),
            },
            other => other,
        }
    }
}

/// The two names of a length-prefixed string field: its 8-byte length, and its text.
#[derive(Clone, Copy)]
pub(crate) struct StrField {
    pub(crate) len: &'static str,
    pub(crate) text: &'static str,
}

pub(crate) const KEY: StrField = StrField {
    len: "key length",
    text: "key",
};
pub(crate) const TENSOR_NAME: StrField = StrField {
    len: "name length",
    text: "name",
};
pub(crate) const STRING_VALUE: StrField = StrField {
    len: "string length",
    text: "string value",
};

/// A position in a byte slice; `pos <= bytes.len()` always.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The next `n` bytes, or a `Truncated` error naming `field`.
    pub(crate) fn take(
        &mut self,
        n: usize,
        at: &At<'_>,
        field: &'static str,
    ) -> Result<&'a [u8], GgufError> {
        let bytes = self.bytes;
        match bytes.get(self.pos..).and_then(|rest| rest.get(..n)) {
            Some(taken) => {
                self.pos += n;
                Ok(taken)
            }
            None => Err(GgufError::Truncated {
                at: at.item(),
                field,
                offset: self.pos as u64,
                needed: n as u64,
                file_len: bytes.len() as u64,
            }),
        }
    }

    pub(crate) fn array<const N: usize>(
        &mut self,
        at: &At<'_>,
        field: &'static str,
    ) -> Result<[u8; N], GgufError> {
        let taken = self.take(N, at, field)?;
        match taken.first_chunk::<N>() {
            Some(chunk) => Ok(*chunk),
            // `take` returned exactly N bytes.
            None => Err(GgufError::Truncated {
                at: at.item(),
                field,
                offset: self.pos as u64,
                needed: N as u64,
                file_len: self.bytes.len() as u64,
            }),
        }
    }

    pub(crate) fn u8(&mut self, at: &At<'_>, field: &'static str) -> Result<u8, GgufError> {
        self.array::<1>(at, field).map(|b| b[0])
    }

    pub(crate) fn u16(&mut self, at: &At<'_>, field: &'static str) -> Result<u16, GgufError> {
        self.array(at, field).map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, at: &At<'_>, field: &'static str) -> Result<u32, GgufError> {
        self.array(at, field).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, at: &At<'_>, field: &'static str) -> Result<u64, GgufError> {
        self.array(at, field).map(u64::from_le_bytes)
    }

    /// A GGUF string: a `u64` length, then that many bytes of UTF-8.
    pub(crate) fn string(&mut self, at: &At<'_>, field: StrField) -> Result<&'a str, GgufError> {
        let len = self.u64(at, field.len)?;
        let remaining = self.remaining();
        if len > remaining as u64 {
            return Err(GgufError::StringTooLong {
                at: at.item(),
                field: field.text,
                len,
                remaining: remaining as u64,
            });
        }
        // `len <= remaining`, so it fits a usize.
        let raw = self.take(len as usize, at, field.text)?;
        str::from_utf8(raw).map_err(|e| GgufError::InvalidUtf8 {
            at: at.item(),
            field: field.text,
            valid_up_to: e.valid_up_to() as u64,
        })
    }

    /// A value type id.
    pub(crate) fn value_type(
        &mut self,
        at: &At<'_>,
        field: &'static str,
    ) -> Result<ValueType, GgufError> {
        let id = self.u32(at, field)?;
        ValueType::from_id(id).ok_or(GgufError::UnknownValueType {
            at: at.item(),
            field,
            id,
        })
    }

    /// A value of type `ty`. `depth` is the number of arrays it is inside.
    pub(crate) fn value(
        &mut self,
        ty: ValueType,
        at: &At<'a>,
        depth: usize,
    ) -> Result<Value<'a>, GgufError> {
        const F: &str = "value";
        Ok(match ty {
            ValueType::U8 => Value::U8(self.u8(at, F)?),
            ValueType::I8 => Value::I8(self.u8(at, F)? as i8),
            ValueType::U16 => Value::U16(self.u16(at, F)?),
            ValueType::I16 => Value::I16(self.u16(at, F)? as i16),
            ValueType::U32 => Value::U32(self.u32(at, F)?),
            ValueType::I32 => Value::I32(self.u32(at, F)? as i32),
            ValueType::F32 => Value::F32(f32::from_bits(self.u32(at, F)?)),
            ValueType::U64 => Value::U64(self.u64(at, F)?),
            ValueType::I64 => Value::I64(self.u64(at, F)? as i64),
            ValueType::F64 => Value::F64(f64::from_bits(self.u64(at, F)?)),
            ValueType::Bool => Value::Bool(self.bool(at)?),
            ValueType::String => Value::String(self.string(at, STRING_VALUE)?),
            ValueType::Array => Value::Array(self.array_value(at, depth + 1)?),
        })
    }

    fn bool(&mut self, at: &At<'_>) -> Result<bool, GgufError> {
        match self.u8(at, "value")? {
            0 => Ok(false),
            1 => Ok(true),
            byte => Err(GgufError::InvalidBool {
                at: at.item(),
                byte,
            }),
        }
    }

    /// An array value (after its type id): element type, count, elements. Every element is
    /// checked here, so reading the array again later cannot fail.
    fn array_value(&mut self, at: &At<'a>, depth: usize) -> Result<Array<'a>, GgufError> {
        if depth > MAX_ARRAY_DEPTH {
            return Err(GgufError::ArrayTooDeep {
                at: at.item(),
                depth,
            });
        }
        let element_type = self.value_type(at, "array element type")?;
        let count = self.u64(at, "array length")?;
        let min = element_type.min_encoded_len() as u64;
        let remaining = self.remaining() as u64;
        if count.checked_mul(min).is_none_or(|bytes| bytes > remaining) {
            return Err(GgufError::CountTooLarge {
                at: at.item(),
                field: "array length",
                count,
                min_entry_bytes: min,
                remaining,
            });
        }
        // `count * min <= remaining` and `min >= 1`, so `count` fits a usize.
        let len = count as usize;
        let start = self.pos;
        match element_type.fixed_len() {
            Some(size) if element_type != ValueType::Bool => {
                self.take(len * size, at, "array elements")?;
            }
            _ => {
                for i in 0..count {
                    self.value(element_type, &at.element(i), depth)?;
                }
            }
        }
        let bytes = self.bytes.get(start..self.pos).unwrap_or_default();
        Ok(Array::new(element_type, len, bytes))
    }
}
