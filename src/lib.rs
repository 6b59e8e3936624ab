//! Sluice: an exact sliding-window rate limiter for Cloudflare Workers.
//!
//! `limit` holds the algorithms (pure, host-tested); everything that touches
//! the Workers runtime lives in `edge`, compiled only for wasm32.

pub mod limit;
