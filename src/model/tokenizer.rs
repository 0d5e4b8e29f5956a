//! [`Tokenizer`]: byte-level BPE (GPT-2 style) from a GGUF file's `tokenizer.ggml.*` data, with
//! the ids llama.cpp's tokenizer gives on the same file. The steps are in its rustdoc; the
//! pre-tokenizer, the merge loop, the byte alphabet and the streaming decoder have a file each.

mod bpe;
mod byte_alphabet;
mod error;
mod pre;
mod stream;

pub use error::TokenizerError;
pub use stream::TokenDecoder;

use alloc::string::String;
use alloc::vec::Vec;

use hashbrown::HashMap;

use crate::gguf::{Gguf, GgufError};
use bpe::{Bpe, Merge, Merges};
use pre::PreTokenizer;

/// What kind of token an id is: GGUF's `tokenizer.ggml.token_type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TokenKind {
    /// 0: no type given; decodes to nothing.
    Undefined,
    /// 1: an ordinary token, its text in the byte alphabet.
    Normal,
    /// 2: the unknown token; special (parsed and decoded only when asked).
    Unknown,
    /// 3: a control token (`<|im_start|>`, `<|endoftext|>`); special.
    Control,
    /// 4: a token added by the model's authors, its text as is; parsed and decoded always.
    UserDefined,
    /// 5: an unused slot; decodes to nothing.
    Unused,
    /// 6: one byte, written `<0xHH>`.
    Byte,
}

impl TokenKind {
    /// The kind of GGUF token type `value`, or `None` for a value GGUF does not define.
    ///
    /// ```
    /// use skainet_schedule::model::TokenKind;
    ///
    /// assert_eq!(TokenKind::from_gguf(3), Some(TokenKind::Control));
    /// assert_eq!(TokenKind::from_gguf(7), None);
    /// ```
    pub fn from_gguf(value: i32) -> Option<TokenKind> {
        Some(match value {
            0 => TokenKind::Undefined,
            1 => TokenKind::Normal,
            2 => TokenKind::Unknown,
            3 => TokenKind::Control,
            4 => TokenKind::UserDefined,
            5 => TokenKind::Unused,
            6 => TokenKind::Byte,
            _ => return None,
        })
    }

    /// Whether text with this token's text becomes the token before the pre-tokenizer runs
    /// (control and unknown tokens only when the caller asks).
    fn is_special(self) -> bool {
        matches!(
            self,
            TokenKind::Control | TokenKind::Unknown | TokenKind::UserDefined
        )
    }

    /// Whether the token is parsed and decoded only when the caller asks for special tokens.
    fn needs_special(self) -> bool {
        matches!(self, TokenKind::Control | TokenKind::Unknown)
    }
}

/// Everything a [`Tokenizer`] is built from: the `tokenizer.ggml.*` values of a GGUF file.
///
/// ```
/// use skainet_schedule::model::{Tokenizer, TokenizerParts};
///
/// # fn main() -> Result<(), skainet_schedule::model::TokenizerError> {
/// // The 256 byte tokens, then one merge: "h" + "i" = "hi".
/// let mut parts = TokenizerParts::bytes_only("gpt-2");
/// parts.tokens.push("hi".into());
/// parts.token_types.push(1);
/// parts.merges.push("h i".into());
///
/// let tokenizer = Tokenizer::from_parts(parts)?;
/// let hi = tokenizer.token_id("hi").unwrap();
/// assert_eq!(tokenizer.encode("hi", false)?, [hi]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenizerParts {
    /// `tokenizer.ggml.model`: only `gpt2` is supported.
    pub model: String,
    /// `tokenizer.ggml.pre`: which expressions split text into words. Supported: `smollm`
    /// (with `starcoder`, `refact`, `command-r`, `codeshell`, `exaone`, `minerva-7b`, which
    /// llama.cpp splits alike) and `gpt-2` (with `phi-2`, `mpt`, `olmo`, `jais`).
    pub pre: String,
    /// `tokenizer.ggml.tokens`: each token's text; the index is the id.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`: one per token (see [`TokenKind::from_gguf`]), or empty
    /// when the file has none (every token is then normal).
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: `"left right"`, the index is the rank.
    pub merges: Vec<String>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` (false when absent, as llama.cpp has it for `gpt2`
    /// models of these pre-tokenizers).
    pub add_bos: bool,
    /// `tokenizer.ggml.add_eos_token` (false when absent).
    pub add_eos: bool,
}

impl TokenizerParts {
    /// The smallest vocabulary [`Tokenizer::from_parts`] accepts: the 256 byte tokens (id =
    /// byte), no merges, no special tokens, pre-tokenizer `pre`. Tests and examples start
    /// from it and push tokens and merges.
    pub fn bytes_only(pre: &str) -> TokenizerParts {
        TokenizerParts {
            model: "gpt2".into(),
            pre: pre.into(),
            tokens: (0..=255u8)
                .map(|b| String::from(byte_alphabet::byte_to_char(b)))
                .collect(),
            token_types: alloc::vec![1; 256],
            merges: Vec::new(),
            bos: None,
            eos: None,
            add_bos: false,
            add_eos: false,
        }
    }
}

impl TokenizerParts {
    /// Reads the `tokenizer.ggml.*` values of a GGUF file: `model`, `tokens` and `merges` are
    /// required; `pre` (absent: llama.cpp's `default`, which this crate does not implement),
    /// `token_type`, `bos_token_id`, `eos_token_id`, `add_bos_token` and `add_eos_token` are
    /// optional. An absent id is `None` (where llama.cpp would fall back to token 11 for a
    /// `gpt2` vocabulary), an absent flag false.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::Metadata`] naming a required key that is missing, or a key whose
    /// value has another type (`tokenizer.ggml.token_type` must be an array of `i32`, the ids
    /// `u32`, the flags `bool`).
    pub fn from_gguf(gguf: &Gguf<'_>) -> Result<TokenizerParts, TokenizerError> {
        let metadata = |key: &'static str| {
            move |e: GgufError| TokenizerError::Metadata {
                key,
                message: e.to_string(),
            }
        };
        let present = |key: &str| gguf.get(key).is_some();
        let strings = |key: &'static str| -> Result<Vec<String>, TokenizerError> {
            let items = gguf.get_strings(key).map_err(metadata(key))?;
            let mut out = Vec::new();
            reserve(&mut out, items.len(), key)?;
            out.extend(items.map(String::from));
            Ok(out)
        };
        let optional_id = |key: &'static str| -> Result<Option<u32>, TokenizerError> {
            match present(key) {
                true => gguf.get_u32(key).map(Some).map_err(metadata(key)),
                false => Ok(None),
            }
        };
        let flag = |key: &'static str| -> Result<bool, TokenizerError> {
            match present(key) {
                true => gguf.get_bool(key).map_err(metadata(key)),
                false => Ok(false),
            }
        };

        const MODEL: &str = "tokenizer.ggml.model";
        const PRE: &str = "tokenizer.ggml.pre";
        const TYPES: &str = "tokenizer.ggml.token_type";
        let model = gguf.get_str(MODEL).map_err(metadata(MODEL))?.into();
        let pre = match present(PRE) {
            true => gguf.get_str(PRE).map_err(metadata(PRE))?.into(),
            false => "default".into(),
        };
        let token_types = match present(TYPES) {
            true => {
                let types = gguf.get_scalars::<i32>(TYPES).map_err(metadata(TYPES))?;
                let mut out = Vec::new();
                reserve(&mut out, types.len(), TYPES)?;
                out.extend(types);
                out
            }
            false => Vec::new(),
        };
        Ok(TokenizerParts {
            model,
            pre,
            tokens: strings("tokenizer.ggml.tokens")?,
            token_types,
            merges: strings("tokenizer.ggml.merges")?,
            bos: optional_id("tokenizer.ggml.bos_token_id")?,
            eos: optional_id("tokenizer.ggml.eos_token_id")?,
            add_bos: flag("tokenizer.ggml.add_bos_token")?,
            add_eos: flag("tokenizer.ggml.add_eos_token")?,
        })
    }
}

/// A byte-level BPE tokenizer: text to token ids and back, as llama.cpp does it for the same
/// vocabulary.
///
/// Encoding, as llama.cpp does it for `tokenizer.ggml.model` = `gpt2`:
///
/// 1. **Special tokens.** Every occurrence of a control, unknown or user-defined token's text
///    becomes that token, longest texts first; control and unknown tokens only when the caller
///    asks (`parse_special`), user-defined ones always.
/// 2. **Pre-tokenizer.** The text between them is cut into words by the expressions
///    `tokenizer.ggml.pre` names (for `smollm`: each digit alone, then GPT-2's pattern).
/// 3. **Bytes.** Each byte of a word is the token of its character in GPT-2's byte alphabet.
///    A byte whose character is no token is dropped, as llama.cpp drops it (SmolLM2's
///    vocabulary lacks 21: the control characters U+0004, U+0006, U+0013, U+0014, U+0016 and
///    U+001D, the lead bytes 0xF1 and 0xF2 of planes 4 to 11, and 13 bytes UTF-8 never has).
/// 4. **Merges.** Adjacent tokens merge by `tokenizer.ggml.merges`, lowest index first and,
///    between equal ones, leftmost first, until no pair of the word has a merge.
///
/// A BOS token goes first when the file asks (`tokenizer.ggml.add_bos_token`; SmolLM2 says
/// false), an EOS last when `add_eos_token` does.
///
/// Decoding maps each token back to bytes (a normal token through the byte alphabet, a
/// control token to its text when asked, else to nothing) and the bytes to UTF-8 text, with
/// U+FFFD for each invalid sequence, where it occurs. [`TokenDecoder`] does the same one id at
/// a time and holds back a character split across tokens.
///
/// Not reproduced from llama.cpp: its overrides by model name (the `lstrip`/`rstrip` flags it
/// gives some models' special tokens, the types it forces on tokens by their text) and the
/// space clean-up of its `detokenize`; decoding here is the pieces concatenated, which is what
/// llama.cpp's `token_to_piece` streams. Where llama.cpp keeps going on a broken vocabulary (a
/// merge whose sides or result are no token, a normal token outside the byte alphabet), this
/// tokenizer refuses it with an error that names the field and the value.
///
/// ```
/// use skainet_schedule::model::{Tokenizer, TokenizerParts};
///
/// # fn main() -> Result<(), skainet_schedule::model::TokenizerError> {
/// let mut parts = TokenizerParts::bytes_only("smollm");
/// parts.tokens.push("<|im_end|>".into());
/// parts.token_types.push(3); // control
/// let tokenizer = Tokenizer::from_parts(parts)?;
///
/// // Parsed as one token only when asked.
/// assert_eq!(tokenizer.encode("<|im_end|>", true)?, [256]);
/// assert_eq!(tokenizer.encode("<|im_end|>", false)?.len(), 10);
/// assert_eq!(tokenizer.decode(&[b'o' as u32, b'k' as u32, 256], true)?, "ok<|im_end|>");
/// assert_eq!(tokenizer.decode(&[b'o' as u32, b'k' as u32, 256], false)?, "ok");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Tokenizer {
    pre: PreTokenizer,
    texts: Vec<String>,
    kinds: Vec<TokenKind>,
    ids: HashMap<String, u32>,
    /// The token of each byte's character, [`bpe::NO_TOKEN`] where it has none.
    byte_ids: [u32; 256],
    merges: Merges,
    /// Control, unknown and user-defined tokens, longest text first (ties by id).
    specials: Vec<u32>,
    /// Every token's piece, one after another; token `i`'s is `piece_ends[i - 1]..piece_ends[i]`.
    piece_bytes: Vec<u8>,
    piece_ends: Vec<usize>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
}

/// A piece of text still to encode, or a special token already found in it.
#[derive(Debug, Clone)]
enum Fragment {
    Text(core::ops::Range<usize>),
    Token(u32),
}

impl Tokenizer {
    /// Builds a tokenizer from a vocabulary, checking every part of it.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::UnsupportedModel`] or [`UnsupportedPreTokenizer`] naming a model kind
    /// or pre-tokenizer this crate does not implement; [`TokenTypeCount`] or
    /// [`UnknownTokenType`] for bad types; [`DuplicateToken`], [`NotByteLevel`] or
    /// [`BadByteToken`] for bad token texts; [`MergeWithoutSpace`] or
    /// [`MergeUnknownToken`] naming the merge and its index; [`SpecialIdOutOfRange`] or
    /// [`MissingSpecialToken`] for BOS/EOS; [`TooManyTokens`] or [`TooManyMerges`] for a
    /// vocabulary ids or ranks cannot number; [`TokenizerError::OutOfMemory`].
    ///
    /// [`UnsupportedPreTokenizer`]: TokenizerError::UnsupportedPreTokenizer
    /// [`TokenTypeCount`]: TokenizerError::TokenTypeCount
    /// [`UnknownTokenType`]: TokenizerError::UnknownTokenType
    /// [`DuplicateToken`]: TokenizerError::DuplicateToken
    /// [`NotByteLevel`]: TokenizerError::NotByteLevel
    /// [`BadByteToken`]: TokenizerError::BadByteToken
    /// [`MergeWithoutSpace`]: TokenizerError::MergeWithoutSpace
    /// [`MergeUnknownToken`]: TokenizerError::MergeUnknownToken
    /// [`SpecialIdOutOfRange`]: TokenizerError::SpecialIdOutOfRange
    /// [`MissingSpecialToken`]: TokenizerError::MissingSpecialToken
    /// [`TooManyTokens`]: TokenizerError::TooManyTokens
    /// [`TooManyMerges`]: TokenizerError::TooManyMerges
    pub fn from_parts(parts: TokenizerParts) -> Result<Tokenizer, TokenizerError> {
        let TokenizerParts {
            model,
            pre,
            tokens,
            token_types,
            merges: merge_texts,
            bos,
            eos,
            add_bos,
            add_eos,
        } = parts;
        if model != "gpt2" {
            return Err(TokenizerError::UnsupportedModel { model });
        }
        let Some(pre) = PreTokenizer::named(&pre) else {
            return Err(TokenizerError::UnsupportedPreTokenizer { pre });
        };
        let vocab_len = tokens.len();
        if i32::try_from(vocab_len).is_err() {
            return Err(TokenizerError::TooManyTokens { count: vocab_len });
        }
        if !token_types.is_empty() && token_types.len() != vocab_len {
            return Err(TokenizerError::TokenTypeCount {
                tokens: vocab_len,
                types: token_types.len(),
            });
        }

        let mut kinds = Vec::new();
        reserve(&mut kinds, vocab_len, "token kinds")?;
        let mut ids: HashMap<String, u32> = HashMap::new();
        ids.try_reserve(vocab_len)
            .map_err(|_| TokenizerError::OutOfMemory {
                what: "the token index",
                len: vocab_len,
            })?;
        let mut piece_bytes = Vec::new();
        let mut piece_ends = Vec::new();
        reserve(&mut piece_ends, vocab_len, "token pieces")?;
        for (i, text) in tokens.iter().enumerate() {
            // In range: the vocabulary length fits an i32.
            let id = i as u32;
            let kind = match token_types.get(i) {
                None => TokenKind::Normal,
                Some(&value) => TokenKind::from_gguf(value)
                    .ok_or(TokenizerError::UnknownTokenType { id, value })?,
            };
            kinds.push(kind);
            if !text.is_empty() {
                if let Some(&first) = ids.get(text.as_str()) {
                    return Err(TokenizerError::DuplicateToken {
                        text: text.clone(),
                        first,
                        second: id,
                    });
                }
                ids.insert(text.clone(), id);
            }
            append_piece(&mut piece_bytes, id, text, kind)?;
            piece_ends.push(piece_bytes.len());
        }

        // A byte whose character is no token (SmolLM2 has none for 21 bytes, among them
        // U+0004) stays a lone symbol no merge names, and encodes to nothing, as in llama.cpp.
        let mut byte_ids = [bpe::NO_TOKEN; 256];
        for (b, slot) in (0..=255u8).zip(byte_ids.iter_mut()) {
            let mut buf = [0u8; 4];
            let symbol = byte_alphabet::byte_to_char(b).encode_utf8(&mut buf);
            if let Some(&id) = ids.get(symbol as &str) {
                *slot = id;
            }
        }

        let mut merges = Merges::new();
        merges
            .try_reserve(merge_texts.len())
            .map_err(|_| TokenizerError::OutOfMemory {
                what: "the merges",
                len: merge_texts.len(),
            })?;
        for (index, merge) in merge_texts.iter().enumerate() {
            let Ok(rank) = u32::try_from(index) else {
                return Err(TokenizerError::TooManyMerges {
                    count: merge_texts.len(),
                });
            };
            let (left, right) =
                split_merge(merge).ok_or_else(|| TokenizerError::MergeWithoutSpace {
                    index,
                    merge: merge.clone(),
                })?;
            let unknown = |token: &str| TokenizerError::MergeUnknownToken {
                index,
                merge: merge.clone(),
                token: token.into(),
            };
            let left_id = *ids.get(left).ok_or_else(|| unknown(left))?;
            let right_id = *ids.get(right).ok_or_else(|| unknown(right))?;
            let joined = [left, right].concat();
            let id = *ids.get(joined.as_str()).ok_or_else(|| unknown(&joined))?;
            // A pair merged twice keeps its first (lowest) rank, as llama.cpp does.
            merges
                .entry((left_id, right_id))
                .or_insert(Merge { rank, id });
        }

        for (field, id) in [
            ("tokenizer.ggml.bos_token_id", bos),
            ("tokenizer.ggml.eos_token_id", eos),
        ] {
            if let Some(id) = id.filter(|&id| usize::try_from(id).map_or(true, |i| i >= vocab_len))
            {
                return Err(TokenizerError::SpecialIdOutOfRange {
                    field,
                    id,
                    vocab_len,
                });
            }
        }
        if add_bos && bos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: "tokenizer.ggml.add_bos_token",
                field: "tokenizer.ggml.bos_token_id",
            });
        }
        if add_eos && eos.is_none() {
            return Err(TokenizerError::MissingSpecialToken {
                flag: "tokenizer.ggml.add_eos_token",
                field: "tokenizer.ggml.eos_token_id",
            });
        }

        let mut specials: Vec<u32> = (0..vocab_len)
            .filter(|&i| kinds[i].is_special() && !tokens[i].is_empty())
            .map(|i| i as u32)
            .collect();
        // Stable: between texts of one length, the lower id is tried first.
        specials.sort_by_key(|&id| core::cmp::Reverse(tokens[id as usize].len()));

        Ok(Tokenizer {
            pre,
            texts: tokens,
            kinds,
            ids,
            byte_ids,
            merges,
            specials,
            piece_bytes,
            piece_ends,
            bos,
            eos,
            add_bos,
            add_eos,
        })
    }

    /// The tokenizer of a GGUF file's vocabulary: [`TokenizerParts::from_gguf`], then
    /// [`Tokenizer::from_parts`].
    ///
    /// ```no_run
    /// use skainet_schedule::gguf::GgufFile;
    /// use skainet_schedule::model::Tokenizer;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let file = GgufFile::open("models/SmolLM2-135M-Instruct.Q4_1.gguf")?;
    /// let tokenizer = Tokenizer::from_gguf(file.gguf())?;
    /// assert_eq!(tokenizer.encode("<|im_start|>", true)?, [1]);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// Those of [`TokenizerParts::from_gguf`] and [`Tokenizer::from_parts`].
    pub fn from_gguf(gguf: &Gguf<'_>) -> Result<Tokenizer, TokenizerError> {
        Tokenizer::from_parts(TokenizerParts::from_gguf(gguf)?)
    }

    /// Encodes `text` into token ids, with BOS first if the vocabulary asks
    /// ([`add_bos`](Tokenizer::add_bos)) and EOS last if it asks. With `parse_special`, the
    /// text of a control token (`<|im_start|>`) is that token; without, it is ordinary text.
    /// User-defined tokens are parsed either way.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::OutOfMemory`] when the ids of a very long text cannot be allocated.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>, TokenizerError> {
        let mut ids = Vec::new();
        if let (true, Some(bos)) = (self.add_bos, self.bos) {
            push(&mut ids, bos, "token ids")?;
        }
        let mut bpe = Bpe::default();
        for fragment in self.special_fragments(text, parse_special)? {
            match fragment {
                Fragment::Token(id) => push(&mut ids, id, "token ids")?,
                Fragment::Text(range) => {
                    self.pre.split(&text[range], &mut |word: &str| {
                        let bytes = word.bytes().map(|b| self.byte_ids[usize::from(b)]);
                        bpe.encode_word(&self.merges, bytes, &mut |id| {
                            push(&mut ids, id, "token ids")
                        })
                    })?;
                }
            }
        }
        if let (true, Some(eos)) = (self.add_eos, self.eos) {
            push(&mut ids, eos, "token ids")?;
        }
        Ok(ids)
    }

    /// Cuts `text` at every special token the call parses: longest texts first, each
    /// occurrence left to right in the text not yet taken.
    fn special_fragments(
        &self,
        text: &str,
        parse_special: bool,
    ) -> Result<Vec<Fragment>, TokenizerError> {
        let mut fragments = Vec::new();
        if text.is_empty() {
            return Ok(fragments);
        }
        push(
            &mut fragments,
            Fragment::Text(0..text.len()),
            "text fragments",
        )?;
        for &id in &self.specials {
            let kind = self.kinds[id as usize];
            if kind.needs_special() && !parse_special {
                continue;
            }
            let needle = self.texts[id as usize].as_str();
            if !fragments.iter().any(|f| match f {
                Fragment::Text(r) => text[r.clone()].contains(needle),
                Fragment::Token(_) => false,
            }) {
                continue;
            }
            let mut cut = Vec::new();
            reserve(&mut cut, fragments.len(), "text fragments")?;
            for fragment in fragments {
                let Fragment::Text(range) = fragment else {
                    push(&mut cut, fragment, "text fragments")?;
                    continue;
                };
                let mut start = range.start;
                while let Some(at) = text[start..range.end].find(needle) {
                    if at > 0 {
                        push(
                            &mut cut,
                            Fragment::Text(start..start + at),
                            "text fragments",
                        )?;
                    }
                    push(&mut cut, Fragment::Token(id), "text fragments")?;
                    start += at + needle.len();
                }
                if start < range.end {
                    push(&mut cut, Fragment::Text(start..range.end), "text fragments")?;
                }
            }
            fragments = cut;
        }
        Ok(fragments)
    }

    /// The bytes token `id` decodes to. A control or unknown token gives its text when
    /// `special` is set and nothing otherwise; an unused or undefined one gives nothing. A
    /// piece may end inside a UTF-8 character (see [`TokenDecoder`]).
    ///
    /// # Errors
    ///
    /// [`TokenizerError::IdOutOfRange`] for an id past the vocabulary.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Result<&[u8], TokenizerError> {
        let found = usize::try_from(id)
            .ok()
            .and_then(|i| Some((i, *self.piece_ends.get(i)?)));
        let Some((i, end)) = found else {
            return Err(TokenizerError::IdOutOfRange {
                id,
                vocab_len: self.vocab_len(),
            });
        };
        if self.kinds[i].needs_special() && !special {
            return Ok(&[]);
        }
        let start = match i.checked_sub(1) {
            Some(prev) => self.piece_ends[prev],
            None => 0,
        };
        Ok(&self.piece_bytes[start..end])
    }

    /// Decodes `ids` into text: their pieces (see [`token_to_piece`](Self::token_to_piece))
    /// concatenated, each invalid UTF-8 sequence replaced by U+FFFD where it occurs.
    ///
    /// # Errors
    ///
    /// [`TokenizerError::IdOutOfRange`] for an id past the vocabulary;
    /// [`TokenizerError::OutOfMemory`] when the text cannot be allocated.
    pub fn decode(&self, ids: &[u32], special: bool) -> Result<String, TokenizerError> {
        let mut bytes: Vec<u8> = Vec::new();
        for &id in ids {
            let piece = self.token_to_piece(id, special)?;
            bytes
                .try_reserve(piece.len())
                .map_err(|_| TokenizerError::OutOfMemory {
                    what: "decoded text",
                    len: bytes.len().saturating_add(piece.len()),
                })?;
            bytes.extend_from_slice(piece);
        }
        Ok(match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }

    /// A streaming decoder over this vocabulary; `special` as in
    /// [`token_to_piece`](Self::token_to_piece).
    pub fn decoder(&self, special: bool) -> TokenDecoder<'_> {
        TokenDecoder::new(self, special)
    }

    /// The number of tokens.
    pub fn vocab_len(&self) -> usize {
        self.texts.len()
    }

    /// The beginning-of-sequence token, if the vocabulary names one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// The end-of-sequence token, if the vocabulary names one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether [`encode`](Self::encode) puts BOS first.
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether [`encode`](Self::encode) puts EOS last.
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// The `tokenizer.ggml.pre` name of the pre-tokenizer.
    pub fn pre_tokenizer(&self) -> &str {
        self.pre.name()
    }

    /// Token `id`'s text as the vocabulary stores it (a normal token's in the byte alphabet:
    /// `Ġthe` for ` the`), or `None` past the vocabulary.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.texts
            .get(usize::try_from(id).ok()?)
            .map(String::as_str)
    }

    /// The token whose stored text is `text`, if there is one.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// Token `id`'s kind, or `None` past the vocabulary.
    pub fn token_kind(&self, id: u32) -> Option<TokenKind> {
        self.kinds.get(usize::try_from(id).ok()?).copied()
    }
}

/// Splits a merge at its first space after the first byte (a side is never empty). The
/// first byte may begin a multi-byte character (`Ġ t`), so the search is over bytes; a space
/// byte is always a whole character, so both sides are whole text.
fn split_merge(merge: &str) -> Option<(&str, &str)> {
    let at = merge.as_bytes().get(1..)?.iter().position(|&b| b == b' ')? + 1;
    let (left, right) = (&merge[..at], &merge[at + 1..]);
    (!right.is_empty()).then_some((left, right))
}

/// Appends the bytes token `id` decodes to.
fn append_piece(
    bytes: &mut Vec<u8>,
    id: u32,
    text: &str,
    kind: TokenKind,
) -> Result<(), TokenizerError> {
    let start = bytes.len();
    let grow = |bytes: &mut Vec<u8>, extra: usize| {
        bytes
            .try_reserve(extra)
            .map_err(|_| TokenizerError::OutOfMemory {
                what: "token pieces",
                len: bytes.len().saturating_add(extra),
            })
    };
    match kind {
        TokenKind::Normal => {
            grow(bytes, text.len())?;
            for c in text.chars() {
                match byte_alphabet::char_to_byte(c) {
                    Some(b) => bytes.push(b),
                    None => {
                        bytes.truncate(start);
                        return Err(TokenizerError::NotByteLevel {
                            id,
                            text: text.into(),
                        });
                    }
                }
            }
        }
        TokenKind::Control | TokenKind::Unknown | TokenKind::UserDefined => {
            grow(bytes, text.len())?;
            bytes.extend_from_slice(text.as_bytes());
        }
        TokenKind::Byte => {
            let byte = text
                .strip_prefix("<0x")
                .and_then(|t| t.strip_suffix('>'))
                .filter(|hex| hex.len() == 2 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| TokenizerError::BadByteToken {
                    id,
                    text: text.into(),
                })?;
            grow(bytes, 1)?;
            bytes.push(byte);
        }
        TokenKind::Undefined | TokenKind::Unused => {}
    }
    Ok(())
}

/// Reserves room for `len` more elements, as an error rather than an abort.
fn reserve<T>(v: &mut Vec<T>, len: usize, what: &'static str) -> Result<(), TokenizerError> {
    v.try_reserve(len).map_err(|_| TokenizerError::OutOfMemory {
        what,
        len: v.len().saturating_add(len),
    })
}

/// Pushes `x`, growing `v` fallibly.
fn push<T>(v: &mut Vec<T>, x: T, what: &'static str) -> Result<(), TokenizerError> {
    if v.len() == v.capacity() {
        reserve(v, v.len().max(16), what)?;
    }
    v.push(x);
    Ok(())
}
