//! Reading what people write, shared by the config (`src/config/`) and the
//! HTTP API (`src/http/`) so that both read a duration, and word a shape
//! error, the same way; neither imports the other for it. And [`scan`], the
//! JSON reader for what the worker and its objects say to each other
//! (`src/objects/protocol/`, `src/room/protocol.rs`).

pub mod duration;
pub mod instant;
pub mod scan;
pub mod tree;
pub mod unique_keys;
pub mod words;
