//! Sluice: an exact sliding-window rate limiter for Cloudflare Workers.
//!
//! `limit` holds the algorithms (pure, host-tested); everything that touches
//! the Workers runtime lives in `edge`, compiled only for wasm32.

pub mod config;
pub mod control;
pub mod gate;
pub mod http;
pub mod input;
pub mod isolate;
pub mod json;
pub mod ledger;
pub mod limit;
pub mod limits;
pub mod objects;
pub mod order;
pub mod room;
pub mod sale;

#[cfg(target_arch = "wasm32")]
pub mod edge;
