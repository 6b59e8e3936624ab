//! One rule: which requests it matches, who the caller is (tiers and keys),
//! and what it allows them (policies, bans, lists, shadow mode, failure
//! policy).

use serde::Deserialize;

use super::paths::{validate_paths, RawPaths};
use super::pattern::Pattern;
use super::{error, ConfigError};
use crate::http::cidr::CidrList;
use crate::http::jwt::Claims;
use crate::http::key::{KeySpec, Part};
use crate::http::path::{PathOptions, RequestPath};
use crate::input::duration::parse_ms;
use crate::ledger::BanPolicy;
use crate::limit::gcra::{GcraPolicy, MAX_BURST};
use crate::limit::split::{share_spec, MAX_PARTS};
use crate::limit::{Policy, Spec};
use crate::limits::{
    DAY_MS, DEFAULT_LEASE_TTL_MS, MAX_CONCURRENCY, MAX_LEASE_TTL_MS, MAX_NAME_BYTES,
    MAX_OVERRIDE_MS, MAX_OVERRIDE_REASON_BYTES, MAX_POLICIES,
};
use crate::objects::name::Scope;

#[derive(Debug, Clone)]
pub struct Rule {
    pub id: String,
    /// Lower-cased when `paths` is case-insensitive.
    pub path: Pattern,
    /// How this rule compares request paths.
    pub paths: PathOptions,
    /// Upper-case method names; `None` matches every method.
    pub methods: Option<Vec<String>>,
    /// What `{action}` in a key stands for.
    pub action: Option<String>,
    /// Tried in order; the first whose `when` holds applies. A rule without
    /// tiers has one, unnamed.
    pub tiers: Vec<Tier>,
    pub ban: Option<RuleBan>,
    /// Callers that skip this rule.
    pub allow: CidrList,
    /// Callers refused with 403 when this rule matches.
    pub deny: CidrList,
    /// Decide and record, but refuse nothing: report what would happen.
    pub shadow: bool,
    pub on_error: OnError,
    /// At most this many of the key's requests at the origin at once.
    pub concurrency: Option<Concurrency>,
    /// Set when every caller shares one quota (`scope = "global"`).
    pub global: Option<Global>,
    /// Set when only some of the origin's answers count (`count`): each
    /// request then takes a reservation, kept or refunded by the answer.
    pub count: Option<CountedStatuses>,
}

/// The origin's answers that count against a rule: statuses and classes
/// (`"5xx"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountedStatuses {
    codes: Vec<u16>,
    /// Hundreds digits: 5 for `"5xx"`.
    classes: Vec<u16>,
}

impl CountedStatuses {
    pub fn matches(&self, status: u16) -> bool {
        self.codes.contains(&status) || self.classes.contains(&(status / 100))
    }
}

/// A quota every caller shares, possibly split across several objects
/// (`split = K`) so that no single Durable Object carries all of it.
#[derive(Debug, Clone)]
pub struct Global {
    /// Each part's policies, with limits cut to the part's share; one entry
    /// when the quota is not split.
    pub parts: Vec<Vec<(String, Spec)>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Concurrency {
    pub limit: u32,
    /// A lease lapses after this long even if its request never finishes,
    /// so a worker that dies cannot leak capacity.
    pub lease_ttl_ms: u64,
    /// Wait up to this long for a slot (first come, first served) instead
    /// of refusing at once; 0 refuses at once.
    pub max_wait_ms: u64,
    /// At most this many requests wait per key; more are refused.
    pub max_queue: u32,
}

#[derive(Debug, Clone)]
pub struct Tier {
    pub name: Option<String>,
    pub when: When,
    pub key: KeySpec,
    /// Policies as named in the RateLimit headers, all enforced together.
    pub policies: Vec<(String, Spec)>,
    /// Names the objects that hold this tier's keys, unique per rule and
    /// tier.
    pub scope: Scope,
}

/// Which callers a tier is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum When {
    Always,
    /// Callers with a valid JWT.
    Registered,
    /// Callers without one.
    Anonymous,
    /// Callers with a valid JWT whose claim `name` is one of `values`
    /// (strings, or integers in their JSON spelling): a plan tier.
    Claim {
        name: String,
        values: Vec<String>,
    },
}

impl When {
    /// Whether a caller with these verified claims (none: anonymous) is
    /// one this tier is for.
    pub fn holds(&self, claims: Option<&Claims>) -> bool {
        match self {
            When::Always => true,
            When::Registered => claims.is_some(),
            When::Anonymous => claims.is_none(),
            When::Claim { name, values } => claims
                .and_then(|claims| claims.get_str(name))
                .is_some_and(|value| values.contains(&value)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleBan {
    pub policy: BanPolicy,
    /// 429 or 403.
    pub status: u16,
}

/// What to do when the key's object cannot decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Fail open: forward the request.
    Allow,
    /// Fail closed: 503 with Retry-After.
    Deny,
}

impl Rule {
    /// The path parameters captured, if the rule matches the request.
    pub fn captures<'p>(
        &self,
        method: &str,
        path: &'p RequestPath,
    ) -> Option<Vec<(&str, &'p str)>> {
        let method_matches = self
            .methods
            .as_ref()
            .is_none_or(|methods| methods.iter().any(|m| m == method));
        if method_matches {
            self.path.captures(path.form(self.paths))
        } else {
            None
        }
    }

    /// The first tier whose `when` holds for a caller with these verified
    /// claims (none for an anonymous caller).
    pub fn tier_for(&self, claims: Option<&Claims>) -> Option<&Tier> {
        self.tiers.iter().find(|tier| tier.when.holds(claims))
    }

    /// Each part's policies when the rule's global quota is split in two or
    /// more; `None` for a quota held by one object.
    pub fn split_parts(&self) -> Option<&[Vec<(String, Spec)>]> {
        self.global
            .as_ref()
            .map(|g| g.parts.as_slice())
            .filter(|parts| parts.len() > 1)
    }

    /// Whether any tier needs a JWT verified.
    pub fn uses_jwt(&self) -> bool {
        self.tiers.iter().any(|tier| {
            tier.when != When::Always || tier.key.parts().any(|p| matches!(p, Part::Claim(_)))
        })
    }
}

/// The field of rule `rule` (validated at `at`) that needs a JWT, if one
/// does: the first key with a claim, or the first tier for registered or
/// anonymous callers.
pub(super) fn needs_jwt(rule: &Rule, at: &str) -> Option<String> {
    let tiered = rule.tiers.iter().any(|tier| tier.name.is_some());
    rule.tiers.iter().enumerate().find_map(|(i, tier)| {
        let claims = tier.key.parts().any(|p| matches!(p, Part::Claim(_)));
        match (claims, tiered) {
            (true, true) => Some(format!("{at}.tiers[{i}].key")),
            (true, false) => Some(format!("{at}.key")),
            (false, _) if tier.when != When::Always => Some(format!("{at}.tiers[{i}].when")),
            _ => None,
        }
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    id: String,
    #[serde(rename = "match", default)]
    matcher: RawMatch,
    paths: Option<RawPaths>,
    key: Option<String>,
    action: Option<String>,
    limit: Option<u64>,
    window: Option<String>,
    algorithm: Option<String>,
    burst: Option<u64>,
    policies: Option<Vec<RawPolicy>>,
    tiers: Option<Vec<RawTier>>,
    ban: Option<RawBan>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    shadow: bool,
    on_error: Option<String>,
    concurrency: Option<u64>,
    lease_ttl: Option<String>,
    queue: Option<RawQueue>,
    scope: Option<String>,
    split: Option<u64>,
    count: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    max_wait: String,
    max_len: Option<u64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawMatch {
    path: Option<String>,
    methods: Option<Vec<String>>,
}

/// One policy in shorthand (`limit`, `window`) or several (`policies`).
struct RawLimits {
    limit: Option<u64>,
    window: Option<String>,
    algorithm: Option<String>,
    burst: Option<u64>,
    policies: Option<Vec<RawPolicy>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    name: Option<String>,
    limit: u64,
    window: String,
    algorithm: Option<String>,
    burst: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTier {
    name: String,
    when: Option<serde_json::Value>,
    key: Option<String>,
    limit: Option<u64>,
    window: Option<String>,
    algorithm: Option<String>,
    burst: Option<u64>,
    policies: Option<Vec<RawPolicy>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBan {
    after: u64,
    within: String,
    #[serde(rename = "for")]
    duration: String,
    multiplier: Option<u64>,
    max: Option<String>,
    status: Option<u16>,
}

pub(super) fn validate_rule(
    raw: RawRule,
    at: &str,
    default_paths: PathOptions,
) -> Result<Rule, ConfigError> {
    let field = |name: &str| format!("{at}.{name}");
    validate_rule_id(&raw.id).map_err(|m| error(&field("id"), m))?;
    let paths = validate_paths(raw.paths, default_paths, &field("paths"))?;
    let path = Pattern::parse(raw.matcher.path.as_deref().unwrap_or("/*"))
        .map_err(|m| error(&field("match.path"), m))?;
    let path = if paths.case_insensitive {
        path.folded()
    } else {
        path
    };
    let methods = raw
        .matcher
        .methods
        .map(|methods| validate_methods(methods).map_err(|m| error(&field("match.methods"), m)))
        .transpose()?;
    if raw.action.as_deref() == Some("") {
        return Err(error(&field("action"), "action must not be empty"));
    }
    let limits = RawLimits {
        limit: raw.limit,
        window: raw.window,
        algorithm: raw.algorithm,
        burst: raw.burst,
        policies: raw.policies,
    };
    let has_tiers = raw.tiers.is_some();
    let tiers = match raw.tiers {
        None => {
            let key = raw.key.as_deref().unwrap_or("ip");
            let key = KeySpec::parse(key).map_err(|m| error(&field("key"), m))?;
            let only_concurrency = raw.concurrency.is_some()
                && limits.limit.is_none()
                && limits.window.is_none()
                && limits.policies.is_none();
            let policies = if only_concurrency {
                Vec::new()
            } else {
                validate_limits(limits, &raw.id, at)?
            };
            vec![Tier {
                name: None,
                when: When::Always,
                key,
                policies,
                scope: Scope::rule(&raw.id, None),
            }]
        }
        Some(tiers) => {
            if limits.limit.is_some() || limits.window.is_some() || limits.policies.is_some() {
                return Err(error(
                    &field("tiers"),
                    "a rule with tiers sets limits in each tier, not at the rule level",
                ));
            }
            validate_tiers(tiers, raw.key.as_deref(), &raw.id, at)?
        }
    };
    for (i, tier) in tiers.iter().enumerate() {
        let key_field = if tier.name.is_some() {
            format!("{at}.tiers[{i}].key")
        } else {
            field("key")
        };
        check_key_parts(&tier.key, &path, raw.action.is_some(), &key_field)?;
    }
    let ban = raw
        .ban
        .map(|ban| validate_ban(ban, &field("ban")))
        .transpose()?;
    let allow =
        CidrList::parse(&raw.allow).map_err(|(i, m)| error(&format!("{at}.allow[{i}]"), m))?;
    let deny = CidrList::parse(&raw.deny).map_err(|(i, m)| error(&format!("{at}.deny[{i}]"), m))?;
    let on_error = match raw.on_error.as_deref() {
        None | Some("deny") => OnError::Deny,
        Some("allow") => OnError::Allow,
        Some(other) => {
            return Err(error(
                &field("on_error"),
                format!("{other:?} is not a failure policy: use \"allow\" (fail open) or \"deny\" (fail closed)"),
            ))
        }
    };
    let concurrency =
        validate_concurrency(raw.concurrency, raw.lease_ttl.as_deref(), raw.queue, at)?;
    let scope = RawScope {
        scope: raw.scope,
        split: raw.split,
        key: raw.key.is_some(),
        tiers: has_tiers,
        ban: ban.is_some(),
        concurrency: concurrency.is_some(),
    };
    let policies = tiers.first().map_or(&[][..], |tier| &tier.policies);
    let global = validate_scope(scope, policies, at)?;
    let count_raw = raw.count;
    let mut rule = Rule {
        id: raw.id,
        path,
        paths,
        methods,
        action: raw.action,
        tiers,
        ban,
        allow,
        deny,
        shadow: raw.shadow,
        on_error,
        concurrency,
        global,
        count: None,
    };
    rule.count = validate_count(count_raw, &rule, at)?;
    Ok(rule)
}

/// `count = "all"` (the default) or `count = { status = [401, 403, "5xx"] }`.
/// Counting by answer needs a refund, which GCRA has not, a reservation
/// per key, which a split global quota has not, and no lease, whose slot
/// a refused login would not give back sooner.
fn validate_count(
    raw: Option<serde_json::Value>,
    rule: &Rule,
    at: &str,
) -> Result<Option<CountedStatuses>, ConfigError> {
    use serde_json::Value;
    let field = format!("{at}.count");
    let statuses = match raw {
        None => return Ok(None),
        Some(Value::String(all)) if all == "all" => return Ok(None),
        Some(Value::Object(object)) => {
            if let Some(unknown) = object.keys().find(|k| *k != "status") {
                return Err(error(
                    &format!("{field}.{unknown}"),
                    "unknown field: count takes status",
                ));
            }
            match object.get("status") {
                Some(Value::Array(statuses)) if !statuses.is_empty() && statuses.len() <= 64 => {
                    statuses.clone()
                }
                _ => {
                    return Err(error(
                        &format!("{field}.status"),
                        "status must list 1 to 64 statuses (401) or classes (\"5xx\")",
                    ))
                }
            }
        }
        Some(_) => {
            return Err(error(
                &field,
                "count is \"all\" or { status = [401, 403, \"5xx\"] }",
            ))
        }
    };
    let mut counted = CountedStatuses {
        codes: Vec::new(),
        classes: Vec::new(),
    };
    for status in statuses {
        match &status {
            Value::Number(n) if n.as_u64().is_some_and(|c| (100..=599).contains(&c)) => {
                counted.codes.push(n.as_u64().map_or(0, |c| c as u16));
            }
            Value::String(class)
                if class.len() == 3
                    && class.ends_with("xx")
                    && (b'1'..=b'5').contains(&class.as_bytes()[0]) =>
            {
                counted.classes.push(u16::from(class.as_bytes()[0] - b'0'));
            }
            other => {
                return Err(error(
                    &format!("{field}.status"),
                    format!(
                        "{} is not a status (100 to 599) or a class (\"4xx\")",
                        json_text(other)
                    ),
                ))
            }
        }
    }
    let refuse = |why: &str| Err(error(&field, why.to_string()));
    if rule.global.is_some() {
        return refuse("a global quota cannot count by answer: its parts are not per key, so a reservation could not be exact; count all requests");
    }
    if rule.concurrency.is_some() {
        return refuse("a concurrency limit already frees its slot when the answer comes; count by answer on a rule without concurrency");
    }
    if rule
        .tiers
        .iter()
        .flat_map(|t| &t.policies)
        .any(|(_, spec)| matches!(spec, Spec::Gcra(_)))
    {
        return refuse("GCRA cannot give back a unit, so it cannot count by answer: use sliding_log or fixed_window");
    }
    Ok(Some(counted))
}

/// What `scope` and `split` must agree with.
struct RawScope {
    scope: Option<String>,
    split: Option<u64>,
    key: bool,
    tiers: bool,
    ban: bool,
    concurrency: bool,
}

fn validate_scope(
    raw: RawScope,
    policies: &[(String, Spec)],
    at: &str,
) -> Result<Option<Global>, ConfigError> {
    let field = |name: &str| format!("{at}.{name}");
    match raw.scope.as_deref() {
        None | Some("key") => {
            return match raw.split {
                None => Ok(None),
                Some(_) => Err(error(
                    &field("split"),
                    "split divides a shared quota: it needs scope = \"global\"",
                )),
            };
        }
        Some("global") => {}
        Some(other) => {
            return Err(error(
                &field("scope"),
                format!("{other:?} is not a scope: use \"key\" (one quota per caller, the default) or \"global\" (one quota for everyone)"),
            ))
        }
    }
    for (present, name) in [(raw.key, "key"), (raw.tiers, "tiers"), (raw.ban, "ban")] {
        if present {
            return Err(error(
                &field(name),
                format!("a rule with scope = \"global\" has one quota for every caller, so it takes no {name}"),
            ));
        }
    }
    let parts = raw.split.unwrap_or(1);
    let parts = u32::try_from(parts)
        .ok()
        .filter(|k| (1..=MAX_PARTS).contains(k))
        .ok_or_else(|| {
            error(
                &field("split"),
                format!("split must be from 1 to {MAX_PARTS}, got {parts}"),
            )
        })?;
    if parts > 1 && raw.concurrency {
        return Err(error(
            &field("split"),
            "a concurrency limit cannot be split: leave split out or drop concurrency",
        ));
    }
    let mut shares = vec![Vec::with_capacity(policies.len()); parts as usize];
    for (name, spec) in policies {
        for (index, part) in (0..parts).zip(shares.iter_mut()) {
            let cut = if parts == 1 {
                Some(*spec)
            } else {
                share_spec(spec, parts, index)
            };
            let cut = cut.ok_or_else(|| {
                error(
                    &field("split"),
                    format!(
                        "policy {name} cannot be split into {parts} parts: each part needs a share of at least 1 and a sliding_log or fixed_window algorithm"
                    ),
                )
            })?;
            part.push((name.clone(), cut));
        }
    }
    Ok(Some(Global { parts: shares }))
}

fn validate_concurrency(
    limit: Option<u64>,
    lease_ttl: Option<&str>,
    queue: Option<RawQueue>,
    at: &str,
) -> Result<Option<Concurrency>, ConfigError> {
    let Some(limit) = limit else {
        let orphan = match (lease_ttl, &queue) {
            (Some(_), _) => Some("lease_ttl"),
            (None, Some(_)) => Some("queue"),
            (None, None) => None,
        };
        return match orphan {
            Some(name) => Err(error(
                &format!("{at}.{name}"),
                format!("{name} applies to a concurrency limit: set concurrency = N too, or leave {name} out"),
            )),
            None => Ok(None),
        };
    };
    let limit = u32::try_from(limit)
        .ok()
        .filter(|n| (1..=MAX_CONCURRENCY).contains(n))
        .ok_or_else(|| {
            error(
                &format!("{at}.concurrency"),
                format!("concurrency must be from 1 to {MAX_CONCURRENCY}, got {limit}"),
            )
        })?;
    let lease_ttl_ms = match lease_ttl {
        None => DEFAULT_LEASE_TTL_MS,
        Some(text) => {
            let ms = parse_ms(text).map_err(|m| error(&format!("{at}.lease_ttl"), m))?;
            if !(1..=MAX_LEASE_TTL_MS).contains(&ms) {
                return Err(error(
                    &format!("{at}.lease_ttl"),
                    "lease_ttl must be from 1 ms to 1 day",
                ));
            }
            ms
        }
    };
    let (max_wait_ms, max_queue) = match queue {
        None => (0, 0),
        Some(queue) => {
            let wait =
                parse_ms(&queue.max_wait).map_err(|m| error(&format!("{at}.queue.max_wait"), m))?;
            if !(1..=60_000).contains(&wait) {
                return Err(error(
                    &format!("{at}.queue.max_wait"),
                    "max_wait must be from 1 ms to 60 s",
                ));
            }
            let len = queue.max_len.unwrap_or(100);
            if !(1..=10_000).contains(&len) {
                return Err(error(
                    &format!("{at}.queue.max_len"),
                    "max_len must be from 1 to 10000",
                ));
            }
            (wait, len as u32)
        }
    };
    Ok(Some(Concurrency {
        limit,
        lease_ttl_ms,
        max_wait_ms,
        max_queue,
    }))
}

fn validate_tiers(
    raw: Vec<RawTier>,
    rule_key: Option<&str>,
    rule_id: &str,
    at: &str,
) -> Result<Vec<Tier>, ConfigError> {
    if raw.is_empty() {
        return Err(error(
            &format!("{at}.tiers"),
            "tiers must list at least one tier",
        ));
    }
    let mut tiers: Vec<Tier> = Vec::with_capacity(raw.len());
    for (i, tier) in raw.into_iter().enumerate() {
        let here = format!("{at}.tiers[{i}]");
        validate_part_name(&tier.name).map_err(|m| error(&format!("{here}.name"), m))?;
        if tiers
            .iter()
            .any(|t| t.name.as_deref() == Some(tier.name.as_str()))
        {
            return Err(error(
                &format!("{here}.name"),
                format!("tier name {:?} is used twice", tier.name),
            ));
        }
        let when = validate_when(tier.when, &format!("{here}.when"))?;
        let default_key = if matches!(when, When::Registered | When::Claim { .. }) {
            "{sub}"
        } else {
            rule_key.unwrap_or("ip")
        };
        let key = KeySpec::parse(tier.key.as_deref().unwrap_or(default_key))
            .map_err(|m| error(&format!("{here}.key"), m))?;
        if when == When::Anonymous && key.parts().any(|p| matches!(p, Part::Claim(_))) {
            return Err(error(
                &format!("{here}.key"),
                "anonymous callers have no verified JWT, so their key cannot use {sub} or a claim: key them by ip or a header",
            ));
        }
        let scope = Scope::rule(rule_id, Some(&tier.name));
        let limits = RawLimits {
            limit: tier.limit,
            window: tier.window,
            algorithm: tier.algorithm,
            burst: tier.burst,
            policies: tier.policies,
        };
        let policies = validate_limits(limits, scope.id(), &here)?;
        tiers.push(Tier {
            name: Some(tier.name),
            when,
            key,
            policies,
            scope,
        });
    }
    // Claim tiers are tried first where listed, but only `registered`,
    // `anonymous` or an unconditional tier covers every caller of a kind.
    let covers = |w: When| tiers.iter().any(|t| t.when == When::Always || t.when == w);
    if !covers(When::Registered) || !covers(When::Anonymous) {
        return Err(error(
            &format!("{at}.tiers"),
            "tiers must cover every caller: add a tier for \"registered\" and one for \"anonymous\" callers (or one without \"when\")",
        ));
    }
    Ok(tiers)
}

/// The policies of a rule or tier, named for the RateLimit headers:
/// `base` for a single unnamed policy, `base.name` for named ones.
fn validate_limits(
    raw: RawLimits,
    base: &str,
    at: &str,
) -> Result<Vec<(String, Spec)>, ConfigError> {
    let shorthand = raw.limit.is_some() || raw.window.is_some();
    match (raw.policies, shorthand) {
        (Some(_), true) => Err(error(
            &format!("{at}.policies"),
            "give either \"policies\" or \"limit\" and \"window\", not both",
        )),
        (None, false) => Err(error(
            &format!("{at}.limit"),
            "limit and window are required (or a list of policies)",
        )),
        (None, true) => {
            let limit = raw
                .limit
                .ok_or_else(|| error(&format!("{at}.limit"), "limit is required with window"))?;
            let window = raw
                .window
                .ok_or_else(|| error(&format!("{at}.window"), "window is required with limit"))?;
            let spec = validate_spec(limit, &window, raw.algorithm.as_deref(), raw.burst, at)?;
            Ok(vec![(base.to_string(), spec)])
        }
        (Some(policies), false) => {
            if raw.algorithm.is_some() || raw.burst.is_some() {
                return Err(error(
                    &format!("{at}.algorithm"),
                    "with \"policies\", set algorithm and burst in each policy",
                ));
            }
            if policies.is_empty() || policies.len() > MAX_POLICIES {
                return Err(error(
                    &format!("{at}.policies"),
                    format!("policies must list 1 to {MAX_POLICIES} policies"),
                ));
            }
            let mut out: Vec<(String, Spec)> = Vec::with_capacity(policies.len());
            let several = policies.len() > 1;
            for (i, policy) in policies.into_iter().enumerate() {
                let here = format!("{at}.policies[{i}]");
                let name = match (&policy.name, several) {
                    (Some(name), _) => {
                        validate_part_name(name).map_err(|m| error(&format!("{here}.name"), m))?;
                        format!("{base}.{name}")
                    }
                    (None, false) => base.to_string(),
                    (None, true) => {
                        return Err(error(
                            &format!("{here}.name"),
                            "each of several policies needs a name",
                        ))
                    }
                };
                if out.iter().any(|(n, _)| *n == name) {
                    return Err(error(
                        &format!("{here}.name"),
                        "policy names must be unique",
                    ));
                }
                let spec = validate_spec(
                    policy.limit,
                    &policy.window,
                    policy.algorithm.as_deref(),
                    policy.burst,
                    &here,
                )?;
                out.push((name, spec));
            }
            Ok(out)
        }
    }
}

fn validate_spec(
    limit: u64,
    window: &str,
    algorithm: Option<&str>,
    burst: Option<u64>,
    at: &str,
) -> Result<Spec, ConfigError> {
    let window_ms = parse_ms(window).map_err(|m| error(&format!("{at}.window"), m))?;
    let policy = Policy::new(limit, window_ms).map_err(|e| {
        let name = if e.field() == "limit" {
            "limit"
        } else {
            "window"
        };
        error(&format!("{at}.{name}"), e.to_string())
    })?;
    if burst.is_some() && algorithm != Some("gcra") {
        return Err(error(
            &format!("{at}.burst"),
            "burst applies to algorithm = \"gcra\" only",
        ));
    }
    match algorithm {
        None | Some("sliding_log") => Ok(Spec::SlidingLog(policy)),
        Some("fixed_window") => Ok(Spec::FixedWindow(policy)),
        Some("gcra") => {
            let max_burst = burst.unwrap_or(limit - 1);
            GcraPolicy::new(max_burst, limit, window_ms)
                .map(Spec::Gcra)
                .map_err(|_| {
                    error(
                        &format!("{at}.burst"),
                        format!(
                            "burst must be a whole number from 0 to {MAX_BURST}, got {max_burst}"
                        ),
                    )
                })
        }
        Some(other) => Err(error(
            &format!("{at}.algorithm"),
            format!(
                "{other:?} is not an algorithm: use \"sliding_log\", \"fixed_window\" or \"gcra\""
            ),
        )),
    }
}

fn validate_ban(raw: RawBan, at: &str) -> Result<RuleBan, ConfigError> {
    let ms = |text: &str, name: &str| parse_ms(text).map_err(|m| error(&format!("{at}.{name}"), m));
    let within = ms(&raw.within, "within")?;
    let duration = ms(&raw.duration, "for")?;
    let max = match &raw.max {
        Some(max) => ms(max, "max")?,
        None => duration,
    };
    let policy = BanPolicy::new(
        raw.after,
        within,
        duration,
        raw.multiplier.unwrap_or(1),
        max,
    )
    .map_err(|e| error(&format!("{at}.{}", e.field), e.message))?;
    let status = match raw.status {
        None | Some(429) => 429,
        Some(403) => 403,
        Some(other) => {
            return Err(error(
                &format!("{at}.status"),
                format!("status must be 429 or 403, got {other}"),
            ))
        }
    };
    Ok(RuleBan { policy, status })
}

/// Every part a key names must be something the rule can provide.
fn check_key_parts(
    key: &KeySpec,
    path: &Pattern,
    has_action: bool,
    at: &str,
) -> Result<(), ConfigError> {
    for part in key.parts() {
        match part {
            Part::Param(name) if !path.has_param(name) => {
                return Err(error(
                    at,
                    format!(
                        "the key uses path parameter {name:?}, which match.path does not capture"
                    ),
                ))
            }
            Part::Action if !has_action => {
                return Err(error(
                    at,
                    "the key uses {action}, and the rule sets no action",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Rule ids name key objects (`rule:<id>.<tier>:<key>`) and policies
/// (`<id>.<policy>`), so they hold no `.` or `:`; `_` starts Sluice's own
/// names.
/// `when`: `"registered"`, `"anonymous"`, or a claim's values:
/// `{ claim = "plan", in = ["pro", "team"] }` or `{ claim = "plan", equals = "pro" }`.
fn validate_when(raw: Option<serde_json::Value>, field: &str) -> Result<When, ConfigError> {
    use serde_json::Value;
    let classes = "use \"registered\" (a valid JWT), \"anonymous\", or a claim's values such as { claim = \"plan\", in = [\"pro\", \"team\"] }";
    let object = match raw {
        None => return Ok(When::Always),
        Some(Value::String(word)) => {
            return match word.as_str() {
                "registered" => Ok(When::Registered),
                "anonymous" => Ok(When::Anonymous),
                other => Err(error(
                    field,
                    format!("{other:?} is not a caller class: {classes}"),
                )),
            }
        }
        Some(Value::Object(object)) => object,
        Some(_) => {
            return Err(error(
                field,
                format!("when must be a word or a table: {classes}"),
            ))
        }
    };
    if let Some(unknown) = object
        .keys()
        .find(|k| !["claim", "in", "equals"].contains(&k.as_str()))
    {
        return Err(error(
            &format!("{field}.{unknown}"),
            "unknown field: a claim tier takes claim and in (or equals)",
        ));
    }
    let name = match object.get("claim") {
        Some(Value::String(name)) if !name.is_empty() && name.len() <= 64 => name.clone(),
        _ => {
            return Err(error(
                &format!("{field}.claim"),
                "claim must name the JWT claim to compare, e.g. \"plan\"",
            ))
        }
    };
    let listed = match (object.get("in"), object.get("equals")) {
        (Some(Value::Array(values)), None) => values.clone(),
        (None, Some(value)) => vec![value.clone()],
        (Some(_), Some(_)) => {
            return Err(error(
                &format!("{field}.equals"),
                "give in or equals, not both",
            ))
        }
        (Some(_), None) => {
            return Err(error(&format!("{field}.in"), "in must be a list of values"))
        }
        (None, None) => {
            return Err(error(
                &format!("{field}.in"),
                "a claim tier needs the values it is for: in = [...] or equals = ...",
            ))
        }
    };
    let key = if object.contains_key("in") {
        "in"
    } else {
        "equals"
    };
    if listed.is_empty() || listed.len() > 64 {
        return Err(error(&format!("{field}.{key}"), "list 1 to 64 values"));
    }
    let mut values = Vec::with_capacity(listed.len());
    for value in listed {
        match value {
            Value::String(s) if !s.is_empty() => values.push(s),
            Value::Number(n) if n.is_i64() || n.is_u64() => values.push(n.to_string()),
            other => {
                return Err(error(
                    &format!("{field}.{key}"),
                    format!(
                        "{} is not a claim value: use non-empty strings or whole numbers",
                        json_text(&other)
                    ),
                ))
            }
        }
    }
    Ok(When::Claim { name, values })
}

fn validate_rule_id(id: &str) -> Result<(), String> {
    if is_part_name(id) && !id.starts_with('_') {
        Ok(())
    } else {
        Err(format!(
            "{id:?} is not a valid rule id: use 1 to {MAX_NAME_BYTES} letters, digits, \"-\" or \"_\", not starting with \"_\""
        ))
    }
}

/// 1 to [`MAX_NAME_BYTES`] of `A-Z a-z 0-9 - _`.
fn is_part_name(name: &str) -> bool {
    (1..=MAX_NAME_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Tier and policy names join rule ids in policy names
/// (`<rule>.<tier>.<policy>`) and object names (`rule:<rule>.<tier>:<key>`),
/// so like rule ids they hold no `.` or `:`: with them, `a` + `b.c` and
/// `a.b` + `c` would be one name.
fn validate_part_name(name: &str) -> Result<(), String> {
    if is_part_name(name) {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a valid name: use 1 to {MAX_NAME_BYTES} letters, digits, \"-\" or \"_\" (no \".\" or \":\", which separate the parts of policy names)"
        ))
    }
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

/// `PUT {prefix}/admin/keys/{rule}/{key}/override` as sent: the limits,
/// or `"unlimited": true`, with `for` and `reason`. The admin API reads it
/// like any API body; [`parse_override`] checks it against the tier.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideRequest {
    limit: Option<u64>,
    window: Option<String>,
    algorithm: Option<String>,
    burst: Option<u64>,
    policies: Option<Vec<RawPolicy>>,
    unlimited: Option<bool>,
    #[serde(rename = "for")]
    lasts: Option<String>,
    reason: Option<String>,
}

/// An override as the admin API takes it, validated like the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverrideBody {
    /// Named as the tier names its policies; empty for unlimited.
    pub policies: Vec<(String, Spec)>,
    pub for_ms: Option<u64>,
    pub reason: String,
}

/// Parses an override for `tier`. An override may change a policy's limit
/// (and a GCRA burst), and add policies of its own, but not a policy's
/// window or algorithm: admissions logged under one window would be
/// re-read through another, and a log read through a shorter window
/// forgets what a longer one counts again. Errors name the body's field.
pub fn parse_override(raw: OverrideRequest, tier: &Tier) -> Result<OverrideBody, ConfigError> {
    let reason = raw.reason.unwrap_or_default();
    if reason.len() > MAX_OVERRIDE_REASON_BYTES || reason.chars().any(char::is_control) {
        return Err(error(
            "reason",
            format!(
                "reason holds at most {MAX_OVERRIDE_REASON_BYTES} bytes and no control characters"
            ),
        ));
    }
    let for_ms = raw
        .lasts
        .map(|text| {
            let ms = parse_ms(&text).map_err(|m| error("for", m))?;
            if (1..=MAX_OVERRIDE_MS).contains(&ms) {
                Ok(ms)
            } else {
                Err(error(
                    "for",
                    format!("for must be from 1 ms to {} days", MAX_OVERRIDE_MS / DAY_MS),
                ))
            }
        })
        .transpose()?;
    let limits = RawLimits {
        limit: raw.limit,
        window: raw.window,
        algorithm: raw.algorithm,
        burst: raw.burst,
        policies: raw.policies,
    };
    let given = limits.limit.is_some() || limits.window.is_some() || limits.policies.is_some();
    let policies = match raw.unlimited {
        Some(true) if given => {
            return Err(error("unlimited", "give unlimited or limits, not both"));
        }
        Some(true) => Vec::new(),
        Some(false) | None => {
            let policies = validate_limits(limits, tier.scope.id(), "")
                .map_err(|e| error(e.field.trim_start_matches('.'), e.message))?;
            check_same_shape(&policies, &tier.policies)?;
            policies
        }
    };
    Ok(OverrideBody {
        policies,
        for_ms,
        reason,
    })
}

/// The window a policy was configured with (GCRA's period, not the refill
/// time its limit and burst make).
fn configured_window(spec: &Spec) -> u64 {
    match spec {
        Spec::Gcra(policy) => policy.period_ms(),
        Spec::SlidingLog(_) | Spec::FixedWindow(_) => spec.window_ms(),
    }
}

/// Refuses a policy whose name the tier uses with another window or
/// algorithm; see [`parse_override`].
fn check_same_shape(
    policies: &[(String, Spec)],
    configured: &[(String, Spec)],
) -> Result<(), ConfigError> {
    let several = policies.len() > 1;
    for (i, (name, spec)) in policies.iter().enumerate() {
        let Some((_, held)) = configured.iter().find(|(n, _)| n == name) else {
            continue;
        };
        let field = |f: &str| {
            if several {
                format!("policies[{i}].{f}")
            } else {
                f.to_string()
            }
        };
        if std::mem::discriminant(held) != std::mem::discriminant(spec) {
            return Err(error(
                &field("algorithm"),
                format!("policy {name:?} keeps its algorithm; an override changes its limit, or adds a policy under another name"),
            ));
        }
        if configured_window(held) != configured_window(spec) {
            return Err(error(
                &field("window"),
                format!("policy {name:?} keeps its window of {} ms; an override changes its limit, or adds a policy under another name", configured_window(held)),
            ));
        }
    }
    Ok(())
}

/// A JSON value as an error message quotes it: compact, as `{value}` would
/// write it, but through `serde_json::to_string`, the writer the responses
/// use, rather than `Value`'s `Display` with its pretty-printer.
fn json_text(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
