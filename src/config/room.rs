//! `waiting_room`: a rule that queues visitors in front of its paths
//! instead of refusing them (see `crate::room`). How often one client may
//! join is the room rule's own limit, a tier keyed by `join.key` (so the
//! key objects, refusal cache, bans and top keys of any rule serve it),
//! and with `opens_at` one `also` layer caps the pre-queue per key. Other
//! rules may require a session of the room (`room = "<id>"`).

use super::layers::Layer;
use super::policies::{validate_limits, RawLimits};
use super::tier::{Tier, When};
use super::{error, validate_secret_name, Config, ConfigError, Rule};
use crate::from_tree;
use crate::http::key::{KeySpec, Part};
use crate::input::{duration, instant};
use crate::limit::{Policy, Spec, MAX_LIMIT, MAX_WINDOW_MS};
use crate::objects::name::Scope;

/// The secret that signs a room's cookies, unless `waiting_room.secret`
/// names another.
pub const DEFAULT_ROOM_SECRET: &str = "ROOM_SECRET";

/// The most shards a room may have: each is a Durable Object that every
/// isolate with a visitor of it asks for "now serving" about once per
/// status lifetime (docs/operations.md, "Waiting rooms at scale").
pub const MAX_ROOM_SHARDS: u32 = 256;

/// Shards when the config says none: enough to spread a sale's calls,
/// never more than there are places or starts per minute to share.
pub const DEFAULT_ROOM_SHARDS: u32 = 8;

/// How often a waiting page refreshes itself unless `refresh` says.
pub const DEFAULT_REFRESH_MS: u64 = 20_000;

/// How long a session lasts after its last renewal unless `session` says.
pub const DEFAULT_SESSION_MS: u64 = 300_000;

/// The shortest and longest refresh: a page that reloads faster than
/// once a second costs the visitor's phone and the edge for nothing, and
/// one slower than five minutes lets offers lapse before anyone sees them.
pub const REFRESH_RANGE_MS: (u64, u64) = (1_000, 300_000);

/// The shortest and longest session.
pub const SESSION_RANGE_MS: (u64, u64) = (10_000, 86_400_000);

/// How often one client may join unless `join` says: five times a minute
/// per address (per /64 for IPv6), a few browsers of one household, far
/// from the places a script would take (docs/configuration.md, "Abuse").
pub const DEFAULT_JOIN: (&str, u64, &str) = ("ip", 5, "1m");

/// The pre-queue's cap per join key is counted over this long: every
/// pre-queue join of a room falls in one such window, since a newcomer
/// joins it at most [`PRE_QUEUE_OPENS_MS`] before the opening.
pub const PRE_QUEUE_WINDOW_MS: u64 = MAX_WINDOW_MS;

/// How long before `opens_at` a newcomer may join the pre-queue: a day
/// less than its cap's window, so that no clock between an isolate, the
/// cap's object and a shard can let a join age out of the cap before the
/// draw. Earlier visitors are shown the page without a ticket.
pub const PRE_QUEUE_OPENS_MS: u64 = PRE_QUEUE_WINDOW_MS - 86_400_000;

/// The id of the `also` layer that caps the pre-queue per join key.
pub const PRE_QUEUE_LAYER: &str = "pre-queue";

/// Leading zero bits a challenge asks for unless `work` says, and the
/// most it may ask (BENCHMARKS.md, "The waiting room's challenge").
pub const DEFAULT_WORK_BITS: u32 = 18;
pub const MAX_WORK_BITS: u32 = 28;

/// A waiting room, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingRoom {
    /// Sessions at once, at most, across all shards.
    pub active: u32,
    /// Sessions started in any 60 s, at most, across all shards.
    pub per_minute: u32,
    /// A session lasts this long after its last renewal.
    pub session_ms: u64,
    pub shards: u32,
    /// How often a waiting visitor's page refreshes itself.
    pub refresh_ms: u64,
    /// Before this, arrivals join a pre-queue shuffled at opening.
    pub opens_at_ms: Option<u64>,
    /// The secret binding whose value signs the room's cookies.
    pub secret: String,
    /// The secret binding whose value signs `Sluice-Room-Pass`: the
    /// room's own unless `pass_secret` names another.
    pub pass_secret: String,
    /// Leading zero bits of the proof of work a newcomer brings, if the
    /// room asks for one (`challenge`).
    pub work_bits: Option<u32>,
}

/// What a room rule is made of: the room, and its join limit as the
/// rule's own tier and, with an opening, its pre-queue cap as a layer.
pub(super) struct RoomRule {
    pub(super) room: WaitingRoom,
    pub(super) join: Tier,
    pub(super) also: Vec<Layer>,
}

from_tree! {
    pub(super) struct RawRoom {
        active: u64 = required "active",
        per_minute: u64 = required "per_minute",
        session: Option<String> = optional "session",
        shards: Option<u64> = optional "shards",
        refresh: Option<String> = optional "refresh",
        opens_at: Option<String> = optional "opens_at",
        secret: Option<String> = optional "secret",
        pass_secret: Option<String> = optional "pass_secret",
        join: Option<RawJoin> = optional "join",
        challenge: Option<RawChallenge> = optional "challenge",
    }
}

from_tree! {
    struct RawJoin {
        key: Option<String> = optional "key",
        limit: Option<u64> = optional "limit",
        window: Option<String> = optional "window",
    }
}

from_tree! {
    struct RawChallenge {
        work: Option<u32> = optional "work",
    }
}

/// Validates a rule's `waiting_room`. `set` names the rule's other fields
/// that are set: a room takes none of the rate-limit features (limits,
/// tiers, keys, bans, counting, concurrency, scope, shadow, on_error), so
/// each is an error naming it rather than a setting silently ignored.
pub(super) fn validate_room(
    raw: RawRoom,
    set: &[&str],
    id: &str,
    at: &str,
) -> Result<RoomRule, ConfigError> {
    if let Some(name) = set.first() {
        return Err(error(
            &format!("{at}.{name}"),
            format!("a rule with a waiting_room lets visitors in by its own places and rate, so it takes no {name}: put rate limits in a rule of their own"),
        ));
    }
    let field = |name: &str| format!("{at}.waiting_room.{name}");
    let count = |value: u64, name: &str, most: u64| {
        u32::try_from(value)
            .ok()
            .filter(|n| (1..=most).contains(&u64::from(*n)))
            .ok_or_else(|| {
                error(
                    &field(name),
                    format!("{name} must be from 1 to {most}, got {value}"),
                )
            })
    };
    let active = count(raw.active, "active", MAX_LIMIT)?;
    let per_minute = count(raw.per_minute, "per_minute", MAX_LIMIT)?;
    let most = active.min(per_minute).min(MAX_ROOM_SHARDS);
    let shards = match raw.shards {
        None => DEFAULT_ROOM_SHARDS.min(most),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=most).contains(n))
            .ok_or_else(|| {
                error(
                    &field("shards"),
                    format!("shards must be from 1 to {most} (at most {MAX_ROOM_SHARDS}, and no more than active and per_minute, so that every shard has a place and a start a minute), got {n}"),
                )
            })?,
    };
    let within = |text: Option<String>, name: &str, default: u64, (low, high): (u64, u64)| {
        let Some(text) = text else {
            return Ok(default);
        };
        let ms = duration::parse_ms(&text).map_err(|m| error(&field(name), m))?;
        if (low..=high).contains(&ms) {
            Ok(ms)
        } else {
            Err(error(
                &field(name),
                format!(
                    "{name} must be from {}s to {}s, got {text:?}",
                    low / 1000,
                    high / 1000
                ),
            ))
        }
    };
    let session_ms = within(raw.session, "session", DEFAULT_SESSION_MS, SESSION_RANGE_MS)?;
    let refresh_ms = within(raw.refresh, "refresh", DEFAULT_REFRESH_MS, REFRESH_RANGE_MS)?;
    let opens_at_ms = raw
        .opens_at
        .map(|text| instant::parse_ms(&text).map_err(|m| error(&field("opens_at"), m)))
        .transpose()?;
    let secret = validate_secret_name(
        raw.secret
            .unwrap_or_else(|| DEFAULT_ROOM_SECRET.to_string()),
        &field("secret"),
        DEFAULT_ROOM_SECRET,
    )?;
    let pass_secret = match raw.pass_secret {
        Some(name) => validate_secret_name(name, &field("pass_secret"), "ROOM_PASS_SECRET")?,
        None => secret.clone(),
    };
    let work_bits = raw
        .challenge
        .map(|c| {
            let bits = c.work.map_or(DEFAULT_WORK_BITS.into(), u64::from);
            count(bits, "challenge.work", MAX_WORK_BITS.into())
        })
        .transpose()?;
    let (join, also) = validate_join(raw.join, id, opens_at_ms.is_some(), &field("join"))?;
    let room = WaitingRoom {
        active,
        per_minute,
        session_ms,
        shards,
        refresh_ms,
        opens_at_ms,
        secret,
        pass_secret,
        work_bits,
    };
    Ok(RoomRule { room, join, also })
}

/// `join = { key, limit, window }`: the room rule's own limit, on every
/// request that would take a new place. Its key names the client, never
/// the path: a visitor joins the whole room once.
fn validate_join(
    raw: Option<RawJoin>,
    id: &str,
    opens: bool,
    at: &str,
) -> Result<(Tier, Vec<Layer>), ConfigError> {
    let (key, limit, window) = DEFAULT_JOIN;
    let raw = raw.unwrap_or(RawJoin {
        key: None,
        limit: None,
        window: None,
    });
    let key_text = raw.key.as_deref().unwrap_or(key);
    let key = KeySpec::parse(key_text).map_err(|m| error(&format!("{at}.key"), m))?;
    if key
        .parts()
        .any(|p| matches!(p, Part::Path | Part::Param(_) | Part::Action))
    {
        return Err(error(
            &format!("{at}.key"),
            "a join key names the client (ip, a header, a cookie, a claim), never the path: a visitor joins the whole room once",
        ));
    }
    let limits = RawLimits {
        limit: Some(raw.limit.unwrap_or(limit)),
        window: Some(raw.window.unwrap_or_else(|| window.to_string())),
        algorithm: None,
        burst: None,
        policies: None,
        needs_refund: None,
    };
    let policies = validate_limits(limits, id, at)?;
    let cap = policies.first().map_or(limit, |(_, spec)| spec.limit());
    let pre_queue = opens.then(|| Layer {
        id: PRE_QUEUE_LAYER.to_string(),
        key: Some(key.clone()),
        policies: vec![(
            format!("{id}.{PRE_QUEUE_LAYER}"),
            Spec::SlidingLog(Policy::clamped(cap, PRE_QUEUE_WINDOW_MS)),
        )],
        global: None,
        count: None,
        scope: Scope::rule(id, Some(PRE_QUEUE_LAYER)),
    });
    let join = Tier {
        name: None,
        when: When::Always,
        key,
        policies,
        scope: Scope::rule(id, None),
    };
    Ok((join, pre_queue.into_iter().collect()))
}

impl Config {
    /// The waiting room `rule`'s requests go through, with its rule: its
    /// own, or the one its `room` names.
    pub fn room_for<'c>(&'c self, rule: &'c Rule) -> Option<(&'c Rule, &'c WaitingRoom)> {
        let owner = match &rule.behind {
            Some(id) => self.rules.iter().find(|r| &r.id == id)?,
            None => rule,
        };
        Some((owner, owner.room.as_ref()?))
    }
}

/// Each rule's `room`, which must name a waiting room's rule: a request
/// of the rule then needs a session of that room.
pub(super) fn validate_gates(rules: &[Rule]) -> Result<(), ConfigError> {
    for (i, rule) in rules.iter().enumerate() {
        let Some(id) = rule.behind.as_deref() else {
            continue;
        };
        let problem = match rules.iter().find(|r| r.id == id) {
            None => format!("no rule has the id {id:?}: room names the rule of a waiting room"),
            Some(r) if r.room.is_none() => {
                format!("rule {id:?} is not a waiting room: room names the rule of one")
            }
            Some(_) => continue,
        };
        return Err(error(&format!("SLUICE.rules[{i}].room"), problem));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::config::Config;

    fn room(fields: Value) -> Result<WaitingRoom, ConfigError> {
        rule(json!({"id": "shop", "match": {"path": "/shop/*"}, "waiting_room": fields}))
    }

    fn rule(rule: Value) -> Result<WaitingRoom, ConfigError> {
        let config = Config::from_value(json!({"origin": "demo", "rules": [rule]}))?;
        Ok(config.rules[0].room.clone().expect("a room"))
    }

    fn field(result: Result<WaitingRoom, ConfigError>) -> String {
        let e = result.expect_err("accepted");
        assert!(!e.message.is_empty());
        e.field
    }

    #[test]
    fn the_issue_example_parses() {
        let room = room(json!({"active": 500, "per_minute": 200, "session": "5m", "shards": 8, "refresh": "20s"}))
            .unwrap();
        assert_eq!(
            room,
            WaitingRoom {
                active: 500,
                per_minute: 200,
                session_ms: 300_000,
                shards: 8,
                refresh_ms: 20_000,
                opens_at_ms: None,
                secret: "ROOM_SECRET".into(),
                pass_secret: "ROOM_SECRET".into(),
                work_bits: None,
            }
        );
    }

    #[test]
    fn defaults_and_an_opening_time() {
        let room = room(
            json!({"active": 3, "per_minute": 100, "opens_at": "2026-12-01T10:00:00Z",
                               "secret": "SALE_SECRET"}),
        )
        .unwrap();
        assert_eq!(room.shards, 3, "no more shards than places");
        assert_eq!((room.session_ms, room.refresh_ms), (300_000, 20_000));
        assert_eq!(room.opens_at_ms, Some(1_796_119_200_000));
        assert_eq!(room.secret, "SALE_SECRET");
    }

    #[test]
    fn every_bad_field_is_named() {
        let at = "SLUICE.rules[0].waiting_room";
        for (fields, name) in [
            (json!({"per_minute": 1}), "active"),
            (json!({"active": 1}), "per_minute"),
            (json!({"active": 0, "per_minute": 1}), "active"),
            (json!({"active": 1, "per_minute": 2_000_000}), "per_minute"),
            (json!({"active": 1, "per_minute": -1}), "per_minute"),
            (
                json!({"active": 10, "per_minute": 5, "shards": 6}),
                "shards",
            ),
            (
                json!({"active": 10, "per_minute": 50, "shards": 0}),
                "shards",
            ),
            (
                json!({"active": 1000, "per_minute": 1000, "shards": 257}),
                "shards",
            ),
            (
                json!({"active": 1, "per_minute": 1, "session": "5s"}),
                "session",
            ),
            (
                json!({"active": 1, "per_minute": 1, "session": "2d"}),
                "session",
            ),
            (
                json!({"active": 1, "per_minute": 1, "session": "five"}),
                "session",
            ),
            (
                json!({"active": 1, "per_minute": 1, "refresh": "500ms"}),
                "refresh",
            ),
            (
                json!({"active": 1, "per_minute": 1, "refresh": "10m"}),
                "refresh",
            ),
            (
                json!({"active": 1, "per_minute": 1, "opens_at": "tomorrow"}),
                "opens_at",
            ),
            (
                json!({"active": 1, "per_minute": 1, "secret": "no spaces"}),
                "secret",
            ),
            (json!({"active": 1, "per_minute": 1, "seats": 3}), "seats"),
            (
                json!({"active": 1, "per_minute": 1, "pass_secret": "a-b"}),
                "pass_secret",
            ),
            (
                json!({"active": 1, "per_minute": 1, "challenge": {"work": 0}}),
                "challenge.work",
            ),
            (
                json!({"active": 1, "per_minute": 1, "challenge": {"work": 29}}),
                "challenge.work",
            ),
            (
                json!({"active": 1, "per_minute": 1, "challenge": {"bits": 9}}),
                "challenge.bits",
            ),
            (
                json!({"active": 1, "per_minute": 1, "join": {"key": "ip+path"}}),
                "join.key",
            ),
            (
                json!({"active": 1, "per_minute": 1, "join": {"key": "nonsense:x"}}),
                "join.key",
            ),
            (
                json!({"active": 1, "per_minute": 1, "join": {"limit": 0}}),
                "join.limit",
            ),
            (
                json!({"active": 1, "per_minute": 1, "join": {"window": "31d"}}),
                "join.window",
            ),
        ] {
            assert_eq!(
                field(room(fields.clone())),
                format!("{at}.{name}"),
                "{fields}"
            );
        }
        assert_eq!(field(room(json!(5))), at);
    }

    #[test]
    fn a_join_limit_a_pre_queue_cap_a_challenge_and_a_pass_secret() {
        let config = Config::from_value(json!({"origin": "demo", "rules": [{
            "id": "drop", "waiting_room": {"active": 1, "per_minute": 1, "opens_at": "2026-12-01T10:00:00Z",
                "join": {"key": "cookie:user", "limit": 2, "window": "10m"},
                "challenge": {}, "pass_secret": "SHOP_PASS"}}]}))
        .unwrap();
        let rule = &config.rules[0];
        let drop = rule.room.as_ref().unwrap();
        assert_eq!(
            (drop.work_bits, drop.pass_secret.as_str()),
            (Some(DEFAULT_WORK_BITS), "SHOP_PASS")
        );
        let join = &rule.tiers[0];
        assert_eq!(join.key.to_string(), "{cookie:user}");
        assert_eq!(join.scope, Scope::rule("drop", None));
        assert_eq!(join.policies[0].0, "drop");
        assert_eq!(
            (join.policies[0].1.limit(), join.policies[0].1.window_ms()),
            (2, 600_000)
        );
        let cap = &rule.also[0];
        assert_eq!(cap.scope, Scope::rule("drop", Some(PRE_QUEUE_LAYER)));
        assert_eq!(cap.key.as_ref(), Some(&join.key));
        assert_eq!(
            (cap.policies[0].1.limit(), cap.policies[0].1.window_ms()),
            (2, PRE_QUEUE_WINDOW_MS),
            "the pre-queue holds the join limit per key, whatever the window"
        );
        let plain = room(json!({"active": 1, "per_minute": 1})).unwrap();
        assert_eq!(plain.pass_secret, "ROOM_SECRET", "the room's own secret");
        assert_eq!(plain.work_bits, None);
    }

    #[test]
    fn a_rule_behind_a_room_names_a_waiting_room() {
        let config = |gate: Value| {
            Config::from_value(json!({"origin": "demo", "rules": [
                {"id": "shop", "match": {"path": "/shop/*"}, "waiting_room": {"active": 1, "per_minute": 1}},
                {"id": "api", "match": {"path": "/api/*"}, "limit": 1, "window": "1s"},
                gate,
            ]}))
        };
        let gated = config(json!({"id": "buy", "match": {"path": "/checkout"}, "room": "shop", "limit": 2, "window": "1m"}))
            .unwrap();
        assert_eq!(gated.rules[2].behind.as_deref(), Some("shop"));
        for (room, says) in [
            ("nope", "no rule"),
            ("api", "not a waiting room"),
            ("buy", "not a waiting room"),
        ] {
            let e =
                config(json!({"id": "buy", "room": room, "limit": 2, "window": "1m"})).unwrap_err();
            assert_eq!(e.field, "SLUICE.rules[2].room");
            assert!(e.message.contains(says), "{}", e.message);
        }
        let e = config(
            json!({"id": "hall", "room": "shop", "waiting_room": {"active": 1, "per_minute": 1}}),
        )
        .unwrap_err();
        assert_eq!(e.field, "SLUICE.rules[2].room");
    }

    #[test]
    fn a_room_takes_no_rate_limit_features() {
        for (name, value) in [
            ("limit", json!(10)),
            ("window", json!("1m")),
            ("key", json!("ip")),
            ("tiers", json!([])),
            ("ban", json!({"after": 1, "within": "1m", "for": "1m"})),
            ("shadow", json!(true)),
            ("on_error", json!("allow")),
            ("concurrency", json!(3)),
            ("scope", json!("global")),
            ("count", json!({"status": [200]})),
        ] {
            let mut rule = json!({"id": "shop", "waiting_room": {"active": 1, "per_minute": 1}});
            rule[name] = value;
            assert_eq!(
                field(super::tests::rule(rule)),
                format!("SLUICE.rules[0].{name}")
            );
        }
    }

    #[test]
    fn a_room_rule_keeps_its_match_and_lists() {
        let config = Config::from_value(json!({"origin": "demo", "rules": [{
            "id": "shop", "match": {"path": "/Shop/*", "methods": ["get"]},
            "allow": ["10.0.0.0/8"], "waiting_room": {"active": 1, "per_minute": 1}}]}))
        .unwrap();
        let rule = &config.rules[0];
        assert_eq!(rule.tiers.len(), 1, "its join limit");
        assert!(rule.also.is_empty(), "no pre-queue, no cap on it");
        assert_eq!(rule.methods.as_deref(), Some(&["GET".to_string()][..]));
        assert!(rule.allow.contains("10.1.2.3".parse().unwrap()));
        let bad = json!({"origin": "demo", "rules": [{
            "id": "shop", "deny": ["nonsense"], "waiting_room": {"active": 1, "per_minute": 1}}]});
        assert_eq!(
            Config::from_value(bad).unwrap_err().field,
            "SLUICE.rules[0].deny[0]"
        );
    }
}
