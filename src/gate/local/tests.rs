use proptest::prelude::*;

use super::*;
use crate::ledger::{Ask, Ledger};
use crate::limit::gcra::GcraPolicy;
use crate::limit::Policy;

const T0: u64 = 1_700_000_000_000;

fn specs(limit: u64, window_ms: u64) -> Vec<(String, Spec)> {
    vec![(
        "p".to_string(),
        Spec::SlidingLog(Policy::new(limit, window_ms).unwrap()),
    )]
}

/// The key object, as `edge/limiter` serves a check: reports first, then
/// the decision, then the blocks asked for.
fn serve(ledger: &mut Ledger, call: &CheckRequest, now: u64) -> Outcome {
    serve_counting(ledger, call, now).0
}

/// [`serve`], and the SQLite rows the call writes (one each of the merged
/// writes and deletes, as `edge/limiter/sql/write.rs` runs them).
fn serve_counting(ledger: &mut Ledger, call: &CheckRequest, now: u64) -> (Outcome, usize) {
    let specs = call.policies().unwrap();
    let reports = call.reports().unwrap();
    let taken = ledger.take_reports(&reports, &specs, None, now);
    assert_eq!(taken.refused, 0, "every report is accepted");
    let ask = Ask {
        specs: &specs,
        cost: call.cost,
        ban: None,
        lease: None,
    };
    let (mut outcome, mut writes) = match &call.reserve {
        Some(r) => ledger.reserve(&ask, &r.id, now + r.ttl_ms, now),
        None => ledger.check(&ask, now),
    };
    if let Some(block) = call.block.as_ref().filter(|_| outcome.allowed) {
        let (grants, granted) = ledger.grant_blocks(&specs, &block.holder, block.rate, now);
        outcome.blocks = grants;
        writes.extend(granted);
    }
    let (writes, expired) = taken.rows(writes);
    (outcome, writes.len() + expired.len())
}

/// One decision of isolate `blocks` at `now`: the answer, and whether it
/// cost a call.
fn decide(
    blocks: &mut LocalBlocks,
    ledger: &mut Ledger,
    request: &CheckRequest,
    now: u64,
) -> (Outcome, bool) {
    // As `edge/blocks` does: the check first, then the lapsed blocks.
    let decided = blocks.decide(request, true, now);
    for due in blocks.due(now, &request.key) {
        let outcome = serve(ledger, &due.request, now);
        blocks.answered(&due, Some(&outcome));
    }
    match decided {
        Local::Admitted(outcome) => (outcome, false),
        Local::Call(call) => {
            let outcome = serve(ledger, &call.request, now);
            blocks.answered(&call, Some(&outcome));
            (outcome, true)
        }
    }
}

mod costs;

#[test]
fn a_hot_key_is_admitted_here_once_a_block_came() {
    let specs = specs(1_000, 10_000);
    let request = CheckRequest::new("k", &specs, 1, None);
    let mut blocks = LocalBlocks::new("iso".into());
    let mut ledger = Ledger::new();
    let mut calls = 0;
    for i in 0..100 {
        let (outcome, called) = decide(&mut blocks, &mut ledger, &request, T0 + i * 10);
        assert!(outcome.allowed);
        calls += u32::from(called);
        if !called {
            let remaining = outcome.policies[0].decision.remaining;
            let truth = 1_000 - (i + 1);
            assert!(remaining <= truth, "{remaining} > {truth}");
        }
    }
    assert!(calls <= 10, "{calls} calls for 100 decisions");
    assert_eq!(blocks.figures().value()["admitted"], 100 - calls);
    // Other limits (a config change): to the object, the blocks reported.
    let other = CheckRequest::new("k", &self::specs(999, 10_000), 1, None);
    let Local::Call(Call { request: call, .. }) = blocks.decide(&other, true, T0 + 1_000) else {
        panic!("another spec is decided by the object");
    };
    assert!(!call.reports.is_empty() && call.block.is_some());
}

#[test]
fn off_it_never_admits_here_and_spent_blocks_are_reported_alone() {
    let specs = specs(1_000, 10_000);
    let request = CheckRequest::new("k", &specs, 1, None);
    let mut blocks = LocalBlocks::new("iso".into());
    let mut ledger = Ledger::new();
    for i in 0..10 {
        decide(&mut blocks, &mut ledger, &request, T0 + i);
    }
    let Local::Call(call) = blocks.decide(&request, false, T0 + 20) else {
        panic!("off: always a call");
    };
    assert!(call.request.block.is_none());
    assert!(
        !call.request.reports.is_empty(),
        "what it held goes with the call"
    );
    let outcome = serve(&mut ledger, &call.request, T0 + 20);
    blocks.answered(&call, Some(&outcome));
    assert!(blocks.due(T0 + 60_000, "k").is_empty());
    // A block that lapses is reported by a call of cost 0.
    for i in 0..10 {
        decide(&mut blocks, &mut ledger, &request, T0 + 100 + i);
    }
    let due = blocks.due(T0 + 60_000, "k");
    assert_eq!(due.len(), 1);
    let due = &due[0].request;
    assert_eq!((due.cost, due.policies().unwrap()), (0, specs));
    serve(&mut ledger, due, T0 + 60_000);
    assert!(ledger.blocks().is_empty());
    assert_eq!(blocks.figures().value()["held"], 0);
}

#[test]
fn a_reservation_is_pending_in_its_block_and_settled_here_until_reported() {
    use crate::ledger::LeaseAsk;
    use crate::objects::protocol::{ReserveAsk, SettleRequest};
    let specs = specs(1_000, 10_000);
    let request = CheckRequest::new("k", &specs, 1, None);
    let mut blocks = LocalBlocks::new("iso".into());
    let mut ledger = Ledger::new();
    // Five decided by the object (the fifth brings a block of 5), one
    // admitted from the block.
    for i in 0..6 {
        decide(&mut blocks, &mut ledger, &request, T0 + i);
    }
    let reserving = |id: &str| CheckRequest {
        reserve: Some(ReserveAsk {
            id: id.into(),
            ttl_ms: 10_000,
        }),
        ..request.clone()
    };
    for id in ["r1", "r2", "r3"] {
        let decided = blocks.decide(&reserving(id), true, T0 + 7);
        assert!(matches!(decided, Local::Admitted(_)), "{id}: {decided:?}");
    }
    let settle = |id: &str, keep| SettleRequest {
        key: "k".into(),
        reservation: id.into(),
        keep,
    };
    assert!(blocks.settle(&settle("r1", false)), "refunded here");
    assert!(blocks.settle(&settle("r2", true)), "kept here");
    assert!(!blocks.settle(&settle("r1", true)), "settled once");
    assert!(!blocks.settle(&settle("r9", false)), "never admitted here");
    assert_eq!(blocks.figures().value()["settled"], 2);
    // A lease stays per call, block or not; the call carries the block's
    // report, r3 pending in it, which the object holds as a reservation,
    // counted until its settle.
    let leased = CheckRequest {
        lease: Some(LeaseAsk {
            name: "c".into(),
            limit: 2,
            ttl_ms: 1_000,
            owner: None,
            reenter: None,
            strict_limit: false,
            new_id: "l1".into(),
        }),
        ..request.clone()
    };
    let Local::Call(Call { request: call, .. }) = blocks.decide(&leased, true, T0 + 8) else {
        panic!("a lease goes to the object");
    };
    let reports = call.reports().unwrap();
    assert_eq!(reports[0].pending.len(), 1);
    assert_eq!(
        (reports[0].pending[0].id.as_str(), reports[0].times.len()),
        ("r3", 2)
    );
    serve(&mut ledger, &call, T0 + 8);
    let used = |ledger: &mut Ledger| ledger.peek(T0 + 9).0[0].used;
    assert_eq!(
        used(&mut ledger),
        5 + 2 + 1 + 1,
        "direct, the block's time and kept r2, pending r3, the leased call"
    );
    assert!(
        !blocks.settle(&settle("r3", false)),
        "reported: the object's"
    );
    let (settled, _, _) = ledger.settle("r3", false, T0 + 9);
    assert!(settled.is_some_and(|s| !s.kept));
    assert_eq!(used(&mut ledger), 8, "r3 refunded at the object");
}

#[test]
fn a_burst_before_the_first_grant_asks_once() {
    let specs = specs(1_000, 10_000);
    let request = CheckRequest::new("k", &specs, 1, None);
    let mut blocks = LocalBlocks::new("iso".into());
    let mut ledger = Ledger::new();
    for i in 0..4 {
        decide(&mut blocks, &mut ledger, &request, T0 + i);
    }
    // Hot now: the first call asks, those sent before its answer do not.
    let calls: Vec<Call> = (0..3)
        .map(|_| match blocks.decide(&request, true, T0 + 10) {
            Local::Call(call) => call,
            Local::Admitted(_) => panic!("no block yet"),
        })
        .collect();
    let asks = calls.iter().filter(|c| c.request.block.is_some()).count();
    assert_eq!(asks, 1);
    // A failed ask stops standing in once it lands, whatever the clock
    // says meanwhile.
    let later = T0 + 11 + 60_000;
    let Local::Call(Call { request: waits, .. }) = blocks.decide(&request, true, later) else {
        panic!("no block yet");
    };
    assert!(waits.block.is_none());
    blocks.answered(&calls[0], None);
    let Local::Call(Call { request: again, .. }) = blocks.decide(&request, true, later) else {
        panic!("no block yet");
    };
    assert!(again.block.is_some());
}

#[test]
fn a_burst_that_races_its_own_ask_is_never_refused_for_its_block() {
    // Issue 40: a fresh key of 10 a second, 3 decisions, then 7 at once
    // half a second later: the first of them answered before the others
    // are decided (its ask, not hot yet, brings nothing), the other six
    // sent before any answer.
    let specs = specs(10, 1_000);
    let request = CheckRequest::new("k", &specs, 1, None);
    let mut blocks = LocalBlocks::new("iso".into());
    let mut ledger = Ledger::new();
    for at in [0, 1, 2, 500] {
        assert!(
            decide(&mut blocks, &mut ledger, &request, T0 + at)
                .0
                .allowed
        );
    }
    let calls: Vec<Call> = (0..6)
        .map(|_| match blocks.decide(&request, true, T0 + 500) {
            Local::Call(call) => call,
            Local::Admitted(_) => panic!("no block yet"),
        })
        .collect();
    assert!(calls[0].request.block.is_some(), "hot: the fifth asks");
    // Served in order: the ask brings a block of 2, whose units then
    // count in full against the calls that raced it.
    let outcomes: Vec<Outcome> = calls
        .iter()
        .map(|call| serve(&mut ledger, &call.request, T0 + 501))
        .collect();
    assert_eq!(outcomes[0].blocks[0].admissions, 2);
    let mut admitted = 4 + outcomes.iter().filter(|o| o.allowed).count();
    assert_eq!(admitted, 8);
    let refused: Vec<&Call> = calls
        .iter()
        .zip(&outcomes)
        .filter(|(call, outcome)| blocks.answered(call, Some(outcome)))
        .map(|(call, _)| call)
        .collect();
    assert_eq!(refused.len(), 2, "both refusals may be the block's");
    assert!(!blocks.asking("k"), "the ask landed");
    for call in refused {
        assert!(blocks.again(call), "it brought a block");
        let (outcome, called) = decide(&mut blocks, &mut ledger, &request, T0 + 502);
        assert!(outcome.allowed && !called, "from the block");
        admitted += 1;
    }
    assert_eq!(admitted, 10);
    // A refusal that raced nothing, or calls that changed nothing, stands.
    let (outcome, _) = decide(&mut blocks, &mut ledger, &request, T0 + 503);
    assert!(!outcome.allowed);
}

proptest! {
    /// Several isolates on one key, all three algorithms: the object and
    /// the isolates together never admit more than a sliding log allows in
    /// any window, and a local answer's `remaining` never exceeds what is
    /// really left.
    #[test]
    fn isolates_together_stay_exact(
        steps in prop::collection::vec((0usize..3, 0u64..40), 1..400),
        algorithm in 0u8..3,
    ) {
        let (limit, window) = (60u64, 1_000u64);
        let spec = match algorithm {
            0 => Spec::SlidingLog(Policy::new(limit, window).unwrap()),
            1 => Spec::FixedWindow(Policy::new(limit, window).unwrap()),
            _ => Spec::Gcra(GcraPolicy::new(limit - 1, limit, window).unwrap()),
        };
        let specs = vec![("p".to_string(), spec)];
        let request = CheckRequest::new("k", &specs, 1, None);
        let mut isolates: Vec<LocalBlocks> =
            (0..3).map(|i| LocalBlocks::new(format!("iso{i}"))).collect();
        let mut ledger = Ledger::new();
        let mut admitted: Vec<u64> = Vec::new();
        let mut now = T0;
        for (iso, step) in steps {
            now += step;
            let (outcome, called) = decide(&mut isolates[iso], &mut ledger, &request, now);
            if outcome.allowed {
                admitted.push(now);
                if !called && algorithm == 0 {
                    let recent = admitted.iter().filter(|&&t| t + window > now).count() as u64;
                    prop_assert!(outcome.policies[0].decision.remaining <= limit - recent);
                }
            }
        }
        // Every window of the real times (a fixed window and GCRA both
        // keep to 2 × limit in any sliding window; the log to limit).
        let bound = if algorithm == 0 { limit } else { 2 * limit };
        for (i, &t) in admitted.iter().enumerate() {
            let within = admitted[i..].iter().take_while(|&&u| u < t + window).count() as u64;
            prop_assert!(within <= bound, "{within} in the window from {t}");
        }
    }
}

#[test]
fn admissions_from_a_block_announce_the_limit_in_force_an_operator_set() {
    let specs = specs(20, 60_000);
    let request = CheckRequest::new("k", &specs, 1, None);
    let mut ledger = Ledger::new();
    ledger.set_override(Some(crate::ledger::Override {
        policies: self::specs(30, 60_000),
        until_ms: None,
        reason: String::new(),
        set_ms: T0,
        whole: None,
    }));
    let mut blocks = LocalBlocks::new("iso".into());
    let mut local = 0;
    for i in 0..25 {
        let (outcome, called) = decide(&mut blocks, &mut ledger, &request, T0 + i);
        assert!(outcome.allowed);
        assert_eq!(outcome.policies[0].decision.limit, 30, "decision {i}");
        local += u32::from(!called);
    }
    assert!(local > 0, "some came from blocks");
}

/// Issue 39, 4: after an override lowers the limit, a block granted before
/// it answers for at most its lease under the limit of its grant, and says
/// so (`limit` 300 with its own `r`); the object's next answer states the
/// new limit (docs/algorithms.md, "`RateLimit` from a block").
#[test]
fn answers_from_a_block_granted_before_an_override_state_its_grants_limit() {
    let request = CheckRequest::new("k", &specs(300, 10_000), 1, None);
    let mut blocks = LocalBlocks::new("iso".into());
    let mut ledger = Ledger::new();
    let mut now = T0;
    while decide(&mut blocks, &mut ledger, &request, now).1 {
        now += 10;
    }
    ledger.set_override(Some(crate::ledger::Override {
        policies: specs(10, 10_000),
        until_ms: None,
        reason: String::new(),
        set_ms: now,
        whole: None,
    }));
    let (local, called) = decide(&mut blocks, &mut ledger, &request, now + 1);
    let stated = &local.policies[0].decision;
    assert!(
        !called && local.allowed && stated.limit == 300,
        "{stated:?}"
    );
    let mut after = now + 1;
    while !decide(&mut blocks, &mut ledger, &request, after).1 {
        after += 1;
        assert!(after <= now + 1_000, "within one lease");
    }
    let (outcome, _) = decide(&mut blocks, &mut ledger, &request, after + 1);
    assert_eq!(outcome.policies[0].decision.limit, 10);
}
