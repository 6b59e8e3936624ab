//! The pure side of the Durable Objects: how they are named, what the
//! worker and the objects say to each other, and the queue a key object
//! keeps for callers waiting on a lease. `edge/limiter/` and
//! `edge/hub.rs` run them.

pub mod name;
pub mod protocol;
pub mod queue;
