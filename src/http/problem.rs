//! Problem details (RFC 9457) for every error Sluice answers itself.
//!
//! A quota refusal uses the IANA-registered `quota-exceeded` type. Other
//! errors use `about:blank` with the status phrase as title, as RFC 9457
//! recommends when no more specific type is defined, and carry a stable
//! `code` extension for machines, plus `field` when a named input is wrong.

use serde_json::{Map, Value};

pub const CONTENT_TYPE: &str = "application/problem+json";

pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// Every `code` Sluice answers with, one per kind of failure, so a caller
/// can match on it; the wire strings are part of the API and never change.
/// Each carries its status, except a ban, whose status the rule chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// A body, query or path input is wrong; `field` names it.
    InvalidRequest,
    /// The rule's key could not be derived from the request.
    MissingKey,
    /// The request carries a keyed part twice, or in a form readers
    /// disagree on, so it could choose its own key.
    AmbiguousKey,
    /// No token, or the wrong one, for the API or the admin API.
    Unauthorized,
    /// A JWT failed verification and the config rejects such callers.
    InvalidToken,
    /// The client is on a deny list.
    Denied,
    /// The key is banned, by a rule or an operator: 429 unless the rule
    /// says 403.
    Banned {
        status: u16,
    },
    NotFound,
    NoSuchLease,
    NoSuchReservation,
    MethodNotAllowed,
    /// An API call names a policy the key holds with another window or
    /// algorithm.
    PolicyConflict,
    /// A lease asked with another limit than the key's held leases.
    LeaseLimitConflict,
    /// The manual ban list is full.
    TooManyBans,
    BodyTooLarge,
    QuotaExceeded,
    /// The quota is held by requests still in flight (reservations not yet
    /// kept or refunded): a short wait may be enough.
    Pending,
    /// Too many failed admin logins from one client.
    TooManyFailures,
    Internal,
    InvalidConfig,
    OriginUnreachable,
    /// A key's object could not decide in time.
    Unavailable,
    /// The demo origin is answering too many requests.
    DemoBusy,
    /// A request came back to Sluice through its own origin.
    LoopDetected,
    /// An operator paused the rule: come back later (`Retry-After`).
    Paused,
    /// An operator closed the rule ("sold out"): there is nothing to come
    /// back for.
    Closed,
    /// A request without a waiting room's session that does not join it
    /// (not a page load nor an API call): `room` names the room.
    RoomRequired,
}

impl Code {
    /// The stable machine name in the body's `code` member.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidRequest => "invalid-request",
            Code::MissingKey => "missing-key",
            Code::AmbiguousKey => "ambiguous-key",
            Code::Unauthorized => "unauthorized",
            Code::InvalidToken => "invalid-token",
            Code::Denied => "denied",
            Code::Banned { .. } => "banned",
            Code::NotFound => "not-found",
            Code::NoSuchLease => "no-such-lease",
            Code::NoSuchReservation => "no-such-reservation",
            Code::MethodNotAllowed => "method-not-allowed",
            Code::PolicyConflict => "policy-conflict",
            Code::LeaseLimitConflict => "lease-limit-conflict",
            Code::TooManyBans => "too-many-bans",
            Code::BodyTooLarge => "body-too-large",
            Code::QuotaExceeded => "quota-exceeded",
            Code::Pending => "pending",
            Code::TooManyFailures => "too-many-failures",
            Code::Internal => "internal",
            Code::InvalidConfig => "invalid-config",
            Code::OriginUnreachable => "origin-unreachable",
            Code::Unavailable => "unavailable",
            Code::DemoBusy => "demo-busy",
            Code::LoopDetected => "loop-detected",
            Code::Paused => "paused",
            Code::Closed => "closed",
            Code::RoomRequired => "room-required",
        }
    }

    pub fn status(self) -> u16 {
        match self {
            Code::InvalidRequest | Code::MissingKey | Code::AmbiguousKey => 400,
            Code::Unauthorized | Code::InvalidToken => 401,
            Code::Denied | Code::RoomRequired => 403,
            Code::Banned { status } => status,
            Code::NotFound | Code::NoSuchLease | Code::NoSuchReservation => 404,
            Code::MethodNotAllowed => 405,
            Code::PolicyConflict | Code::LeaseLimitConflict | Code::TooManyBans => 409,
            Code::Closed => 410,
            Code::BodyTooLarge => 413,
            Code::QuotaExceeded | Code::Pending | Code::TooManyFailures => 429,
            Code::Internal | Code::InvalidConfig => 500,
            Code::OriginUnreachable => 502,
            Code::Unavailable | Code::DemoBusy | Code::Paused => 503,
            Code::LoopDetected => 508,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub status: u16,
    body: Map<String, Value>,
}

impl Problem {
    /// A problem of type `about:blank`, with the code's status.
    pub fn new(code: Code, detail: impl Into<String>) -> Problem {
        Problem::coded(code, detail.into())
    }

    /// `new`'s body, one copy for every caller: inlined, each `Problem`
    /// built in a handler was five map inserts of its own in the wasm.
    #[inline(never)]
    fn coded(code: Code, detail: String) -> Problem {
        let status = code.status();
        let mut body = Map::new();
        body.insert("type".into(), "about:blank".into());
        body.insert("title".into(), reason_phrase(status).into());
        body.insert("status".into(), status.into());
        body.insert("detail".into(), detail.into());
        body.insert("code".into(), code.as_str().into());
        Problem { status, body }
    }

    /// A 400 that names the input at fault.
    pub fn invalid(field: &str, detail: impl Into<String>) -> Problem {
        Problem::invalid_field(field, detail.into())
    }

    #[inline(never)]
    fn invalid_field(field: &str, detail: String) -> Problem {
        Problem::coded(Code::InvalidRequest, detail).with_value("field", field.into())
    }

    /// The 429 for a refused request, listing the policies that refused it.
    pub fn quota_exceeded<'a>(
        detail: impl Into<String>,
        violated: impl IntoIterator<Item = &'a str>,
    ) -> Problem {
        Problem::quota_refusal(Code::QuotaExceeded, detail, violated)
    }

    /// A quota refusal with its `code`: `quota-exceeded`, or `pending` when
    /// only requests still in flight hold the quota. Both are of the
    /// registered `quota-exceeded` type: the quota is full either way.
    pub fn quota_refusal<'a>(
        code: Code,
        detail: impl Into<String>,
        violated: impl IntoIterator<Item = &'a str>,
    ) -> Problem {
        let violated: Vec<Value> = violated.into_iter().map(Value::from).collect();
        let mut problem = Problem::new(code, detail);
        problem.body.insert("type".into(), QUOTA_EXCEEDED.into());
        problem
            .body
            .insert("title".into(), "Request quota exceeded".into());
        problem.with("violated-policies", violated)
    }

    /// Adds an extension member.
    pub fn with(self, name: &str, value: impl Into<Value>) -> Problem {
        self.with_value(name, value.into())
    }

    /// `with`'s body, one copy for every caller (as `coded`).
    #[inline(never)]
    fn with_value(mut self, name: &str, value: Value) -> Problem {
        self.body.insert(name.into(), value);
        self
    }

    pub fn detail(&self) -> &str {
        self.body
            .get("detail")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// The body as compact JSON, written by [`crate::json::Write`], not
    /// `Value`'s `Display`, which also links a pretty-printer and a writer
    /// of its own.
    pub fn to_json(&self) -> String {
        crate::json::to_string(&self.body)
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_exceeded_has_the_registered_type_and_policies() {
        let p = Problem::quota_exceeded("slow down", ["api"]);
        let body: Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(body["type"], QUOTA_EXCEEDED);
        assert_eq!(body["status"], 429);
        assert_eq!(body["violated-policies"], serde_json::json!(["api"]));
        assert_eq!(body["detail"], "slow down");
    }

    #[test]
    fn a_code_answers_its_status_and_wire_name() {
        let p = Problem::new(Code::LeaseLimitConflict, "held with limit 1");
        let body: Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!((p.status, &body["status"]), (409, &serde_json::json!(409)));
        assert_eq!(body["code"], "lease-limit-conflict");
        assert_eq!(body["title"], "Conflict");
        let banned = Problem::new(Code::Banned { status: 403 }, "banned");
        assert_eq!(
            (banned.status, banned.to_json().contains("\"banned\"")),
            (403, true)
        );
    }

    #[test]
    fn invalid_names_the_field() {
        let p = Problem::invalid("limit", "limit must be positive");
        let body: Value = serde_json::from_str(&p.to_json()).unwrap();
        assert_eq!(p.status, 400);
        assert_eq!(body["type"], "about:blank");
        assert_eq!(body["title"], "Bad Request");
        assert_eq!(body["field"], "limit");
        assert_eq!(p.detail(), "limit must be positive");
    }
}
