use super::*;
use crate::control::{Control, RuleState};
use crate::room::shard::{Number, Session};

/// Views of shards as of `at`.
fn seen(entries: &[(u32, Status)], at: u64) -> Views {
    let mut views = Views::default();
    for (shard, status) in entries {
        views.remember("shop", *shard, status.clone(), at);
    }
    views
}

fn none() -> Views {
    Views::default()
}

const NOW: u64 = 1_800_000_000_000;

fn config() -> WaitingRoom {
    WaitingRoom {
        active: 10,
        per_minute: 60,
        session_ms: 300_000,
        shards: 4,
        refresh_ms: 20_000,
        opens_at_ms: None,
        secret: "ROOM_SECRET".into(),
        pass_secret: "ROOM_SECRET".into(),
        work_bits: None,
    }
}

fn key() -> Hs256Key {
    Hs256Key::new(b"a room secret of thirty-two chars!")
}

fn status(serving: u64, next: u64) -> Status {
    Status::sample(serving, next, 3)
}

/// A room's config and key, to lend a [`Room`].
struct Fixture {
    config: WaitingRoom,
    key: Hs256Key,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with(config())
    }

    fn with(config: WaitingRoom) -> Fixture {
        Fixture { config, key: key() }
    }

    fn room(&self) -> Room<'_> {
        Room {
            id: "shop",
            config: &self.config,
            key: &self.key,
        }
    }
}

fn session(id: u64) -> Session {
    Session {
        id,
        started_ms: NOW,
        expires_ms: NOW + 300_000,
    }
}

fn cookie_field(step: &Step) -> String {
    let value = match step {
        Step::Wait {
            cookie: Some(cookie),
            ..
        } => &cookie.value,
        Step::Pass {
            cookie: Some(cookie),
            ..
        } => &cookie.value,
        other => panic!("no cookie in {other:?}"),
    };
    format!("other=1; sluice_room_shop={value}")
}

#[test]
fn shares_of_places_and_rate_sum_to_the_room() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let terms: Vec<Terms> = (0..4).map(|s| room.terms(s)).collect();
    assert_eq!(terms.iter().map(|t| t.places).sum::<u32>(), 10);
    assert_eq!(terms.iter().map(|t| t.per_minute).sum::<u32>(), 60);
    assert_eq!((terms[0].places, terms[3].places), (3, 2));
    assert_eq!(terms[0].grace_ms, 44_000);
    assert_eq!(room.renew_every_ms(), 60_000);
}

#[test]
fn a_newcomer_asks_a_shard_drawn_at_random() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let held = room.held(None, NOW);
    assert_eq!(held, None);
    assert_eq!(
        room.plan(held, NOW, &none(), (7, 0)),
        Step::Ask {
            shard: 3,
            holding: Holding::Nothing
        }
    );
    // Of two shards, the one last seen with fewer waiting, however old
    // the view; the first drawn when the isolate has not seen both.
    let views = seen(&[(3, status(0, 50)), (1, status(0, 20))], NOW - 60_000);
    let ask = |shard| Step::Ask {
        shard,
        holding: Holding::Nothing,
    };
    assert_eq!(room.plan(None, NOW, &views, (3, 1)), ask(1));
    assert_eq!(room.plan(None, NOW, &views, (1, 3)), ask(1));
    assert_eq!(room.plan(None, NOW, &views, (3, 2)), ask(3));
}

#[test]
fn a_session_passes_on_its_signature_until_renewal_is_due() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let session = session(9);
    let step = room.conclude(None, 2, Turn::Session(session), &status(10, 10), NOW);
    let Step::Pass {
        pass,
        cookie: Some(cookie),
    } = &step
    else {
        panic!("{step:?}")
    };
    assert_eq!(cookie.max_age_s, 300);
    let field = cookie_field(&step);
    // A minute later it passes without a call; from then it is renewed.
    let held = room.held(Some(&field), NOW + 59_999);
    assert_eq!(held, Some(Signed::Session(*pass)));
    assert_eq!(
        room.plan(held, NOW + 59_999, &none(), (0, 0)),
        Step::Pass {
            pass: *pass,
            cookie: None
        }
    );
    assert_eq!(
        room.plan(held, NOW + 60_000, &none(), (0, 0)),
        Step::Ask {
            shard: 2,
            holding: Holding::Session(9)
        }
    );
    // Past its end it is nothing.
    assert_eq!(room.held(Some(&field), NOW + 300_000), None);
}

#[test]
fn a_waiting_ticket_is_answered_from_the_view_until_its_turn_may_have_come() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let turn = Turn::Wait {
        number: Number::Place(30),
        fresh: true,
    };
    let step = room.conclude(None, 1, turn, &status(20, 31), NOW);
    let Step::Wait {
        standing, cookie, ..
    } = &step
    else {
        panic!("{step:?}")
    };
    assert_eq!(
        *standing,
        Standing::InLine {
            position: 11,
            wait_s: 110,
            drawn: false
        }
    );
    assert_eq!(cookie.as_ref().unwrap().max_age_s, 86_400);
    let field = cookie_field(&step);
    let held = room.held(Some(&field), NOW + 20_000);
    // Without a view of its shard: ask it.
    assert_eq!(
        room.plan(held, NOW + 20_000, &none(), (0, 0)),
        Step::Ask {
            shard: 1,
            holding: Holding::Ticket(Number::Place(30))
        }
    );
    // With one: the page, the position fallen, no call.
    let later = room.plan(
        held,
        NOW + 20_000,
        &seen(&[(1, status(25, 40))], NOW + 19_000),
        (0, 0),
    );
    let Step::Wait { standing, .. } = &later else {
        panic!("{later:?}")
    };
    assert_eq!(
        *standing,
        Standing::InLine {
            position: 6,
            wait_s: 60,
            drawn: false
        }
    );
    // A view older than what the visitor was shown does not move it back.
    let field = cookie_field(&later);
    let held = room.held(Some(&field), NOW + 40_000);
    let older = room.plan(
        held,
        NOW + 40_000,
        &seen(&[(1, status(21, 40))], NOW + 40_000),
        (0, 0),
    );
    assert!(
        matches!(
            older,
            Step::Wait {
                standing: Standing::InLine { position: 6, .. },
                ..
            }
        ),
        "{older:?}"
    );
    // Its place reached: only the shard can say whether the offer holds.
    assert_eq!(
        room.plan(
            held,
            NOW + 40_000,
            &seen(&[(1, status(31, 40))], NOW + 40_000),
            (0, 0)
        ),
        Step::Ask {
            shard: 1,
            holding: Holding::Ticket(Number::Place(30))
        }
    );
}

#[test]
fn before_opening_the_page_says_when() {
    let fixture = Fixture::with(WaitingRoom {
        opens_at_ms: Some(NOW + 3_600_000),
        ..config()
    });
    let room = fixture.room();
    let mut before = status(0, 0);
    before.counters.opened = false;
    before.counters.pre = 5;
    let step = room.conclude(
        None,
        0,
        Turn::Wait {
            number: Number::Pre(4),
            fresh: true,
        },
        &before,
        NOW,
    );
    let Step::Wait {
        standing, cookie, ..
    } = &step
    else {
        panic!("{step:?}")
    };
    assert_eq!(
        *standing,
        Standing::BeforeOpening {
            opens_at_ms: NOW + 3_600_000,
            opens_in_s: 3_600
        }
    );
    // A pre-queue ticket lasts a day from the opening.
    assert_eq!(cookie.as_ref().unwrap().max_age_s, 86_400 + 3_600);
    let field = cookie_field(&step);
    assert!(room
        .held(Some(&field), NOW + 3_600_000 + 86_399_999)
        .is_some());
    assert!(room
        .held(Some(&field), NOW + 3_600_000 + 86_400_000)
        .is_none());
}

#[test]
fn tickets_from_elsewhere_are_nothing() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let step = room.conclude(
        None,
        3,
        Turn::Wait {
            number: Number::Place(1),
            fresh: true,
        },
        &status(0, 2),
        NOW,
    );
    let field = cookie_field(&step);
    assert!(room.held(Some(&field), NOW).is_some());
    // Another room with the same secret, the same room with another.
    let other = Room {
        id: "shoes",
        ..fixture.room()
    };
    assert_eq!(
        other.held(
            Some(&field.replace("sluice_room_shop", "sluice_room_shoes")),
            NOW
        ),
        None
    );
    let other_key = Hs256Key::new(b"another secret of thirty-two chars");
    let rekeyed = Room {
        key: &other_key,
        ..fixture.room()
    };
    assert_eq!(rekeyed.held(Some(&field), NOW), None);
    // A shard the room no longer has (fewer shards after a deploy).
    let fewer = WaitingRoom {
        shards: 2,
        ..config()
    };
    let shrunk = Room {
        config: &fewer,
        ..fixture.room()
    };
    assert_eq!(shrunk.held(Some(&field), NOW), None);
    // Expired: a day after joining.
    assert_eq!(room.held(Some(&field), NOW + DAY_MS), None);
    // Altered.
    let altered = field.replacen(".p1.", ".p0.", 1);
    assert_ne!(altered, field);
    assert_eq!(room.held(Some(&altered), NOW), None);
}

#[test]
fn without_its_shard_a_session_passes_and_a_ticket_keeps_its_last_place() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let session = session(9);
    let Step::Pass { pass, .. } =
        room.conclude(None, 2, Turn::Session(session), &status(10, 10), NOW)
    else {
        panic!("no pass")
    };
    assert_eq!(
        room.without_shard(Some(Signed::Session(pass)), NOW + 90_000, &none()),
        Some(Step::Pass { pass, cookie: None })
    );
    let waiting = room.conclude(
        None,
        1,
        Turn::Wait {
            number: Number::Place(30),
            fresh: true,
        },
        &status(20, 31),
        NOW,
    );
    let held = room.held(Some(&cookie_field(&waiting)), NOW);
    assert_eq!(
        room.without_shard(held, NOW + 60_000, &none()),
        None,
        "never seen: nothing to show"
    );
    let old = seen(&[(1, status(22, 40))], NOW);
    let Some(Step::Wait { standing, .. }) = room.without_shard(held, NOW + 60_000, &old) else {
        panic!("no page")
    };
    assert_eq!(
        standing,
        Standing::InLine {
            position: 9,
            wait_s: 90,
            drawn: false
        }
    );
    assert_eq!(room.without_shard(None, NOW, &old), None);
}

fn in_state(mut status: Status, state: RuleState) -> Status {
    status.control = Some(Control {
        state,
        reason: "stock count".into(),
        set_ms: 1,
    });
    status
}

#[test]
fn a_paused_room_keeps_everyone_in_line_and_says_why() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let paused = in_state(status(20, 31), RuleState::Paused);
    let turn = Turn::Wait {
        number: Number::Place(30),
        fresh: true,
    };
    let step = room.conclude(None, 1, turn, &paused, NOW);
    let Step::Wait {
        standing,
        paused: why,
        ..
    } = &step
    else {
        panic!("{step:?}")
    };
    assert_eq!(why.as_deref(), Some("stock count"));
    assert!(matches!(standing, Standing::InLine { position: 11, .. }));
    // A refresh answered from the view says so too, with no call.
    let held = room.held(Some(&cookie_field(&step)), NOW + 1_000);
    let views = seen(&[(1, paused.clone())], NOW + 500);
    let Step::Wait { paused: why, .. } = room.plan(held, NOW + 1_000, &views, (0, 0)) else {
        panic!("not answered from the view")
    };
    assert_eq!(why.as_deref(), Some("stock count"));
    // Open again: no word of it.
    let Step::Wait { paused: why, .. } = room.conclude(None, 1, turn, &status(20, 31), NOW) else {
        panic!("no page")
    };
    assert_eq!(why, None);
}

#[test]
fn a_closed_room_turns_away_tickets_and_newcomers_but_not_sessions() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let closed = in_state(status(20, 31), RuleState::Closed);
    let control = closed.control.clone().unwrap();
    assert_eq!(
        room.conclude(None, 1, Turn::Closed, &closed, NOW),
        Step::Closed(control.clone())
    );
    // The shard said closed: so it is, whatever the status it sent.
    assert!(matches!(
        room.conclude(None, 1, Turn::Closed, &status(20, 31), NOW),
        Step::Closed(Control {
            state: RuleState::Closed,
            ..
        })
    ));
    // From a fresh view, without a call: a ticket, its turn come or not,
    // and a newcomer to that shard.
    let waiting = room.conclude(
        None,
        1,
        Turn::Wait {
            number: Number::Place(30),
            fresh: true,
        },
        &status(20, 31),
        NOW,
    );
    let held = room.held(Some(&cookie_field(&waiting)), NOW + 1_000);
    let views = seen(&[(1, closed.clone())], NOW + 500);
    assert_eq!(
        room.plan(held, NOW + 1_000, &views, (0, 0)),
        Step::Closed(control.clone())
    );
    let reached = seen(
        &[(1, in_state(status(31, 40), RuleState::Closed))],
        NOW + 500,
    );
    assert_eq!(
        room.plan(held, NOW + 1_000, &reached, (0, 0)),
        Step::Closed(control.clone())
    );
    assert_eq!(
        room.plan(None, NOW + 1_000, &views, (1, 1)),
        Step::Closed(control.clone())
    );
    // A stale view is no reason to turn anyone away: ask the shard.
    assert_eq!(
        room.plan(None, NOW + 500 + STATUS_TTL_MS, &views, (1, 1)),
        Step::Ask {
            shard: 1,
            holding: Holding::Nothing
        }
    );
    // A session passes on its signature, as ever.
    let Step::Pass { pass, .. } = room.conclude(None, 1, Turn::Session(session(3)), &closed, NOW)
    else {
        panic!("no pass")
    };
    assert!(matches!(
        room.plan(Some(Signed::Session(pass)), NOW + 1_000, &views, (1, 1)),
        Step::Pass { .. }
    ));
}

#[test]
fn only_a_page_load_or_an_api_call_takes_a_place_and_the_pre_queue_opens_a_day_before_its_cap_ends()
{
    let fixture = Fixture::new();
    let room = fixture.room();
    assert_eq!(room.admit(false, None, NOW, 1), Err(Step::NoPlace));
    assert_eq!(room.admit(true, None, NOW, 1), Ok(None));
    let opens = NOW + PRE_QUEUE_OPENS_MS + 1_000;
    let fixture = Fixture::with(WaitingRoom {
        opens_at_ms: Some(opens),
        ..config()
    });
    let room = fixture.room();
    let early = room.admit(true, None, NOW, 1).unwrap_err();
    let Step::Wait {
        standing: Standing::BeforeOpening { opens_in_s, .. },
        cookie: None,
        ..
    } = early
    else {
        panic!("{early:?}")
    };
    assert_eq!(opens_in_s, (PRE_QUEUE_OPENS_MS + 1_000) / 1_000);
    assert_eq!(room.admit(true, None, NOW + 1_000, 1), Ok(None));
}

#[test]
fn a_newcomer_is_counted_in_the_pre_queue_until_the_opening_by_this_clock() {
    let fixture = Fixture::with(WaitingRoom {
        opens_at_ms: Some(NOW),
        ..config()
    });
    let room = fixture.room();
    let holding = |now| match room.plan(None, now, &none(), (0, 0)) {
        Step::Ask { holding, .. } => holding,
        other => panic!("{other:?}"),
    };
    assert_eq!(holding(NOW - 1), Holding::Nothing);
    assert_eq!(holding(NOW), Holding::Opened);
    // A shard whose clock is behind takes nothing: the page, no ticket.
    let mut before = status(0, 0);
    before.counters.opened = false;
    let step = room.conclude(None, 0, Turn::NotOpen, &before, NOW);
    assert!(
        matches!(
            step,
            Step::Wait {
                standing: Standing::BeforeOpening { opens_in_s: 0, .. },
                cookie: None,
                ..
            }
        ),
        "{step:?}"
    );
}

#[test]
fn a_challenge_hands_out_a_puzzle_and_lets_its_answer_join_once_spent() {
    let fixture = Fixture::with(WaitingRoom {
        work_bits: Some(6),
        ..config()
    });
    let room = fixture.room();
    let Err(Step::Challenge(puzzle)) = room.admit(true, None, NOW, 77) else {
        panic!("no puzzle")
    };
    let answered = (0u64..)
        .map(|n| format!("{puzzle}.{n}"))
        .find(|a| room.admit(true, Some(a), NOW, 78).is_ok())
        .unwrap();
    assert_eq!(
        room.admit(true, Some(&answered), NOW + 1, 79),
        Ok(Some(77)),
        "the puzzle's id, for the edge to spend"
    );
    let late = room.admit(true, Some(&answered), NOW + challenge::PUZZLE_TTL_MS, 80);
    assert!(
        matches!(late, Err(Step::Challenge(p)) if p != puzzle),
        "a new puzzle"
    );
    assert_eq!(
        room.admit(false, Some(&answered), NOW, 81),
        Err(Step::NoPlace)
    );
}

#[test]
fn a_ticket_from_the_draw_is_said_to_be_in_the_draw_s_order() {
    let fixture = Fixture::new();
    let room = fixture.room();
    let mut drawn = status(0, 20);
    drawn.counters.pre = 10;
    drawn.counters.seed = 3;
    let step = room.conclude(
        None,
        0,
        Turn::Wait {
            number: Number::Pre(4),
            fresh: true,
        },
        &drawn,
        NOW,
    );
    let Step::Wait {
        standing: Standing::InLine { drawn, .. },
        ..
    } = step
    else {
        panic!("{step:?}")
    };
    assert!(drawn);
    let later = room.conclude(
        None,
        0,
        Turn::Wait {
            number: Number::Place(15),
            fresh: true,
        },
        &status(0, 20),
        NOW,
    );
    assert!(matches!(
        later,
        Step::Wait {
            standing: Standing::InLine { drawn: false, .. },
            ..
        }
    ));
}
