//! The Durable Objects' side that is pure: how objects are named.

pub mod name;
