//! Just enough JSON to read a Grafana dashboard and Prometheus' query
//! answers, so xtask keeps its two dependencies.

use anyhow::{bail, Context, Result};

/// A JSON value; an object keeps its members in the order they came.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    pub(crate) fn parse(text: &str) -> Result<Json> {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            at: 0,
        };
        let value = parser.value()?;
        parser.skip_space();
        if parser.at != parser.bytes.len() {
            bail!("JSON: trailing text at byte {}", parser.at);
        }
        Ok(value)
    }

    /// The member `key` of an object (`None` for other values).
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an array; nothing for other values.
    pub(crate) fn elements(&self) -> &[Json] {
        match self {
            Json::Array(items) => items,
            _ => &[],
        }
    }
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| b.is_ascii_whitespace())
        {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Result<()> {
        if self.peek() != Some(byte) {
            bail!("JSON: expected `{}` at byte {}", byte as char, self.at);
        }
        self.at += 1;
        Ok(())
    }

    fn literal(&mut self, word: &str, value: Json) -> Result<Json> {
        if !self.bytes[self.at..].starts_with(word.as_bytes()) {
            bail!("JSON: unexpected text at byte {}", self.at);
        }
        self.at += word.len();
        Ok(value)
    }

    fn value(&mut self) -> Result<Json> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => self.string().map(Json::String),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(other) => bail!("JSON: unexpected `{}` at byte {}", other as char, self.at),
            None => bail!("JSON: unexpected end"),
        }
    }

    fn object(&mut self) -> Result<Json> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Json::Object(members));
        }
        loop {
            self.skip_space();
            let key = self.string()?;
            self.expect(b':')?;
            members.push((key, self.value()?));
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Json::Object(members));
                }
                _ => bail!("JSON: expected `,` or `}}` at byte {}", self.at),
            }
        }
    }

    fn array(&mut self) -> Result<Json> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value()?);
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Json::Array(items));
                }
                _ => bail!("JSON: expected `,` or `]` at byte {}", self.at),
            }
        }
    }

    fn number(&mut self) -> Result<Json> {
        let start = self.at;
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
        {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).expect("ASCII digits");
        text.parse()
            .map(Json::Number)
            .with_context(|| format!("JSON: bad number `{text}` at byte {start}"))
    }

    fn string(&mut self) -> Result<String> {
        if self.bytes.get(self.at) != Some(&b'"') {
            bail!("JSON: expected a string at byte {}", self.at);
        }
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while self
                .bytes
                .get(self.at)
                .is_some_and(|b| *b != b'"' && *b != b'\\')
            {
                self.at += 1;
            }
            out.push_str(
                std::str::from_utf8(&self.bytes[start..self.at]).context("JSON: not UTF-8")?,
            );
            match self.bytes.get(self.at) {
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let escape = *self
                        .bytes
                        .get(self.at + 1)
                        .context("JSON: unexpected end")?;
                    self.at += 2;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        other => bail!("JSON: bad escape `\\{}`", other as char),
                    }
                }
                _ => bail!("JSON: unterminated string"),
            }
        }
    }

    /// The four hex digits after `\u` (the `\u` already read), with a
    /// following low surrogate when the first is a high one.
    fn unicode_escape(&mut self) -> Result<char> {
        let high = self.hex4()?;
        if !(0xD800..0xDC00).contains(&high) {
            return char::from_u32(high).context("JSON: bad \\u escape");
        }
        if !self.bytes[self.at..].starts_with(b"\\u") {
            bail!("JSON: lone surrogate");
        }
        self.at += 2;
        let low = self.hex4()?;
        let code = 0x10000 + ((high - 0xD800) << 10) + (low.wrapping_sub(0xDC00) & 0x3FF);
        char::from_u32(code).context("JSON: bad surrogate pair")
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self
            .bytes
            .get(self.at..self.at + 4)
            .context("JSON: short \\u escape")?;
        self.at += 4;
        u32::from_str_radix(std::str::from_utf8(digits)?, 16).context("JSON: bad \\u escape")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_arrays_and_scalars() {
        let value = Json::parse(
            r#" {"a": [1, -2.5e1, true, false, null], "b": {"c": "d"}, "e": [], "f": {}} "#,
        )
        .unwrap();
        assert_eq!(
            value.get("a").unwrap().elements(),
            [
                Json::Number(1.0),
                Json::Number(-25.0),
                Json::Bool(true),
                Json::Bool(false),
                Json::Null
            ]
        );
        assert_eq!(
            value.get("b").unwrap().get("c").unwrap().as_str(),
            Some("d")
        );
        assert!(value.get("e").unwrap().elements().is_empty());
        assert_eq!(value.get("f"), Some(&Json::Object(vec![])));
        assert_eq!(value.get("missing"), None);
    }

    #[test]
    fn string_escapes() {
        let value = Json::parse(r#""say \"hi\"\n\t\\ \u00e9 \ud83d\ude00 \/""#).unwrap();
        assert_eq!(value.as_str(), Some("say \"hi\"\n\t\\ é 😀 /"));
    }

    #[test]
    fn malformed_text_is_an_error() {
        for text in [
            "{",
            "[1,]",
            "{\"a\" 1}",
            "\"open",
            "tru",
            "1 2",
            "{\"a\":1,}",
        ] {
            assert!(Json::parse(text).is_err(), "{text}");
        }
    }
}
