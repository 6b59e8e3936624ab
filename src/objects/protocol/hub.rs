//! What the worker says to the hubs ([`crate::isolate::report::HUBS`] objects that
//! gather counts, top refused keys and bans) and what they answer.

use crate::isolate::banlist::BanRecord;
use crate::isolate::pages::BanCursor;
use crate::isolate::report::{HubAnswer, Report};
use crate::isolate::stats::HubStats;
use crate::isolate::top::TopKeys;

crate::wire! {
    /// A call from the worker to a hub.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum HubCall {
        /// An isolate's report; answered with [`HubReply::Report`].
        Report(Report) = "report",
        /// Record a manual ban; answered with [`HubReply::Ban`].
        Ban(BanRecord) = "ban",
        /// Lift a ban; answered with [`HubReply::Unban`].
        Unban(UnbanRequest) = "unban",
        /// Counts since `since_ms` and of the last hour, and how many bans
        /// it lists; answered with [`HubReply::Stats`].
        Stats { since_ms: u64 } = "stats",
        /// A rule's most refused keys counted in the minutes since
        /// `since_ms`, merged; answered with [`HubReply::Top`].
        Top { rule: String, since_ms: u64 } = "top",
        /// The first `limit` bans in force after `after`, newest first;
        /// answered with [`HubReply::Bans`].
        Bans { limit: u32, after: Option<BanCursor> } = "bans",
    }
}

crate::wire! {
    /// A hub's answer to a [`HubCall`] it could serve.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum HubReply {
        Report(HubAnswer) = "report",
        /// `banned` is false when the hub already holds as many manual bans
        /// as it may; `replaced`, whether it held a manual ban on the key
        /// that had not ended (false from a hub that did not say).
        Ban { banned: bool, replaced: bool => false } = "ban",
        /// Whether the hub held the ban.
        Unban { removed: bool } = "unban",
        Stats(HubStats) = "stats",
        Top(TopKeys) = "top",
        /// At most the `limit` asked, newest first.
        Bans(Vec<BanRecord>) = "bans",
    }
}

crate::wire! {
    /// Lift the ban `source` placed on `key` (`manual`, or a rule's scope after
    /// an operator's reset).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct UnbanRequest {
        pub key: String,
        pub source: String,
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire_tag;
    use super::*;
    use crate::input::scan::FromScan;
    use crate::isolate::stats::StatRow;
    use crate::isolate::top::RuleTop;

    fn top_keys() -> TopKeys {
        let mut keys = TopKeys::new();
        for key in ["a", "b", "a", "\"quoted\""] {
            keys.add(key, 4);
        }
        keys
    }

    fn ban_record() -> BanRecord {
        BanRecord {
            key: "1.2.3.4".into(),
            source: "manual".into(),
            until_ms: 9_000,
            reason: "scraping".into(),
            started_ms: 8_000,
        }
    }

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
                    near_limit: 2,
                    shadow: 1,
                }],
                top: vec![RuleTop {
                    rule: "api".into(),
                    minute_ms: 60_000,
                    keys: top_keys(),
                }],
                bans: vec![ban_record()],
            }),
            HubCall::Report(Report::default()),
            HubCall::Ban(BanRecord {
                key: "1.2.3.4".into(),
                source: "manual".into(),
                until_ms: 9_000,
                reason: "scraping".into(),
                started_ms: 8_000,
            }),
            HubCall::Unban(UnbanRequest {
                key: "1.2.3.4".into(),
                source: "manual".into(),
            }),
            HubCall::Stats { since_ms: 42 },
            HubCall::Top {
                rule: "api".into(),
                since_ms: 42,
            },
            HubCall::Bans {
                limit: 100,
                after: None,
            },
            HubCall::Bans {
                limit: 10,
                after: Some(BanCursor(5, "k".into(), "manual".into())),
            },
        ];
        for call in calls {
            let tagged = crate::json::value_of(&call);
            assert_eq!(wire_tag(&tagged), Some(call.name()));
            let wire = crate::json::to_string(&call);
            assert_eq!(HubCall::from_json(&wire).unwrap(), call);
        }
        let replies = [
            HubReply::Report(HubAnswer::default()),
            HubReply::Report(HubAnswer {
                manual_bans: vec![ban_record()],
            }),
            HubReply::Stats(HubStats {
                requests: 1,
                totals: vec![StatRow {
                    rule: "api".into(),
                    minute_ms: 0,
                    admitted: 1,
                    refused: 2,
                    failed: 3,
                    near_limit: 0,
                    shadow: 0,
                }],
                recent: Vec::new(),
                manual_bans: 4,
                rule_bans: 5,
            }),
            HubReply::Top(top_keys()),
            HubReply::Bans(vec![ban_record()]),
            HubReply::Ban {
                banned: false,
                replaced: true,
            },
            HubReply::Unban { removed: true },
            HubReply::Stats(HubStats::default()),
            HubReply::Top(TopKeys::new()),
            HubReply::Bans(Vec::new()),
        ];
        for reply in replies {
            let tagged = crate::json::value_of(&reply);
            assert_eq!(wire_tag(&tagged), Some(reply.name()));
            let wire = crate::json::to_string(&reply);
            assert_eq!(HubReply::from_json(&wire).unwrap(), reply);
        }
    }

    #[test]
    fn a_stats_call_is_tagged() {
        let wire = crate::json::value_of(&HubCall::Stats { since_ms: 7 });
        assert_eq!(wire, serde_json::json!({"stats": {"since_ms": 7}}));
    }

    #[test]
    fn an_unknown_or_incomplete_call_does_not_decode() {
        for body in [
            r#"{"drop_everything":{}}"#,
            r#"{"stats":{}}"#,
            r#""stats""#,
            r#"{"summary":{"since_ms":1}}"#,
            r#"{"unban":{"key":"k"}}"#,
            r#"{"since_ms":1}"#,
            r#"{"bans":{"limit":1,"after":[1,"k"]}}"#,
            r#"{"bans":{"limit":1,"after":[1,"k","manual","more"]}}"#,
            r#"{"report":{"stats":[],"top":[{"rule":"a","minute_ms":0,"keys":{}}],"bans":[]}}"#,
            "",
        ] {
            assert!(HubCall::from_json(body).is_err(), "{body}");
        }
    }
}
