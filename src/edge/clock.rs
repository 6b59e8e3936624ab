//! The time, the one thing every part of the edge reads and the pure
//! modules take as an argument.

/// Milliseconds since the epoch from JS `Date.now()`; `SystemTime` panics
/// in wasm. Inside Workers it only advances across I/O.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}
