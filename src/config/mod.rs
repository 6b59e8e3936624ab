//! The rules, read from the `SLUICE` var (`[vars.SLUICE]` in wrangler.toml)
//! and validated before any request is served. Every error names the field
//! it is about (`SLUICE.rules[0].window`), because a limiter that silently
//! runs without its limits is worse than one that refuses to start.

pub mod duration;
pub mod pattern;

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::http::api::validate_policy_name;
use crate::http::key::KeySpec;
use crate::limit::Policy;
use pattern::Pattern;

pub const DEFAULT_PREFIX: &str = "/_sluice";

#[derive(Debug, Clone)]
pub struct Config {
    /// Where Sluice's own endpoints live, so they never shadow origin paths.
    pub prefix: String,
    pub origin: Origin,
    /// Matched in order; the first match applies.
    pub rules: Vec<Rule>,
}

/// Where admitted requests go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The built-in echo origin, so Sluice runs with nothing else set up.
    Demo,
    /// The request's own URL: on a Cloudflare route, that is the zone's
    /// origin server.
    Route,
    /// A base URL that the request's path and query are appended to.
    Url(String),
}

#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    pub path: Pattern,
    /// Upper-case method names; `None` matches every method.
    pub methods: Option<Vec<String>>,
    pub key: KeySpec,
    pub policy: Policy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the problem is, e.g. `SLUICE.rules[1].limit`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Default for Config {
    fn default() -> Config {
        Config {
            prefix: DEFAULT_PREFIX.to_string(),
            origin: Origin::Demo,
            rules: Vec::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default = "default_prefix")]
    prefix: String,
    #[serde(default)]
    origin: String,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: String,
    #[serde(rename = "match", default)]
    matcher: RawMatch,
    #[serde(default = "default_key")]
    key: String,
    limit: u64,
    window: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMatch {
    path: Option<String>,
    methods: Option<Vec<String>>,
}

fn default_prefix() -> String {
    DEFAULT_PREFIX.to_string()
}

fn default_key() -> String {
    "ip".to_string()
}

impl Config {
    /// Reads the config from the var's value: an object, or a JSON string
    /// holding one (as a dashboard text var would). A missing var (`null`)
    /// gives the defaults: no rules, the demo origin.
    pub fn from_value(value: Value) -> Result<Config, ConfigError> {
        let value = match value {
            Value::Null => return Ok(Config::default()),
            Value::String(text) => serde_json::from_str(&text).map_err(|e| ConfigError {
                field: "SLUICE".into(),
                message: format!("is a string but not valid JSON: {e}"),
            })?,
            other => other,
        };
        let raw: RawConfig = serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            ConfigError {
                field: if path == "." {
                    "SLUICE".to_string()
                } else {
                    format!("SLUICE.{path}")
                },
                message: e.into_inner().to_string(),
            }
        })?;
        Config::validate(raw)
    }

    fn validate(raw: RawConfig) -> Result<Config, ConfigError> {
        let prefix = validate_prefix(&raw.prefix).map_err(|m| error("SLUICE.prefix", m))?;
        let origin = validate_origin(&raw.origin).map_err(|m| error("SLUICE.origin", m))?;
        let mut rules: Vec<Rule> = Vec::with_capacity(raw.rules.len());
        for (i, rule) in raw.rules.into_iter().enumerate() {
            let rule = validate_rule(rule, &format!("SLUICE.rules[{i}]"))?;
            if rules.iter().any(|r| r.id == rule.id) {
                return Err(error(
                    &format!("SLUICE.rules[{i}].id"),
                    format!("rule id {:?} is used by an earlier rule", rule.id),
                ));
            }
            rules.push(rule);
        }
        Ok(Config {
            prefix,
            origin,
            rules,
        })
    }

    /// The first rule that matches, if any.
    pub fn rule_for(&self, method: &str, path: &str) -> Option<&Rule> {
        self.rules.iter().find(|rule| rule.matches(method, path))
    }

    /// The part of `path` below Sluice's prefix, if it is one of Sluice's
    /// own paths.
    pub fn own_path<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(self.prefix.as_str())?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }
}

impl Rule {
    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.methods
            .as_ref()
            .is_none_or(|methods| methods.iter().any(|m| m == method))
            && self.path.matches(path)
    }
}

fn error(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.to_string(),
        message: message.into(),
    }
}

fn validate_rule(raw: RawRule, at: &str) -> Result<Rule, ConfigError> {
    validate_policy_name(&raw.id).map_err(|m| error(&format!("{at}.id"), m))?;
    let path = Pattern::parse(raw.matcher.path.as_deref().unwrap_or("/*"))
        .map_err(|m| error(&format!("{at}.match.path"), m))?;
    let methods = raw
        .matcher
        .methods
        .map(|methods| {
            validate_methods(methods).map_err(|m| error(&format!("{at}.match.methods"), m))
        })
        .transpose()?;
    let key = KeySpec::parse(&raw.key).map_err(|m| error(&format!("{at}.key"), m))?;
    let window_ms =
        duration::parse_ms(&raw.window).map_err(|m| error(&format!("{at}.window"), m))?;
    let policy = Policy::new(raw.limit, window_ms).map_err(|e| {
        let field = match e.field() {
            "limit" => "limit",
            _ => "window",
        };
        error(&format!("{at}.{field}"), e.to_string())
    })?;
    Ok(Rule {
        id: raw.id,
        path,
        methods,
        key,
        policy,
    })
}

fn validate_methods(methods: Vec<String>) -> Result<Vec<String>, String> {
    if methods.is_empty() {
        return Err(
            "methods must list at least one method, or be left out to match every method".into(),
        );
    }
    methods
        .into_iter()
        .map(|m| {
            if !m.is_empty() && m.bytes().all(|b| b.is_ascii_alphabetic()) {
                Ok(m.to_ascii_uppercase())
            } else {
                Err(format!("{m:?} is not an HTTP method"))
            }
        })
        .collect()
}

fn validate_prefix(prefix: &str) -> Result<String, String> {
    let ok = prefix.len() >= 2
        && prefix.starts_with('/')
        && !prefix.ends_with('/')
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-_.~".contains(&b));
    if ok {
        Ok(prefix.to_string())
    } else {
        Err(format!(
            "{prefix:?} must start with \"/\", not end with \"/\", and hold only letters, digits and -_.~/"
        ))
    }
}

fn validate_origin(origin: &str) -> Result<Origin, String> {
    match origin {
        "" => Ok(Origin::Demo),
        "route" => Ok(Origin::Route),
        _ => {
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            match rest {
                Some(rest)
                    if !rest.is_empty()
                        && !rest.starts_with('/')
                        && !rest.contains(['?', '#', ' ']) =>
                {
                    Ok(Origin::Url(origin.trim_end_matches('/').to_string()))
                }
                _ => Err(format!(
                    "{origin:?} must be empty (the demo origin), \"route\" (the zone's origin), or an http(s) URL without query"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error_field(value: Value) -> String {
        let e = Config::from_value(value).unwrap_err();
        assert!(!e.message.is_empty());
        e.field
    }

    fn rule(extra: Value) -> Value {
        let mut rule = json!({"id": "api", "limit": 10, "window": "1m"});
        rule.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        json!({ "rules": [rule] })
    }

    #[test]
    fn a_full_config_parses() {
        let config = Config::from_value(json!({
            "prefix": "/_limits",
            "origin": "https://api.example.com/",
            "rules": [
                {"id": "api", "match": {"path": "/api/*", "methods": ["get", "POST"]},
                 "key": "ip+path", "limit": 10, "window": "1m"},
                {"id": "login", "match": {"path": "/login"}, "key": "header:x-user", "limit": 5, "window": "500ms"}
            ]
        }))
        .unwrap();
        assert_eq!(config.prefix, "/_limits");
        assert_eq!(config.origin, Origin::Url("https://api.example.com".into()));
        assert_eq!(
            config.rules[0].methods,
            Some(vec!["GET".into(), "POST".into()])
        );
        assert_eq!(config.rules[1].policy, Policy::new(5, 500).unwrap());
        assert_eq!(config.rule_for("GET", "/api/x").unwrap().id, "api");
        assert!(config.rule_for("DELETE", "/api/x").is_none());
        assert_eq!(config.rule_for("PUT", "/login").unwrap().id, "login");
        assert!(config.rule_for("GET", "/other").is_none());
    }

    #[test]
    fn defaults_apply() {
        let config = Config::from_value(Value::Null).unwrap();
        assert_eq!(config.prefix, DEFAULT_PREFIX);
        assert_eq!(config.origin, Origin::Demo);
        let config =
            Config::from_value(json!({"rules": [{"id": "all", "limit": 1, "window": "1s"}]}))
                .unwrap();
        assert!(config.rule_for("PATCH", "/anything").is_some());
        let from_string = Config::from_value(json!(r#"{"origin": "route"}"#)).unwrap();
        assert_eq!(from_string.origin, Origin::Route);
    }

    #[test]
    fn own_paths_sit_below_the_prefix() {
        let config = Config::default();
        assert_eq!(config.own_path("/_sluice/health"), Some("/health"));
        assert_eq!(config.own_path("/_sluice"), Some(""));
        assert_eq!(config.own_path("/_sluicex/health"), None);
        assert_eq!(config.own_path("/api"), None);
    }

    #[test]
    fn every_bad_field_is_named() {
        let cases = [
            (json!({"prefix": "nope"}), "SLUICE.prefix"),
            (json!({"prefix": "/a/"}), "SLUICE.prefix"),
            (json!({"prefix": 5}), "SLUICE.prefix"),
            (json!({"origin": "ftp://x"}), "SLUICE.origin"),
            (json!({"origin": "https://"}), "SLUICE.origin"),
            (json!({"origin": "https://x/?q=1"}), "SLUICE.origin"),
            (json!({"extra": 1}), "SLUICE.extra"),
            (json!({"rules": {}}), "SLUICE.rules"),
            (
                json!({"rules": [{"limit": 1, "window": "1s"}]}),
                "SLUICE.rules[0]",
            ),
            (rule(json!({"id": ""})), "SLUICE.rules[0].id"),
            (rule(json!({"id": "a b"})), "SLUICE.rules[0].id"),
            (rule(json!({"limit": 0})), "SLUICE.rules[0].limit"),
            (rule(json!({"limit": -1})), "SLUICE.rules[0].limit"),
            (rule(json!({"limit": 1.5})), "SLUICE.rules[0].limit"),
            (rule(json!({"limit": "10"})), "SLUICE.rules[0].limit"),
            (rule(json!({"limit": 10_000_000})), "SLUICE.rules[0].limit"),
            (rule(json!({"window": "10"})), "SLUICE.rules[0].window"),
            (rule(json!({"window": "0s"})), "SLUICE.rules[0].window"),
            (rule(json!({"window": "31d"})), "SLUICE.rules[0].window"),
            (rule(json!({"window": 60})), "SLUICE.rules[0].window"),
            (rule(json!({"key": "ip+nose"})), "SLUICE.rules[0].key"),
            (
                rule(json!({"match": {"path": "api/*"}})),
                "SLUICE.rules[0].match.path",
            ),
            (
                rule(json!({"match": {"methods": []}})),
                "SLUICE.rules[0].match.methods",
            ),
            (
                rule(json!({"match": {"methods": ["G T"]}})),
                "SLUICE.rules[0].match.methods",
            ),
            (
                rule(json!({"match": {"methods": "GET"}})),
                "SLUICE.rules[0].match.methods",
            ),
            (
                rule(json!({"match": {"host": "x"}})),
                "SLUICE.rules[0].match.host",
            ),
            (rule(json!({"limt": 3})), "SLUICE.rules[0].limt"),
        ];
        for (value, field) in cases {
            assert_eq!(error_field(value.clone()), field, "for {value}");
        }
        let dup = json!({"rules": [
            {"id": "a", "limit": 1, "window": "1s"},
            {"id": "a", "limit": 1, "window": "1s"}
        ]});
        assert_eq!(error_field(dup), "SLUICE.rules[1].id");
        assert_eq!(error_field(json!("{not json")), "SLUICE");
    }
}
