//! [`TokenDecoder`]: token ids to text as they come, holding back a character whose bytes
//! are split across tokens.

use alloc::string::String;
use alloc::vec::Vec;

use super::{Tokenizer, TokenizerError};

/// Decodes a stream of token ids into text, one id at a time, as a generator produces them.
///
/// A token's piece is bytes, and one character's UTF-8 bytes can span tokens (an emoji is
/// often three or four byte tokens). [`push`](TokenDecoder::push) returns the text that is
/// complete so far and holds back the start of a character still missing bytes; a byte that
/// can start or continue no character is U+FFFD at once. [`finish`](TokenDecoder::finish)
/// returns U+FFFD for a held-back, never completed character. All the pushes and the finish
/// together give exactly `String::from_utf8_lossy` of all the pieces, which is what
/// [`Tokenizer::decode`] returns for the same ids.
///
/// ```
/// use skainet_schedule::model::{Tokenizer, TokenizerParts};
///
/// # fn main() -> Result<(), skainet_schedule::model::TokenizerError> {
/// let tokenizer = Tokenizer::from_parts(TokenizerParts::bytes_only("gpt-2"))?;
/// let ids = tokenizer.encode("é", false)?; // two byte tokens: 0xC3, 0xA9
/// assert_eq!(ids.len(), 2);
///
/// let mut decoder = tokenizer.decoder(false);
/// assert_eq!(decoder.push(ids[0])?, ""); // half a character: held back
/// assert_eq!(decoder.push(ids[1])?, "é");
/// assert_eq!(decoder.finish(), "");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct TokenDecoder<'t> {
    tokenizer: &'t Tokenizer,
    special: bool,
    /// Bytes of a character not yet complete (at most 3).
    pending: Vec<u8>,
    /// The text the last call returned.
    out: String,
}

impl<'t> TokenDecoder<'t> {
    pub(super) fn new(tokenizer: &'t Tokenizer, special: bool) -> TokenDecoder<'t> {
        TokenDecoder {
            tokenizer,
            special,
            pending: Vec::new(),
            out: String::new(),
        }
    }

    /// Adds token `id` and returns the text it completes (empty while a character is still
    /// incomplete, or for a token whose piece is empty).
    ///
    /// # Errors
    ///
    /// [`TokenizerError::IdOutOfRange`] for an id past the vocabulary; the decoder is then
    /// as it was before the call.
    pub fn push(&mut self, id: u32) -> Result<&str, TokenizerError> {
        let piece = self.tokenizer.token_to_piece(id, self.special)?;
        self.out.clear();
        if self.pending.is_empty() {
            self.take_complete(piece);
        } else {
            let mut bytes = core::mem::take(&mut self.pending);
            bytes.extend_from_slice(piece);
            self.take_complete(&bytes);
        }
        Ok(&self.out)
    }

    /// Ends the stream: returns U+FFFD if a character was left incomplete, else the empty
    /// string, and makes the decoder ready for a new stream.
    pub fn finish(&mut self) -> &str {
        self.out.clear();
        if !self.pending.is_empty() {
            self.pending.clear();
            self.out.push(char::REPLACEMENT_CHARACTER);
        }
        &self.out
    }

    /// Appends the complete text of `bytes` to `out` (U+FFFD for each invalid sequence, as
    /// `from_utf8_lossy` does) and keeps an incomplete character at the end in `pending`.
    fn take_complete(&mut self, mut bytes: &[u8]) {
        loop {
            match core::str::from_utf8(bytes) {
                Ok(text) => {
                    self.out.push_str(text);
                    return;
                }
                Err(e) => {
                    let (valid, rest) = bytes.split_at(e.valid_up_to());
                    // The first `valid_up_to` bytes were just checked: this never fails.
                    self.out
                        .push_str(core::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            self.out.push(char::REPLACEMENT_CHARACTER);
                            bytes = &rest[bad..];
                        }
                        None => {
                            // The text ends inside a character that may yet complete.
                            self.pending.extend_from_slice(rest);
                            return;
                        }
                    }
                }
            }
        }
    }
}
