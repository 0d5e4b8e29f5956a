//! The parse of a whole file: header, metadata, tensor infos and the data section's layout.

use alloc::vec::Vec;
use core::fmt;

use super::error::{quote, GgufError, Item};
use super::read::{At, Cursor, KEY, TENSOR_NAME};
use super::tensor::TensorInfo;
use super::value::{Array, Scalar, Scalars, Strings, Value};
use super::{DEFAULT_ALIGNMENT, MAX_DIM, MAX_DIMS};
use crate::quant::GgmlType;

/// The key of the data alignment.
const ALIGNMENT_KEY: &str = "general.alignment";

/// The fewest bytes of one metadata entry: an empty key's length, a type id, a one-byte value.
const MIN_KEY_VALUE_BYTES: u64 = 8 + 4 + 1;

/// The fewest bytes of one tensor info: an empty name's length, no dimensions, the type id and
/// the offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 4 + 8;

/// The entries reserved before the first is read: at most this many, whatever a count says.
const FIRST_RESERVE: usize = 256;

/// The names of the dimension fields, for errors.
const DIM_FIELDS: [&str; MAX_DIMS] = ["dimension 0", "dimension 1", "dimension 2", "dimension 3"];

/// A GGUF file parsed in place: the header, every metadata entry and every tensor info, with
/// every count, length, offset and size checked against the bytes. Strings and tensor data are
/// borrowed from the bytes; nothing is copied but the tables.
///
/// ```
/// use skainet_schedule::gguf::{Gguf, GgufError, Value};
/// use skainet_schedule::quant::GgmlType;
/// # let file = {
/// #     fn s(f: &mut Vec<u8>, s: &str) {
/// #         f.extend((s.len() as u64).to_le_bytes());
/// #         f.extend(s.as_bytes());
/// #     }
/// #     let mut f = b"GGUF".to_vec();
/// #     f.extend(3u32.to_le_bytes()); // version
/// #     f.extend(1u64.to_le_bytes()); // tensors
/// #     f.extend(2u64.to_le_bytes()); // metadata entries
/// #     s(&mut f, "general.architecture");
/// #     f.extend(8u32.to_le_bytes());
/// #     s(&mut f, "llama");
/// #     s(&mut f, "llama.block_count");
/// #     f.extend(4u32.to_le_bytes());
/// #     f.extend(30u32.to_le_bytes());
/// #     s(&mut f, "output_norm.weight");
/// #     f.extend(1u32.to_le_bytes()); // dimensions
/// #     f.extend(2u64.to_le_bytes());
/// #     f.extend(0u32.to_le_bytes()); // F32
/// #     f.extend(0u64.to_le_bytes()); // offset
/// #     f.resize(f.len().next_multiple_of(32), 0);
/// #     f.extend(1.0f32.to_le_bytes());
/// #     f.extend(2.0f32.to_le_bytes());
/// #     f
/// # };
/// let gguf = Gguf::parse(&file)?;
/// assert_eq!(gguf.get_str("general.architecture")?, "llama");
/// assert_eq!(gguf.get_u32("llama.block_count")?, 30);
/// assert_eq!(
///     gguf.get_f32("llama.block_count").unwrap_err().to_string(),
///     "metadata key llama.block_count: expected f32, found u32"
/// );
///
/// let norm = gguf.tensor("output_norm.weight")?;
/// assert_eq!((norm.ty(), norm.dims()), (GgmlType::F32, &[2][..]));
/// assert_eq!(norm.data(), [1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat());
/// assert!(matches!(gguf.tensor("output.weight"), Err(GgufError::MissingTensor { .. })));
/// # Ok::<(), GgufError>(())
/// ```
#[derive(Clone)]
pub struct Gguf<'a> {
    version: u32,
    alignment: usize,
    data_offset: usize,
    metadata: Vec<(&'a str, Value<'a>)>,
    /// Indices of `metadata`, sorted by key.
    keys: Vec<usize>,
    tensors: Vec<TensorInfo<'a>>,
    /// Indices of `tensors`, sorted by name.
    names: Vec<usize>,
}

impl<'a> Gguf<'a> {
    /// Parses a GGUF file of version 2 or 3 from its bytes.
    ///
    /// Every failure is an error naming the part of the file and the values (see
    /// [`GgufError`]); no input panics. A stated count is checked against the bytes its
    /// entries need before anything is reserved, and the tables then grow with the entries
    /// actually read (fallibly), so what is allocated is proportional to the input.
    pub fn parse(bytes: &'a [u8]) -> Result<Gguf<'a>, GgufError> {
        let mut c = Cursor::new(bytes);
        let header = At::Header;
        let magic = c.array::<4>(&header, "magic")?;
        if &magic != b"GGUF" {
            return Err(GgufError::BadMagic { found: magic });
        }
        let version = c.u32(&header, "version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion { version });
        }
        let tensor_count = c.u64(&header, "tensor count")?;
        let kv_count = c.u64(&header, "metadata count")?;

        let kv_len = fits(kv_count, MIN_KEY_VALUE_BYTES, &c, "metadata count")?;
        let mut metadata = Vec::new();
        reserve(&mut metadata, kv_len.min(FIRST_RESERVE), "metadata entries")?;
        for index in 0..kv_count {
            let at = At::Key {
                index,
                key: None,
                element: None,
            };
            let key = c.string(&at, KEY)?;
            if key.is_empty() {
                return Err(GgufError::EmptyKey { index });
            }
            let at = At::Key {
                index,
                key: Some(key),
                element: None,
            };
            let ty = c.value_type(&at, "value type")?;
            let value = c.value(ty, &at, 0)?;
            push(&mut metadata, (key, value), "metadata entries")?;
        }
        let (keys, duplicate) = sorted_unique(&metadata, |entry| entry.0, "metadata entries")?;
        if let Some((index, first)) = duplicate {
            return Err(GgufError::DuplicateKey {
                index: index as u64,
                key: quote(metadata[index].0),
                first: first as u64,
            });
        }

        let mut gguf = Gguf {
            version,
            alignment: DEFAULT_ALIGNMENT,
            data_offset: 0,
            metadata,
            keys,
            tensors: Vec::new(),
            names: Vec::new(),
        };
        gguf.alignment = match gguf.get(ALIGNMENT_KEY) {
            None => DEFAULT_ALIGNMENT,
            Some(&Value::U32(alignment)) if alignment.is_power_of_two() => alignment as usize,
            Some(&Value::U32(alignment)) => return Err(GgufError::BadAlignment { alignment }),
            Some(other) => {
                return Err(GgufError::WrongType {
                    key: quote(ALIGNMENT_KEY),
                    expected: "u32",
                    found: other.type_name(),
                })
            }
        };

        let tensor_len = fits(tensor_count, MIN_TENSOR_INFO_BYTES, &c, "tensor count")?;
        reserve(
            &mut gguf.tensors,
            tensor_len.min(FIRST_RESERVE),
            "tensor infos",
        )?;
        for index in 0..tensor_count {
            let tensor = tensor_info(&mut c, index)?;
            push(&mut gguf.tensors, tensor, "tensor infos")?;
        }
        let (names, duplicate) = sorted_unique(&gguf.tensors, |t| t.name(), "tensor infos")?;
        if let Some((index, first)) = duplicate {
            return Err(GgufError::DuplicateTensor {
                index: index as u64,
                name: quote(gguf.tensors[index].name()),
                first: first as u64,
            });
        }
        gguf.names = names;

        gguf.data_offset = gguf.place_data(bytes, c.pos())?;
        Ok(gguf)
    }

    /// Finds where the data section starts (the end of the tensor infos, rounded up to the
    /// alignment), gives each tensor its bytes, and checks they are aligned, inside the file
    /// and disjoint. Returns the data section's offset.
    fn place_data(&mut self, bytes: &'a [u8], infos_end: usize) -> Result<usize, GgufError> {
        let aligned = infos_end
            .checked_next_multiple_of(self.alignment)
            .unwrap_or(usize::MAX);
        let start = match aligned {
            start if start <= bytes.len() => start,
            // A file without tensors needs no data section, nor the padding before it.
            _ if self.tensors.is_empty() => bytes.len(),
            start => {
                return Err(GgufError::DataSectionPastEnd {
                    start: start as u64,
                    file_len: bytes.len() as u64,
                })
            }
        };
        let data = bytes.get(start..).unwrap_or_default();
        let alignment = self.alignment as u64;
        for (index, tensor) in self.tensors.iter_mut().enumerate() {
            let at = || Item::Tensor {
                index: index as u64,
                name: Some(quote(tensor.name())),
            };
            let offset = tensor.offset();
            if offset % alignment != 0 {
                return Err(GgufError::MisalignedOffset {
                    at: at(),
                    offset,
                    alignment,
                });
            }
            let size = tensor.byte_len_unplaced();
            let range = usize::try_from(offset)
                .ok()
                .and_then(|begin| Some(begin..begin.checked_add(size)?));
            match range.and_then(|range| data.get(range)) {
                Some(slice) => tensor.place(slice),
                None => {
                    return Err(GgufError::DataPastEnd {
                        at: at(),
                        offset,
                        size: size as u64,
                        data_len: data.len() as u64,
                    })
                }
            }
        }

        // Disjoint: sorted by offset, each non-empty tensor ends before the next one starts.
        let mut by_offset: Vec<usize> = Vec::new();
        reserve(&mut by_offset, self.tensors.len(), "tensor infos")?;
        by_offset.extend((0..self.tensors.len()).filter(|&i| self.tensors[i].byte_len() > 0));
        by_offset.sort_by_key(|&i| (self.tensors[i].offset(), i));
        for pair in by_offset.windows(2) {
            let (a, b) = (&self.tensors[pair[0]], &self.tensors[pair[1]]);
            // Both ranges lie inside the data section, so neither sum overflows.
            if a.offset() + a.byte_len() as u64 > b.offset() {
                return Err(GgufError::DataOverlap {
                    at: Item::Tensor {
                        index: pair[1] as u64,
                        name: Some(quote(b.name())),
                    },
                    offset: b.offset(),
                    other: Item::Tensor {
                        index: pair[0] as u64,
                        name: Some(quote(a.name())),
                    },
                    other_offset: a.offset(),
                    other_size: a.byte_len() as u64,
                });
            }
        }
        Ok(start)
    }

    /// The file's GGUF version: 2 or 3.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The alignment of the data section and of each tensor's offset: `general.alignment`, or
    /// 32 when the file does not set it.
    pub fn alignment(&self) -> usize {
        self.alignment
    }

    /// Where the data section starts, in bytes from the start of the file; tensor offsets
    /// count from here.
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// Every metadata entry, in file order.
    pub fn metadata(&self) -> &[(&'a str, Value<'a>)] {
        &self.metadata
    }

    /// Every tensor, in file order.
    pub fn tensors(&self) -> &[TensorInfo<'a>] {
        &self.tensors
    }

    /// The value of `key`, if the file has it.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        let i = self
            .keys
            .binary_search_by(|&i| self.metadata[i].0.cmp(key))
            .ok()?;
        Some(&self.metadata[self.keys[i]].1)
    }

    /// The value of `key`, or [`GgufError::MissingKey`].
    pub fn value(&self, key: &str) -> Result<&Value<'a>, GgufError> {
        self.get(key)
            .ok_or_else(|| GgufError::MissingKey { key: quote(key) })
    }

    /// The tensor named `name`, if the file has it.
    pub fn get_tensor(&self, name: &str) -> Option<&TensorInfo<'a>> {
        let i = self
            .names
            .binary_search_by(|&i| self.tensors[i].name().cmp(name))
            .ok()?;
        Some(&self.tensors[self.names[i]])
    }

    /// The tensor named `name`, or [`GgufError::MissingTensor`].
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo<'a>, GgufError> {
        self.get_tensor(name)
            .ok_or_else(|| GgufError::MissingTensor { name: quote(name) })
    }

    /// The value of `key` as a `T` (`u8`, …, `f64`, `bool`): [`GgufError::MissingKey`] when it
    /// is absent, [`GgufError::WrongType`] (naming the key and both types) when it has another
    /// type. The `get_u32`-style methods are this for each type.
    pub fn get_scalar<T: Scalar>(&self, key: &str) -> Result<T, GgufError> {
        let value = self.value(key)?;
        T::from_value(value).ok_or_else(|| wrong_type(key, T::TYPE.name(), value))
    }

    /// The string value of `key`, borrowed from the file.
    pub fn get_str(&self, key: &str) -> Result<&'a str, GgufError> {
        let value = self.value(key)?;
        value
            .as_str()
            .ok_or_else(|| wrong_type(key, "string", value))
    }

    /// The array value of `key`, of any element type.
    pub fn get_array(&self, key: &str) -> Result<Array<'a>, GgufError> {
        let value = self.value(key)?;
        value
            .as_array()
            .ok_or_else(|| wrong_type(key, "array", value))
    }

    /// The elements of the array of strings of `key`.
    pub fn get_strings(&self, key: &str) -> Result<Strings<'a>, GgufError> {
        let value = self.value(key)?;
        value
            .as_array()
            .and_then(|a| a.strings())
            .ok_or_else(|| wrong_type(key, "array of string", value))
    }

    /// The elements of the array of `T` of `key`, decoded in place.
    pub fn get_scalars<T: Scalar>(&self, key: &str) -> Result<Scalars<'a, T>, GgufError> {
        let value = self.value(key)?;
        value
            .as_array()
            .and_then(|a| a.scalars::<T>())
            .ok_or_else(|| wrong_type(key, T::TYPE.array_name(), value))
    }
}

macro_rules! typed_getters {
    ($($name:ident -> $t:ty),* $(,)?) => {
        impl Gguf<'_> {
            $(
                #[doc = concat!("The `", stringify!($t), "` value of `key`; see [`Gguf::get_scalar`].")]
                pub fn $name(&self, key: &str) -> Result<$t, GgufError> {
                    self.get_scalar::<$t>(key)
                }
            )*
        }
    };
}

typed_getters!(
    get_u8 -> u8,
    get_i8 -> i8,
    get_u16 -> u16,
    get_i16 -> i16,
    get_u32 -> u32,
    get_i32 -> i32,
    get_f32 -> f32,
    get_bool -> bool,
    get_u64 -> u64,
    get_i64 -> i64,
    get_f64 -> f64,
);

impl fmt::Debug for Gguf<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gguf")
            .field("version", &self.version)
            .field("alignment", &self.alignment)
            .field("data_offset", &self.data_offset)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

fn wrong_type(key: &str, expected: &'static str, found: &Value<'_>) -> GgufError {
    GgufError::WrongType {
        key: quote(key),
        expected,
        found: found.type_name(),
    }
}

/// `count` as a usize, after checking the bytes left can hold that many entries of at least
/// `min` bytes each.
fn fits(count: u64, min: u64, c: &Cursor<'_>, field: &'static str) -> Result<usize, GgufError> {
    let remaining = c.remaining() as u64;
    match count.checked_mul(min) {
        // At most `remaining` entries, so it fits a usize.
        Some(bytes) if bytes <= remaining => Ok(count as usize),
        _ => Err(GgufError::CountTooLarge {
            at: Item::Header,
            field,
            count,
            min_entry_bytes: min,
            remaining,
        }),
    }
}

/// Room for `item`, reserved fallibly (amortized doubling), then `item` pushed: the tables
/// grow with the entries actually read, never with a count a file merely states.
fn push<T>(v: &mut Vec<T>, item: T, what: &'static str) -> Result<(), GgufError> {
    if v.len() == v.capacity() {
        reserve(v, v.len().max(FIRST_RESERVE), what)?;
    }
    v.push(item);
    Ok(())
}

fn reserve<T>(v: &mut Vec<T>, n: usize, what: &'static str) -> Result<(), GgufError> {
    v.try_reserve_exact(n)
        .map_err(|_| GgufError::AllocationFailed {
            what,
            count: n as u64,
        })
}

/// The indices of `items` sorted by `key`, and the first duplicate in file order, if any, as
/// `(its index, the index of the earlier item with the same key)`.
#[allow(clippy::type_complexity)]
fn sorted_unique<T>(
    items: &[T],
    key: impl Fn(&T) -> &str,
    what: &'static str,
) -> Result<(Vec<usize>, Option<(usize, usize)>), GgufError> {
    let mut order = Vec::new();
    reserve(&mut order, items.len(), what)?;
    order.extend(0..items.len());
    // Stable: among equal keys the earlier item comes first.
    order.sort_by(|&a, &b| key(&items[a]).cmp(key(&items[b])));
    let duplicate = order
        .windows(2)
        .filter(|pair| key(&items[pair[0]]) == key(&items[pair[1]]))
        .map(|pair| (pair[1], pair[0]))
        .min();
    Ok((order, duplicate))
}

/// One tensor info: name, dimensions, type, offset; its size checked, its data not yet placed.
fn tensor_info<'a>(c: &mut Cursor<'a>, index: u64) -> Result<TensorInfo<'a>, GgufError> {
    let at = At::Tensor { index, name: None };
    let name = c.string(&at, TENSOR_NAME)?;
    let at = At::Tensor {
        index,
        name: Some(name),
    };
    let n_dims = c.u32(&at, "dimension count")?;
    if n_dims as usize > MAX_DIMS {
        return Err(GgufError::TooManyDims {
            at: at.item(),
            n_dims,
        });
    }
    let n_dims = n_dims as usize;
    let mut raw = [1u64; MAX_DIMS];
    let mut dims = [1usize; MAX_DIMS];
    for axis in 0..n_dims {
        let dim = c.u64(&at, DIM_FIELDS[axis])?;
        if dim > MAX_DIM {
            return Err(GgufError::DimTooLarge {
                at: at.item(),
                axis,
                dim,
            });
        }
        raw[axis] = dim;
        // `MAX_DIM <= usize::MAX`.
        dims[axis] = dim as usize;
    }
    // Zeros left out: every partial product (the rows, say) must fit even when the whole is 0.
    let nonzero_product = raw[..n_dims]
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1u64, |n, &d| n.checked_mul(d).filter(|&n| n <= MAX_DIM))
        .ok_or_else(|| GgufError::ElementCountOverflow {
            at: at.item(),
            dims: raw,
            n_dims,
        })?;
    let elements = if raw[..n_dims].contains(&0) {
        0
    } else {
        nonzero_product
    };
    let id = c.u32(&at, "ggml type")?;
    let ty =
        GgmlType::from_id(id).map_err(|_| GgufError::UnknownTensorType { at: at.item(), id })?;
    let row_len = raw[0];
    if row_len % ty.block_len() as u64 != 0 {
        return Err(GgufError::PartialBlock {
            at: at.item(),
            ty,
            row_len,
        });
    }
    // `elements <= MAX_DIM <= usize::MAX`, and a whole number of blocks.
    let size = ty
        .row_bytes(elements as usize)
        .ok_or(GgufError::ByteSizeOverflow {
            at: at.item(),
            ty,
            elements,
        })?;
    let offset = c.u64(&at, "data offset")?;
    Ok(TensorInfo::unplaced(name, ty, dims, n_dims, offset, size))
}
