//! Fuzzing the parsers a client or operator can reach: the config, the API
//! bodies, keys, path patterns, durations, CIDRs, JWTs (unsigned garbage,
//! and signed tokens whose header and claims are garbage), the header
//! fields passed to the origin, and a waiting room's cookies (unsigned
//! garbage, and signed ones whose contents are garbage) and opening times;
//! also the calls the worker sends its objects, a room's shards included.
//! Proptest drives them (so it runs on stable Rust), with hostile
//! generators: random bytes, JSON-ish text, deep nesting, huge numbers, and
//! valid inputs with one field replaced by garbage. Every input must come
//! back as a value or an error, never a panic, and within a bounded amount
//! of memory: a counting allocator measures each input's peak.
//!
//! `FUZZ_CASES` sets the cases per target (default 2 000, which is what
//! `npm test` runs; `npm run fuzz` runs far more).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Map, Value};
use sluice::bounds::MAX_KEY_BYTES;
use sluice::config::lookup::global_quota;
use sluice::config::override_body::OverrideRequest;
use sluice::config::pattern::Pattern;
use sluice::config::quota_override::parse_quota_override;
use sluice::config::Config as SluiceConfig;
use sluice::http::admin::parse_state;
use sluice::http::admin::{parse_manual_ban, AdminRoute};
use sluice::http::api::{
    parse_lease_request, parse_limit_request, parse_renew_body, parse_settle_request,
    parse_throttle_request,
};
use sluice::http::base64url::encode as base64url;
use sluice::http::body;
use sluice::http::cidr::{Cidr, CidrList};
use sluice::http::forward::{to_origin, Facts, OriginAuth};
use sluice::http::jwt::{self, Hs256Key, Validation};
use sluice::http::key::{KeyInputs, KeySpec};
use sluice::http::path::{PathOptions, RequestPath};
use sluice::http::Incoming;
use sluice::input::duration::parse_ms;
use sluice::input::instant;
use sluice::input::scan::FromScan;
use sluice::json::Write;
use sluice::objects::protocol::{HubCall, HubReply, LimiterCall, LimiterReply};
use sluice::room::protocol::{RoomCall, RoomReply};
use sluice::room::shard::{Holding, Shard};
use sluice::room::views::Views;
use sluice::room::visit::Room;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most one input may make the parsers allocate beyond the input itself.
const MAX_EXTRA_BYTES: usize = 8 << 20;

/// Tests run in parallel threads that share the allocator counters; the
/// fuzz targets take turns so each measures only itself.
static TURN: Mutex<()> = Mutex::new(());

fn cases() -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000)
}

/// Runs `target` on every generated input, failing on a panic (proptest
/// catches it and shrinks the input) or on an allocation peak above the
/// bound.
fn fuzz<S: Strategy>(strategy: S, target: impl Fn(&S::Value))
where
    S::Value: std::fmt::Debug,
{
    let _turn = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |input| {
            let baseline = CURRENT.load(Ordering::Relaxed);
            PEAK.store(baseline, Ordering::Relaxed);
            target(&input);
            let extra = PEAK.load(Ordering::Relaxed).saturating_sub(baseline);
            prop_assert!(extra <= MAX_EXTRA_BYTES, "allocated {} bytes", extra);
            Ok(())
        })
        .unwrap();
}

/// Strings a client might send: ordinary, empty, huge, control characters,
/// multi-byte, and lookalikes of the values parsers expect.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9:._/*{}+-]{0,24}",
        2 => any::<String>(),
        1 => Just(String::new()),
        1 => (1usize..20_000).prop_map(|n| "k".repeat(n)),
        1 => Just("NaN".to_string()),
        1 => Just("Infinity".to_string()),
        1 => Just("-0".to_string()),
        1 => Just("1e400".to_string()),
        1 => Just("\u{0}\u{7f}\u{202e}".to_string()),
        1 => prop::sample::select(vec!["1m", "500ms", "0s", "31d", "10", "-1s", "99999999999999999999d"]).prop_map(str::to_string),
        1 => prop::sample::select(vec!["ip", "ip+path", "{sub}:{action}", "{", "header:", "cookie:a+param:b"]).prop_map(str::to_string),
    ]
}

/// Numbers at and beyond every edge.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![
            0i64,
            -1,
            1,
            2_592_000_000,
            2_592_000_001,
            1_000_000,
            1_000_001
        ])
        .prop_map(Value::from),
    ]
}

/// Arbitrary JSON, with object keys drawn mostly from the fields Sluice
/// reads, so that the generator reaches past "unknown field" often.
fn json_value() -> impl Strategy<Value = Value> {
    let field = prop::sample::select(vec![
        "key",
        "limit",
        "window",
        "window_ms",
        "cost",
        "policies",
        "name",
        "algorithm",
        "burst",
        "rules",
        "id",
        "match",
        "path",
        "methods",
        "tiers",
        "when",
        "ban",
        "after",
        "within",
        "for",
        "multiplier",
        "max",
        "status",
        "allow",
        "deny",
        "shadow",
        "on_error",
        "concurrency",
        "lease_ttl",
        "queue",
        "max_wait",
        "max_len",
        "prefix",
        "origin",
        "jwt",
        "secret",
        "leeway",
        "on_invalid",
        "require_exp",
        "aud",
        "iss",
        "exp",
        "nbf",
        "sub",
        "alg",
        "origin_auth",
        "header",
        "ipv6_prefix",
        "timeout",
        "max_burst",
        "count",
        "period_s",
        "quantity",
        "ttl_ms",
        "owner",
        "reason",
        "action",
        "also",
        "layers",
        "scope",
        "split",
    ])
    .prop_map(str::to_string);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number(),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((field.clone(), inner), 0..8)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A valid value with one field somewhere replaced by garbage.
fn mutated(valid: Value) -> impl Strategy<Value = Value> {
    (any::<prop::sample::Index>(), json_value()).prop_map(move |(pick, garbage)| {
        let mut value = valid.clone();
        let mut slots = Vec::new();
        collect_paths(&value, &mut Vec::new(), &mut slots);
        if let Some(path) = slots.get(pick.index(slots.len().max(1))) {
            if let Some(target) = walk(&mut value, path) {
                *target = garbage;
            }
        }
        value
    })
}

fn collect_paths(value: &Value, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                at.push(k.clone());
                collect_paths(v, at, out);
                at.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                at.push(i.to_string());
                collect_paths(v, at, out);
                at.pop();
            }
        }
        _ => {}
    }
}

fn walk<'v>(value: &'v mut Value, path: &[String]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |v, step| match v {
        Value::Object(map) => map.get_mut(step),
        Value::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
        _ => None,
    })
}

fn full_config() -> Value {
    json!({
        "prefix": "/_sluice", "origin": "demo", "ipv6_prefix": 64, "timeout": "2s",
        "origin_auth": {"header": "x-sluice-auth", "secret": "ORIGIN_SECRET"},
        "allow": ["10.0.0.0/8"], "deny": ["2001:db8::/32"],
        "jwt": {"secret": "JWT_SECRET", "leeway": "30s", "on_invalid": "anonymous",
                "require_exp": true, "aud": "api", "iss": "https://issuer"},
        "rules": [
            {"id": "api", "match": {"path": "/api/*", "methods": ["GET"]},
             "tiers": [{"name": "registered", "when": "registered", "limit": 100, "window": "1m"},
                       {"name": "anonymous", "when": "anonymous", "limit": 10, "window": "1m"}]},
            {"id": "reply", "match": {"path": "/t/:id/reply"}, "action": "reply", "key": "{sub}:{action}:{id}",
             "policies": [{"name": "s", "limit": 5, "window": "10s", "algorithm": "gcra", "burst": 2},
                          {"name": "d", "limit": 50, "window": "1d", "algorithm": "fixed_window"}],
             "ban": {"after": 3, "within": "1m", "for": "1m", "multiplier": 2, "max": "1h", "status": 403},
             "allow": ["10.1.0.0/16"], "deny": ["192.0.2.1"], "shadow": false, "on_error": "allow",
             "concurrency": 5, "lease_ttl": "30s", "queue": {"max_wait": "1s", "max_len": 10}},
            {"id": "shop", "match": {"path": "/shop/*"}, "allow": ["10.2.0.0/16"],
             "waiting_room": {"active": 500, "per_minute": 200, "session": "5m", "shards": 8,
                              "refresh": "20s", "opens_at": "2026-12-01T10:00:00Z", "secret": "ROOM_SECRET"}},
            {"id": "checkout", "match": {"path": "/checkout"}, "key": "header:x-user", "limit": 1, "window": "1m",
             "count": {"status": [200]},
             "also": [{"id": "all", "scope": "global", "split": 8, "limit": 10000, "window": "1m", "count": "all"},
                      {"id": "team", "key": "{sub}", "policies": [{"name": "m", "limit": 5, "window": "1m"}]}]},
        ]
    })
}

#[test]
fn the_config_parser_never_panics() {
    fuzz(prop_oneof![json_value(), mutated(full_config())], |value| {
        let _ = SluiceConfig::from_value(value.clone());
    });
    fuzz(text(), |raw| {
        let _ = SluiceConfig::from_value(Value::String(raw.clone()));
    });
}

/// Bodies as bytes: valid ones mutated, JSON-ish text, raw bytes, nesting.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let valid = json!({"key": "k", "limit": 10, "window_ms": 1000, "cost": 1,
        "policies": [{"name": "a", "limit": 1, "window_ms": 1}],
        "max_burst": 1, "count": 1, "period_s": 1, "quantity": 1, "ttl_ms": 1, "owner": "o",
        "for": "1m", "reason": "r"});
    let layered = json!({"cost": 1, "layers": [
        {"name": "user", "key": "u", "limit": 1, "window_ms": 1000, "algorithm": "fixed_window"},
        {"key": "sale", "policies": [{"name": "a", "limit": 1, "window_ms": 1}]}]});
    prop_oneof![
        4 => mutated(valid).prop_map(|v| v.to_string().into_bytes()),
        2 => mutated(layered).prop_map(|v| v.to_string().into_bytes()),
        2 => json_value().prop_map(|v| v.to_string().into_bytes()),
        2 => prop::collection::vec(any::<u8>(), 0..2048),
        1 => (1usize..50_000).prop_map(|depth| format!("{}{}", "[".repeat(depth), "]".repeat(depth)).into_bytes()),
        1 => (1usize..50_000).prop_map(|depth| "{\"key\":".repeat(depth).into_bytes()),
        1 => (0usize..70_000).prop_map(|n| format!("{{\"key\":\"{}\"}}", "x".repeat(n)).into_bytes()),
    ]
}

#[test]
fn the_api_body_parsers_never_panic() {
    let types = [
        Some("application/json"),
        Some("application/json; charset=utf-8"),
        Some("text/plain"),
        None,
    ];
    let global = SluiceConfig::from_value(json!({
        "origin": "demo",
        "rules": [{"id": "sale", "scope": "global", "split": 4, "policies": [
            {"name": "s", "limit": 100, "window": "1s"},
            {"name": "h", "limit": 1000, "window": "1h", "algorithm": "fixed_window"},
        ]}],
    }))
    .unwrap();
    let quota = global_quota(&global, "sale").unwrap();
    fuzz(
        (body(), prop::sample::select(types.to_vec())),
        |(bytes, content_type)| {
            let _ = parse_state(*content_type, bytes, 0);
            if let Ok(raw) = body::read::<OverrideRequest>(*content_type, bytes) {
                let _ = parse_quota_override(raw, &quota);
            }
            let _ = parse_limit_request(*content_type, bytes);
            let _ = parse_throttle_request(*content_type, bytes);
            let _ = parse_lease_request(*content_type, bytes);
            let _ = parse_settle_request(*content_type, bytes);
            let _ = parse_renew_body(*content_type, bytes);
            let _ = parse_manual_ban(*content_type, bytes);
            let _ = body::read::<OverrideRequest>(*content_type, bytes);
        },
    );
}

struct Fuzzed {
    method: String,
    headers: Vec<(String, String)>,
}

impl Incoming for Fuzzed {
    fn method(&self) -> &str {
        &self.method
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

#[test]
fn keys_patterns_and_routes_never_panic() {
    let header = prop::sample::select(vec![
        "cf-connecting-ip",
        "cookie",
        "x-api-key",
        "x-forwarded-for",
        "authorization",
    ])
    .prop_map(str::to_string);
    let request = (
        text(),
        text(),
        prop::collection::vec((header, text()), 0..6),
    );
    fuzz(
        (text(), text(), request, 0u8..=200, any::<(bool, bool)>()),
        |(spec, pattern, (method, path, headers), prefix, (case, slash))| {
            let req = Fuzzed {
                method: method.clone(),
                headers: headers.clone(),
            };
            let options = PathOptions {
                case_insensitive: *case,
                ignore_trailing_slash: *slash,
            };
            let request_path = RequestPath::new(path);
            let form = request_path.form(options);
            let params = Pattern::parse(pattern)
                .ok()
                .and_then(|p| {
                    p.captures(form).map(|c| {
                        c.into_iter()
                            .map(|(n, v)| (n.to_string(), v.to_string()))
                            .collect::<Vec<_>>()
                    })
                })
                .unwrap_or_default();
            let borrowed: Vec<(&str, &str)> = params
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            if let Ok(spec) = KeySpec::parse(spec) {
                let inputs = KeyInputs {
                    path: form.text(),
                    params: &borrowed,
                    claims: None,
                    action: Some("act"),
                    ipv6_prefix: *prefix,
                };
                if let Ok(key) = spec.build(&req, &inputs) {
                    assert!(key.len() <= MAX_KEY_BYTES, "a key of {} bytes", key.len());
                }
            }
            let _ = AdminRoute::parse(path);
        },
    );
}

/// The canonical form is a fixed point, starts with `/`, and holds no
/// empty, `.` or `..` segment and no `;` parameter, whatever the input.
#[test]
fn canonical_paths_are_canonical() {
    let piece = prop::sample::select(vec![
        "/", "//", ".", "..", "%2e", "%2E", "%2f", "%2F", "%", "%25", "%61", "%7E", ";", "a", "A",
        "\u{e9}", "x=1", "%zz", "%c3%a9",
    ]);
    let path = (prop::collection::vec(piece, 0..12), text()).prop_map(|(pieces, noise)| {
        let mut path = pieces.concat();
        path.push_str(&noise);
        path
    });
    fuzz(path, |raw| {
        let strict = PathOptions {
            case_insensitive: false,
            ignore_trailing_slash: false,
        };
        let once = RequestPath::new(raw);
        let text = once.form(strict).text();
        assert!(text.starts_with('/'), "{raw:?} -> {text:?}");
        assert_eq!(RequestPath::new(text).form(strict).text(), text, "{raw:?}");
        for segment in text[1..].trim_end_matches('/').split('/') {
            assert!(
                text == "/" || !matches!(segment, "" | "." | ".."),
                "{raw:?} -> {text:?}"
            );
            assert!(!segment.contains(';'), "{raw:?} -> {text:?}");
        }
    });
}

fn validation(leeway_s: u64, require_exp: bool) -> Validation {
    Validation {
        leeway_s,
        require_exp,
        audience: Some("api".into()),
        issuer: Some("https://issuer".into()),
    }
}

#[test]
fn durations_cidrs_and_tokens_never_panic() {
    let key = Hs256Key::new(b"fuzz-secret");
    fuzz(
        (text(), text(), any::<u64>(), any::<u64>(), any::<bool>()),
        |(a, b, now, leeway, require_exp)| {
            let checks = validation(*leeway, *require_exp);
            let _ = parse_ms(a);
            let _ = Cidr::parse(a);
            let _ = CidrList::parse(&[a.as_str(), b.as_str()]);
            let _ = jwt::verify(a, &key, *now, &checks);
            let _ = jwt::verify(&format!("{a}.{b}.{a}"), &key, *now, &checks);
            let _ = jwt::bearer(a);
        },
    );
}

/// JSON text for a token part: a generated value, or text with duplicate
/// keys, which `Value` cannot hold.
fn token_part() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => json_value().prop_map(|v| v.to_string()),
        1 => (json_value(), json_value()).prop_map(|(a, b)| format!(r#"{{"alg":"HS256","exp":{a},"sub":{b},"sub":{a}}}"#)),
        1 => text(),
    ]
}

/// Signed with the verifier's key, so the fuzzer reaches past the signature
/// into the header and claims checks: duplicate keys, dates of every shape,
/// aud and iss of every type.
#[test]
fn signed_tokens_with_garbage_claims_never_panic() {
    use hmac::{Hmac, Mac};
    let secret = b"fuzz-secret";
    let key = Hs256Key::new(secret);
    let headers = prop_oneof![
        3 => Just(r#"{"alg":"HS256"}"#.to_string()),
        1 => token_part(),
    ];
    fuzz(
        (
            headers,
            token_part(),
            any::<u64>(),
            any::<u64>(),
            any::<bool>(),
        ),
        |(header, payload, now, leeway, require_exp)| {
            let input = format!(
                "{}.{}",
                base64url(header.as_bytes()),
                base64url(payload.as_bytes())
            );
            let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
            mac.update(input.as_bytes());
            let token = format!("{input}.{}", base64url(&mac.finalize().into_bytes()));
            let _ = jwt::verify(&token, &key, *now, &validation(*leeway, *require_exp));
        },
    );
}

#[test]
fn the_fields_sent_to_the_origin_never_panic() {
    let names = prop_oneof![
        3 => prop::sample::select(vec![
            "connection", "Connection", "keep-alive", "te", "upgrade", "x-forwarded-for",
            "forwarded", "x-sluice-auth", "X-Sluice-Auth", "Sluice-Room-Pass", "accept", "x-hop",
            "X-Forwarded-Host", "x-forwarded-proto", "cf-ipcountry", "CF-Connecting-IP",
        ])
        .prop_map(str::to_string),
        1 => text(),
    ];
    let values = prop_oneof![
        2 => prop::sample::select(vec!["x-hop, close", "x-sluice-auth", ",,", " , x-forwarded-for "])
            .prop_map(str::to_string),
        1 => text(),
    ];
    fuzz(
        (
            prop::collection::vec((names, values), 0..16),
            any::<Option<u32>>(),
        ),
        |(fields, ip)| {
            let client = ip.map(|ip| std::net::IpAddr::from(ip.to_be_bytes()));
            let auth = OriginAuth {
                header: "x-sluice-auth",
                secret: "s",
            };
            let keep = ["cf-ipcountry".to_string()];
            let facts = Facts {
                client,
                host: Some("api.example.com"),
                proto: Some("https"),
                keep: &keep,
                auth: Some(auth),
                room_pass: Some("v1.pass.shop.0-1.2.sig"),
            };
            let out = to_origin(fields.clone(), &facts);
            let passes: Vec<&str> = out
                .iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case("sluice-room-pass"))
                .map(|(_, value)| value.as_str())
                .collect();
            assert_eq!(passes, ["v1.pass.shop.0-1.2.sig"], "exactly Sluice's pass");
            let sent: Vec<&str> = out
                .iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case("x-sluice-auth"))
                .map(|(_, value)| value.as_str())
                .collect();
            assert_eq!(sent, ["s"], "exactly Sluice's copy of the secret");
            let host: Vec<&str> = out
                .iter()
                .filter(|(name, _)| name.eq_ignore_ascii_case("x-forwarded-host"))
                .map(|(_, value)| value.as_str())
                .collect();
            assert_eq!(
                host,
                ["api.example.com"],
                "exactly Sluice's X-Forwarded-Host"
            );
            assert!(out
                .iter()
                .all(|(name, _)| !name.eq_ignore_ascii_case("connection")));
        },
    );
}

/// Calls as an object receives them: valid ones (a check with every field,
/// an override, a hub's summary) with one value replaced by garbage, and
/// arbitrary JSON. Decoding and validating each must answer, not panic.
fn object_call() -> impl Strategy<Value = Vec<u8>> {
    let check = json!({"check": {"key": "k", "cost": 1,
        "policies": [{"sliding_log": {"name": "a", "limit": 10, "window_ms": 1000}},
                     {"gcra": {"name": "g", "max_burst": 1, "count": 1, "period_ms": 1}}],
        "ban": {"after": 3, "within_ms": 1000, "for_ms": 1000, "multiplier": 2, "max_ms": 60000},
        "lease": {"name": "c", "limit": 1, "ttl_ms": 1000, "owner": null, "new_id": "l"},
        "queue": {"max_wait_ms": 10, "max_len": 1},
        "reserve": {"id": "r", "ttl_ms": 1000},
        "block": {"holder": "iso", "rate": 50},
        "reports": [{"id": 9, "holder": "iso", "policy": "a", "times": "gBC", "strikes": 1}]}});
    let overridden = json!({"override": {"key": "k", "override": {"until_ms": null,
        "reason": "r", "set_ms": 0,
        "policies": [{"fixed_window": {"name": "a", "limit": 10, "window_ms": 1000}}]}}});
    let summary = json!({"summary": {"since_ms": 0}});
    prop_oneof![
        3 => mutated(check).prop_map(|v| v.to_string().into_bytes()),
        2 => mutated(overridden).prop_map(|v| v.to_string().into_bytes()),
        1 => mutated(summary).prop_map(|v| v.to_string().into_bytes()),
        2 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..2048),
        1 => (1usize..50_000).prop_map(|depth| "{\"check\":".repeat(depth).into_bytes()),
    ]
}

/// What Sluice writes of a value it read reads back as that value: a wire
/// type's writer and reader are one description (`sluice::wire!`).
fn round_trips<T: Write + FromScan + PartialEq + std::fmt::Debug>(value: &T) {
    let text = sluice::json::to_string(value);
    assert_eq!(T::from_json(&text).as_ref(), Ok(value), "{text}");
}

#[test]
fn the_object_call_decoders_never_panic() {
    fuzz(object_call(), |bytes| {
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        if let Ok(call) = LimiterCall::from_json(text) {
            round_trips(&call);
        }
        match LimiterCall::from_json(text) {
            Ok(LimiterCall::Check(check)) => {
                let _ = check.policies();
                let _ = check.ban();
                let _ = check.reports();
            }
            Ok(LimiterCall::Override(request)) => {
                let _ = request.overridden.map(|o| o.decode());
            }
            _ => {}
        }
        if let Ok(reply) = LimiterReply::from_json(text) {
            round_trips(&reply);
        }
        if let Ok(call) = HubCall::from_json(text) {
            round_trips(&call);
        }
        if let Ok(reply) = HubReply::from_json(text) {
            round_trips(&reply);
        }
    });
}

/// A room's cookies as a visitor may send them: garbage, a `Cookie` field
/// of garbage around the room's name, and values signed with the room's own
/// key whose contents are garbage or well-formed with garbage numbers, so
/// the fuzzer reaches past the signature. Each is read and planned.
#[test]
fn room_cookies_and_opening_times_never_panic() {
    let config = SluiceConfig::from_value(full_config()).expect("the full config is valid");
    let rule = config
        .rules
        .iter()
        .find(|r| r.room.is_some())
        .expect("a room");
    let key = Hs256Key::new(b"fuzz-room-secret-of-thirty-two-chars");
    let room = Room {
        id: &rule.id,
        config: rule.room.as_ref().expect("a room"),
        key: &key,
    };
    let views = Views::default();
    let payload = prop_oneof![
        2 => text(),
        2 => (prop::sample::select(vec!["t", "s", "x"]), text(), any::<u64>(), text(), any::<u64>(), any::<u64>())
            .prop_map(|(kind, shard, a, b, c, d)| format!("v1.{kind}.shop.{shard}.{b}{a}.{c}.{d}")),
        1 => (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>())
            .prop_map(|(shard, a, b, c)| format!("v1.t.shop.{shard}.j{a}.{b}.{c}")),
    ];
    fuzz(
        (text(), payload, any::<u64>(), any::<(u32, u32)>()),
        |(raw, payload, now, pick)| {
            let _ = instant::parse_ms(raw);
            let signed = format!("{payload}.{}", base64url(&key.sign(payload.as_bytes())));
            for field in [
                raw.clone(),
                format!("a=1; sluice_room_shop={raw}"),
                format!("sluice_room_shop={signed}"),
            ] {
                let held = room.held(Some(&field), *now);
                let _ = room.plan(held, *now, &views, *pick);
                let _ = room.without_shard(held, *now, &views);
            }
        },
    );
}

/// A shard's calls as its object receives them, valid ones with one value
/// replaced by garbage: whatever passes `Terms::check` runs a visit, an
/// end, an operator's state or a reset on a shard without a panic, at any
/// time.
#[test]
fn room_calls_never_panic_a_shard() {
    let visit = json!({"visit": [{"places": 5, "per_minute": 10, "session_ms": 300000,
        "grace_ms": 44000, "opens_at_ms": 1000}, {"ticket": {"pre": 3}}]});
    let end = json!({"end": [{"places": 1, "per_minute": 1, "session_ms": 1, "grace_ms": 1}, 7]});
    let control = json!({"control": [{"places": 2, "per_minute": 3, "session_ms": 1000, "grace_ms": 10},
        {"state": "paused", "reason": "stock count", "set_ms": 5}]});
    let reset = json!({"reset": {"places": 2, "per_minute": 3, "session_ms": 1000, "grace_ms": 10,
        "opens_at_ms": 5000}});
    let calls = prop_oneof![
        3 => mutated(visit).prop_map(|v| v.to_string().into_bytes()),
        1 => mutated(reset).prop_map(|v| v.to_string().into_bytes()),
        1 => mutated(end).prop_map(|v| v.to_string().into_bytes()),
        1 => mutated(control).prop_map(|v| v.to_string().into_bytes()),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
    ];
    fuzz((calls, any::<u64>()), |(bytes, now)| {
        let text = std::str::from_utf8(bytes).unwrap_or_default();
        let _ = RoomReply::from_json(text);
        let Ok(call) = RoomCall::from_json(text) else {
            return;
        };
        let terms = call.terms();
        if terms.check().is_err() {
            return;
        }
        let mut shard = Shard::new(terms);
        for at in [*now, now.saturating_add(terms.grace_ms), u64::MAX] {
            match call {
                RoomCall::Visit(_, holding) => {
                    let _ = shard.visit(at, holding, &mut || 1);
                }
                RoomCall::End(_, id) => {
                    let _ = shard.end(at, id, &mut || 1);
                }
                RoomCall::Inspect(_) => {
                    let _ = shard.tick(at, &mut || 1);
                }
                RoomCall::Reset(_) => {
                    let _ = shard.visit(at, Holding::Nothing, &mut || 1);
                    let _ = shard.reset(at, &mut || 1);
                }
                RoomCall::Control(_, ref control) => {
                    let _ = shard.set_control(at, control.clone(), &mut || 1);
                    let _ = shard.visit(at, Holding::Nothing, &mut || 1);
                }
            }
            let _ = shard.next_alarm();
        }
    });
}
