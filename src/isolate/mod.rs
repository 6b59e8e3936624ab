//! What one isolate keeps between requests, pure and bounded: the copy of
//! the manual bans, the copy of the rule states read from KV, the refusal
//! cache, the outbox of counts, top refused keys and started bans it
//! reports to the hubs, the admin lockout, the count of object calls,
//! the admission blocks it holds, its calls in flight that may change
//! them, and how hot each key is.
//! `edge/isolate.rs` holds one of each per isolate. Also how the admin API
//! merges what the hubs answer (`stats`, `pages`).

pub mod banlist;
pub mod blocks;
pub mod calls;
pub mod flights;
pub mod heat;
pub mod lockout;
pub mod pages;
pub mod refusals;
pub mod report;
pub mod states;
pub mod stats;
pub mod top;
