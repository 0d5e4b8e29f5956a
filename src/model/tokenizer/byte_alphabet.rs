//! GPT-2's byte alphabet: every byte stands for one printable character, so that a byte-level
//! vocabulary can store any byte sequence as text. The 188 printable bytes (`!`..=`~`,
//! `¡`..=`¬`, `®`..=`ÿ`) stand for themselves; the other 68, in byte order, for U+0100..=U+0143.

/// Whether byte `b` stands for the character of the same code point.
const fn is_printable(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The character each byte stands for.
const BYTE_TO_CHAR: [char; 256] = {
    let mut table = ['\0'; 256];
    let mut next = 0x100u32;
    let mut b = 0usize;
    while b < 256 {
        let cp = if is_printable(b as u8) {
            b as u32
        } else {
            next += 1;
            next - 1
        };
        table[b] = match char::from_u32(cp) {
            Some(c) => c,
            None => panic!("every code point below U+0144 is a character"),
        };
        b += 1;
    }
    table
};

/// The bytes that do not stand for themselves, in byte order: `SHIFTED[i]` is the byte of
/// U+0100 + i.
const SHIFTED: [u8; 68] = {
    let mut table = [0u8; 68];
    let mut n = 0usize;
    let mut b = 0usize;
    while b < 256 {
        if !is_printable(b as u8) {
            table[n] = b as u8;
            n += 1;
        }
        b += 1;
    }
    assert!(n == 68);
    table
};

/// The character byte `b` is written as in a byte-level vocabulary.
pub(super) fn byte_to_char(b: u8) -> char {
    BYTE_TO_CHAR[usize::from(b)]
}

/// The byte character `c` stands for, or `None` when `c` is not in the alphabet.
pub(super) fn char_to_byte(c: char) -> Option<u8> {
    let cp = u32::from(c);
    match u8::try_from(cp) {
        Ok(b) if is_printable(b) => Some(b),
        _ => cp
            .checked_sub(0x100)
            .and_then(|i| SHIFTED.get(usize::try_from(i).ok()?))
            .copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alphabet_round_trips_every_byte() {
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b), "byte {b:#04x}");
        }
    }

    #[test]
    fn space_newline_and_the_first_shifted_bytes_have_gpt2s_characters() {
        assert_eq!(byte_to_char(b' '), 'Ġ'); // U+0120
        assert_eq!(byte_to_char(b'\n'), 'Ċ'); // U+010A
        assert_eq!(byte_to_char(0x00), '\u{100}');
        assert_eq!(byte_to_char(0xAD), '\u{143}');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xE9), 'é');
    }

    #[test]
    fn characters_outside_the_alphabet_have_no_byte() {
        assert_eq!(char_to_byte(' '), None);
        assert_eq!(char_to_byte('\u{144}'), None);
        assert_eq!(char_to_byte('\u{AD}'), None);
        assert_eq!(char_to_byte('€'), None);
    }
}
