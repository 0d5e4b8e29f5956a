//! The tokenizer of the model lane: a toy vocabulary built here (merge order, special tokens,
//! decoding, every error), the same read from a GGUF file written here, and the real SmolLM2
//! vocabulary read from the model file, whose ids must equal llama.cpp's
//! (`tests/fixtures/tokenize_expected.json` with special tokens parsed,
//! `tokenize_expected_no_special.json` without; each records the command that produced it).
//!
//! The model file is `$SKAINET_MODEL`, else `models/SmolLM2-135M-Instruct.Q4_1.gguf` at the
//! repository root. Without it the `smollm2_` tests FAIL, saying to run
//! `scripts/fetch_model.sh`; they never pass silently. To leave them out on purpose:
//! `cargo test --features model --test tokenizer -- --skip smollm2`.

#[path = "common/gguf.rs"]
mod gguf_writer;
#[path = "common/json.rs"]
mod json;

#[path = "common/model_file.rs"]
mod model_file;

use skainet_schedule::gguf::Gguf;
use skainet_schedule::model::{TokenKind, Tokenizer, TokenizerError, TokenizerParts};

mod toy {
    use super::*;

    /// The merges of the toy vocabulary, in rank order; each adds the joined token.
    pub const MERGES: &[&str] = &[
        "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "a a", "aa aa",
        "b c", "a b", "Ġ Ġ", "1 2",
    ];

    /// Tokens added after the merges' tokens: (text, GGUF token type).
    pub const EXTRA: &[(&str, i32)] = &[
        ("<|im_start|>", 3),
        ("<|im_end|>", 3),
        ("<|im_end|>!", 3),
        ("<user>", 4),
        ("<0x41>", 6),
        ("<unused0>", 5),
        ("<undefined>", 0),
        ("<unk>", 2),
    ];

    /// The 256 byte tokens (id = byte), the merges' tokens, then [`EXTRA`]: 279 tokens.
    pub fn parts(pre: &str) -> TokenizerParts {
        let mut parts = TokenizerParts::bytes_only(pre);
        for merge in MERGES {
            let joined = merge.replace(' ', "");
            if !parts.tokens.contains(&joined) {
                parts.tokens.push(joined);
                parts.token_types.push(1);
            }
            parts.merges.push((*merge).into());
        }
        for (text, kind) in EXTRA {
            parts.tokens.push((*text).into());
            parts.token_types.push(*kind);
        }
        parts
    }

    pub fn tokenizer() -> Tokenizer {
        Tokenizer::from_parts(parts("gpt-2")).expect("the toy vocabulary is valid")
    }

    /// The id of a token by its stored text.
    pub fn id(t: &Tokenizer, text: &str) -> u32 {
        t.token_id(text)
            .unwrap_or_else(|| panic!("{text:?} is a toy token"))
    }
}

fn ids_of(t: &Tokenizer, texts: &[&str]) -> Vec<u32> {
    texts.iter().map(|text| toy::id(t, text)).collect()
}

#[test]
fn the_toy_vocabulary_has_its_279_tokens_and_special_ids() {
    let t = toy::tokenizer();
    assert_eq!(t.vocab_len(), 279);
    assert_eq!(t.token_id("hello"), Some(259));
    assert_eq!(t.token_text(259), Some("hello"));
    assert_eq!(
        t.token_kind(toy::id(&t, "<user>")),
        Some(TokenKind::UserDefined)
    );
    assert_eq!(t.token_kind(279), None);
    assert_eq!(t.token_text(279), None);
    assert_eq!(
        (t.bos(), t.eos(), t.add_bos(), t.add_eos()),
        (None, None, false, false)
    );
    assert_eq!(t.pre_tokenizer(), "gpt-2");
}

#[test]
fn a_tokenizer_is_shared_between_threads() {
    fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Tokenizer>();
    let t = toy::tokenizer();
    let ids = std::thread::scope(|s| {
        s.spawn(|| t.encode("hello", false).unwrap())
            .join()
            .unwrap()
    });
    assert_eq!(ids, [259]);
}

#[test]
fn merges_apply_lowest_rank_first() {
    let t = toy::tokenizer();
    // "b c" (rank 11) comes before "a b" (rank 12): a|bc, not ab|c.
    assert_eq!(t.encode("abc", false).unwrap(), ids_of(&t, &["a", "bc"]));
    // Merges build on merges: he + ll, then hell + o.
    assert_eq!(t.encode("hello", false).unwrap(), ids_of(&t, &["hello"]));
}

#[test]
fn equal_ranks_merge_leftmost_first() {
    let t = toy::tokenizer();
    assert_eq!(t.encode("aaa", false).unwrap(), ids_of(&t, &["aa", "a"]));
    assert_eq!(
        t.encode("aaaaa", false).unwrap(),
        ids_of(&t, &["aaaa", "a"])
    );
}

#[test]
fn merges_never_cross_words() {
    let t = toy::tokenizer();
    assert_eq!(
        t.encode("hello world", false).unwrap(),
        ids_of(&t, &["hello", "Ġworld"])
    );
    // "Ġ Ġ" merges the spaces of one word; the last space goes to the next word.
    assert_eq!(
        t.encode("hello   world", false).unwrap(),
        ids_of(&t, &["hello", "ĠĠ", "Ġworld"])
    );
}

#[test]
fn smollm_splits_digits_before_merging_them() {
    let gpt2 = toy::tokenizer();
    let smollm = Tokenizer::from_parts(toy::parts("smollm")).unwrap();
    assert_eq!(gpt2.encode("12", false).unwrap(), ids_of(&gpt2, &["12"]));
    assert_eq!(
        smollm.encode("12", false).unwrap(),
        ids_of(&smollm, &["1", "2"])
    );
}

#[test]
fn pre_tokenizer_aliases_encode_like_their_family() {
    let text = "hello world 12 aaa\n\n  x";
    for (alias, family) in [
        ("starcoder", "smollm"),
        ("refact", "smollm"),
        ("command-r", "smollm"),
        ("codeshell", "smollm"),
        ("exaone", "smollm"),
        ("minerva-7b", "smollm"),
        ("phi-2", "gpt-2"),
        ("mpt", "gpt-2"),
        ("olmo", "gpt-2"),
        ("jais", "gpt-2"),
    ] {
        let a = Tokenizer::from_parts(toy::parts(alias)).unwrap();
        let f = Tokenizer::from_parts(toy::parts(family)).unwrap();
        assert_eq!(
            a.encode(text, false).unwrap(),
            f.encode(text, false).unwrap(),
            "{alias}"
        );
    }
}

#[test]
fn control_tokens_are_parsed_only_when_asked() {
    let t = toy::tokenizer();
    let start = toy::id(&t, "<|im_start|>");
    let user = t.encode("user", false).unwrap();
    let mut expected = vec![start];
    expected.extend(&user);
    assert_eq!(t.encode("<|im_start|>user", true).unwrap(), expected);
    // Without parse_special the text is ordinary text: no control token comes out.
    let plain = t.encode("<|im_start|>user", false).unwrap();
    assert!(!plain.contains(&start));
    assert_eq!(t.decode(&plain, false).unwrap(), "<|im_start|>user");
}

#[test]
fn special_tokens_split_words_wherever_they_occur() {
    let t = toy::tokenizer();
    let end = toy::id(&t, "<|im_end|>");
    let mut expected = ids_of(&t, &["he"]);
    expected.push(end);
    expected.extend(ids_of(&t, &["ll", "o"]));
    assert_eq!(t.encode("he<|im_end|>llo", true).unwrap(), expected);
}

#[test]
fn the_longest_special_text_wins() {
    let t = toy::tokenizer();
    let long = toy::id(&t, "<|im_end|>!");
    let short = toy::id(&t, "<|im_end|>");
    assert_eq!(t.encode("<|im_end|>!", true).unwrap(), [long]);
    assert_eq!(
        t.encode("<|im_end|><|im_end|>!", true).unwrap(),
        [short, long]
    );
}

#[test]
fn user_defined_tokens_are_parsed_even_without_parse_special() {
    let t = toy::tokenizer();
    let user = toy::id(&t, "<user>");
    assert_eq!(t.encode("<user>", false).unwrap(), [user]);
    assert_eq!(t.decode(&[user], false).unwrap(), "<user>");
}

#[test]
fn bos_and_eos_are_added_when_the_vocabulary_asks() {
    let mut parts = toy::parts("gpt-2");
    let start = parts
        .tokens
        .iter()
        .position(|t| t == "<|im_start|>")
        .unwrap() as u32;
    parts.bos = Some(start);
    parts.eos = Some(start + 1);
    parts.add_bos = true;
    let t = Tokenizer::from_parts(parts.clone()).unwrap();
    let bos = t.bos().unwrap();
    assert_eq!(t.encode("a", false).unwrap(), [bos, u32::from(b'a')]);
    assert_eq!(t.encode("", false).unwrap(), [bos]);

    parts.add_bos = false;
    parts.add_eos = true;
    let t = Tokenizer::from_parts(parts).unwrap();
    assert_eq!(
        t.encode("a", false).unwrap(),
        [u32::from(b'a'), t.eos().unwrap()]
    );
}

#[test]
fn empty_text_encodes_to_nothing() {
    assert_eq!(
        toy::tokenizer().encode("", true).unwrap(),
        Vec::<u32>::new()
    );
}

#[test]
fn a_byte_without_a_token_is_dropped() {
    let mut parts = toy::parts("gpt-2");
    // Byte 0x04's character becomes an unused token's text: no token stands for the byte.
    parts.tokens[4] = "<free>".into();
    parts.token_types[4] = 5;
    let t = Tokenizer::from_parts(parts).unwrap();
    assert_eq!(t.encode("a\u{4}b", false).unwrap(), [97, 98]);
    assert_eq!(t.encode("\u{4}", false).unwrap(), Vec::<u32>::new());
}

#[test]
fn decoding_maps_tokens_back_through_the_byte_alphabet() {
    let t = toy::tokenizer();
    let text = "hello   world\n\tñ 12 aaaaa";
    let ids = t.encode(text, false).unwrap();
    assert_eq!(t.decode(&ids, false).unwrap(), text);
    assert_eq!(
        t.token_to_piece(toy::id(&t, "Ġworld"), false).unwrap(),
        b" world"
    );
}

#[test]
fn control_tokens_decode_to_their_text_only_when_asked() {
    let t = toy::tokenizer();
    let end = toy::id(&t, "<|im_end|>");
    let unk = toy::id(&t, "<unk>");
    assert_eq!(
        t.decode(&[104, end, unk], true).unwrap(),
        "h<|im_end|><unk>"
    );
    assert_eq!(t.decode(&[104, end, unk], false).unwrap(), "h");
    assert_eq!(t.token_to_piece(end, false).unwrap(), b"");
}

#[test]
fn byte_tokens_decode_to_their_byte_and_unused_ones_to_nothing() {
    let t = toy::tokenizer();
    let ids = ids_of(&t, &["<0x41>", "<unused0>", "<undefined>"]);
    assert_eq!(t.token_to_piece(ids[0], false).unwrap(), b"A");
    assert_eq!(t.decode(&ids, true).unwrap(), "A");
}

#[test]
fn invalid_utf8_decodes_to_a_replacement_character_where_it_occurs() {
    let t = toy::tokenizer();
    // 0x80 alone continues nothing; 0xE2 0x82 is the start of '€' cut short by 'a'.
    assert_eq!(t.decode(&[104, 0x80, 105], false).unwrap(), "h\u{FFFD}i");
    assert_eq!(t.decode(&[0xE2, 0x82, 97], false).unwrap(), "\u{FFFD}a");
    assert_eq!(t.decode(&[0xE2, 0x82], false).unwrap(), "\u{FFFD}");
}

#[test]
fn streaming_holds_back_an_emoji_split_across_byte_tokens() {
    let t = toy::tokenizer();
    let ids = t.encode("a😀b", false).unwrap();
    assert_eq!(ids, [97, 0xF0, 0x9F, 0x98, 0x80, 98]);
    let mut decoder = t.decoder(false);
    let out: Vec<String> = ids
        .iter()
        .map(|&id| decoder.push(id).unwrap().to_string())
        .collect();
    assert_eq!(out, ["a", "", "", "", "😀", "b"]);
    assert_eq!(decoder.finish(), "");
}

#[test]
fn streaming_replaces_invalid_bytes_at_once_and_an_unfinished_character_at_finish() {
    let t = toy::tokenizer();
    let mut decoder = t.decoder(false);
    assert_eq!(decoder.push(0x80).unwrap(), "\u{FFFD}");
    assert_eq!(decoder.push(0xF0).unwrap(), "");
    assert_eq!(decoder.push(0x9F).unwrap(), "");
    // 'a' cannot continue the character: its two bytes are one U+FFFD, then the 'a'.
    assert_eq!(decoder.push(97).unwrap(), "\u{FFFD}a");
    assert_eq!(decoder.push(0xE2).unwrap(), "");
    assert_eq!(decoder.finish(), "\u{FFFD}");
    // Finished, it starts afresh.
    assert_eq!(decoder.push(98).unwrap(), "b");
    assert_eq!(decoder.finish(), "");
}

#[test]
fn streaming_gives_what_decode_gives() {
    let t = toy::tokenizer();
    let ids: Vec<u32> = vec![
        0xF0, 0x9F, 104, 0x80, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98,
    ];
    let mut decoder = t.decoder(true);
    let mut streamed = String::new();
    for &id in &ids {
        streamed.push_str(decoder.push(id).unwrap());
    }
    streamed.push_str(decoder.finish());
    assert_eq!(streamed, t.decode(&ids, true).unwrap());
    assert_eq!(streamed, "\u{FFFD}h\u{FFFD}é€\u{FFFD}");
}

mod errors {
    use super::*;

    fn refused(parts: TokenizerParts) -> TokenizerError {
        Tokenizer::from_parts(parts).expect_err("the vocabulary is refused")
    }

    #[test]
    fn an_unknown_model_kind_is_named() {
        let mut parts = toy::parts("gpt-2");
        parts.model = "llama".into();
        let e = refused(parts);
        assert_eq!(
            e,
            TokenizerError::UnsupportedModel {
                model: "llama".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.model = \"llama\": only \"gpt2\" (byte-level BPE) is supported"
        );
    }

    #[test]
    fn an_unknown_pre_tokenizer_is_named() {
        let e = refused(toy::parts("llama3"));
        assert_eq!(
            e,
            TokenizerError::UnsupportedPreTokenizer {
                pre: "llama3".into()
            }
        );
        assert!(e.to_string().starts_with(
            "tokenizer.ggml.pre = \"llama3\": not a pre-tokenizer this crate knows (gpt-2, "
        ));
    }

    #[test]
    fn token_types_must_match_the_tokens() {
        let mut parts = toy::parts("gpt-2");
        parts.token_types.pop();
        let e = refused(parts);
        assert_eq!(
            e,
            TokenizerError::TokenTypeCount {
                tokens: 279,
                types: 278
            }
        );
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.token_type has 278 entries for 279 tokens"
        );
    }

    #[test]
    fn no_token_types_means_every_token_is_normal() {
        let mut parts = TokenizerParts::bytes_only("gpt-2");
        parts.token_types.clear();
        let t = Tokenizer::from_parts(parts).unwrap();
        assert_eq!(t.token_kind(0), Some(TokenKind::Normal));
    }

    #[test]
    fn an_unknown_token_type_is_named() {
        let mut parts = toy::parts("gpt-2");
        parts.token_types[5] = 7;
        let e = refused(parts);
        assert_eq!(e, TokenizerError::UnknownTokenType { id: 5, value: 7 });
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.token_type[5] = 7: not a token type (0 to 6)"
        );
    }

    #[test]
    fn a_repeated_token_is_named_with_both_ids() {
        let mut parts = toy::parts("gpt-2");
        parts.tokens.push("a".into());
        parts.token_types.push(1);
        let e = refused(parts);
        assert_eq!(
            e,
            TokenizerError::DuplicateToken {
                text: "a".into(),
                first: 97,
                second: 279
            }
        );
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.tokens[279] = \"a\" repeats tokens[97]"
        );
    }

    #[test]
    fn a_normal_token_outside_the_byte_alphabet_is_refused() {
        let mut parts = toy::parts("gpt-2");
        parts.tokens.push("€".into());
        parts.token_types.push(1);
        assert_eq!(
            refused(parts),
            TokenizerError::NotByteLevel {
                id: 279,
                text: "€".into()
            }
        );
    }

    #[test]
    fn a_byte_token_must_be_written_0xhh() {
        for text in ["<0xZZ>", "<0x4>", "<0x+1>", "0x41"] {
            let mut parts = toy::parts("gpt-2");
            parts.tokens.push(text.into());
            parts.token_types.push(6);
            assert_eq!(
                refused(parts),
                TokenizerError::BadByteToken {
                    id: 279,
                    text: text.into()
                },
                "{text}"
            );
        }
    }

    #[test]
    fn a_merge_without_a_space_is_named_with_its_index() {
        let mut parts = toy::parts("gpt-2");
        parts.merges.insert(3, "ab".into());
        let e = refused(parts);
        assert_eq!(
            e,
            TokenizerError::MergeWithoutSpace {
                index: 3,
                merge: "ab".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.merges[3] = \"ab\": not two tokens separated by a space"
        );
        let mut parts = toy::parts("gpt-2");
        parts.merges.push("a ".into());
        assert!(matches!(
            refused(parts),
            TokenizerError::MergeWithoutSpace { index: 15, .. }
        ));
    }

    #[test]
    fn a_merge_naming_no_token_is_named_with_its_index_and_the_token() {
        let mut parts = toy::parts("gpt-2");
        parts.merges.push("a zz".into());
        let e = refused(parts);
        assert_eq!(
            e,
            TokenizerError::MergeUnknownToken {
                index: 15,
                merge: "a zz".into(),
                token: "zz".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.merges[15] = \"a zz\": \"zz\" is not a token"
        );
        // Both sides exist, but what they join into does not.
        let mut parts = toy::parts("gpt-2");
        parts.merges.push("x y".into());
        assert_eq!(
            refused(parts),
            TokenizerError::MergeUnknownToken {
                index: 15,
                merge: "x y".into(),
                token: "xy".into()
            }
        );
    }

    #[test]
    fn a_special_id_past_the_vocabulary_is_named() {
        let mut parts = toy::parts("gpt-2");
        parts.eos = Some(279);
        let e = refused(parts);
        assert_eq!(
            e,
            TokenizerError::SpecialIdOutOfRange {
                field: "tokenizer.ggml.eos_token_id",
                id: 279,
                vocab_len: 279
            }
        );
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.eos_token_id = 279: past the 279 tokens"
        );
    }

    #[test]
    fn add_bos_or_add_eos_without_the_token_is_refused() {
        let mut parts = toy::parts("gpt-2");
        parts.add_bos = true;
        let e = refused(parts);
        assert_eq!(
            e.to_string(),
            "tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id is not set"
        );
        let mut parts = toy::parts("gpt-2");
        parts.add_eos = true;
        assert_eq!(
            refused(parts),
            TokenizerError::MissingSpecialToken {
                flag: "tokenizer.ggml.add_eos_token",
                field: "tokenizer.ggml.eos_token_id"
            }
        );
    }

    #[test]
    fn decoding_an_id_past_the_vocabulary_is_an_error() {
        let t = toy::tokenizer();
        let e = TokenizerError::IdOutOfRange {
            id: 279,
            vocab_len: 279,
        };
        assert_eq!(t.decode(&[97, 279], false), Err(e.clone()));
        assert_eq!(
            t.token_to_piece(u32::MAX, true).unwrap_err().to_string(),
            "token id 4294967295 is past the 279 tokens"
        );
        let mut decoder = t.decoder(false);
        assert_eq!(decoder.push(0xF0).unwrap(), "");
        assert_eq!(decoder.push(279), Err(e));
        // The failed push left the held-back byte in place.
        assert_eq!(decoder.finish(), "\u{FFFD}");
    }

    #[test]
    fn the_size_errors_name_their_counts() {
        // Vocabularies this large cannot be built in a test; their messages can.
        assert_eq!(
            TokenizerError::TooManyTokens { count: 1 << 31 }.to_string(),
            "tokenizer.ggml.tokens has 2147483648 tokens; ids go up to 2^31 - 1"
        );
        assert_eq!(
            TokenizerError::TooManyMerges { count: 1 << 32 }.to_string(),
            "tokenizer.ggml.merges has 4294967296 merges; ranks go up to 2^32 - 1"
        );
        assert_eq!(
            TokenizerError::OutOfMemory {
                what: "token ids",
                len: 7
            }
            .to_string(),
            "cannot allocate 7 elements for token ids"
        );
    }
}

mod from_gguf {
    use super::gguf_writer::{GgufWriter, Val, I32, STRING};
    use super::*;

    /// The toy vocabulary as a GGUF file's `tokenizer.ggml.*` metadata.
    fn toy_file(skip: &str) -> GgufWriter {
        let parts = toy::parts("smollm");
        let strings = |items: &[String]| {
            Val::Array(STRING, items.iter().map(|s| Val::Str(s.clone())).collect())
        };
        let mut w = GgufWriter::new(3);
        for (key, value) in [
            ("tokenizer.ggml.model", Val::Str("gpt2".into())),
            ("tokenizer.ggml.pre", Val::Str("smollm".into())),
            ("tokenizer.ggml.tokens", strings(&parts.tokens)),
            (
                "tokenizer.ggml.token_type",
                Val::Array(
                    I32,
                    parts.token_types.iter().map(|&t| Val::I32(t)).collect(),
                ),
            ),
            ("tokenizer.ggml.merges", strings(&parts.merges)),
            ("tokenizer.ggml.bos_token_id", Val::U32(271)),
            ("tokenizer.ggml.eos_token_id", Val::U32(272)),
            ("tokenizer.ggml.add_bos_token", Val::Bool(true)),
        ] {
            if key != skip {
                w = w.kv(key, value);
            }
        }
        w
    }

    #[test]
    fn a_gguf_files_tokenizer_metadata_builds_the_tokenizer() {
        let bytes = toy_file("").to_bytes();
        let t = Tokenizer::from_gguf(&Gguf::parse(&bytes).unwrap()).unwrap();
        assert_eq!(t.vocab_len(), 279);
        assert_eq!(
            (t.bos(), t.eos(), t.add_bos(), t.add_eos()),
            (Some(271), Some(272), true, false)
        );
        assert_eq!(t.pre_tokenizer(), "smollm");
        assert_eq!(t.encode("hello", false).unwrap(), [271, 259]);
    }

    #[test]
    fn the_optional_keys_may_be_absent() {
        let w = toy_file("tokenizer.ggml.add_bos_token");
        let parts = TokenizerParts::from_gguf(&Gguf::parse(&w.to_bytes()).unwrap()).unwrap();
        assert!(!parts.add_bos);
        let w = toy_file("tokenizer.ggml.token_type");
        let parts = TokenizerParts::from_gguf(&Gguf::parse(&w.to_bytes()).unwrap()).unwrap();
        assert!(parts.token_types.is_empty());
        assert_eq!(
            (parts.bos, parts.tokens.len(), parts.merges.len()),
            (Some(271), 279, 15)
        );
    }

    #[test]
    fn a_missing_required_key_is_named() {
        let w = toy_file("tokenizer.ggml.merges");
        let e = Tokenizer::from_gguf(&Gguf::parse(&w.to_bytes()).unwrap()).unwrap_err();
        assert_eq!(
            e,
            TokenizerError::Metadata {
                key: "tokenizer.ggml.merges",
                message: "metadata key tokenizer.ggml.merges is missing".into()
            }
        );
    }

    #[test]
    fn a_key_of_another_type_is_named_with_both_types() {
        let w =
            toy_file("tokenizer.ggml.bos_token_id").kv("tokenizer.ggml.bos_token_id", Val::I32(1));
        let e = Tokenizer::from_gguf(&Gguf::parse(&w.to_bytes()).unwrap()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "metadata key tokenizer.ggml.bos_token_id: expected u32, found i32"
        );
    }

    #[test]
    fn no_pre_tokenizer_is_llama_cpps_default_which_is_refused() {
        let w = toy_file("tokenizer.ggml.pre");
        let e = Tokenizer::from_gguf(&Gguf::parse(&w.to_bytes()).unwrap()).unwrap_err();
        assert_eq!(
            e,
            TokenizerError::UnsupportedPreTokenizer {
                pre: "default".into()
            }
        );
    }
}

mod smollm2 {
    use std::sync::OnceLock;

    use skainet_schedule::gguf::GgufFile;

    use super::json::Json;
    use super::*;

    use super::model_file::model_path;

    /// SmolLM2's tokenizer, read once from the model file for every test of this binary.
    fn tokenizer() -> &'static Tokenizer {
        static TOKENIZER: OnceLock<Tokenizer> = OnceLock::new();
        TOKENIZER.get_or_init(|| {
            let path = model_path();
            if !path.is_file() {
                panic!(
                    "the smollm2 tests need the model file {}: run scripts/fetch_model.sh (it \
                     downloads and verifies it, and prints its path), or set SKAINET_MODEL to \
                     the file\n(to leave these tests out on purpose, run `cargo test --features \
                     model --test tokenizer -- --skip smollm2`)",
                    path.display()
                );
            }
            let file = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
            Tokenizer::from_gguf(file.gguf()).unwrap_or_else(|e| panic!("{e}"))
        })
    }

    struct Case {
        text: String,
        ids: Vec<u32>,
    }

    /// The fixtures: llama.cpp's ids with special tokens parsed (its default) and without.
    const FIXTURES: [&str; 2] = [
        "tokenize_expected.json",
        "tokenize_expected_no_special.json",
    ];

    /// The cases of `tests/fixtures/NAME` and whether its command parsed special tokens
    /// (`llama-tokenize` does unless told `--no-parse-special`).
    fn fixture(name: &str) -> (Vec<Case>, bool) {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let doc = Json::parse(&std::fs::read_to_string(&path).unwrap());
        let command = doc
            .get("command")
            .and_then(Json::as_str)
            .expect("the fixture's command");
        let parse_special = !command.contains("--no-parse-special");
        let cases = doc
            .get("cases")
            .and_then(Json::as_array)
            .expect("the fixture's cases")
            .iter()
            .map(|case| Case {
                text: case.get("text").and_then(Json::as_str).unwrap().to_string(),
                ids: case
                    .get("ids")
                    .and_then(Json::as_array)
                    .unwrap()
                    .iter()
                    .map(|id| id.as_u32().unwrap())
                    .collect(),
            })
            .collect();
        (cases, parse_special)
    }

    #[test]
    fn smollm2_vocabulary_reads_from_the_model_file() {
        let t = tokenizer();
        assert_eq!(t.vocab_len(), 49152);
        assert_eq!(
            (t.bos(), t.eos(), t.add_bos(), t.add_eos()),
            (Some(1), Some(2), false, false)
        );
        assert_eq!(t.pre_tokenizer(), "smollm");
        assert_eq!(t.token_id("<|im_start|>"), Some(1));
        assert_eq!(t.token_id("<|im_end|>"), Some(2));
        assert_eq!(t.token_kind(16), Some(TokenKind::Control)); // <empty_output>
        assert_eq!(t.token_kind(17), Some(TokenKind::Normal));
        assert_eq!(t.token_text(30), Some("."));
    }

    #[test]
    fn smollm2_ids_equal_llama_cpps_for_every_case() {
        let t = tokenizer();
        let mut wrong = Vec::new();
        for name in FIXTURES {
            let (cases, parse_special) = fixture(name);
            assert_eq!(cases.len(), 84, "{name}");
            for case in &cases {
                let ids = t.encode(&case.text, parse_special).unwrap();
                if ids != case.ids {
                    wrong.push(format!(
                        "{name} {:?}: llama.cpp {:?}, here {:?}",
                        case.text, case.ids, ids
                    ));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "{} cases differ:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    }

    #[test]
    fn smollm2_decode_of_encode_is_the_text_for_every_case() {
        let t = tokenizer();
        for name in FIXTURES {
            let (cases, parse_special) = fixture(name);
            for case in &cases {
                let ids = t.encode(&case.text, parse_special).unwrap();
                // U+0004 has no token in SmolLM2's vocabulary: llama.cpp drops it, and so
                // does the encode; every other character comes back.
                let expected = case.text.replace('\u{4}', "");
                assert_eq!(t.decode(&ids, true).unwrap(), expected, "{name}");
                // The same text one id at a time.
                let mut decoder = t.decoder(true);
                let mut streamed = String::new();
                for &id in &ids {
                    streamed.push_str(decoder.push(id).unwrap());
                }
                streamed.push_str(decoder.finish());
                assert_eq!(streamed, expected, "{name}");
            }
        }
    }

    #[test]
    fn smollm2_streaming_holds_back_an_emoji_split_across_tokens() {
        let t = tokenizer();
        let ids = t.encode("Hi 🤗!", false).unwrap();
        let pieces: Vec<&[u8]> = ids
            .iter()
            .map(|&id| t.token_to_piece(id, false).unwrap())
            .collect();
        // The emoji's four bytes are not one token.
        assert!(
            pieces.iter().all(|p| !p.ends_with("🤗".as_bytes())),
            "{pieces:?}"
        );
        let mut decoder = t.decoder(false);
        let out: Vec<String> = ids
            .iter()
            .map(|&id| decoder.push(id).unwrap().to_string())
            .collect();
        assert_eq!(out.concat(), "Hi 🤗!");
        assert!(
            out.iter().any(String::is_empty),
            "{out:?}: a part of the emoji was held back"
        );
        assert!(out.iter().any(|s| s.contains('🤗')));
        assert_eq!(decoder.finish(), "");
    }

    #[test]
    fn smollm2_a_chat_turn_encodes_to_its_control_tokens() {
        let t = tokenizer();
        let ids = t.encode("<|im_start|>user\nHi<|im_end|>\n", true).unwrap();
        assert_eq!(ids.first(), Some(&1));
        assert_eq!(ids.iter().filter(|&&id| id == 2).count(), 1);
        assert_eq!(t.decode(&ids, false).unwrap(), "user\nHi\n");
        assert_eq!(
            t.decode(&ids, true).unwrap(),
            "<|im_start|>user\nHi<|im_end|>\n"
        );
    }
}
