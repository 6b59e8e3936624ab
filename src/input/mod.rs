//! Reading what people and the objects write: [`scan`], the one JSON
//! reader (object calls, stored rows and cursors read over it directly);
//! [`tree`], JSON read into a tree and types out of it with the path of
//! the first error in the writer's words (the config, API bodies, JWTs);
//! durations and instants as the config and the API write them. Shared so
//! that `config` and `http` read the same way without importing each
//! other.

pub mod duration;
pub mod instant;
pub mod scan;
pub mod tree;
