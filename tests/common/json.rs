//! A small JSON reader for the tests' fixtures (the expected ids of llama.cpp's tokenizer):
//! objects, arrays, strings with every escape (surrogate pairs included), numbers, booleans
//! and null. Fixtures are trusted files; a malformed one panics with the offset.
#![allow(dead_code)] // each test file uses its own subset

/// A JSON value; an object keeps its keys in file order.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// Parses a whole document.
    pub fn parse(text: &str) -> Json {
        let mut p = Parser {
            s: text.as_bytes(),
            at: 0,
        };
        let value = p.value();
        p.ws();
        assert_eq!(p.at, p.s.len(), "json: trailing bytes at offset {}", p.at);
        value
    }

    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    /// A number that is a whole `u32`.
    pub fn as_u32(&self) -> Option<u32> {
        match *self {
            Json::Number(n) if n >= 0.0 && n <= f64::from(u32::MAX) && n.fract() == 0.0 => {
                Some(n as u32)
            }
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Json::Bool(b) => Some(b),
            _ => None,
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while matches!(self.s.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) {
        self.ws();
        assert_eq!(
            self.s.get(self.at),
            Some(&b),
            "json: expected {:?} at offset {}",
            b as char,
            self.at
        );
        self.at += 1;
    }

    fn value(&mut self) -> Json {
        self.ws();
        match self.s.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                let mut members = Vec::new();
                self.ws();
                if self.s.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Json::Object(members);
                }
                loop {
                    self.ws();
                    let key = self.string();
                    self.eat(b':');
                    members.push((key, self.value()));
                    self.ws();
                    match self.s.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Json::Object(members);
                        }
                        _ => panic!("json: expected ',' or '}}' at offset {}", self.at),
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                self.ws();
                if self.s.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Json::Array(items);
                }
                loop {
                    items.push(self.value());
                    self.ws();
                    match self.s.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Json::Array(items);
                        }
                        _ => panic!("json: expected ',' or ']' at offset {}", self.at),
                    }
                }
            }
            Some(b'"') => Json::String(self.string()),
            Some(b't') => self.word("true", Json::Bool(true)),
            Some(b'f') => self.word("false", Json::Bool(false)),
            Some(b'n') => self.word("null", Json::Null),
            _ => {
                let start = self.at;
                while matches!(
                    self.s.get(self.at),
                    Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                ) {
                    self.at += 1;
                }
                let text = std::str::from_utf8(&self.s[start..self.at]).unwrap();
                Json::Number(
                    text.parse()
                        .unwrap_or_else(|_| panic!("json: bad number at offset {start}")),
                )
            }
        }
    }

    fn word(&mut self, word: &str, value: Json) -> Json {
        assert!(
            self.s[self.at..].starts_with(word.as_bytes()),
            "json: bad literal at offset {}",
            self.at
        );
        self.at += word.len();
        value
    }

    fn hex4(&mut self) -> u32 {
        let text = std::str::from_utf8(&self.s[self.at..self.at + 4]).unwrap();
        self.at += 4;
        u32::from_str_radix(text, 16)
            .unwrap_or_else(|_| panic!("json: bad \\u escape before offset {}", self.at))
    }

    fn string(&mut self) -> String {
        assert_eq!(
            self.s.get(self.at),
            Some(&b'"'),
            "json: expected a string at offset {}",
            self.at
        );
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let b = *self.s.get(self.at).expect("json: unterminated string");
            self.at += 1;
            match b {
                b'"' => return String::from_utf8(out).expect("json: strings are UTF-8"),
                b'\\' => {
                    let e = self.s[self.at];
                    self.at += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hi = self.hex4();
                            let cp = if (0xD800..0xDC00).contains(&hi) {
                                assert_eq!(
                                    &self.s[self.at..self.at + 2],
                                    b"\\u",
                                    "json: lone surrogate"
                                );
                                self.at += 2;
                                let lo = self.hex4();
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            char::from_u32(cp).expect("json: escape is a character")
                        }
                        _ => panic!("json: bad escape at offset {}", self.at - 1),
                    };
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(b),
            }
        }
    }
}
