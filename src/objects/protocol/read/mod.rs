//! The calls and replies between the worker and its key objects and hubs read from
//! their JSON by hand, over [`super::scan`], instead of by serde's derived
//! readers: the same JSON, a fraction of the wasm (BENCHMARKS.md). Each
//! reader takes the fields it knows in any order, skips the others, and
//! answers [`Malformed`](super::scan::Malformed) for a missing field, a
//! value of the wrong kind or out of range, or anything after the value:
//! never a panic.

mod call;
mod hub;
mod reply;

#[cfg(test)]
pub(super) use call::policy;

use super::scan::{need, Malformed, Read, Scan};
use crate::control::{Control, RuleState};

/// A rule's state, as [`Control`] is written.
fn control(scan: &mut Scan) -> Read<Control> {
    let (mut state, mut reason, mut set_ms) = (None, String::new(), 0);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "state" => state = Some(RuleState::named(&scan.str()?).ok_or(Malformed)?),
            "reason" => reason = scan.string()?,
            "set_ms" => set_ms = scan.u64()?,
            _ => scan.skip()?,
        }
    }
    Ok(Control {
        state: need(state)?,
        reason,
        set_ms,
    })
}
