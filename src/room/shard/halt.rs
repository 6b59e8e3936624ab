//! An operator's state for the room (`PUT {prefix}/admin/rules/{rule}/state`),
//! held by each shard, exactly, as a global quota's parts hold theirs:
//!
//! - **paused**: no session starts, neither a newcomer's while there is
//!   room nor a ticket's whose turn came; newcomers still take tickets in
//!   arrival order and every ticket keeps its place. Offers made before
//!   the pause stand still (they neither lapse nor can be claimed).
//! - **closed**: the same, and newcomers get no ticket, tickets nothing.
//!
//! Either way sessions already started run on until they end, and when the
//! shard opens again it serves its queue from where it stood, within its
//! places and its rate: the offers that stood still get a whole grace
//! again, and places freed meanwhile are offered in order.

use super::{Change, Shard};
use crate::control::{Control, RuleState};

impl Shard {
    /// Sets the operator's state from `now`; answers the state it replaced
    /// (`None`: open) and what storage must write.
    pub fn set_control(
        &mut self,
        now: u64,
        control: Control,
        draw: &mut dyn FnMut() -> u64,
    ) -> (Option<Control>, Vec<Change>) {
        self.operate(now, draw, |shard, out| {
            let previous = shard.control.take();
            shard.control = Some(control).filter(Control::halts);
            if shard.control != previous {
                out.push(Change::Control(shard.control.clone()));
            }
            if previous.is_some() && shard.control.is_none() {
                shard.resume(now, out);
            }
            previous
        })
    }

    /// The operator's state when it is not open.
    pub fn control(&self) -> Option<&Control> {
        self.control.as_ref()
    }

    pub(super) fn closed(&self) -> bool {
        self.control
            .as_ref()
            .is_some_and(|c| c.state == RuleState::Closed)
    }

    /// Opened again: the offers that stood still get a whole grace from
    /// now (their holders could not claim them while halted), then the
    /// queue moves on. The offers still count as sessions starting now,
    /// so the rate holds as it did before the halt.
    fn resume(&mut self, now: u64, out: &mut Vec<Change>) {
        let until_ms = now.saturating_add(self.terms.grace_ms);
        for (place, offer) in self.offers.iter_mut() {
            offer.until_ms = offer.until_ms.max(until_ms);
            out.push(Change::Offer {
                place,
                offer: *offer,
            });
        }
        self.offer(now, out);
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Holding, Number, Session, Stored, Terms, Turn, BEAT_MS};
    use super::*;

    const MIN: u64 = 60_000;

    fn terms(places: u32) -> Terms {
        Terms {
            places,
            per_minute: 100,
            session_ms: 5 * MIN,
            grace_ms: 40_000,
            opens_at_ms: None,
        }
    }

    fn control(state: RuleState) -> Control {
        Control {
            state,
            reason: "stock count".into(),
            set_ms: 1,
        }
    }

    fn visit(shard: &mut Shard, now: u64, holding: Holding) -> Turn {
        shard.visit(now, holding, &mut || 7).0
    }

    fn session(turn: Turn) -> Session {
        match turn {
            Turn::Session(s) => s,
            other => panic!("expected a session, got {other:?}"),
        }
    }

    fn waits(number: Number, fresh: bool) -> Turn {
        Turn::Wait { number, fresh }
    }

    #[test]
    fn paused_nobody_gets_in_newcomers_queue_and_sessions_run_on() {
        let mut shard = Shard::new(terms(3));
        let a = session(visit(&mut shard, 0, Holding::Nothing));
        let (previous, changes) = shard.set_control(10, control(RuleState::Paused), &mut || 7);
        assert_eq!(previous, None);
        assert!(changes.contains(&Change::Control(Some(control(RuleState::Paused)))));
        // Two places free, but nobody passes: each newcomer queues in order.
        let b = visit(&mut shard, 20, Holding::Nothing);
        assert_eq!(b, waits(Number::Place(1), true));
        assert_eq!(
            visit(&mut shard, 21, Holding::Nothing),
            waits(Number::Place(2), true)
        );
        // The session runs on, renewed; ended, its place is offered to nobody.
        let renewed = session(visit(&mut shard, MIN, Holding::Session(a.id)));
        assert_eq!(renewed.expires_ms, 6 * MIN);
        let (ended, changes) = shard.end(MIN + 1, a.id, &mut || 7);
        assert!(ended);
        assert!(!changes.iter().any(|c| matches!(c, Change::Offer { .. })));
        assert_eq!(
            visit(&mut shard, MIN + 2, Holding::Ticket(Number::Place(1))),
            waits(Number::Place(1), false),
            "the ticket keeps its place"
        );
        let status = shard.status();
        assert_eq!((status.active, status.offered, status.waiting()), (0, 0, 2));
        assert_eq!(status.control, Some(control(RuleState::Paused)));
        assert_eq!(shard.next_alarm(), None, "nothing falls due while paused");
        // Opened: the queue is served from where it stood, in order.
        let (previous, changes) = shard.set_control(MIN + 3, control(RuleState::Open), &mut || 7);
        assert_eq!(previous, Some(control(RuleState::Paused)));
        assert!(changes.contains(&Change::Control(None)));
        let offered: Vec<u64> = changes
            .iter()
            .filter_map(|c| match c {
                Change::Offer { place, .. } => Some(*place),
                _ => None,
            })
            .collect();
        assert_eq!(offered, [1, 2]);
        let b = session(visit(
            &mut shard,
            MIN + 4,
            Holding::Ticket(Number::Place(1)),
        ));
        assert_eq!(b.id, 1);
        assert_eq!(shard.status().control, None);
    }

    #[test]
    fn an_offer_made_before_a_pause_stands_still_and_gets_a_whole_grace_after() {
        let mut shard = Shard::new(terms(1));
        let a = session(visit(&mut shard, 0, Holding::Nothing));
        let b = Number::Place(1);
        assert_eq!(visit(&mut shard, 1, Holding::Nothing), waits(b, true));
        shard.end(10, a.id, &mut || 7);
        assert_eq!(shard.status().offered, 1, "b's turn came");
        shard.set_control(20, control(RuleState::Paused), &mut || 7);
        // Long past its grace: b cannot claim it, nor lose it.
        assert!(!shard
            .tick(100_000, &mut || 7)
            .iter()
            .any(|c| matches!(c, Change::OfferGone { .. })));
        assert_eq!(
            visit(&mut shard, 100_001, Holding::Ticket(b)),
            waits(b, false)
        );
        assert_eq!(shard.status().active, 0);
        let (_, changes) = shard.set_control(200_000, control(RuleState::Open), &mut || 7);
        assert!(changes.iter().any(|c| matches!(
            c,
            Change::Offer { place: 1, offer } if offer.until_ms == 240_000
        )));
        assert_eq!(shard.next_alarm(), Some(200_000 + BEAT_MS));
        assert_eq!(
            session(visit(&mut shard, 239_999, Holding::Ticket(b))).id,
            1
        );
    }

    #[test]
    fn closed_nobody_new_gets_anything_sessions_run_on_and_opening_serves_the_queue() {
        let mut shard = Shard::new(terms(1));
        let a = session(visit(&mut shard, 0, Holding::Nothing));
        let b = Number::Place(1);
        assert_eq!(visit(&mut shard, 1, Holding::Nothing), waits(b, true));
        shard.set_control(2, control(RuleState::Closed), &mut || 7);
        let before = shard.counters();
        assert_eq!(visit(&mut shard, 3, Holding::Nothing), Turn::Closed);
        assert_eq!(visit(&mut shard, 4, Holding::Ticket(b)), Turn::Closed);
        assert_eq!(visit(&mut shard, 5, Holding::Session(99)), Turn::Closed);
        assert_eq!(shard.counters(), before, "no ticket was handed out");
        // The session runs on, and a copy of its ticket gets that session.
        assert_eq!(
            session(visit(&mut shard, 6, Holding::Session(a.id))).id,
            a.id
        );
        assert_eq!(
            session(visit(&mut shard, 7, Holding::Ticket(Number::Place(0)))).id,
            a.id
        );
        shard.end(8, a.id, &mut || 7);
        assert_eq!(shard.status().offered, 0);
        // Closed then paused then open: the queue as it was.
        shard.set_control(9, control(RuleState::Paused), &mut || 7);
        assert_eq!(visit(&mut shard, 10, Holding::Ticket(b)), waits(b, false));
        shard.set_control(11, control(RuleState::Open), &mut || 7);
        assert_eq!(session(visit(&mut shard, 12, Holding::Ticket(b))).id, 1);
    }

    #[test]
    fn a_state_is_written_once_and_read_back() {
        let mut shard = Shard::new(terms(1));
        let (previous, changes) = shard.set_control(0, control(RuleState::Open), &mut || 7);
        assert_eq!(previous, None);
        assert!(
            !changes.iter().any(|c| matches!(c, Change::Control(_))),
            "open was open"
        );
        shard.set_control(1, control(RuleState::Closed), &mut || 7);
        let (_, changes) = shard.set_control(2, control(RuleState::Closed), &mut || 7);
        assert!(!changes.iter().any(|c| matches!(c, Change::Control(_))));
        let stored = Stored {
            counters: shard.counters(),
            control: Some(control(RuleState::Closed)),
            ..Stored::default()
        };
        let back = Shard::restore(terms(1), stored);
        assert_eq!(back.control(), Some(&control(RuleState::Closed)));
        let open = Shard::restore(
            terms(1),
            Stored {
                control: Some(control(RuleState::Open)),
                ..Stored::default()
            },
        );
        assert_eq!(open.control(), None, "an open row means no state");
    }
}
