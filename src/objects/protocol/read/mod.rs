//! The calls and replies between the worker and its key objects and hubs read from
//! their JSON by hand, over [`super::scan`], instead of by serde's derived
//! readers: the same JSON, a fraction of the wasm (BENCHMARKS.md). Each
//! reader takes the fields it knows in any order, skips the others, and
//! answers [`Malformed`](crate::input::scan::Malformed) for a missing field, a
//! value of the wrong kind or out of range, or anything after the value:
//! never a panic.

mod call;
mod hub;
mod reply;

#[cfg(test)]
pub(super) use call::policy;
