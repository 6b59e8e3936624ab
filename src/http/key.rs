//! Rule keys: which parts of a request identify the caller, written as parts
//! joined by `+` (`ip+path`) or as a template (`{sub}:{action}`). The client
//! address comes from `CF-Connecting-IP` only, an IPv6 client keyed by its
//! network. The parts: docs/configuration.md, "Keys".

use std::fmt;
use std::net::IpAddr;

use sha2::{Digest, Sha256};

use super::cidr::client_network;
use super::jwt::Claims;
use super::problem::Code;
use super::Incoming;
use crate::bounds::MAX_KEY_BYTES;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Ip,
    Method,
    Path,
    Action,
    Header(String),
    Cookie(String),
    Param(String),
    Claim(String),
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Part::Ip => f.write_str("ip"),
            Part::Method => f.write_str("method"),
            Part::Path => f.write_str("path"),
            Part::Action => f.write_str("action"),
            Part::Header(name) => write!(f, "header:{name}"),
            Part::Cookie(name) => write!(f, "cookie:{name}"),
            Part::Param(name) => write!(f, "param:{name}"),
            Part::Claim(name) => write!(f, "claim:{name}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Part(Part),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpec {
    pieces: Vec<Piece>,
    /// Characters escaped in values: `%` and every character of the literal
    /// text, so that different values can never build the same key.
    escaped: Vec<char>,
}

/// The key as a template (`ip+header:x` reads `{ip}|{header:x}`); it
/// parses back to the same spec.
impl fmt::Display for KeySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => f.write_str(text)?,
                Piece::Part(part) => write!(f, "{{{part}}}")?,
            }
        }
        Ok(())
    }
}

/// What a key is built from, besides the request itself.
pub struct KeyInputs<'a> {
    /// The request's path as the rule matched it (canonical, and folded
    /// as the rule's `paths` say), so that spellings of one path share a key.
    pub path: &'a str,
    /// Path parameters the rule's pattern captured.
    pub params: &'a [(&'a str, &'a str)],
    /// The verified JWT's claims, for registered callers.
    pub claims: Option<&'a Claims>,
    pub action: Option<&'a str>,
    /// How many leading bits of an IPv6 address identify a client.
    pub ipv6_prefix: u8,
}

/// Why a request has no key for its rule; it is refused with 400 rather
/// than waved through, so dropping or doubling a header cannot dodge a
/// limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// The request lacks the part (or its value is empty or holds a
    /// control character).
    Missing { part: String },
    /// The request carries the part in a way readers disagree on: a cookie
    /// named twice, or a cookie value that is not one RFC 6265 value. Which
    /// copy counts would be the client's choice, and so would its key.
    Ambiguous { part: String },
}

impl KeyError {
    /// The part, as the key names it (`ip`, `cookie:sid`).
    pub fn part(&self) -> &str {
        match self {
            KeyError::Missing { part } | KeyError::Ambiguous { part } => part,
        }
    }

    pub fn code(&self) -> Code {
        match self {
            KeyError::Missing { .. } => Code::MissingKey,
            KeyError::Ambiguous { .. } => Code::AmbiguousKey,
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::Missing { part } if part == "ip" => write!(
                f,
                "the rule keys on the client IP, and the request has no valid CF-Connecting-IP header"
            ),
            KeyError::Missing { part } => write!(
                f,
                "the rule keys on {part}, which the request does not carry"
            ),
            KeyError::Ambiguous { part } => write!(
                f,
                "the rule keys on {part}, and the request's Cookie header names it more than once or gives it a value that is not one cookie value (spaces, commas, backslashes or quotes inside it); cookie readers disagree on which copy counts, so send it once"
            ),
        }
    }
}

impl KeySpec {
    pub fn parse(text: &str) -> Result<KeySpec, String> {
        let pieces = if text.contains(['{', '}']) {
            parse_template(text)?
        } else {
            let mut pieces = Vec::new();
            for (i, word) in text.split('+').enumerate() {
                if i > 0 {
                    pieces.push(Piece::Literal("|".into()));
                }
                pieces.push(Piece::Part(parse_part(word, false)?));
            }
            pieces
        };
        // Each character once, in the order first met: only `contains`
        // reads the list, and sorting it linked a sort of `char`s for
        // nothing else.
        let mut escaped = vec!['%'];
        for piece in &pieces {
            if let Piece::Literal(text) = piece {
                for c in text.chars() {
                    if !escaped.contains(&c) {
                        escaped.push(c);
                    }
                }
            }
        }
        Ok(KeySpec { pieces, escaped })
    }

    /// The parts the key needs, so config validation can check that a rule
    /// provides them (a path parameter its pattern captures, an action, a
    /// JWT for claims).
    pub fn parts(&self) -> impl Iterator<Item = &Part> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Part(part) => Some(part),
            Piece::Literal(_) => None,
        })
    }

    /// The caller's key.
    pub fn build(&self, req: &impl Incoming, inputs: &KeyInputs<'_>) -> Result<String, KeyError> {
        let mut key = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Literal(text) => key.push_str(text),
                Piece::Part(part) => {
                    let value = value_of(part, req, inputs)?;
                    for c in value.chars() {
                        if self.escaped.contains(&c) {
                            key.push_str(&format!("%{:02X}", u32::from(c)));
                        } else {
                            key.push(c);
                        }
                    }
                }
            }
        }
        // A key that already reads like a digest is hashed too, so that no
        // plain key can name the object of a long key's digest.
        if key.len() > MAX_KEY_BYTES || is_digest(&key) {
            key = digest(&key);
        }
        Ok(key)
    }
}

fn parse_template(text: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['{', '}']) {
            Some(0) if rest.starts_with('{') => {
                let end = rest
                    .find('}')
                    .ok_or_else(|| format!("in {text:?}, a \"{{\" is never closed"))?;
                pieces.push(Piece::Part(parse_part(&rest[1..end], true)?));
                rest = &rest[end + 1..];
            }
            Some(0) => return Err(format!("in {text:?}, a \"}}\" closes nothing")),
            Some(at) => {
                pieces.push(Piece::Literal(rest[..at].to_string()));
                rest = &rest[at..];
            }
            None => {
                pieces.push(Piece::Literal(rest.to_string()));
                rest = "";
            }
        }
    }
    if !pieces.iter().any(|p| matches!(p, Piece::Part(_))) {
        return Err(format!("{text:?} names no part of the request"));
    }
    // With nothing between two parts, "alice"+"1" and "alic"+"e1" would
    // build the same key.
    if pieces
        .windows(2)
        .any(|pair| matches!(pair, [Piece::Part(_), Piece::Part(_)]))
    {
        return Err(format!(
            "in {text:?}, two parts follow each other with nothing between them: put literal text between them (e.g. \"{{header:x-a}}:{{header:x-b}}\") so that different values cannot build the same key"
        ));
    }
    Ok(pieces)
}

fn parse_part(word: &str, in_template: bool) -> Result<Part, String> {
    let part = match word.split_once(':') {
        None => match word {
            "ip" => Part::Ip,
            "method" => Part::Method,
            "path" => Part::Path,
            "action" => Part::Action,
            "sub" => Part::Claim("sub".into()),
            _ if in_template && is_param_name(word) => Part::Param(word.into()),
            _ => return Err(unknown(word)),
        },
        Some(("header", name)) if is_token(name) => Part::Header(name.to_ascii_lowercase()),
        Some(("cookie", name)) if is_token(name) => Part::Cookie(name.into()),
        Some(("param", name)) if is_param_name(name) => Part::Param(name.into()),
        Some(("claim", name)) if is_token(name) => Part::Claim(name.into()),
        _ => return Err(unknown(word)),
    };
    Ok(part)
}

fn unknown(word: &str) -> String {
    format!(
        "{word:?} is not a key part: use ip, method, path, action, sub, header:<name>, cookie:<name>, param:<name> or claim:<name>, joined by \"+\" or in a template such as \"{{sub}}:{{action}}\""
    )
}

fn value_of(part: &Part, req: &impl Incoming, inputs: &KeyInputs<'_>) -> Result<String, KeyError> {
    let value = match part {
        Part::Ip => client_ip(req).map(|ip| client_network(ip, inputs.ipv6_prefix)),
        Part::Method => Some(req.method().to_string()),
        Part::Path => Some(inputs.path.to_string()),
        Part::Action => inputs.action.map(str::to_string),
        Part::Header(name) => req.header(name),
        Part::Cookie(name) => cookie(req, name).map_err(|()| KeyError::Ambiguous {
            part: part.to_string(),
        })?,
        Part::Param(name) => inputs
            .params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.to_string()),
        Part::Claim(name) => inputs.claims.and_then(|claims| claims.get_str(name)),
    };
    // An empty value would lump callers together, and control characters
    // have no business in a header, cookie or claim a client is keyed by.
    value
        .filter(|v| !v.is_empty() && !v.chars().any(char::is_control))
        .ok_or_else(|| KeyError::Missing {
            part: part.to_string(),
        })
}

/// The client address from `CF-Connecting-IP`, with IPv4-mapped IPv6
/// addresses folded to IPv4 so one client has one key.
pub fn client_ip(req: &impl Incoming) -> Option<IpAddr> {
    let ip: IpAddr = req.header("cf-connecting-ip")?.trim().parse().ok()?;
    Some(ip.to_canonical())
}

/// The value of cookie `name` (without the quotes of a quoted one);
/// `Err` when the header names it twice or its value is not one RFC 6265
/// cookie value. Readers disagree on such a header: Django and Python's
/// `SimpleCookie` keep the last copy, PHP the first, and `SimpleCookie`
/// also ends a value at a space or reads on past a comma, so any one
/// reading would let the client choose the key it is limited under.
/// Names are compared as readers compare them: whole, case-sensitive,
/// with the spaces around them dropped; and a name that starts a cookie
/// only for a reader that also splits at commas and spaces
/// (`a=x sid=REAL`, which `SimpleCookie` reads as two cookies) counts as a
/// copy too. The runtime joins several `Cookie` fields with `; `, so they
/// are read as one.
fn cookie(req: &impl Incoming, name: &str) -> Result<Option<String>, ()> {
    let Some(header) = req.header("cookie") else {
        return Ok(None);
    };
    let Some((_, value)) = header
        .split(';')
        .filter_map(|pair| pair.split_once('='))
        .find(|(n, _)| n.trim() == name)
    else {
        return Ok(None);
    };
    if cookie_starts(&header, name) > 1 {
        return Err(());
    }
    cookie_value(value.trim()).map(Some).ok_or(())
}

/// How many times a cookie named `name` starts in `header`, for the most
/// eager reader: after the start, a `;`, a `,` or a space, and followed by
/// `=` (spaces allowed before it).
fn cookie_starts(header: &str, name: &str) -> usize {
    header
        .match_indices(name)
        .filter(|(at, _)| {
            let before = header[..*at].chars().next_back();
            let after = header[at + name.len()..].trim_start();
            before.is_none_or(|c| c == ';' || c == ',' || c.is_whitespace())
                && after.starts_with('=')
        })
        .count()
}

/// An RFC 6265 cookie-value, optionally in one pair of double quotes
/// (dropped): none of the characters readers split or unescape at
/// (whitespace, `"`, `,`, `;`, `\`). Characters beyond ASCII, which
/// RFC 6265 leaves out too, are let through as a header's are
/// (`SimpleCookie` drops a cookie with one rather than keep a part of
/// it); a control character makes the value missing, as anywhere.
fn cookie_value(text: &str) -> Option<String> {
    let inner = match text.strip_prefix('"') {
        Some(quoted) => quoted.strip_suffix('"')?,
        None => text,
    };
    let splits = |c: char| c.is_ascii_whitespace() || matches!(c, '"' | ',' | ';' | '\\');
    (!inner.contains(splits)).then(|| inner.to_string())
}

/// Whether `key` has the form [`digest`] gives.
fn is_digest(key: &str) -> bool {
    key.strip_prefix(DIGEST_PREFIX).is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

const DIGEST_PREFIX: &str = "sha256:";

fn digest(key: &str) -> String {
    let hash = Sha256::digest(key.as_bytes());
    let mut out = String::from(DIGEST_PREFIX);
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

fn is_param_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::tests::FakeRequest;

    const PLAIN: KeyInputs<'static> = KeyInputs {
        path: "/x",
        params: &[],
        claims: None,
        action: None,
        ipv6_prefix: 64,
    };

    fn build(spec: &str, req: &FakeRequest) -> Result<String, KeyError> {
        KeySpec::parse(spec).unwrap().build(req, &PLAIN)
    }

    #[test]
    fn specs_print_as_templates_that_parse_back() {
        for (text, shown) in [
            ("ip", "{ip}"),
            ("ip+header:X-Api-Key", "{ip}|{header:x-api-key}"),
            ("{sub}:{action}", "{claim:sub}:{action}"),
            ("u-{param:id}/{cookie:sid}", "u-{param:id}/{cookie:sid}"),
        ] {
            let spec = KeySpec::parse(text).unwrap();
            assert_eq!(spec.to_string(), shown);
            assert_eq!(KeySpec::parse(shown).unwrap(), spec);
        }
    }

    #[test]
    fn ip_comes_from_cf_connecting_ip_only() {
        let req = FakeRequest::get()
            .with("CF-Connecting-IP", "203.0.113.9")
            .with("X-Forwarded-For", "198.51.100.1");
        assert_eq!(build("ip", &req).unwrap(), "203.0.113.9");
        let spoofed = FakeRequest::get().with("X-Forwarded-For", "198.51.100.1");
        assert_eq!(build("ip", &spoofed).unwrap_err().part(), "ip");
        let garbage = FakeRequest::get().with("CF-Connecting-IP", "not-an-ip");
        assert!(build("ip", &garbage).is_err());
        let mapped = FakeRequest::get().with("CF-Connecting-IP", "::ffff:203.0.113.9");
        assert_eq!(build("ip", &mapped).unwrap(), "203.0.113.9");
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_network() {
        let a = FakeRequest::get().with("CF-Connecting-IP", "2001:db8:1:2::1");
        let b = FakeRequest::get().with("CF-Connecting-IP", "2001:db8:1:2:ffff::9");
        assert_eq!(build("ip", &a).unwrap(), "2001:db8:1:2::/64");
        assert_eq!(build("ip", &a).unwrap(), build("ip", &b).unwrap());
        let exact = KeyInputs {
            ipv6_prefix: 128,
            ..PLAIN
        };
        let spec = KeySpec::parse("ip").unwrap();
        assert_ne!(
            spec.build(&a, &exact).unwrap(),
            spec.build(&b, &exact).unwrap()
        );
    }

    #[test]
    fn parts_combine_and_escape() {
        let req = FakeRequest::get()
            .with("CF-Connecting-IP", "203.0.113.9")
            .with("X-Api-Key", "k%1")
            .with("Cookie", "theme=dark; session=\"s|1\"");
        let at_path = KeyInputs {
            path: "/api/a|b",
            ..PLAIN
        };
        let spec = KeySpec::parse("ip+path").unwrap();
        assert_eq!(
            spec.build(&req, &at_path).unwrap(),
            "203.0.113.9|/api/a%7Cb"
        );
        assert_eq!(build("header:x-api-key+method", &req).unwrap(), "k%251|GET");
        assert_eq!(
            build("cookie:session", &req).unwrap(),
            "s|1",
            "one part needs no separator escaped"
        );
        assert_eq!(
            build("cookie:missing", &req).unwrap_err().part(),
            "cookie:missing"
        );
        assert_eq!(build("header:X-API-KEY", &req).unwrap(), "k%251");
    }

    #[test]
    fn templates_take_params_claims_and_the_action() {
        let serde_json::Value::Object(map) = serde_json::json!({"sub": "u:42", "org": 7}) else {
            unreachable!()
        };
        let claims = Claims::from(map);
        let inputs = KeyInputs {
            path: "/threads/99/reply",
            params: &[("id", "99")],
            claims: Some(&claims),
            action: Some("reply"),
            ipv6_prefix: 64,
        };
        let req = FakeRequest::new("POST");
        let key = |spec: &str| KeySpec::parse(spec).unwrap().build(&req, &inputs);
        assert_eq!(key("{sub}:{action}").unwrap(), "u%3A42:reply");
        assert_eq!(key("{claim:org}/{id}/{method}").unwrap(), "7/99/POST");
        assert_eq!(key("{param:id}").unwrap(), "99");
        assert_eq!(key("sub+action").unwrap(), "u:42|reply");
        assert_eq!(key("{claim:missing}").unwrap_err().part(), "claim:missing");
        let anonymous = KeyInputs {
            claims: None,
            ..inputs
        };
        let spec = KeySpec::parse("{sub}").unwrap();
        assert_eq!(
            spec.build(&req, &anonymous).unwrap_err().part(),
            "claim:sub"
        );
    }

    #[test]
    fn a_spec_lists_the_parts_it_needs() {
        let spec = KeySpec::parse("{sub}:{id}:{action}").unwrap();
        let parts: Vec<String> = spec.parts().map(Part::to_string).collect();
        assert_eq!(parts, ["claim:sub", "param:id", "action"]);
    }

    #[test]
    fn empty_values_and_control_characters_are_not_keys() {
        let req = FakeRequest::get()
            .with("X-Api-Key", "")
            .with("Cookie", "s=");
        assert!(build("header:x-api-key", &req).is_err());
        assert!(build("cookie:s", &req).is_err());
        let req = FakeRequest::get()
            .with("X-Api-Key", "a\u{1}b")
            .with("X-Latin", "caf\u{e9}");
        assert!(build("header:x-api-key", &req).is_err());
        assert_eq!(
            build("header:x-latin", &req).unwrap(),
            "caf\u{e9}",
            "bytes beyond ASCII are fine"
        );
    }

    #[test]
    fn a_cookie_the_request_names_twice_is_refused_not_picked() {
        let cookie = |value: &str| FakeRequest::get().with("Cookie", value);
        // Django and Python's SimpleCookie read the last copy, PHP the
        // first: with either read, a client could pick its key.
        for sent in [
            "sid=junk1; sid=REAL",
            "sid=REAL;sid=junk2",
            "theme=x; sid=junk3; other=1; sid=REAL",
            "sid=junk4; sid =REAL",
            "sid=junk5;  sid= REAL",
            "sid=junk6, sid=REAL",
            "sid=REAL x=junk7",
            "sid=REAL\\x",
            "sid=\"RE\"AL\"",
            "sid=\"REAL",
            "sid=junk8; a=x sid=REAL",
            "sid=junk9; a=x,sid=REAL",
            "sid=junk10; a=b sid = REAL",
        ] {
            let error = build("cookie:sid", &cookie(sent)).unwrap_err();
            assert_eq!(error.part(), "cookie:sid", "{sent}");
            assert_eq!(error.code(), Code::AmbiguousKey, "{sent}");
        }
        assert_eq!(build("cookie:sid", &cookie("sid=REAL")).unwrap(), "REAL");
        assert_eq!(
            build("cookie:sid", &cookie("a=1; sid=REAL; a=2; b")).unwrap(),
            "REAL",
            "other cookies may repeat"
        );
        assert_eq!(
            build("cookie:sid", &cookie(" sid = REAL ")).unwrap(),
            "REAL"
        );
        assert_eq!(
            build("cookie:sid", &cookie("sid=caf\u{e9}")).unwrap(),
            "caf\u{e9}",
            "characters beyond ASCII are no separator"
        );
        assert_eq!(
            build("cookie:sid", &cookie("sid=\"s|1=\"")).unwrap(),
            "s|1=",
            "a quoted value is keyed without its quotes"
        );
        assert_eq!(
            build("cookie:sid", &cookie("SID=x; sids=y"))
                .unwrap_err()
                .code(),
            Code::MissingKey,
            "names are case-sensitive and whole"
        );
    }

    #[test]
    fn long_keys_are_digested() {
        let long = "a".repeat(600);
        let req = FakeRequest::get().with("X-Token", &long);
        let key = build("header:x-token", &req).unwrap();
        assert!(key.starts_with("sha256:"));
        assert_eq!(key.len(), 7 + 64);
        let other = FakeRequest::get().with("X-Token", &"b".repeat(600));
        assert_ne!(build("header:x-token", &other).unwrap(), key);
    }

    #[test]
    fn rejects_malformed_specs() {
        for bad in [
            "",
            "ip+",
            "IP",
            "header:",
            "header:bad name",
            "cookie:",
            "query:x",
            "ip++path",
            "id",
            "{",
            "}",
            "{ip",
            "ip}",
            "{}",
            "{bad-name}",
            "plain text {",
            "no parts here}",
        ] {
            assert!(KeySpec::parse(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(
            KeySpec::parse("static text").is_err(),
            "a + part list of one unknown word"
        );
    }

    #[test]
    fn a_plain_key_never_takes_a_digest_s_form() {
        let long = "a".repeat(600);
        let long_key = FakeRequest::get().with("X-Token", &long);
        let hashed = build("header:x-token", &long_key).unwrap();
        let forged = FakeRequest::get().with("X-Token", &hashed);
        let rehashed = build("header:x-token", &forged).unwrap();
        assert_ne!(
            rehashed, hashed,
            "a value spelling a digest is hashed again"
        );
        assert!(is_digest(&rehashed));
        assert_eq!(
            build(
                "header:x-token",
                &FakeRequest::get().with("X-Token", "sha256:abc")
            )
            .unwrap(),
            "sha256:abc"
        );
    }

    #[test]
    fn adjacent_parts_are_refused() {
        let error = KeySpec::parse("{header:x-a}{header:x-b}").unwrap_err();
        assert!(error.contains("nothing between them"), "{error}");
        assert!(KeySpec::parse("{header:x-a}-{header:x-b}").is_ok());
    }
}
