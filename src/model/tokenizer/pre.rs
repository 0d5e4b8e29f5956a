//! The pre-tokenizer: text to words, each of which BPE encodes on its own.
//!
//! llama.cpp names a list of regular expressions per `tokenizer.ggml.pre`; each splits every
//! piece the previous one left, keeping both the matches and the text between them. The
//! families here:
//!
//! - GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)` (the text
//!   no branch matches, a lone whitespace character before a non-space, becomes a word of its
//!   own, as if the pattern ended in `|\s+`).
//! - SmolLM (and the other names llama.cpp gives the same list): `\p{N}` first, so every digit
//!   is a word alone, then GPT-2's on the pieces between digits.
//!
//! The `regex` crate has no look-ahead, so `\s+(?!\S)` is the branch `\s+` cut back by one
//! character when more than one whitespace character is followed by a non-space: exactly what
//! the backtracking engine would settle on.

use regex::Regex;

/// GPT-2's pattern with `\s+(?!\S)` replaced by `\s+` (the cut is done by hand).
const GPT2_PATTERN: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+";

/// The `tokenizer.ggml.pre` names whose list is GPT-2's pattern alone.
const GPT2_NAMES: &[&str] = &["gpt-2", "phi-2", "mpt", "olmo", "jais"];

/// The names whose list is `\p{N}` then GPT-2's pattern.
const DIGITS_THEN_GPT2_NAMES: &[&str] = &[
    "smollm",
    "starcoder",
    "refact",
    "command-r",
    "codeshell",
    "exaone",
    "minerva-7b",
];

/// Which list of expressions splits the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Gpt2,
    DigitsThenGpt2,
}

/// A compiled pre-tokenizer.
#[derive(Debug, Clone)]
pub(super) struct PreTokenizer {
    family: Family,
    name: String,
    gpt2: Regex,
}

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp uses for `tokenizer.ggml.pre` = `name`, or `None` when this
    /// crate does not know the name.
    pub(super) fn named(name: &str) -> Option<PreTokenizer> {
        let family = if GPT2_NAMES.contains(&name) {
            Family::Gpt2
        } else if DIGITS_THEN_GPT2_NAMES.contains(&name) {
            Family::DigitsThenGpt2
        } else {
            return None;
        };
        // The pattern is a constant the tests compile; a failure here is a bug, not bad input.
        let gpt2 = Regex::new(GPT2_PATTERN).expect("GPT-2's pattern compiles");
        Some(PreTokenizer {
            family,
            name: name.into(),
            gpt2,
        })
    }

    /// Every name [`PreTokenizer::named`] knows.
    pub(super) fn known_names() -> impl Iterator<Item = &'static str> {
        GPT2_NAMES.iter().chain(DIGITS_THEN_GPT2_NAMES).copied()
    }

    /// The `tokenizer.ggml.pre` name it was built from.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Calls `word` with each word of `text`, in order; the words concatenate to `text`.
    pub(super) fn split<E>(
        &self,
        text: &str,
        word: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E> {
        match self.family {
            Family::Gpt2 => self.split_gpt2(text, word),
            Family::DigitsThenGpt2 => {
                let mut start = 0;
                for (i, c) in text.char_indices() {
                    // `\p{N}`: the general categories Nd, Nl and No, which is what
                    // `char::is_numeric` tests.
                    if c.is_numeric() {
                        if start < i {
                            self.split_gpt2(&text[start..i], word)?;
                        }
                        let end = i + c.len_utf8();
                        word(&text[i..end])?;
                        start = end;
                    }
                }
                if start < text.len() {
                    self.split_gpt2(&text[start..], word)?;
                }
                Ok(())
            }
        }
    }

    fn split_gpt2<E>(
        &self,
        text: &str,
        word: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut pos = 0;
        while pos < text.len() {
            let Some(m) = self.gpt2.find_at(text, pos) else {
                // Unreachable: every character is whitespace, a letter, a number or none of
                // them, and a branch takes each; keep the rest whole rather than lose it.
                return word(&text[pos..]);
            };
            if m.start() > pos {
                word(&text[pos..m.start()])?;
            }
            let mut end = m.end();
            let matched = m.as_str();
            // `\s+(?!\S)`: a run of whitespace before a non-space leaves its last character
            // to the next word. `\s+` is greedy, so a whitespace match that ends before the
            // text does is followed by a non-space.
            if end < text.len() && matched.chars().all(char::is_whitespace) {
                let mut chars = matched.chars();
                if let (Some(last), Some(_)) = (chars.next_back(), chars.next()) {
                    end -= last.len_utf8();
                }
            }
            word(&text[m.start()..end])?;
            pos = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: &str, text: &str) -> Vec<String> {
        let pre = PreTokenizer::named(pre).unwrap();
        let mut out = Vec::new();
        pre.split(text, &mut |w: &str| -> Result<(), ()> {
            out.push(w.to_string());
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn gpt2_splits_contractions_words_numbers_and_punctuation() {
        assert_eq!(
            words("gpt-2", "I'm here, it's 2024!"),
            ["I", "'m", " here", ",", " it", "'s", " 2024", "!"]
        );
    }

    #[test]
    fn whitespace_before_a_word_leaves_one_space_to_it() {
        assert_eq!(words("gpt-2", "a   b"), ["a", "  ", " b"]);
        assert_eq!(words("gpt-2", "a\n\nb"), ["a", "\n", "\n", "b"]);
        assert_eq!(words("gpt-2", "a \n b"), ["a", " \n", " b"]);
    }

    #[test]
    fn a_lone_whitespace_character_before_a_non_space_is_its_own_word() {
        assert_eq!(words("gpt-2", "a\nb"), ["a", "\n", "b"]);
        assert_eq!(words("gpt-2", "\tx"), ["\t", "x"]);
    }

    #[test]
    fn trailing_whitespace_stays_together() {
        assert_eq!(words("gpt-2", "end   "), ["end", "   "]);
        assert_eq!(words("gpt-2", "   "), ["   "]);
    }

    #[test]
    fn smollm_isolates_every_digit_before_the_gpt2_split() {
        assert_eq!(
            words("smollm", "in 2024, x12"),
            ["in", " ", "2", "0", "2", "4", ",", " x", "1", "2"]
        );
        // Digits of other scripts are \p{N} too.
        assert_eq!(words("smollm", "٣٤"), ["٣", "٤"]);
    }

    #[test]
    fn letters_are_the_general_category_l_not_alphabetic() {
        // U+0947 DEVANAGARI VOWEL SIGN E is Mn (alphabetic, not a letter): it ends the word.
        assert_eq!(words("gpt-2", "\u{915}\u{947}"), ["\u{915}", "\u{947}"]);
    }

    #[test]
    fn the_words_concatenate_to_the_text() {
        let text = "  Hello,\tworld!!  42 times\n\n\u{1F600} ok's  ";
        for pre in PreTokenizer::known_names() {
            assert_eq!(words(pre, text).concat(), text, "{pre}");
        }
    }

    #[test]
    fn unknown_names_have_no_pre_tokenizer() {
        assert!(PreTokenizer::named("llama3").is_none());
        assert!(PreTokenizer::named("").is_none());
    }
}
