//! One rule: which requests it matches, who the caller is (tiers and keys),
//! and what it allows them (policies, bans, lists, shadow mode, failure
//! policy).

use serde_json::Value;

use super::ban::{validate_ban, RawBan, RuleBan};
use super::concurrency::{validate_concurrency, Concurrency, RawQueue};
use super::count::{validate_count, CountedStatuses};
use super::global::{validate_scope, Global, RawScope, SHADOW_SOLD_OUT};
use super::layers::{
    ask_order, raw_order, validate_also, Layer, Level, Owner, RawLayer, RESERVING_NEEDS_REFUND,
};
use super::names::validate_rule_id;
use super::paths::{validate_paths, RawPaths};
use super::pattern::{check_key_parts, Pattern};
use super::policies::{validate_limits, RawLimits, RawPolicy};
use super::room::{validate_room, RawRoom, WaitingRoom};
use super::tier::{validate_tiers, RawTier, Tier, When};
use super::{error, ConfigError};
use crate::from_tree;
use crate::http::cidr::CidrList;
use crate::http::jwt::Claims;
use crate::http::key::{KeySpec, Part};
use crate::http::path::{PathOptions, RequestPath};
use crate::limit::Spec;
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
    /// Whether a hot key's requests may be admitted in the isolate from an
    /// admission block (`local`, on unless `false`; only where that is
    /// exact, see `gate::plan`).
    pub local: bool,
    pub on_error: OnError,
    /// At most this many of the key's requests at the origin at once.
    pub concurrency: Option<Concurrency>,
    /// Set when every caller shares one quota (`scope = "global"`).
    pub global: Option<Global>,
    /// Set when only some of the origin's answers count (`count`): each
    /// request then takes a reservation, kept or refunded by the answer.
    pub count: Option<CountedStatuses>,
    /// Set when the rule is a waiting room: it then has no tiers, and its
    /// requests go to the room (`crate::room`) instead of key objects.
    pub room: Option<WaitingRoom>,
    /// Stacked limits (`also`), as written; [`Rule::levels`] lists them
    /// with the rule's own in the order they are asked. A room's is its
    /// pre-queue cap.
    pub also: Vec<Layer>,
    /// The id of the waiting room whose session the rule's requests need
    /// (`room`).
    pub behind: Option<String>,
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
    /// The layers a request of `tier` is asked about, in the order they
    /// are asked ([`ask_order`]); one, the rule's own, without `also`.
    pub fn levels<'a>(&'a self, tier: &'a Tier) -> Vec<Level<'a>> {
        let own = Level {
            scope: &tier.scope,
            key: self.global.is_none().then_some(&tier.key),
            policies: &tier.policies,
            global: self.global.as_ref(),
            count: self.count.as_ref(),
            ban: self.ban.as_ref(),
            own: true,
        };
        let global: Vec<bool> = self.also.iter().map(|l| l.global.is_some()).collect();
        ask_order(self.global.is_some(), &global)
            .into_iter()
            .map(|at| match at.and_then(|j| self.also.get(j)) {
                None => own,
                Some(layer) => Level {
                    scope: &layer.scope,
                    key: layer.key.as_ref(),
                    policies: &layer.policies,
                    global: layer.global.as_ref(),
                    count: layer.count.as_ref(),
                    ban: None,
                    own: false,
                },
            })
            .collect()
    }
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

    /// Whether any tier, or any layer's key, needs a JWT verified.
    pub fn uses_jwt(&self) -> bool {
        let claims = |key: &KeySpec| key.parts().any(|p| matches!(p, Part::Claim(_)));
        self.tiers
            .iter()
            .any(|tier| tier.when != When::Always || claims(&tier.key))
            || self.also.iter().filter_map(|l| l.key.as_ref()).any(claims)
    }
}

/// The field of rule `rule` (validated at `at`) that needs a JWT, if one
/// does: the first key with a claim, or the first tier for registered or
/// anonymous callers.
pub(super) fn needs_jwt(rule: &Rule, at: &str) -> Option<String> {
    let tiered = rule.tiers.iter().any(|tier| tier.name.is_some());
    let claims = |key: &KeySpec| key.parts().any(|p| matches!(p, Part::Claim(_)));
    let tier =
        rule.tiers
            .iter()
            .enumerate()
            .find_map(|(i, tier)| match (claims(&tier.key), tiered) {
                (true, true) => Some(format!("{at}.tiers[{i}].key")),
                (true, false) => Some(format!("{at}.key")),
                (false, _) if tier.when != When::Always => Some(format!("{at}.tiers[{i}].when")),
                _ => None,
            });
    let layer = || {
        rule.also
            .iter()
            .position(|l| l.key.as_ref().is_some_and(claims))
            .map(|j| format!("{at}.also[{j}].key"))
    };
    tier.or_else(layer)
}

from_tree! {
    pub(super) struct RawRule {
        id: String = required "id",
        matcher: RawMatch = or_default "match",
        paths: Option<RawPaths> = optional "paths",
        key: Option<String> = optional "key",
        action: Option<String> = optional "action",
        limit: Option<u64> = optional "limit",
        window: Option<String> = optional "window",
        algorithm: Option<String> = optional "algorithm",
        burst: Option<u64> = optional "burst",
        policies: Option<Vec<RawPolicy>> = optional "policies",
        tiers: Option<Vec<RawTier>> = optional "tiers",
        ban: Option<RawBan> = optional "ban",
        allow: Vec<String> = or_default "allow",
        deny: Vec<String> = or_default "deny",
        shadow: bool = or_default "shadow",
        local: Option<bool> = optional "local",
        on_error: Option<String> = optional "on_error",
        concurrency: Option<u64> = optional "concurrency",
        lease_ttl: Option<String> = optional "lease_ttl",
        queue: Option<RawQueue> = optional "queue",
        scope: Option<String> = optional "scope",
        split: Option<u64> = optional "split",
        count: Option<Value> = optional "count",
        waiting_room: Option<RawRoom> = optional "waiting_room",
        also: Option<Vec<RawLayer>> = optional "also",
        sold_out: Option<String> = optional "sold_out",
        room: Option<String> = optional "room",
    }
}

from_tree! {
    #[derive(Default)]
    struct RawMatch {
        path: Option<String> = optional "path",
        methods: Option<Vec<String>> = optional "methods",
    }
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
    let allow =
        CidrList::parse(&raw.allow).map_err(|(i, m)| error(&format!("{at}.allow[{i}]"), m))?;
    let deny = CidrList::parse(&raw.deny).map_err(|(i, m)| error(&format!("{at}.deny[{i}]"), m))?;
    if let Some(room) = raw.waiting_room {
        let set = [
            ("key", raw.key.is_some()),
            ("action", raw.action.is_some()),
            ("limit", raw.limit.is_some()),
            ("window", raw.window.is_some()),
            ("algorithm", raw.algorithm.is_some()),
            ("burst", raw.burst.is_some()),
            ("policies", raw.policies.is_some()),
            ("tiers", raw.tiers.is_some()),
            ("ban", raw.ban.is_some()),
            ("shadow", raw.shadow),
            ("local", raw.local.is_some()),
            ("on_error", raw.on_error.is_some()),
            ("concurrency", raw.concurrency.is_some()),
            ("lease_ttl", raw.lease_ttl.is_some()),
            ("queue", raw.queue.is_some()),
            ("scope", raw.scope.is_some()),
            ("split", raw.split.is_some()),
            ("count", raw.count.is_some()),
            ("also", raw.also.is_some()),
            ("sold_out", raw.sold_out.is_some()),
            ("room", raw.room.is_some()),
        ];
        let set: Vec<&str> = set.iter().filter(|(_, s)| *s).map(|(n, _)| *n).collect();
        let made = validate_room(room, &set, &raw.id, at)?;
        return Ok(Rule {
            room: Some(made.room),
            id: raw.id,
            path,
            paths,
            methods,
            action: None,
            tiers: vec![made.join],
            ban: None,
            allow,
            deny,
            shadow: false,
            local: false,
            on_error: OnError::Deny,
            concurrency: None,
            global: None,
            count: None,
            also: made.also,
            behind: None,
        });
    }
    if raw.action.as_deref() == Some("") {
        return Err(error(&field("action"), "action must not be empty"));
    }
    // Whether the rule's own layer takes a reservation, which GCRA cannot
    // give back: it is not the layer asked last. (Counting by answer is
    // refused with GCRA by `validate_count`, with its own message.)
    let own_reserves = raw
        .also
        .as_deref()
        .is_some_and(|also| raw_order(raw.scope.as_deref(), also).last() != Some(&None));
    let needs_refund = own_reserves.then_some(RESERVING_NEEDS_REFUND);
    let limits = RawLimits {
        limit: raw.limit,
        window: raw.window,
        algorithm: raw.algorithm,
        burst: raw.burst,
        policies: raw.policies,
        needs_refund,
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
            validate_tiers(tiers, raw.key.as_deref(), &raw.id, needs_refund, at)?
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
    if raw.shadow && raw.sold_out.is_some() {
        return Err(error(&field("sold_out"), SHADOW_SOLD_OUT));
    }
    let scope = RawScope {
        scope: raw.scope,
        split: raw.split,
        key: raw.key.is_some(),
        tiers: has_tiers,
        ban: ban.is_some(),
        concurrency: concurrency.is_some(),
        sold_out: raw.sold_out,
    };
    let policies = tiers.first().map_or(&[][..], |tier| &tier.policies);
    let global = validate_scope(scope, policies, at)?;
    // A global rule has no key at all.
    let uses_action = |tier: &Tier| tier.key.parts().any(|part| *part == Part::Action);
    if raw.action.is_some() && (global.is_some() || !tiers.iter().any(uses_action)) {
        return Err(error(
            &field("action"),
            "no key of this rule uses {action}, so the action changes nothing: put {action} in the key (e.g. \"{sub}:{action}\") or leave action out",
        ));
    }
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
        local: raw.local.unwrap_or(true),
        on_error,
        concurrency,
        global,
        count: None,
        room: None,
        also: Vec::new(),
        behind: raw.room,
    };
    let refunds = rule
        .tiers
        .iter()
        .flat_map(|t| &t.policies)
        .all(|(_, spec)| spec.refunds());
    rule.count = validate_count(count_raw, rule.concurrency.is_some(), refunds, at)?;
    if let Some(also) = raw.also {
        let owner = Owner {
            id: &rule.id,
            path: &rule.path,
            tiers: &rule.tiers,
            count: rule.count.as_ref(),
            concurrency: rule.concurrency.is_some(),
            global: rule.global.is_some(),
            action: rule.action.is_some(),
            shadow: rule.shadow,
        };
        rule.also = validate_also(also, &owner, at)?;
    }
    Ok(rule)
}

fn validate_methods(mut methods: Vec<String>) -> Result<Vec<String>, String> {
    if methods.is_empty() {
        return Err(
            "methods must list at least one method, or be left out to match every method".into(),
        );
    }
    for m in &mut methods {
        if m.is_empty() || !m.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(format!("{m:?} is not an HTTP method"));
        }
        m.make_ascii_uppercase();
    }
    Ok(methods)
}
