//! Stacked limits on the request path: a rule with `also` layers planned,
//! climbed against real ledgers (one per object, fed the very requests the
//! plan built) and concluded, for every way a climb can end.

use std::collections::HashMap;

use super::*;
use crate::objects::name::Scope;
use crate::objects::protocol::{CheckRequest, SettleRequest};

/// The key objects a climb calls, each a real ledger.
#[derive(Default)]
pub(super) struct Objects {
    pub(super) ledgers: HashMap<String, Ledger>,
    /// Objects whose answers are lost (after they decided).
    down: Vec<String>,
    /// Every call, in order: the object and whether it asked to reserve.
    pub(super) calls: Vec<(String, bool)>,
    /// The randomness plans draw from: reservation ids never repeat.
    dice: Option<Dice>,
}

impl Objects {
    /// `user`'s request to `config`'s rule, planned.
    fn plan<'a>(&mut self, config: &'a Config, user: &str) -> Plan<'a> {
        let dice = self.dice.get_or_insert_with(Dice::new);
        plan_with(config, &Remembered::default(), &buyer(user), dice)
    }

    /// What the object `request` names answers, as the key object does
    /// (`edge/limiter`): the blocks it reports first, then the decision,
    /// then the blocks it asks for.
    pub(super) fn call(&mut self, request: &CheckRequest, now: u64) -> Result<Outcome, String> {
        self.calls
            .push((request.key.clone(), request.reserve.is_some()));
        let specs = request.policies().unwrap();
        let ban = request.ban().unwrap();
        let reports = request.reports().unwrap();
        let ledger = self.ledgers.entry(request.key.clone()).or_default();
        let taken = ledger.take_reports(&reports, &specs, ban.as_ref(), now);
        assert_eq!(taken.refused, 0, "every report is accepted");
        let question = Question {
            specs: &specs,
            cost: request.cost,
            ban: ban.as_ref(),
            lease: request.lease.as_ref(),
        };
        let conflict = request
            .refuse_conflicts
            .then(|| ledger.conflict(&specs, now))
            .flatten();
        let (mut outcome, _) = match (conflict, &request.reserve) {
            (Some(name), _) => (Outcome::conflicting(name), Vec::new()),
            (None, Some(r)) => ledger.reserve(&question, &r.id, now + r.ttl_ms, now),
            (None, None) => ledger.check(&question, now),
        };
        let plain = request.lease.is_none();
        if let Some(ask) = request.block.as_ref().filter(|_| plain && outcome.allowed) {
            outcome.blocks = ledger.grant_blocks(&specs, &ask.holder, ask.rate, now).0;
        }
        if self.down.contains(&request.key) {
            return Err("timed out".into());
        }
        Ok(outcome)
    }

    pub(super) fn settle(&mut self, settle: &SettleRequest, now: u64) {
        if let Some(ledger) = self.ledgers.get_mut(&settle.key) {
            ledger.settle(&settle.reservation, settle.keep, now);
        }
    }

    /// Units an object counts now (pending reservations included).
    fn used(&mut self, object: &str) -> u64 {
        self.ledgers.get_mut(object).map_or(0, |ledger| {
            ledger
                .peek(NOW + 200)
                .0
                .iter()
                .map(|s| s.used)
                .max()
                .unwrap_or(0)
        })
    }

    /// `user`'s request planned and climbed.
    fn buy(&mut self, config: &Config, user: &str) -> (Conclusion, Vec<(ObjectName, Outcome)>) {
        let plan = self.plan(config, user);
        self.climb(plan)
    }

    /// Climbs `plan`'s stack against the objects, and applies the settles
    /// the conclusion sends at once; answers the conclusion and the full
    /// parts the edge would remember.
    fn climb(&mut self, plan: Plan<'_>) -> (Conclusion, Vec<(ObjectName, Outcome)>) {
        let mut stack = match plan {
            Plan::Stack(stack) => stack,
            Plan::Ask(ask) => Stack::single(ask),
            Plan::Done(conclusion) => panic!("expected a climb, got {conclusion:?}"),
        };
        let mut full = Vec::new();
        while let Some(request) = stack.next_call() {
            let answer = self.call(&request.clone(), NOW + 100);
            if let Some(part) = stack.answer(answer) {
                full.push(part);
            }
        }
        let conclusion = stack.conclude(NOW + 100);
        for settle in &conclusion.settle_now {
            self.settle(settle, NOW + 150);
        }
        (conclusion, full)
    }
}

/// 1 per user under a global 3, split in two parts.
pub(super) fn checkout(extra: Value) -> Config {
    let mut rule = json!({
        "id": "checkout",
        "key": "header:x-user",
        "limit": 1,
        "window": "1m",
        "also": [{"id": "all", "scope": "global", "split": 2, "limit": 3, "window": "1m"}],
    });
    rule.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    config(json!([rule]))
}

pub(super) fn buyer(user: &str) -> FakeRequest {
    from(CLIENT).with("x-user", user)
}

#[test]
fn a_user_layer_reserves_then_the_global_part_checks_and_the_reservation_is_kept() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    let (conclusion, full) = objects.buy(&config, "ann");
    assert_eq!(
        objects.calls,
        [
            ("rule:checkout:ann".to_string(), true),
            ("rule:checkout.all:*#0".to_string(), false),
        ],
        "the per-user layer reserves, the last layer is a plain check"
    );
    assert!(full.is_empty());
    assert_eq!(conclusion.record, Some(("ann".into(), Verdict::Near)));
    let pass = passed(&conclusion.reply);
    assert_eq!(pass.key.as_deref(), Some("ann"));
    assert_eq!(
        field(&pass.fields, "ratelimit-policy"),
        Some("\"checkout\";q=1;w=60, \"checkout.all\";q=3;w=60"),
        "every layer's policy, the global one with its whole quota"
    );
    assert_eq!(
        field(&pass.fields, "ratelimit"),
        Some("\"checkout\";r=0;t=60, \"checkout.all\";r=1;t=60")
    );
    assert_eq!(
        conclusion.settle_now,
        [SettleRequest {
            key: "rule:checkout:ann".into(),
            reservation: "id1".into(),
            keep: true,
        }]
    );
    assert!(pass.settle.is_empty() && pass.release.is_none());
    assert_eq!(objects.used("rule:checkout:ann"), 1);
    assert_eq!(objects.used("rule:checkout.all:*#0"), 1);
}

#[test]
fn in_a_climb_every_layer_may_come_from_a_block_unless_the_rule_says_not() {
    let locals = |config: &Config| {
        let mut objects = Objects::default();
        let mut stack = match objects.plan(config, "ann") {
            Plan::Stack(stack) => stack,
            other => panic!("a stacked rule climbs: {other:?}"),
        };
        let mut locals = Vec::new();
        while let Some(request) = stack.next_call() {
            locals.push(stack.next_local());
            let answer = objects.call(&request.clone(), NOW);
            stack.answer(answer);
        }
        locals
    };
    assert_eq!(
        locals(&checkout(json!({}))),
        [true, true],
        "the user layer reserves (pending in a block), the global one admits"
    );
    assert_eq!(locals(&checkout(json!({"local": false}))), [false, false]);
    assert_eq!(
        locals(&checkout(json!({"count": {"status": ["5xx"]}}))),
        [true, true]
    );
    assert_eq!(locals(&checkout(json!({"shadow": true}))), [false, false]);
    let one_object = config(json!([{
        "id": "checkout", "key": "header:x-user", "limit": 1, "window": "1m",
        "also": [{"id": "all", "scope": "global", "limit": 3, "window": "1m"}],
    }]));
    assert_eq!(locals(&one_object), [true, true]);
}

#[test]
fn five_users_under_a_global_three_admit_three_and_leave_nothing_behind_the_others() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    let mut admitted = Vec::new();
    for user in ["u1", "u2", "u3", "u4", "u5"] {
        for _ in 0..3 {
            let (conclusion, _) = objects.buy(&config, user);
            if matches!(conclusion.reply, Reply::Forward(_)) {
                admitted.push(user);
            }
        }
    }
    assert_eq!(admitted, ["u1", "u2", "u3"], "one each, three in all");
    let global: u64 = ["rule:checkout.all:*#0", "rule:checkout.all:*#1"]
        .iter()
        .map(|o| objects.used(o))
        .sum();
    assert_eq!(global, 3);
    for user in ["u4", "u5"] {
        assert_eq!(
            objects.used(&format!("rule:checkout:{user}")),
            0,
            "{user}'s reservations were refunded"
        );
    }
}

#[test]
fn a_refusal_by_the_global_layer_names_it_refunds_the_user_and_remembers_the_parts() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    for user in ["u1", "u2", "u3"] {
        objects.buy(&config, user);
    }
    objects.calls.clear();
    let (conclusion, full) = objects.buy(&config, "ann");
    assert_eq!(objects.calls.len(), 3, "the user, then both parts");
    assert_eq!(full.len(), 2, "each full part is remembered as found");
    let (status, code, fields) = answered(&conclusion.reply);
    assert_eq!((status, code.as_str()), (429, "quota-exceeded"));
    assert_eq!(
        body(&conclusion.reply)["violated-policies"],
        json!(["checkout.all"])
    );
    assert!(
        field(&fields, "ratelimit-policy").is_some_and(|p| p.starts_with("\"checkout.all\";q=3"))
    );
    assert!(field(&fields, "retry-after").is_some());
    assert_eq!(conclusion.record, Some(("ann".into(), Verdict::Refused)));
    assert_eq!(
        conclusion.settle_now,
        [SettleRequest {
            key: "rule:checkout:ann".into(),
            reservation: "id4".into(),
            keep: false,
        }]
    );
    assert_eq!(objects.used("rule:checkout:ann"), 0, "refunded");
}

#[test]
fn a_refusal_by_the_user_layer_asks_nothing_else_and_is_remembered() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    objects.buy(&config, "ann");
    objects.calls.clear();
    let (conclusion, _) = objects.buy(&config, "ann");
    assert_eq!(
        objects.calls.len(),
        1,
        "the global parts see only what passed"
    );
    assert_eq!(answered(&conclusion.reply).0, 429);
    assert_eq!(
        body(&conclusion.reply)["violated-policies"],
        json!(["checkout"])
    );
    assert!(conclusion.settle_now.is_empty(), "it reserved nothing");
    let (object, _) = conclusion.cache.clone().unwrap();
    assert_eq!(object.as_str(), "rule:checkout:ann");
}

#[test]
fn a_retry_before_the_last_requests_refund_lands_is_told_pending() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    for user in ["u1", "u2", "u3"] {
        objects.buy(&config, user);
    }
    // ann's attempt is refused by the sold-out global layer; its refund of
    // her per-user unit is sent after the answer, and has not landed yet.
    let mut stack = match objects.plan(&config, "ann") {
        Plan::Stack(stack) => stack,
        other => panic!("a stacked rule climbs: {other:?}"),
    };
    while let Some(request) = stack.next_call() {
        let answer = objects.call(&request.clone(), NOW + 100);
        stack.answer(answer);
    }
    let refund = stack.conclude(NOW + 100).settle_now;
    assert_eq!(refund.len(), 1);
    let (retry, _) = objects.buy(&config, "ann");
    let (status, code, fields) = answered(&retry.reply);
    assert_eq!((status, code.as_str()), (429, "pending"));
    assert_eq!(field(&fields, "retry-after"), Some("1"));
    objects.settle(&refund[0], NOW + 150);
    let (after, _) = objects.buy(&config, "ann");
    let (_, code, _) = answered(&after.reply);
    assert_eq!(
        code, "quota-exceeded",
        "once refunded, the global layer answers"
    );
}

#[test]
fn a_remembered_refusal_of_any_layer_answers_with_no_call_at_all() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    for user in ["u1", "u2", "u3"] {
        objects.buy(&config, user);
    }
    let (_, full) = objects.buy(&config, "u4");
    // The isolate remembers both parts full: a sell-out flood costs nothing.
    let memory = Remembered {
        refusals: full,
        ..Remembered::default()
    };
    let conclusion = done(plan_with(&config, &memory, &buyer("u5"), &mut Dice::new()));
    assert_eq!(answered(&conclusion.reply).0, 429);
    assert_eq!(conclusion.record, Some(("u5".into(), Verdict::Refused)));
    // And a user the isolate knows is refused costs no call either.
    let (refused, _) = objects.buy(&config, "u1");
    let memory = Remembered {
        refusals: refused.cache.into_iter().collect(),
        ..Remembered::default()
    };
    let conclusion = done(plan_with(&config, &memory, &buyer("u1"), &mut Dice::new()));
    assert_eq!(
        body(&conclusion.reply)["violated-policies"],
        json!(["checkout"])
    );
}

/// What the isolate remembers once both parts of `checkout.all` refused
/// with no moment left to tell.
fn spent_parts() -> Remembered {
    let scope = Scope::named("checkout.all");
    Remembered {
        spent: vec![scope.part(0), scope.part(1)],
        ..Remembered::default()
    }
}

#[test]
fn a_sold_out_layer_with_no_moment_left_is_asked_first_and_the_user_layer_never() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    for user in ["u1", "u2", "u3"] {
        objects.buy(&config, user);
    }
    objects.calls.clear();
    let plan = plan_with(&config, &spent_parts(), &buyer("u5"), &mut Dice::new());
    let (conclusion, full) = objects.climb(plan);
    assert_eq!(
        objects.calls,
        [
            ("rule:checkout.all:*#0".to_string(), true),
            ("rule:checkout.all:*#1".to_string(), true),
        ],
        "the global parts first, reserving; the user's object not at all"
    );
    assert_eq!(full.len(), 2, "each part's refusal is remembered again");
    assert_eq!(answered(&conclusion.reply).0, 429);
    assert_eq!(
        body(&conclusion.reply)["violated-policies"],
        json!(["checkout.all"])
    );
    assert!(conclusion.settle_now.is_empty(), "nothing was taken");
}

#[test]
fn a_layer_asked_first_that_admits_is_kept_and_the_fields_keep_the_configs_order() {
    let config = checkout(json!({}));
    let mut objects = Objects::default();
    let plan = plan_with(&config, &spent_parts(), &buyer("ann"), &mut Dice::new());
    let (conclusion, _) = objects.climb(plan);
    let global = objects.calls[0].0.clone();
    assert_eq!(
        objects.calls,
        [
            (global.clone(), true),
            ("rule:checkout:ann".to_string(), false)
        ],
        "a quota freed since: the global part reserves, the user's layer checks last"
    );
    let pass = passed(&conclusion.reply);
    assert_eq!(
        field(&pass.fields, "ratelimit-policy"),
        Some("\"checkout\";q=1;w=60, \"checkout.all\";q=3;w=60")
    );
    assert_eq!(conclusion.settle_now.len(), 1);
    assert_eq!(conclusion.settle_now[0].key, global);
    assert!(conclusion.settle_now[0].keep);
    assert_eq!(objects.used(&global), 1);
    assert_eq!(objects.used("rule:checkout:ann"), 1);
}

/// The first object the plan of `user`'s request asks, and whether it
/// reserves there.
fn first_call(config: &Config, memory: &Remembered, user: &str) -> (String, bool) {
    let plan = plan_with(config, memory, &buyer(user), &mut Dice::new());
    let Plan::Stack(stack) = plan else {
        panic!("expected a climb, got {plan:?}");
    };
    let call = stack.next_call().unwrap();
    (call.key.clone(), call.reserve.is_some())
}

#[test]
fn under_a_split_of_eight_the_parts_this_request_would_ask_decide_the_order() {
    let config = config(json!([{
        "id": "checkout", "key": "header:x-user", "limit": 1, "window": "1m",
        "also": [{"id": "all", "scope": "global", "split": 8, "limit": 80, "window": "1m"}],
    }]));
    let scope = Scope::named("checkout.all");
    // Dice::new routes to parts 0 and 1.
    let routed = Remembered {
        spent: vec![scope.part(0), scope.part(1)],
        ..Remembered::default()
    };
    assert_eq!(
        first_call(&config, &routed, "ann"),
        ("rule:checkout.all:*#0".to_string(), true),
        "both parts it would ask are known full: they go first"
    );
    let others = Remembered {
        spent: (2..8).map(|part| scope.part(part)).collect(),
        ..Remembered::default()
    };
    assert_eq!(
        first_call(&config, &others, "ann"),
        ("rule:checkout:ann".to_string(), true),
        "a part it would ask may admit: the user's layer stays first"
    );
}

#[test]
fn a_gcra_layer_is_never_moved_ahead_since_its_unit_cannot_be_given_back() {
    let config = config(json!([{
        "id": "checkout", "key": "header:x-user", "limit": 1, "window": "1m",
        "also": [{"id": "all", "scope": "global", "limit": 2, "window": "1m", "algorithm": "gcra"}],
    }]));
    let memory = Remembered {
        spent: vec![Scope::named("checkout.all").object("*")],
        ..Remembered::default()
    };
    assert_eq!(
        first_call(&config, &memory, "ann"),
        ("rule:checkout:ann".to_string(), true)
    );
}

#[test]
fn a_layer_that_cannot_decide_fails_closed_refunding_what_was_reserved() {
    let config = checkout(json!({}));
    let mut objects = Objects {
        down: vec!["rule:checkout.all:*#0".into()],
        ..Objects::default()
    };
    let (conclusion, _) = objects.buy(&config, "ann");
    let (status, _, fields) = answered(&conclusion.reply);
    assert_eq!((status, field(&fields, "retry-after")), (503, Some("1")));
    assert_eq!(conclusion.record, Some(("ann".into(), Verdict::Failed)));
    assert_eq!(conclusion.settle_now.len(), 1);
    assert!(!conclusion.settle_now[0].keep);
    assert_eq!(objects.used("rule:checkout:ann"), 0);
    // The first layer's answer lost: its reservation, which it took, is
    // refunded too.
    let mut objects = Objects {
        down: vec!["rule:checkout:bob".into()],
        ..Objects::default()
    };
    let (conclusion, _) = objects.buy(&config, "bob");
    assert_eq!(answered(&conclusion.reply).0, 503);
    assert_eq!(objects.calls.len(), 1);
    assert_eq!(conclusion.settle_now[0].key, "rule:checkout:bob");
    assert_eq!(objects.used("rule:checkout:bob"), 0);
}

#[test]
fn a_layer_that_cannot_decide_is_left_out_when_the_rule_fails_open() {
    let config = checkout(json!({"on_error": "allow"}));
    let mut objects = Objects {
        down: vec!["rule:checkout.all:*#0".into()],
        ..Objects::default()
    };
    let (conclusion, _) = objects.buy(&config, "ann");
    let pass = passed(&conclusion.reply);
    assert_eq!(field(&pass.fields, "sluice-degraded"), Some("fail-open"));
    assert_eq!(
        field(&pass.fields, "ratelimit-policy"),
        Some("\"checkout\";q=1;w=60"),
        "the layers that decided still announce themselves"
    );
    assert_eq!(conclusion.record, Some(("ann".into(), Verdict::Failed)));
    assert!(matches!(conclusion.log, Some(Log::Error(_))));
    assert!(conclusion.settle_now.iter().all(|s| s.keep));
    assert_eq!(
        objects.used("rule:checkout:ann"),
        1,
        "kept: the request went on"
    );
    // A user over its own limit is still refused.
    objects.calls.clear();
    let (again, _) = objects.buy(&config, "ann");
    assert_eq!(answered(&again.reply).0, 429);
}

#[test]
fn layers_that_count_by_answer_are_settled_by_the_origins_status() {
    let config = config(json!([{
        "id": "login", "key": "ip+header:x-user", "limit": 5, "window": "15m",
        "count": {"status": [401]},
        "also": [
            {"id": "ip", "key": "ip", "limit": 50, "window": "15m"},
            {"id": "every", "scope": "global", "limit": 5000, "window": "1m", "count": "all"},
        ],
    }]));
    let mut objects = Objects::default();
    let (conclusion, _) = objects.buy(&config, "ann");
    let reserving: Vec<bool> = objects.calls.iter().map(|(_, reserve)| *reserve).collect();
    assert_eq!(
        reserving,
        [true, true, false],
        "counting layers reserve, and so does every layer but the last"
    );
    let pass = passed(&conclusion.reply);
    let settled: Vec<&str> = pass.settle.iter().map(|s| s.object.as_str()).collect();
    assert_eq!(
        settled,
        ["rule:login:203.0.113.9|ann", "rule:login.ip:203.0.113.9"]
    );
    assert!(pass.settle.iter().all(|s| s.keeps(401) && !s.keeps(200)));
    assert_eq!(
        conclusion.settle_now.len(),
        0,
        "the last layer counts all: a plain check"
    );
}

#[test]
fn a_shadow_stack_forwards_what_a_later_layer_would_refuse_and_refunds_the_rest() {
    let config = checkout(json!({"shadow": true}));
    let mut objects = Objects::default();
    for user in ["u1", "u2", "u3"] {
        objects.buy(&config, user);
    }
    let (conclusion, _) = objects.buy(&config, "ann");
    let pass = passed(&conclusion.reply);
    let shadow = field(&pass.fields, "sluice-shadow").unwrap();
    assert!(
        shadow.starts_with("refuse;violated=\"checkout.all\""),
        "{shadow}"
    );
    assert_eq!(conclusion.record, Some(("ann".into(), Verdict::Shadow)));
    assert!(conclusion.settle_now.iter().all(|s| !s.keep));
    assert_eq!(objects.used("rule:checkout:ann"), 0);
}

#[test]
fn a_ban_counts_the_users_own_refusals_and_a_global_refusal_is_remembered() {
    let config = config(json!([{
        "id": "checkout", "key": "header:x-user", "limit": 1, "window": "1m",
        "ban": {"after": 1, "within": "1m", "for": "10m"},
        "also": [{"id": "all", "scope": "global", "limit": 1, "window": "1m"}],
    }]));
    let mut objects = Objects::default();
    objects.buy(&config, "ann");
    let (sold_out, _) = objects.buy(&config, "bob");
    assert_eq!(
        body(&sold_out.reply)["violated-policies"],
        json!(["checkout.all"])
    );
    assert!(
        sold_out.ban_started.is_none(),
        "a sold-out quota is nobody's offence"
    );
    let (object, _) = sold_out
        .cache
        .clone()
        .expect("the global layer bans nobody: cached");
    assert_eq!(object.as_str(), "rule:checkout.all:*");
    let (banned, _) = objects.buy(&config, "ann");
    assert_eq!(answered(&banned.reply).1, "banned");
    let ban = banned.ban_started.clone().unwrap();
    assert_eq!(
        (ban.key.as_str(), ban.source.as_str()),
        ("ann", "rule:checkout")
    );
}

#[test]
fn a_global_rule_with_a_user_layer_asks_the_user_first_and_reports_the_user() {
    let config = config(json!([{
        "id": "sale", "scope": "global", "split": 2, "limit": 10, "window": "1m",
        "also": [{"id": "user", "key": "header:x-user", "limit": 1, "window": "1m"}],
    }]));
    let mut objects = Objects::default();
    let (conclusion, _) = objects.buy(&config, "ann");
    let order: Vec<&str> = objects.calls.iter().map(|(o, _)| o.as_str()).collect();
    assert_eq!(order, ["rule:sale.user:ann", "rule:sale:*#0"]);
    assert_eq!(conclusion.record, Some(("ann".into(), Verdict::Near)));
    assert_eq!(
        field(&passed(&conclusion.reply).fields, "ratelimit-policy"),
        Some("\"sale.user\";q=1;w=60, \"sale\";q=10;w=60")
    );
}

#[test]
fn tiers_stack_their_own_layer_and_every_layer_needs_its_key() {
    let config = config(json!([{
        "id": "api",
        "tiers": [
            {"name": "registered", "when": "registered", "limit": 100, "window": "1m"},
            {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"},
        ],
        "also": [{"id": "team", "key": "header:x-team", "limit": 1000, "window": "1m"}],
    }]));
    let claims = json!({"sub": "u1", "exp": NOW / 1000 + 60});
    let request = buyer("ann")
        .with("authorization", &token(claims))
        .with("x-team", "red");
    let mut objects = Objects::default();
    objects.climb(plan_with(
        &config,
        &Remembered::default(),
        &request,
        &mut Dice::new(),
    ));
    let order: Vec<&str> = objects.calls.iter().map(|(o, _)| o.as_str()).collect();
    assert_eq!(order, ["rule:api.registered:u1", "rule:api.team:red"]);
    let conclusion = done(plan_of(&config, &from(CLIENT)));
    let (status, code, _) = answered(&conclusion.reply);
    assert_eq!((status, code.as_str()), (400, "missing-key"));
    assert_eq!(body(&conclusion.reply)["field"], "header:x-team");
}

#[test]
fn a_manual_ban_on_any_layers_key_refuses_without_a_call() {
    let config = checkout(json!({}));
    let memory = Remembered {
        bans: vec![BanRecord {
            key: "ann".into(),
            until_ms: NOW + 60_000,
            reason: "bot".into(),
            source: MANUAL.into(),
            started_ms: NOW,
        }],
        ..Remembered::default()
    };
    let conclusion = done(plan_with(&config, &memory, &buyer("ann"), &mut Dice::new()));
    assert_eq!(answered(&conclusion.reply).1, "banned");
}

/// A decision-API call with `layers`, climbed against `objects`; the
/// settles it sends at once are applied.
fn api_climb(objects: &mut Objects, body: &str) -> (Vec<Passed>, Option<Stop>, usize) {
    use crate::http::api::{parse_limit_request, LimitCall};
    let Ok(LimitCall::Layers(request)) =
        parse_limit_request(Some("application/json"), body.as_bytes())
    else {
        panic!("a layered body");
    };
    let mut drawn = 0;
    let mut climb = key_climb(&request, || {
        drawn += 1;
        Some(format!("r{drawn}-{}", objects.calls.len()))
    })
    .unwrap();
    while let Some(check) = climb.next_call() {
        let answer = objects.call(&check.clone(), NOW + 100);
        climb.answer(answer);
    }
    let settles = climb.settle_now();
    for settle in &settles {
        objects.settle(settle, NOW + 150);
    }
    let (_, passed, stop) = climb.into_parts();
    (passed, stop, settles.len())
}

const API_SALE: &str = r#"{"layers": [
    {"key": "user:ann", "limit": 1, "window_ms": 60000},
    {"key": "sale", "limit": 1, "window_ms": 60000}
]}"#;

#[test]
fn a_layered_api_call_reserves_every_key_but_the_last_and_is_all_or_nothing() {
    let mut objects = Objects::default();
    let (passed, stop, settles) = api_climb(&mut objects, API_SALE);
    assert_eq!(
        objects.calls,
        [
            ("api:user:ann".to_string(), true),
            ("api:sale".to_string(), false)
        ]
    );
    assert_eq!((passed.len(), stop, settles), (2, None, 1));
    assert_eq!(objects.used("api:user:ann"), 1, "kept");
    let bob = API_SALE.replace("user:ann", "user:bob");
    let (passed, stop, settles) = api_climb(&mut objects, &bob);
    assert_eq!(passed.len(), 1);
    assert!(
        matches!(stop, Some(Stop::Refused { .. })),
        "the sale is sold out"
    );
    assert_eq!(settles, 1);
    assert_eq!(objects.used("api:user:bob"), 0, "bob's unit was given back");
    // A peek reserves nothing.
    objects.calls.clear();
    let peek = API_SALE.replace("\"layers\"", "\"cost\": 0, \"layers\"");
    let (passed, stop, settles) = api_climb(&mut objects, &peek);
    assert_eq!((passed.len(), stop.is_none(), settles), (2, true, 0));
    assert!(objects.calls.iter().all(|(_, reserve)| !reserve));
}

#[test]
fn a_layered_api_calls_keys_may_come_from_blocks_unless_it_says_not() {
    use crate::http::api::{parse_limit_request, LimitCall};
    let locals = |body: &str| {
        let Ok(LimitCall::Layers(request)) =
            parse_limit_request(Some("application/json"), body.as_bytes())
        else {
            panic!("a layered body");
        };
        let mut objects = Objects::default();
        let mut climb = key_climb(&request, || Some("r".into())).unwrap();
        let mut locals = Vec::new();
        while let Some(check) = climb.next_call() {
            locals.push(climb.next_local());
            let answer = objects.call(&check.clone(), NOW);
            climb.answer(answer);
        }
        locals
    };
    assert_eq!(locals(API_SALE), [true, true]);
    let off = API_SALE.replace("\"layers\"", "\"local\": false, \"layers\"");
    assert_eq!(locals(&off), [false, false]);
}

#[test]
fn a_layered_api_call_stops_at_a_conflict_and_gives_back_what_it_took() {
    let mut objects = Objects::default();
    api_climb(
        &mut objects,
        r#"{"layers": [{"key": "sale", "limit": 5, "window_ms": 1000, "algorithm": "fixed_window"}]}"#,
    );
    let (passed, stop, settles) = api_climb(&mut objects, API_SALE);
    assert_eq!((passed.len(), settles), (1, 1));
    let Some(Stop::Refused { outcome, .. }) = stop else {
        panic!("a conflict ends the climb");
    };
    assert_eq!(outcome.conflict.as_deref(), Some("default"));
    assert_eq!(objects.used("api:user:ann"), 0);
}

#[test]
fn a_paused_global_layer_answers_for_the_rule_and_gives_the_per_user_layer_back() {
    let config = checkout(json!({}));
    // The isolate's KV copy is not where this rule's state lives: a stale
    // entry there decides nothing.
    let stale = Remembered {
        states: vec![("checkout".into(), control(RuleState::Closed))],
        ..Remembered::default()
    };
    let plan = plan_with(&config, &stale, &buyer("ann"), &mut Dice::new());
    assert!(matches!(plan, Plan::Stack(_)), "the layers are asked");
    let mut objects = Objects::default();
    for part in ["rule:checkout.all:*#0", "rule:checkout.all:*#1"] {
        let ledger = objects.ledgers.entry(part.to_string()).or_default();
        ledger.set_control(control(RuleState::Paused));
    }
    let (conclusion, _) = objects.buy(&config, "ann");
    let (status, code, fields) = answered(&conclusion.reply);
    assert_eq!((status, code.as_str()), (503, "paused"));
    assert_eq!(field(&fields, "retry-after"), Some("10"));
    assert_eq!(
        objects.used("rule:checkout:ann"),
        0,
        "ann's unit given back"
    );
    for part in ["rule:checkout.all:*#0", "rule:checkout.all:*#1"] {
        let ledger = objects.ledgers.get_mut(part).unwrap();
        ledger.set_control(control(RuleState::Open));
    }
    let (conclusion, _) = objects.buy(&config, "ann");
    assert!(
        matches!(conclusion.reply, Reply::Forward(_)),
        "ann buys once open"
    );
}
