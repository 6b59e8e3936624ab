//! `waiting_room`: a rule that queues visitors in front of its paths
//! instead of refusing them (see `crate::room`).

use super::{error, validate_secret_name, ConfigError};
use crate::from_tree;
use crate::input::{duration, instant};
use crate::limit::MAX_LIMIT;

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
    }
}

/// Validates a rule's `waiting_room`. `set` names the rule's other fields
/// that are set: a room takes none of the rate-limit features (limits,
/// tiers, keys, bans, counting, concurrency, scope, shadow, on_error), so
/// each is an error naming it rather than a setting silently ignored.
pub(super) fn validate_room(
    raw: RawRoom,
    set: &[&str],
    at: &str,
) -> Result<WaitingRoom, ConfigError> {
    if let Some(name) = set.first() {
        return Err(error(
            &format!("{at}.{name}"),
            format!("a rule with a waiting_room lets visitors in by its own places and rate, so it takes no {name}: put rate limits in a rule of their own"),
        ));
    }
    let field = |name: &str| format!("{at}.waiting_room.{name}");
    let count = |value: u64, name: &str| {
        u32::try_from(value)
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(&u64::from(*n)))
            .ok_or_else(|| {
                error(
                    &field(name),
                    format!("{name} must be from 1 to {MAX_LIMIT}, got {value}"),
                )
            })
    };
    let active = count(raw.active, "active")?;
    let per_minute = count(raw.per_minute, "per_minute")?;
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
    Ok(WaitingRoom {
        active,
        per_minute,
        session_ms,
        shards,
        refresh_ms,
        opens_at_ms,
        secret,
    })
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
        assert!(rule.tiers.is_empty());
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
