//! The IETF RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-11)
//! and `Retry-After`.
//!
//! `RateLimit-Policy: "api";q=100;w=60` announces each policy (quota and
//! window in seconds); `RateLimit: "api";r=42;t=17` reports what remains and
//! the seconds until the window frees a unit. Both are structured-field
//! lists, one member per policy. Seconds are rounded up, so a client that
//! waits `t` or `Retry-After` seconds never comes back too early.

use crate::ledger::PolicyDecision;

pub fn ratelimit_policy(policies: &[PolicyDecision]) -> String {
    join(policies, |p| {
        format!(
            "{};q={};w={}",
            sf_string(&p.name),
            p.decision.limit,
            ceil_secs(p.window_ms)
        )
    })
}

pub fn ratelimit(policies: &[PolicyDecision]) -> String {
    join(policies, |p| {
        format!(
            "{};r={};t={}",
            sf_string(&p.name),
            p.decision.remaining,
            ceil_secs(p.decision.reset_ms)
        )
    })
}

/// `Retry-After` in whole seconds, at least 1 so a client never spins.
pub fn retry_after(ms: u64) -> String {
    ceil_secs(ms).max(1).to_string()
}

pub fn ceil_secs(ms: u64) -> u64 {
    ms.div_ceil(1000)
}

fn join(policies: &[PolicyDecision], member: impl Fn(&PolicyDecision) -> String) -> String {
    policies.iter().map(member).collect::<Vec<_>>().join(", ")
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
                retry_after_ms: 0,
            },
        }
    }

    #[test]
    fn one_member_per_policy() {
        let p = [
            policy("api", 100, 60_000, 42, 16_001),
            policy("day", 1000, 86_400_000, 900, 500),
        ];
        assert_eq!(
            ratelimit_policy(&p),
            r#""api";q=100;w=60, "day";q=1000;w=86400"#
        );
        assert_eq!(ratelimit(&p), r#""api";r=42;t=17, "day";r=900;t=1"#);
    }

    #[test]
    fn sub_second_windows_round_up() {
        let p = [policy("burst", 5, 500, 0, 0)];
        assert_eq!(ratelimit_policy(&p), r#""burst";q=5;w=1"#);
        assert_eq!(ratelimit(&p), r#""burst";r=0;t=0"#);
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
