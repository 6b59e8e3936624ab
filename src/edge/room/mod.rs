//! Waiting rooms at the edge: `object` runs a shard (`crate::room::shard`)
//! in a Durable Object with `sql` for its tables, `visit` carries a
//! visitor's request to its shard and on to the origin or the waiting
//! page, `admin` answers operators.

pub mod admin;
mod object;
mod sql;
mod visit;

pub use object::Room;
pub use visit::serve;
