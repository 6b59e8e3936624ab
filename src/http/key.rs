//! Rule keys: which parts of a request identify the caller.
//!
//! A key spec is parts joined by `+`: `ip`, `header:<name>`,
//! `cookie:<name>`, `path`, `method`. The client IP comes from
//! `CF-Connecting-IP` only: Cloudflare sets it at the edge and a client
//! cannot forge it, unlike `X-Forwarded-For`, which is never read.

use std::fmt;
use std::net::IpAddr;

use sha2::{Digest, Sha256};

use super::Incoming;

/// Longest key kept verbatim; longer derived keys are replaced by a SHA-256
/// digest so that a long header cannot bloat storage or object names.
pub const MAX_KEY_BYTES: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Ip,
    Header(String),
    Cookie(String),
    Path,
    Method,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Ip => f.write_str("ip"),
            Part::Header(name) => write!(f, "header:{name}"),
            Part::Cookie(name) => write!(f, "cookie:{name}"),
            Part::Path => f.write_str("path"),
            Part::Method => f.write_str("method"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    parts: Vec<Part>,
}

/// The request lacks a part its rule keys on; it is refused with 400
/// rather than waved through, so dropping a header cannot dodge a limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingKey {
    pub part: String,
}

impl fmt::Display for MissingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.part == "ip" {
            write!(f, "the rule keys on the client IP, and the request has no valid CF-Connecting-IP header")
        } else {
            write!(
                f,
                "the rule keys on {}, which the request does not carry",
                self.part
            )
        }
    }
}

impl KeySpec {
    pub fn parse(text: &str) -> Result<KeySpec, String> {
        let parts = text
            .split('+')
            .map(|part| match part.split_once(':') {
                None if part == "ip" => Ok(Part::Ip),
                None if part == "path" => Ok(Part::Path),
                None if part == "method" => Ok(Part::Method),
                Some(("header", name)) if is_token(name) => Ok(Part::Header(name.to_ascii_lowercase())),
                Some(("cookie", name)) if is_token(name) => Ok(Part::Cookie(name.to_string())),
                _ => Err(format!(
                    "{part:?} is not a key part: use ip, path, method, header:<name> or cookie:<name>, joined by \"+\""
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeySpec { parts })
    }

    /// The caller's key: the parts' values joined by `|` (with `%` and `|`
    /// escaped in each, so different values never join to the same key).
    pub fn build(&self, req: &impl Incoming) -> Result<String, MissingKey> {
        let mut key = String::new();
        for (i, part) in self.parts.iter().enumerate() {
            let value = value_of(part, req).ok_or_else(|| MissingKey {
                part: part.to_string(),
            })?;
            if i > 0 {
                key.push('|');
            }
            for c in value.chars() {
                match c {
                    '%' => key.push_str("%25"),
                    '|' => key.push_str("%7C"),
                    _ => key.push(c),
                }
            }
        }
        if key.len() > MAX_KEY_BYTES {
            key = digest(&key);
        }
        Ok(key)
    }
}

fn value_of(part: &Part, req: &impl Incoming) -> Option<String> {
    match part {
        Part::Ip => client_ip(req).map(|ip| ip.to_string()),
        Part::Header(name) => req.header(name).filter(|v| !v.is_empty()),
        Part::Cookie(name) => cookie(req, name),
        Part::Path => Some(req.path().to_string()),
        Part::Method => Some(req.method().to_string()),
    }
}

/// The client address from `CF-Connecting-IP`, with IPv4-mapped IPv6
/// addresses folded to IPv4 so one client has one key.
pub fn client_ip(req: &impl Incoming) -> Option<IpAddr> {
    let ip: IpAddr = req.header("cf-connecting-ip")?.trim().parse().ok()?;
    Some(ip.to_canonical())
}

fn cookie(req: &impl Incoming, name: &str) -> Option<String> {
    let header = req.header("cookie")?;
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
}

fn digest(key: &str) -> String {
    let hash = Sha256::digest(key.as_bytes());
    let mut out = String::from("sha256:");
    for byte in hash {
        out.push_str(&format!("{byte:02x}"));
    }
    out
}

/// RFC 9110 token characters, as allowed in header and cookie names.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::tests::FakeRequest;

    fn build(spec: &str, req: &FakeRequest) -> Result<String, MissingKey> {
        KeySpec::parse(spec).unwrap().build(req)
    }

    #[test]
    fn ip_comes_from_cf_connecting_ip_only() {
        let req = FakeRequest::get("/x")
            .with("CF-Connecting-IP", "203.0.113.9")
            .with("X-Forwarded-For", "198.51.100.1");
        assert_eq!(build("ip", &req).unwrap(), "203.0.113.9");
        let spoofed = FakeRequest::get("/x").with("X-Forwarded-For", "198.51.100.1");
        assert_eq!(build("ip", &spoofed).unwrap_err().part, "ip");
        let garbage = FakeRequest::get("/x").with("CF-Connecting-IP", "not-an-ip");
        assert!(build("ip", &garbage).is_err());
        let mapped = FakeRequest::get("/x").with("CF-Connecting-IP", "::ffff:203.0.113.9");
        assert_eq!(build("ip", &mapped).unwrap(), "203.0.113.9");
    }

    #[test]
    fn parts_combine_and_escape() {
        let req = FakeRequest::get("/api/a|b")
            .with("CF-Connecting-IP", "2001:db8::1")
            .with("X-Api-Key", "k%1")
            .with("Cookie", "theme=dark; session=\"s|1\"");
        assert_eq!(build("ip+path", &req).unwrap(), "2001:db8::1|/api/a%7Cb");
        assert_eq!(build("header:x-api-key+method", &req).unwrap(), "k%251|GET");
        assert_eq!(build("cookie:session", &req).unwrap(), "s%7C1");
        assert_eq!(
            build("cookie:missing", &req).unwrap_err().part,
            "cookie:missing"
        );
        assert_eq!(build("header:X-API-KEY", &req).unwrap(), "k%251");
    }

    #[test]
    fn empty_values_are_missing() {
        let req = FakeRequest::get("/")
            .with("X-Api-Key", "")
            .with("Cookie", "s=");
        assert!(build("header:x-api-key", &req).is_err());
        assert!(build("cookie:s", &req).is_err());
    }

    #[test]
    fn long_keys_are_digested() {
        let long = "a".repeat(600);
        let req = FakeRequest::get("/").with("X-Token", &long);
        let key = build("header:x-token", &req).unwrap();
        assert!(key.starts_with("sha256:"));
        assert_eq!(key.len(), 7 + 64);
        let other = FakeRequest::get("/").with("X-Token", &"b".repeat(600));
        assert_ne!(build("header:x-token", &other).unwrap(), key);
    }

    #[test]
    fn rejects_unknown_parts() {
        for bad in [
            "",
            "ip+",
            "IP",
            "header:",
            "header:bad name",
            "cookie:",
            "query:x",
            "ip++path",
        ] {
            assert!(KeySpec::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
