//! JSON written by hand into one [`Text`] whose methods are not generic: a
//! type costs one call per field, not a copy of a serializer (BENCHMARKS.md).
//! The text is what `serde_json::to_string` writes of the same value (compact,
//! keys in the order given, strings escaped as serde_json escapes them).

use serde_json::{Map, Number, Value};

/// A value that writes itself as JSON.
pub trait Write {
    fn write(&self, out: &mut Text);
}

/// `value` as compact JSON.
pub fn to_string<T: Write + ?Sized>(value: &T) -> String {
    let mut out = Text::with_capacity(128);
    value.write(&mut out);
    out.0
}

/// JSON being written. A text made by [`Text::sorted`] writes every
/// object's fields in the order of their keys, as `serde_json` writes a
/// value first made into a `Value` (whose map keeps its keys sorted): the
/// values [`crate::json!`] holds.
#[derive(Default)]
pub struct Text(String, bool);

impl Text {
    pub fn with_capacity(bytes: usize) -> Text {
        Text(String::with_capacity(bytes), false)
    }

    /// A text whose objects' fields are sorted by key.
    pub fn sorted() -> Text {
        Text(String::new(), true)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }

    /// A string, quoted and escaped as `serde_json` does: `"`, `\` and
    /// the control characters, nothing else.
    #[inline(never)]
    pub fn str(&mut self, value: &str) {
        let out = &mut self.0;
        out.push('"');
        let mut run = 0;
        for (at, byte) in value.bytes().enumerate() {
            let escape = match byte {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\x08' => "\\b",
                b'\t' => "\\t",
                b'\n' => "\\n",
                b'\x0c' => "\\f",
                b'\r' => "\\r",
                0..=0x1f => "",
                _ => continue,
            };
            out.push_str(&value[run..at]);
            run = at + 1;
            if escape.is_empty() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0xf)]));
            } else {
                out.push_str(escape);
            }
        }
        out.push_str(&value[run..]);
        out.push('"');
    }

    #[inline(never)]
    pub fn u64(&mut self, value: u64) {
        self.0.push_str(itoa::Buffer::new().format(value));
    }

    #[inline(never)]
    pub fn i64(&mut self, value: i64) {
        self.0.push_str(itoa::Buffer::new().format(value));
    }

    pub fn bool(&mut self, value: bool) {
        self.raw(if value { "true" } else { "false" });
    }

    pub fn null(&mut self) {
        self.raw("null");
    }

    /// Text that is JSON already.
    #[inline(never)]
    pub fn raw(&mut self, json: &str) {
        self.0.push_str(json);
    }

    /// An object, its fields written by [`Fields::field`] and closed by
    /// [`Fields::end`].
    pub fn object(&mut self) -> Fields<'_> {
        self.raw("{");
        Fields {
            out: self,
            first: true,
            placed: Vec::new(),
        }
    }

    /// A list of `items`.
    pub fn list<T: Write>(&mut self, items: &[T]) {
        self.raw("[");
        for (at, item) in items.iter().enumerate() {
            if at > 0 {
                self.raw(",");
            }
            item.write(self);
        }
        self.raw("]");
    }

    /// An enum's variant with values, as serde tags it by default: an
    /// object whose one key is the variant's name.
    pub fn tagged<T: Write + ?Sized>(&mut self, name: &'static str, value: &T) {
        let mut fields = self.object();
        fields.field(name, value);
        fields.end();
    }
}

/// The fields of an object being written.
pub struct Fields<'a> {
    out: &'a mut Text,
    first: bool,
    /// In a sorted text: each field's key and where it is in the text
    /// (its key's quote to its value's end; the end is 0 until the field
    /// after it starts).
    placed: Vec<(&'static str, usize, usize)>,
}

impl Fields<'_> {
    pub fn field<T: Write + ?Sized>(&mut self, key: &'static str, value: &T) {
        self.key(key);
        value.write(self.out);
    }

    /// The text to write field `key`'s value into.
    pub fn at(&mut self, key: &'static str) -> &mut Text {
        self.key(key);
        self.out
    }

    /// The comma before any but the first field, and the key.
    #[inline(never)]
    pub fn key(&mut self, key: &'static str) {
        self.comma();
        if self.out.1 {
            self.placed.push((key, self.out.len(), 0));
        }
        self.out.str(key);
        self.out.raw(":");
    }

    /// A key written where it comes, never moved: a `Value`'s map, whose
    /// keys come in order already.
    fn key_in_place(&mut self, key: &str) {
        self.comma();
        self.out.str(key);
        self.out.raw(":");
    }

    fn comma(&mut self) {
        self.close();
        if !self.first {
            self.out.raw(",");
        }
        self.first = false;
    }

    /// Marks where the last placed field ends.
    fn close(&mut self) {
        let at = self.out.len();
        if let Some(last) = self.placed.last_mut().filter(|last| last.2 == 0) {
            last.2 = at;
        }
    }

    /// Closes the object; in a sorted text, with its fields put in the
    /// order of their keys first.
    #[inline(never)]
    pub fn end(mut self) {
        self.close();
        if self.placed.windows(2).any(|pair| pair[0].0 > pair[1].0) {
            let (from, to) = (self.placed[0].1, self.placed[self.placed.len() - 1].2);
            crate::short_sort::sort_by_key(&mut self.placed, |&(key, _, _)| key);
            let mut sorted = String::with_capacity(to - from);
            for &(_, start, end) in &self.placed {
                if !sorted.is_empty() {
                    sorted.push(',');
                }
                sorted.push_str(&self.out.0[start..end]);
            }
            self.out.0.replace_range(from..to, &sorted);
        }
        self.out.raw("}");
    }
}

impl Write for str {
    fn write(&self, out: &mut Text) {
        out.str(self);
    }
}

impl Write for String {
    fn write(&self, out: &mut Text) {
        out.str(self);
    }
}

impl Write for bool {
    fn write(&self, out: &mut Text) {
        out.bool(*self);
    }
}

macro_rules! unsigned {
    ($($t:ty),*) => {$(
        impl Write for $t {
            fn write(&self, out: &mut Text) {
                out.u64(u64::from(*self));
            }
        }
    )*};
}
unsigned!(u8, u16, u32, u64);

impl Write for usize {
    fn write(&self, out: &mut Text) {
        out.u64(*self as u64);
    }
}

impl Write for i64 {
    fn write(&self, out: &mut Text) {
        out.i64(*self);
    }
}

/// `null`, as serde writes `()`.
impl Write for () {
    fn write(&self, out: &mut Text) {
        out.null();
    }
}

impl Write for i32 {
    fn write(&self, out: &mut Text) {
        out.i64(i64::from(*self));
    }
}

impl<T: Write> Write for Option<T> {
    fn write(&self, out: &mut Text) {
        match self {
            Some(value) => value.write(out),
            None => out.null(),
        }
    }
}

impl<T: Write> Write for Vec<T> {
    fn write(&self, out: &mut Text) {
        out.list(self);
    }
}

impl<T: Write, const N: usize> Write for [T; N] {
    fn write(&self, out: &mut Text) {
        out.list(self);
    }
}

impl<T: Write> Write for [T] {
    fn write(&self, out: &mut Text) {
        out.list(self);
    }
}

impl<T: Write + ?Sized> Write for &T {
    fn write(&self, out: &mut Text) {
        (**self).write(out);
    }
}

/// A pair, as serde writes one: a list of its values.
impl<A: Write, B: Write> Write for (A, B) {
    fn write(&self, out: &mut Text) {
        out.raw("[");
        self.0.write(out);
        out.raw(",");
        self.1.write(out);
        out.raw("]");
    }
}

/// A tuple, as serde writes one: a list of its values.
impl<A: Write, B: Write, C: Write> Write for (A, B, C) {
    fn write(&self, out: &mut Text) {
        out.raw("[");
        self.0.write(out);
        out.raw(",");
        self.1.write(out);
        out.raw(",");
        self.2.write(out);
        out.raw("]");
    }
}

impl Write for Number {
    fn write(&self, out: &mut Text) {
        // `Number`'s `Display` is its JSON: itoa for integers, and for a
        // float the shortest text that reads back, as serde_json writes.
        out.raw(&self.to_string());
    }
}

impl Write for Map<String, Value> {
    fn write(&self, out: &mut Text) {
        let mut fields = out.object();
        for (key, value) in self {
            fields.key_in_place(key);
            value.write(fields.out);
        }
        fields.end();
    }
}

impl Write for Value {
    fn write(&self, out: &mut Text) {
        match self {
            Value::Null => out.null(),
            Value::Bool(b) => out.bool(*b),
            Value::Number(n) => n.write(out),
            Value::String(s) => out.str(s),
            Value::Array(items) => out.list(items),
            Value::Object(map) => map.write(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn both<T: Write + serde::Serialize + ?Sized>(value: &T) -> (String, String) {
        (to_string(value), serde_json::to_string(value).unwrap())
    }

    #[test]
    fn escapes_as_serde_json_does() {
        for text in [
            "",
            "plain",
            "q\"b\\s",
            "\x00\x01\x08\t\n\x0b\x0c\r\x1f\x7f",
            "é ü 🦀 \u{2028}",
        ] {
            let (ours, theirs) = both(text);
            assert_eq!(ours, theirs, "{text:?}");
        }
    }

    #[test]
    fn values_as_serde_json_writes_them() {
        let value = serde_json::json!({
            "b": [1, -2, 3.5, 1e300, 0.1, -0.0, u64::MAX, i64::MIN],
            "a": {"z": null, "y": true, "x": "s\""},
            "": [],
            "e": {},
        });
        let (ours, theirs) = both(&value);
        assert_eq!(ours, theirs);
    }

    proptest! {
        #[test]
        fn any_string_is_written_as_serde_json_writes_it(text in any::<String>()) {
            let (ours, theirs) = both(text.as_str());
            prop_assert_eq!(ours, theirs);
        }

        /// Strings made mostly of what escaping is about: every control
        /// character, quotes, backslashes, DEL, and multi-byte characters
        /// beside ASCII.
        #[test]
        fn strings_to_escape_are_written_as_serde_json_writes_them(text in "[\\x00-\\x1f\"\\\\\\x7fa/é\u{2028}🦀]{0,24}") {
            let (ours, theirs) = both(text.as_str());
            prop_assert_eq!(ours, theirs);
        }

        #[test]
        fn any_number_is_written_as_serde_json_writes_it(u in any::<u64>(), i in any::<i64>(), f in any::<f64>()) {
            prop_assert_eq!(to_string(&u), serde_json::to_string(&u).unwrap());
            prop_assert_eq!(to_string(&i), serde_json::to_string(&i).unwrap());
            if let Some(n) = Number::from_f64(f) {
                let value = Value::Number(n);
                prop_assert_eq!(to_string(&value), serde_json::to_string(&value).unwrap());
            }
        }

        #[test]
        fn optional_lists_are_written_as_serde_json_writes_them(items in proptest::collection::vec(proptest::option::of(any::<u32>()), 0..5)) {
            let (ours, theirs) = both(&items);
            prop_assert_eq!(ours, theirs);
        }
    }
}
