//! The limiting algorithms, as plain Rust with time passed in.
//!
//! Nothing here touches the Workers runtime or reads a clock: every check takes
//! `now_ms` (milliseconds since the Unix epoch) from its caller. That keeps the
//! algorithms testable on the host with an injected clock, and keeps
//! `std::time::SystemTime` (which panics in wasm) out of the worker.

pub mod algorithm;
pub mod fixed_window;
pub mod gcra;
pub mod lease;
pub mod policy;
pub mod retry;
pub mod sliding_log;
pub mod split;
pub mod spread;

pub use algorithm::{Algorithm, Recorded, Spec, Unnamed};
pub use fixed_window::FixedWindow;
pub use policy::{Policy, PolicyError, MAX_LIMIT, MAX_WINDOW_MS};
pub use retry::Retry;
pub use sliding_log::SlidingLog;

/// The outcome of one check: everything the RateLimit and Retry-After headers
/// and the decision API need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u64,
    /// Units still available in the window after this request.
    pub remaining: u64,
    /// Milliseconds until the oldest admission in the window stops counting,
    /// freeing a slot; 0 when the window holds nothing.
    pub reset_ms: u64,
    /// [`Retry::NOW`] when allowed; otherwise how long until this same
    /// request would be admitted if nothing else were admitted meanwhile, or
    /// [`Retry::Never`] when it costs more than the limit. Still named
    /// `retry_after_ms` on the wire, so that a worker and an object of two
    /// versions (during a deploy) agree on every wait but never.
    pub retry: Retry,
}
