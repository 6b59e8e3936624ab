//! Problem details (RFC 9457) for every error Sluice answers itself.
//!
//! A quota refusal uses the IANA-registered `quota-exceeded` type. Other
//! errors use `about:blank` with the status phrase as title, as RFC 9457
//! recommends when no more specific type is defined, and carry a stable
//! `code` extension for machines, plus `field` when a named input is wrong.

use serde_json::{Map, Value};

pub const CONTENT_TYPE: &str = "application/problem+json";

pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub status: u16,
    body: Map<String, Value>,
}

impl Problem {
    /// A problem of type `about:blank`; `code` is the stable machine name.
    pub fn new(status: u16, code: &str, detail: impl Into<String>) -> Problem {
        let mut body = Map::new();
        body.insert("type".into(), "about:blank".into());
        body.insert("title".into(), reason_phrase(status).into());
        body.insert("status".into(), status.into());
        body.insert("detail".into(), detail.into().into());
        body.insert("code".into(), code.into());
        Problem { status, body }
    }

    /// A 400 that names the input at fault.
    pub fn invalid(field: &str, detail: impl Into<String>) -> Problem {
        Problem::new(400, "invalid-request", detail).with("field", field)
    }

    /// The 429 for a refused request, listing the policies that refused it.
    pub fn quota_exceeded<'a>(
        detail: impl Into<String>,
        violated: impl IntoIterator<Item = &'a str>,
    ) -> Problem {
        let violated: Vec<Value> = violated.into_iter().map(Value::from).collect();
        let mut problem = Problem::new(429, "quota-exceeded", detail);
        problem.body.insert("type".into(), QUOTA_EXCEEDED.into());
        problem
            .body
            .insert("title".into(), "Request quota exceeded".into());
        problem.with("violated-policies", violated)
    }

    /// Adds an extension member.
    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Problem {
        self.body.insert(name.into(), value.into());
        self
    }

    pub fn detail(&self) -> &str {
        self.body
            .get("detail")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn to_json(&self) -> String {
        Value::Object(self.body.clone()).to_string()
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
