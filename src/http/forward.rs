//! The header fields a request carries on to the origin.
//!
//! Sluice is a proxy, so it does what RFC 9110 §7.6.1 asks of one: fields
//! that describe the client's connection to Sluice (hop-by-hop fields, and
//! any field the client names in `Connection`) end there. It also speaks for
//! itself about who the client is: a client's own `X-Forwarded-For`,
//! `Forwarded` or `X-Real-IP` is a claim nobody checked, so it is dropped and
//! `X-Forwarded-For` is set to the one address Sluice trusts,
//! `CF-Connecting-IP`. Last, the origin-auth field, when configured, carries
//! the secret that lets an origin refuse whatever did not come through
//! Sluice; a client's copy of that field is never passed on.

use std::net::IpAddr;

/// Fields about one connection, never forwarded (RFC 9110 §7.6.1, plus
/// `Proxy-Connection` and `Keep-Alive`, which older clients still send).
/// `Upgrade` is among them, so Sluice does not proxy WebSocket upgrades.
pub const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Fields in which a client claims an address: only Sluice may say that.
pub const CLIENT_ADDRESS: [&str; 3] = ["x-forwarded-for", "forwarded", "x-real-ip"];

/// The field and value an origin checks to know a request came through
/// Sluice.
#[derive(Clone, Copy)]
pub struct OriginAuth<'a> {
    /// A lowercase field name.
    pub header: &'a str,
    pub secret: &'a str,
}

/// The fields to send to the origin, from the fields the client sent:
/// hop-by-hop fields, the fields `Connection` names, client address claims
/// and any client copy of the origin-auth field removed; `X-Forwarded-For`
/// set to `client` when known; the origin-auth field added.
pub fn to_origin(
    incoming: Vec<(String, String)>,
    client: Option<IpAddr>,
    auth: Option<OriginAuth<'_>>,
) -> Vec<(String, String)> {
    let named: Vec<String> = incoming
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    let dropped = |name: &str| {
        let name = name.to_ascii_lowercase();
        HOP_BY_HOP.contains(&name.as_str())
            || CLIENT_ADDRESS.contains(&name.as_str())
            || named.contains(&name)
            || auth.is_some_and(|auth| auth.header == name)
    };
    let mut out: Vec<(String, String)> = incoming
        .into_iter()
        .filter(|(name, _)| !dropped(name))
        .collect();
    if let Some(ip) = client {
        out.push(("x-forwarded-for".to_string(), ip.to_string()));
    }
    if let Some(auth) = auth {
        out.push((auth.header.to_string(), auth.secret.to_string()));
    }
    out
}

/// Whether `name` may carry the origin-auth secret: not a field Sluice
/// removes or sets itself, nor one the origin reads as something else.
pub fn may_carry_secret(name: &str) -> bool {
    const TAKEN: [&str; 7] = [
        "host",
        "authorization",
        "cookie",
        "content-length",
        "content-type",
        "content-encoding",
        "cf-connecting-ip",
    ];
    !HOP_BY_HOP.contains(&name)
        && !CLIENT_ADDRESS.contains(&name)
        && !TAKEN.contains(&name)
        && !name.starts_with("cf-")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    fn names(out: &[(String, String)]) -> Vec<&str> {
        out.iter().map(|(n, _)| n.as_str()).collect()
    }

    const AUTH: OriginAuth<'static> = OriginAuth {
        header: "x-sluice-auth",
        secret: "s3cret",
    };

    #[test]
    fn end_to_end_fields_pass_in_order() {
        let incoming = headers(&[
            ("accept", "*/*"),
            ("authorization", "Bearer t"),
            ("cookie", "a=1"),
            ("content-type", "application/json"),
            ("x-custom", "kept"),
        ]);
        assert_eq!(to_origin(incoming.clone(), None, None), incoming);
    }

    #[test]
    fn hop_by_hop_fields_are_removed_in_any_case() {
        let incoming = headers(&[
            ("Connection", "keep-alive"),
            ("KEEP-ALIVE", "timeout=5"),
            ("proxy-authorization", "Basic eA=="),
            ("Proxy-Connection", "keep-alive"),
            ("te", "trailers"),
            ("trailer", "x-sum"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
        ]);
        assert_eq!(names(&to_origin(incoming, None, None)), ["accept"]);
    }

    #[test]
    fn fields_named_in_connection_are_removed() {
        let incoming = headers(&[
            ("connection", "close, X-Hop , ,x-other"),
            ("x-hop", "1"),
            ("x-other", "2"),
            ("x-kept", "3"),
        ]);
        assert_eq!(names(&to_origin(incoming, None, None)), ["x-kept"]);
        let twice = headers(&[
            ("connection", "x-a"),
            ("connection", "x-b"),
            ("x-a", "1"),
            ("x-b", "2"),
        ]);
        assert!(to_origin(twice, None, None).is_empty());
    }

    #[test]
    fn client_address_claims_are_replaced_by_sluices_own() {
        let incoming = headers(&[
            ("x-forwarded-for", "6.6.6.6, 7.7.7.7"),
            ("Forwarded", "for=6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("cf-connecting-ip", "203.0.113.9"),
        ]);
        let ip: IpAddr = "203.0.113.9".parse().unwrap();
        assert_eq!(
            to_origin(incoming.clone(), Some(ip), None),
            headers(&[
                ("cf-connecting-ip", "203.0.113.9"),
                ("x-forwarded-for", "203.0.113.9"),
            ])
        );
        assert_eq!(
            to_origin(incoming, None, None),
            headers(&[("cf-connecting-ip", "203.0.113.9")]),
            "with no trusted address, none is claimed"
        );
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            to_origin(Vec::new(), Some(v6), None),
            headers(&[("x-forwarded-for", "2001:db8::1")])
        );
    }

    #[test]
    fn the_origin_auth_field_is_sluices_alone() {
        let incoming = headers(&[("X-Sluice-Auth", "guess"), ("accept", "*/*")]);
        assert_eq!(
            to_origin(incoming, None, Some(AUTH)),
            headers(&[("accept", "*/*"), ("x-sluice-auth", "s3cret")])
        );
        let named = headers(&[("connection", "x-sluice-auth, x-forwarded-for")]);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(
            to_origin(named, Some(ip), Some(AUTH)),
            headers(&[
                ("x-forwarded-for", "192.0.2.1"),
                ("x-sluice-auth", "s3cret"),
            ]),
            "naming Sluice's own fields in Connection removes only the client's copies"
        );
    }

    #[test]
    fn the_secret_may_not_ride_in_a_field_with_another_meaning() {
        assert!(may_carry_secret("x-sluice-auth"));
        assert!(may_carry_secret("x-origin-verify"));
        for taken in [
            "connection",
            "upgrade",
            "x-forwarded-for",
            "forwarded",
            "host",
            "authorization",
            "cookie",
            "content-length",
            "cf-connecting-ip",
            "cf-ray",
        ] {
            assert!(!may_carry_secret(taken), "{taken}");
        }
    }
}
