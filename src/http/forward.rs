//! The header fields a request carries on to the origin: hop-by-hop fields
//! end at Sluice (RFC 9110 §7.6.1), a client's forwarding claims are dropped
//! and Sluice's own set (`X-Forwarded-For` from `CF-Connecting-IP`, the host
//! and scheme it was reached at), `keep_headers` let through, and the
//! origin-auth secret and a room's `Sluice-Room-Pass` added by Sluice
//! alone. Which fields and why: docs/http-api.md, "What
//! reaches the origin".

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

/// Fields a proxy in front of an origin sets to say where a request came
/// from or was addressed: sent by a client, they are claims nobody checked.
/// Dropped unless the config keeps them (`keep_headers`), like every
/// `cf-*` field ([`is_forwarding_claim`]).
pub const FORWARDING_CLAIMS: [&str; 14] = [
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-forwarded-prefix",
    "x-forwarded-scheme",
    "x-forwarded-server",
    "x-forwarded-ssl",
    "x-original-url",
    "x-rewrite-url",
    "x-original-host",
    "x-host",
    "true-client-ip",
    "x-client-ip",
    "x-cluster-client-ip",
];

/// The field that tells the origin a request holds a room's session
/// (`room::cookie::Signer::pass`): never a client's.
pub const ROOM_PASS: &str = "sluice-room-pass";

/// The address Sluice trusts and keys on. The platform sets it (the
/// runtime does not forward a worker's copy), and Sluice's own word on it
/// is `X-Forwarded-For`, so it is never kept.
const CONNECTING_IP: &str = "cf-connecting-ip";

/// Whether a lowercase field name is a proxy's claim about the request
/// that Sluice drops from what a client sent: Cloudflare's `cf-*` fields
/// are the platform's to set, on the way in and on the way to the origin.
pub fn is_forwarding_claim(name: &str) -> bool {
    FORWARDING_CLAIMS.contains(&name) || name.starts_with("cf-")
}

/// Whether `keep_headers` may name a field: a forwarding claim, other
/// than the client address Sluice states itself.
pub fn may_keep(name: &str) -> bool {
    is_forwarding_claim(name) && name != CONNECTING_IP
}

/// The field and value an origin checks to know a request came through
/// Sluice.
#[derive(Clone, Copy)]
pub struct OriginAuth<'a> {
    /// A lowercase field name.
    pub header: &'a str,
    pub secret: &'a str,
}

/// What Sluice itself says about a request it forwards.
#[derive(Clone, Copy, Default)]
pub struct Facts<'a> {
    /// The client address Sluice trusts (`CF-Connecting-IP`), when valid.
    pub client: Option<IpAddr>,
    /// The host (with its port, if any) and scheme of the URL Sluice
    /// received, for `X-Forwarded-Host` and `X-Forwarded-Proto`.
    pub host: Option<&'a str>,
    pub proto: Option<&'a str>,
    /// Forwarding claims (lowercase) passed on as the client sent them;
    /// Sluice sets none of its own in their place.
    pub keep: &'a [String],
    pub auth: Option<OriginAuth<'a>>,
    /// The request's room pass, when it holds a room's session.
    pub room_pass: Option<&'a str>,
}

/// The fields to send to the origin, from the fields the client sent:
/// hop-by-hop fields, the fields `Connection` names, client address claims,
/// forwarding claims not kept, and any client copy of the origin-auth field
/// removed; `X-Forwarded-For` set to the client when known,
/// `X-Forwarded-Host` and `X-Forwarded-Proto` to what Sluice received unless
/// kept; the origin-auth field added.
pub fn to_origin(incoming: Vec<(String, String)>, facts: &Facts<'_>) -> Vec<(String, String)> {
    let named: Vec<String> = incoming
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, value)| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    let kept = |name: &str| facts.keep.iter().any(|k| k == name);
    let dropped = |name: &str| {
        let name = name.to_ascii_lowercase();
        HOP_BY_HOP.contains(&name.as_str())
            || CLIENT_ADDRESS.contains(&name.as_str())
            || (is_forwarding_claim(&name) && !kept(&name))
            || named.contains(&name)
            || facts.auth.is_some_and(|auth| auth.header == name)
            || name == ROOM_PASS
    };
    let mut out: Vec<(String, String)> = incoming
        .into_iter()
        .filter(|(name, _)| !dropped(name))
        .collect();
    if let Some(ip) = facts.client {
        out.push(("x-forwarded-for".to_string(), ip.to_string()));
    }
    for (name, value) in [
        ("x-forwarded-host", facts.host),
        ("x-forwarded-proto", facts.proto),
    ] {
        if let Some(value) = value.filter(|_| !kept(name)) {
            out.push((name.to_string(), value.to_string()));
        }
    }
    if let Some(auth) = facts.auth {
        out.push((auth.header.to_string(), auth.secret.to_string()));
    }
    if let Some(pass) = facts.room_pass {
        out.push((ROOM_PASS.to_string(), pass.to_string()));
    }
    out
}

/// Whether `name` may carry the origin-auth secret: not a field Sluice
/// removes or sets itself, nor one the origin reads as something else.
pub fn may_carry_secret(name: &str) -> bool {
    const TAKEN: [&str; 8] = [
        ROOM_PASS,
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
        && !FORWARDING_CLAIMS.contains(&name)
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

    const NOTHING: Facts<'static> = Facts {
        client: None,
        host: None,
        proto: None,
        keep: &[],
        auth: None,
        room_pass: None,
    };

    fn from(ip: IpAddr) -> Facts<'static> {
        Facts {
            client: Some(ip),
            ..NOTHING
        }
    }

    #[test]
    fn end_to_end_fields_pass_in_order() {
        let incoming = headers(&[
            ("accept", "*/*"),
            ("authorization", "Bearer t"),
            ("cookie", "a=1"),
            ("content-type", "application/json"),
            ("x-custom", "kept"),
        ]);
        assert_eq!(to_origin(incoming.clone(), &NOTHING), incoming);
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
        assert_eq!(names(&to_origin(incoming, &NOTHING)), ["accept"]);
    }

    #[test]
    fn fields_named_in_connection_are_removed() {
        let incoming = headers(&[
            ("connection", "close, X-Hop , ,x-other"),
            ("x-hop", "1"),
            ("x-other", "2"),
            ("x-kept", "3"),
        ]);
        assert_eq!(names(&to_origin(incoming, &NOTHING)), ["x-kept"]);
        let twice = headers(&[
            ("connection", "x-a"),
            ("connection", "x-b"),
            ("x-a", "1"),
            ("x-b", "2"),
        ]);
        assert!(to_origin(twice, &NOTHING).is_empty());
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
            to_origin(incoming.clone(), &from(ip)),
            headers(&[("x-forwarded-for", "203.0.113.9")])
        );
        assert!(
            to_origin(incoming, &NOTHING).is_empty(),
            "with no trusted address, none is claimed"
        );
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            to_origin(Vec::new(), &from(v6)),
            headers(&[("x-forwarded-for", "2001:db8::1")])
        );
    }

    #[test]
    fn forwarding_claims_are_dropped_and_sluice_says_host_and_scheme() {
        let incoming = headers(&[
            ("X-Forwarded-Host", "evil.example"),
            ("x-forwarded-proto", "http"),
            ("x-forwarded-port", "1"),
            ("x-forwarded-prefix", "/evil"),
            ("x-original-url", "/admin"),
            ("x-rewrite-url", "/admin"),
            ("x-original-host", "evil.example"),
            ("x-host", "evil.example"),
            ("true-client-ip", "6.6.6.6"),
            ("x-client-ip", "6.6.6.6"),
            ("x-cluster-client-ip", "6.6.6.6"),
            ("cf-access-authenticated-user-email", "ceo@example.com"),
            ("CF-IPCountry", "XX"),
            ("cf-ray", "forged"),
            ("cf-connecting-ip", "203.0.113.9"),
            ("accept", "*/*"),
        ]);
        let facts = Facts {
            host: Some("api.example.com"),
            proto: Some("https"),
            ..NOTHING
        };
        assert_eq!(
            to_origin(incoming.clone(), &facts),
            headers(&[
                ("accept", "*/*"),
                ("x-forwarded-host", "api.example.com"),
                ("x-forwarded-proto", "https"),
            ])
        );
        let keep = ["cf-ipcountry".to_string(), "x-forwarded-proto".to_string()];
        let kept = Facts {
            keep: &keep,
            ..facts
        };
        assert_eq!(
            to_origin(incoming, &kept),
            headers(&[
                ("x-forwarded-proto", "http"),
                ("CF-IPCountry", "XX"),
                ("accept", "*/*"),
                ("x-forwarded-host", "api.example.com"),
            ]),
            "a kept field passes as sent, and Sluice adds none in its place"
        );
        assert!(may_keep("cf-anything") && may_keep("x-original-url"));
        assert!(
            !may_keep("cf-connecting-ip"),
            "Sluice says it in X-Forwarded-For"
        );
        assert!(!may_keep("x-forwarded-for"), "always replaced, never kept");
        assert!(!may_keep("x-custom"), "passes anyway");
    }

    #[test]
    fn the_origin_auth_field_is_sluices_alone() {
        let incoming = headers(&[("X-Sluice-Auth", "guess"), ("accept", "*/*")]);
        assert_eq!(
            to_origin(
                incoming,
                &Facts {
                    auth: Some(AUTH),
                    ..NOTHING
                }
            ),
            headers(&[("accept", "*/*"), ("x-sluice-auth", "s3cret")])
        );
        let named = headers(&[("connection", "x-sluice-auth, x-forwarded-for")]);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(
            to_origin(
                named,
                &Facts {
                    auth: Some(AUTH),
                    ..from(ip)
                }
            ),
            headers(&[
                ("x-forwarded-for", "192.0.2.1"),
                ("x-sluice-auth", "s3cret"),
            ]),
            "naming Sluice's own fields in Connection removes only the client's copies"
        );
    }

    #[test]
    fn a_room_pass_is_sluices_alone() {
        let incoming = headers(&[("Sluice-Room-Pass", "forged"), ("accept", "*/*")]);
        assert_eq!(
            to_origin(incoming.clone(), &NOTHING),
            headers(&[("accept", "*/*")])
        );
        assert_eq!(
            to_origin(
                incoming,
                &Facts {
                    room_pass: Some("v1.pass.shop.0-1.2.sig"),
                    ..NOTHING
                }
            ),
            headers(&[
                ("accept", "*/*"),
                ("sluice-room-pass", "v1.pass.shop.0-1.2.sig")
            ])
        );
        assert!(!may_carry_secret(ROOM_PASS));
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
            "x-forwarded-host",
            "true-client-ip",
        ] {
            assert!(!may_carry_secret(taken), "{taken}");
        }
    }
}
