//! What the worker says to the hubs ([`crate::isolate::report::HUBS`] objects that
//! gather counts, top refused keys and bans) and what they answer.

use serde::{Deserialize, Serialize};

use crate::isolate::banlist::BanRecord;
use crate::isolate::report::{HubAnswer, HubSummary, Report};

/// A call from the worker to a hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HubCall {
    /// An isolate's report; answered with [`HubReply::Report`].
    Report(Report),
    /// Record a manual ban; answered with [`HubReply::Ban`].
    Ban(BanRecord),
    /// Lift a ban; answered with [`HubReply::Unban`].
    Unban(UnbanRequest),
    /// What the hub holds, with counts since `since_ms`; answered with
    /// [`HubReply::Summary`].
    Summary { since_ms: u64 },
}

impl HubCall {
    /// The call's name on the wire, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            HubCall::Report(_) => "report",
            HubCall::Ban(_) => "ban",
            HubCall::Unban(_) => "unban",
            HubCall::Summary { .. } => "summary",
        }
    }
}

/// A hub's answer to a [`HubCall`] it could serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HubReply {
    Report(HubAnswer),
    /// `banned` is false when the hub already holds as many manual bans as
    /// it may; `replaced`, whether it held a manual ban on the key that had
    /// not ended.
    Ban {
        banned: bool,
        #[serde(default)]
        replaced: bool,
    },
    /// Whether the hub held the ban.
    Unban {
        removed: bool,
    },
    Summary(HubSummary),
}

impl HubReply {
    /// The reply's name on the wire, for errors.
    pub fn name(&self) -> &'static str {
        match self {
            HubReply::Report(_) => "report",
            HubReply::Ban { .. } => "ban",
            HubReply::Unban { .. } => "unban",
            HubReply::Summary(_) => "summary",
        }
    }
}

/// Lift the ban `source` placed on `key` (`manual`, or a rule's scope after
/// an operator's reset).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnbanRequest {
    pub key: String,
    pub source: String,
}

#[cfg(test)]
mod tests {
    use super::super::wire_tag;
    use super::*;
    use crate::isolate::stats::StatRow;

    #[test]
    fn calls_and_replies_round_trip() {
        let calls = [
            HubCall::Report(Report {
                stats: vec![StatRow {
                    rule: "api".into(),
                    minute_ms: 60_000,
                    admitted: 3,
                    refused: 1,
                    failed: 0,
                }],
                ..Report::default()
            }),
            HubCall::Ban(BanRecord {
                key: "1.2.3.4".into(),
                source: "manual".into(),
                until_ms: 9_000,
                reason: "scraping".into(),
            }),
            HubCall::Unban(UnbanRequest {
                key: "1.2.3.4".into(),
                source: "manual".into(),
            }),
            HubCall::Summary { since_ms: 42 },
        ];
        for call in calls {
            let tagged = serde_json::to_value(&call).unwrap();
            assert_eq!(wire_tag(&tagged), Some(call.name()));
            let wire = serde_json::to_string(&call).unwrap();
            assert_eq!(serde_json::from_str::<HubCall>(&wire).unwrap(), call);
        }
        let replies = [
            HubReply::Report(HubAnswer::default()),
            HubReply::Ban {
                banned: false,
                replaced: true,
            },
            HubReply::Unban { removed: true },
            HubReply::Summary(HubSummary::default()),
        ];
        for reply in replies {
            let tagged = serde_json::to_value(&reply).unwrap();
            assert_eq!(wire_tag(&tagged), Some(reply.name()));
            let wire = serde_json::to_string(&reply).unwrap();
            assert_eq!(serde_json::from_str::<HubReply>(&wire).unwrap(), reply);
        }
    }

    #[test]
    fn a_summary_call_is_tagged() {
        let wire = serde_json::to_value(HubCall::Summary { since_ms: 7 }).unwrap();
        assert_eq!(wire, serde_json::json!({"summary": {"since_ms": 7}}));
    }

    #[test]
    fn an_unknown_or_incomplete_call_does_not_decode() {
        for body in [
            r#"{"drop_everything":{}}"#,
            r#"{"summary":{}}"#,
            r#""summary""#,
            r#"{"unban":{"key":"k"}}"#,
            r#"{"since_ms":1}"#,
            "",
        ] {
            assert!(serde_json::from_str::<HubCall>(body).is_err(), "{body}");
        }
    }
}
