//! The property and model tests: one integration-test binary, so the crate
//! is linked once for all of them and libtest runs them side by side.
//!
//! Add a test as a module here (`tests/props/<name>.rs`), not as a new
//! file directly under `tests/` (each of those is a binary of its own).
//! proptest keeps a module's regressions in
//! `tests/proptest-regressions/<name>.txt`. docs/operations.md "Tests".

mod support;

mod blocks;
mod control;
mod fence;
mod layers;
mod lease;
mod object_names;
mod overrides;
mod pages;
mod reservation;
mod room;
mod room_join;
mod sale;
mod sliding_log;
mod spread;
mod stock;
mod top;
