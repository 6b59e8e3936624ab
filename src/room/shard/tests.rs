use super::*;

const MIN: u64 = 60_000;

fn terms(places: u32, per_minute: u32) -> Terms {
    Terms {
        places,
        per_minute,
        session_ms: 5 * MIN,
        grace_ms: 40_000,
        opens_at_ms: None,
    }
}

fn seed() -> impl FnMut() -> u64 {
    || 7
}

fn session(turn: Turn) -> Session {
    match turn {
        Turn::Session(s) => s,
        other => panic!("expected a session, got {other:?}"),
    }
}

fn ticket(turn: Turn) -> Number {
    match turn {
        Turn::Wait { number, .. } => number,
        other => panic!("expected a ticket, got {other:?}"),
    }
}

#[test]
fn newcomers_pass_while_there_is_room_then_queue() {
    let mut shard = Shard::new(terms(2, 100));
    let a = session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let b = session(shard.visit(1, Holding::Nothing, &mut seed()).0);
    assert_eq!((a.id, b.id), (0, 1));
    assert_eq!(
        shard.visit(2, Holding::Nothing, &mut seed()).0,
        Turn::Wait {
            number: Number::Place(2),
            fresh: true
        }
    );
    assert_eq!(shard.status().waiting(), 1);
}

#[test]
fn an_ended_session_offers_its_place_to_the_next_ticket() {
    let mut shard = Shard::new(terms(1, 100));
    let first = session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let waiting = ticket(shard.visit(1, Holding::Nothing, &mut seed()).0);
    let later = ticket(shard.visit(2, Holding::Nothing, &mut seed()).0);
    // Still waiting: nothing freed.
    assert_eq!(
        shard.visit(3, Holding::Ticket(waiting), &mut seed()).0,
        Turn::Wait {
            number: waiting,
            fresh: false
        }
    );
    let (ended, changes) = shard.end(10, first.id, &mut seed());
    assert!(ended);
    assert!(changes.contains(&Change::SessionGone { id: first.id }));
    assert!(changes
        .iter()
        .any(|c| matches!(c, Change::Offer { place: 1, .. })));
    // The later ticket may not jump the queue.
    assert_eq!(
        shard.visit(11, Holding::Ticket(later), &mut seed()).0,
        Turn::Wait {
            number: later,
            fresh: false
        }
    );
    let got = session(shard.visit(12, Holding::Ticket(waiting), &mut seed()).0);
    assert_eq!(got.id, 1);
    assert_eq!(got.expires_ms, 12 + 5 * MIN);
}

#[test]
fn a_place_is_claimed_once() {
    let mut shard = Shard::new(terms(1, 100));
    let first = session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let waiting = ticket(shard.visit(1, Holding::Nothing, &mut seed()).0);
    let behind = ticket(shard.visit(1, Holding::Nothing, &mut seed()).0);
    shard.end(2, first.id, &mut seed());
    let one = session(shard.visit(3, Holding::Ticket(waiting), &mut seed()).0);
    // The same ticket again (a copied cookie): the same session.
    let two = session(shard.visit(4, Holding::Ticket(waiting), &mut seed()).0);
    assert_eq!(one, two);
    assert_eq!(shard.status().active, 1);
    // Once it has ended, the ticket names nothing: a new one at the back,
    // behind the ticket its place was offered to.
    shard.end(5, one.id, &mut seed());
    assert_eq!(
        shard.visit(6, Holding::Ticket(waiting), &mut seed()).0,
        Turn::Wait {
            number: Number::Place(3),
            fresh: true
        }
    );
    assert_eq!(
        session(shard.visit(7, Holding::Ticket(behind), &mut seed()).0).id,
        2
    );
}

#[test]
fn an_unclaimed_offer_lapses_and_the_place_moves_on() {
    let mut shard = Shard::new(terms(1, 100));
    let first = session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let gone = ticket(shard.visit(1, Holding::Nothing, &mut seed()).0);
    let next = ticket(shard.visit(2, Holding::Nothing, &mut seed()).0);
    shard.end(10, first.id, &mut seed());
    // The alarm beats every 2 s while the offer waits, so that a longer
    // gap is an outage.
    assert_eq!(shard.next_alarm(), Some(10 + BEAT_MS));
    let mut now = 10;
    while now < 10 + 40_000 - BEAT_MS {
        now += BEAT_MS;
        let changes = shard.tick(now, &mut seed());
        assert!(!changes
            .iter()
            .any(|c| matches!(c, Change::OfferGone { .. })));
    }
    assert_eq!(shard.next_alarm(), Some(10 + 40_000));
    let changes = shard.tick(10 + 40_000, &mut seed());
    assert!(changes.contains(&Change::OfferGone { place: 1 }));
    assert!(changes
        .iter()
        .any(|c| matches!(c, Change::Offer { place: 2, .. })));
    assert_eq!(
        session(shard.visit(40_011, Holding::Ticket(next), &mut seed()).0).id,
        2
    );
    // The one who left comes back too late: at the back.
    assert_eq!(
        ticket(shard.visit(40_012, Holding::Ticket(gone), &mut seed()).0),
        Number::Place(3)
    );
}

#[test]
fn sessions_lapse_unless_renewed() {
    let mut shard = Shard::new(terms(1, 100));
    let s = session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let renewed = session(shard.visit(MIN, Holding::Session(s.id), &mut seed()).0);
    assert_eq!(renewed.expires_ms, 6 * MIN);
    assert_eq!(shard.next_alarm(), Some(6 * MIN));
    let changes = shard.tick(6 * MIN, &mut seed());
    assert!(changes.contains(&Change::SessionGone { id: s.id }));
    // A lapsed session's holder is a newcomer again, let in at once here.
    assert_eq!(
        session(shard.visit(6 * MIN, Holding::Session(s.id), &mut seed()).0).id,
        1
    );
}

#[test]
fn offers_count_against_the_rate_until_claimed_then_at_their_claim() {
    let mut shard = Shard::new(terms(10, 2));
    session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    session(shard.visit(1, Holding::Nothing, &mut seed()).0);
    let [t1, t2, t3] = [2, 3, 4].map(|at| ticket(shard.visit(at, Holding::Nothing, &mut seed()).0));
    // The two starts age out at 60 s and 60.001 s: one offer each.
    shard.tick(60_001, &mut seed());
    assert_eq!(shard.status().offered, 2);
    // Claimed at 90 s and 99 s, they count from then: had they counted
    // from their offers, t3 could start at 120 s, a third start within
    // the 60 s from 90 s.
    session(shard.visit(90_000, Holding::Ticket(t1), &mut seed()).0);
    session(shard.visit(99_000, Holding::Ticket(t2), &mut seed()).0);
    let waiting = Turn::Wait {
        number: t3,
        fresh: false,
    };
    assert_eq!(
        shard.visit(149_999, Holding::Ticket(t3), &mut seed()).0,
        waiting
    );
    assert_eq!(shard.next_alarm(), Some(150_000));
    shard.tick(150_000, &mut seed());
    assert!(matches!(
        shard.visit(150_001, Holding::Ticket(t3), &mut seed()).0,
        Turn::Session(_)
    ));
}

#[test]
fn a_pre_queue_waits_for_the_opening_then_is_drawn() {
    let opens = 1_000_000;
    let mut shard = Shard::new(Terms {
        opens_at_ms: Some(opens),
        ..terms(2, 100)
    });
    let tickets: Vec<_> = (0..5)
        .map(|i| ticket(shard.visit(i, Holding::Nothing, &mut seed()).0))
        .collect();
    assert_eq!(tickets[4], Number::Pre(4));
    assert!(!shard.counters().opened);
    assert_eq!(shard.next_alarm(), Some(opens));
    assert_eq!(
        shard
            .visit(10, Holding::Ticket(Number::Pre(3)), &mut seed())
            .0,
        Turn::Wait {
            number: Number::Pre(3),
            fresh: false
        }
    );
    shard.tick(opens, &mut || 12345);
    let c = shard.counters();
    assert!(c.opened);
    assert_eq!((c.seed, c.pre, c.next, c.serving), (12345, 5, 5, 2));
    // The two places offered belong to the tickets the lottery put first.
    let status = shard.status();
    let mut admitted = 0;
    for number in &tickets {
        let place = status.place_of(*number).unwrap();
        let turn = shard
            .visit(opens + 1, Holding::Ticket(*number), &mut seed())
            .0;
        assert_eq!(
            matches!(turn, Turn::Session(_)),
            place < 2,
            "{number:?} at {place}"
        );
        admitted += u32::from(place < 2);
    }
    assert_eq!(admitted, 2);
    // A later arrival queues behind the whole pre-queue.
    assert_eq!(
        ticket(shard.visit(opens + 2, Holding::Nothing, &mut seed()).0),
        Number::Place(5)
    );
}

#[test]
fn smaller_terms_keep_the_sessions_running_and_start_none_until_below() {
    let mut shard = Shard::new(terms(3, 100));
    let sessions: Vec<Session> = (0..3)
        .map(|i| session(shard.visit(i, Holding::Nothing, &mut seed()).0))
        .collect();
    assert_eq!(
        shard.set_terms(5, terms(1, 100)),
        [Change::Terms(terms(1, 100))]
    );
    assert_eq!(
        shard.set_terms(5, terms(1, 100)),
        [],
        "the same terms change nothing"
    );
    let waiting = ticket(shard.visit(10, Holding::Nothing, &mut seed()).0);
    assert_eq!(shard.status().active, 3, "the sessions run on");
    shard.end(11, sessions[0].id, &mut seed());
    shard.end(12, sessions[1].id, &mut seed());
    assert_eq!(
        shard.status().offered,
        0,
        "two sessions for one place: still full"
    );
    shard.end(13, sessions[2].id, &mut seed());
    assert!(matches!(
        shard.visit(14, Holding::Ticket(waiting), &mut seed()).0,
        Turn::Session(_)
    ));
}

#[test]
fn an_offer_keeps_its_grace_through_an_outage_and_nobody_passes_it() {
    let mut shard = Shard::new(terms(1, 100));
    let a = session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let b = ticket(shard.visit(1, Holding::Nothing, &mut seed()).0);
    shard.end(2_000, a.id, &mut seed());
    // Up for 10 s of the 40 s grace, then down for 60 s.
    let mut now = 2_000;
    while now < 12_000 {
        now = shard.next_alarm().unwrap();
        shard.tick(now, &mut seed());
    }
    now += 60_000;
    let c = ticket(shard.visit(now, Holding::Nothing, &mut seed()).0);
    assert_eq!(
        session(shard.visit(now + 1, Holding::Ticket(b), &mut seed()).0).id,
        1
    );
    assert_eq!(
        shard.visit(now + 2, Holding::Ticket(c), &mut seed()).0,
        Turn::Wait {
            number: c,
            fresh: false
        }
    );
    // Without an outage the grace runs out as before.
    let mut shard = Shard::new(terms(1, 100));
    let a = session(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let b = ticket(shard.visit(1, Holding::Nothing, &mut seed()).0);
    shard.end(2_000, a.id, &mut seed());
    while let Some(due) = shard.next_alarm().filter(|&due| due <= 2_000 + 40_000) {
        shard.tick(due, &mut seed());
    }
    assert_eq!(shard.status().offered, 0, "the offer lapsed");
    let again = session(shard.visit(42_001, Holding::Ticket(b), &mut seed()).0);
    assert_eq!(again.id, 2, "b joined at the back");
}

#[test]
fn a_new_opens_at_ahead_or_a_reset_starts_the_line_over() {
    const DAY: u64 = 86_400_000;
    let rehearsal = Terms {
        opens_at_ms: Some(1_000),
        ..terms(1, 100)
    };
    let mut shard = Shard::new(rehearsal);
    let early = ticket(shard.visit(0, Holding::Nothing, &mut seed()).0);
    let inside = session(shard.visit(1_000, Holding::Ticket(early), &mut seed()).0);
    let waiting = ticket(shard.visit(1_001, Holding::Nothing, &mut seed()).0);
    // The real opening, a day ahead: the line starts over.
    let real = Terms {
        opens_at_ms: Some(DAY),
        ..rehearsal
    };
    let changes = shard.set_terms(2_000, real);
    assert!(changes.contains(&Change::SessionGone { id: inside.id }));
    assert!(changes.contains(&Change::Counters(shard.counters())));
    assert_eq!(shard.status().waiting(), 0);
    // An old session or ticket is nothing now: it joins the pre-queue.
    for held in [
        Holding::Session(inside.id),
        Holding::Ticket(waiting),
        Holding::Ticket(early),
    ] {
        let turn = shard.visit(3_000, held, &mut seed()).0;
        assert!(
            matches!(
                turn,
                Turn::Wait {
                    number: Number::Pre(_),
                    fresh: true
                }
            ),
            "{turn:?}"
        );
    }
    assert_eq!(shard.status().waiting(), 3);
    // The same terms again change nothing; an operator's reset empties
    // the pre-queue, and the room opens at the real opening.
    assert_eq!(shard.set_terms(4_000, real), []);
    shard.reset(5_000, &mut seed());
    assert_eq!(shard.status().waiting(), 0);
    let first = ticket(shard.visit(6_000, Holding::Nothing, &mut seed()).0);
    assert_eq!(
        session(shard.visit(DAY, Holding::Ticket(first), &mut seed()).0).started_ms,
        DAY
    );
    let restored = Shard::restore(
        real,
        Stored {
            counters: shard.counters(),
            ..Stored::default()
        },
    );
    assert_eq!(restored.counters(), shard.counters());
}

#[test]
fn a_newcomer_not_counted_in_the_pre_queue_takes_no_pre_queue_number() {
    let opens = 10 * MIN;
    let mut shard = Shard::new(Terms {
        opens_at_ms: Some(opens),
        ..terms(1, 100)
    });
    let (turn, changes) = shard.visit(opens - 1, Holding::Opened, &mut seed());
    assert_eq!(turn, Turn::NotOpen);
    assert_eq!(shard.counters().pre, 0);
    assert!(
        changes.iter().all(|c| !matches!(c, Change::Counters(_))),
        "{changes:?}"
    );
    assert_eq!(
        ticket(shard.visit(opens - 1, Holding::Nothing, &mut seed()).0),
        Number::Pre(0)
    );
    // Open, it joins as any newcomer; closed, it is turned away.
    assert_eq!(
        ticket(shard.visit(opens, Holding::Opened, &mut seed()).0),
        Number::Place(1)
    );
    let mut closed = Shard::new(Terms {
        opens_at_ms: Some(opens),
        ..terms(1, 100)
    });
    closed.set_control(
        0,
        Control {
            state: crate::control::RuleState::Closed,
            reason: String::new(),
            set_ms: 0,
        },
        &mut seed(),
    );
    assert_eq!(
        closed.visit(1, Holding::Opened, &mut seed()).0,
        Turn::Closed
    );
}
