//! The model lane (feature `model`): what turns text into the token ids a model takes, and
//! back. [`Tokenizer`] is built from a GGUF file's vocabulary
//! ([`Tokenizer::from_gguf`], or [`Tokenizer::from_parts`] from the values themselves) and
//! gives llama.cpp's ids for it.

mod tokenizer;

pub use tokenizer::{TokenDecoder, TokenKind, Tokenizer, TokenizerError, TokenizerParts};
