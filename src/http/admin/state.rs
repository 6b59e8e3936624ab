//! `PUT {prefix}/admin/rules/{rule}/state`: `{"state": "open" | "paused" |
//! "closed", "reason": "..."}`, read like every API body.

use serde_json::Value;

use super::super::body;
use super::super::problem::Problem;
use crate::bounds::{reason_fits, REASON_RULE};
use crate::control::{Control, RuleState};

/// The state a body asks for, set at `now_ms`; a problem naming the field
/// otherwise. The reason is shown in every answer the state gives, so it
/// is bounded and holds no control characters. Read by hand
/// ([`body::fields`]): two fields do not need a body type of their own.
pub fn parse_state(
    content_type: Option<&str>,
    body: &[u8],
    now_ms: u64,
) -> Result<Control, Problem> {
    // Read with `get`: a map's `remove` would link the B-tree's
    // rebalancing code into the worker for these two fields.
    let fields = body::fields(body::json_object(content_type, body)?, &["state", "reason"])?;
    let state = match fields.get("state") {
        Some(Value::String(name)) => RuleState::named(name),
        _ => None,
    }
    .ok_or_else(|| {
        Problem::invalid(
            "state",
            "state is required: \"open\", \"paused\" or \"closed\"",
        )
    })?;
    let reason = match fields.get("reason") {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(reason)) => Some(reason.clone()),
        Some(_) => None,
    }
    .filter(|r| reason_fits(r))
    .ok_or_else(|| Problem::invalid("reason", REASON_RULE))?;
    Ok(Control {
        state,
        reason,
        set_ms: now_ms,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn parse(body: Value) -> Result<Control, Problem> {
        parse_state(Some("application/json"), body.to_string().as_bytes(), 9)
    }

    fn field(body: Value) -> String {
        let problem = parse(body).unwrap_err();
        assert_eq!(problem.status, 400);
        let body: Value = serde_json::from_str(&problem.to_json()).unwrap();
        body["field"].as_str().unwrap_or_default().to_string()
    }

    #[test]
    fn a_state_is_open_paused_or_closed_with_an_optional_reason() {
        let paused = parse(json!({"state": "paused", "reason": "stock count"})).unwrap();
        assert_eq!(
            paused,
            Control {
                state: RuleState::Paused,
                reason: "stock count".into(),
                set_ms: 9
            }
        );
        assert_eq!(parse(json!({"state": "closed"})).unwrap().reason, "");
        assert_eq!(
            parse(json!({"state": "open", "reason": null}))
                .unwrap()
                .state,
            RuleState::Open
        );
    }

    #[test]
    fn bad_bodies_name_their_field() {
        assert_eq!(field(json!({})), "state");
        assert_eq!(field(json!({"state": "sold-out"})), "state");
        assert_eq!(field(json!({"state": "Paused"})), "state");
        assert_eq!(field(json!({"state": 1})), "state");
        assert_eq!(field(json!({"state": "paused", "reason": 5})), "reason");
        assert_eq!(
            field(json!({"state": "paused", "reason": "x".repeat(201)})),
            "reason"
        );
        assert_eq!(
            field(json!({"state": "paused", "reason": "a\u{7}b"})),
            "reason"
        );
        assert_eq!(field(json!({"state": "paused", "for": "1m"})), "for");
        assert_eq!(field(json!(["paused"])), "body");
        let problem = parse_state(Some("text/plain"), b"{}", 0).unwrap_err();
        assert!(problem.to_json().contains("content-type"));
    }
}
