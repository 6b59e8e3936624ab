//! Small storage helpers the Durable Objects share.

use worker::{js_sys, wasm_bindgen::JsValue, Result, ScheduledTime, SqlStorageValue, Storage};

/// Timestamps, limits and counts are far below 2^53, so they bind as exact
/// integers; saturating keeps a corrupt value from wrapping negative.
pub fn int(value: u64) -> SqlStorageValue {
    SqlStorageValue::Integer(i64::try_from(value).unwrap_or(i64::MAX))
}

/// Sets the object's alarm for an absolute time (a number would be an
/// offset from now).
pub async fn set_alarm_at(storage: &Storage, at_ms: u64) -> Result<()> {
    let when = js_sys::Date::new(&JsValue::from_f64(at_ms as f64));
    storage.set_alarm(ScheduledTime::new(when)).await
}
