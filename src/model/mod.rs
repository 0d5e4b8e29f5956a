//! The model lane (feature `model`): what reads a model file's vocabulary and turns text into
//! the token ids a model takes, and back.

mod tokenizer;

pub use tokenizer::{TokenDecoder, TokenKind, Tokenizer, TokenizerError, TokenizerParts};
