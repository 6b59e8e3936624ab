//! Waiting rooms: a rule that lets at most `active` visitors in at once and
//! at most `per_minute` new ones in any 60 s, and queues the rest in order
//! with a page that tells them where they stand.
//!
//! Pure, like `limit/` and `ledger/`: `shard` is one shard's queue and
//! sessions with the clock passed in, `lottery` the draw that orders a
//! pre-queue at opening. `edge/room/` runs a shard in a Durable Object and
//! carries visitors' requests to it.

pub mod arrival;
pub mod challenge;
pub mod cookie;
pub mod figures;
pub mod lottery;
pub mod page;
pub mod protocol;
pub mod shard;
pub mod views;
pub mod visit;
