//! HS256 JWT verification, to tell registered callers from anonymous ones and
//! key their limits on claims. Only HS256, whatever the header says (no
//! `alg: none` or algorithm confusion), `crit` refused, signatures compared
//! in constant time, every JSON key once in header and payload (readers
//! disagree on a repeated `sub`), `exp` and `nbf` whole seconds in range.
//! Time is passed in.

use std::fmt;

use hmac::digest::Key;
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::base64url;
use crate::input::tree::{self, Unreadable};

/// Longest token looked at. Real tokens are a few hundred bytes; the bound
/// caps the decoding and JSON work a hostile header can cause.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// The latest `exp` or `nbf` accepted: 9999-12-31T23:59:59Z. Anything later
/// is a mistake or an attack, and the bound keeps `date + leeway` far from
/// overflowing.
pub const MAX_NUMERIC_DATE: u64 = 253_402_300_799;

/// What a token must satisfy besides its signature, from `SLUICE.jwt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    /// Clock skew between issuer and edge tolerated on `exp` and `nbf`.
    pub leeway_s: u64,
    /// A token without `exp` fails: it would otherwise be valid forever.
    pub require_exp: bool,
    /// When set, the token's `aud` (a string, or an array of strings) must
    /// hold it, so a token the same key signed for another service does not
    /// pass here.
    pub audience: Option<String>,
    /// When set, the token's `iss` must equal it.
    pub issuer: Option<String>,
}

type HmacSha256 = Hmac<Sha256>;

/// The shared secret, held as the keyed HMAC state so each verification
/// starts from it instead of re-deriving the padded key.
#[derive(Clone)]
pub struct Hs256Key {
    mac: HmacSha256,
}

impl Hs256Key {
    /// Derives the HMAC block key as RFC 2104 does (a key longer than the
    /// block is hashed first, then zero-padded), which makes construction
    /// infallible for a secret of any length.
    pub fn new(secret: &[u8]) -> Hs256Key {
        let mut block = Key::<HmacSha256>::default();
        if secret.len() > block.len() {
            for (b, d) in block.iter_mut().zip(Sha256::digest(secret)) {
                *b = d;
            }
        } else {
            for (b, s) in block.iter_mut().zip(secret) {
                *b = *s;
            }
        }
        Hs256Key {
            mac: <HmacSha256 as Mac>::new(&block),
        }
    }

    /// HMAC-SHA256 of `data` under this key: what a room's cookies are
    /// signed with.
    pub fn sign(&self, data: &[u8]) -> [u8; 32] {
        let mut mac = self.mac.clone();
        mac.update(data);
        mac.finalize().into_bytes().into()
    }

    /// Whether `signature` is the HMAC of `data`, compared in constant
    /// time so that timing tells nothing about how much of a forgery was
    /// right.
    pub fn verifies(&self, data: &[u8], signature: &[u8]) -> bool {
        let mut mac = self.mac.clone();
        mac.update(data);
        mac.verify_slice(signature).is_ok()
    }
}

/// Never prints the secret: configuration and errors get logged.
impl fmt::Debug for Hs256Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Hs256Key(..)")
    }
}

/// The payload of a verified token.
#[derive(Debug, Clone, PartialEq)]
pub struct Claims(Map<String, Value>);

impl Claims {
    /// A claim as a key part. Integers and booleans have one spelling, so
    /// their JSON text is used; floats, objects and arrays do not make stable
    /// identifiers, and an empty or null claim would lump callers together,
    /// so those are `None`, as is a missing claim.
    pub fn get_str(&self, name: &str) -> Option<String> {
        match self.0.get(name)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

/// Claims from plain JSON, for tests elsewhere in the crate that need a
/// verified caller without signing a token.
#[cfg(test)]
impl From<Map<String, Value>> for Claims {
    fn from(map: Map<String, Value>) -> Claims {
        Claims(map)
    }
}

/// Why a token was refused. Messages may reach a 401 body, so none of them
/// quotes the token or the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwtError {
    TooLong,
    Malformed(&'static str),
    /// The header's `alg`, when it is a short alphanumeric name, else
    /// "unrecognised", so the message cannot carry arbitrary token text.
    Algorithm(String),
    CriticalHeader,
    Signature,
    Expired,
    NotYetValid,
    MissingExpiry,
    Audience,
    Issuer,
}

impl fmt::Display for JwtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JwtError::TooLong => write!(f, "token is longer than {MAX_TOKEN_BYTES} bytes"),
            JwtError::Malformed(why) => write!(f, "malformed token: {why}"),
            JwtError::Algorithm(alg) => {
                write!(f, "token algorithm {alg} is not accepted; only HS256 is")
            }
            JwtError::CriticalHeader => {
                f.write_str("token header has critical extensions, which are not supported")
            }
            JwtError::Signature => f.write_str("token signature is not valid"),
            JwtError::Expired => f.write_str("token has expired"),
            JwtError::NotYetValid => f.write_str("token is not valid yet"),
            JwtError::MissingExpiry => f.write_str("token has no exp, and one is required"),
            JwtError::Audience => f.write_str("token is not meant for this audience (aud)"),
            JwtError::Issuer => f.write_str("token is not from the expected issuer (iss)"),
        }
    }
}

impl std::error::Error for JwtError {}

/// Verifies a compact HS256 token and returns its claims. The signature is
/// checked before the payload is parsed, so an unsigned payload is never read.
pub fn verify(
    token: &str,
    key: &Hs256Key,
    now_s: u64,
    checks: &Validation,
) -> Result<Claims, JwtError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(JwtError::TooLong);
    }
    const PARTS: JwtError = JwtError::Malformed("expected three dot-separated parts");
    let (signing_input, signature) = token.rsplit_once('.').ok_or(PARTS)?;
    let (header, payload) = signing_input.split_once('.').ok_or(PARTS)?;
    if payload.contains('.') {
        return Err(PARTS);
    }

    let header = decode_object(
        header,
        "header is not base64url",
        "header is not a JSON object",
        "header has a duplicate key",
    )?;
    match header.get("alg") {
        Some(Value::String(alg)) if alg == "HS256" => {}
        Some(Value::String(alg)) => return Err(JwtError::Algorithm(describe_alg(alg))),
        _ => return Err(JwtError::Malformed("header has no alg")),
    }
    if header.contains_key("crit") {
        return Err(JwtError::CriticalHeader);
    }

    let signature =
        base64url::decode(signature).ok_or(JwtError::Malformed("signature is not base64url"))?;
    if !key.verifies(signing_input.as_bytes(), &signature) {
        return Err(JwtError::Signature);
    }

    let claims = decode_object(
        payload,
        "payload is not base64url",
        "payload is not a JSON object",
        "payload has a duplicate key",
    )?;
    let exp = numeric_date(&claims, "exp", BAD_EXP)?;
    let nbf = numeric_date(&claims, "nbf", BAD_NBF)?;
    match exp {
        None if checks.require_exp => return Err(JwtError::MissingExpiry),
        Some(exp) if exp.saturating_add(checks.leeway_s) <= now_s => return Err(JwtError::Expired),
        _ => {}
    }
    if nbf.is_some_and(|nbf| nbf > now_s.saturating_add(checks.leeway_s)) {
        return Err(JwtError::NotYetValid);
    }
    if let Some(issuer) = &checks.issuer {
        if !matches!(claims.get("iss"), Some(Value::String(iss)) if iss == issuer) {
            return Err(JwtError::Issuer);
        }
    }
    if let Some(audience) = &checks.audience {
        if !names_audience(claims.get("aud"), audience) {
            return Err(JwtError::Audience);
        }
    }
    Ok(Claims(claims))
}

const BAD_EXP: &str = "exp is not a whole number of seconds from 0 to 253402300799";
const BAD_NBF: &str = "nbf is not a whole number of seconds from 0 to 253402300799";

/// RFC 7519 §4.1.3: `aud` is one string or an array of strings, and the
/// token is for us if one of them is ours.
fn names_audience(aud: Option<&Value>, audience: &str) -> bool {
    match aud {
        Some(Value::String(aud)) => aud == audience,
        Some(Value::Array(auds)) => auds
            .iter()
            .any(|aud| matches!(aud, Value::String(aud) if aud == audience)),
        _ => false,
    }
}

/// The token from an `Authorization` value. RFC 9110 allows several spaces
/// after the scheme, but clients send one; anything other than
/// `Bearer <token>` with exactly one space is treated as no token, so the
/// caller is anonymous rather than half-parsed.
pub fn bearer(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.split_once(' ')?;
    let valid = scheme.eq_ignore_ascii_case("Bearer")
        && !token.is_empty()
        && !token.contains(|c: char| c.is_ascii_whitespace());
    valid.then_some(token)
}

fn decode_object(
    part: &str,
    not_base64: &'static str,
    not_object: &'static str,
    duplicate: &'static str,
) -> Result<Map<String, Value>, JwtError> {
    let bytes = base64url::decode(part).ok_or(JwtError::Malformed(not_base64))?;
    let text = std::str::from_utf8(&bytes).map_err(|_| JwtError::Malformed(not_object))?;
    let object = text.trim_start().starts_with('{');
    match tree::parse(text) {
        Ok(Value::Object(object)) => Ok(object),
        Err(Unreadable::Repeated(_)) if object => Err(JwtError::Malformed(duplicate)),
        _ => Err(JwtError::Malformed(not_object)),
    }
}

/// A NumericDate claim (RFC 7519 §2), narrowed to whole seconds from the
/// epoch to `MAX_NUMERIC_DATE`: issuers write integers, and a fraction, a
/// negative or an exponent is refused rather than rounded.
fn numeric_date(
    claims: &Map<String, Value>,
    name: &str,
    bad: &'static str,
) -> Result<Option<u64>, JwtError> {
    match claims.get(name) {
        None => Ok(None),
        Some(value) => match value.as_u64() {
            Some(date) if date <= MAX_NUMERIC_DATE => Ok(Some(date)),
            _ => Err(JwtError::Malformed(bad)),
        },
    }
}

fn describe_alg(alg: &str) -> String {
    if !alg.is_empty() && alg.len() <= 16 && alg.bytes().all(|b| b.is_ascii_alphanumeric()) {
        alg.to_string()
    } else {
        "unrecognised".to_string()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::http::base64url::encode;
    use serde_json::json;

    const SECRET: &[u8] = b"a test secret of reasonable length";
    const NOW: u64 = 1_700_000_000;

    /// The jwt.io HS256 example, signed with "your-256-bit-secret"
    /// (checked independently with Python's hmac module).
    const JWT_IO: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";

    pub(crate) fn sign_raw(header: &str, payload: &str, secret: &[u8]) -> String {
        let input = format!(
            "{}.{}",
            encode(header.as_bytes()),
            encode(payload.as_bytes())
        );
        let mut mac = HmacSha256::new_from_slice(secret).unwrap();
        mac.update(input.as_bytes());
        format!("{input}.{}", encode(&mac.finalize().into_bytes()))
    }

    fn sign(payload: Value) -> String {
        sign_raw(
            r#"{"alg":"HS256","typ":"JWT"}"#,
            &payload.to_string(),
            SECRET,
        )
    }

    /// No leeway, and nothing required beyond a valid signature and dates.
    fn lenient(leeway_s: u64) -> Validation {
        Validation {
            leeway_s,
            require_exp: false,
            audience: None,
            issuer: None,
        }
    }

    fn check(token: &str) -> Result<Claims, JwtError> {
        verify(token, &Hs256Key::new(SECRET), NOW, &lenient(0))
    }

    fn check_with(token: &str, checks: &Validation) -> Result<Claims, JwtError> {
        verify(token, &Hs256Key::new(SECRET), NOW, checks)
    }

    #[test]
    fn accepts_a_signed_token_and_reads_its_claims() {
        let token = sign(json!({"sub": "user-42", "tier": 3, "exp": NOW + 60, "nbf": NOW}));
        let claims = check(&token).unwrap();
        assert_eq!(claims.get_str("sub").as_deref(), Some("user-42"));
        assert_eq!(claims.get_str("tier").as_deref(), Some("3"));
    }

    #[test]
    fn jwt_io_example_verifies() {
        let claims = verify(
            JWT_IO,
            &Hs256Key::new(b"your-256-bit-secret"),
            NOW,
            &lenient(0),
        )
        .unwrap();
        assert_eq!(claims.get_str("sub").as_deref(), Some("1234567890"));
        assert_eq!(claims.get_str("name").as_deref(), Some("John Doe"));
        assert_eq!(claims.get_str("iat").as_deref(), Some("1516239022"));
    }

    #[test]
    fn wrong_secret_is_rejected() {
        let err = verify(
            JWT_IO,
            &Hs256Key::new(b"your-256-bit-secreT"),
            NOW,
            &lenient(0),
        );
        assert_eq!(err, Err(JwtError::Signature));
        let token = sign_raw(r#"{"alg":"HS256"}"#, "{}", b"another secret");
        assert_eq!(check(&token), Err(JwtError::Signature));
    }

    #[test]
    fn key_derivation_matches_hmac_for_any_secret_length() {
        for len in [0, 1, 32, 63, 64, 65, 200] {
            let secret = vec![0x5a; len];
            let token = sign_raw(r#"{"alg":"HS256"}"#, r#"{"sub":"x"}"#, &secret);
            assert!(
                verify(&token, &Hs256Key::new(&secret), NOW, &lenient(0)).is_ok(),
                "length {len}"
            );
        }
    }

    #[test]
    fn tampered_payload_is_rejected() {
        let token = sign(json!({"sub": "alice"}));
        let (header, rest) = token.split_once('.').unwrap();
        let (_, signature) = rest.split_once('.').unwrap();
        let forged = format!("{header}.{}.{signature}", encode(br#"{"sub":"admin"}"#));
        assert_eq!(check(&forged), Err(JwtError::Signature));
    }

    #[test]
    fn tampered_signature_is_rejected() {
        let token = sign(json!({"sub": "alice"}));
        let (input, signature) = token.rsplit_once('.').unwrap();
        let flipped = if signature.starts_with('A') { 'B' } else { 'A' };
        let forged = format!("{input}.{flipped}{}", &signature[1..]);
        assert_eq!(check(&forged), Err(JwtError::Signature));
        let truncated = format!("{input}.{}", &signature[..40]);
        assert_eq!(check(&truncated), Err(JwtError::Signature));
    }

    #[test]
    fn signature_with_non_canonical_last_character_is_rejected() {
        // 'c' and 'd' differ only in the two bits past the 32-byte signature.
        let forged = format!("{}d", JWT_IO.strip_suffix('c').unwrap());
        let err = verify(
            &forged,
            &Hs256Key::new(b"your-256-bit-secret"),
            NOW,
            &lenient(0),
        );
        assert_eq!(err, Err(JwtError::Malformed("signature is not base64url")));
    }

    #[test]
    fn alg_none_with_empty_signature_is_rejected() {
        let token = format!(
            "{}.{}.",
            encode(br#"{"alg":"none","typ":"JWT"}"#),
            encode(br#"{"sub":"admin"}"#)
        );
        assert_eq!(check(&token), Err(JwtError::Algorithm("none".into())));
    }

    #[test]
    fn other_algorithms_are_rejected_even_when_hmac_signed() {
        for alg in ["HS512", "HS384", "RS256", "hs256", "HS256 "] {
            let token = sign_raw(&json!({ "alg": alg }).to_string(), "{}", SECRET);
            assert!(
                matches!(check(&token), Err(JwtError::Algorithm(_))),
                "{alg}"
            );
        }
        let token = sign_raw(r#"{"alg":"HS512"}"#, "{}", SECRET);
        assert_eq!(check(&token), Err(JwtError::Algorithm("HS512".into())));
    }

    #[test]
    fn missing_or_non_string_alg_is_rejected() {
        for header in [r#"{"typ":"JWT"}"#, r#"{"alg":null}"#, r#"{"alg":256}"#] {
            let token = sign_raw(header, "{}", SECRET);
            assert_eq!(check(&token), Err(JwtError::Malformed("header has no alg")));
        }
    }

    #[test]
    fn crit_header_is_rejected() {
        let token = sign_raw(
            r#"{"alg":"HS256","crit":["b64"],"b64":false}"#,
            "{}",
            SECRET,
        );
        assert_eq!(check(&token), Err(JwtError::CriticalHeader));
    }

    #[test]
    fn expired_token_is_rejected_unless_within_leeway() {
        let token = sign(json!({"exp": NOW - 30}));
        let key = Hs256Key::new(SECRET);
        assert_eq!(
            verify(&token, &key, NOW, &lenient(0)),
            Err(JwtError::Expired)
        );
        assert_eq!(
            verify(&token, &key, NOW, &lenient(30)),
            Err(JwtError::Expired)
        );
        assert!(verify(&token, &key, NOW, &lenient(31)).is_ok());
        let at_now = sign(json!({ "exp": NOW }));
        assert_eq!(check(&at_now), Err(JwtError::Expired));
    }

    #[test]
    fn dates_must_be_whole_seconds_in_range() {
        let bad_exp = JwtError::Malformed(BAD_EXP);
        for exp in [
            json!(NOW as f64 + 0.5),
            json!(NOW as f64),
            json!(-1),
            json!(i64::MIN),
            json!(MAX_NUMERIC_DATE + 1),
            json!(u64::MAX),
            json!(1e300),
        ] {
            let token = sign(json!({ "exp": exp }));
            assert_eq!(check(&token), Err(bad_exp.clone()), "exp {exp}");
        }
        for nbf in [json!(-1), json!(1.5), json!(u64::MAX)] {
            let token = sign(json!({ "nbf": nbf }));
            assert_eq!(
                check(&token),
                Err(JwtError::Malformed(BAD_NBF)),
                "nbf {nbf}"
            );
        }
        let as_written = sign_raw(r#"{"alg":"HS256"}"#, r#"{"exp":1.7000001e9}"#, SECRET);
        assert_eq!(check(&as_written), Err(bad_exp));
        assert!(check(&sign(json!({ "exp": MAX_NUMERIC_DATE, "nbf": 0 }))).is_ok());
    }

    #[test]
    fn a_huge_leeway_saturates_instead_of_overflowing() {
        let key = Hs256Key::new(SECRET);
        let far = sign(json!({ "exp": MAX_NUMERIC_DATE, "nbf": MAX_NUMERIC_DATE }));
        assert!(verify(&far, &key, NOW, &lenient(u64::MAX)).is_ok());
        assert!(verify(&far, &key, 0, &lenient(u64::MAX)).is_ok());
        let old = sign(json!({ "exp": 0 }));
        assert_eq!(
            verify(&old, &key, u64::MAX, &lenient(1)),
            Err(JwtError::Expired)
        );
    }

    #[test]
    fn duplicate_keys_are_refused_at_every_depth() {
        let dup_payload = JwtError::Malformed("payload has a duplicate key");
        for payload in [
            r#"{"sub":"alice","sub":"admin"}"#,
            r#"{"sub":"alice","s\u0075b":"admin"}"#,
            r#"{"exp":1,"exp":99999999999}"#,
            r#"{"ctx":{"role":"user","role":"admin"}}"#,
            r#"{"list":[{"a":1,"a":2}]}"#,
        ] {
            let token = sign_raw(r#"{"alg":"HS256"}"#, payload, SECRET);
            assert_eq!(check(&token), Err(dup_payload.clone()), "{payload}");
        }
        for header in [
            r#"{"alg":"none","alg":"HS256"}"#,
            r#"{"alg":"HS256","alg":"HS256"}"#,
        ] {
            let token = sign_raw(header, "{}", SECRET);
            assert_eq!(
                check(&token),
                Err(JwtError::Malformed("header has a duplicate key")),
                "{header}"
            );
        }
        let same_name_elsewhere = sign_raw(
            r#"{"alg":"HS256"}"#,
            r#"{"a":{"a":1},"b":[{"a":1},{"a":2}],"sub":"x"}"#,
            SECRET,
        );
        assert!(check(&same_name_elsewhere).is_ok());
    }

    #[test]
    fn require_exp_refuses_a_token_that_never_expires() {
        let required = Validation {
            require_exp: true,
            ..lenient(0)
        };
        let forever = sign(json!({ "sub": "alice" }));
        assert_eq!(
            check_with(&forever, &required),
            Err(JwtError::MissingExpiry)
        );
        assert!(check(&forever).is_ok(), "allowed when not required");
        let expiring = sign(json!({ "sub": "alice", "exp": NOW + 60 }));
        assert!(check_with(&expiring, &required).is_ok());
        let forged = sign_raw(
            r#"{"alg":"HS256"}"#,
            &json!({ "exp": NOW + 60 }).to_string(),
            b"guess",
        );
        assert_eq!(check_with(&forged, &required), Err(JwtError::Signature));
    }

    #[test]
    fn audience_must_be_named_when_configured() {
        let checks = Validation {
            audience: Some("api.example.com".into()),
            ..lenient(0)
        };
        for aud in [
            json!("api.example.com"),
            json!(["other", "api.example.com"]),
        ] {
            let token = sign(json!({ "sub": "a", "aud": aud }));
            assert!(check_with(&token, &checks).is_ok(), "aud {aud}");
        }
        for aud in [
            json!("other"),
            json!("API.example.com"),
            json!(["other"]),
            json!([]),
            json!([["api.example.com"]]),
            json!(7),
            json!(null),
            json!({ "aud": "api.example.com" }),
        ] {
            let token = sign(json!({ "sub": "a", "aud": aud }));
            assert_eq!(
                check_with(&token, &checks),
                Err(JwtError::Audience),
                "aud {aud}"
            );
        }
        let without = sign(json!({ "sub": "a" }));
        assert_eq!(check_with(&without, &checks), Err(JwtError::Audience));
        let forged = sign_raw(
            r#"{"alg":"HS256"}"#,
            r#"{"aud":"api.example.com"}"#,
            b"guess",
        );
        assert_eq!(check_with(&forged, &checks), Err(JwtError::Signature));
        let other = sign(json!({ "sub": "a", "aud": "other" }));
        assert!(check(&other).is_ok(), "unchecked when not configured");
    }

    #[test]
    fn issuer_must_match_when_configured() {
        let checks = Validation {
            issuer: Some("https://issuer.example".into()),
            ..lenient(0)
        };
        let good = sign(json!({ "iss": "https://issuer.example" }));
        assert!(check_with(&good, &checks).is_ok());
        for iss in [
            json!("https://issuer.example/"),
            json!("https://evil.example"),
            json!(["https://issuer.example"]),
            json!(null),
        ] {
            let token = sign(json!({ "iss": iss }));
            assert_eq!(
                check_with(&token, &checks),
                Err(JwtError::Issuer),
                "iss {iss}"
            );
        }
        assert_eq!(check_with(&sign(json!({})), &checks), Err(JwtError::Issuer));
        let forged = sign_raw(
            r#"{"alg":"HS256"}"#,
            r#"{"iss":"https://issuer.example"}"#,
            b"guess",
        );
        assert_eq!(check_with(&forged, &checks), Err(JwtError::Signature));
    }

    #[test]
    fn not_yet_valid_token_is_rejected_unless_within_leeway() {
        let token = sign(json!({"nbf": NOW + 30}));
        let key = Hs256Key::new(SECRET);
        assert_eq!(
            verify(&token, &key, NOW, &lenient(0)),
            Err(JwtError::NotYetValid)
        );
        assert_eq!(
            verify(&token, &key, NOW, &lenient(29)),
            Err(JwtError::NotYetValid)
        );
        assert!(verify(&token, &key, NOW, &lenient(30)).is_ok());
        assert!(check(&sign(json!({ "nbf": NOW }))).is_ok());
    }

    #[test]
    fn dates_that_are_not_numbers_are_rejected() {
        let exp = sign(json!({"exp": (NOW + 60).to_string()}));
        assert_eq!(check(&exp), Err(JwtError::Malformed(BAD_EXP)));
        let nbf = sign(json!({"nbf": null}));
        assert_eq!(check(&nbf), Err(JwtError::Malformed(BAD_NBF)));
    }

    #[test]
    fn wrong_number_of_parts_is_rejected() {
        let token = sign(json!({}));
        let parts = JwtError::Malformed("expected three dot-separated parts");
        let (two, _) = token.rsplit_once('.').unwrap();
        assert_eq!(check(two), Err(parts.clone()));
        assert_eq!(
            check(&format!("{token}.{}", encode(b"x"))),
            Err(parts.clone())
        );
        assert_eq!(check(""), Err(parts));
    }

    #[test]
    fn bad_base64_is_rejected() {
        let token = sign(json!({"sub": "alice"}));
        let (header, rest) = token.split_once('.').unwrap();
        let not_base64 = JwtError::Malformed("header is not base64url");
        assert_eq!(check(&format!("{header}=.{rest}")), Err(not_base64.clone()));
        assert_eq!(check(&format!("+{header}.{rest}")), Err(not_base64.clone()));
        assert_eq!(check(&format!("{header}A.{rest}")), Err(not_base64));
        let (input, signature) = token.rsplit_once('.').unwrap();
        assert_eq!(
            check(&format!("{input}.{signature}=")),
            Err(JwtError::Malformed("signature is not base64url"))
        );
    }

    #[test]
    fn headers_and_payloads_must_be_json_objects() {
        let header = sign_raw(r#"["alg","HS256"]"#, "{}", SECRET);
        assert_eq!(
            check(&header),
            Err(JwtError::Malformed("header is not a JSON object"))
        );
        let not_object = JwtError::Malformed("payload is not a JSON object");
        for payload in ["[]", "42", r#""sub""#, "{not json", ""] {
            let token = sign_raw(r#"{"alg":"HS256"}"#, payload, SECRET);
            assert_eq!(check(&token), Err(not_object.clone()), "{payload}");
        }
    }

    #[test]
    fn oversized_token_is_rejected_before_decoding() {
        let token = sign(json!({ "pad": "x".repeat(MAX_TOKEN_BYTES) }));
        assert_eq!(check(&token), Err(JwtError::TooLong));
        assert_eq!(
            check(&"!".repeat(MAX_TOKEN_BYTES + 1)),
            Err(JwtError::TooLong)
        );
        let fits = sign(json!({ "pad": "x".repeat(MAX_TOKEN_BYTES / 2) }));
        assert!(fits.len() <= MAX_TOKEN_BYTES && check(&fits).is_ok());
    }

    #[test]
    fn claims_as_key_parts() {
        let token = sign(json!({
            "s": "abc", "i": -7, "u": u64::MAX, "t": true, "f": 1.5,
            "e": "", "n": null, "o": {"a": 1}, "a": [1]
        }));
        let claims = check(&token).unwrap();
        assert_eq!(claims.get_str("s").as_deref(), Some("abc"));
        assert_eq!(claims.get_str("i").as_deref(), Some("-7"));
        assert_eq!(claims.get_str("u").as_deref(), Some("18446744073709551615"));
        assert_eq!(claims.get_str("t").as_deref(), Some("true"));
        for name in ["f", "e", "n", "o", "a", "missing"] {
            assert_eq!(claims.get_str(name), None, "{name}");
        }
    }

    #[test]
    fn debug_and_errors_do_not_leak_secrets_or_token_text() {
        assert_eq!(format!("{:?}", Hs256Key::new(b"hunter2")), "Hs256Key(..)");
        let token = sign_raw(r#"{"alg":"<script>secret-stuff</script>"}"#, "{}", SECRET);
        let err = check(&token).unwrap_err();
        assert_eq!(err, JwtError::Algorithm("unrecognised".into()));
        assert!(!err.to_string().contains("script"));
        assert_eq!(
            JwtError::Algorithm("HS512".into()).to_string(),
            "token algorithm HS512 is not accepted; only HS256 is"
        );
    }

    #[test]
    fn bearer_takes_exactly_one_token_after_the_scheme() {
        assert_eq!(bearer("Bearer x"), Some("x"));
        assert_eq!(bearer("bearer x"), Some("x"));
        assert_eq!(bearer("BEARER a.b.c"), Some("a.b.c"));
        assert_eq!(bearer("Bearer  x"), None);
        assert_eq!(bearer("Basic x"), None);
        assert_eq!(bearer("Bearer"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("Bearer x y"), None);
        assert_eq!(bearer("Bearer x\ty"), None);
        assert_eq!(bearer("Bearerx y"), None);
    }
}
