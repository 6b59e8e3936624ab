//! Small storage helpers the Durable Objects share.

use serde::Deserialize;
use worker::wasm_bindgen::closure::Closure;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::{console_error, js_sys, Result, SqlStorageValue, State};

/// A row of one JSON text column, `body`: a key's override and state, a
/// room shard's state. One row type, so one deserializer in the wasm.
#[derive(Deserialize)]
pub struct BodyRow {
    pub body: String,
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
