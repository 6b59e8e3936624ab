//! The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-11)
//! and `Retry-After`: `RateLimit-Policy` announces each policy's quota and
//! window, `RateLimit` what remains and `t`, the seconds until one more unit
//! fits; seconds round up, so a client that waits as told is never early.

use crate::ledger::{Outcome, PolicyDecision};
use crate::limit::Retry;

/// Header fields to set on a response, in order.
pub type Fields = Vec<(&'static str, String)>;

/// The RateLimit fields for every policy of an outcome (none without a
/// policy), and `Retry-After` when it refused and waiting can help.
pub fn limit_fields(outcome: &Outcome) -> Fields {
    let mut fields = Fields::new();
    if let Some(value) = ratelimit_policy(outcome) {
        fields.push(("ratelimit-policy", value));
    }
    if let Some(value) = ratelimit(outcome) {
        fields.push(("ratelimit", value));
    }
    if !outcome.allowed {
        if let Some(value) = retry_after_field(outcome.retry) {
            fields.push(("retry-after", value));
        }
    }
    fields
}

/// One member per rate policy, and one for a concurrency limit:
/// `"api.concurrency";q=10;qu="concurrent-requests"` (no window). `None`
/// when there is nothing to announce: no field beats an empty one.
pub fn ratelimit_policy(outcome: &Outcome) -> Option<String> {
    let rates = outcome.policies.iter().map(|p| {
        format!(
            "{};q={};w={}",
            sf_string(&p.name),
            p.decision.limit,
            window_secs(p.window_ms)
        )
    });
    let lease = outcome.lease.iter().map(|l| {
        format!(
            "{};q={};qu=\"concurrent-requests\"",
            sf_string(&l.name),
            l.limit
        )
    });
    list(rates.chain(lease))
}

/// What remains of each policy, and the free slots of a concurrency limit;
/// `None` when there is nothing to report.
pub fn ratelimit(outcome: &Outcome) -> Option<String> {
    let rates = outcome.policies.iter().map(member);
    let lease = outcome.lease.iter().map(|l| {
        format!(
            "{};r={}",
            sf_string(&l.name),
            l.limit.saturating_sub(l.in_flight)
        )
    });
    list(rates.chain(lease))
}

/// A structured-field list of `members`, or `None` if there are none.
fn list(members: impl Iterator<Item = String>) -> Option<String> {
    let members: Vec<String> = members.collect();
    (!members.is_empty()).then(|| members.join(", "))
}

fn member(p: &PolicyDecision) -> String {
    format!(
        "{};r={};t={}",
        sf_string(&p.name),
        p.decision.remaining,
        ceil_secs(p.decision.reset_ms)
    )
}

/// `Retry-After` in whole seconds, at least 1 so a client never spins.
pub fn retry_after(ms: u64) -> String {
    ceil_secs(ms).max(1).to_string()
}

/// `Retry-After` for a refusal, or `None` when no wait can help (the request
/// costs more than a limit): a made-up delay would only send the client back
/// to be refused again.
pub fn retry_after_field(retry: Retry) -> Option<String> {
    retry.ms().map(retry_after)
}

pub fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

/// A window in whole seconds for `w`: rounded up, and never 0.
pub fn window_secs(ms: u64) -> u64 {
    ceil_secs(ms).max(1)
}

/// A structured-field string: quoted, with `"` and `\` escaped. Policy names
/// are validated to printable ASCII before they get here.
fn sf_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::LeaseOutcome;
    use crate::limit::Decision;

    fn policy(
        name: &str,
        limit: u64,
        window_ms: u64,
        remaining: u64,
        reset_ms: u64,
    ) -> PolicyDecision {
        PolicyDecision {
            name: name.into(),
            window_ms,
            decision: Decision {
                allowed: remaining > 0,
                limit,
                remaining,
                reset_ms,
                retry: Retry::NOW,
            },
        }
    }

    fn outcome(policies: Vec<PolicyDecision>) -> Outcome {
        Outcome {
            allowed: true,
            policies,
            ban: None,
            lease: None,
            pending: false,
            conflict: None,
            halt: None,
            retry: Retry::NOW,
            spread: None,
            blocks: Vec::new(),
            whole: None,
        }
    }

    #[test]
    fn one_member_per_policy() {
        let o = outcome(vec![
            policy("api", 100, 60_000, 42, 16_001),
            policy("day", 1000, 86_400_000, 900, 500),
        ]);
        assert_eq!(
            ratelimit_policy(&o).unwrap(),
            r#""api";q=100;w=60, "day";q=1000;w=86400"#
        );
        assert_eq!(
            ratelimit(&o).unwrap(),
            r#""api";r=42;t=17, "day";r=900;t=1"#
        );
    }

    #[test]
    fn sub_second_windows_round_up() {
        let o = outcome(vec![policy("burst", 5, 500, 0, 0)]);
        assert_eq!(ratelimit_policy(&o).unwrap(), r#""burst";q=5;w=1"#);
        assert_eq!(ratelimit(&o).unwrap(), r#""burst";r=0;t=0"#);
    }

    #[test]
    fn a_concurrency_limit_counts_concurrent_requests() {
        let mut o = outcome(vec![policy("api", 10, 1000, 9, 1000)]);
        o.lease = Some(LeaseOutcome {
            name: "api.concurrency".into(),
            limit: 10,
            in_flight: 3,
            lease: None,
            refused: false,
            retry_after_ms: 0,
            error: None,
        });
        assert_eq!(
            ratelimit_policy(&o).unwrap(),
            r#""api";q=10;w=1, "api.concurrency";q=10;qu="concurrent-requests""#
        );
        assert_eq!(
            ratelimit(&o).unwrap(),
            r#""api";r=9;t=1, "api.concurrency";r=7"#
        );
    }

    #[test]
    fn windows_of_a_millisecond_and_of_30_days_and_a_quota_of_one() {
        let o = outcome(vec![
            policy("ms", 1, 1, 0, 1),
            policy("month", 1, 30 * 86_400_000, 1, 0),
            policy("none", 2000, 0, 1, 1),
        ]);
        assert_eq!(
            ratelimit_policy(&o).unwrap(),
            r#""ms";q=1;w=1, "month";q=1;w=2592000, "none";q=2000;w=1"#
        );
        assert_eq!(
            ratelimit(&o).unwrap(),
            r#""ms";r=0;t=1, "month";r=1;t=0, "none";r=1;t=1"#
        );
    }

    #[test]
    fn no_policy_means_no_field() {
        let o = outcome(Vec::new());
        assert_eq!((ratelimit_policy(&o), ratelimit(&o)), (None, None));
    }

    #[test]
    fn a_request_that_can_never_pass_gets_no_retry_after() {
        assert_eq!(retry_after_field(Retry::Never), None);
        assert_eq!(retry_after_field(Retry::After(1500)).as_deref(), Some("2"));
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after(1), "1");
        assert_eq!(retry_after(1000), "1");
        assert_eq!(retry_after(1001), "2");
        assert_eq!(retry_after(0), "1");
    }

    #[test]
    fn names_are_escaped() {
        assert_eq!(sf_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }
}
