//! Which Durable Object holds a key's state. A name is `rule:<scope>:<key>`
//! for a rule's key (`<scope>` being the rule id, or `rule.tier` for a
//! tier) and `api:<key>` for a decision-API key; it is formatted here and
//! nowhere else, so the gate, the decision API and the admin routes cannot
//! drift apart on which object a key lives in.

use std::fmt;

/// How admin routes and stats name the decision API's keys; no rule id can
/// start with `_`, so it never collides with one.
pub const API_SCOPE: &str = "_api";

/// The key of a quota every caller shares.
pub const GLOBAL_KEY: &str = "*";

/// Whose keys an object holds: one rule (or one tier of it), or the
/// decision API.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A rule id, or `rule.tier` for one tier of a rule.
    Rule(String),
    Api,
}

impl Scope {
    /// A rule's scope, or one of its tiers'.
    pub fn rule(id: &str, tier: Option<&str>) -> Scope {
        match tier {
            Some(tier) => Scope::Rule(format!("{id}.{tier}")),
            None => Scope::Rule(id.to_string()),
        }
    }

    /// The scope an admin route or a stats entry names: [`API_SCOPE`], or
    /// a rule id or `rule.tier`.
    pub fn named(id: &str) -> Scope {
        if id == API_SCOPE {
            Scope::Api
        } else {
            Scope::Rule(id.to_string())
        }
    }

    /// The name operators use: the rule id, `rule.tier`, or [`API_SCOPE`].
    pub fn id(&self) -> &str {
        match self {
            Scope::Rule(id) => id,
            Scope::Api => API_SCOPE,
        }
    }

    /// The object that holds `key` in this scope.
    pub fn object(&self, key: &str) -> ObjectName {
        match self {
            Scope::Rule(id) => ObjectName(format!("rule:{id}:{key}")),
            Scope::Api => ObjectName(format!("api:{key}")),
        }
    }

    /// The object of part `part` of a split global quota.
    pub fn part(&self, part: u32) -> ObjectName {
        self.object(&format!("{GLOBAL_KEY}#{part}"))
    }

    /// Part `part` of the split quota `object` is a part of.
    pub fn sibling(object: &str, part: u32) -> Option<ObjectName> {
        let (head, _) = object.rsplit_once('#')?;
        Some(ObjectName(format!("{head}#{part}")))
    }

    /// Which part of this scope's split quota `object` names, if any: the
    /// inverse of [`part`](Self::part).
    pub fn part_of(&self, object: &str) -> Option<u32> {
        let key = match self {
            Scope::Rule(id) => object.strip_prefix("rule:")?.strip_prefix(id.as_str())?,
            Scope::Api => object.strip_prefix("api")?,
        };
        key.strip_prefix(':')?
            .strip_prefix(GLOBAL_KEY)?
            .strip_prefix('#')?
            .parse()
            .ok()
    }
}

/// The label a ban record carries for the scope that started it
/// (`rule:<scope>`), which the hubs store and an unban names again.
impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Rule(id) => write!(f, "rule:{id}"),
            Scope::Api => f.write_str("api"),
        }
    }
}

/// The name a Durable Object is addressed by (`id_from_name`) and the
/// refusal cache is keyed by. Only a [`Scope`] makes one, or
/// [`ObjectName::room_shard`] for a waiting room's shard (in a namespace
/// of its own).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectName(String);

impl crate::json::Write for ObjectName {
    fn write(&self, out: &mut crate::json::Text) {
        out.str(&self.0);
    }
}

impl ObjectName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Shard `shard` of the waiting room of rule `rule`: `room:<rule>#<shard>`.
    pub fn room_shard(rule: &str, shard: u32) -> ObjectName {
        ObjectName(format!("room:{rule}#{shard}"))
    }
}

impl fmt::Display for ObjectName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parts_number_reads_back_from_its_name_in_its_scope_only() {
        let sale = Scope::rule("sale", None);
        assert_eq!(sale.part_of(sale.part(7).as_str()), Some(7));
        assert_eq!(Scope::Api.part_of(Scope::Api.part(3).as_str()), Some(3));
        assert_eq!(
            sale.part_of(Scope::rule("sales", None).part(7).as_str()),
            None
        );
        assert_eq!(
            Scope::rule("sal", None).part_of(sale.part(7).as_str()),
            None
        );
        assert_eq!(sale.part_of(sale.object(GLOBAL_KEY).as_str()), None);
        assert_eq!(sale.part_of("rule:sale:*#x"), None);
    }

    #[test]
    fn names_are_the_ones_objects_already_hold() {
        assert_eq!(
            Scope::rule("api", None).object("1.2.3.4").as_str(),
            "rule:api:1.2.3.4"
        );
        assert_eq!(
            Scope::rule("api", Some("registered")).object("u1").as_str(),
            "rule:api.registered:u1"
        );
        assert_eq!(Scope::Api.object("user:1").as_str(), "api:user:1");
        assert_eq!(
            Scope::rule("sale", None).object(GLOBAL_KEY).as_str(),
            "rule:sale:*"
        );
        assert_eq!(Scope::rule("sale", None).part(3).as_str(), "rule:sale:*#3");
        assert_eq!(ObjectName::room_shard("shop", 7).as_str(), "room:shop#7");
    }

    #[test]
    fn a_scope_round_trips_through_its_id() {
        for scope in [
            Scope::Api,
            Scope::rule("a", None),
            Scope::rule("a", Some("b")),
        ] {
            assert_eq!(Scope::named(scope.id()), scope);
        }
    }

    #[test]
    fn ban_sources_keep_their_label() {
        assert_eq!(Scope::rule("api", None).to_string(), "rule:api");
        assert_eq!(
            Scope::rule("api", Some("free")).to_string(),
            "rule:api.free"
        );
    }
}
