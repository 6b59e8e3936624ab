//! Global quotas on the request path: a split quota's parts routed (a
//! random part and a second chance, or first the part an admission block
//! held can admit into), parts known full skipped, a global quota's
//! decisions counted under its clients, and its state held in its parts.

use super::*;
use crate::ledger::Override;
use crate::limit::{Policy, Spec};

#[test]
fn a_part_a_block_can_admit_into_is_tried_first_and_the_random_one_second() {
    let config = sale();
    let scope = Scope::rule("sale", None);
    let mut dice = Dice {
        pair: Some((1, 0)),
        ..Dice::new()
    };
    let memory = Remembered {
        blocks: vec![scope.object("someone"), scope.part(3)],
        ..Remembered::default()
    };
    let ask = asked(plan_with(&config, &memory, &from(CLIENT), &mut dice));
    let objects: Vec<&str> = ask.tries.iter().map(|t| t.object.as_str()).collect();
    assert_eq!(objects, ["rule:sale:*#3", "rule:sale:*#1"]);
    // The random part itself: routed as drawn.
    dice.pair = Some((3, 0));
    let ask = asked(plan_with(&config, &memory, &from(CLIENT), &mut dice));
    let objects: Vec<&str> = ask.tries.iter().map(|t| t.object.as_str()).collect();
    assert_eq!(objects, ["rule:sale:*#3", "rule:sale:*#0"]);
    // Known full: skipped, as without a block (its block is reported with
    // the next call to it, or when it lapses).
    let full = answer_of(&ask.tries[0], 2);
    let memory = Remembered {
        refusals: vec![(scope.part(3), full)],
        ..memory
    };
    dice.pair = Some((1, 0));
    let ask = asked(plan_with(&config, &memory, &from(CLIENT), &mut dice));
    let objects: Vec<&str> = ask.tries.iter().map(|t| t.object.as_str()).collect();
    assert_eq!(objects, ["rule:sale:*#1"]);
    // A rule that may not use blocks routes at random whatever is held.
    let off =
        one_rule(json!({"id": "sale", "limit": 8, "scope": "global", "split": 4, "local": false}));
    let memory = Remembered {
        blocks: vec![scope.part(3)],
        ..Remembered::default()
    };
    let ask = asked(plan_with(&off, &memory, &from(CLIENT), &mut dice));
    assert_eq!(ask.tries[0].object.as_str(), "rule:sale:*#1");
}

#[test]
fn a_split_quota_asks_a_random_part_then_another() {
    let config = sale();
    let mut dice = Dice {
        pair: Some((5, 0)),
        ..Dice::new()
    };
    let ask = asked(plan_with(
        &config,
        &Remembered::default(),
        &from(CLIENT),
        &mut dice,
    ));
    let objects: Vec<&str> = ask.tries.iter().map(|t| t.object.as_str()).collect();
    assert_eq!(objects, ["rule:sale:*#1", "rule:sale:*#2"]);
    assert_eq!(ask.key, "*");
    let share = ask.tries[0].request.policies().unwrap();
    assert_eq!(share[0].1.limit(), 2, "each part holds its share");
}

#[test]
fn a_part_known_full_is_skipped_and_all_known_full_is_refused_without_a_call() {
    let config = sale();
    let mut dice = Dice {
        pair: Some((5, 0)),
        ..Dice::new()
    };
    let first = asked(plan_with(
        &config,
        &Remembered::default(),
        &from(CLIENT),
        &mut dice,
    ));
    let full_one = answer_of(&first.tries[0], 2);
    let mut memory = Remembered {
        refusals: vec![(first.tries[0].object.clone(), full_one.clone())],
        ..Remembered::default()
    };
    let ask = asked(plan_with(&config, &memory, &from(CLIENT), &mut dice));
    assert_eq!(ask.tries.len(), 1);
    assert_eq!(ask.tries[0].object.as_str(), "rule:sale:*#2");
    assert_eq!(
        ask.known_full,
        Some((first.tries[0].object.clone(), full_one))
    );
    let mut full_two = answer_of(&first.tries[1], 2);
    full_two.retry = Retry::After(1);
    memory
        .refusals
        .push((first.tries[1].object.clone(), full_two));
    let conclusion = done(plan_with(&config, &memory, &from(CLIENT), &mut dice));
    let (status, _, fields) = answered(&conclusion.reply);
    assert_eq!(status, 429);
    assert_eq!(
        field(&fields, "retry-after"),
        Some("1"),
        "the sooner part's"
    );
    assert_eq!(
        conclusion.record,
        Some((CLIENT.into(), Verdict::Refused)),
        "a global quota's refusal is counted under the client, not *"
    );
    assert_eq!(
        conclusion.invited,
        Some(first.tries[1].object.clone()),
        "only the part whose moment was told hands it out"
    );
}

#[test]
fn a_global_quotas_decisions_are_counted_under_the_clients_address() {
    let config = sale();
    let ask = asked(plan_of(&config, &from("2001:db8:1:2::77")));
    assert_eq!(ask.key, "*", "every caller shares the quota");
    assert!(
        ask.tries.iter().all(|t| t.request.watched),
        "parts count per second"
    );
    let Judged::Full(full) = ask.judge(answer_of(&ask.tries[0], 2)) else {
        panic!("a full part leaves room for another");
    };
    let conclusion = ask.all_full(Some(full), NOW);
    assert_eq!(
        conclusion.record,
        Some(("2001:db8:1:2::/64".into(), Verdict::Refused)),
        "an IPv6 client by its network, as ip keys are built"
    );
    // A quota of one object, answered from the isolate's memory.
    let one = one_rule(json!({"id": "one", "scope": "global"}));
    let ask = asked(plan_of(&one, &from(CLIENT)));
    let memory = Remembered {
        refusals: vec![(ask.tries[0].object.clone(), answer_of(&ask.tries[0], 2))],
        ..Remembered::default()
    };
    let conclusion = done(plan_with(&one, &memory, &from(CLIENT), &mut Dice::new()));
    assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Refused)));
    let no_address = asked(plan_of(&config, &FakeRequest::get()));
    assert_eq!(no_address.client.as_deref(), Some("*"));
    let per_key_rule = one_rule(json!({}));
    let per_key = asked(plan_of(&per_key_rule, &from(CLIENT)));
    assert!(!per_key.tries[0].request.watched);
    assert_eq!(per_key.client, None);
}

#[test]
fn a_global_quotas_state_is_its_parts_and_answers_from_the_first_part() {
    let config = sale();
    // The isolate's copy holds no state for a global quota: its parts do.
    let memory = Remembered {
        states: vec![("sale".into(), control(RuleState::Closed))],
        ..Remembered::default()
    };
    let ask = asked(plan_with(&config, &memory, &from(CLIENT), &mut Dice::new()));
    let object = ask.tries[0].object.clone();
    let paused = answer_in_state(&ask.tries[0], RuleState::Paused);
    assert_eq!(paused.retry, Retry::After(PAUSED_RETRY_MS));
    let Judged::Decided(paused) = ask.judge(paused) else {
        panic!("a paused part answers for the whole quota, no second part is asked");
    };
    let conclusion = ask.conclude(object.clone(), paused.clone(), NOW);
    let (status, code, fields) = answered(&conclusion.reply);
    assert_eq!((status, code.as_str()), (503, "paused"));
    assert_eq!(field(&fields, "retry-after"), Some("10"));
    assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Refused)));
    assert_eq!(conclusion.cache, Some((object.clone(), paused.clone())));
    // Parts the isolate remembers as paused are answered without a call.
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let remembered = Remembered {
        refusals: ask
            .tries
            .iter()
            .map(|t| (t.object.clone(), answer_in_state(t, RuleState::Closed)))
            .collect(),
        ..Remembered::default()
    };
    let conclusion = done(plan_with(
        &config,
        &remembered,
        &from(CLIENT),
        &mut Dice::new(),
    ));
    let (status, code, fields) = answered(&conclusion.reply);
    assert_eq!(
        (status, code.as_str(), field(&fields, "retry-after")),
        (410, "closed", None)
    );
    // Shadow mode does not undo an operator's order.
    let shadow =
        one_rule(json!({"id": "sale", "limit": 8, "scope": "global", "split": 4, "shadow": true}));
    let ask = asked(plan_of(&shadow, &from(CLIENT)));
    let closed = answer_in_state(&ask.tries[0], RuleState::Closed);
    let conclusion = ask.conclude(object, closed, NOW);
    assert_eq!(answered(&conclusion.reply).0, 410);
}

#[test]
fn a_full_part_gets_a_second_chance_and_answers_announce_the_whole_quota() {
    let config = sale();
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let Judged::Full(full) = ask.judge(answer_of(&ask.tries[0], 2)) else {
        panic!("a full part leaves room for another");
    };
    assert_eq!(
        full.policies[0].decision.limit, 8,
        "the whole quota's limit"
    );
    let Judged::Decided(admitted) = ask.judge(answer_of(&ask.tries[1], 0)) else {
        panic!("an admission decides");
    };
    assert_eq!(admitted.policies[0].decision.limit, 8);
    let conclusion = ask.all_full(Some(full), NOW);
    assert_eq!(answered(&conclusion.reply).0, 429);
    assert_eq!(conclusion.invited, None, "the object told its own moment");
}

#[test]
fn under_an_override_of_the_whole_quota_a_parts_answer_announces_the_whole_it_set() {
    let config = sale();
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let request = &ask.tries[0].request;
    let specs = request.policies().unwrap();
    let mut ledger = Ledger::new();
    let share = specs[0].1.limit() + 1;
    ledger.set_override(Some(Override {
        policies: vec![(
            specs[0].0.clone(),
            Spec::SlidingLog(Policy::new(share, 60_000).unwrap()),
        )],
        until_ms: None,
        reason: String::new(),
        set_ms: NOW,
        whole: Some((specs[0].0.clone(), 12)),
    }));
    let question = Question {
        specs: &specs,
        cost: 1,
        ban: None,
        lease: None,
    };
    let Judged::Decided(admitted) = ask.judge(ledger.check(&question, NOW).0) else {
        panic!("an admission decides");
    };
    assert_eq!(
        admitted.policies[0].decision.limit, 12,
        "not the config's 8"
    );
    assert_eq!(
        admitted.policies[0].decision.remaining,
        share - 1,
        "the part's own"
    );
}
