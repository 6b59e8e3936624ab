use super::*;
use crate::input::scan::FromScan;
use crate::limit::gcra::GcraPolicy;
use crate::limit::lease::Lease;
use crate::limit::{Policy, Retry};

fn log(name: &str, limit: u64, window_ms: u64) -> (String, Spec) {
    (
        name.to_string(),
        Spec::SlidingLog(Policy::new(limit, window_ms).unwrap()),
    )
}

fn check(
    ledger: &mut Ledger,
    specs: &[(String, Spec)],
    now: u64,
    cost: u32,
) -> (Outcome, Vec<Write>) {
    let ask = Ask {
        specs,
        cost,
        ban: None,
        lease: None,
    };
    ledger.check(&ask, now)
}

fn check_banned(
    ledger: &mut Ledger,
    specs: &[(String, Spec)],
    now: u64,
    ban: &BanPolicy,
) -> (Outcome, Vec<Write>) {
    let ask = Ask {
        specs,
        cost: 1,
        ban: Some(ban),
        lease: None,
    };
    ledger.check(&ask, now)
}

/// One unit under `specs`, counted toward `ban` if refused.
fn one<'a>(specs: &'a [(String, Spec)], ban: Option<&'a BanPolicy>) -> Ask<'a> {
    Ask {
        specs,
        cost: 1,
        ban,
        lease: None,
    }
}

fn violated(outcome: &Outcome) -> Vec<&str> {
    outcome.violated().map(|p| p.name.as_str()).collect()
}

#[test]
fn the_first_admission_writes_one_slot_row_then_only_hits() {
    let mut ledger = Ledger::new();
    let p = [log("api", 2, 1000)];
    let (outcome, writes) = check(&mut ledger, &p, 10, 1);
    assert!(outcome.allowed);
    assert!(
        matches!(writes[..], [Write::Slot { state: (10, 1), .. }]),
        "the slot row carries the log's first run"
    );
    let (_, writes) = check(&mut ledger, &p, 11, 1);
    assert!(matches!(writes[..], [Write::Hit { at_ms: 11, .. }]));
}

#[test]
fn one_row_algorithms_write_their_state_each_admission() {
    let mut ledger = Ledger::new();
    let fixed = [(
        "w".to_string(),
        Spec::FixedWindow(Policy::new(2, 1000).unwrap()),
    )];
    let (_, writes) = check(&mut ledger, &fixed, 10, 1);
    assert!(matches!(writes[..], [Write::Slot { state: (10, 1), .. }]));
    let (_, writes) = check(&mut ledger, &fixed, 20, 1);
    assert!(matches!(writes[..], [Write::Slot { state: (10, 2), .. }]));
    let (refused, writes) = check(&mut ledger, &fixed, 30, 1);
    assert!(!refused.allowed);
    assert!(writes.is_empty());
    let cell = [(
        "c".to_string(),
        Spec::Gcra(GcraPolicy::new(1, 1, 1000).unwrap()),
    )];
    let (_, writes) = check(&mut ledger, &cell, 5, 1);
    assert!(matches!(
        writes[..],
        [Write::Slot {
            state: (1005, 0),
            ..
        }]
    ));
}

#[test]
fn refusals_and_peeks_write_nothing_and_keep_nothing() {
    let mut ledger = Ledger::new();
    let (outcome, writes) = check(&mut ledger, &[log("api", 1, 1000)], 0, 0);
    assert!(outcome.allowed);
    assert!(writes.is_empty());
    assert!(ledger.is_empty(0));
    check(&mut ledger, &[log("api", 1, 1000)], 0, 1);
    let (outcome, writes) = check(&mut ledger, &[log("api", 1, 1000)], 1, 1);
    assert!(!outcome.allowed);
    assert!(writes.is_empty());
}

#[test]
fn a_wait_crosses_the_wire_as_ms_and_never_as_null() {
    let mut ledger = Ledger::new();
    let p = [log("api", 2, 1000)];
    check(&mut ledger, &p, 0, 2);
    for (cost, wire) in [(1, "1000"), (3, "null")] {
        let (refused, _) = check(&mut ledger, &p, 0, cost);
        let json = crate::json::to_string(&refused);
        let field = format!("\"retry_after_ms\":{wire}");
        assert_eq!(
            json.matches(&field).count(),
            2,
            "outcome and policy: {json}"
        );
        let back = Outcome::from_json(&json).unwrap();
        assert_eq!(back, refused);
    }
}

#[test]
fn a_policy_decision_crosses_the_wire_as_one_flat_object() {
    // The shape `#[serde(flatten)]` gave it, which a worker and an object of
    // two versions (during a deploy) must still agree on.
    let mut ledger = Ledger::new();
    let (outcome, _) = check(&mut ledger, &[log("api", 2, 1000)], 0, 1);
    let json = crate::json::value_of(&outcome.policies[0]);
    assert_eq!(
        json,
        serde_json::json!({
            "name": "api",
            "window_ms": 1000,
            "allowed": true,
            "limit": 2,
            "remaining": 1,
            "reset_ms": 1000,
            "retry_after_ms": 0,
        })
    );
    let back = PolicyDecision::from_json(&json.to_string()).unwrap();
    assert_eq!(back, outcome.policies[0]);
}

#[test]
fn several_policies_admit_all_or_nothing() {
    let mut ledger = Ledger::new();
    let p = [log("second", 2, 1000), log("day", 3, 86_400_000)];
    assert!(check(&mut ledger, &p, 0, 1).0.allowed);
    assert!(check(&mut ledger, &p, 1, 1).0.allowed);
    let (refused, writes) = check(&mut ledger, &p, 2, 1);
    assert!(!refused.allowed);
    assert!(writes.is_empty());
    assert_eq!(violated(&refused), ["second"]);
    // The day policy had room, and reports it unchanged.
    assert_eq!(refused.policies[1].decision.remaining, 1);
    assert_eq!(refused.retry, Retry::After(998));
    assert!(check(&mut ledger, &p, 1000, 1).0.allowed);
    let (refused, _) = check(&mut ledger, &p, 2000, 1);
    assert_eq!(violated(&refused), ["day"]);
    assert_eq!(refused.retry, Retry::After(86_400_000 - 2000));
}

#[test]
fn a_changed_spec_is_stored_with_the_next_admission() {
    let mut ledger = Ledger::new();
    check(&mut ledger, &[log("api", 1, 1000)], 0, 1);
    let (refused, writes) = check(&mut ledger, &[log("api", 1, 500)], 100, 1);
    assert!(!refused.allowed);
    assert!(writes.is_empty());
    let (allowed, writes) = check(&mut ledger, &[log("api", 1, 500)], 500, 1);
    assert!(allowed.allowed);
    assert!(
        matches!(&writes[..], [Write::Respec { spec, .. }, Write::Hit { .. }]
        if spec.window_ms() == 500)
    );
}

#[test]
fn a_stored_slot_stays_until_the_sweep_deletes_its_rows() {
    let mut ledger = Ledger::new();
    check(&mut ledger, &[log("api", 1, 100)], 0, 1);
    // Expired in memory and changed by a peek, but its rows remain.
    check(&mut ledger, &[log("api", 1, 50)], 500, 0);
    assert!(!ledger.is_empty(500));
    assert_eq!(ledger.sweep(500), [Expired::Slot { name: "api".into() }]);
    assert!(ledger.is_empty(500));
}

#[test]
fn restoring_rows_rebuilds_the_same_state() {
    let mut ledger = Ledger::new();
    let spec = Spec::SlidingLog(Policy::new(3, 1000).unwrap());
    assert!(ledger.restore_slot("api", spec.encode(), (50, 0)));
    ledger.restore_hit("api", 100, 2);
    ledger.restore_hit("ghost", 100, 2);
    assert!(!ledger.restore_slot("bad", (0, 0, 1000, 0), (0, 0)));
    assert!(!ledger.restore_slot("bad", (7, 1, 1, 1), (0, 0)));
    let (outcome, writes) = check(&mut ledger, &[log("api", 3, 1000)], 200, 2);
    assert!(!outcome.allowed);
    assert!(writes.is_empty());
    let (outcome, writes) = check(&mut ledger, &[log("api", 3, 1000)], 200, 1);
    assert!(outcome.allowed);
    assert!(
        matches!(writes[..], [Write::Hit { .. }]),
        "the slot row is already stored"
    );
}

#[test]
fn the_sweep_deletes_expired_rows_and_forgets_idle_slots() {
    let mut ledger = Ledger::new();
    check(&mut ledger, &[log("a", 5, 1000)], 0, 1);
    check(&mut ledger, &[log("a", 5, 1000)], 600, 1);
    check(&mut ledger, &[log("b", 5, 1000)], 100, 1);
    assert_eq!(ledger.next_sweep(600), Some(1600));
    let mut expired = ledger.sweep(1200);
    expired.sort_by_key(|e| format!("{e:?}"));
    let hits_a = Expired::Hits {
        name: "a".into(),
        cutoff_ms: 200,
    };
    assert_eq!(
        expired,
        [hits_a.clone(), Expired::Slot { name: "b".into() }]
    );
    assert_eq!(
        ledger.sweep(1200),
        [hits_a],
        "a second sweep changes nothing new"
    );
    assert_eq!(ledger.next_sweep(1200), Some(2200));
    ledger.sweep(2200);
    assert!(ledger.is_empty(2200));
    assert_eq!(ledger.next_sweep(2200), None);
}

#[test]
fn an_idle_key_is_empty_by_its_second_sweep() {
    let mut ledger = Ledger::new();
    let mut alarm = None;
    for t in (0..1000).step_by(7) {
        check(&mut ledger, &[log("api", 1000, 1000)], t, 1);
        alarm = alarm.or(ledger.next_sweep(t));
    }
    let first = alarm.unwrap();
    assert_eq!(first, 1000);
    ledger.sweep(first);
    let second = ledger.next_sweep(first).unwrap();
    assert_eq!(second, 2000);
    ledger.sweep(second);
    assert!(ledger.is_empty(2000));
}

fn ban_policy() -> BanPolicy {
    // Banned at the third refusal within 10 s, for 1 min, then 2 min, capped at 3 min.
    BanPolicy::new(3, 10_000, 60_000, 2, 180_000).unwrap()
}

/// Fills a limit-1 key at `now` and refuses it until a ban starts; returns
/// the refused outcomes.
fn offend(ledger: &mut Ledger, now: u64) -> Vec<Outcome> {
    let p = [log("api", 1, 1000)];
    let policy = ban_policy();
    let (first, _) = check_banned(ledger, &p, now, &policy);
    assert!(first.allowed);
    (1..=3)
        .map(|i| check_banned(ledger, &p, now + i, &policy).0)
        .collect()
}

/// A request asking more than a policy's whole limit is refused by that
/// policy like any other, so it counts toward a ban, although the key holds
/// nothing else (the ledger once dropped such a key's strikes with it).
#[test]
fn refusals_of_a_cost_above_the_limit_count_toward_a_ban() {
    let mut ledger = Ledger::new();
    let ask = |ledger: &mut Ledger, now| {
        let specs = [log("api", 1, 1000)];
        let policy = ban_policy();
        let ask = Ask {
            specs: &specs,
            cost: 2,
            ban: Some(&policy),
            lease: None,
        };
        ledger.check(&ask, now).0
    };
    assert!(ask(&mut ledger, 0).ban.is_none());
    assert!(ask(&mut ledger, 1).ban.is_none());
    let third = ask(&mut ledger, 2);
    assert!(!third.allowed);
    assert!(third.ban.is_some_and(|ban| ban.started));
}

#[test]
fn a_ban_starts_at_the_threshold_and_escalates() {
    let mut ledger = Ledger::new();
    let refused = offend(&mut ledger, 0);
    assert!(refused[0].ban.is_none() && refused[1].ban.is_none());
    let notice = refused[2].ban.clone().unwrap();
    assert!(notice.started);
    assert_eq!((notice.until_ms, notice.offences), (60_003, 1));
    // Banned: refused even once the policy has room again.
    let (banned, writes) = check_banned(&mut ledger, &[log("api", 1, 1000)], 30_000, &ban_policy());
    assert!(!banned.allowed);
    assert!(writes.is_empty());
    assert!(!banned.ban.as_ref().unwrap().started);
    assert_eq!(banned.retry, Retry::After(30_003));
    assert_eq!(
        ledger.next_sweep(30_000),
        Some(60_003),
        "the alarm lifts it"
    );
    ledger.sweep(60_003);
    assert_eq!(ledger.peek(60_003).1, None, "lifted, but remembered");
    let second = offend(&mut ledger, 70_000);
    let notice = second[2].ban.clone().unwrap();
    assert_eq!((notice.offences, notice.until_ms), (2, 70_003 + 120_000));
}

#[test]
fn bans_are_written_and_forgiven_by_the_sweep() {
    let mut ledger = Ledger::new();
    let p = [log("api", 1, 1000)];
    check_banned(&mut ledger, &p, 0, &ban_policy());
    check_banned(&mut ledger, &p, 1, &ban_policy());
    check_banned(&mut ledger, &p, 2, &ban_policy());
    let (_, writes) = check_banned(&mut ledger, &p, 3, &ban_policy());
    assert!(matches!(&writes[..], [Write::Ban(ban)] if ban.forget_ms == 60_003 + 180_000));
    assert!(ledger
        .sweep(100_000)
        .contains(&Expired::Slot { name: "api".into() }));
    assert!(
        !ledger.is_empty(100_000),
        "the ban record outlives the slot"
    );
    assert_eq!(ledger.sweep(240_003), [Expired::Ban]);
    assert!(ledger.is_empty(240_003));
}

#[test]
fn restored_bans_still_refuse() {
    let mut ledger = Ledger::new();
    ledger.restore_ban(Ban {
        until_ms: 5000,
        offences: 1,
        forget_ms: 9000,
        reason: "r".into(),
    });
    let (outcome, _) = check(&mut ledger, &[log("api", 10, 1000)], 100, 1);
    assert!(!outcome.allowed);
    assert_eq!(outcome.ban.unwrap().until_ms, 5000);
    assert!(
        check(&mut ledger, &[log("api", 10, 1000)], 5000, 1)
            .0
            .allowed
    );
}

#[test]
fn reset_forgets_everything_about_a_key() {
    let mut ledger = Ledger::new();
    offend(&mut ledger, 0);
    let (writes, mut expired) = ledger.reset(0);
    assert!(writes.is_empty());
    expired.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        expired,
        [Expired::Ban, Expired::Slot { name: "api".into() }]
    );
    assert_eq!(ledger.reset(0), (Vec::new(), Vec::new()));
    assert!(check(&mut ledger, &[log("api", 1, 1000)], 10, 1).0.allowed);
    assert!(!ledger.is_empty(10), "the key starts afresh");
}

#[test]
fn peek_reports_use_without_changing_it() {
    let mut ledger = Ledger::new();
    check(&mut ledger, &[log("api", 5, 1000)], 0, 2);
    let (slots, ban) = ledger.peek(100);
    assert_eq!(ban, None);
    assert_eq!(slots.len(), 1);
    assert_eq!(
        (slots[0].used, slots[0].remaining, slots[0].reset_ms),
        (2, 3, 900)
    );
    assert_eq!(ledger.peek(100).0, slots);
    assert_eq!(Ledger::new().peek(100), (Vec::new(), None));
}

#[test]
fn throttle_answers_as_redis_cell_and_records_like_check() {
    let mut ledger = Ledger::new();
    let policy = GcraPolicy::new(15, 30, 60_000).unwrap();
    let (first, writes) = ledger.throttle("throttle", policy, 1_000, 1).unwrap();
    assert_eq!(
        (
            first.limited,
            first.limit,
            first.remaining,
            first.retry_after_s,
            first.reset_after_s
        ),
        (false, 16, 15, -1, 2)
    );
    assert!(matches!(writes[..], [Write::Slot { .. }]));
    let (peek, writes) = ledger.throttle("throttle", policy, 1_000, 0).unwrap();
    assert_eq!(peek.remaining, 15);
    assert!(writes.is_empty());
    let (huge, writes) = ledger.throttle("throttle", policy, 1_000, 17).unwrap();
    assert!(huge.limited);
    assert_eq!(huge.retry_after_s, -1);
    assert!(writes.is_empty());
    let (slots, _) = ledger.peek(1_000);
    assert_eq!(slots[0].remaining, 15);
}

fn leased<'a>(specs: &'a [(String, Spec)], lease: &'a LeaseAsk) -> Ask<'a> {
    Ask {
        specs,
        cost: 1,
        ban: None,
        lease: Some(lease),
    }
}

fn lease_ask(limit: u32, ttl_ms: u64, id: &str) -> LeaseAsk {
    LeaseAsk {
        name: "api.concurrency".into(),
        limit,
        ttl_ms,
        owner: None,
        reenter: None,
        strict_limit: true,
        new_id: id.into(),
    }
}

#[test]
fn a_lease_and_rate_policies_admit_together_or_not_at_all() {
    let mut ledger = Ledger::new();
    let specs = [log("api", 2, 60_000)];
    let (first, writes) = ledger.check(&leased(&specs, &lease_ask(1, 30_000, "a")), 0);
    assert!(first.allowed);
    assert_eq!(first.lease.as_ref().unwrap().in_flight, 1);
    assert!(writes
        .iter()
        .any(|w| matches!(w, Write::Lease { lease, .. } if lease.id == "a")));
    // The concurrency limit refuses: nothing is logged in the rate policy.
    let (busy, writes) = ledger.check(&leased(&specs, &lease_ask(1, 30_000, "b")), 10);
    assert!(!busy.allowed);
    assert!(writes.is_empty());
    assert_eq!(busy.violated_names(), ["api.concurrency"]);
    assert!(
        !busy.refusal_holds_until_retry(),
        "a release may come before the lapse"
    );
    assert_eq!(busy.policies[0].decision.remaining, 1);
    let (released, _, expired) = ledger.release("a", 20);
    assert_eq!(released.unwrap().holds, 0);
    assert_eq!(
        expired,
        [Expired::Lease {
            id: "a".into(),
            floor: None
        }]
    );
    assert!(
        ledger
            .check(&leased(&specs, &lease_ask(1, 30_000, "c")), 30)
            .0
            .allowed
    );
    // The rate policy refuses: no lease is taken.
    ledger.release("c", 40);
    let (limited, writes) = ledger.check(&leased(&specs, &lease_ask(1, 30_000, "d")), 50);
    assert!(!limited.allowed);
    assert_eq!(limited.violated_names(), ["api"]);
    assert!(writes.is_empty());
    assert!(ledger.leases().is_empty());
}

#[test]
fn the_sweep_reclaims_lapsed_leases_on_time() {
    let mut ledger = Ledger::new();
    let ask = lease_ask(2, 1000, "a");
    let specs: [(String, Spec); 0] = [];
    ledger.check(
        &Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: Some(&ask),
        },
        0,
    );
    assert_eq!(ledger.next_sweep(0), Some(1000), "exactly at the lapse");
    let (renewed, writes) = ledger.renew("a", 5000, 500);
    assert_eq!(renewed.unwrap().expires_ms, 5500);
    assert_eq!(writes.len(), 1);
    assert!(ledger.sweep(1000).is_empty());
    assert_eq!(
        ledger.sweep(5500),
        [Expired::Lease {
            id: "a".into(),
            floor: None
        }]
    );
    assert!(ledger.is_empty(5500));
    assert!(ledger.release("a", 5500).0.is_none());
}

#[test]
fn leases_restore_and_reset() {
    let mut ledger = Ledger::new();
    let lease = Lease {
        id: "x".into(),
        owner: Some("o".into()),
        fence: 9_000,
        expires_ms: 10_000,
        holds: 2,
    };
    ledger.restore_lease(lease.clone(), Some(1));
    assert_eq!(ledger.leases(), [lease]);
    let specs: [(String, Spec); 0] = [];
    let mut ask = lease_ask(1, 1000, "y");
    ask.reenter = Some("x".into());
    let (again, _) = ledger.check(
        &Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: Some(&ask),
        },
        100,
    );
    assert_eq!(
        again.lease.unwrap().lease.unwrap().holds,
        3,
        "re-entrant across a restore"
    );
    assert_eq!(
        ledger.reset(200).1,
        [Expired::Lease {
            id: "x".into(),
            floor: None
        }]
    );
}

fn fixed(name: &str, limit: u64, window_ms: u64) -> (String, Spec) {
    (
        name.to_string(),
        Spec::FixedWindow(Policy::new(limit, window_ms).unwrap()),
    )
}

/// A peek asks with cost 0, and may name any policy: it must leave the
/// key's state exactly as it was, or one caller could reset another's
/// limit with it.
#[test]
fn a_peek_under_another_spec_changes_nothing() {
    const DAY: u64 = 86_400_000;
    let mut ledger = Ledger::new();
    let day = [log("default", 1, DAY)];
    assert!(check(&mut ledger, &day, 1_000, 1).0.allowed);
    assert!(!check(&mut ledger, &day, 1_001, 1).0.allowed);
    for peek in [
        [fixed("default", 1, DAY)],
        [log("default", 1, 1)],
        [log("default", 5, DAY)],
    ] {
        let (outcome, writes) = check(&mut ledger, &peek, 2_000, 0);
        assert!(writes.is_empty());
        assert!(outcome.allowed);
        assert!(
            !check(&mut ledger, &day, 2_001, 1).0.allowed,
            "after a peek with {peek:?}"
        );
    }
    let (slots, _) = ledger.peek(3_000);
    assert_eq!(
        (slots[0].limit, slots[0].window_ms, slots[0].used),
        (1, DAY, 1)
    );
}

#[test]
fn a_peek_reads_the_asked_spec_over_the_held_admissions() {
    let mut ledger = Ledger::new();
    assert!(check(&mut ledger, &[log("p", 3, 1000)], 0, 2).0.allowed);
    let (outcome, _) = check(&mut ledger, &[log("p", 5, 1000)], 10, 0);
    assert_eq!(outcome.policies[0].decision.remaining, 3);
    let (outcome, _) = check(&mut ledger, &[log("other", 5, 1000)], 10, 0);
    assert_eq!(outcome.policies[0].decision.remaining, 5);
    let mut new = Ledger::new();
    let (outcome, writes) = check(&mut new, &[log("p", 5, 1000)], 10, 0);
    assert!(outcome.allowed && writes.is_empty() && new.is_empty(10));
}

#[test]
fn a_conflict_is_another_algorithm_or_window_over_counting_admissions() {
    let mut ledger = Ledger::new();
    assert!(check(&mut ledger, &[log("p", 3, 1000)], 0, 1).0.allowed);
    assert_eq!(ledger.conflict(&[fixed("p", 3, 1000)], 10), Some("p"));
    assert_eq!(ledger.conflict(&[log("p", 3, 10)], 10), Some("p"));
    assert_eq!(
        ledger.conflict(&[log("q", 1, 1), log("p", 3, 2000)], 10),
        Some("p")
    );
    assert_eq!(
        ledger.conflict(&[log("p", 9, 1000)], 10),
        None,
        "a new limit is no conflict"
    );
    assert_eq!(
        ledger.conflict(&[fixed("q", 3, 10)], 10),
        None,
        "another slot"
    );
    assert_eq!(Ledger::new().conflict(&[fixed("p", 3, 10)], 10), None);
    assert_eq!(
        ledger.conflict(&[fixed("p", 3, 1000)], 1_000),
        None,
        "admissions that no longer count hold nothing back"
    );
}

fn acquire_lock(ledger: &mut Ledger, ask: &LeaseAsk, now: u64) -> Outcome {
    let specs: [(String, Spec); 0] = [];
    let ask = Ask {
        specs: &specs,
        cost: 1,
        ban: None,
        lease: Some(ask),
    };
    ledger.check(&ask, now).0
}

fn fence_of(outcome: &Outcome) -> u64 {
    outcome
        .lease
        .as_ref()
        .unwrap()
        .lease
        .as_ref()
        .unwrap()
        .fence
}

/// A key whose last lease was released holds nothing, so nothing of the
/// lease is due: its last fence must not ask for a sweep long past.
#[test]
fn a_released_lock_leaves_no_sweep_due_behind() {
    let mut ledger = Ledger::new();
    let lock = acquire_lock(&mut ledger, &lease_ask(1, 1000, "a"), 5);
    assert!(lock.allowed);
    let (released, _, _) = ledger.release("a", 100);
    assert!(released.is_some());
    assert!(ledger.is_empty(100));
    check(&mut ledger, &[log("api", 5, 1000)], 200, 1);
    assert_eq!(
        ledger.next_sweep(200),
        Some(1200),
        "the slot's window, no earlier"
    );
}

#[test]
fn a_fence_never_repeats_after_a_release_to_empty_in_the_same_millisecond() {
    let mut ledger = Ledger::new();
    let first = acquire_lock(&mut ledger, &lease_ask(1, 1000, "a"), 5);
    ledger.release("a", 5);
    let second = acquire_lock(&mut ledger, &lease_ask(1, 1000, "b"), 5);
    assert!(fence_of(&second) > fence_of(&first));
}

#[test]
fn a_burst_of_more_than_1000_grants_in_one_millisecond_keeps_fences_growing() {
    let mut ledger = Ledger::new();
    let mut last = 0;
    for n in 0..1500 {
        let granted = acquire_lock(&mut ledger, &lease_ask(1, 1000, &format!("a{n}")), 5);
        ledger.release(&format!("a{n}"), 5);
        assert!(fence_of(&granted) > last, "grant {n}");
        last = fence_of(&granted);
    }
    let next = acquire_lock(&mut ledger, &lease_ask(1, 1000, "b"), 6);
    assert!(fence_of(&next) > last, "{} after {last}", fence_of(&next));
}

#[test]
fn the_same_owner_string_alone_does_not_enter_another_callers_lock() {
    let mut ledger = Ledger::new();
    let mut ask = lease_ask(1, 30_000, "a");
    ask.owner = Some("worker".into());
    assert!(acquire_lock(&mut ledger, &ask, 0).allowed);
    let mut intruder = lease_ask(1, 30_000, "b");
    intruder.owner = Some("worker".into());
    let answer = acquire_lock(&mut ledger, &intruder, 10);
    assert!(!answer.allowed, "re-entered by naming the owner");
    assert_eq!(ledger.leases().len(), 1);
    assert_eq!(ledger.leases()[0].holds, 1);
}

#[test]
fn a_lock_held_with_limit_1_is_not_granted_to_a_caller_asking_limit_2() {
    let mut ledger = Ledger::new();
    assert!(acquire_lock(&mut ledger, &lease_ask(1, 30_000, "a"), 0).allowed);
    let mut wider = lease_ask(2, 30_000, "b");
    wider.strict_limit = true;
    assert!(!acquire_lock(&mut ledger, &wider, 10).allowed);
    assert_eq!(ledger.leases().len(), 1);
}

#[test]
fn a_slot_row_restores_the_run_it_carries() {
    let mut ledger = Ledger::new();
    let spec = Spec::SlidingLog(Policy::new(3, 1000).unwrap());
    assert!(ledger.restore_slot("api", spec.encode(), (100, 1)));
    ledger.restore_hit("api", 150, 1);
    let (outcome, _) = check(&mut ledger, &[log("api", 3, 1000)], 200, 0);
    assert_eq!(outcome.policies[0].decision.remaining, 1);
    let (outcome, _) = check(&mut ledger, &[log("api", 3, 1000)], 1_100, 0);
    assert_eq!(
        outcome.policies[0].decision.remaining, 2,
        "the run at 100 stopped counting at 1100"
    );
}

fn overriding(policies: Vec<(String, Spec)>, until_ms: Option<u64>) -> Override {
    Override {
        policies,
        until_ms,
        reason: "launch".into(),
        set_ms: 0,
        whole: None,
    }
}

#[test]
fn an_override_replaces_the_policies_from_the_next_decision_and_lapses() {
    let mut ledger = Ledger::new();
    let rule = [log("api", 2, 1000)];
    assert!(check(&mut ledger, &rule, 0, 1).0.allowed);
    assert!(check(&mut ledger, &rule, 1, 1).0.allowed);
    assert!(!check(&mut ledger, &rule, 2, 1).0.allowed);
    let (previous, writes, _) =
        ledger.set_override(Some(overriding(vec![log("api", 3, 1000)], Some(500))));
    assert!(previous.is_none());
    assert!(matches!(writes[..], [Write::Override { .. }]));
    let (outcome, _) = check(&mut ledger, &rule, 4, 1);
    assert!(
        outcome.allowed,
        "the override's limit counts the two earlier admissions"
    );
    assert_eq!(outcome.policies[0].decision.limit, 3);
    assert!(!check(&mut ledger, &rule, 5, 1).0.allowed);
    assert_eq!(ledger.next_sweep(6), Some(500), "the override lapses first");
    let expired = ledger.sweep(500);
    assert!(expired.contains(&Expired::Override));
    assert_eq!(
        check(&mut ledger, &rule, 501, 0).0.policies[0]
            .decision
            .limit,
        2
    );
}

#[test]
fn an_unlimited_override_admits_everything_and_reports_no_policy() {
    let mut ledger = Ledger::new();
    ledger.set_override(Some(overriding(Vec::new(), None)));
    for t in 0..100 {
        let (outcome, writes) = check(&mut ledger, &[log("api", 1, 1000)], t, 1);
        assert!(outcome.allowed && outcome.policies.is_empty() && writes.is_empty());
    }
    let (previous, _, expired) = ledger.set_override(None);
    assert!(previous.is_some());
    assert_eq!(expired, [Expired::Override]);
    assert!(
        ledger.is_empty(100),
        "an override on a key with no state is all it holds"
    );
}

#[test]
fn a_reset_keeps_the_override() {
    let mut ledger = Ledger::new();
    ledger.set_override(Some(overriding(vec![log("api", 5, 1000)], None)));
    check(&mut ledger, &[log("api", 1, 1000)], 1, 1);
    let (_, expired) = ledger.reset(2);
    assert!(!expired.contains(&Expired::Override));
    assert!(ledger.overridden().is_some());
}

#[test]
fn a_ban_shorter_than_the_window_retries_when_a_request_can_pass() {
    // Limit 1 per minute; banned at the second refusal for 2 s.
    let policy = BanPolicy::new(2, 60_000, 2_000, 2, 3_600_000).unwrap();
    let p = [log("api", 1, 60_000)];
    let mut ledger = Ledger::new();
    assert!(check_banned(&mut ledger, &p, 0, &policy).0.allowed);
    check_banned(&mut ledger, &p, 1, &policy);
    let (started, _) = check_banned(&mut ledger, &p, 2, &policy);
    assert_eq!(started.ban.as_ref().unwrap().until_ms, 2_002);
    assert_eq!(
        started.retry,
        Retry::After(59_998),
        "the window frees at 60 s"
    );
    // Inside the ban, the answer names the same moment: the first at which
    // a request can pass, not the ban's end (a client that obeys
    // Retry-After is never refused again).
    let (banned, _) = check_banned(&mut ledger, &p, 1_000, &policy);
    assert!(banned.ban.is_some());
    assert_eq!(banned.retry, Retry::After(59_000));
    // Once the ban has ended the refusal is the quota's, and it counts
    // toward the next offence. The refusal at 1 was invited for the place
    // that frees at 60 s, so this one is told its next lap: a window and
    // the jitter's reach later, with its jitter.
    let (after, _) = check_banned(&mut ledger, &p, 3_000, &policy);
    assert!(after.ban.is_none());
    assert_eq!(violated(&after), ["api"]);
    assert_eq!(after.earliest(), Retry::After(57_000));
    let lap = 60_000 + 1_000;
    let jitter = crate::limit::spread::jitter_ms(2, 1_000);
    assert_eq!(after.retry, Retry::After(57_000 + lap + jitter));
    let (again, _) = check_banned(&mut ledger, &p, 3_001, &policy);
    let notice = again.ban.unwrap();
    assert_eq!((notice.offences, notice.until_ms), (2, 3_001 + 4_000));
}

#[test]
fn a_full_concurrency_limit_asks_for_a_short_retry() {
    let mut ledger = Ledger::new();
    let specs: [(String, Spec); 0] = [];
    assert!(
        ledger
            .check(&leased(&specs, &lease_ask(1, 30_000, "a")), 0)
            .0
            .allowed
    );
    let (busy, _) = ledger.check(&leased(&specs, &lease_ask(1, 30_000, "b")), 10);
    assert!(!busy.allowed);
    // A release may come any moment; the lapse, 29.99 s away, is only the
    // worst case, which the lease part still reports.
    assert_eq!(busy.retry, Retry::After(LEASE_RETRY_MS));
    assert_eq!(busy.lease.as_ref().unwrap().retry_after_ms, 29_990);
    ledger.check(&leased(&specs, &lease_ask(1, 500, "c")), 40_000);
    let (soon, _) = ledger.check(&leased(&specs, &lease_ask(1, 500, "d")), 40_100);
    assert_eq!(
        soon.retry,
        Retry::After(400),
        "a lapse sooner than the short retry"
    );
}

#[test]
fn an_unsettled_reservation_is_due_at_its_lapse_and_kept_then() {
    let mut ledger = Ledger::new();
    let p = [log("login", 5, 900_000)];
    let ask = one(&p, None);
    let (outcome, writes) = ledger.reserve(&ask, "r1", 60_000, 0);
    assert!(outcome.allowed);
    assert_eq!(
        writes,
        [
            Write::Slot {
                name: "login".into(),
                spec: p[0].1,
                state: (0, 1)
            },
            Write::Reservation(Reservation {
                id: "r1".into(),
                lapses_ms: 60_000,
                cost: 1,
                runs: vec![Run {
                    slot: "login".into(),
                    at_ms: 0,
                    in_slot_row: true
                }],
            }),
        ],
        "the admission is written before it is answered, with the reservation's row"
    );
    assert_eq!(
        ledger.next_sweep(1),
        Some(60_000),
        "the alarm is due at the lapse"
    );
    assert!(ledger.lapse(59_999).is_empty());
    let swept = ledger.sweep(60_000);
    assert_eq!(
        swept[0],
        Expired::Reservation { id: "r1".into() },
        "kept: the reservation's row goes"
    );
    assert!(!swept.contains(&Expired::Slot {
        name: "login".into()
    }));
    let (again, writes, _) = ledger.settle("r1", false, 60_001);
    assert!(again.is_none(), "a lapsed reservation cannot be refunded");
    assert!(writes.is_empty());
    assert_eq!(ledger.peek(60_001).0[0].used, 1);
}

#[test]
fn a_refund_past_the_lapse_comes_too_late_even_before_the_alarm() {
    let mut ledger = Ledger::new();
    let p = [log("login", 5, 900_000)];
    let ask = one(&p, None);
    ledger.reserve(&ask, "r1", 1_000, 0);
    let (answer, writes, expired) = ledger.settle("r1", false, 1_000);
    assert_eq!((answer, writes), (None, Vec::new()));
    assert_eq!(expired, [Expired::Reservation { id: "r1".into() }]);
    assert_eq!(ledger.peek(1_000).0[0].used, 1, "kept");
}

#[test]
fn a_refund_keeps_a_slot_whose_oldest_unit_expired_but_a_newer_one_counts() {
    let mut ledger = Ledger::new();
    let p = [log("login", 3, 200)];
    let ask = one(&p, None);
    assert!(ledger.check(&ask, 0).0.allowed);
    assert!(ledger.reserve(&ask, "r1", 10_000, 150).0.allowed);
    assert!(ledger.check(&ask, 180).0.allowed);
    // Nothing decided since 180: the log's oldest unit expired at 200
    // without a decision to drop it. Refunding r1 must leave 180 counted.
    let (settled, _, expired) = ledger.settle("r1", false, 250);
    assert!(settled.is_some());
    assert!(!expired.contains(&Expired::Slot {
        name: "login".into()
    }));
    assert_eq!(ledger.peek(250).0[0].used, 1, "180 still counts");
    assert!(ledger.check(&ask, 251).0.allowed);
    assert!(ledger.check(&ask, 252).0.allowed);
    assert!(!ledger.check(&ask, 253).0.allowed, "180, 251, 252: full");
}

/// The README's login rule (5 per 15 min, ban after 3 refusals), eight
/// attempts at once: five take reservations, three are refused while the
/// five are in flight. Those three are caused by pending reservations only:
/// they are told to come back in about a second (not at the window's end)
/// and count toward no ban; once the five are refunded, the user passes.
#[test]
fn a_refusal_only_pending_reservations_cause_is_short_and_no_strike() {
    let mut ledger = Ledger::new();
    let p = [log("login", 5, 900_000)];
    let policy = BanPolicy::new(3, 3_600_000, 900_000, 1, 900_000).unwrap();
    let ask = one(&p, Some(&policy));
    for i in 0..5 {
        let (outcome, _) = ledger.reserve(&ask, &format!("r{i}"), 60_000, i);
        assert!(outcome.allowed);
    }
    for i in 5..8 {
        let (refused, _) = ledger.reserve(&ask, &format!("r{i}"), 60_000, i);
        assert!(!refused.allowed);
        assert!(refused.ban.is_none(), "attempt {i} started a ban");
        assert_eq!(
            refused.retry,
            Retry::After(PENDING_RETRY_MS),
            "attempt {i} is told to come back in about a second"
        );
        assert!(refused.pending, "attempt {i} says why it was refused");
    }
    for i in 0..5 {
        ledger.settle(&format!("r{i}"), false, 100);
    }
    let (next, _) = ledger.reserve(&ask, "r8", 60_000, 101);
    assert!(next.allowed, "a user whose attempts succeeded is admitted");
}

/// A refusal that kept admissions cause as well is an ordinary one: its
/// retry is the window's, and it counts toward a ban.
#[test]
fn a_refusal_kept_admissions_cause_is_not_pending() {
    let mut ledger = Ledger::new();
    let p = [log("login", 2, 900_000)];
    let policy = ban_policy();
    let ask = one(&p, Some(&policy));
    assert!(ledger.check(&ask, 0).0.allowed);
    assert!(ledger.reserve(&ask, "r1", 60_000, 1).0.allowed);
    // With the reservation given back, one unit is free: pending.
    let (refused, _) = ledger.check(&ask, 2);
    assert!(refused.pending && refused.retry == Retry::After(PENDING_RETRY_MS));
    // A request of cost 2 would still be refused with it given back.
    let costly = Ask { cost: 2, ..ask };
    let (refused, _) = ledger.check(&costly, 3);
    assert!(!refused.allowed && !refused.pending);
    assert!(refused.retry > Retry::After(PENDING_RETRY_MS));
    ledger.settle("r1", true, 4);
    let (refused, _) = ledger.check(&ask, 5);
    assert!(!refused.pending, "kept units are no pending reservation");
    assert!(refused.retry > Retry::After(PENDING_RETRY_MS));
    let (banned, _) = ledger.check(&ask, 6);
    assert!(
        banned.ban.is_some_and(|b| b.started),
        "ordinary refusals strike"
    );
}

#[test]
fn an_override_changes_the_policies_it_names_adds_its_own_and_keeps_the_rest() {
    let mut ledger = Ledger::new();
    let rule = [log("api.second", 2, 1_000), log("api.day", 5, 100_000)];
    ledger.set_override(Some(overriding(
        vec![log("api.day", 50, 100_000), log("api.burst", 1, 10_000)],
        None,
    )));
    let (outcome, _) = check(&mut ledger, &rule, 0, 1);
    assert!(outcome.allowed);
    let in_force: Vec<(&str, u64)> = outcome
        .policies
        .iter()
        .map(|p| (p.name.as_str(), p.decision.limit))
        .collect();
    assert_eq!(
        in_force,
        [("api.second", 2), ("api.day", 50), ("api.burst", 1)],
        "the rule's policy the override does not name stays in force"
    );
    let (refused, _) = check(&mut ledger, &rule, 1, 1);
    assert_eq!(violated(&refused), ["api.burst"]);
    let unlimited = overriding(Vec::new(), None);
    ledger.set_override(Some(unlimited));
    assert!(check(&mut ledger, &rule, 2, 1).0.policies.is_empty());
}

#[test]
fn a_peek_in_force_reads_the_limits_asked_now_not_those_stored() {
    let mut ledger = Ledger::new();
    check(&mut ledger, &[log("api", 10, 1_000)], 0, 2);
    let now = [log("api", 3, 1_000), log("api.day", 100, 86_400_000)];
    let limits = |ledger: &mut Ledger, asked: &[(String, Spec)]| -> Vec<(String, u64, u64)> {
        ledger
            .peek_in_force(asked, 100)
            .0
            .into_iter()
            .map(|s| (s.policy, s.limit, s.used))
            .collect()
    };
    assert_eq!(
        limits(&mut ledger, &now),
        [("api".into(), 3, 2), ("api.day".into(), 100, 0)],
        "the config's limit of 3 today, the two admissions logged under 10, and a policy with no slot yet"
    );
    assert_eq!(
        ledger.peek(100).0[0].limit,
        10,
        "stored, and unchanged by the peeks"
    );
    ledger.set_override(Some(overriding(vec![log("api", 20, 1_000)], None)));
    assert_eq!(
        limits(&mut ledger, &now),
        [("api".into(), 20, 2), ("api.day".into(), 100, 0)]
    );
    ledger.set_override(Some(overriding(Vec::new(), None)));
    assert!(limits(&mut ledger, &now).is_empty(), "unlimited");
}
