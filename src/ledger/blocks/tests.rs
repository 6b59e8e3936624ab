//! A key's blocks with an injected clock: grants, what they hold back,
//! reports, lapses and what storage reads back.

use super::*;
use crate::ledger::{Ask, Ledger};
use crate::limit::gcra::GcraPolicy;
use crate::limit::Policy;

const T0: u64 = 1_700_000_000_000;

fn log_spec(limit: u64, window_ms: u64) -> Spec {
    Spec::SlidingLog(Policy::new(limit, window_ms).unwrap())
}

fn ask(spec: Spec, holder: &str, rate: u32) -> BlockAsk<'_> {
    BlockAsk {
        policy: "p",
        spec,
        holder,
        rate,
    }
}

/// One plain decision of `cost` units at `now`: (allowed, remaining, pending).
fn check(ledger: &mut Ledger, spec: Spec, cost: u32, now: u64) -> (bool, u64, bool) {
    let specs = [("p".to_string(), spec)];
    let ask = Ask {
        specs: &specs,
        cost,
        ban: None,
        lease: None,
    };
    let (outcome, _) = ledger.check(&ask, now);
    let d = outcome.policies[0].decision;
    (outcome.allowed, d.remaining, outcome.pending)
}

fn report(block: &Block, times: Vec<u64>) -> BlockReport {
    BlockReport {
        id: block.id,
        holder: block.holder.clone(),
        policy: block.policy.clone(),
        times,
        pending: Vec::new(),
        strikes: 0,
    }
}

#[test]
fn a_log_counts_an_outstanding_block_in_full_until_its_report() {
    let spec = log_spec(100, 10_000);
    let mut ledger = Ledger::new();
    let (block, writes) = ledger.grant_block(&ask(spec, "a", 20), T0).unwrap();
    assert!(writes.is_empty(), "a log's block writes only its own row");
    assert_eq!((block.admissions, block.granted_ms), (20, T0));
    assert_eq!(
        block.until_ms,
        T0 + 999,
        "twice the time 20 take at 20/s, capped at 1 s"
    );
    assert!(!ledger.is_empty(T0));
    assert_eq!(ledger.next_sweep(T0), Some(block.lapses_ms()));
    // The object sees 80 left, and says so as a lower bound.
    assert_eq!(check(&mut ledger, spec, 1, T0 + 5), (true, 79, false));
    assert_eq!(check(&mut ledger, spec, 79, T0 + 6), (true, 0, false));
    // Refused only because of the block: pending, told to come back by
    // the lease's end.
    assert_eq!(check(&mut ledger, spec, 1, T0 + 7), (false, 0, true));
    // The report brings 3 real times; 17 come back.
    let reported = ledger
        .report_block(
            &report(&block, vec![T0 + 2, T0 + 1, T0 + 2]),
            spec,
            None,
            T0 + 8,
        )
        .unwrap();
    let row = reported.times.unwrap();
    assert_eq!(row.newest_ms, T0 + 2);
    assert_eq!(times::decode(&row.times).unwrap(), [T0 + 1, T0 + 2, T0 + 2]);
    assert!(
        reported.writes.is_empty(),
        "the slot's row holds its spec already"
    );
    assert_eq!(check(&mut ledger, spec, 17, T0 + 9), (true, 0, false));
    assert!(!check(&mut ledger, spec, 1, T0 + 9).0);
    assert!(ledger.blocks().is_empty());
}

#[test]
fn a_block_counts_in_every_window_its_lease_overlaps() {
    // Limit 10 in 100 ms: a block of 5 over [T0, T0 + 49] (rate 200/s,
    // lease capped at W / 2).
    let spec = log_spec(10, 100);
    let mut ledger = Ledger::new();
    let (block, _) = ledger.grant_block(&ask(spec, "a", 200), T0).unwrap();
    assert_eq!((block.admissions, block.until_ms), (5, T0 + 49));
    // At T0 + 120 the window [T0 + 21, T0 + 120] still overlaps the lease:
    // 5 more fit, not 10.
    assert_eq!(check(&mut ledger, spec, 5, T0 + 120), (true, 0, false));
    assert!(!check(&mut ledger, spec, 1, T0 + 120).0);
    // From T0 + 149 on, no window holding now overlaps it.
    assert!(check(&mut ledger, spec, 1, T0 + 149).0);
    assert_eq!(ledger.lapse_blocks(T0 + 148), Vec::<u64>::new());
    assert_eq!(ledger.lapse_blocks(T0 + 149), vec![block.id]);
    assert_eq!(
        ledger.report_block(&report(&block, vec![]), spec, None, T0 + 150),
        Err(BlockError::Unknown),
        "a lapsed block is reported no more"
    );
}

#[test]
fn grants_go_to_hot_keys_far_from_their_limit_and_are_shared() {
    let spec = log_spec(100, 10_000);
    let mut ledger = Ledger::new();
    assert_eq!(ledger.grant_block(&ask(spec, "a", 4), T0), None, "not hot");
    let (a, _) = ledger.grant_block(&ask(spec, "a", 1_000), T0).unwrap();
    assert_eq!(a.admissions, 50, "half the headroom for the first");
    let (b, _) = ledger.grant_block(&ask(spec, "b", 1_000), T0).unwrap();
    assert_eq!(b.admissions, 12, "50 left, shared with one other: 50 / 4");
    assert_ne!(a.id, b.id);
    // 38 left: over a quarter; a third holder's share 38 / 6 = 6.
    let (c, _) = ledger.grant_block(&ask(spec, "c", 1_000), T0).unwrap();
    assert_eq!(c.admissions, 6);
    // 32 left, 4 holders: 32 / 8 = 4... until under a quarter of the limit.
    let mut granted = 68;
    while let Some((d, _)) = ledger.grant_block(&ask(spec, "d", 1_000), T0) {
        granted += d.admissions;
    }
    // The last grant finds 25 or more; what it leaves is under 25.
    assert!((76..=80).contains(&granted), "{granted}");
}

#[test]
fn no_block_for_a_banned_or_paused_key() {
    let spec = log_spec(100, 10_000);
    let mut ledger = Ledger::new();
    let ban = crate::ledger::BanPolicy::new(1, 60_000, 60_000, 1, 60_000).unwrap();
    let (block, _) = ledger.grant_block(&ask(spec, "a", 100), T0).unwrap();
    let mut with_strikes = report(&block, vec![T0]);
    with_strikes.strikes = 1;
    let reported = ledger
        .report_block(&with_strikes, spec, Some(&ban), T0 + 1)
        .unwrap();
    assert!(
        reported.ban.is_some(),
        "a local refusal counts toward a ban"
    );
    assert!(reported.writes.iter().any(|w| matches!(w, Write::Ban(_))));
    assert_eq!(ledger.grant_block(&ask(spec, "a", 100), T0 + 2), None);
}

#[test]
fn invalid_reports_are_refused_and_change_nothing() {
    let spec = log_spec(100, 10_000);
    let mut ledger = Ledger::new();
    let (block, _) = ledger.grant_block(&ask(spec, "a", 10), T0).unwrap();
    let cases = [
        (
            BlockReport {
                id: block.id + 1,
                ..report(&block, vec![])
            },
            BlockError::Unknown,
        ),
        (
            BlockReport {
                policy: "q".into(),
                ..report(&block, vec![])
            },
            BlockError::Unknown,
        ),
        (
            BlockReport {
                holder: "b".into(),
                ..report(&block, vec![])
            },
            BlockError::Holder,
        ),
        (
            report(&block, vec![T0; block.admissions as usize + 1]),
            BlockError::TooMany,
        ),
        (report(&block, vec![T0 - 1]), BlockError::OutsideLease),
        (
            report(&block, vec![block.until_ms + 1]),
            BlockError::OutsideLease,
        ),
    ];
    for (bad, error) in cases {
        assert_eq!(
            ledger.report_block(&bad, spec, None, T0 + 5),
            Err(error),
            "{bad:?}"
        );
    }
    assert_eq!(ledger.blocks(), std::slice::from_ref(&block));
    let edge = report(&block, vec![T0, block.until_ms]);
    let reported = ledger
        .report_block(&edge, spec, None, block.until_ms)
        .unwrap();
    assert!(
        matches!(&reported.writes[..], [Write::Slot { state: (0, 0), .. }]),
        "the slot's spec is stored before its first times row"
    );
}

#[test]
fn a_fixed_windows_block_is_tokens_of_its_window() {
    let spec = Spec::FixedWindow(Policy::new(100, 1_000).unwrap());
    let mut ledger = Ledger::new();
    assert!(check(&mut ledger, spec, 1, T0).0);
    // 100 ms of the window left: the lease ends with it.
    let (block, writes) = ledger
        .grant_block(&ask(spec, "a", 1_000), T0 + 900)
        .unwrap();
    // 49 at 1000/s, twice over: 98 ms, within the window's last 100.
    assert_eq!((block.admissions, block.until_ms), (49, T0 + 997));
    assert!(matches!(
        &writes[..],
        [Write::Slot {
            state: (T0, 50),
            ..
        }]
    ));
    assert_eq!(check(&mut ledger, spec, 1, T0 + 950), (true, 49, false));
    let reported = ledger
        .report_block(&report(&block, vec![T0 + 990]), spec, None, T0 + 995)
        .unwrap();
    assert!(matches!(
        &reported.writes[..],
        [Write::Slot { state: (T0, 3), .. }]
    ));
    assert_eq!(check(&mut ledger, spec, 0, T0 + 996).1, 97);
}

#[test]
fn a_gcra_block_is_charged_at_its_leases_end_and_replayed_when_safe() {
    // 10 a second (T = 100 ms), a bucket of 100.
    let spec = Spec::Gcra(GcraPolicy::new(99, 10, 1_000).unwrap());
    let mut ledger = Ledger::new();
    let (block, writes) = ledger.grant_block(&ask(spec, "a", 10), T0).unwrap();
    assert_eq!((block.admissions, block.until_ms), (10, T0 + 999));
    let ns = |ms: u64| ms * 1_000_000;
    assert_eq!(block.tat, Some((0, ns(T0 + 999) + ns(1_000))));
    assert_eq!(writes.len(), 1);
    // Charged as if the 10 came at the lease's end: the lease costs its
    // length in the schedule too, 80 left rather than 90.
    assert_eq!(check(&mut ledger, spec, 0, T0).1, 80);
    let reported = ledger
        .report_block(&report(&block, vec![T0, T0 + 100]), spec, None, T0 + 200)
        .unwrap();
    assert_eq!(reported.writes.len(), 1);
    // The real times: the TAT is T0 + 200 ms, the bucket full again.
    assert_eq!(check(&mut ledger, spec, 0, T0 + 200).1, 100);
    // A charge after the grant keeps the block's.
    let (block, _) = ledger.grant_block(&ask(spec, "a", 10), T0 + 300).unwrap();
    assert!(check(&mut ledger, spec, 1, T0 + 300).0);
    let held = check(&mut ledger, spec, 0, T0 + 301).1;
    let reported = ledger
        .report_block(&report(&block, vec![]), spec, None, T0 + 302)
        .unwrap();
    assert!(reported.writes.is_empty());
    assert_eq!(check(&mut ledger, spec, 0, T0 + 301).1, held);
}

#[test]
fn blocks_and_their_times_read_back_exactly() {
    let spec = log_spec(100, 10_000);
    let mut ledger = Ledger::new();
    assert!(check(&mut ledger, spec, 3, T0 + 50).0);
    let (reported_block, _) = ledger.grant_block(&ask(spec, "a", 20), T0 + 60).unwrap();
    let (held_block, _) = ledger.grant_block(&ask(spec, "b", 20), T0 + 70).unwrap();
    assert!(check(&mut ledger, spec, 2, T0 + 80).0);
    let times = vec![T0 + 60, T0 + 75, T0 + 75, T0 + 90];
    let reported = ledger
        .report_block(&report(&reported_block, times), spec, None, T0 + 100)
        .unwrap();
    let row = reported.times.unwrap();
    // A restarted object: the slot row, its hits, the times row, the
    // block still held.
    let mut restarted = Ledger::new();
    assert!(restarted.restore_slot("p", spec.encode(), (T0 + 50, 3)));
    restarted.restore_hit("p", T0 + 80, 2);
    assert!(restarted.restore_times(&row.policy, &row.times));
    restarted.restore_block(held_block.clone());
    assert_eq!(restarted.peek(T0 + 100), ledger.peek(T0 + 100));
    assert_eq!(restarted.blocks(), ledger.blocks());
    for now in [T0 + 100, T0 + 10_060, T0 + 10_076, T0 + 11_100] {
        assert_eq!(
            check(&mut restarted, spec, 0, now),
            check(&mut ledger, spec, 0, now)
        );
    }
    let (next, _) = restarted
        .grant_block(&ask(spec, "c", 20), T0 + 100)
        .unwrap();
    assert!(next.id > held_block.id, "ids are not reused");
    // Nor after a restart that forgot every block, a millisecond later.
    let mut forgetful = Ledger::new();
    let (again, _) = forgetful
        .grant_block(&ask(spec, "c", 20), T0 + 101)
        .unwrap();
    assert!(again.id > next.id);
    assert!(!restarted.restore_times("p", "*"));
    assert!(!restarted.restore_times("q", ""));
}
