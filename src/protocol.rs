//! What the worker and its container objects say to each other: JSON
//! bodies on internal `fetch` calls. Both sides are this crate, but the
//! container still validates what it receives, since a bad value must
//! become an error response, never a panic.

use serde::{Deserialize, Serialize};

use crate::limit::{Policy, PolicyError};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WirePolicy {
    pub name: String,
    pub limit: u64,
    pub window_ms: u64,
}

/// `POST /check`: admit `cost` units for `key` under every policy, or none.
/// Answered with a [`crate::ledger::Outcome`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRequest {
    pub key: String,
    pub policies: Vec<WirePolicy>,
    pub cost: u32,
}

impl CheckRequest {
    pub fn new(key: &str, policies: &[(String, Policy)], cost: u32) -> CheckRequest {
        CheckRequest {
            key: key.to_string(),
            policies: policies
                .iter()
                .map(|(name, policy)| WirePolicy {
                    name: name.clone(),
                    limit: u64::from(policy.limit()),
                    window_ms: policy.window_ms(),
                })
                .collect(),
            cost,
        }
    }

    pub fn policies(&self) -> Result<Vec<(String, Policy)>, PolicyError> {
        self.policies
            .iter()
            .map(|p| Ok((p.name.clone(), Policy::new(p.limit, p.window_ms)?)))
            .collect()
    }
}

/// `GET /inspect`: what a container object holds, in memory and on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspection {
    pub slots: Vec<SlotState>,
    /// Rows in the hits table (0 when the table does not exist).
    pub stored_rows: u64,
    /// Whether the object has any SQLite tables at all; false once the
    /// sweep has freed its storage.
    pub has_storage: bool,
    pub alarm_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotState {
    pub key: String,
    pub policy: String,
    pub limit: u64,
    pub window_ms: u64,
    /// Units logged, including any not yet expired by a check or sweep.
    pub held: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_request_round_trips_its_policies() {
        let policies = vec![("api".to_string(), Policy::new(10, 1000).unwrap())];
        let request = CheckRequest::new("k", &policies, 2);
        let wire = serde_json::to_string(&request).unwrap();
        let back: CheckRequest = serde_json::from_str(&wire).unwrap();
        assert_eq!(back.policies().unwrap(), policies);
        assert_eq!(back.cost, 2);
    }

    #[test]
    fn an_invalid_policy_is_an_error_not_a_panic() {
        let request = CheckRequest {
            key: "k".into(),
            policies: vec![WirePolicy {
                name: "x".into(),
                limit: 0,
                window_ms: 1,
            }],
            cost: 1,
        };
        assert!(request.policies().is_err());
    }
}
