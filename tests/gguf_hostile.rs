//! The GGUF reader on files written here: valid ones of both versions read back exactly, and
//! every way a file can lie is an error naming the field and the values, never a panic.

#[path = "common/gguf.rs"]
mod writer;

use skainet_schedule::gguf::{
    Gguf, GgufError, Item, Value, ValueType, MAX_ARRAY_DEPTH, MAX_DIM, MAX_QUOTED_NAME,
};
use skainet_schedule::quant::GgmlType;
use writer::{every_type, f32_data, string, GgufWriter, TensorSpec, Val};

fn parse_err(bytes: &[u8]) -> GgufError {
    match Gguf::parse(bytes) {
        Ok(g) => panic!("parsed: {g:?}"),
        Err(e) => e,
    }
}

fn err_of(w: &GgufWriter) -> GgufError {
    parse_err(&w.to_bytes())
}

fn key_at(index: u64, key: &str) -> Item {
    Item::Key {
        index,
        key: Some(key.into()),
        element: None,
    }
}

fn tensor_at(index: u64, name: &str) -> Item {
    Item::Tensor {
        index,
        name: Some(name.into()),
    }
}

/// A file with one F32 tensor of `dims` and no metadata.
fn one_tensor(dims: &[u64], type_id: u32, data: Vec<u8>) -> GgufWriter {
    GgufWriter::new(3).tensor(TensorSpec::new("t", dims, type_id, data))
}

// ---------------------------------------------------------------------------------------------
// Valid files

#[test]
fn both_versions_read_every_metadata_type_exactly() {
    for version in [2, 3] {
        let bytes = every_type(version).to_bytes();
        let g = Gguf::parse(&bytes).unwrap();
        assert_eq!(g.version(), version);
        assert_eq!(g.alignment(), 32);
        assert_eq!(g.metadata().len(), 20);
        assert_eq!(g.get_str("general.architecture").unwrap(), "llama");
        assert_eq!(g.get_u8("t.u8").unwrap(), 0xfe);
        assert_eq!(g.get_i8("t.i8").unwrap(), -7);
        assert_eq!(g.get_u16("t.u16").unwrap(), 0xbeef);
        assert_eq!(g.get_i16("t.i16").unwrap(), -12345);
        assert_eq!(g.get_u32("t.u32").unwrap(), 0xdead_beef);
        assert_eq!(g.get_i32("t.i32").unwrap(), -2_000_000_000);
        assert_eq!(g.get_f32("t.f32").unwrap().to_bits(), 1e-5f32.to_bits());
        assert!(g.get_bool("t.bool").unwrap());
        assert_eq!(g.get_str("t.string").unwrap(), "héllo ✓");
        assert_eq!(g.get_u64("t.u64").unwrap(), u64::MAX - 1);
        assert_eq!(g.get_i64("t.i64").unwrap(), i64::MIN + 1);
        assert_eq!(g.get_f64("t.f64").unwrap().to_bits(), (-0.1f64).to_bits());
        assert_eq!(g.get_scalar::<u32>("t.u32").unwrap(), 0xdead_beef);
    }
}

#[test]
fn metadata_keeps_file_order_and_types() {
    let bytes = every_type(3).to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let keys: Vec<&str> = g.metadata().iter().map(|(k, _)| *k).collect();
    assert_eq!(
        &keys[..4],
        ["general.architecture", "t.u8", "t.i8", "t.u16"]
    );
    let types: Vec<ValueType> = g.metadata().iter().map(|(_, v)| v.ty()).collect();
    assert_eq!(
        &types[..13],
        [
            ValueType::String,
            ValueType::U8,
            ValueType::I8,
            ValueType::U16,
            ValueType::I16,
            ValueType::U32,
            ValueType::I32,
            ValueType::F32,
            ValueType::Bool,
            ValueType::String,
            ValueType::U64,
            ValueType::I64,
            ValueType::F64,
        ]
    );
    for (id, ty) in ValueType::ALL.iter().enumerate() {
        assert_eq!(ty.id(), id as u32);
        assert_eq!(ValueType::from_id(id as u32), Some(*ty));
    }
    assert_eq!(ValueType::from_id(13), None);
}

#[test]
fn arrays_read_back_lazily_and_exactly() {
    let bytes = every_type(3).to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let strings: Vec<&str> = g.get_strings("t.strings").unwrap().collect();
    assert_eq!(strings, ["<s>", "", "Ġthe"]);
    assert_eq!(g.get_strings("t.strings").unwrap().len(), 3);

    let f32s: Vec<u32> = g
        .get_scalars::<f32>("t.f32s")
        .unwrap()
        .map(f32::to_bits)
        .collect();
    assert_eq!(
        f32s,
        [0f32.to_bits(), (-1.5f32).to_bits(), f32::MAX.to_bits()]
    );
    assert_eq!(
        g.get_scalars::<f32>("t.f32s").unwrap().nth(2),
        Some(f32::MAX)
    );
    assert_eq!(
        g.get_scalars::<f32>("t.f32s").unwrap().next_back(),
        Some(f32::MAX)
    );
    assert_eq!(g.get_scalars::<f32>("t.f32s").unwrap().nth(3), None);
    assert_eq!(
        g.get_scalars::<i32>("t.i32s").unwrap().collect::<Vec<_>>(),
        [1, -3]
    );
    assert_eq!(
        g.get_scalars::<bool>("t.bools")
            .unwrap()
            .collect::<Vec<_>>(),
        [false, true]
    );
    assert_eq!(
        g.get_scalars::<u64>("t.u64s").unwrap().collect::<Vec<_>>(),
        [7]
    );

    let f32s = g.get_array("t.f32s").unwrap();
    assert_eq!((f32s.element_type(), f32s.len()), (ValueType::F32, 3));
    assert_eq!(f32s.get(1), Some(Value::F32(-1.5)));
    assert_eq!(f32s.get(3), None);
    assert_eq!(f32s.get(usize::MAX), None);
    assert_eq!(f32s.bytes().len(), 12);
    assert_eq!(f32s.iter().len(), 3);

    let strings = g.get_array("t.strings").unwrap();
    assert_eq!(strings.get(2), Some(Value::String("Ġthe")));
    assert_eq!(strings.get(3), None);

    let empty = g.get_array("t.empty").unwrap();
    assert!(empty.is_empty());
    assert_eq!(
        (empty.element_type(), empty.iter().count()),
        (ValueType::U8, 0)
    );
    assert_eq!(empty.bytes(), b"");
}

#[test]
fn nested_arrays_read_back_element_by_element() {
    let bytes = every_type(2).to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let nested = g.get_array("t.nested").unwrap();
    assert_eq!((nested.element_type(), nested.len()), (ValueType::Array, 3));
    let inner: Vec<_> = nested.iter().map(|v| v.as_array().unwrap()).collect();
    assert_eq!(
        inner[0].scalars::<u16>().unwrap().collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(inner[1].strings().unwrap().collect::<Vec<_>>(), ["x"]);
    let deepest = inner[2].get(0).unwrap().as_array().unwrap();
    assert_eq!(deepest.get(0), Some(Value::I8(-1)));
    assert_eq!(Value::Array(nested).type_name(), "array of array");
    assert_eq!(nested.get(1).unwrap().type_name(), "array of string");
}

#[test]
fn tensors_have_their_types_dims_and_bytes() {
    let w = every_type(3);
    let bytes = w.to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.tensors().len(), 3);
    assert_eq!(g.data_offset(), w.data_offset());
    assert_eq!(g.data_offset() % 32, 0);

    let norm = g.tensor("norm.weight").unwrap();
    assert_eq!(
        (norm.ty(), norm.dims(), norm.offset()),
        (GgmlType::F32, &[3][..], 0)
    );
    assert_eq!(norm.data(), f32_data(3));
    assert_eq!(
        (norm.row_len(), norm.rows(), norm.element_count()),
        (3, 1, 3)
    );

    let embd = g.tensor("embd.weight").unwrap();
    assert_eq!((embd.ty(), embd.dims()), (GgmlType::Q8_0, &[64, 2][..]));
    assert_eq!((embd.offset(), embd.byte_len()), (32, 4 * 34));
    assert_eq!(embd.data(), writer::block_data(4 * 34, 1));
    assert_eq!(
        (embd.row_len(), embd.rows(), embd.element_count()),
        (64, 2, 128)
    );

    let q = g.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(
        (q.ty(), q.dims(), q.offset()),
        (GgmlType::Q4_1, &[32, 3][..], 192)
    );
    assert_eq!(q.data(), writer::block_data(60, 9));
    // The data is borrowed from the input, not copied.
    let start = g.data_offset() + 192;
    assert_eq!(q.data().as_ptr(), bytes[start..].as_ptr());
    assert_eq!(start + 60, bytes.len());

    let names: Vec<&str> = g.tensors().iter().map(|t| t.name()).collect();
    assert_eq!(names, ["norm.weight", "embd.weight", "blk.0.attn_q.weight"]);
    assert!(g.get_tensor("output.weight").is_none());
}

#[test]
fn scalars_and_zero_sized_tensors_are_allowed() {
    let w = GgufWriter::new(3)
        .tensor(TensorSpec::new("scalar", &[], 0, f32_data(1)))
        .tensor(TensorSpec::new("empty", &[0, 7], 0, vec![]))
        .tensor(TensorSpec::new("last", &[2], 0, f32_data(2)));
    let bytes = w.to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let scalar = g.tensor("scalar").unwrap();
    assert_eq!(
        (scalar.dims(), scalar.element_count(), scalar.byte_len()),
        (&[][..], 1, 4)
    );
    let empty = g.tensor("empty").unwrap();
    assert_eq!(
        (empty.dims(), empty.element_count(), empty.rows()),
        (&[0, 7][..], 0, 7)
    );
    assert_eq!((empty.offset(), empty.data()), (32, &[][..]));
}

#[test]
fn a_file_without_tensors_needs_no_data_padding() {
    let w = GgufWriter::new(3).kv("a", Val::U8(1));
    let bytes = w.to_bytes();
    assert_eq!(bytes.len(), 24 + 8 + 1 + 4 + 1);
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!((g.tensors().len(), g.data_offset()), (0, bytes.len()));
    let bare = GgufWriter::new(2).to_bytes();
    assert_eq!(Gguf::parse(&bare).unwrap().metadata().len(), 0);
}

#[test]
fn general_alignment_moves_the_data_section() {
    let w = GgufWriter {
        alignment: 256,
        ..GgufWriter::new(3).kv("general.alignment", Val::U32(256))
    }
    .tensor(TensorSpec::new("a", &[3], 0, f32_data(3)))
    .tensor(TensorSpec::new("b", &[2], 0, f32_data(2)));
    let bytes = w.to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!((g.alignment(), g.data_offset()), (256, 256));
    assert_eq!(g.tensor("b").unwrap().offset(), 256);
    assert_eq!(g.tensor("b").unwrap().data(), f32_data(2));

    let one = GgufWriter {
        alignment: 1,
        ..GgufWriter::new(3).kv("general.alignment", Val::U32(1))
    }
    .tensor(TensorSpec::new("a", &[3], 0, f32_data(3)))
    .tensor(TensorSpec::new("b", &[1], 0, f32_data(1)));
    let bytes = one.to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.alignment(), 1);
    assert_eq!(g.tensor("b").unwrap().offset(), 12);
}

// ---------------------------------------------------------------------------------------------
// Truncation

#[test]
fn every_truncation_of_a_valid_file_is_an_error() {
    for version in [2, 3] {
        let bytes = every_type(version).to_bytes();
        Gguf::parse(&bytes).unwrap();
        for len in 0..bytes.len() {
            match Gguf::parse(&bytes[..len]) {
                Ok(_) => panic!("version {version}: {len} of {} bytes parsed", bytes.len()),
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
}

#[test]
fn truncations_name_the_field_and_offset() {
    let w = GgufWriter::new(3)
        .kv("general.architecture", Val::Str("llama".into()))
        .kv("b", Val::U8(1));
    let bytes = w.to_bytes();
    assert_eq!(bytes.len(), 24 + 45 + 14);
    let e = parse_err(&bytes[..2]);
    assert_eq!(
        e.to_string(),
        "header: the magic (4 bytes at offset 0) runs past the end of the 2-byte file"
    );
    let e = parse_err(&bytes[..20]);
    assert_eq!(
        e.to_string(),
        "header: the metadata count (8 bytes at offset 16) runs past the end of the 20-byte file"
    );
    // Too few bytes left for two entries of 13 bytes: refused by the count.
    let e = parse_err(&bytes[..27]);
    assert_eq!(
        e.to_string(),
        "header: metadata count 2 cannot fit in the 3 bytes left (each takes at least 13)"
    );
    // Inside the first key: its length says 20 bytes, 18 are there.
    let e = parse_err(&bytes[..50]);
    assert_eq!(
        e.to_string(),
        "metadata key 0: key length 20 exceeds the 18 bytes left"
    );
    // Inside the first value's type, and its string length.
    let e = parse_err(&bytes[..54]);
    assert!(
        matches!(
            &e,
            GgufError::Truncated { at, field: "value type", offset: 52, needed: 4, file_len: 54 }
                if *at == key_at(0, "general.architecture")
        ),
        "{e}"
    );
    let e = parse_err(&bytes[..60]);
    assert_eq!(
        e.to_string(),
        "metadata key 0 (general.architecture): the string length (8 bytes at offset 56) runs \
         past the end of the 60-byte file"
    );
    // Inside the second key's length, and its value.
    let e = parse_err(&bytes[..72]);
    assert_eq!(
        e.to_string(),
        "metadata key 1: the key length (8 bytes at offset 69) runs past the end of the \
         72-byte file"
    );
    let e = parse_err(&bytes[..82]);
    assert_eq!(
        e.to_string(),
        "metadata key 1 (b): the value (1 byte at offset 82) runs past the end of the \
         82-byte file"
    );

    // The last byte of the last tensor's data.
    let bytes = every_type(3).to_bytes();
    let e = parse_err(&bytes[..bytes.len() - 1]);
    assert_eq!(
        e.to_string(),
        format!(
            "tensor 2 (blk.0.attn_q.weight): 60 bytes at offset 192 run past the end of the \
             {}-byte data section",
            bytes.len() - 1 - every_type(3).data_offset()
        )
    );
}

#[test]
fn a_file_ending_in_the_padding_before_its_data_is_refused() {
    let w = one_tensor(&[1], 0, f32_data(1));
    let bytes = w.to_bytes();
    let end_of_infos = 24 + 8 + 1 + 4 + 8 + 4 + 8;
    assert_eq!(w.data_offset(), 64);
    let e = parse_err(&bytes[..end_of_infos + 3]);
    assert_eq!(
        e.to_string(),
        "the tensor data would start at offset 64, past the end of the 60-byte file"
    );
}

// ---------------------------------------------------------------------------------------------
// Header

#[test]
fn bad_magic_is_refused_with_the_bytes() {
    let w = GgufWriter {
        magic: *b"GGML",
        ..GgufWriter::new(3)
    };
    let e = err_of(&w);
    assert!(matches!(e, GgufError::BadMagic { found } if &found == b"GGML"));
    assert_eq!(
        e.to_string(),
        "not a GGUF file: the magic is 47 47 4d 4c (\"GGML\"), not \"GGUF\""
    );
    let e = parse_err(b"\x7fELF\x02\x01\x01\x00");
    assert_eq!(
        e.to_string(),
        "not a GGUF file: the magic is 7f 45 4c 46 (\"\\x7fELF\"), not \"GGUF\""
    );
}

#[test]
fn versions_other_than_2_and_3_are_refused_by_number() {
    for version in [0, 1, 4, u32::MAX] {
        let e = err_of(&GgufWriter::new(version));
        assert!(matches!(e, GgufError::UnsupportedVersion { version: v } if v == version));
        assert_eq!(
            e.to_string(),
            format!("GGUF version {version} is not supported: this reader reads versions 2 and 3")
        );
    }
    let e = err_of(&GgufWriter::new(3u32.swap_bytes()));
    assert_eq!(
        e.to_string(),
        "GGUF version 50331648 is not supported: this reader reads versions 2 and 3 \
         (a big-endian file of version 3?)"
    );
}

#[test]
fn lying_tensor_counts_are_refused_before_allocating() {
    let w = every_type(3);
    let infos_start = {
        // Everything before the tensor infos: what is left for them is the rest.
        let mut no_tensors = w.clone();
        no_tensors.tensors.clear();
        no_tensors.to_bytes().len()
    };
    let bytes_len = w.to_bytes().len();
    for count in [u64::MAX, u64::MAX / 24 + 1, 1 << 40, bytes_len as u64] {
        let e = err_of(&GgufWriter {
            tensor_count: Some(count),
            ..w.clone()
        });
        match e {
            GgufError::CountTooLarge {
                at: Item::Header,
                field: "tensor count",
                count: c,
                min_entry_bytes: 24,
                remaining,
            } => {
                assert_eq!((c, remaining), (count, (bytes_len - infos_start) as u64));
            }
            other => panic!("count {count}: {other}"),
        }
    }
    let e = err_of(&GgufWriter {
        tensor_count: Some(u64::MAX),
        ..w.clone()
    });
    assert_eq!(
        e.to_string(),
        format!(
            "header: tensor count 18446744073709551615 cannot fit in the {} bytes left \
             (each takes at least 24)",
            bytes_len - infos_start
        )
    );
    // One more than there are, small enough to pass the count check: the parse runs into the
    // data section and fails on what it finds there, without a panic.
    let e = err_of(&GgufWriter {
        tensor_count: Some(4),
        ..w
    });
    assert!(!e.to_string().is_empty());
}

#[test]
fn lying_metadata_counts_are_refused_before_allocating() {
    let w = every_type(3);
    let len = w.to_bytes().len() as u64;
    for count in [u64::MAX, u64::MAX / 13 + 1, len] {
        let e = err_of(&GgufWriter {
            kv_count: Some(count),
            ..w.clone()
        });
        assert!(
            matches!(
                e,
                GgufError::CountTooLarge { at: Item::Header, field: "metadata count", count: c,
                    min_entry_bytes: 13, remaining } if c == count && remaining == len - 24
            ),
            "{e}"
        );
    }
    // 21 entries where there are 20: the 21st key is read from the tensor infos.
    let e = err_of(&GgufWriter {
        kv_count: Some(21),
        ..w
    });
    assert!(!e.to_string().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Metadata

#[test]
fn string_lengths_beyond_the_file_are_refused() {
    // A key.
    let mut bytes = GgufWriter {
        kv_count: Some(1),
        ..GgufWriter::new(3)
    }
    .to_bytes();
    bytes.extend(u64::MAX.to_le_bytes());
    bytes.extend([0; 16]);
    let e = parse_err(&bytes);
    assert!(matches!(
        e,
        GgufError::StringTooLong {
            at: Item::Key {
                index: 0,
                key: None,
                element: None
            },
            field: "key",
            len: u64::MAX,
            remaining: 16
        }
    ));
    // A string value.
    let mut bytes = GgufWriter {
        kv_count: Some(1),
        ..GgufWriter::new(3)
    }
    .to_bytes();
    string(&mut bytes, b"general.name");
    bytes.extend(8u32.to_le_bytes());
    bytes.extend(1000u64.to_le_bytes());
    bytes.extend(b"SmolLM");
    let e = parse_err(&bytes);
    assert_eq!(
        e.to_string(),
        "metadata key 0 (general.name): string value length 1000 exceeds the 6 bytes left"
    );
    // A string inside an array names the element.
    let w = GgufWriter::new(3).kv(
        "tokenizer.ggml.tokens",
        Val::Array(
            8,
            vec![
                Val::Str("a".into()),
                Val::Raw(8, 99u64.to_le_bytes().to_vec()),
            ],
        ),
    );
    let e = err_of(&w);
    assert_eq!(
        e.to_string(),
        "metadata key 0 (tokenizer.ggml.tokens), array element 1: string value length 99 \
         exceeds the 0 bytes left"
    );
    // A tensor name.
    let mut bytes = GgufWriter {
        tensor_count: Some(1),
        ..GgufWriter::new(3)
    }
    .to_bytes();
    bytes.extend((1u64 << 40).to_le_bytes());
    bytes.extend([b'x'; 20]);
    let e = parse_err(&bytes);
    assert_eq!(
        e.to_string(),
        "tensor 0: name length 1099511627776 exceeds the 20 bytes left"
    );
}

#[test]
fn lying_array_lengths_are_refused_before_allocating() {
    for (ty, min) in [(0u32, 1u64), (4, 4), (12, 8), (8, 8), (9, 12)] {
        let w = GgufWriter::new(3).kv("a", Val::ArrayLying(ty, u64::MAX, vec![]));
        let e = err_of(&w);
        assert!(
            matches!(
                e,
                GgufError::CountTooLarge { field: "array length", count: u64::MAX,
                    min_entry_bytes, remaining: 0, .. } if min_entry_bytes == min
            ),
            "type {ty}: {e}"
        );
    }
    // 3 u32 stated, 2 there (8 bytes, not 12).
    let w = GgufWriter::new(3).kv(
        "llama.n",
        Val::ArrayLying(4, 3, vec![Val::U32(1), Val::U32(2)]),
    );
    assert_eq!(
        err_of(&w).to_string(),
        "metadata key 0 (llama.n): array length 3 cannot fit in the 8 bytes left \
         (each takes at least 4)"
    );
    // Strings: 5 stated, room for the 8-byte lengths of 5 but not their text.
    let w = GgufWriter::new(3).kv(
        "s",
        Val::ArrayLying(
            8,
            5,
            vec![Val::Str("abcdefghijklmnopqrstuvwxyz0123456789".into())],
        ),
    );
    let e = err_of(&w);
    assert!(
        matches!(
            &e,
            GgufError::Truncated {
                at: Item::Key {
                    element: Some(1),
                    ..
                },
                field: "string length",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn unknown_value_types_are_refused() {
    let e = err_of(&GgufWriter::new(3).kv("x", Val::Raw(13, vec![0; 8])));
    assert_eq!(
        e.to_string(),
        "metadata key 0 (x): value type 13 is not a GGUF value type (0 to 12)"
    );
    let e = err_of(&GgufWriter::new(3).kv("x", Val::ArrayLying(99, 0, vec![])));
    assert!(matches!(
        e,
        GgufError::UnknownValueType {
            field: "array element type",
            id: 99,
            ..
        }
    ));
    let e = err_of(&GgufWriter::new(3).kv("x", Val::Raw(u32::MAX, vec![])));
    assert!(matches!(
        e,
        GgufError::UnknownValueType { id: u32::MAX, .. }
    ));
}

#[test]
fn invalid_utf8_is_refused_naming_the_key() {
    let w = GgufWriter::new(3).kv("general.name", Val::StrBytes(b"ab\xffc".to_vec()));
    assert_eq!(
        err_of(&w).to_string(),
        "metadata key 0 (general.name): the string value is not valid UTF-8 (valid up to byte 2)"
    );
    let mut w = GgufWriter::new(3).kv("ok", Val::U8(0));
    w.kvs.push((b"k\xc3".to_vec(), Val::U8(0)));
    let e = err_of(&w);
    assert!(matches!(
        e,
        GgufError::InvalidUtf8 {
            at: Item::Key {
                index: 1,
                key: None,
                element: None
            },
            field: "key",
            valid_up_to: 1
        }
    ));
    let w = GgufWriter::new(3).kv(
        "tokens",
        Val::Array(8, vec![Val::Str("a".into()), Val::StrBytes(vec![0x80])]),
    );
    assert_eq!(
        err_of(&w).to_string(),
        "metadata key 0 (tokens), array element 1: the string value is not valid UTF-8 \
         (valid up to byte 0)"
    );
    let mut w = one_tensor(&[1], 0, f32_data(1));
    w.tensors[0].name = b"blk.\xfe".to_vec();
    assert_eq!(
        err_of(&w).to_string(),
        "tensor 0: the name is not valid UTF-8 (valid up to byte 4)"
    );
}

#[test]
fn bools_other_than_0_and_1_are_refused() {
    let w = GgufWriter::new(3).kv("b", Val::Raw(7, vec![2]));
    assert_eq!(
        err_of(&w).to_string(),
        "metadata key 0 (b): bool byte 2 is neither 0 nor 1"
    );
    let w = GgufWriter::new(3).kv("bs", Val::Array(7, vec![Val::Bool(true), Val::U8(255)]));
    assert!(matches!(
        err_of(&w),
        GgufError::InvalidBool {
            at: Item::Key {
                element: Some(1),
                ..
            },
            byte: 255
        }
    ));
}

#[test]
fn empty_and_duplicate_keys_are_refused() {
    let e = err_of(&GgufWriter::new(3).kv("a", Val::U8(0)).kv("", Val::U8(0)));
    assert_eq!(e.to_string(), "metadata key 1: the key is empty");
    let w = GgufWriter::new(3)
        .kv("a", Val::U8(0))
        .kv("b", Val::U8(0))
        .kv("c", Val::U8(0))
        .kv("b", Val::U32(1))
        .kv("a", Val::U8(0));
    let e = err_of(&w);
    assert!(matches!(&e, GgufError::DuplicateKey { index: 3, key, first: 1 } if key == "b"));
    assert_eq!(
        e.to_string(),
        "metadata key 3 (b): duplicate of metadata key 1"
    );
}

#[test]
fn arrays_nest_up_to_the_limit() {
    fn nested(depth: usize) -> Val {
        let mut v = Val::Array(0, vec![Val::U8(5)]);
        for _ in 1..depth {
            v = Val::Array(9, vec![v]);
        }
        v
    }
    let bytes = GgufWriter::new(3)
        .kv("deep", nested(MAX_ARRAY_DEPTH))
        .to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let mut v = *g.value("deep").unwrap();
    for _ in 1..MAX_ARRAY_DEPTH {
        v = v.as_array().unwrap().get(0).unwrap();
    }
    assert_eq!(v.as_array().unwrap().get(0), Some(Value::U8(5)));

    let e = err_of(&GgufWriter::new(3).kv("deep", nested(MAX_ARRAY_DEPTH + 1)));
    assert_eq!(
        e.to_string(),
        "metadata key 0 (deep), array element 0: arrays nested 17 deep (at most 16 are read)"
    );
}

#[test]
fn wrong_types_through_typed_accessors_name_the_key_and_both_types() {
    let bytes = every_type(3).to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let cases: [(GgufError, &str); 16] = [
        (
            g.get_u8("t.i8").unwrap_err(),
            "metadata key t.i8: expected u8, found i8",
        ),
        (
            g.get_i8("t.u8").unwrap_err(),
            "metadata key t.u8: expected i8, found u8",
        ),
        (
            g.get_u16("t.i16").unwrap_err(),
            "metadata key t.i16: expected u16, found i16",
        ),
        (
            g.get_i16("t.u16").unwrap_err(),
            "metadata key t.u16: expected i16, found u16",
        ),
        (
            g.get_u32("t.u64").unwrap_err(),
            "metadata key t.u64: expected u32, found u64",
        ),
        (
            g.get_i32("t.u32").unwrap_err(),
            "metadata key t.u32: expected i32, found u32",
        ),
        (
            g.get_f32("t.f64").unwrap_err(),
            "metadata key t.f64: expected f32, found f64",
        ),
        (
            g.get_bool("t.u8").unwrap_err(),
            "metadata key t.u8: expected bool, found u8",
        ),
        (
            g.get_u64("t.i64").unwrap_err(),
            "metadata key t.i64: expected u64, found i64",
        ),
        (
            g.get_i64("t.u64").unwrap_err(),
            "metadata key t.u64: expected i64, found u64",
        ),
        (
            g.get_f64("t.f32").unwrap_err(),
            "metadata key t.f32: expected f64, found f32",
        ),
        (
            g.get_str("t.strings").unwrap_err(),
            "metadata key t.strings: expected string, found array of string",
        ),
        (
            g.get_array("t.string").unwrap_err(),
            "metadata key t.string: expected array, found string",
        ),
        (
            g.get_strings("t.f32s").unwrap_err(),
            "metadata key t.f32s: expected array of string, found array of f32",
        ),
        (
            g.get_scalars::<u32>("t.i32s").unwrap_err(),
            "metadata key t.i32s: expected array of u32, found array of i32",
        ),
        (
            g.get_scalars::<f32>("t.f32").unwrap_err(),
            "metadata key t.f32: expected array of f32, found f32",
        ),
    ];
    for (i, (e, message)) in cases.iter().enumerate() {
        assert_eq!(e.to_string(), *message, "case {i}");
        assert!(matches!(e, GgufError::WrongType { .. }), "case {i}");
    }
    let e = g.get_u32("llama.block_count").unwrap_err();
    assert!(matches!(&e, GgufError::MissingKey { key } if key == "llama.block_count"));
    assert_eq!(e.to_string(), "metadata key llama.block_count is missing");
    assert!(g.get("llama.block_count").is_none());
    assert!(matches!(g.value("nope"), Err(GgufError::MissingKey { .. })));
    let e = g.tensor("output.weight").unwrap_err();
    assert_eq!(e.to_string(), "tensor output.weight is missing");
    let arr = g.get_array("t.i32s").unwrap();
    assert!(arr.strings().is_none());
    assert!(arr.scalars::<u32>().is_none());
}

#[test]
fn bad_alignments_are_refused() {
    for alignment in [0u32, 3, 24, 0x8000_0001] {
        let e = err_of(&GgufWriter::new(3).kv("general.alignment", Val::U32(alignment)));
        assert!(matches!(e, GgufError::BadAlignment { alignment: a } if a == alignment));
        assert_eq!(
            e.to_string(),
            format!("general.alignment {alignment} is not a nonzero power of two")
        );
    }
    let e = err_of(&GgufWriter::new(3).kv("general.alignment", Val::U64(32)));
    assert_eq!(
        e.to_string(),
        "metadata key general.alignment: expected u32, found u64"
    );
    // The largest power of two: a file with tensors cannot reach its data section.
    let w = GgufWriter {
        alignment: 32,
        ..GgufWriter::new(3).kv("general.alignment", Val::U32(1 << 31))
    }
    .tensor(TensorSpec::new("t", &[1], 0, f32_data(1)));
    assert!(matches!(
        err_of(&w),
        GgufError::DataSectionPastEnd {
            start: 0x8000_0000,
            ..
        }
    ));
}

// ---------------------------------------------------------------------------------------------
// Tensor infos

#[test]
fn more_than_four_dims_are_refused() {
    let e = err_of(&one_tensor(&[1, 1, 1, 1, 1], 0, f32_data(1)));
    assert_eq!(
        e.to_string(),
        "tensor 0 (t): 5 dimensions (ggml allows at most 4)"
    );
    let mut bytes = GgufWriter {
        tensor_count: Some(1),
        ..GgufWriter::new(3)
    }
    .to_bytes();
    string(&mut bytes, b"t");
    bytes.extend(u32::MAX.to_le_bytes());
    bytes.extend([0; 64]);
    assert!(matches!(
        parse_err(&bytes),
        GgufError::TooManyDims {
            n_dims: u32::MAX,
            ..
        }
    ));
    // Four are fine.
    let bytes = one_tensor(&[1, 2, 1, 2], 0, f32_data(4)).to_bytes();
    assert_eq!(
        Gguf::parse(&bytes).unwrap().tensors()[0].dims(),
        [1, 2, 1, 2]
    );
}

#[test]
fn overflowing_dims_are_refused() {
    let e = err_of(&one_tensor(&[4, 1 << 63], 0, vec![]));
    assert!(matches!(&e, GgufError::DimTooLarge { axis: 1, dim, .. } if *dim == 1 << 63));
    assert_eq!(
        e.to_string(),
        format!("tensor 0 (t): dimension 1 is 9223372036854775808, above the largest this reader accepts ({MAX_DIM})")
    );
    let e = err_of(&one_tensor(&[1 << 32, 1 << 32], 0, vec![]));
    assert_eq!(
        e.to_string(),
        format!("tensor 0 (t): dimensions [4294967296, 4294967296] multiply to more than {MAX_DIM} (zeros left out)")
    );
    // A zero dimension does not hide an overflowing product of the others.
    let e = err_of(&one_tensor(&[0, 1 << 40, 1 << 40], 0, vec![]));
    assert!(matches!(
        e,
        GgufError::ElementCountOverflow { n_dims: 3, .. }
    ));
    // The elements fit, their bytes do not.
    let e = err_of(&one_tensor(&[1 << 62], 0, vec![]));
    assert_eq!(
        e.to_string(),
        "tensor 0 (t): the size in bytes of 4611686018427387904 f32 values overflows usize"
    );
}

#[test]
fn unknown_tensor_types_are_refused() {
    for id in [4u32, 9, 39, u32::MAX] {
        let e = err_of(&one_tensor(&[32], id, vec![0; 64]));
        assert!(matches!(e, GgufError::UnknownTensorType { id: i, .. } if i == id));
        assert_eq!(
            e.to_string(),
            format!("tensor 0 (t): ggml type {id} is not one this crate reads")
        );
    }
}

#[test]
fn rows_that_are_not_whole_blocks_are_refused() {
    let e = err_of(&one_tensor(&[33, 2], 3, vec![0; 80]));
    assert_eq!(
        e.to_string(),
        "tensor 0 (t): a row of 33 values is not a whole number of q4_1 blocks of 32"
    );
    let e = err_of(&one_tensor(&[128, 1], 14, vec![0; 210]));
    assert!(matches!(
        e,
        GgufError::PartialBlock {
            ty: GgmlType::Q6_K,
            row_len: 128,
            ..
        }
    ));
    // Whole blocks of 256 are fine.
    let bytes = one_tensor(&[512, 1], 12, vec![0; 288]).to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(
        (g.tensors()[0].ty(), g.tensors()[0].byte_len()),
        (GgmlType::Q4_K, 288)
    );
}

#[test]
fn duplicate_tensor_names_are_refused() {
    let w = GgufWriter::new(3)
        .tensor(TensorSpec::new("a", &[1], 0, f32_data(1)))
        .tensor(TensorSpec::new("b", &[1], 0, f32_data(1)))
        .tensor(TensorSpec::new("a", &[1], 0, f32_data(1)));
    let e = err_of(&w);
    assert_eq!(e.to_string(), "tensor 2 (a): duplicate of tensor 0");
}

// ---------------------------------------------------------------------------------------------
// Data layout

#[test]
fn misaligned_offsets_are_refused() {
    let mut w = every_type(3);
    w.tensors[1].offset = Some(33);
    let e = err_of(&w);
    assert!(
        matches!(&e, GgufError::MisalignedOffset { at, offset: 33, alignment: 32 }
        if *at == tensor_at(1, "embd.weight"))
    );
    assert_eq!(
        e.to_string(),
        "tensor 1 (embd.weight): offset 33 is not a multiple of the alignment 32"
    );
    w.tensors[1].offset = Some(u64::MAX);
    assert!(matches!(
        err_of(&w),
        GgufError::MisalignedOffset {
            offset: u64::MAX,
            ..
        }
    ));
}

#[test]
fn offsets_past_the_end_are_refused() {
    let w = every_type(3);
    let data_len = (w.to_bytes().len() - w.data_offset()) as u64;
    for offset in [256u64, 1 << 40, u64::MAX - 31] {
        let mut w = w.clone();
        w.tensors[0].offset = Some(offset);
        let e = err_of(&w);
        assert!(
            matches!(&e, GgufError::DataPastEnd { offset: o, size: 12, data_len: d, .. }
                if *o == offset && *d == data_len),
            "{e}"
        );
    }
    let mut w = w;
    w.tensors[2].offset = Some(224);
    assert_eq!(
        err_of(&w).to_string(),
        format!(
            "tensor 2 (blk.0.attn_q.weight): 60 bytes at offset 224 run past the end of the \
             {data_len}-byte data section"
        )
    );
}

#[test]
fn overlapping_tensor_data_is_refused() {
    let mut w = every_type(3);
    // The Q4_1 tensor (60 bytes) placed over the end of the Q8_0 one (bytes 32..168).
    w.tensors[2].offset = Some(160);
    let e = err_of(&w);
    assert!(
        matches!(&e, GgufError::DataOverlap { at, offset: 160, other, other_offset: 32,
        other_size: 136 } if *at == tensor_at(2, "blk.0.attn_q.weight")
            && *other == tensor_at(1, "embd.weight"))
    );
    assert_eq!(
        e.to_string(),
        "tensor 2 (blk.0.attn_q.weight): data at offset 160 overlaps tensor 1 (embd.weight) \
         (136 bytes at offset 32)"
    );
    // Two tensors at the same offset.
    let mut w = every_type(3);
    w.tensors[0].offset = Some(192);
    assert!(matches!(
        err_of(&w),
        GgufError::DataOverlap {
            offset: 192,
            other_offset: 192,
            other_size: 12,
            ..
        }
    ));
    // A tensor of no bytes overlaps nothing.
    let w = GgufWriter::new(3)
        .tensor(TensorSpec::new("a", &[2], 0, f32_data(2)))
        .tensor(TensorSpec {
            offset: Some(0),
            ..TensorSpec::new("z", &[0], 0, vec![])
        });
    let bytes = w.to_bytes();
    assert_eq!(
        Gguf::parse(&bytes).unwrap().tensor("z").unwrap().byte_len(),
        0
    );
}

// ---------------------------------------------------------------------------------------------
// Errors quote names briefly

#[test]
fn long_names_are_quoted_briefly_in_errors() {
    let long = "é".repeat(100);
    let mut w = one_tensor(&[1], 0, f32_data(1));
    w.tensors.push(TensorSpec::new(&long, &[1], 0, f32_data(1)));
    w.tensors.push(TensorSpec::new(&long, &[1], 0, f32_data(1)));
    let e = err_of(&w);
    let GgufError::DuplicateTensor {
        index: 2,
        name,
        first: 1,
    } = e
    else {
        panic!("{e}")
    };
    assert_eq!(name, format!("{}…", "é".repeat(MAX_QUOTED_NAME / 2)));
    let bytes = one_tensor(&[1], 0, f32_data(1)).to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    let GgufError::MissingKey { key } = g.get_u32(&"k".repeat(1000)).unwrap_err() else {
        panic!()
    };
    assert_eq!(key.len(), MAX_QUOTED_NAME + '…'.len_utf8());
}

#[test]
fn debug_output_summarises_instead_of_dumping() {
    let bytes = every_type(3).to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(
        format!("{g:?}"),
        "Gguf { version: 3, alignment: 32, data_offset: 832, metadata: 20, tensors: 3 }"
    );
    assert_eq!(
        format!("{:?}", g.tensor("embd.weight").unwrap()),
        "TensorInfo { name: \"embd.weight\", ty: Q8_0, dims: [64, 2], offset: 32, bytes: 136 }"
    );
    assert_eq!(
        format!("{:?}", g.get_array("t.strings").unwrap()),
        "Array { element_type: String, len: 3, bytes: 32 }"
    );
}

// ---------------------------------------------------------------------------------------------
// Mapped files

#[cfg(feature = "model")]
mod mapped {
    use super::*;
    use skainet_schedule::gguf::GgufFile;

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("skainet-gguf-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    /// A way to open a file.
    type Opener = fn(&std::path::Path) -> Result<GgufFile, GgufError>;

    /// The two ways to open a file: mapped, and read into (huge) pages.
    const OPENERS: [Opener; 2] = [|p| GgufFile::open(p), |p| GgufFile::load_in_huge_pages(p)];

    #[test]
    fn a_mapped_file_and_one_read_into_huge_pages_read_like_their_bytes() {
        let bytes = every_type(3).to_bytes();
        let path = temp("valid.gguf", &bytes);
        for (i, open) in OPENERS.into_iter().enumerate() {
            let file = open(&path).unwrap();
            assert_eq!(file.bytes(), &bytes[..]);
            assert_eq!(file.path(), path);
            if i == 1 {
                // Read into huge pages: from a 2 MiB boundary.
                assert_eq!(file.bytes().as_ptr() as usize % (2 << 20), 0);
            }
            let g = file.gguf();
            assert_eq!(g.get_u32("t.u32").unwrap(), 0xdead_beef);
            let q = g.tensor("blk.0.attn_q.weight").unwrap();
            assert_eq!(q.data(), writer::block_data(60, 9));
            // Borrowed from the file's bytes, not copied again.
            let start = file.bytes().as_ptr() as usize + g.data_offset() + 192;
            assert_eq!(q.data().as_ptr() as usize, start);
        }
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_missing_file_is_an_error_naming_the_path() {
        let path = std::env::temp_dir().join("skainet-gguf-no-such-dir/model.gguf");
        for open in OPENERS {
            let e = open(&path).unwrap_err();
            let GgufError::Io { path: p, source } = &e else {
                panic!("{e}")
            };
            assert_eq!((p, source.kind()), (&path, std::io::ErrorKind::NotFound));
            assert!(
                e.to_string().starts_with(&format!("{}: ", path.display())),
                "{e}"
            );
            assert!(std::error::Error::source(&e).is_some());
        }
    }

    #[test]
    fn an_empty_or_bad_file_is_the_parse_error() {
        let empty = temp("empty.gguf", b"");
        let v1 = temp("v1.gguf", &GgufWriter::new(1).to_bytes());
        for open in OPENERS {
            let e = open(&empty).unwrap_err();
            assert_eq!(
                e.to_string(),
                "header: the magic (4 bytes at offset 0) runs past the end of the 0-byte file"
            );
            assert!(matches!(
                open(&v1),
                Err(GgufError::UnsupportedVersion { version: 1 })
            ));
        }
        std::fs::remove_file(&empty).unwrap();
        std::fs::remove_file(&v1).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Fuzz seeds

#[test]
fn every_ggml_type_reads_with_its_block_size() {
    let bytes = writer::every_ggml_type().to_bytes();
    let g = Gguf::parse(&bytes).unwrap();
    assert_eq!(g.alignment(), 64);
    assert_eq!(g.tensors().len(), GgmlType::ALL.len());
    for t in g.tensors() {
        let ty = t.ty();
        assert_eq!(t.name(), ty.name().to_lowercase(), "{ty}");
        assert_eq!(t.dims(), [ty.block_len(), 2], "{ty}");
        assert_eq!(t.byte_len(), 2 * ty.block_bytes(), "{ty}");
        assert_eq!(t.offset() % 64, 0, "{ty}");
    }
}

/// The committed seeds of the fuzz target are exactly this writer's files, so they stay valid
/// as the writer grows. `SKAINET_WRITE_FUZZ_SEEDS=1` rewrites them.
#[test]
fn fuzz_seeds_are_the_writer_s_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/gguf_parse");
    for (name, bytes) in writer::fuzz_seeds() {
        let path = dir.join(name);
        if std::env::var_os("SKAINET_WRITE_FUZZ_SEEDS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            committed == bytes,
            "{} differs from the writer's file",
            path.display()
        );
        Gguf::parse(&committed).unwrap();
    }
}
