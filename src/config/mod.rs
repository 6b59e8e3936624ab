//! The rules, read from the `SLUICE` var (`[vars.SLUICE]` in wrangler.toml)
//! and validated before any request is served. Every error names the field
//! it is about (`SLUICE.rules[0].window`), because a limiter that silently
//! runs without its limits is worse than one that refuses to start.

pub mod ban;
pub mod concurrency;
pub mod count;
pub mod global;
pub mod layers;
pub mod listing;
pub mod lookup;
mod names;
pub mod override_body;
pub mod paths;
pub mod pattern;
mod policies;
pub mod quota_override;
mod reach;
pub mod room;
pub mod rule;
pub mod tier;

use std::fmt;

use serde_json::Value;

use crate::from_tree;
use crate::http::auth::ApiAccess;
use crate::http::case::lowercase;
use crate::http::cidr::CidrList;
use crate::http::forward::{may_carry_secret, may_keep, FORWARDING_CLAIMS};
use crate::http::jwt::Validation;
use crate::http::path::{PathOptions, RequestPath};
use crate::input::duration;
use crate::input::tree::{self, Dialect, Unreadable, REPEATED};
pub use ban::RuleBan;
pub use global::Global;
pub use layers::{Layer, Level};
pub use rule::{OnError, Rule};
pub use tier::{Tier, When};

pub const DEFAULT_PREFIX: &str = "/_sluice";

/// The secret a JWT is verified with, unless `jwt.secret` names another.
pub const DEFAULT_JWT_SECRET: &str = "JWT_SECRET";

/// The field and secret that tell an origin a request came through Sluice,
/// unless `origin_auth` names others.
pub const DEFAULT_ORIGIN_AUTH_HEADER: &str = "x-sluice-auth";
pub const DEFAULT_ORIGIN_AUTH_SECRET: &str = "ORIGIN_SECRET";

#[derive(Debug, Clone)]
pub struct Config {
    /// Where Sluice's own endpoints live, so they never shadow origin paths.
    pub prefix: String,
    pub origin: Origin,
    /// The field that carries a secret to the origin, so that the origin can
    /// refuse requests that did not come through Sluice.
    pub origin_auth: Option<OriginAuthConfig>,
    /// Forwarding claims (lowercase) a client's copy of which passes to the
    /// origin instead of being dropped: for a proxy in front of Sluice that
    /// the operator trusts to set them.
    pub keep_headers: Vec<String>,
    /// Leading bits of an IPv6 address that identify one client.
    pub ipv6_prefix: u8,
    /// How long a key object may take to decide.
    pub timeout_ms: u64,
    /// Whether the decision API exists without an `API_TOKEN` secret.
    pub api: ApiAccess,
    /// Callers that skip every rule.
    pub allow: CidrList,
    /// Callers refused with 403 before anything else.
    pub deny: CidrList,
    pub jwt: Option<JwtConfig>,
    /// How rules compare paths unless a rule says otherwise.
    pub paths: PathOptions,
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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginAuthConfig {
    /// A lowercase field name.
    pub header: String,
    /// The name of the secret binding whose value is sent.
    pub secret: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtConfig {
    /// The name of the secret binding that holds the HS256 key.
    pub secret: String,
    /// Leeway, `require_exp`, `aud` and `iss`.
    pub checks: Validation,
    pub on_invalid: OnInvalid,
}

/// The fewest characters of a token Sluice checks or sends (`ADMIN_TOKEN`,
/// `API_TOKEN`, the origin-auth secret): 32 random characters are beyond
/// guessing, and a short one is a mistake to catch before it is deployed.
pub const MIN_SECRET_CHARS: usize = 32;

/// Refuses a secret shorter than `MIN_SECRET_CHARS`, naming `field` and
/// the secret binding, never quoting the value.
pub fn check_secret_strength(field: &str, name: &str, value: &str) -> Result<(), ConfigError> {
    let chars = value.chars().count();
    if chars < MIN_SECRET_CHARS {
        return Err(error(
            field,
            format!("the secret {name} has {chars} characters; use at least {MIN_SECRET_CHARS} random ones (e.g. `openssl rand -hex 32`)"),
        ));
    }
    Ok(())
}

/// The most clock skew `jwt.leeway` may excuse. Minutes of skew mean a
/// broken clock, and a long leeway quietly extends every token's life.
pub const MAX_JWT_LEEWAY_S: u64 = 600;

/// The longest `jwt.aud` or `jwt.iss`: real ones are URLs or short names.
const MAX_JWT_CLAIM_BYTES: usize = 256;

/// What a token that fails verification gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInvalid {
    /// Treated as no token at all.
    Anonymous,
    /// 401.
    Reject,
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
            origin_auth: None,
            keep_headers: Vec::new(),
            ipv6_prefix: 64,
            timeout_ms: 2_000,
            api: ApiAccess::Token,
            allow: CidrList::default(),
            deny: CidrList::default(),
            jwt: None,
            paths: PathOptions::default(),
            rules: Vec::new(),
        }
    }
}

from_tree! {
    struct RawConfig {
        prefix: Option<String> = optional "prefix",
        origin: Option<String> = optional "origin",
        origin_auth: Option<RawOriginAuth> = optional "origin_auth",
        keep_headers: Vec<String> = or_default "keep_headers",
        ipv6_prefix: Option<u8> = optional "ipv6_prefix",
        timeout: Option<String> = optional "timeout",
        api: Option<String> = optional "api",
        allow: Vec<String> = or_default "allow",
        deny: Vec<String> = or_default "deny",
        jwt: Option<RawJwt> = optional "jwt",
        paths: Option<paths::RawPaths> = optional "paths",
        rules: Vec<rule::RawRule> = or_default "rules",
    }
}

from_tree! {
    struct RawOriginAuth {
        header: Option<String> = optional "header",
        secret: Option<String> = optional "secret",
    }
}

from_tree! {
    struct RawJwt {
        secret: Option<String> = optional "secret",
        leeway: Option<String> = optional "leeway",
        on_invalid: Option<String> = optional "on_invalid",
        require_exp: Option<bool> = optional "require_exp",
        aud: Option<String> = optional "aud",
        iss: Option<String> = optional "iss",
    }
}

impl Config {
    /// Reads the config from the var's value: an object, or a JSON string
    /// holding one (as a dashboard text var would). A missing var (`null`)
    /// gives the defaults: no rules, the demo origin. A given config must
    /// name its `origin`.
    pub fn from_value(value: Value) -> Result<Config, ConfigError> {
        let value = match value {
            Value::Null => return Ok(Config::default()),
            Value::String(text) => tree::parse(&text).map_err(|e| match e {
                Unreadable::Syntax(line, column) => error(
                    "SLUICE",
                    format!("is a string but not valid JSON at line {line} column {column}"),
                ),
                Unreadable::Repeated(path) => error(&format!("SLUICE.{path}"), REPEATED),
            })?,
            other => other,
        };
        let raw: RawConfig = tree::from_value(value).map_err(|e| ConfigError {
            field: e
                .field()
                .map_or_else(|| "SLUICE".to_string(), |f| format!("SLUICE.{f}")),
            message: e.words(Dialect::Toml),
        })?;
        Config::validate(raw)
    }

    fn validate(raw: RawConfig) -> Result<Config, ConfigError> {
        let defaults = Config::default();
        let prefix = match raw.prefix {
            Some(prefix) => validate_prefix(&prefix).map_err(|m| error("SLUICE.prefix", m))?,
            None => defaults.prefix,
        };
        let ipv6_prefix = raw.ipv6_prefix.unwrap_or(defaults.ipv6_prefix);
        if !(1..=128).contains(&ipv6_prefix) {
            return Err(error(
                "SLUICE.ipv6_prefix",
                format!("ipv6_prefix must be from 1 to 128, got {ipv6_prefix}"),
            ));
        }
        let timeout_ms = match raw.timeout {
            Some(text) => {
                let ms = duration::parse_ms(&text).map_err(|m| error("SLUICE.timeout", m))?;
                if !(1..=60_000).contains(&ms) {
                    return Err(error("SLUICE.timeout", "timeout must be from 1 ms to 60 s"));
                }
                ms
            }
            None => defaults.timeout_ms,
        };
        let api = match raw.api.as_deref() {
            None | Some("token") => ApiAccess::Token,
            Some("open") => ApiAccess::Open,
            Some(other) => {
                return Err(error(
                    "SLUICE.api",
                    format!("{other:?} is not a choice: use \"token\" (the default: the API needs the API_TOKEN secret) or \"open\""),
                ))
            }
        };
        let allow = CidrList::parse(&raw.allow)
            .map_err(|(i, m)| error(&format!("SLUICE.allow[{i}]"), m))?;
        let deny =
            CidrList::parse(&raw.deny).map_err(|(i, m)| error(&format!("SLUICE.deny[{i}]"), m))?;
        let origin_auth = raw.origin_auth.map(validate_origin_auth).transpose()?;
        let keep_headers = validate_keep_headers(raw.keep_headers)?;
        let jwt = raw.jwt.map(validate_jwt).transpose()?;
        let paths = paths::validate_paths(raw.paths, PathOptions::default(), "SLUICE.paths")?;
        let mut rules: Vec<Rule> = Vec::with_capacity(raw.rules.len());
        for (i, raw_rule) in raw.rules.into_iter().enumerate() {
            let at = format!("SLUICE.rules[{i}]");
            let rule = rule::validate_rule(raw_rule, &at, paths)?;
            if rules.iter().any(|r| r.id == rule.id) {
                return Err(error(
                    &format!("{at}.id"),
                    format!("rule id {:?} is used by an earlier rule", rule.id),
                ));
            }
            if let Some(needs) = rule::needs_jwt(&rule, &at).filter(|_| jwt.is_none()) {
                return Err(error(
                    &needs,
                    "this rule tells callers apart by JWT (a \"registered\" tier or a claim in a key); configure SLUICE.jwt",
                ));
            }
            rules.push(rule);
        }
        room::validate_gates(&rules)?;
        if let Some((i, rule)) = rules
            .iter()
            .enumerate()
            .find(|(_, rule)| lies_below(rule, &prefix))
        {
            return Err(error(
                "SLUICE.prefix",
                format!("{prefix:?} is where Sluice's own endpoints live, and every path at or below it is answered by Sluice (a 404 where it has none), so SLUICE.rules[{i}] (match.path {:?}) would never see its requests; choose a prefix no rule's path starts with (the default is {DEFAULT_PREFIX:?})", rule.path.to_string()),
            ));
        }
        reach::check(&rules)?;
        let origin =
            validate_origin(raw.origin.as_deref()).map_err(|m| error("SLUICE.origin", m))?;
        Ok(Config {
            prefix,
            origin,
            origin_auth,
            keep_headers,
            ipv6_prefix,
            timeout_ms,
            api,
            allow,
            deny,
            jwt,
            paths,
            rules,
        })
    }

    /// The first rule that matches, with the path parameters it captured.
    pub fn rule_for<'p>(
        &self,
        method: &str,
        path: &'p RequestPath,
    ) -> Option<(&Rule, Vec<(&str, &'p str)>)> {
        self.rules
            .iter()
            .find_map(|rule| rule.captures(method, path).map(|params| (rule, params)))
    }

    /// The part of `path` below Sluice's prefix, if it is one of Sluice's
    /// own paths.
    pub fn own_path<'p>(&self, path: &'p str) -> Option<&'p str> {
        let rest = path.strip_prefix(self.prefix.as_str())?;
        (rest.is_empty() || rest.starts_with('/')).then_some(rest)
    }
}

/// Whether the paths `rule` is written for lie at or below `prefix`, where
/// Sluice's own endpoints answer before any rule is tried: its pattern
/// starts with the prefix as a whole segment. A case-insensitive rule is
/// compared without case, since its spellings are one path to it.
fn lies_below(rule: &Rule, prefix: &str) -> bool {
    let head = rule.path.literal_head();
    let prefix = if rule.paths.case_insensitive {
        lowercase(prefix)
    } else {
        prefix.to_string()
    };
    head.strip_prefix(prefix.as_str())
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// A JSON value as an error message quotes it: compact, as `{value}` would
/// write it, but through [`crate::json::Write`], the writer the responses
/// use, rather than `Value`'s `Display` with its pretty-printer.
fn json_text(value: &serde_json::Value) -> String {
    crate::json::to_string(value)
}

pub(crate) fn error(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.to_string(),
        message: message.into(),
    }
}

/// A secret binding's name, as `wrangler secret put` accepts it.
pub(super) fn validate_secret_name(
    name: String,
    field: &str,
    example: &str,
) -> Result<String, ConfigError> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(error(
            field,
            format!("secret must name a secret binding (letters, digits, _), e.g. \"{example}\""),
        ));
    }
    Ok(name)
}

fn validate_origin_auth(raw: RawOriginAuth) -> Result<OriginAuthConfig, ConfigError> {
    let header = raw
        .header
        .unwrap_or_else(|| DEFAULT_ORIGIN_AUTH_HEADER.to_string())
        .to_ascii_lowercase();
    let well_formed = (1..=64).contains(&header.len())
        && header
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !well_formed || !may_carry_secret(&header) {
        return Err(error(
            "SLUICE.origin_auth.header",
            format!("{header:?} cannot carry the secret: use a field of your own of up to 64 letters, digits and -, e.g. \"{DEFAULT_ORIGIN_AUTH_HEADER}\" (not a hop-by-hop, forwarding, cf- or other standard field)"),
        ));
    }
    let secret = validate_secret_name(
        raw.secret
            .unwrap_or_else(|| DEFAULT_ORIGIN_AUTH_SECRET.to_string()),
        "SLUICE.origin_auth.secret",
        DEFAULT_ORIGIN_AUTH_SECRET,
    )?;
    Ok(OriginAuthConfig { header, secret })
}

/// `keep_headers`: each a forwarding claim Sluice would drop, named in
/// any case. Any other field passes (or is Sluice's to set) whatever this
/// says, so naming one is a mistake worth reporting.
fn validate_keep_headers(mut names: Vec<String>) -> Result<Vec<String>, ConfigError> {
    for (i, name) in names.iter_mut().enumerate() {
        name.make_ascii_lowercase();
        if !may_keep(name) {
            return Err(error(
                &format!("SLUICE.keep_headers[{i}]"),
                format!("{name:?} is not a field Sluice drops from what a client sends: name one of {}, or a cf- field; every other field passes to the origin anyway, and the client's address is always Sluice's to state (X-Forwarded-For)", FORWARDING_CLAIMS.join(", ")),
            ));
        }
    }
    Ok(names)
}

fn validate_jwt(raw: RawJwt) -> Result<JwtConfig, ConfigError> {
    let secret = validate_secret_name(
        raw.secret.unwrap_or_else(|| DEFAULT_JWT_SECRET.to_string()),
        "SLUICE.jwt.secret",
        DEFAULT_JWT_SECRET,
    )?;
    let leeway_s = match raw.leeway {
        Some(text) => {
            let ms = duration::parse_ms(&text).map_err(|m| error("SLUICE.jwt.leeway", m))?;
            if ms % 1000 != 0 || ms / 1000 > MAX_JWT_LEEWAY_S {
                return Err(error(
                    "SLUICE.jwt.leeway",
                    format!("leeway must be whole seconds from \"0s\" to \"{MAX_JWT_LEEWAY_S}s\", got {text:?}"),
                ));
            }
            ms / 1000
        }
        None => 0,
    };
    let audience = raw
        .aud
        .map(|aud| validate_claim_value(aud, "SLUICE.jwt.aud"))
        .transpose()?;
    let issuer = raw
        .iss
        .map(|iss| validate_claim_value(iss, "SLUICE.jwt.iss"))
        .transpose()?;
    let on_invalid = match raw.on_invalid.as_deref() {
        None | Some("anonymous") => OnInvalid::Anonymous,
        Some("reject") => OnInvalid::Reject,
        Some(other) => {
            return Err(error(
                "SLUICE.jwt.on_invalid",
                format!("{other:?} is not a choice: use \"anonymous\" or \"reject\""),
            ))
        }
    };
    Ok(JwtConfig {
        secret,
        checks: Validation {
            leeway_s,
            require_exp: raw.require_exp.unwrap_or(true),
            audience,
            issuer,
        },
        on_invalid,
    })
}

/// An expected `aud` or `iss`: compared byte for byte with the token's, so
/// it must be something a token can carry.
fn validate_claim_value(value: String, field: &str) -> Result<String, ConfigError> {
    if value.is_empty() || value.len() > MAX_JWT_CLAIM_BYTES || value.contains(char::is_control) {
        return Err(error(
            field,
            format!("must be 1 to {MAX_JWT_CLAIM_BYTES} bytes without control characters"),
        ));
    }
    Ok(value)
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

/// The demo origin is never a default: a deployed Worker that forgot its
/// origin would answer every request itself, so it must be asked for by
/// name. (With no `SLUICE` var at all, `Config::default` still serves it, so
/// a bare `wrangler dev` works.)
fn validate_origin(origin: Option<&str>) -> Result<Origin, String> {
    const CHOICES: &str =
        "\"demo\" (the built-in demo origin), \"route\" (the zone's origin), or an http(s) URL";
    let Some(origin) = origin else {
        return Err(format!("origin is required: write {CHOICES}"));
    };
    match origin {
        "" => Err(format!(
            "origin is empty, and the demo origin is no longer the default: write {CHOICES}"
        )),
        "demo" => Ok(Origin::Demo),
        "route" => Ok(Origin::Route),
        _ => {
            let rest = origin
                .strip_prefix("https://")
                .or_else(|| origin.strip_prefix("http://"));
            match rest {
                Some(rest) if !rest.contains(['?', '#', ' ']) => {
                    let authority = rest.split('/').next().unwrap_or_default();
                    check_authority(authority).map_err(|m| format!("{origin:?}: {m}"))?;
                    Ok(Origin::Url(origin.trim_end_matches('/').to_string()))
                }
                _ => Err(format!("{origin:?} is not {CHOICES} without query")),
            }
        }
    }
}

/// The `host[:port]` of an origin URL, checked so that a URL every
/// request would fail to reach is refused before it is used: a host is
/// required, a port is 1 to 65535, and credentials cannot be sent (fetch
/// refuses URLs that carry them).
fn check_authority(authority: &str) -> Result<(), String> {
    if authority.contains('@') {
        return Err("an origin cannot carry credentials (user@host)".into());
    }
    let (host, port) = match authority.strip_prefix('[') {
        Some(bracketed) => match bracketed.split_once(']') {
            Some((host, rest)) if !host.is_empty() => (host, rest.strip_prefix(':')),
            _ => return Err("an IPv6 host is written [address]".into()),
        },
        None => match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err("the URL needs a host".into());
    }
    match port {
        Some(port)
            if port.parse::<u16>().map_or(true, |p| p == 0)
                || !port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Err(format!(
                "port {port:?} is not a port: use a number from 1 to 65535"
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
