//! [`TokenizerError`]: why a vocabulary was refused or a call failed.

use alloc::string::String;
use core::fmt;

/// Why [`Tokenizer::from_parts`](super::Tokenizer::from_parts) refused a vocabulary, or why an
/// encode or decode failed. Each message names the GGUF field (`tokenizer.ggml.*`) and the
/// offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenizerError {
    /// A `tokenizer.ggml.*` value of a GGUF file is missing or of another type.
    Metadata {
        /// The key.
        key: &'static str,
        /// The GGUF reader's message, which names the key and the types.
        message: String,
    },
    /// `tokenizer.ggml.model` is not `gpt2`, the only model kind this tokenizer implements.
    UnsupportedModel {
        /// The model kind the file names.
        model: String,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not know.
    UnsupportedPreTokenizer {
        /// The name the file gives.
        pre: String,
    },
    /// More tokens than a token id (`i32`, as llama.cpp stores them) can number.
    TooManyTokens {
        /// The number of tokens.
        count: usize,
    },
    /// More merges than a rank (`u32`) can number.
    TooManyMerges {
        /// The number of merges.
        count: usize,
    },
    /// `tokenizer.ggml.token_type` has another length than `tokenizer.ggml.tokens`.
    TokenTypeCount {
        /// The number of tokens.
        tokens: usize,
        /// The number of token types.
        types: usize,
    },
    /// A token type is none of GGUF's (0 undefined to 6 byte).
    UnknownTokenType {
        /// The token.
        id: u32,
        /// Its type value.
        value: i32,
    },
    /// Two tokens have the same text.
    DuplicateToken {
        /// The text.
        text: String,
        /// The first token with it.
        first: u32,
        /// The second.
        second: u32,
    },
    /// A normal token's text has a character outside GPT-2's byte alphabet, so it stands for
    /// no bytes.
    NotByteLevel {
        /// The token.
        id: u32,
        /// Its text.
        text: String,
    },
    /// A byte-type token's text is not `<0xHH>`.
    BadByteToken {
        /// The token.
        id: u32,
        /// Its text.
        text: String,
    },
    /// A merge is not two tokens separated by a space.
    MergeWithoutSpace {
        /// Its index in `tokenizer.ggml.merges` (its rank).
        index: usize,
        /// Its text.
        merge: String,
    },
    /// A merge names a token that does not exist, or joins two tokens into text that is no
    /// token.
    MergeUnknownToken {
        /// Its index in `tokenizer.ggml.merges` (its rank).
        index: usize,
        /// Its text.
        merge: String,
        /// The text that is not a token: one side, or both joined.
        token: String,
    },
    /// A special token id (`bos` or `eos`) is past the vocabulary.
    SpecialIdOutOfRange {
        /// `"tokenizer.ggml.bos_token_id"` or `"tokenizer.ggml.eos_token_id"`.
        field: &'static str,
        /// The id.
        id: u32,
        /// The number of tokens.
        vocab_len: usize,
    },
    /// `add_bos` (or `add_eos`) is set but the file names no such token.
    MissingSpecialToken {
        /// The flag that asks for it (`"tokenizer.ggml.add_bos_token"`, ...).
        flag: &'static str,
        /// The field that should name it.
        field: &'static str,
    },
    /// A token id passed to a decode is past the vocabulary.
    IdOutOfRange {
        /// The id.
        id: u32,
        /// The number of tokens.
        vocab_len: usize,
    },
    /// A buffer sized by the input could not be allocated.
    OutOfMemory {
        /// What it was for.
        what: &'static str,
        /// How many elements it needed.
        len: usize,
    },
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::Metadata { message, .. } => f.write_str(message),
            TokenizerError::UnsupportedModel { model } => write!(
                f,
                "tokenizer.ggml.model = {model:?}: only \"gpt2\" (byte-level BPE) is supported"
            ),
            TokenizerError::UnsupportedPreTokenizer { pre } => {
                write!(
                    f,
                    "tokenizer.ggml.pre = {pre:?}: not a pre-tokenizer this crate knows ("
                )?;
                for (i, name) in super::pre::PreTokenizer::known_names().enumerate() {
                    write!(f, "{}{name}", if i == 0 { "" } else { ", " })?;
                }
                write!(f, ")")
            }
            TokenizerError::TooManyTokens { count } => write!(
                f,
                "tokenizer.ggml.tokens has {count} tokens; ids go up to 2^31 - 1"
            ),
            TokenizerError::TooManyMerges { count } => write!(
                f,
                "tokenizer.ggml.merges has {count} merges; ranks go up to 2^32 - 1"
            ),
            TokenizerError::TokenTypeCount { tokens, types } => write!(
                f,
                "tokenizer.ggml.token_type has {types} entries for {tokens} tokens"
            ),
            TokenizerError::UnknownTokenType { id, value } => write!(
                f,
                "tokenizer.ggml.token_type[{id}] = {value}: not a token type (0 to 6)"
            ),
            TokenizerError::DuplicateToken {
                text,
                first,
                second,
            } => write!(
                f,
                "tokenizer.ggml.tokens[{second}] = {text:?} repeats tokens[{first}]"
            ),
            TokenizerError::NotByteLevel { id, text } => write!(
                f,
                "tokenizer.ggml.tokens[{id}] = {text:?}: a normal token with a character \
                 outside the byte alphabet"
            ),
            TokenizerError::BadByteToken { id, text } => write!(
                f,
                "tokenizer.ggml.tokens[{id}] = {text:?}: a byte token that is not <0xHH>"
            ),
            TokenizerError::MergeWithoutSpace { index, merge } => write!(
                f,
                "tokenizer.ggml.merges[{index}] = {merge:?}: not two tokens separated by a space"
            ),
            TokenizerError::MergeUnknownToken {
                index,
                merge,
                token,
            } => write!(
                f,
                "tokenizer.ggml.merges[{index}] = {merge:?}: {token:?} is not a token"
            ),
            TokenizerError::SpecialIdOutOfRange {
                field,
                id,
                vocab_len,
            } => write!(f, "{field} = {id}: past the {vocab_len} tokens"),
            TokenizerError::MissingSpecialToken { flag, field } => {
                write!(f, "{flag} is true but {field} is not set")
            }
            TokenizerError::IdOutOfRange { id, vocab_len } => {
                write!(f, "token id {id} is past the {vocab_len} tokens")
            }
            TokenizerError::OutOfMemory { what, len } => {
                write!(f, "cannot allocate {len} elements for {what}")
            }
        }
    }
}

impl std::error::Error for TokenizerError {}
