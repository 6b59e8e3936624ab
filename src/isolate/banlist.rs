//! The isolate's copy of the operators' manual bans, which apply on every
//! rule without an object call: a hub sends the list back with every report
//! ([`crate::isolate::report`]) and the isolate applies its own admin calls
//! at once. A failed report keeps the last list, so bans never silently stop.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::http::admin::ban_network;
use crate::http::cidr::Cidr;

/// The most manual bans there may be at once, so that the list every
/// isolate holds and receives stays small; it grows only with operators'
/// calls, never with attacker input.
pub const MAX_MANUAL_BANS: usize = 1_000;

/// The `source` of a ban an operator made.
pub const MANUAL: &str = "manual";

crate::wire! {
    /// A ban as the hubs list it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct BanRecord {
        pub key: String,
        pub until_ms: u64,
        pub reason: String,
        /// `manual`, or the scope of the rule whose key object banned the key.
        pub source: String,
        /// When the ban started: the operator's call, or the decision that
        /// started it (0 from an isolate of an earlier version: the hub that
        /// receives it takes its own time; 0 in a hub's list of an earlier
        /// version: unknown).
        pub started_ms: u64 => Default::default(),
    }
}

/// The manual bans an isolate applies, indexed for the check every
/// request makes: a ban on a key or an address is one hash lookup; a ban on
/// a network (`10.0.0.0/8`, `2001:db8::/32`) is found by masking the
/// client's address to each prefix length some ban uses and looking that
/// network up, so a check costs one lookup per distinct length (a handful
/// at most in practice, 162 in theory), never one per ban.
#[derive(Debug, Default)]
pub struct BanList {
    /// By key; a network's ban by the network as [`Cidr`] writes it.
    bans: HashMap<String, BanRecord>,
    /// The (family, prefix length) pairs network bans use, each with how
    /// many bans use it.
    shapes: Vec<((bool, u8), usize)>,
}

/// The name a ban on `key` is held under: a network as [`Cidr`] writes it
/// (so that a masked address finds it), any other key as it is.
fn held_as(key: &str) -> (String, Option<Cidr>) {
    match ban_network(key) {
        Some(network) => (network.to_string(), Some(network)),
        None => (key.to_string(), None),
    }
}

impl BanList {
    pub fn new() -> BanList {
        BanList::default()
    }

    /// The first active ban on the client's address `ip` (any network
    /// holding it) or on one of `keys` (the client's network as rules key
    /// it, a rule's key).
    pub fn find(&self, ip: Option<IpAddr>, keys: &[&str], now_ms: u64) -> Option<&BanRecord> {
        let active = |key: &str| self.bans.get(key).filter(|ban| ban.until_ms > now_ms);
        if let Some(ban) = keys.iter().find_map(|key| active(key)) {
            return Some(ban);
        }
        let ip = ip?.to_canonical();
        self.shapes
            .iter()
            .filter(|((v6, _), _)| *v6 == ip.is_ipv6())
            .find_map(|&((_, len), _)| active(&Cidr::holding(ip, len).to_string()))
    }

    /// Replaces the list with a hub's manual bans.
    pub fn replace(&mut self, records: Vec<BanRecord>, now_ms: u64) {
        *self = BanList::new();
        let active = records
            .into_iter()
            .filter(|r| r.source == MANUAL && r.until_ms > now_ms)
            .take(MAX_MANUAL_BANS);
        for record in active {
            self.insert(record);
        }
    }

    pub fn insert(&mut self, record: BanRecord) {
        let (held, network) = held_as(&record.key);
        let new = self.bans.insert(held, record).is_none();
        if let Some(shape) = network.map(|n| n.shape()).filter(|_| new) {
            match self.shapes.iter_mut().find(|(s, _)| *s == shape) {
                Some((_, uses)) => *uses += 1,
                None => self.shapes.push((shape, 1)),
            }
        }
    }

    pub fn remove(&mut self, key: &str) {
        let (held, network) = held_as(key);
        if self.bans.remove(&held).is_none() {
            return;
        }
        if let Some(shape) = network.map(|n| n.shape()) {
            if let Some(at) = self.shapes.iter().position(|(s, _)| *s == shape) {
                self.shapes[at].1 -= 1;
                if self.shapes[at].1 == 0 {
                    self.shapes.swap_remove(at);
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.bans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bans.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ban(key: &str, until_ms: u64, source: &str) -> BanRecord {
        BanRecord {
            key: key.into(),
            until_ms,
            reason: "r".into(),
            source: source.into(),
            started_ms: 0,
        }
    }

    #[test]
    fn finds_active_manual_bans_among_candidates() {
        let mut list = BanList::new();
        list.replace(
            vec![
                ban("203.0.113.9", 5000, "manual"),
                ban("k", 5000, "rule:api"),
                ban("old", 10, "manual"),
            ],
            100,
        );
        assert_eq!(
            list.find(None, &["x", "203.0.113.9"], 100).unwrap().key,
            "203.0.113.9"
        );
        assert!(
            list.find(None, &["k"], 100).is_none(),
            "automatic bans live in their key objects"
        );
        assert!(list.find(None, &["old"], 100).is_none());
        assert!(
            list.find(None, &["203.0.113.9"], 5000).is_none(),
            "it ends at until"
        );
        list.insert(ban("alice", 9000, "manual"));
        assert!(list.find(None, &["alice"], 100).is_some());
        list.remove("alice");
        assert!(list.find(None, &["alice"], 100).is_none());
    }

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().unwrap())
    }

    #[test]
    fn a_network_ban_holds_every_address_inside_it_and_no_other() {
        let mut list = BanList::new();
        list.insert(ban("10.0.0.0/8", 5000, "manual"));
        list.insert(ban("2001:db8::/32", 5000, "manual"));
        list.insert(ban("192.0.2.0/24", 5000, "manual"));
        for inside in [
            "10.0.0.0",
            "10.255.255.255",
            "::ffff:10.1.2.3",
            "192.0.2.200",
        ] {
            assert!(list.find(ip(inside), &[], 100).is_some(), "{inside}");
        }
        for inside in ["2001:db8::", "2001:db8:ffff:ffff::1"] {
            let found = list.find(ip(inside), &[], 100).unwrap();
            assert_eq!(found.key, "2001:db8::/32", "{inside}");
        }
        for outside in [
            "11.0.0.0",
            "9.255.255.255",
            "2001:db9::",
            "2001:db7::1",
            "::a00:1",
        ] {
            assert!(list.find(ip(outside), &[], 100).is_none(), "{outside}");
        }
        assert!(list.find(ip("10.1.1.1"), &[], 5000).is_none(), "ended");
        list.remove("10.0.0.0/8");
        assert!(list.find(ip("10.1.1.1"), &[], 100).is_none(), "lifted");
        assert!(
            list.find(ip("192.0.2.1"), &[], 100).is_some(),
            "others stay"
        );
        list.remove("192.0.2.0/24");
        list.remove("2001:db8::/32");
        assert!(list.shapes.is_empty() && list.is_empty());
    }

    #[test]
    fn a_ban_on_a_networks_text_is_not_a_key_ban_elsewhere() {
        let mut list = BanList::new();
        list.insert(ban("10.0.0.0/8", 5000, "manual"));
        list.insert(ban("user/42", 5000, "manual"));
        assert!(
            list.find(None, &["user/42"], 100).is_some(),
            "a key with a slash"
        );
        assert!(list.find(ip("10.0.0.1"), &["user/42"], 100).is_some());
        assert_eq!(list.shapes, [((false, 8), 1)]);
    }

    #[test]
    fn a_network_written_otherwise_is_held_as_parsed() {
        let mut list = BanList::new();
        list.insert(ban("2001:DB8::/32", 5000, "manual"));
        assert_eq!(
            list.find(ip("2001:db8::1"), &[], 100).unwrap().key,
            "2001:DB8::/32",
            "the record keeps its text"
        );
        list.remove("2001:db8::/32");
        assert!(list.find(ip("2001:db8::1"), &[], 100).is_none());
        assert!(list.is_empty() && list.shapes.is_empty());
    }

    #[test]
    fn replacing_rebuilds_the_index() {
        let mut list = BanList::new();
        list.insert(ban("10.0.0.0/8", 5000, "manual"));
        list.replace(vec![ban("172.16.0.0/12", 5000, "manual")], 100);
        assert!(list.find(ip("10.0.0.1"), &[], 100).is_none());
        assert!(list.find(ip("172.31.255.255"), &[], 100).is_some());
        assert_eq!(list.shapes.len(), 1);
    }
}
