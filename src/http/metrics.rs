//! `GET {prefix}/admin/metrics`: Sluice's figures in Prometheus's text
//! exposition format (0.0.4). Every label set is bounded by the config
//! (its rules and their policies) and a fixed set of names (outcomes, ban
//! sources), never a label per key: a key's figures are the admin API's
//! and Analytics Engine's (docs/operations.md, "Metrics").

use std::fmt::Write;

use crate::isolate::stats::RuleStats;
use crate::ledger::SlotReport;

/// What the metrics answer: each from where the admin API reads it.
pub struct Figures<'a> {
    /// Per rule (and `_api`), its decisions since the hubs began counting.
    pub decisions: &'a [RuleStats],
    /// Bans in force: manual, and started by rules.
    pub bans: (u64, u64),
    /// Hubs that did not answer: the counts are the others'.
    pub hubs_unreachable: usize,
    /// Per waiting room: its rule, visitors waiting and sessions active.
    pub rooms: Vec<(&'a str, u64, u64)>,
    /// Per global quota (`rule` or `rule.layer`), each policy's whole.
    pub quotas: Vec<(&'a str, Vec<SlotReport>)>,
}

/// One metric family: its name, type, help and samples, each its labels
/// (written by [`labels`]) and value.
fn family(out: &mut String, name: &str, kind: &str, help: &str, samples: &[(String, u64)]) {
    let _ = writeln!(
        out,
        "# HELP sluice_{name} {help}\n# TYPE sluice_{name} {kind}"
    );
    for (labels, value) in samples {
        let _ = writeln!(out, "sluice_{name}{labels} {value}");
    }
}

/// A sample's labels, `{rule="api",outcome="refused"}`, each value
/// escaped as the format asks (backslash, double quote, line feed).
fn labels(pairs: &[(&str, &str)]) -> String {
    let each = pairs.iter().map(|(name, value)| {
        let value = value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        format!("{name}=\"{value}\"")
    });
    format!("{{{}}}", each.collect::<Vec<_>>().join(","))
}

/// The exposition: counters of decisions, gauges of what is held now.
pub fn exposition(figures: &Figures<'_>) -> String {
    let mut out = String::new();
    let decisions = &figures.decisions;
    let per_rule = |count: fn(&RuleStats) -> u64| -> Vec<(String, u64)> {
        let rule = |r: &RuleStats| labels(&[("rule", &r.rule)]);
        decisions.iter().map(|r| (rule(r), count(r))).collect()
    };
    let outcomes: Vec<(String, u64)> = decisions
        .iter()
        .flat_map(|r| {
            [
                ("admitted", r.admitted),
                ("refused", r.refused),
                ("failed", r.failed),
            ]
            .map(|(outcome, n)| (labels(&[("rule", &r.rule), ("outcome", outcome)]), n))
        })
        .collect();
    family(&mut out, "decisions_total", "counter", "Decisions per rule by outcome, since the hubs began counting (refused includes shadow rules' would-be refusals).", &outcomes);
    family(
        &mut out,
        "near_limit_total",
        "counter",
        "Admissions that left a policy at most a fifth of its limit.",
        &per_rule(|r| r.near_limit),
    );
    family(
        &mut out,
        "shadow_refusals_total",
        "counter",
        "Requests a shadow rule would have refused, let through.",
        &per_rule(|r| r.shadow),
    );
    let (manual, rule) = figures.bans;
    let bans = [("manual", manual), ("rule", rule)].map(|(s, n)| (labels(&[("source", s)]), n));
    family(
        &mut out,
        "bans",
        "gauge",
        "Bans in force, by source.",
        &bans,
    );
    let unreachable = [(String::new(), figures.hubs_unreachable as u64)];
    family(
        &mut out,
        "hubs_unreachable",
        "gauge",
        "Hubs that did not answer this scrape: the counts are the others'.",
        &unreachable,
    );
    let rooms = |pick: fn(&(&str, u64, u64)) -> u64| -> Vec<(String, u64)> {
        let rooms = figures.rooms.iter();
        rooms.map(|r| (labels(&[("rule", r.0)]), pick(r))).collect()
    };
    family(
        &mut out,
        "room_waiting",
        "gauge",
        "Visitors waiting in a room.",
        &rooms(|r| r.1),
    );
    family(
        &mut out,
        "room_active",
        "gauge",
        "Sessions active in a room.",
        &rooms(|r| r.2),
    );
    let quotas = |pick: fn(&SlotReport) -> u64| -> Vec<(String, u64)> {
        let each = figures.quotas.iter().flat_map(|(rule, slots)| {
            slots
                .iter()
                .map(move |s| (labels(&[("rule", rule), ("policy", &s.policy)]), pick(s)))
        });
        each.collect()
    };
    family(
        &mut out,
        "quota_limit",
        "gauge",
        "A global quota's whole limit in force.",
        &quotas(|s| s.limit),
    );
    family(
        &mut out,
        "quota_used",
        "gauge",
        "A global quota's units used in its window, over every part.",
        &quotas(|s| s.used),
    );
    family(
        &mut out,
        "quota_remaining",
        "gauge",
        "What is left of each part's share of a global quota, added up.",
        &quotas(|s| s.remaining),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(rule: &str, admitted: u64, near_limit: u64) -> RuleStats {
        RuleStats {
            rule: rule.into(),
            admitted,
            refused: 3,
            failed: 0,
            near_limit,
            shadow: 1,
            per_minute: Vec::new(),
        }
    }

    #[test]
    fn each_family_is_typed_and_each_sample_labelled_by_rule_never_by_key() {
        let decisions = [stats("api", 10, 2), stats("_api", 4, 0)];
        let slot = SlotReport {
            policy: "sale".into(),
            limit: 500,
            window_ms: 60_000,
            used: 430,
            remaining: 70,
            reset_ms: 1,
        };
        let text = exposition(&Figures {
            decisions: &decisions,
            bans: (2, 5),
            hubs_unreachable: 1,
            rooms: vec![("shop", 120, 8)],
            quotas: vec![("checkout.all", vec![slot])],
        });
        for line in [
            "# TYPE sluice_decisions_total counter",
            "sluice_decisions_total{rule=\"api\",outcome=\"admitted\"} 10",
            "sluice_decisions_total{rule=\"_api\",outcome=\"refused\"} 3",
            "sluice_near_limit_total{rule=\"api\"} 2",
            "sluice_shadow_refusals_total{rule=\"api\"} 1",
            "sluice_bans{source=\"rule\"} 5",
            "sluice_hubs_unreachable 1",
            "sluice_room_waiting{rule=\"shop\"} 120",
            "sluice_room_active{rule=\"shop\"} 8",
            "sluice_quota_used{rule=\"checkout.all\",policy=\"sale\"} 430",
            "sluice_quota_remaining{rule=\"checkout.all\",policy=\"sale\"} 70",
            "# TYPE sluice_quota_limit gauge",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        // Every sample line: a name, labels and a whole number.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (series, value) = line.rsplit_once(' ').unwrap();
            assert!(series.starts_with("sluice_"), "{line}");
            assert!(value.parse::<u64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn label_values_are_escaped_and_each_sample_follows_its_help_and_type() {
        let decisions = [stats("odd\"rule\\with\nbreak", 1, 0)];
        let text = exposition(&Figures {
            decisions: &decisions,
            bans: (0, 0),
            hubs_unreachable: 0,
            rooms: Vec::new(),
            quotas: Vec::new(),
        });
        let escaped = r#"sluice_near_limit_total{rule="odd\"rule\\with\nbreak"} 0"#;
        assert!(text.lines().any(|l| l == escaped), "{text}");
        assert!(
            text.lines().any(|l| l == "sluice_hubs_unreachable 0"),
            "{text}"
        );
        let mut family = "";
        for line in text.lines() {
            if let Some(help) = line.strip_prefix("# HELP ") {
                family = help.split(' ').next().unwrap();
            } else if let Some(kind) = line.strip_prefix("# TYPE ") {
                assert!(kind == format!("{family} counter") || kind == format!("{family} gauge"));
            } else {
                let name = line.split(['{', ' ']).next().unwrap();
                assert_eq!(name, family, "{line} outside its family");
            }
        }
    }
}
