//! Tiers: which callers a rule's limits are for (registered, anonymous, a
//! plan from a JWT claim), and the key and policies each tier has.

use serde_json::Value;

use super::names::validate_part_name;
use super::policies::{validate_limits, RawLimits, RawPolicy};
use super::{error, json_text, ConfigError};
use crate::from_tree;
use crate::http::jwt::Claims;
use crate::http::key::{KeySpec, Part};
use crate::limit::Spec;
use crate::objects::name::Scope;

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

from_tree! {
    pub(super) struct RawTier {
        name: String = required "name",
        when: Option<Value> = optional "when",
        key: Option<String> = optional "key",
        limit: Option<u64> = optional "limit",
        window: Option<String> = optional "window",
        algorithm: Option<String> = optional "algorithm",
        burst: Option<u64> = optional "burst",
        policies: Option<Vec<RawPolicy>> = optional "policies",
    }
}

/// The tiers of rule `rule_id`; `needs_refund` says why their policies must
/// give units back ([`Spec::refunds`](crate::limit::Spec::refunds)), when
/// the rule's own layer takes a reservation.
pub(super) fn validate_tiers(
    raw: Vec<RawTier>,
    rule_key: Option<&str>,
    rule_id: &str,
    needs_refund: Option<&'static str>,
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
            needs_refund,
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

/// `when`: `"registered"`, `"anonymous"`, or a claim's values:
/// `{ claim = "plan", in = ["pro", "team"] }` or `{ claim = "plan", equals = "pro" }`.
fn validate_when(raw: Option<Value>, field: &str) -> Result<When, ConfigError> {
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
