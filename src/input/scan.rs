//! The one JSON reader, small and not generic: the object calls and replies,
//! stored rows and cursors are read over it by [`FromScan`] (which
//! [`wire!`](crate::wire!) implements), and JSON trees by `super::tree`. As
//! strict as `serde_json` where a value could be misread; unknown fields are
//! skipped, nesting deeper than [`MAX_DEPTH`] refused.

use std::borrow::Cow;

/// The body is not JSON, or not the JSON of the call or reply expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

pub type Read<T> = Result<T, Malformed>;

/// As deep as `serde_json` nests before it refuses.
pub const MAX_DEPTH: u32 = 128;

/// A cursor over the text of one JSON value.
pub struct Scan<'a> {
    text: &'a str,
    at: usize,
    depth: u32,
}

/// An object or array being read: whether its first member is still due.
pub struct Open {
    first: bool,
    close: u8,
}

impl<'a> Scan<'a> {
    pub fn new(text: &'a str) -> Scan<'a> {
        Scan {
            text,
            at: 0,
            depth: 0,
        }
    }

    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The next byte that is not whitespace, not consumed.
    pub(super) fn peek(&mut self) -> Option<u8> {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes().get(self.at) {
            self.at += 1;
        }
        self.bytes().get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, byte: u8) -> Read<()> {
        ok(self.eat(byte))
    }

    fn word(&mut self, word: &str) -> bool {
        let found = self.text[self.at..].starts_with(word);
        if found {
            self.at += word.len();
        }
        found
    }

    /// Nothing but whitespace is left.
    pub fn end(mut self) -> Read<()> {
        self.rest()
    }

    /// Nothing but whitespace is left, the cursor at the first thing that is not.
    pub(super) fn rest(&mut self) -> Read<()> {
        ok(self.peek().is_none())
    }

    /// Where the cursor is: line and column (in characters), from 1. Counted
    /// on bytes: after an error the cursor may be inside a character.
    pub(super) fn line_column(&self) -> (usize, usize) {
        let before = &self.bytes()[..self.at.min(self.text.len())];
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |at| at + 1);
        let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
        let starts = before[line_start..].iter().filter(|&&b| b & 0xc0 != 0x80);
        (line, 1 + starts.count())
    }

    /// Reads a `null` if one comes next.
    pub fn null(&mut self) -> bool {
        self.peek() == Some(b'n') && self.word("null")
    }

    pub fn bool(&mut self) -> Read<bool> {
        if self.peek() == Some(b't') && self.word("true") {
            Ok(true)
        } else if self.peek() == Some(b'f') && self.word("false") {
            Ok(false)
        } else {
            Err(Malformed)
        }
    }

    /// A non-negative integer: digits without a fraction or an exponent.
    pub fn u64(&mut self) -> Read<u64> {
        self.peek();
        let start = self.at;
        let mut n: u64 = 0;
        while let Some(digit @ b'0'..=b'9') = self.bytes().get(self.at) {
            n = n
                .checked_mul(10)
                .and_then(|n| n.checked_add(u64::from(digit - b'0')))
                .ok_or(Malformed)?;
            self.at += 1;
        }
        let digits = self.at - start;
        let leading_zero = digits > 1 && self.bytes()[start] == b'0';
        let fraction = matches!(self.bytes().get(self.at), Some(b'.' | b'e' | b'E'));
        ok(digits > 0 && !leading_zero && !fraction)?;
        Ok(n)
    }

    pub fn u32(&mut self) -> Read<u32> {
        u32::try_from(self.u64()?).map_err(|_| Malformed)
    }

    pub fn i64(&mut self) -> Read<i64> {
        if self.eat(b'-') {
            let magnitude = self.u64()?;
            0i64.checked_sub_unsigned(magnitude).ok_or(Malformed)
        } else {
            i64::try_from(self.u64()?).map_err(|_| Malformed)
        }
    }

    pub fn string(&mut self) -> Read<String> {
        self.str().map(Cow::into_owned)
    }

    /// A string, borrowed from the text unless it has escapes.
    pub fn str(&mut self) -> Read<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match *self.bytes().get(self.at).ok_or(Malformed)? {
                b'"' => {
                    self.at += 1;
                    return Ok(Cow::Borrowed(&self.text[start..self.at - 1]));
                }
                b'\\' => break,
                0..=0x1f => return Err(Malformed),
                _ => self.at += 1,
            }
        }
        let mut out = String::from(&self.text[start..self.at]);
        loop {
            let rest = &self.text[self.at..];
            let plain = rest
                .find(|c: char| c == '"' || c == '\\' || c < ' ')
                .ok_or(Malformed)?;
            out.push_str(&rest[..plain]);
            self.at += plain;
            match self.bytes()[self.at] {
                b'"' => {
                    self.at += 1;
                    return Ok(Cow::Owned(out));
                }
                b'\\' => {
                    self.at += 1;
                    out.push(self.escape()?);
                }
                _ => return Err(Malformed),
            }
        }
    }

    /// The character an escape stands for, after its backslash.
    fn escape(&mut self) -> Read<char> {
        let byte = *self.bytes().get(self.at).ok_or(Malformed)?;
        self.at += 1;
        Ok(match byte {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let high = self.hex4()?;
                let code = if (0xD800..0xDC00).contains(&high) {
                    ok(self.word("\\u"))?;
                    let low = self.hex4()?;
                    ok((0xDC00..0xE000).contains(&low))?;
                    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
                } else {
                    high
                };
                char::from_u32(code).ok_or(Malformed)?
            }
            _ => return Err(Malformed),
        })
    }

    fn hex4(&mut self) -> Read<u32> {
        let digits = self.text.get(self.at..self.at + 4).ok_or(Malformed)?;
        ok(digits.bytes().all(|b| b.is_ascii_hexdigit()))?;
        self.at += 4;
        u32::from_str_radix(digits, 16).map_err(|_| Malformed)
    }

    /// Opens an object: then [`Open::key`] until it answers `None`.
    pub fn object(&mut self) -> Read<Open> {
        self.open(b'{', b'}')
    }

    /// Opens an array: then [`Open::item`] until it answers false.
    pub fn array(&mut self) -> Read<Open> {
        self.open(b'[', b']')
    }

    fn open(&mut self, open: u8, close: u8) -> Read<Open> {
        self.expect(open)?;
        self.depth += 1;
        ok(self.depth <= MAX_DEPTH)?;
        Ok(Open { first: true, close })
    }

    /// Reads past one value of any kind.
    pub fn skip(&mut self) -> Read<()> {
        match self.peek().ok_or(Malformed)? {
            b'{' => {
                let mut object = self.object()?;
                while object.key(self)?.is_some() {
                    self.skip()?;
                }
            }
            b'[' => {
                let mut array = self.array()?;
                while array.item(self)? {
                    self.skip()?;
                }
            }
            b'"' => {
                self.str()?;
            }
            b't' | b'f' => {
                self.bool()?;
            }
            b'n' => ok(self.null())?,
            _ => {
                self.number()?;
            }
        }
        Ok(())
    }

    /// Any number, with a sign, a fraction or an exponent: its text.
    pub(super) fn number(&mut self) -> Read<&'a str> {
        self.peek();
        let start = self.at;
        self.eat(b'-');
        let digits = |scan: &mut Scan| {
            let start = scan.at;
            while scan.bytes().get(scan.at).is_some_and(u8::is_ascii_digit) {
                scan.at += 1;
            }
            ok(scan.at > start)
        };
        let first = self.at;
        digits(self)?;
        // No leading zero: `0` is a number, `01` is not JSON.
        ok(self.bytes()[first] != b'0' || self.at == first + 1)?;
        if self.bytes().get(self.at) == Some(&b'.') {
            self.at += 1;
            digits(self)?;
        }
        if let Some(b'e' | b'E') = self.bytes().get(self.at) {
            self.at += 1;
            if let Some(b'+' | b'-') = self.bytes().get(self.at) {
                self.at += 1;
            }
            digits(self)?;
        }
        Ok(&self.text[start..self.at])
    }

    /// An enum as serde tags it by default: a unit variant is its name, any
    /// other an object with its name as the one key, whose value is to be
    /// read next and the object then closed with [`Open::close`].
    pub fn tag(&mut self) -> Read<(Cow<'a, str>, Option<Open>)> {
        if self.peek() == Some(b'"') {
            return Ok((self.str()?, None));
        }
        let mut object = self.object()?;
        let name = object.key(self)?.ok_or(Malformed)?;
        Ok((name, Some(object)))
    }
}

impl Open {
    /// The next key of the object, its colon read; `None` once closed.
    pub fn key<'a>(&mut self, scan: &mut Scan<'a>) -> Read<Option<Cow<'a, str>>> {
        if !self.item(scan)? {
            return Ok(None);
        }
        let key = scan.str()?;
        scan.expect(b':')?;
        Ok(Some(key))
    }

    /// The place in `names` of the object's next key among them, its colon
    /// read; the members whose keys are not among them are skipped; `None`
    /// once closed.
    pub fn field(&mut self, scan: &mut Scan, names: &[&str]) -> Read<Option<usize>> {
        while let Some(key) = self.key(scan)? {
            match names.iter().position(|name| **name == *key) {
                Some(at) => return Ok(Some(at)),
                None => scan.skip()?,
            }
        }
        Ok(None)
    }

    /// Whether another member follows (its comma read); false once closed.
    pub fn item(&mut self, scan: &mut Scan) -> Read<bool> {
        if scan.eat(self.close) {
            scan.depth -= 1;
            return Ok(false);
        }
        if !std::mem::replace(&mut self.first, false) {
            scan.expect(b',')?;
        }
        Ok(true)
    }

    /// Another member must follow, as in a tuple written as an array.
    pub fn more(&mut self, scan: &mut Scan) -> Read<()> {
        ok(self.item(scan)?)
    }

    /// Closes an object or array that must have no more members.
    pub fn close(mut self, scan: &mut Scan) -> Read<()> {
        ok(!self.item(scan)?)
    }
}

fn ok(holds: bool) -> Read<()> {
    if holds {
        Ok(())
    } else {
        Err(Malformed)
    }
}

/// A value read from its JSON by hand: the fields of what
/// [`wire!`](crate::wire!) declares, and the types it declares.
pub trait FromScan: Sized {
    fn from_scan(scan: &mut Scan<'_>) -> Read<Self>;

    /// The value of a field left out, if one may be: `None` for an
    /// optional field.
    fn absent() -> Option<Self> {
        None
    }

    /// The whole text as one value.
    fn from_json(text: &str) -> Read<Self> {
        whole(text, Self::from_scan)
    }
}

impl FromScan for String {
    fn from_scan(scan: &mut Scan<'_>) -> Read<String> {
        scan.string()
    }
}

impl FromScan for bool {
    fn from_scan(scan: &mut Scan<'_>) -> Read<bool> {
        scan.bool()
    }
}

impl FromScan for u64 {
    fn from_scan(scan: &mut Scan<'_>) -> Read<u64> {
        scan.u64()
    }
}

impl FromScan for u32 {
    fn from_scan(scan: &mut Scan<'_>) -> Read<u32> {
        scan.u32()
    }
}

impl FromScan for i64 {
    fn from_scan(scan: &mut Scan<'_>) -> Read<i64> {
        scan.i64()
    }
}

/// `null` or a value; left out, `None`.
impl<T: FromScan> FromScan for Option<T> {
    fn from_scan(scan: &mut Scan<'_>) -> Read<Option<T>> {
        nullable(scan, T::from_scan)
    }

    fn absent() -> Option<Option<T>> {
        Some(None)
    }
}

impl<T: FromScan> FromScan for Vec<T> {
    fn from_scan(scan: &mut Scan<'_>) -> Read<Vec<T>> {
        list(scan, T::from_scan)
    }
}

/// A pair, as serde writes one: a list of its two values.
impl<A: FromScan, B: FromScan> FromScan for (A, B) {
    fn from_scan(scan: &mut Scan<'_>) -> Read<(A, B)> {
        let mut items = scan.array()?;
        items.more(scan)?;
        let a = A::from_scan(scan)?;
        items.more(scan)?;
        let b = B::from_scan(scan)?;
        items.close(scan)?;
        Ok((a, b))
    }
}

/// A triple, as serde writes one: a list of its three values.
impl<A: FromScan, B: FromScan, C: FromScan> FromScan for (A, B, C) {
    fn from_scan(scan: &mut Scan<'_>) -> Read<(A, B, C)> {
        let mut items = scan.array()?;
        items.more(scan)?;
        let a = A::from_scan(scan)?;
        items.more(scan)?;
        let b = B::from_scan(scan)?;
        items.more(scan)?;
        let c = C::from_scan(scan)?;
        items.close(scan)?;
        Ok((a, b, c))
    }
}

/// A required field's value, once the object is read.
pub fn need<T>(value: Option<T>) -> Read<T> {
    value.ok_or(Malformed)
}

/// An optional value: `null` is `None`.
pub fn nullable<'a, T>(scan: &mut Scan<'a>, read: fn(&mut Scan<'a>) -> Read<T>) -> Read<Option<T>> {
    if scan.null() {
        Ok(None)
    } else {
        read(scan).map(Some)
    }
}

/// An array of values each read by `read`.
pub fn list<'a, T>(scan: &mut Scan<'a>, read: fn(&mut Scan<'a>) -> Read<T>) -> Read<Vec<T>> {
    let mut array = scan.array()?;
    let mut items = Vec::new();
    while array.item(scan)? {
        items.push(read(scan)?);
    }
    Ok(items)
}

/// The whole text is one value read by `read`.
pub fn whole<'a, T>(text: &'a str, read: fn(&mut Scan<'a>) -> Read<T>) -> Read<T> {
    let mut scan = Scan::new(text);
    let value = read(&mut scan)?;
    scan.end()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(text: &str) -> Read<String> {
        whole(text, Scan::string)
    }

    #[test]
    fn strings_are_read_as_serde_json_reads_them() {
        for text in [
            r#""plain""#,
            r#""tab\there \"quoted\" \\ \/ \b\f\n\r""#,
            r#""\u00e9t\u00E9 \ud83d\ude00 ünï""#,
            r#""""#,
        ] {
            let ours = string(text).unwrap();
            assert_eq!(
                ours,
                serde_json::from_str::<String>(text).unwrap(),
                "{text}"
            );
        }
        for text in [
            "\"raw\ncontrol\"",
            r#""\x""#,
            r#""\ud83d alone""#,
            r#""\udc00""#,
            r#""\u12""#,
            r#""unterminated"#,
            r#""\"#,
            "plain",
        ] {
            assert!(string(text).is_err(), "{text}");
            assert!(serde_json::from_str::<String>(text).is_err(), "{text}");
        }
    }

    #[test]
    fn integers_are_whole_and_in_range() {
        assert_eq!(whole(" 0 ", Scan::u64), Ok(0));
        assert_eq!(whole("18446744073709551615", Scan::u64), Ok(u64::MAX));
        assert_eq!(whole("4294967295", Scan::u32), Ok(u32::MAX));
        assert_eq!(whole("-9223372036854775808", Scan::i64), Ok(i64::MIN));
        assert_eq!(whole("-1", Scan::i64), Ok(-1));
        assert!(whole("4294967296", Scan::u32).is_err());
        for text in [
            "18446744073709551616",
            "-1",
            "01",
            "1.0",
            "1e3",
            "",
            "- 1",
            "+1",
        ] {
            assert!(whole(text, Scan::u64).is_err(), "{text}");
        }
        assert!(whole("9223372036854775808", Scan::i64).is_err());
        assert!(whole("-9223372036854775809", Scan::i64).is_err());
    }

    #[test]
    fn skipped_values_must_be_json_and_nest_only_so_deep() {
        fn skip(text: &str) -> Read<()> {
            whole(text, Scan::skip)
        }
        for text in [
            r#"{"a":[1,-2.5e-3,true,false,null,"x",{"b":{}}],"c":[]}"#,
            " [ ] ",
            "0",
            "-0.0E+1",
        ] {
            assert_eq!(skip(text), Ok(()), "{text}");
        }
        for text in [
            r#"{"a" 1}"#,
            r#"{"a":1,}"#,
            r#"[1,,2]"#,
            r#"[1 2]"#,
            r#"{,"a":1}"#,
            r#"{1:1}"#,
            "1.",
            "-",
            "01",
            "-01",
            "nul",
            "[1] 2",
            "[",
        ] {
            assert!(skip(text).is_err(), "{text}");
        }
        let depth = MAX_DEPTH as usize;
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert_eq!(skip(&nested(depth)), Ok(()));
        assert!(skip(&nested(depth + 1)).is_err());
        assert!(skip(&"[".repeat(100_000)).is_err());
    }

    #[test]
    fn a_tag_is_a_name_or_an_object_of_one_key() {
        let mut scan = Scan::new(r#" "inspect" "#);
        let (name, object) = scan.tag().unwrap();
        assert_eq!((&*name, object.is_none()), ("inspect", true));
        let mut scan = Scan::new(r#"{"reset":{"forgot":true}}"#);
        let (name, object) = scan.tag().unwrap();
        assert_eq!(&*name, "reset");
        scan.skip().unwrap();
        object.unwrap().close(&mut scan).unwrap();
        scan.end().unwrap();
        let mut scan = Scan::new(r#"{"reset":{},"peek":{}}"#);
        let (_, object) = scan.tag().unwrap();
        scan.skip().unwrap();
        assert!(object.unwrap().close(&mut scan).is_err());
        assert!(Scan::new("{}").tag().is_err());
    }
}
