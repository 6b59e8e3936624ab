//! Watching a sale: a global quota's figures, summed from its parts. Each
//! part counts its admissions and refusals per second over the last five
//! minutes ([`Seconds`], bounded memory); the admin API adds the parts up
//! and works out the current rate and the time to sell out at it
//! ([`view`]). Pure, with the time passed in.

pub mod seconds;
pub mod view;

pub use seconds::{Second, Seconds, SPAN_S};
