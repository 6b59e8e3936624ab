//! A policy as the worker sends it to a key's object: tagged by its
//! algorithm, with its name and that algorithm's own values, e.g.
//! `{"sliding_log":{"name":"api","limit":10,"window_ms":1000}}`. The object
//! validates it again into a [`Spec`], since a bad value must become an
//! error response, never a panic. Storage keeps its own compact encoding
//! ([`Spec::encode`]); this one is only for the wire.

use super::Invalid;
use crate::limit::gcra::GcraPolicy;
use crate::limit::{Policy, Spec};

crate::wire! {
    /// A named policy on the wire, unvalidated until
    /// [`WirePolicy::decode`]. Tagged the way serde tags by default, for the
    /// reason given in [`crate::objects::protocol`].
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum WirePolicy {
        SlidingLog { name: String, limit: u64, window_ms: u64 } = "sliding_log",
        FixedWindow { name: String, limit: u64, window_ms: u64 } = "fixed_window",
        Gcra { name: String, max_burst: u64, count: u64, period_ms: u64 } = "gcra",
    }
}

impl WirePolicy {
    pub fn encode(name: &str, spec: &Spec) -> WirePolicy {
        let name = name.to_string();
        match spec {
            Spec::SlidingLog(p) => WirePolicy::SlidingLog {
                name,
                limit: u64::from(p.limit()),
                window_ms: p.window_ms(),
            },
            Spec::FixedWindow(p) => WirePolicy::FixedWindow {
                name,
                limit: u64::from(p.limit()),
                window_ms: p.window_ms(),
            },
            Spec::Gcra(p) => WirePolicy::Gcra {
                name,
                max_burst: p.max_burst(),
                count: p.count(),
                period_ms: p.period_ms(),
            },
        }
    }

    /// The policy validated; the error names the policy and the value.
    pub fn decode(&self) -> Result<(String, Spec), Invalid> {
        let (name, spec) = match self {
            WirePolicy::SlidingLog {
                name,
                limit,
                window_ms,
            } => (
                name,
                Policy::new(*limit, *window_ms)
                    .map(Spec::SlidingLog)
                    .map_err(|e| e.to_string()),
            ),
            WirePolicy::FixedWindow {
                name,
                limit,
                window_ms,
            } => (
                name,
                Policy::new(*limit, *window_ms)
                    .map(Spec::FixedWindow)
                    .map_err(|e| e.to_string()),
            ),
            WirePolicy::Gcra {
                name,
                max_burst,
                count,
                period_ms,
            } => (
                name,
                GcraPolicy::new(*max_burst, *count, *period_ms)
                    .map(Spec::Gcra)
                    .map_err(|e| e.to_string()),
            ),
        };
        spec.map(|spec| (name.clone(), spec))
            .map_err(|e| Invalid(format!("policy {name:?}: {e}")))
    }
}

/// Policies as sent.
pub fn encode_all(policies: &[(String, Spec)]) -> Vec<WirePolicy> {
    policies
        .iter()
        .map(|(name, spec)| WirePolicy::encode(name, spec))
        .collect()
}

/// Policies as sent, validated: the first invalid one is the error.
pub fn decode_all(policies: &[WirePolicy]) -> Result<Vec<(String, Spec)>, Invalid> {
    let mut decoded = Vec::with_capacity(policies.len());
    for policy in policies {
        decoded.push(policy.decode()?);
    }
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::scan::{FromScan, Malformed};

    fn read(body: &str) -> Result<WirePolicy, Malformed> {
        WirePolicy::from_json(body)
    }

    fn every_algorithm() -> Vec<(String, Spec)> {
        vec![
            (
                "log".into(),
                Spec::SlidingLog(Policy::new(10, 1000).unwrap()),
            ),
            (
                "window".into(),
                Spec::FixedWindow(Policy::new(5, 60_000).unwrap()),
            ),
            (
                "cell".into(),
                Spec::Gcra(GcraPolicy::new(4, 2, 1000).unwrap()),
            ),
        ]
    }

    #[test]
    fn every_algorithm_round_trips() {
        let policies = every_algorithm();
        let wire = crate::json::to_string(&encode_all(&policies));
        let back = Vec::<WirePolicy>::from_json(&wire).unwrap();
        assert_eq!(decode_all(&back).unwrap(), policies);
    }

    #[test]
    fn a_policy_is_tagged_by_its_algorithm() {
        let spec = Spec::SlidingLog(Policy::new(10, 1000).unwrap());
        let wire = crate::json::value_of(&WirePolicy::encode("api", &spec));
        assert_eq!(
            wire,
            serde_json::json!({"sliding_log": {"name": "api", "limit": 10, "window_ms": 1000}})
        );
        let gcra = Spec::Gcra(GcraPolicy::new(4, 2, 1000).unwrap());
        let wire = crate::json::value_of(&WirePolicy::encode("cell", &gcra));
        assert_eq!(
            wire,
            serde_json::json!({"gcra": {"name": "cell", "max_burst": 4, "count": 2, "period_ms": 1000}})
        );
    }

    #[test]
    fn an_out_of_range_value_is_an_error_naming_the_policy() {
        let bad = [
            r#"{"sliding_log":{"name":"zero","limit":0,"window_ms":1000}}"#,
            r#"{"fixed_window":{"name":"zero","limit":10,"window_ms":0}}"#,
            r#"{"gcra":{"name":"zero","max_burst":1,"count":0,"period_ms":1000}}"#,
        ];
        for body in bad {
            let policy = read(body).unwrap();
            let Invalid(message) = policy.decode().unwrap_err();
            assert!(message.starts_with("policy \"zero\": "), "{message}");
        }
        let Invalid(message) = decode_all(&[read(bad[0]).unwrap()]).unwrap_err();
        assert!(message.contains("limit must be"), "{message}");
    }

    #[test]
    fn an_unknown_algorithm_or_a_missing_value_does_not_decode() {
        for body in [
            r#"{"token_bucket":{"name":"x","limit":1,"window_ms":1}}"#,
            r#"{"sliding_log":{"name":"x","limit":1}}"#,
            r#"{"sliding_log":{"limit":1,"window_ms":1}}"#,
            r#"{"name":"x","limit":1,"window_ms":1}"#,
            r#"{"sliding_log":{"name":"x","limit":1,"window_ms":1},"gcra":{"name":"y","max_burst":1,"count":1,"period_ms":1}}"#,
            r#"{"gcra":{"name":"x","max_burst":-1,"count":1,"period_ms":1}}"#,
        ] {
            assert!(read(body).is_err(), "{body}");
        }
    }
}
