//! A manual ban as the admin API takes it: whom it names, whom it holds,
//! and its body.

use std::net::IpAddr;

use super::super::body;
use super::super::cidr::{client_network, Cidr};
use super::super::problem::Problem;
use crate::bounds::{DAY_MS, MAX_BAN_MS, MAX_BAN_REASON_BYTES, MAX_KEY_BYTES};
use crate::from_tree;
use crate::input::duration::parse_ms;

/// What a manual ban on `key` must name to refuse that client: an IPv6
/// address stands for its `/ipv6_prefix` group, because that group is what
/// requests are matched by (a ban on one address of it would refuse
/// nobody). A network (`10.0.0.0/8`, `2001:db8::/32`) holds every address
/// inside it, and is written as [`Cidr`] writes it; one with host bits set
/// or a bad prefix is a 400 naming `key`, since a ban that holds nobody
/// must not answer 200. Any other key, an IPv4 address included, is taken
/// as written, up to [`MAX_KEY_BYTES`] (every hub and isolate holds it).
pub fn ban_subject(key: &str, ipv6_prefix: u8) -> Result<String, Problem> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Problem::invalid(
            "key",
            format!("a key is at most {MAX_KEY_BYTES} bytes; a longer one is addressed by its sha256: form"),
        ));
    }
    if let Ok(ip) = key.parse::<IpAddr>() {
        return Ok(match ip.to_canonical() {
            ip @ IpAddr::V6(_) => client_network(ip, ipv6_prefix),
            ip => ip.to_string(),
        });
    }
    match key.split_once('/') {
        Some((address, _)) if address.parse::<IpAddr>().is_ok() => Cidr::parse(key)
            .map(|network| network.to_string())
            .map_err(|why| Problem::invalid("key", format!("not a network to ban: {why}"))),
        _ => Ok(key.to_string()),
    }
}

/// Whether a manual ban on `subject` (as [`ban_subject`] names it) holds a
/// client at `ip`: the network holds it, or the subject is its address (or
/// its IPv6 group).
pub fn ban_holds(subject: &str, ip: IpAddr, ipv6_prefix: u8) -> bool {
    match ban_network(subject) {
        Some(network) => network.contains(ip),
        None => subject == client_network(ip, ipv6_prefix),
    }
}

/// The network a manual ban's subject names, when it names one (`addr/len`,
/// as [`ban_subject`] writes it); a bare address is a key like any other.
pub fn ban_network(subject: &str) -> Option<Cidr> {
    subject
        .contains('/')
        .then(|| Cidr::parse(subject).ok())
        .flatten()
}

/// The refusal's detail for a manual ban: the reason only when the operator
/// gave one (the default reason would repeat the sentence).
pub fn manual_ban_detail(until: &str, reason: &str) -> String {
    if reason.is_empty() || reason == DEFAULT_BAN_REASON {
        format!("banned by an operator until {until}")
    } else {
        format!("banned by an operator until {until}: {reason}")
    }
}

/// The reason a manual ban gets when the operator gives none.
pub const DEFAULT_BAN_REASON: &str = "banned by an operator";

/// `PUT /admin/bans/{key}`: `{"for": "10m", "reason": "..."}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManualBan {
    pub for_ms: u64,
    pub reason: String,
}

from_tree! {
    /// A manual ban's body as sent.
    struct RawManualBan {
        lasts: Option<String> = optional "for",
        reason: Option<String> = optional "reason",
    }
}

pub fn parse_manual_ban(content_type: Option<&str>, body: &[u8]) -> Result<ManualBan, Problem> {
    let raw: RawManualBan = body::read(content_type, body)?;
    let lasts = raw
        .lasts
        .ok_or_else(|| Problem::invalid("for", "for is required: a duration such as \"10m\""))?;
    let for_ms = parse_ms(&lasts).map_err(|m| Problem::invalid("for", m))?;
    if !(1..=MAX_BAN_MS).contains(&for_ms) {
        return Err(Problem::invalid(
            "for",
            format!("for must be from 1 ms to {} days", MAX_BAN_MS / DAY_MS),
        ));
    }
    let reason = match raw.reason {
        None => DEFAULT_BAN_REASON.to_string(),
        Some(reason) if reason.len() <= MAX_BAN_REASON_BYTES => reason,
        Some(_) => {
            return Err(Problem::invalid(
                "reason",
                format!("reason must be a string of at most {MAX_BAN_REASON_BYTES} bytes"),
            ))
        }
    };
    Ok(ManualBan { for_ms, reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn a_manual_ban_on_an_ipv6_address_names_its_group() {
        let subject = |key: &str, prefix: u8| ban_subject(key, prefix).unwrap();
        assert_eq!(subject("2001:db8:aa:cc::5", 64), "2001:db8:aa:cc::/64");
        assert_eq!(subject("2001:db8:aa:cc::5", 48), "2001:db8:aa::/48");
        assert_eq!(subject("2001:db8:aa:cc::5", 128), "2001:db8:aa:cc::5");
        assert_eq!(subject("::ffff:192.0.2.7", 64), "192.0.2.7");
        for kept in [
            "192.0.2.7",
            "2001:db8:aa:cc::/64",
            "user:42",
            "abc|GET",
            "a/b",
        ] {
            assert_eq!(subject(kept, 64), kept);
        }
    }

    #[test]
    fn a_manual_ban_on_a_network_is_written_as_parsed_or_refused() {
        let subject = |key: &str| ban_subject(key, 64);
        assert_eq!(subject("10.0.0.0/8").unwrap(), "10.0.0.0/8");
        assert_eq!(subject("2001:DB8::/32").unwrap(), "2001:db8::/32");
        assert_eq!(subject("::ffff:10.0.0.0/104").unwrap(), "10.0.0.0/8");
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(subject(&long[1..]).is_ok());
        for bad in [
            "10.0.0.1/8",
            "10.0.0.0/33",
            "2001:db8::1/32",
            "10.0.0.0/x",
            "10.0.0.0/",
            &long,
        ] {
            let problem = subject(bad).unwrap_err();
            assert_eq!(problem.status, 400, "{bad}");
            assert!(problem.to_json().contains("\"field\":\"key\""), "{bad}");
        }
    }

    #[test]
    fn a_ban_holds_its_network_or_its_address() {
        let ip = |text: &str| text.parse::<IpAddr>().unwrap();
        assert!(ban_holds("10.0.0.0/8", ip("10.9.9.9"), 64));
        assert!(!ban_holds("10.0.0.0/8", ip("11.0.0.1"), 64));
        assert!(ban_holds("192.0.2.7", ip("192.0.2.7"), 64));
        assert!(!ban_holds("192.0.2.7", ip("192.0.2.8"), 64));
        assert!(ban_holds(
            "2001:db8:aa:cc::/64",
            ip("2001:db8:aa:cc::9"),
            64
        ));
        assert!(ban_holds("2001:db8::/32", ip("2001:db8:1::1"), 64));
        assert!(!ban_holds("user:42", ip("192.0.2.7"), 64));
        assert_eq!(ban_network("a/b"), None);
        assert_eq!(ban_network("192.0.2.7"), None);
    }

    #[test]
    fn the_default_ban_reason_is_not_repeated() {
        let until = "2030-01-01T00:00:00Z";
        assert_eq!(
            manual_ban_detail(until, DEFAULT_BAN_REASON),
            "banned by an operator until 2030-01-01T00:00:00Z"
        );
        assert_eq!(
            manual_ban_detail(until, "scraping"),
            "banned by an operator until 2030-01-01T00:00:00Z: scraping"
        );
    }

    #[test]
    fn manual_bans_are_validated() {
        let ok = |v: Value| parse_manual_ban(Some("application/json"), v.to_string().as_bytes());
        assert_eq!(
            ok(json!({"for": "10m", "reason": "abuse"})).unwrap(),
            ManualBan {
                for_ms: 600_000,
                reason: "abuse".into()
            }
        );
        assert_eq!(
            ok(json!({"for": "1s"})).unwrap().reason,
            "banned by an operator"
        );
        let field = |v: Value| {
            let problem = ok(v).unwrap_err();
            serde_json::from_str::<Value>(&problem.to_json()).unwrap()["field"]
                .as_str()
                .unwrap()
                .to_string()
        };
        assert_eq!(field(json!({})), "for");
        assert_eq!(field(json!({"for": 10})), "for");
        assert_eq!(field(json!({"for": "0s"})), "for");
        assert_eq!(field(json!({"for": "forever"})), "for");
        assert_eq!(field(json!({"for": "400d"})), "for");
        assert_eq!(field(json!({"for": "1m", "reason": 5})), "reason");
        assert_eq!(
            field(json!({"for": "1m", "reason": "x".repeat(201)})),
            "reason"
        );
        assert_eq!(
            ok(json!({"for": "1m", "reason": "x".repeat(200)}))
                .unwrap()
                .reason
                .len(),
            200
        );
        assert_eq!(field(json!({"for": "1m", "why": "x"})), "why");
        assert_eq!(field(json!(["1m"])), "body");
    }
}
