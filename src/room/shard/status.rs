//! What a shard tells isolates of itself, with each answer: enough to show
//! a waiting visitor its position, its estimated wait and the operator's
//! state without calling the shard again.

use serde::Serialize;

use super::{lottery, Counters, Number, RATE_WINDOW_MS};
use crate::control::{Control, RuleState};

/// A shard as isolates see it, to show positions without calling it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    pub counters: Counters,
    pub places: u32,
    pub per_minute: u32,
    pub session_ms: u64,
    /// Live sessions.
    pub active: u32,
    /// Live offers not yet claimed.
    pub offered: u32,
    /// Sessions started in the last 60 s.
    pub admitted: u32,
    /// The operator's state when it is not open: a paused shard shows its
    /// waiting visitors that it is, a closed one turns them away, both
    /// from an isolate's view without a call. (A shard of an earlier
    /// version sends none: open.)
    pub control: Option<Control>,
}

impl Status {
    /// Tickets behind "now serving", abandoned ones included; the whole
    /// pre-queue before opening.
    pub fn waiting(&self) -> u64 {
        let c = &self.counters;
        if c.opened {
            c.next.saturating_sub(c.serving)
        } else {
            c.pre.saturating_sub(c.start)
        }
    }

    /// The place `number` holds, once it has one.
    pub fn place_of(&self, number: Number) -> Option<u64> {
        self.counters.place_of(number)
    }

    /// Sessions the shard starts per minute, as far as it can tell: the
    /// last minute's, or while nobody started one, a full shard's turnover
    /// if every session ran its length, within the rate.
    pub fn pace_per_minute(&self) -> u64 {
        let recent = u64::from(self.admitted) + u64::from(self.offered);
        if recent > 0 {
            return recent;
        }
        let turnover = u64::from(self.places) * RATE_WINDOW_MS / self.session_ms.max(1);
        turnover.clamp(1, u64::from(self.per_minute.max(1)))
    }

    /// The operator's state when it is `state`.
    pub fn in_state(&self, state: RuleState) -> Option<&Control> {
        self.control.as_ref().filter(|c| c.state == state)
    }

    /// Seconds until `ahead` more places are offered, at the pace above.
    pub fn wait_s(&self, ahead: u64) -> u64 {
        (ahead.saturating_mul(60)).div_ceil(self.pace_per_minute())
    }
}

impl Counters {
    /// The place `number` holds, once it has one: a number of a line
    /// started before this one holds none.
    pub fn place_of(&self, number: Number) -> Option<u64> {
        let start = self.start;
        match number {
            Number::Place(p) if (start..self.next).contains(&p) => Some(p),
            Number::Pre(j) if self.opened && j >= start => {
                let drawn = lottery::place(self.seed, self.pre.saturating_sub(start), j - start);
                drawn.map(|p| start + p)
            }
            _ => None,
        }
    }
}

/// A status for other modules' tests: open, `active` sessions of 3 places,
/// 6 started in the last minute.
#[cfg(test)]
impl Status {
    pub(crate) fn sample(serving: u64, next: u64, active: u32) -> Status {
        Status {
            counters: Counters {
                next,
                serving,
                pre: 0,
                opened: true,
                seed: 0,
                ..Counters::default()
            },
            places: 3,
            per_minute: 15,
            session_ms: 300_000,
            active,
            offered: 0,
            admitted: 6,
            control: None,
        }
    }
}
