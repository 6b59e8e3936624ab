//! Every branch of the request path, on the host: a plan from a config, a
//! fake request and a fake isolate memory; outcomes from a real ledger fed
//! the very request the plan built; conclusions from those outcomes.

use std::net::IpAddr;

use serde_json::{json, Value};

use super::*;
use crate::config::Config;
use crate::control::{Control, RuleState, PAUSED_RETRY_MS};
use crate::http::jwt::tests::sign_raw;
use crate::http::jwt::Hs256Key;
use crate::http::tests::FakeRequest;
use crate::isolate::banlist::{BanList, BanRecord, MANUAL};
use crate::ledger::{Ask as Question, Ledger, PENDING_RETRY_MS};
use crate::limit::Retry;
use crate::objects::name::{ObjectName, Scope};

mod flash;
mod layers;
mod split;

const NOW: u64 = 1_700_000_000_000;
const SECRET: &[u8] = b"a secret for the gate's tests, 32+";
const CLIENT: &str = "203.0.113.9";

/// What the isolate remembers, set by each test.
#[derive(Default)]
struct Remembered {
    bans: Vec<BanRecord>,
    refusals: Vec<(ObjectName, Outcome)>,
    /// How many moments the cache would ask any object for (0 reads as
    /// 1, what an isolate asks of an object it has no entry for).
    invitations: u32,
    states: Vec<(String, Control)>,
    /// Objects whose refusal the isolate holds with no moment left to tell.
    spent: Vec<ObjectName>,
    /// Objects an admission block the isolate holds can admit into.
    blocks: Vec<ObjectName>,
}

impl Memory for Remembered {
    fn manual_ban(&self, ip: Option<IpAddr>, keys: &[&str], now_ms: u64) -> Option<BanRecord> {
        let mut list = BanList::new();
        list.replace(self.bans.clone(), 0);
        list.find(ip, keys, now_ms).cloned()
    }

    fn cached_refusal(&self, object: &ObjectName, _now_ms: u64) -> Option<Outcome> {
        self.refusals
            .iter()
            .find(|(o, _)| o == object)
            .map(|(_, outcome)| outcome.clone())
    }

    fn invitations(&self, _object: &ObjectName) -> u32 {
        self.invitations.max(1)
    }

    fn refuses(&self, object: &ObjectName, now_ms: u64) -> bool {
        self.spent.contains(object) || self.cached_refusal(object, now_ms).is_some()
    }

    fn rule_state(&self, rule: &str, _now_ms: u64) -> Option<Control> {
        self.states
            .iter()
            .find(|(r, _)| r == rule)
            .map(|(_, control)| control.clone())
    }

    fn block_part(&self, scope: &Scope, parts: u32, _now_ms: u64) -> Option<u32> {
        self.blocks
            .iter()
            .find_map(|object| scope.part_of(object.as_str()).filter(|&p| p < parts))
    }
}

/// Randomness that is counted ids and a fixed draw, or none at all.
struct Dice {
    ids: u32,
    pair: Option<(u32, u32)>,
    broken: bool,
}

impl Dice {
    fn new() -> Dice {
        Dice {
            ids: 0,
            pair: Some((0, 0)),
            broken: false,
        }
    }

    fn broken() -> Dice {
        Dice {
            broken: true,
            pair: None,
            ..Dice::new()
        }
    }
}

impl Chance for Dice {
    fn id(&mut self) -> Option<String> {
        self.ids += 1;
        (!self.broken).then(|| format!("id{}", self.ids))
    }

    fn pair(&mut self) -> Option<(u32, u32)> {
        self.pair
    }
}

fn config(rules: Value) -> Config {
    Config::from_value(json!({
        "origin": "demo",
        "timeout": "250ms",
        "allow": ["10.0.0.0/8"],
        "jwt": {"secret": "JWT", "on_invalid": "reject"},
        "rules": rules,
    }))
    .unwrap()
}

fn one_rule(rule: Value) -> Config {
    let mut full = json!({"id": "api", "limit": 2, "window": "1m"});
    full.as_object_mut()
        .unwrap()
        .extend(rule.as_object().unwrap().clone());
    config(json!([full]))
}

/// A global quota of 8 split in 4 parts.
fn sale() -> Config {
    one_rule(json!({"id": "sale", "limit": 8, "scope": "global", "split": 4}))
}

fn from(ip: &str) -> FakeRequest {
    FakeRequest::get().with("cf-connecting-ip", ip)
}

fn token(claims: Value) -> String {
    format!(
        "Bearer {}",
        sign_raw(r#"{"alg":"HS256"}"#, &claims.to_string(), SECRET)
    )
}

fn plan_with<'a>(
    config: &'a Config,
    memory: &Remembered,
    request: &FakeRequest,
    dice: &mut Dice,
) -> Plan<'a> {
    let key = Hs256Key::new(SECRET);
    let known = Known {
        config,
        jwt_key: Some(&key),
        memory,
    };
    let arrival = Arrival {
        matched: Matched {
            rule: &config.rules[0],
            path: "/",
            params: &[],
            ip: crate::http::key::client_ip(request),
            also: true,
        },
        request,
        now_ms: NOW,
    };
    plan(&known, arrival, dice)
}

fn plan_of<'a>(config: &'a Config, request: &FakeRequest) -> Plan<'a> {
    plan_with(config, &Remembered::default(), request, &mut Dice::new())
}

fn done(plan: Plan<'_>) -> Conclusion {
    match plan {
        Plan::Done(conclusion) => conclusion,
        other => panic!("expected an answer without a call, got {other:?}"),
    }
}

fn asked(plan: Plan<'_>) -> Ask<'_> {
    match plan {
        Plan::Ask(ask) => ask,
        other => panic!("expected a call to one layer, got {other:?}"),
    }
}

/// The answer's status, `code` and fields.
fn answered(reply: &Reply) -> (u16, String, Fields) {
    let Reply::Answer(answer) = reply else {
        panic!("expected an answer, got {reply:?}");
    };
    let body: Value = serde_json::from_str(&answer.problem.to_json()).unwrap();
    let code = body["code"].as_str().unwrap_or_default().to_string();
    (answer.problem.status, code, answer.fields.clone())
}

fn body(reply: &Reply) -> Value {
    let Reply::Answer(answer) = reply else {
        panic!("expected an answer, got {reply:?}");
    };
    serde_json::from_str(&answer.problem.to_json()).unwrap()
}

fn passed(reply: &Reply) -> &Pass {
    match reply {
        Reply::Forward(pass) => pass,
        Reply::Answer(_) => panic!("expected a forward, got {reply:?}"),
    }
}

fn field<'f>(fields: &'f Fields, name: &str) -> Option<&'f str> {
    fields
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
}

/// What a fresh object answers to `attempt`'s request after `before`
/// earlier admissions: the ledger the object runs, fed what the plan built.
fn answer_of(attempt: &Try, before: u32) -> Outcome {
    let request = &attempt.request;
    let specs = request.policies().unwrap();
    let ban = request.ban().unwrap();
    let mut ledger = Ledger::new();
    let question = Question {
        specs: &specs,
        cost: request.cost,
        ban: ban.as_ref(),
        lease: request.lease.as_ref(),
    };
    for i in 0..before {
        ledger.check(&question, NOW + u64::from(i));
    }
    ledger.check(&question, NOW + 100).0
}

#[test]
fn allow_listed_callers_pass_untouched_and_deny_listed_ones_get_403() {
    let config = one_rule(json!({"allow": ["198.51.100.0/24"], "deny": ["192.0.2.1"]}));
    for ip in ["10.1.2.3", "198.51.100.7"] {
        let conclusion = done(plan_of(&config, &from(ip)));
        assert_eq!(conclusion, Conclusion::reply(Reply::untouched()), "{ip}");
    }
    let conclusion = done(plan_of(&config, &from("192.0.2.1")));
    assert_eq!(answered(&conclusion.reply).0, 403);
    assert_eq!(body(&conclusion.reply)["rule"], "api");
    assert_eq!(conclusion.record, None, "a denied caller is not a decision");
}

#[test]
fn tokens_pick_the_tier_and_a_bad_one_is_refused_or_anonymous_as_configured() {
    let tiers = json!([{
        "id": "api",
        "tiers": [
            {"name": "registered", "when": "registered", "limit": 100, "window": "1m"},
            {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"},
        ]
    }]);
    let config = config(tiers.clone());
    let claims = json!({"sub": "u1", "exp": NOW / 1000 + 60});
    let good = from(CLIENT).with("authorization", &token(claims));
    let ask = asked(plan_of(&config, &good));
    assert_eq!(ask.tries[0].object.as_str(), "rule:api.registered:u1");
    let anonymous = asked(plan_of(&config, &from(CLIENT)));
    assert_eq!(
        anonymous.tries[0].object.as_str(),
        "rule:api.anonymous:203.0.113.9"
    );
    let forged = from(CLIENT).with("authorization", "Bearer a.b.c");
    let conclusion = done(plan_of(&config, &forged));
    let (status, code, fields) = answered(&conclusion.reply);
    assert_eq!((status, code.as_str()), (401, "invalid-token"));
    assert_eq!(
        field(&fields, "www-authenticate"),
        Some("Bearer error=\"invalid_token\"")
    );
    let mut lenient = config.clone();
    if let Some(jwt) = lenient.jwt.as_mut() {
        jwt.on_invalid = crate::config::OnInvalid::Anonymous;
    }
    let ask = asked(plan_of(&lenient, &forged));
    assert_eq!(
        ask.tries[0].object.as_str(),
        "rule:api.anonymous:203.0.113.9",
        "a token that fails is never registered"
    );
}

#[test]
fn a_request_without_its_keys_part_is_a_400_naming_it() {
    let config = one_rule(json!({"key": "header:x-user"}));
    let conclusion = done(plan_of(&config, &from(CLIENT)));
    let (status, code, _) = answered(&conclusion.reply);
    assert_eq!((status, code.as_str()), (400, "missing-key"));
    assert_eq!(body(&conclusion.reply)["field"], "header:x-user");
    let ask = asked(plan_of(&config, &from(CLIENT).with("x-user", "ann")));
    assert_eq!(ask.tries[0].object.as_str(), "rule:api:ann");
}

#[test]
fn a_manual_ban_on_the_key_or_its_network_is_answered_without_a_call() {
    let config =
        one_rule(json!({"ban": {"after": 3, "within": "1m", "for": "10m", "status": 403}}));
    // A ban on the address, on an IPv6 client's /64 (the very name it is
    // keyed by), and on networks holding either.
    for (subject, ip, keyed) in [
        (CLIENT, CLIENT, CLIENT),
        ("2001:db8:1:2::/64", "2001:db8:1:2::77", "2001:db8:1:2::/64"),
        ("203.0.112.0/23", CLIENT, CLIENT),
        ("2001:db8::/32", "2001:db8:1:2::77", "2001:db8:1:2::/64"),
    ] {
        let memory = Remembered {
            bans: vec![BanRecord {
                key: subject.into(),
                until_ms: NOW + 90_500,
                reason: "scraping".into(),
                source: MANUAL.into(),
                started_ms: NOW,
            }],
            ..Remembered::default()
        };
        let conclusion = done(plan_with(&config, &memory, &from(ip), &mut Dice::new()));
        let (status, code, fields) = answered(&conclusion.reply);
        assert_eq!((status, code.as_str()), (403, "banned"), "{subject}");
        assert_eq!(field(&fields, "retry-after"), Some("91"));
        assert_eq!(
            conclusion.record,
            Some((keyed.to_string(), Verdict::Refused))
        );
        let outside = if ip == CLIENT {
            "198.51.100.1"
        } else {
            "2001:db9::1"
        };
        asked(plan_with(
            &config,
            &memory,
            &from(outside),
            &mut Dice::new(),
        ));
    }
}

#[test]
fn a_remembered_refusal_is_answered_without_a_call_except_in_shadow_mode() {
    let config = one_rule(json!({}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let full = answer_of(&ask.tries[0], 2);
    assert!(!full.allowed);
    let memory = Remembered {
        refusals: vec![(ask.tries[0].object.clone(), full)],
        ..Remembered::default()
    };
    let conclusion = done(plan_with(&config, &memory, &from(CLIENT), &mut Dice::new()));
    let (status, _, fields) = answered(&conclusion.reply);
    assert_eq!(status, 429);
    assert!(field(&fields, "ratelimit").is_some());
    assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Refused)));
    assert_eq!(
        conclusion.invited,
        Some(ask.tries[0].object.clone()),
        "the moment it told is handed out"
    );
    let shadow = one_rule(json!({"shadow": true}));
    asked(plan_with(&shadow, &memory, &from(CLIENT), &mut Dice::new()));
}

#[test]
fn one_call_to_the_keys_object_with_the_rules_policies_by_the_timeout() {
    let config = one_rule(json!({}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    assert_eq!(ask.tries.len(), 1);
    let attempt = &ask.tries[0];
    assert_eq!(attempt.object.as_str(), "rule:api:203.0.113.9");
    assert_eq!(attempt.request.key, attempt.object.as_str());
    assert_eq!(
        attempt.request.policies().unwrap(),
        config.rules[0].tiers[0].policies
    );
    assert_eq!((ask.deadline_ms, ask.reservation.clone()), (250, None));
    assert!(attempt.request.lease.is_none() && attempt.request.reserve.is_none());
}

#[test]
fn a_rule_may_be_decided_from_a_block_unless_shadow_concurrency_or_off() {
    let local = |rule: Value| {
        let config = one_rule(rule);
        let ask = asked(plan_of(&config, &from(CLIENT)));
        ask.tries[0].local
    };
    assert!(local(json!({})));
    assert!(local(json!({"algorithm": "gcra", "burst": 2})));
    assert!(!local(json!({"local": false})));
    assert!(!local(json!({"shadow": true})));
    assert!(
        local(json!({"ban": {"after": 3, "within": "1m", "for": "10m"}})),
        "refusals never come from a block: they reach the object and count"
    );
    assert!(!local(json!({"concurrency": 2})));
    assert!(
        local(json!({"count": {"status": ["5xx"]}})),
        "a reservation, held pending in the block"
    );
    assert!(local(json!({"scope": "global"})), "a global quota's object");
    let split = |rule: Value| {
        let config = one_rule(rule);
        let ask = asked(plan_of(&config, &from(CLIENT)));
        ask.tries.iter().map(|t| t.local).collect::<Vec<_>>()
    };
    assert_eq!(split(json!({"scope": "global", "split": 2})), [true, true]);
    assert_eq!(
        split(json!({"scope": "global", "split": 2, "local": false})),
        [false, false]
    );
    assert_eq!(
        split(json!({"scope": "global", "split": 2, "shadow": true})),
        [false, false]
    );
    assert_eq!(
        split(json!({"scope": "global", "split": 2, "count": {"status": ["5xx"]}})),
        [true, true]
    );
}

#[test]
fn concurrency_asks_for_a_lease_and_a_queue_extends_the_deadline() {
    let config = one_rule(json!({"concurrency": 2, "queue": {"max_wait": "2s", "max_len": 5}}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let request = &ask.tries[0].request;
    let lease = request.lease.as_ref().unwrap();
    assert_eq!(
        (lease.name.as_str(), lease.limit, lease.new_id.as_str()),
        ("api.concurrency", 2, "id1")
    );
    assert_eq!(request.queue.map(|q| q.max_len), Some(5));
    assert_eq!(ask.deadline_ms, 2_250);
}

#[test]
fn a_rule_that_counts_by_answer_takes_a_reservation() {
    let config = one_rule(json!({"count": {"status": ["5xx"]}}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let reserve = ask.tries[0].request.reserve.clone().unwrap();
    assert_eq!(ask.reservation.as_deref(), Some(reserve.id.as_str()));
}

#[test]
fn without_randomness_the_rules_on_error_applies() {
    let closed = one_rule(json!({"concurrency": 2}));
    let conclusion = done(plan_with(
        &closed,
        &Remembered::default(),
        &from(CLIENT),
        &mut Dice::broken(),
    ));
    let (status, _, fields) = answered(&conclusion.reply);
    assert_eq!((status, field(&fields, "retry-after")), (503, Some("1")));
    assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Failed)));
    assert!(matches!(conclusion.log, Some(Log::Error(_))));
    let open = one_rule(json!({"count": {"status": [500]}, "on_error": "allow"}));
    let conclusion = done(plan_with(
        &open,
        &Remembered::default(),
        &from(CLIENT),
        &mut Dice::broken(),
    ));
    let pass = passed(&conclusion.reply);
    assert_eq!(field(&pass.fields, "sluice-degraded"), Some("fail-open"));
    assert_eq!(pass.key.as_deref(), Some(CLIENT));
}

fn control(state: RuleState) -> Control {
    Control {
        state,
        reason: "stock count".into(),
        set_ms: NOW,
    }
}

#[test]
fn a_paused_or_closed_rule_is_answered_by_the_isolate_without_a_call() {
    let config = one_rule(json!({"allow": ["198.51.100.0/24"]}));
    for (state, status, code, retry) in [
        (RuleState::Paused, 503, "paused", Some("10")),
        (RuleState::Closed, 410, "closed", None),
    ] {
        let memory = Remembered {
            states: vec![("api".into(), control(state))],
            ..Remembered::default()
        };
        let conclusion = done(plan_with(&config, &memory, &from(CLIENT), &mut Dice::new()));
        let (got_status, got_code, fields) = answered(&conclusion.reply);
        assert_eq!((got_status, got_code.as_str()), (status, code));
        assert_eq!(field(&fields, "retry-after"), retry);
        assert!(field(&fields, "ratelimit").is_none(), "nothing was decided");
        let problem = body(&conclusion.reply);
        assert_eq!(
            (problem["rule"].as_str(), problem["reason"].as_str()),
            (Some("api"), Some("stock count"))
        );
        assert!(problem["detail"].as_str().unwrap().contains("stock count"));
        assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Refused)));
        assert_eq!(conclusion.cache, None);
        // An allow-listed caller skips the rule, its state included.
        let allowed = done(plan_with(
            &config,
            &memory,
            &from("198.51.100.7"),
            &mut Dice::new(),
        ));
        assert_eq!(allowed, Conclusion::reply(Reply::untouched()));
        // Another rule's state changes nothing here.
        let other = Remembered {
            states: vec![("login".into(), control(state))],
            ..Remembered::default()
        };
        asked(plan_with(&config, &other, &from(CLIENT), &mut Dice::new()));
    }
}

/// What a part whose rule is in `state` answers to `attempt`.
fn answer_in_state(attempt: &Try, state: RuleState) -> Outcome {
    let request = &attempt.request;
    let specs = request.policies().unwrap();
    let mut ledger = Ledger::new();
    ledger.set_control(control(state));
    let question = Question {
        specs: &specs,
        cost: 1,
        ban: None,
        lease: None,
    };
    ledger.check(&question, NOW).0
}

#[test]
fn a_call_asks_for_as_many_moments_as_the_cache_would_tell_unless_refusals_are_not_cached() {
    let memory = Remembered {
        invitations: 16,
        ..Remembered::default()
    };
    let invitations = |config: &Config| -> Vec<u32> {
        let ask = asked(plan_with(config, &memory, &from(CLIENT), &mut Dice::new()));
        ask.tries.iter().map(|t| t.request.invitations).collect()
    };
    assert_eq!(invitations(&one_rule(json!({}))), [16]);
    assert_eq!(
        invitations(&sale()),
        [16, 16],
        "each part, for its own entry"
    );
    let banning = one_rule(json!({"ban": {"after": 3, "within": "1m", "for": "5m"}}));
    assert_eq!(
        invitations(&banning),
        [1],
        "every refusal goes to the object"
    );
    assert_eq!(invitations(&one_rule(json!({"shadow": true}))), [1]);
}

#[test]
fn an_admission_forwards_with_the_ratelimit_fields() {
    let config = one_rule(json!({}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let outcome = answer_of(&attempt, 0);
    let conclusion = ask.conclude(attempt.object, outcome, NOW + 100);
    assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Admitted)));
    assert_eq!(conclusion.cache, None);
    let pass = passed(&conclusion.reply);
    assert_eq!(
        field(&pass.fields, "ratelimit-policy"),
        Some("\"api\";q=2;w=60")
    );
    assert_eq!(field(&pass.fields, "ratelimit"), Some("\"api\";r=1;t=60"));
    assert_eq!((pass.release.clone(), pass.settle.clone()), (None, vec![]));
}

#[test]
fn a_refusal_is_answered_and_remembered_unless_a_ban_policy_must_count_it() {
    let config = one_rule(json!({}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let outcome = answer_of(&attempt, 2);
    let conclusion = ask.conclude(attempt.object.clone(), outcome.clone(), NOW + 100);
    let (status, code, fields) = answered(&conclusion.reply);
    assert_eq!((status, code.as_str()), (429, "quota-exceeded"));
    assert!(field(&fields, "retry-after").is_some());
    assert_eq!(conclusion.cache, Some((attempt.object, outcome)));

    let banning = one_rule(json!({"ban": {"after": 2, "within": "1m", "for": "10m"}}));
    let ask = asked(plan_of(&banning, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let conclusion = ask.conclude(attempt.object.clone(), answer_of(&attempt, 2), NOW + 100);
    assert_eq!(conclusion.cache, None, "the object must count this refusal");
}

#[test]
fn a_ban_a_decision_starts_is_reported_with_its_scope_and_remembered() {
    let config = one_rule(json!({"ban": {"after": 1, "within": "1m", "for": "10m"}}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let outcome = answer_of(&attempt, 2);
    assert!(outcome.ban.as_ref().is_some_and(|b| b.started));
    let conclusion = ask.conclude(attempt.object.clone(), outcome, NOW + 100);
    let ban = conclusion.ban_started.clone().unwrap();
    assert_eq!(
        (ban.key.as_str(), ban.source.as_str()),
        (CLIENT, "rule:api")
    );
    assert_eq!(answered(&conclusion.reply).1, "banned");
    assert!(
        conclusion.cache.is_some(),
        "the ban itself is answered by the isolate"
    );
}

#[test]
fn shadow_mode_forwards_and_reports_what_it_would_have_done() {
    let config = one_rule(json!({"shadow": true}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let outcome = answer_of(&attempt, 2);
    let conclusion = ask.conclude(attempt.object, outcome, NOW + 100);
    let pass = passed(&conclusion.reply);
    let shadow = field(&pass.fields, "sluice-shadow").unwrap();
    assert!(
        shadow.starts_with("refuse;violated=\"api\";retry="),
        "{shadow}"
    );
    assert!(matches!(conclusion.log, Some(Log::Info(_))));
    assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Shadow)));
    assert_eq!(conclusion.cache, None);
}

#[test]
fn a_lease_is_released_after_delivery_and_a_refused_one_is_not_remembered() {
    let config = one_rule(json!({"concurrency": 1}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let conclusion = ask.conclude(attempt.object.clone(), answer_of(&attempt, 0), NOW + 100);
    let pass = passed(&conclusion.reply);
    assert_eq!(pass.release, Some((attempt.object.clone(), "id1".into())));

    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let refused = answer_of(&attempt, 1);
    assert!(refused.lease.as_ref().is_some_and(|l| l.refused));
    let conclusion = ask.conclude(attempt.object, refused, NOW + 100);
    assert_eq!(answered(&conclusion.reply).0, 429);
    assert_eq!(conclusion.cache, None, "a lease may be released any moment");
}

#[test]
fn a_reservation_is_settled_by_the_origins_status() {
    let config = one_rule(json!({"count": {"status": [401, "5xx"]}}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let id = ask.reservation.clone().unwrap();
    let conclusion = ask.conclude(attempt.object.clone(), answer_of(&attempt, 0), NOW + 100);
    let [settle] = passed(&conclusion.reply).settle.clone().try_into().unwrap();
    assert!(settle.keeps(401) && settle.keeps(503));
    assert!(!settle.keeps(200) && !settle.keeps(404));
    assert_eq!((settle.object, settle.reservation), (attempt.object, id));
}

#[test]
fn an_object_that_does_not_answer_fails_closed_or_open_as_the_rule_says() {
    for (on_error, status) in [("deny", Some(503)), ("allow", None)] {
        let config = one_rule(json!({"on_error": on_error}));
        let ask = asked(plan_of(&config, &from(CLIENT)));
        let object = ask.tries[0].object.clone();
        let conclusion = ask.failed(&object, "timed out");
        assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Failed)));
        let Some(Log::Error(line)) = &conclusion.log else {
            panic!("a failure is logged");
        };
        assert!(line.contains("rule:api:203.0.113.9") && line.contains("timed out"));
        match status {
            Some(status) => assert_eq!(answered(&conclusion.reply).0, status),
            None => assert_eq!(
                field(&passed(&conclusion.reply).fields, "sluice-degraded"),
                Some("fail-open")
            ),
        }
    }
}

/// What an object answers to `attempt`'s reserving request while `held`
/// other attempts hold reservations on its key.
fn answer_while_pending(attempt: &Try, held: u32) -> Outcome {
    let request = &attempt.request;
    let specs = request.policies().unwrap();
    let ban = request.ban().unwrap();
    let reserve = request.reserve.clone().unwrap();
    let mut ledger = Ledger::new();
    let question = Question {
        specs: &specs,
        cost: request.cost,
        ban: ban.as_ref(),
        lease: None,
    };
    for i in 0..held {
        let lapses = NOW + reserve.ttl_ms;
        ledger.reserve(&question, &format!("other{i}"), lapses, NOW + u64::from(i));
    }
    let lapses = NOW + 100 + reserve.ttl_ms;
    ledger.reserve(&question, &reserve.id, lapses, NOW + 100).0
}

#[test]
fn a_refusal_pending_reservations_cause_says_so_and_asks_for_a_short_wait() {
    for ban in [
        None,
        Some(json!({"after": 3, "within": "1h", "for": "15m"})),
    ] {
        let mut rule = json!({"limit": 2, "window": "15m", "count": {"status": [401]}});
        if let Some(ban) = &ban {
            rule["ban"] = ban.clone();
        }
        let config = one_rule(rule);
        let ask = asked(plan_of(&config, &from(CLIENT)));
        let attempt = ask.tries[0].clone();
        let outcome = answer_while_pending(&attempt, 2);
        let conclusion = ask.conclude(attempt.object.clone(), outcome, NOW + 100);
        let (status, code, fields) = answered(&conclusion.reply);
        assert_eq!((status, code.as_str()), (429, "pending"), "ban: {ban:?}");
        assert_eq!(field(&fields, "retry-after"), Some("1"));
        assert_eq!(field(&fields, "ratelimit"), Some("\"api\";r=0;t=1"));
        let body = body(&conclusion.reply);
        assert_eq!(body["violated-policies"], json!(["api"]));
        assert!(body["detail"].as_str().unwrap().contains("in flight"));
        assert_eq!(conclusion.record, Some((CLIENT.into(), Verdict::Refused)));
        match (&ban, &conclusion.cache) {
            (Some(_), cache) => assert_eq!(cache, &None, "refusals must reach the object"),
            (None, Some((_, cached))) => assert!(
                cached.retry <= Retry::After(PENDING_RETRY_MS),
                "cached no longer than the short wait: {:?}",
                cached.retry
            ),
            (None, None) => panic!("a refusal without a ban policy is cached"),
        }
    }
    let config = one_rule(json!({"limit": 2, "shadow": true, "count": {"status": [401]}}));
    let ask = asked(plan_of(&config, &from(CLIENT)));
    let attempt = ask.tries[0].clone();
    let outcome = answer_while_pending(&attempt, 2);
    let conclusion = ask.conclude(attempt.object.clone(), outcome, NOW + 100);
    assert_eq!(
        field(&passed(&conclusion.reply).fields, "sluice-shadow"),
        Some("refuse;violated=\"api\";retry=1;pending"),
        "a shadow rule says so too"
    );
}
