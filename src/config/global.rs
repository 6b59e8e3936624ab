//! `scope = "global"`: one quota every caller shares, split across parts.

use super::{error, ConfigError};
use crate::limit::split::{share_spec, MAX_PARTS};
use crate::limit::Spec;

/// A quota every caller shares, possibly split across several objects
/// (`split = K`) so that no single Durable Object carries all of it.
#[derive(Debug, Clone)]
pub struct Global {
    /// Each part's policies, with limits cut to the part's share; one entry
    /// when the quota is not split.
    pub parts: Vec<Vec<(String, Spec)>>,
    /// `sold_out = "close"`: the rule closes itself once the whole quota
    /// is used (`crate::ledger::stock`).
    pub sold_out: bool,
}

/// Why a shadow rule takes no `sold_out`.
pub(super) const SHADOW_SOLD_OUT: &str =
    "a shadow rule refuses nothing, so it cannot close itself when sold out: leave sold_out out, or shadow";

/// What `scope` and `split` must agree with.
pub(super) struct RawScope {
    pub(super) scope: Option<String>,
    pub(super) split: Option<u64>,
    pub(super) key: bool,
    pub(super) tiers: bool,
    pub(super) ban: bool,
    pub(super) concurrency: bool,
    pub(super) sold_out: Option<String>,
}

pub(super) fn validate_scope(
    raw: RawScope,
    policies: &[(String, Spec)],
    at: &str,
) -> Result<Option<Global>, ConfigError> {
    let field = |name: &str| format!("{at}.{name}");
    match raw.scope.as_deref() {
        None | Some("key") => {
            let (name, does) = match (raw.split, raw.sold_out) {
                (None, None) => return Ok(None),
                (Some(_), _) => ("split", "split divides a shared quota"),
                (None, Some(_)) => ("sold_out", "sold_out closes a shared quota once it is used"),
            };
            return Err(error(
                &field(name),
                format!("{does}: it needs scope = \"global\""),
            ));
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
    let shares = divide(policies, parts).map_err(|name| {
        error(
            &field("split"),
            format!(
                "policy {name} cannot be split into {parts} parts: each part needs a share of at least 1 and a sliding_log or fixed_window algorithm"
            ),
        )
    })?;
    let sold_out = match raw.sold_out.as_deref() {
        None => false,
        Some("close") if policies.len() == 1 && !matches!(policies[0].1, Spec::Gcra(_)) => true,
        Some("close") => return Err(error(
            &field("sold_out"),
            "sold_out needs a quota of one limit (limit and window, sliding_log or fixed_window): it closes the rule once that limit is used",
        )),
        Some(other) => return Err(error(
            &field("sold_out"),
            format!("{other:?} is not a choice: use \"close\" (the rule closes itself, 410 closed, once the whole quota is used) or leave it out"),
        )),
    };
    Ok(Some(Global {
        parts: shares,
        sold_out,
    }))
}

/// `policies` divided over `parts` parts, each policy's limit cut to each
/// part's share ([`share_spec`]); one part holds them whole. The config's
/// split and an operator's override of the whole quota divide the same
/// way. Fails with the name of a policy that cannot be divided.
pub fn divide(policies: &[(String, Spec)], parts: u32) -> Result<Vec<Vec<(String, Spec)>>, String> {
    let mut shares = vec![Vec::with_capacity(policies.len()); parts as usize];
    for (name, spec) in policies {
        for (index, part) in (0..parts).zip(shares.iter_mut()) {
            let cut = if parts == 1 {
                Some(*spec)
            } else {
                share_spec(spec, parts, index)
            };
            part.push((name.clone(), cut.ok_or_else(|| name.clone())?));
        }
    }
    Ok(shares)
}
