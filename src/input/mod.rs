//! Reading what people write, shared by the config (`src/config/`) and the
//! HTTP API (`src/http/`) so that both read a duration, and word a shape
//! error, the same way; neither imports the other for it.

pub mod duration;
pub mod instant;
pub mod tree;
pub mod unique_keys;
pub mod words;
