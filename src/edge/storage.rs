//! Small storage helpers the Durable Objects share.

use worker::wasm_bindgen::closure::Closure;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{console_error, js_sys, Error, Result, SqlCursor, SqlStorageValue, State};

/// A row type read from the runtime's raw rows: its fields from the
/// query's columns, in the query's order.
///
/// Not `SqlCursor::to_array`, which reads each row as an object through
/// `serde_wasm_bindgen` with a derived reader per row type (BENCHMARKS.md).
pub trait FromRow: Sized {
    fn read(columns: &mut Columns) -> Result<Self>;
}

/// A row type declared once: `row! { struct Name { field: Type, .. } }`
/// declares the struct and its [`FromRow`]; `row! { Name { field, .. } }`
/// reads a struct declared elsewhere. Each field is the next column, read
/// as its type says ([`Column`]).
macro_rules! row {
    ($(#[$m:meta])* $vis:vis struct $name:ident { $($(#[$fm:meta])* $fvis:vis $field:ident: $ty:ty),* $(,)? }) => {
        $(#[$m])* $vis struct $name { $($(#[$fm])* $fvis $field: $ty),* }
        $crate::edge::storage::row! { $name { $($field),* } }
    };
    ($name:ident { $($field:ident),* $(,)? }) => {
        impl $crate::edge::storage::FromRow for $name {
            fn read(c: &mut $crate::edge::storage::Columns) -> worker::Result<$name> {
                use $crate::edge::storage::Column;
                Ok($name { $($field: Column::read(c)?),* })
            }
        }
    };
}
pub(crate) use row;

/// A column's type, as [`row!`] reads it.
pub trait Column: Sized {
    fn read(columns: &mut Columns) -> Result<Self>;
}

/// Each column type read by its `Columns` method.
macro_rules! columns {
    ($($ty:ty => $read:ident),*) => {
        $(impl Column for $ty {
            fn read(columns: &mut Columns) -> Result<Self> {
                columns.$read()
            }
        })*
    };
}

columns!(String => text, Option<String> => text_or_null, u64 => whole,
    Option<u64> => whole_or_null, u32 => small, Option<u32> => small_or_null);

/// The columns of one row, read in order.
pub struct Columns {
    values: std::vec::IntoIter<SqlStorageValue>,
    index: usize,
}

impl Columns {
    fn next(&mut self) -> (usize, Option<SqlStorageValue>) {
        self.index += 1;
        (self.index - 1, self.values.next())
    }

    /// A text column.
    #[inline(never)]
    pub fn text(&mut self) -> Result<String> {
        match self.next() {
            (_, Some(SqlStorageValue::String(text))) => Ok(text),
            (index, other) => Err(unexpected(index, "text", other)),
        }
    }

    /// A text column that may be null.
    #[inline(never)]
    pub fn text_or_null(&mut self) -> Result<Option<String>> {
        match self.next() {
            (_, Some(SqlStorageValue::Null)) => Ok(None),
            (_, Some(SqlStorageValue::String(text))) => Ok(Some(text)),
            (index, other) => Err(unexpected(index, "text or null", other)),
        }
    }

    /// An integer column of a time, a count or an id (never negative).
    #[inline(never)]
    pub fn whole(&mut self) -> Result<u64> {
        match self.next() {
            (_, Some(SqlStorageValue::Integer(n))) if n >= 0 => Ok(n.unsigned_abs()),
            (index, other) => Err(unexpected(index, "a whole number", other)),
        }
    }

    /// An integer column that may be null.
    #[inline(never)]
    pub fn whole_or_null(&mut self) -> Result<Option<u64>> {
        match self.next() {
            (_, Some(SqlStorageValue::Null)) => Ok(None),
            (_, Some(SqlStorageValue::Integer(n))) if n >= 0 => Ok(Some(n.unsigned_abs())),
            (index, other) => Err(unexpected(index, "a whole number or null", other)),
        }
    }

    /// An integer column of a count that fits 32 bits.
    #[inline(never)]
    pub fn small(&mut self) -> Result<u32> {
        let index = self.index;
        u32::try_from(self.whole()?).map_err(|_| unexpected(index, "a 32-bit count", None))
    }

    /// A 32-bit count that may be null.
    #[inline(never)]
    pub fn small_or_null(&mut self) -> Result<Option<u32>> {
        let index = self.index;
        match self.whole_or_null()? {
            None => Ok(None),
            Some(n) => u32::try_from(n)
                .map(Some)
                .map_err(|_| unexpected(index, "a 32-bit count or null", None)),
        }
    }
}

fn unexpected(index: usize, wanted: &str, got: Option<SqlStorageValue>) -> Error {
    let got = match got {
        None => "nothing",
        Some(SqlStorageValue::Null) => "null",
        Some(SqlStorageValue::Boolean(_)) => "a boolean",
        Some(SqlStorageValue::Integer(_)) => "an integer out of range",
        Some(SqlStorageValue::Float(_)) => "a float",
        Some(SqlStorageValue::String(_)) => "text",
        Some(SqlStorageValue::Blob(_)) => "a blob",
    };
    Error::RustError(format!(
        "stored row: column {index} should be {wanted}, is {got}"
    ))
}

/// Every row the cursor answers. The generic part is only the loop: the
/// runtime's rows are fetched by one function for every row type.
pub fn rows<T: FromRow>(cursor: &SqlCursor) -> Result<Vec<T>> {
    let raw = raw_rows(cursor)?;
    let mut rows = Vec::with_capacity(raw.len());
    for values in raw {
        rows.push(T::read(&mut Columns {
            values: values.into_iter(),
            index: 0,
        })?);
    }
    Ok(rows)
}

/// A loop, not `collect` into a `Result`, whose adapter is larger.
#[inline(never)]
fn raw_rows(cursor: &SqlCursor) -> Result<Vec<Vec<SqlStorageValue>>> {
    let mut rows = Vec::new();
    for row in cursor.raw() {
        rows.push(row?);
    }
    Ok(rows)
}

row! {
    /// A row of one JSON text column, `body`: a key's override and state, a
    /// room shard's state.
    pub struct BodyRow {
        pub body: String,
    }
}

row! {
    /// A count (`SELECT COUNT(*) ...`).
    pub struct Count {
        pub n: u64,
    }
}

/// Timestamps, limits and counts are far below 2^53, so they bind as exact
/// integers; saturating keeps a corrupt value from wrapping negative.
pub fn int(value: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(i64::try_from(value).unwrap_or(i64::MAX))
}

/// Sets the object's alarm for an absolute time (a number would be an
/// offset from now), without waiting for the write: like every storage
/// write, the output gate holds the object's answers until the alarm is
/// stored, so nobody learns of a decision whose alarm could be lost.
/// Awaiting it as well only delayed the answer (a new key's first request
/// paid most of its extra cost over a JavaScript object there, see
/// BENCHMARKS.md). A rejected write is logged by one handler the isolate
/// keeps, rather than a future spawned per alarm; the runtime then breaks
/// the output gate and resets the object, as for any failed write.
pub fn set_alarm_at(state: &State, at_ms: u64) -> Result<()> {
    let when = js_sys::Date::new(&JsValue::from_f64(at_ms as f64));
    let promise = state
        .as_raw()
        .storage()?
        .set_alarm(when, JsValue::NULL.unchecked_into())?;
    ALARM_FAILED.with(|log| {
        // The promise `catch` answers settles either way; nobody waits on it.
        let _ = promise.catch(log);
    });
    Ok(())
}

thread_local! {
    static ALARM_FAILED: Closure<dyn FnMut(JsValue)> =
        Closure::new(|e: JsValue| console_error!("setting an alarm failed: {e:?}"));
}
