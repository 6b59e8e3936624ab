//! A rule's or tier's policies: one in shorthand (`limit`, `window`) or
//! several (`policies`), each an algorithm with its limit and window.

use super::names::validate_part_name;
use super::{error, ConfigError};
use crate::bounds::MAX_POLICIES;
use crate::from_tree;
use crate::input::duration::parse_ms;
use crate::limit::gcra::MAX_BURST;
use crate::limit::{Policy, Spec, Unnamed};

/// One policy in shorthand (`limit`, `window`) or several (`policies`).
pub(super) struct RawLimits {
    pub(super) limit: Option<u64>,
    pub(super) window: Option<String>,
    pub(super) algorithm: Option<String>,
    pub(super) burst: Option<u64>,
    pub(super) policies: Option<Vec<RawPolicy>>,
    /// Why a policy that cannot give a unit back ([`Spec::refunds`]) may
    /// not be used here, if it may not: a layer that takes a reservation.
    pub(super) needs_refund: Option<&'static str>,
}

from_tree! {
    pub(super) struct RawPolicy {
        name: Option<String> = optional "name",
        limit: u64 = required "limit",
        window: String = required "window",
        algorithm: Option<String> = optional "algorithm",
        burst: Option<u64> = optional "burst",
    }
}

/// The policies of a rule or tier, named for the RateLimit headers:
/// `base` for a single unnamed policy, `base.name` for named ones.
pub(super) fn validate_limits(
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
            let algorithm = Algo {
                name: raw.algorithm.as_deref(),
                burst: raw.burst,
                needs_refund: raw.needs_refund,
            };
            let spec = validate_spec(limit, &window, algorithm, at)?;
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
                let algorithm = Algo {
                    name: policy.algorithm.as_deref(),
                    burst: policy.burst,
                    needs_refund: raw.needs_refund,
                };
                let spec = validate_spec(policy.limit, &policy.window, algorithm, &here)?;
                out.push((name, spec));
            }
            Ok(out)
        }
    }
}

/// A policy's algorithm as written, its burst, and why it must give units
/// back here, if it must.
struct Algo<'a> {
    name: Option<&'a str>,
    burst: Option<u64>,
    needs_refund: Option<&'static str>,
}

/// A duration's error quoting the text written (`got "60d"`), not the
/// milliseconds it was read as.
pub(super) fn quoting(message: &str, written: &str) -> String {
    let bound = message.split(", got ").next().unwrap_or(message);
    format!("{bound}, got {written:?}")
}

fn validate_spec(
    limit: u64,
    window: &str,
    algorithm: Algo<'_>,
    at: &str,
) -> Result<Spec, ConfigError> {
    let Algo {
        name: algorithm,
        burst,
        needs_refund,
    } = algorithm;
    let window_ms = parse_ms(window).map_err(|m| error(&format!("{at}.window"), m))?;
    let policy = Policy::new(limit, window_ms).map_err(|e| match e.field() {
        "limit" => error(&format!("{at}.limit"), e.to_string()),
        _ => error(
            &format!("{at}.window"),
            quoting("window must be from 1 ms to 30 days", window),
        ),
    })?;
    if burst.is_some() && algorithm != Some("gcra") {
        return Err(error(
            &format!("{at}.burst"),
            "burst applies to algorithm = \"gcra\" only",
        ));
    }
    let spec = Spec::named(algorithm, policy, burst).map_err(|e| match e {
        Unnamed::Burst(max_burst) => error(
            &format!("{at}.burst"),
            format!("burst must be a whole number from 0 to {MAX_BURST}, got {max_burst}"),
        ),
        Unnamed::Algorithm => error(
            &format!("{at}.algorithm"),
            format!(
                "{:?} is not an algorithm: use \"sliding_log\", \"fixed_window\" or \"gcra\"",
                algorithm.unwrap_or_default()
            ),
        ),
    })?;
    match needs_refund {
        Some(why) if !spec.refunds() => Err(error(&format!("{at}.algorithm"), why)),
        _ => Ok(spec),
    }
}
