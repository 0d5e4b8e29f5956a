//! A small GGUF writer for the reader's tests: valid files of versions 2 and 3 with every
//! metadata type, and every field open to a lie (counts, lengths, offsets, types, magic).
#![allow(dead_code)] // each test file uses its own subset

/// A metadata value as it will be written. `Raw` writes any type id and bytes.
#[derive(Clone, Debug)]
pub enum Val {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    /// A string with any bytes (invalid UTF-8, say).
    StrBytes(Vec<u8>),
    /// An element type id and the elements (each written without its own type id).
    Array(u32, Vec<Val>),
    /// An element type id, a stated count (any), and the elements actually written.
    ArrayLying(u32, u64, Vec<Val>),
    U64(u64),
    I64(i64),
    F64(f64),
    /// A type id and the bytes of the value, as they are.
    Raw(u32, Vec<u8>),
}

pub const U8: u32 = 0;
pub const I8: u32 = 1;
pub const U16: u32 = 2;
pub const I16: u32 = 3;
pub const U32: u32 = 4;
pub const I32: u32 = 5;
pub const F32: u32 = 6;
pub const BOOL: u32 = 7;
pub const STRING: u32 = 8;
pub const ARRAY: u32 = 9;
pub const U64: u32 = 10;
pub const I64: u32 = 11;
pub const F64: u32 = 12;

impl Val {
    pub fn type_id(&self) -> u32 {
        match self {
            Val::U8(_) => U8,
            Val::I8(_) => I8,
            Val::U16(_) => U16,
            Val::I16(_) => I16,
            Val::U32(_) => U32,
            Val::I32(_) => I32,
            Val::F32(_) => F32,
            Val::Bool(_) => BOOL,
            Val::Str(_) | Val::StrBytes(_) => STRING,
            Val::Array(..) | Val::ArrayLying(..) => ARRAY,
            Val::U64(_) => U64,
            Val::I64(_) => I64,
            Val::F64(_) => F64,
            Val::Raw(id, _) => *id,
        }
    }

    /// The value's bytes, without its type id.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Val::U8(v) => out.push(*v),
            Val::I8(v) => out.extend(v.to_le_bytes()),
            Val::U16(v) => out.extend(v.to_le_bytes()),
            Val::I16(v) => out.extend(v.to_le_bytes()),
            Val::U32(v) => out.extend(v.to_le_bytes()),
            Val::I32(v) => out.extend(v.to_le_bytes()),
            Val::F32(v) => out.extend(v.to_le_bytes()),
            Val::Bool(v) => out.push(u8::from(*v)),
            Val::Str(s) => string(out, s.as_bytes()),
            Val::StrBytes(b) => string(out, b),
            Val::Array(ty, items) => {
                out.extend(ty.to_le_bytes());
                out.extend((items.len() as u64).to_le_bytes());
                items.iter().for_each(|v| v.encode(out));
            }
            Val::ArrayLying(ty, count, items) => {
                out.extend(ty.to_le_bytes());
                out.extend(count.to_le_bytes());
                items.iter().for_each(|v| v.encode(out));
            }
            Val::U64(v) => out.extend(v.to_le_bytes()),
            Val::I64(v) => out.extend(v.to_le_bytes()),
            Val::F64(v) => out.extend(v.to_le_bytes()),
            Val::Raw(_, bytes) => out.extend(bytes),
        }
    }
}

/// A GGUF string: u64 length, bytes.
pub fn string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend((bytes.len() as u64).to_le_bytes());
    out.extend(bytes);
}

/// A tensor to write: its info, and its data (placed after the previous tensor's, padded to
/// the writer's alignment, unless `offset` says otherwise).
#[derive(Clone, Debug)]
pub struct TensorSpec {
    pub name: Vec<u8>,
    pub dims: Vec<u64>,
    pub type_id: u32,
    /// The offset written; `None`: where the writer puts the data.
    pub offset: Option<u64>,
    pub data: Vec<u8>,
}

impl TensorSpec {
    pub fn new(name: &str, dims: &[u64], type_id: u32, data: Vec<u8>) -> Self {
        TensorSpec {
            name: name.as_bytes().to_vec(),
            dims: dims.to_vec(),
            type_id,
            offset: None,
            data,
        }
    }
}

#[derive(Clone, Debug)]
pub struct GgufWriter {
    pub magic: [u8; 4],
    pub version: u32,
    /// The counts written; `None`: the true ones.
    pub tensor_count: Option<u64>,
    pub kv_count: Option<u64>,
    pub kvs: Vec<(Vec<u8>, Val)>,
    pub tensors: Vec<TensorSpec>,
    /// The padding the writer uses before the data section and between tensors.
    pub alignment: usize,
}

impl GgufWriter {
    pub fn new(version: u32) -> Self {
        GgufWriter {
            magic: *b"GGUF",
            version,
            tensor_count: None,
            kv_count: None,
            kvs: Vec::new(),
            tensors: Vec::new(),
            alignment: 32,
        }
    }

    pub fn kv(mut self, key: &str, value: Val) -> Self {
        self.kvs.push((key.as_bytes().to_vec(), value));
        self
    }

    pub fn tensor(mut self, tensor: TensorSpec) -> Self {
        self.tensors.push(tensor);
        self
    }

    /// Where the data of each tensor goes, from the start of the data section.
    pub fn placed_offsets(&self) -> Vec<u64> {
        let mut at = 0usize;
        self.tensors
            .iter()
            .map(|t| {
                let offset = at;
                at = (at + t.data.len()).next_multiple_of(self.alignment);
                offset as u64
            })
            .collect()
    }

    /// Where the data section starts in the written file.
    pub fn data_offset(&self) -> usize {
        self.header_and_infos()
            .len()
            .next_multiple_of(self.alignment)
    }

    fn header_and_infos(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend(self.magic);
        out.extend(self.version.to_le_bytes());
        let tensor_count = self.tensor_count.unwrap_or(self.tensors.len() as u64);
        let kv_count = self.kv_count.unwrap_or(self.kvs.len() as u64);
        out.extend(tensor_count.to_le_bytes());
        out.extend(kv_count.to_le_bytes());
        for (key, value) in &self.kvs {
            string(&mut out, key);
            out.extend(value.type_id().to_le_bytes());
            value.encode(&mut out);
        }
        for (t, placed) in self.tensors.iter().zip(self.placed_offsets()) {
            string(&mut out, &t.name);
            out.extend((t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(t.type_id.to_le_bytes());
            out.extend(t.offset.unwrap_or(placed).to_le_bytes());
        }
        out
    }

    /// The file: header, metadata, infos, padding, data. No padding after the last tensor, so
    /// every byte of the file is needed.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.header_and_infos();
        if self.tensors.is_empty() {
            return out;
        }
        out.resize(out.len().next_multiple_of(self.alignment), 0);
        let start = out.len();
        for (t, placed) in self.tensors.iter().zip(self.placed_offsets()) {
            out.resize(start + placed as usize, 0);
            out.extend(&t.data);
        }
        out
    }
}

/// `n` f32 values `0.5 * i - 1`, little-endian.
pub fn f32_data(n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (0.5 * i as f32 - 1.0).to_le_bytes())
        .collect()
}

/// `n` bytes `i * 7 + seed`, wrapping: recognisable block data.
pub fn block_data(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

/// A valid file with one entry of every metadata type (arrays of several types, nested arrays
/// and an empty one among them), and three tensors: F32, Q8_0 and Q4_1 (ggml ids 0, 8, 3).
pub fn every_type(version: u32) -> GgufWriter {
    GgufWriter::new(version)
        .kv("general.architecture", Val::Str("llama".into()))
        .kv("t.u8", Val::U8(0xfe))
        .kv("t.i8", Val::I8(-7))
        .kv("t.u16", Val::U16(0xbeef))
        .kv("t.i16", Val::I16(-12345))
        .kv("t.u32", Val::U32(0xdead_beef))
        .kv("t.i32", Val::I32(-2_000_000_000))
        .kv("t.f32", Val::F32(1e-5))
        .kv("t.bool", Val::Bool(true))
        .kv("t.string", Val::Str("héllo ✓".into()))
        .kv("t.u64", Val::U64(u64::MAX - 1))
        .kv("t.i64", Val::I64(i64::MIN + 1))
        .kv("t.f64", Val::F64(-0.1))
        .kv(
            "t.strings",
            Val::Array(
                STRING,
                vec![
                    Val::Str("<s>".into()),
                    Val::Str(String::new()),
                    Val::Str("Ġthe".into()),
                ],
            ),
        )
        .kv(
            "t.f32s",
            Val::Array(F32, vec![Val::F32(0.0), Val::F32(-1.5), Val::F32(f32::MAX)]),
        )
        .kv("t.i32s", Val::Array(I32, vec![Val::I32(1), Val::I32(-3)]))
        .kv(
            "t.bools",
            Val::Array(BOOL, vec![Val::Bool(false), Val::Bool(true)]),
        )
        .kv("t.u64s", Val::Array(U64, vec![Val::U64(7)]))
        .kv("t.empty", Val::Array(U8, vec![]))
        .kv(
            "t.nested",
            Val::Array(
                ARRAY,
                vec![
                    Val::Array(U16, vec![Val::U16(1), Val::U16(2)]),
                    Val::Array(STRING, vec![Val::Str("x".into())]),
                    Val::Array(ARRAY, vec![Val::Array(I8, vec![Val::I8(-1)])]),
                ],
            ),
        )
        .tensor(TensorSpec::new("norm.weight", &[3], 0, f32_data(3)))
        .tensor(TensorSpec::new(
            "embd.weight",
            &[64, 2],
            8,
            block_data(4 * 34, 1),
        ))
        .tensor(TensorSpec::new(
            "blk.0.attn_q.weight",
            &[32, 3],
            3,
            block_data(3 * 20, 9),
        ))
}

/// A valid file with a tensor of every ggml type the crate reads, two rows each, and
/// `general.alignment` 64.
pub fn every_ggml_type() -> GgufWriter {
    // (name, ggml id, values per block, bytes per block)
    const TYPES: [(&str, u32, u64, usize); 11] = [
        ("f32", 0, 1, 4),
        ("f16", 1, 1, 2),
        ("q4_0", 2, 32, 18),
        ("q4_1", 3, 32, 20),
        ("q5_0", 6, 32, 22),
        ("q5_1", 7, 32, 24),
        ("q8_0", 8, 32, 34),
        ("q4_k", 12, 256, 144),
        ("q5_k", 13, 256, 176),
        ("q6_k", 14, 256, 210),
        ("bf16", 30, 1, 2),
    ];
    let mut w = GgufWriter {
        alignment: 64,
        ..GgufWriter::new(3).kv("general.alignment", Val::U32(64))
    };
    for (i, (name, id, block_len, block_bytes)) in TYPES.into_iter().enumerate() {
        let data = block_data(2 * block_bytes, i as u8);
        w = w.tensor(TensorSpec::new(name, &[block_len, 2], id, data));
    }
    w
}

/// The seed inputs of the `gguf_parse` fuzz target (`fuzz/regressions/gguf_parse/`).
pub fn fuzz_seeds() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("valid_v2_every_metadata_type", every_type(2).to_bytes()),
        ("valid_v3_every_metadata_type", every_type(3).to_bytes()),
        (
            "valid_v3_every_ggml_type_aligned_64",
            every_ggml_type().to_bytes(),
        ),
    ]
}
