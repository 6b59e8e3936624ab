//! The answer of a rule an operator paused or closed: `503`, code
//! `paused`, with `Retry-After`; or `410`, code `closed` ("sold out"),
//! without it. Nothing was decided, so it carries no RateLimit fields.

use super::Answer;
use crate::control::{Control, RuleState};
use crate::http::headers::retry_after;
use crate::http::problem::{Code, Problem};
use crate::ledger::stock::SOLD_OUT;

pub fn halted(rule_id: &str, control: &Control) -> Answer {
    let because = if control.reason.is_empty() {
        String::new()
    } else {
        format!(": {}", control.reason)
    };
    let retry = control.retry_after_ms();
    let (code, detail) = match (control.state, retry) {
        (RuleState::Closed, _) if control.reason == SOLD_OUT => {
            (Code::Closed, format!("rule {rule_id} is sold out"))
        }
        (RuleState::Closed, _) | (_, None) => (
            Code::Closed,
            format!("rule {rule_id} is closed by an operator{because}"),
        ),
        (_, Some(ms)) => (
            Code::Paused,
            format!(
                "rule {rule_id} is paused by an operator{because}; retry in {} s",
                retry_after(ms)
            ),
        ),
    };
    let problem = Problem::new(code, detail)
        .with("rule", rule_id)
        .with("reason", control.reason.as_str());
    let fields = retry
        .map(|ms| vec![("retry-after", retry_after(ms))])
        .unwrap_or_default();
    Answer { problem, fields }
}
