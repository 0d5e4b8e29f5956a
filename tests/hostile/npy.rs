//! `.npy` files that lie: corrupt lengths, malformed headers, shapes bigger than the file, and
//! headers too long for a `u16`. Each is one exact error, never a panic or another tensor.

use skainet_schedule::graph::npy::{self, NpyError};
use skainet_schedule::{Tensor, TensorError};

/// A `.npy` file of format `major`.0 with `header` (padded to 64 bytes as NumPy does) and `data`.
fn file(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let preamble = if major == 1 { 10 } else { 12 };
    let mut text = header.as_bytes().to_vec();
    while !(preamble + text.len() + 1).is_multiple_of(64) {
        text.push(b' ');
    }
    text.push(b'\n');
    let mut bytes = b"\x93NUMPY".to_vec();
    bytes.extend_from_slice(&[major, 0]);
    if major == 1 {
        bytes.extend_from_slice(&u16::try_from(text.len()).unwrap().to_le_bytes());
    } else {
        bytes.extend_from_slice(&u32::try_from(text.len()).unwrap().to_le_bytes());
    }
    bytes.extend_from_slice(&text);
    bytes.extend_from_slice(data);
    bytes
}

/// A version 1.0 file whose shape entry is `shape` and whose data is `count` f32 values.
fn with_shape(shape: &str, count: usize) -> Vec<u8> {
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    file(1, &header, &vec![0u8; 4 * count])
}

fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn ones(rank: usize) -> Tensor {
    Tensor::new(vec![1; rank], vec![7.5]).unwrap()
}

#[test]
fn a_rank_22000_header_is_written_as_version_2_and_reads_back_unchanged() {
    let t = ones(22_000);
    let bytes = npy::try_to_bytes(&t).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x02\x00");
    // 50 + 3 * 22000 + 3 bytes of text, '\n', padded so that 12 + header is a multiple of 64.
    let header_len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    assert_eq!(header_len, 66_100);
    assert_eq!(bytes.len(), 12 + 66_100 + 4);
    assert_eq!(npy::from_bytes(&bytes), Ok(t));
}

#[test]
fn the_longest_header_a_u16_states_stays_version_1() {
    // Rank 21824: 53 + 3 * 21824 bytes of text and '\n' end exactly at 65536 = 10 + 65526.
    let bytes = npy::try_to_bytes(&ones(21_824)).unwrap();
    assert_eq!(&bytes[..10], b"\x93NUMPY\x01\x00\xf6\xff");
    assert_eq!(npy::from_bytes(&bytes), Ok(ones(21_824)));
}

#[test]
fn one_dimension_more_switches_to_version_2() {
    let bytes = npy::try_to_bytes(&ones(21_825)).unwrap();
    assert_eq!(&bytes[..12], b"\x93NUMPY\x02\x00\x34\x00\x01\x00");
    assert_eq!(npy::from_bytes(&bytes), Ok(ones(21_825)));
}

#[test]
fn to_bytes_and_try_to_bytes_agree() {
    let t = Tensor::new(vec![2, 2], vec![1.0, -2.0, 0.5, f32::MIN_POSITIVE]).unwrap();
    assert_eq!(npy::to_bytes(&t), npy::try_to_bytes(&t).unwrap());
}

#[test]
fn a_six_to_nine_byte_file_is_truncated() {
    let full = npy::to_bytes(&ones(2));
    for present in 6..=9 {
        assert_eq!(
            npy::from_bytes(&full[..present]),
            Err(NpyError::Truncated {
                needed: 10,
                present
            }),
            "{present} bytes"
        );
    }
}

#[test]
fn a_version_2_file_cut_inside_its_length_field_is_truncated() {
    let full = file(
        2,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
        &[0; 4],
    );
    for present in 10..=11 {
        assert_eq!(
            npy::from_bytes(&full[..present]),
            Err(NpyError::Truncated {
                needed: 12,
                present
            })
        );
    }
}

#[test]
fn every_proper_prefix_of_a_file_is_truncated() {
    let full = npy::to_bytes(&Tensor::new(vec![3], vec![1.0, 2.0, 3.0]).unwrap());
    assert_eq!(full.len(), 128 + 12);
    for present in 0..full.len() {
        let needed = match present {
            0..10 => 10,
            10..128 => 128,
            _ => 140,
        };
        assert_eq!(
            npy::from_bytes(&full[..present]),
            Err(NpyError::Truncated { needed, present }),
            "{present} bytes"
        );
    }
}

#[test]
fn a_file_not_starting_with_the_magic_is_bad_magic() {
    assert_eq!(
        npy::from_bytes(b"PK\x03\x04zipfile"),
        Err(NpyError::BadMagic)
    );
    assert_eq!(
        npy::from_bytes(b"\x93NUMPZ\x01\x00"),
        Err(NpyError::BadMagic)
    );
    assert_eq!(npy::from_bytes(b"\x94"), Err(NpyError::BadMagic));
    assert_eq!(NpyError::BadMagic.to_string(), "not a .npy file: bad magic");
}

#[test]
fn major_version_4_is_unsupported() {
    let mut bytes = npy::to_bytes(&ones(1));
    bytes[6] = 4;
    assert_eq!(
        npy::from_bytes(&bytes),
        Err(NpyError::UnsupportedVersion { major: 4 })
    );
}

#[test]
fn a_minor_version_other_than_0_is_unsupported() {
    let mut bytes = npy::to_bytes(&ones(1));
    bytes[7] = 1;
    let err = npy::from_bytes(&bytes).unwrap_err();
    assert_eq!(
        err,
        NpyError::UnsupportedMinorVersion { major: 1, minor: 1 }
    );
    assert_eq!(
        err.to_string(),
        ".npy version 1.1 is not supported (only 1.0)"
    );
}

#[test]
fn version_3_reads_a_utf8_header() {
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    let bytes = file(3, header, &f32_bytes(&[1.5, -4.0]));
    assert_eq!(
        npy::from_bytes(&bytes),
        Ok(Tensor::new(vec![2], vec![1.5, -4.0]).unwrap())
    );
}

#[test]
fn a_version_3_header_that_is_not_utf8_is_a_bad_header() {
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    let mut bytes = file(3, header, &f32_bytes(&[1.5, -4.0]));
    bytes[12 + header.len()] = 0xff;
    assert!(matches!(
        npy::from_bytes(&bytes),
        Err(NpyError::BadHeader { .. })
    ));
}

#[test]
fn a_utf8_descr_in_version_3_is_an_unsupported_dtype() {
    let header = "{'descr': '<f4é', 'fortran_order': False, 'shape': (), }";
    let bytes = file(3, header, &[0; 4]);
    assert_eq!(
        npy::from_bytes(&bytes),
        Err(NpyError::UnsupportedDtype {
            descr: "<f4é".into()
        })
    );
}

#[test]
fn bytes_after_the_data_are_an_error() {
    let mut bytes = npy::to_bytes(&Tensor::new(vec![2], vec![1.0, 2.0]).unwrap());
    bytes.push(0);
    let err = npy::from_bytes(&bytes).unwrap_err();
    assert_eq!(
        err,
        NpyError::TrailingBytes {
            expected: 136,
            present: 137
        }
    );
    assert_eq!(
        err.to_string(),
        ".npy has trailing bytes: header and data take 136 bytes, the file has 137"
    );
}

#[test]
fn a_corrupt_length_field_no_longer_reads_as_another_tensor() {
    // What the u16 writer produced for rank 22000: the length 66100 cut to 66100 - 65536 = 564.
    let good = npy::try_to_bytes(&ones(22_000)).unwrap();
    let mut cut = b"\x93NUMPY\x01\x00".to_vec();
    cut.extend_from_slice(&564u16.to_le_bytes());
    cut.extend_from_slice(&good[12..]);
    // The header now ends inside the shape tuple: "(" and 171 times "1, ".
    let value = format!("({}", "1, ".repeat(171)).trim_end().to_string();
    assert_eq!(
        npy::from_bytes(&cut),
        Err(NpyError::BadValue {
            key: "shape",
            value
        })
    );
}

#[test]
fn malformed_shape_tuples_are_bad_values() {
    for shape in [
        "(,)", "(3,,4)", "(+3,)", "(-3,)", "(3 4)", "(03,)", "(1_000,)", "(3.0,)", "[3]", "3",
    ] {
        assert_eq!(
            npy::from_bytes(&with_shape(shape, 3)),
            Err(NpyError::BadValue {
                key: "shape",
                value: shape.into()
            }),
            "{shape}"
        );
    }
}

#[test]
fn a_parenthesised_integer_is_not_a_shape() {
    assert_eq!(
        npy::from_bytes(&with_shape("(3)", 3)),
        Err(NpyError::BadValue {
            key: "shape",
            value: "(3)".into()
        })
    );
}

#[test]
fn a_bad_shape_names_itself_in_the_message() {
    let err = npy::from_bytes(&with_shape("(3,,4)", 12)).unwrap_err();
    assert_eq!(
        err.to_string(),
        ".npy header: 'shape' is \"(3,,4)\", not a tuple of non-negative integers that fit usize"
    );
}

#[test]
fn a_dimension_over_usize_max_is_a_bad_value() {
    let shape = format!("({}0,)", usize::MAX);
    assert_eq!(
        npy::from_bytes(&with_shape(&shape, 0)),
        Err(NpyError::BadValue {
            key: "shape",
            value: shape
        })
    );
}

#[test]
fn well_formed_shape_spellings_are_read() {
    for (shape, dims) in [
        ("()", vec![]),
        ("( )", vec![]),
        ("(3,)", vec![3]),
        ("(3 , )", vec![3]),
        ("(1, 3)", vec![1, 3]),
        ("(1,3,)", vec![1, 3]),
        ("(0, 5)", vec![0, 5]),
    ] {
        let count = dims.iter().product();
        let t = npy::from_bytes(&with_shape(shape, count)).unwrap();
        assert_eq!(t.shape(), dims, "{shape}");
    }
}

#[test]
fn double_quotes_and_any_key_order_are_read() {
    let header = r#"{ "shape": (2,), "fortran_order": False, "descr": "<f4" }"#;
    let t = npy::from_bytes(&file(1, header, &f32_bytes(&[3.0, 4.0]))).unwrap();
    assert_eq!(t.data(), [3.0, 4.0]);
}

#[test]
fn a_key_stated_twice_is_an_error() {
    let header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (1,), }";
    let err = npy::from_bytes(&file(1, header, &[0; 4])).unwrap_err();
    assert_eq!(err, NpyError::DuplicateKey { key: "shape" });
    assert_eq!(err.to_string(), ".npy header states 'shape' twice");
}

#[test]
fn a_non_boolean_fortran_order_is_a_bad_value() {
    for value in ["0", "'False'", "Falsey", "None", "false"] {
        let header = format!("{{'descr': '<f4', 'fortran_order': {value}, 'shape': (), }}");
        assert_eq!(
            npy::from_bytes(&file(1, &header, &[0; 4])),
            Err(NpyError::BadValue {
                key: "fortran_order",
                value: value.into()
            }),
            "{value}"
        );
    }
}

#[test]
fn fortran_order_true_is_refused() {
    let header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }";
    assert_eq!(
        npy::from_bytes(&file(1, header, &[0; 8])),
        Err(NpyError::FortranOrder)
    );
}

#[test]
fn a_descr_that_is_not_a_string_is_a_bad_value() {
    let header = "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }";
    assert_eq!(
        npy::from_bytes(&file(1, header, &[0; 4])),
        Err(NpyError::BadValue {
            key: "descr",
            value: "[('a', '<f4')]".into()
        })
    );
}

#[test]
fn other_dtypes_are_unsupported() {
    let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (), }";
    assert_eq!(
        npy::from_bytes(&file(1, header, &[0; 8])),
        Err(NpyError::UnsupportedDtype {
            descr: "<f8".into()
        })
    );
}

#[test]
fn headers_that_are_not_numpys_dictionary_are_bad_headers() {
    for header in [
        "",
        "{}",
        "{'descr': '<f4', 'shape': (), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1, }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), } x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), },",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (),, }",
        "{descr: '<f4', 'fortran_order': False, 'shape': (), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': ()",
    ] {
        let bytes = file(1, header, &[0; 4]);
        let text = String::from_utf8(bytes[10..bytes.len() - 4].to_vec()).unwrap();
        assert_eq!(
            npy::from_bytes(&bytes),
            Err(NpyError::BadHeader { header: text }),
            "{header}"
        );
    }
}

#[test]
fn a_tiny_file_claiming_2_pow_40_elements_is_truncated_without_allocating() {
    let bytes = with_shape("(1099511627776,)", 1);
    assert_eq!(bytes.len(), 132);
    assert_eq!(
        npy::from_bytes(&bytes),
        Err(NpyError::Truncated {
            needed: 128 + 4 * (1 << 40),
            present: 132
        })
    );
}

#[test]
fn a_shape_whose_element_count_overflows_is_too_large() {
    let err = npy::from_bytes(&with_shape("(4294967296, 4294967296)", 1)).unwrap_err();
    assert_eq!(
        err,
        NpyError::Tensor(TensorError::TooLarge {
            shape: vec![1 << 32, 1 << 32]
        })
    );
}

#[test]
fn a_shape_whose_byte_count_overflows_is_too_large() {
    let shape = format!("({},)", usize::MAX / 2);
    assert_eq!(
        npy::from_bytes(&with_shape(&shape, 1)),
        Err(NpyError::Tensor(TensorError::TooLarge {
            shape: vec![usize::MAX / 2]
        }))
    );
}

#[test]
fn a_length_field_past_the_end_is_truncated() {
    let mut bytes = npy::to_bytes(&ones(1));
    bytes[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
    assert_eq!(
        npy::from_bytes(&bytes),
        Err(NpyError::Truncated {
            needed: 10 + 65535,
            present: bytes.len()
        })
    );
}

#[test]
fn a_u32_max_length_field_is_truncated() {
    let mut bytes = file(
        2,
        "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
        &[0; 4],
    );
    bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        npy::from_bytes(&bytes),
        Err(NpyError::Truncated {
            needed: 12 + 4_294_967_295,
            present: bytes.len()
        })
    );
}

/// A fixed xorshift stream, so a failure names its iteration and reproduces.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn corrupted_bytes_never_panic_and_what_reads_round_trips() {
    let sources = [
        npy::to_bytes(&Tensor::new(vec![2, 3], vec![1.0; 6]).unwrap()),
        file(
            2,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
            &[0; 12],
        ),
        file(
            3,
            "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
            &[0; 4],
        ),
    ];
    let alphabet = b"\x00\x01\x02\x03\xff(),:{}'\" 0123456789+-TF\n";
    let mut state = 0x9e37_79b9_7f4a_7c15;
    let mut read = 0;
    for round in 0..20_000 {
        let mut bytes = sources[round % sources.len()].clone();
        for _ in 0..=(xorshift(&mut state) % 3) {
            let at = (xorshift(&mut state) % bytes.len() as u64) as usize;
            match xorshift(&mut state) % 4 {
                0 => bytes[at] = alphabet[(xorshift(&mut state) % alphabet.len() as u64) as usize],
                1 => bytes[at] = xorshift(&mut state) as u8,
                2 => bytes.truncate(at),
                _ => bytes.insert(
                    at,
                    alphabet[(xorshift(&mut state) % alphabet.len() as u64) as usize],
                ),
            }
            if bytes.is_empty() {
                break;
            }
        }
        if let Ok(t) = npy::from_bytes(&bytes) {
            read += 1;
            let again = npy::from_bytes(&npy::to_bytes(&t)).unwrap();
            assert_eq!(again.shape(), t.shape(), "round {round}");
            assert_eq!(again.to_bits(), t.to_bits(), "round {round}");
        }
    }
    // Mutations of the padding and of the data still read; the rest must not.
    assert!(read > 0 && read < 20_000, "{read} of 20000 read");
}
