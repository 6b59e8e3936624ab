//! Stacked limits (`also`): more limits on a rule's requests, each with a
//! key or scope of its own, e.g. one per user under one global ceiling:
//!
//! ```toml
//! also = [ { id = "all", scope = "global", split = 8, limit = 10000, window = "1m" } ]
//! ```
//!
//! A request is admitted only when every layer admits. Layers are asked in
//! one order, whatever the order written: those with a key first (the
//! rule's own, then `also` as written), then the global ones, so that the
//! cheap per-caller layer refuses first and a shared quota sees only what
//! passed it. Every layer but the last admits as a reservation, which is
//! kept once all have admitted and refunded when a later one refuses; a
//! layer that counts by answer reserves too and is settled by the origin's
//! status. GCRA cannot give a unit back, so only a last layer that counts
//! every request may use it.

use serde_json::Value;

use super::count::{parse_count, CountedStatuses};
use super::global::{validate_scope, Global, RawScope, SHADOW_SOLD_OUT};
use super::names::validate_part_name;
use super::pattern::{check_key_parts, Pattern};
use super::policies::{validate_limits, RawLimits, RawPolicy};
use super::tier::Tier;
use super::{error, ConfigError, RuleBan};
use crate::bounds::MAX_LAYERS;
use crate::from_tree;
use crate::http::key::KeySpec;
use crate::limit::Spec;
use crate::objects::name::Scope;

/// One of a rule's `also` layers.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Unique in its rule; `<rule>.<id>` names its policies and the
    /// objects that hold its keys (`rule:<rule>.<id>:<key>`).
    pub id: String,
    /// What its callers are counted by; `None` for a quota every caller
    /// shares.
    pub key: Option<KeySpec>,
    pub policies: Vec<(String, Spec)>,
    /// Set when every caller shares it (`scope = "global"`).
    pub global: Option<Global>,
    /// Which of the origin's answers count; `None` counts every request.
    /// Inherited from the rule's `count` unless the layer says.
    pub count: Option<CountedStatuses>,
    pub scope: Scope,
}

/// One layer a request of a rule is asked about: the rule's own (its
/// tier's policies and key, its ban, concurrency, global quota and
/// `count`) or one of `also`. [`Rule::levels`] lists them in the order
/// they are asked.
#[derive(Debug, Clone, Copy)]
pub struct Level<'a> {
    pub scope: &'a Scope,
    /// `None` for a quota every caller shares.
    pub key: Option<&'a KeySpec>,
    pub policies: &'a [(String, Spec)],
    pub global: Option<&'a Global>,
    pub count: Option<&'a CountedStatuses>,
    /// The rule's ban, which counts the refusals of its own layer only.
    pub ban: Option<&'a RuleBan>,
    /// Whether this is the rule's own layer, where its concurrency limit
    /// applies.
    pub own: bool,
}

impl Level<'_> {
    /// Each part's policies when this layer's global quota is split in two
    /// or more.
    pub fn split_parts(&self) -> Option<&[Vec<(String, Spec)>]> {
        self.global
            .map(|g| g.parts.as_slice())
            .filter(|parts| parts.len() > 1)
    }
}

/// The order layers are asked in, `None` for the rule's own and `Some(j)`
/// for `also[j]`: layers with a key first, then global ones, each in the
/// order written with the rule's own first. A request refused per caller
/// never reaches a shared quota, whose parts carry everyone's traffic.
pub fn ask_order(own_global: bool, also_global: &[bool]) -> Vec<Option<usize>> {
    let class = |global: bool| {
        let own = (own_global == global).then_some(None);
        let also = also_global
            .iter()
            .enumerate()
            .filter(move |(_, g)| **g == global)
            .map(|(j, _)| Some(j));
        own.into_iter().chain(also)
    };
    class(false).chain(class(true)).collect()
}

/// Why a layer's policies must give units back ([`Spec::refunds`]): it
/// takes a reservation.
pub(super) const RESERVING_NEEDS_REFUND: &str = "GCRA cannot give a unit back, so only the layer asked last (layers with a key are asked first, global ones last) may use it, and only if it counts every request; use sliding_log or fixed_window";

from_tree! {
    pub(super) struct RawLayer {
        id: String = required "id",
        key: Option<String> = optional "key",
        scope: Option<String> = optional "scope",
        split: Option<u64> = optional "split",
        limit: Option<u64> = optional "limit",
        window: Option<String> = optional "window",
        algorithm: Option<String> = optional "algorithm",
        burst: Option<u64> = optional "burst",
        policies: Option<Vec<RawPolicy>> = optional "policies",
        count: Option<Value> = optional "count",
        sold_out: Option<String> = optional "sold_out",
    }
}

impl RawLayer {
    /// Whether the layer is a quota every caller shares, as written (its
    /// scope is validated later).
    fn global(&self) -> bool {
        self.scope.as_deref() == Some("global")
    }
}

/// The rule whose layers are validated (its own fields are, already):
/// what layers inherit from it and must not collide with.
pub(super) struct Owner<'r> {
    pub(super) id: &'r str,
    /// Its path pattern, for the path parameters a layer's key may use.
    pub(super) path: &'r Pattern,
    pub(super) tiers: &'r [Tier],
    /// What its own layer counts, and a layer without `count` with it.
    pub(super) count: Option<&'r CountedStatuses>,
    pub(super) concurrency: bool,
    pub(super) global: bool,
    pub(super) action: bool,
    /// A shadow rule, whose layers cannot close once sold out.
    pub(super) shadow: bool,
}

/// The order of a rule's layers from its raw fields, for what must be
/// known before they are validated: which layer is asked last.
pub(super) fn raw_order(own_scope: Option<&str>, also: &[RawLayer]) -> Vec<Option<usize>> {
    let global: Vec<bool> = also.iter().map(RawLayer::global).collect();
    ask_order(own_scope == Some("global"), &global)
}

/// Validates `also`. The rule's own fields are validated already (its
/// policies against [`RESERVING_NEEDS_REFUND`] by the order [`raw_order`] gave).
pub(super) fn validate_also(
    raw: Vec<RawLayer>,
    owner: &Owner<'_>,
    at: &str,
) -> Result<Vec<Layer>, ConfigError> {
    let field = format!("{at}.also");
    if raw.is_empty() || raw.len() >= MAX_LAYERS {
        return Err(error(
            &field,
            format!(
                "also must list 1 to {} layers (each is one more call on a request's path), or be left out",
                MAX_LAYERS - 1
            ),
        ));
    }
    if owner.concurrency {
        return Err(error(
            &field,
            "a rule with a concurrency limit takes no also layers: its lease and its layers' reservations could not be given back together; limit concurrency on a rule of its own",
        ));
    }
    let own_scope = owner.global.then_some("global");
    let last = raw_order(own_scope, &raw).last().copied().flatten();
    let own_names: Vec<&str> = owner
        .tiers
        .iter()
        .flat_map(|t| &t.policies)
        .map(|(name, _)| name.as_str())
        .collect();
    let mut layers: Vec<Layer> = Vec::with_capacity(raw.len());
    for (j, layer) in raw.into_iter().enumerate() {
        let here = format!("{field}[{j}]");
        let layer = validate_layer(layer, owner, last == Some(j), &here)?;
        let id_field = format!("{here}.id");
        if layers.iter().any(|l| l.id == layer.id) {
            return Err(error(
                &id_field,
                format!("layer id {:?} is used twice", layer.id),
            ));
        }
        if owner
            .tiers
            .iter()
            .any(|t| t.name.as_deref() == Some(&layer.id))
        {
            return Err(error(
                &id_field,
                format!(
                    "{:?} names a tier of this rule; a layer's objects and policies would share its names",
                    layer.id
                ),
            ));
        }
        if let Some((name, _)) = layer
            .policies
            .iter()
            .find(|(name, _)| own_names.contains(&name.as_str()))
        {
            return Err(error(
                &id_field,
                format!("the layer's policy {name:?} has the name of one of the rule's own policies; choose another id"),
            ));
        }
        layers.push(layer);
    }
    Ok(layers)
}

fn validate_layer(
    raw: RawLayer,
    owner: &Owner<'_>,
    last: bool,
    here: &str,
) -> Result<Layer, ConfigError> {
    let field = |name: &str| format!("{here}.{name}");
    validate_part_name(&raw.id).map_err(|m| error(&field("id"), m))?;
    let scope = Scope::rule(owner.id, Some(&raw.id));
    let count = match raw.count {
        None => owner.count.cloned(),
        Some(value) => parse_count(Some(value), &field("count"))?,
    };
    if owner.shadow && raw.sold_out.is_some() {
        return Err(error(&field("sold_out"), SHADOW_SOLD_OUT));
    }
    let reserves = !last || count.is_some();
    let limits = RawLimits {
        limit: raw.limit,
        window: raw.window,
        algorithm: raw.algorithm,
        burst: raw.burst,
        policies: raw.policies,
        needs_refund: reserves.then_some(RESERVING_NEEDS_REFUND),
    };
    let policies = validate_limits(limits, scope.id(), here)?;
    let raw_scope = RawScope {
        scope: raw.scope,
        split: raw.split,
        key: raw.key.is_some(),
        tiers: false,
        ban: false,
        concurrency: false,
        sold_out: raw.sold_out,
    };
    let global = validate_scope(raw_scope, &policies, here)?;
    let key = match (raw.key, &global) {
        (_, Some(_)) => None,
        (Some(text), None) => {
            let key = KeySpec::parse(&text).map_err(|m| error(&field("key"), m))?;
            check_key_parts(&key, owner.path, owner.action, &field("key"))?;
            Some(key)
        }
        (None, None) => {
            return Err(error(
                &field("key"),
                "a layer needs a key of its own (e.g. key = \"ip\") or scope = \"global\"",
            ))
        }
    };
    Ok(Layer {
        id: raw.id,
        key,
        policies,
        global,
        count,
        scope,
    })
}
