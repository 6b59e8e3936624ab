//! Sluice: an exact sliding-window rate limiter for Cloudflare Workers. The
//! map of the crate, from the pure core out to the Workers glue (a module
//! imports only those listed before it, but `edge`, which runs them all):
//!
//! - [`bounds`]: every bound the config and the APIs share, written once.
//! - [`short_sort`]: a stable sort for short lists.
//! - [`input`]: the one JSON reader, JSON trees with field paths, durations.
//! - [`json`]: the JSON written, and [`wire!`], a wire type declared once.
//! - [`limit`]: the algorithms (sliding log, fixed window, GCRA, leases,
//!   split shares, spread retry times), with time passed in.
//! - [`control`]: a rule's live state (open, paused, closed).
//! - [`sale`]: a global quota's sale figures.
//! - [`ledger`]: the one key a key object holds: decides, says what to write.
//! - [`http`]: the HTTP surface (keys, paths, JWTs, the decision API's
//!   bodies, admin routes' parameters, RateLimit fields, problems).
//! - [`isolate`]: what one isolate keeps between requests, bounded.
//! - [`objects`]: the objects' names and what they are asked and answer.
//! - [`config`]: the `SLUICE` var validated into rules, and lookups in them.
//! - [`gate`]: a matched request decided without I/O: the calls, the answer.
//! - [`room`]: waiting rooms: shards, tickets, the page, their protocol.
//! - `edge` (wasm32 only): the fetch handler and the Durable Objects.
//!
//! Where each part's state lives and how a request travels: ARCHITECTURE.md.

pub mod bounds;
pub mod config;
pub mod control;
pub mod gate;
pub mod http;
pub mod input;
pub mod isolate;
pub mod json;
pub mod ledger;
pub mod limit;
pub mod objects;
pub mod room;
pub mod sale;
pub mod short_sort;

#[cfg(target_arch = "wasm32")]
pub mod edge;
