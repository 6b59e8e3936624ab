//! From an object's outcome (or its silence) to what the isolate keeps,
//! reports, logs and answers.

use super::halt::halted;
use super::{Answer, Ask, Conclusion, Judged, Log, Pass, Reply, Settle};
use crate::config::{OnError, Rule};
use crate::http::admin::manual_ban_detail;
use crate::http::headers::{limit_fields, retry_after, retry_after_field, Fields};
use crate::http::problem::{Code, Problem};
use crate::http::time::rfc3339;
use crate::isolate::banlist::BanRecord;
use crate::isolate::stats::Verdict;
use crate::ledger::Outcome;
use crate::objects::name::ObjectName;

impl Ask<'_> {
    /// What an answer means. A split part announces the whole quota's
    /// limits (its `remaining` is the part's, a lower bound of the
    /// whole's), and one found full leaves room for a second chance.
    pub fn judge(&self, mut outcome: Outcome) -> Judged {
        if self.level.split_parts().is_none() {
            return Judged::Decided(outcome);
        }
        // Under an operator's override of the whole quota, its part says
        // the whole limit it set.
        for (decision, (_, whole)) in outcome.policies.iter_mut().zip(self.level.policies) {
            decision.decision.limit = match &outcome.whole {
                Some((name, limit)) if *name == decision.name => *limit,
                _ => whole.limit(),
            };
        }
        // A paused or closed part answers for the whole quota: every part
        // holds the same state.
        if outcome.allowed || self.rule.shadow || outcome.halt.is_some() {
            Judged::Decided(outcome)
        } else {
            Judged::Full(outcome)
        }
    }

    /// The object decided: refuse (and remember the refusal), forward with
    /// the RateLimit fields, or, in shadow mode, forward and report.
    pub fn conclude(self, object: ObjectName, outcome: Outcome, now_ms: u64) -> Conclusion {
        let rule = self.rule;
        let ban_started = outcome
            .ban
            .as_ref()
            .filter(|ban| ban.started)
            .map(|ban| BanRecord {
                key: self.key.clone(),
                until_ms: ban.until_ms,
                reason: ban.reason.clone(),
                source: self.level.scope.to_string(),
                started_ms: now_ms,
            });
        let mut conclusion = Conclusion {
            record: Some((self.reported(), Verdict::decided(&outcome, rule.shadow))),
            ban_started,
            ..Conclusion::reply(Reply::untouched())
        };
        // An operator's state answers whatever the rule's mode: pausing a
        // rule is an order, shadow rules included. The isolate holds the
        // answer a moment only (`crate::isolate::refusals`).
        if let Some(control) = &outcome.halt {
            conclusion.reply = Reply::Answer(halted(&rule.id, control));
            conclusion.cache = Some((object, outcome));
            return conclusion;
        }
        let fields = if rule.shadow {
            let verdict = shadow_field(&outcome);
            if !outcome.allowed {
                conclusion.log = Some(Log::Info(format!(
                    "sluice: shadow rule {} would refuse {object}: {verdict}",
                    rule.id
                )));
            }
            vec![("sluice-shadow", verdict)]
        } else if !outcome.allowed {
            // Under a ban policy, refusals must reach the object to count
            // toward a ban; only the ban itself is answered from the
            // isolate. A refused lease may free up any moment, so it is
            // never cached.
            let cacheable = self.level.ban.is_none() || outcome.ban.is_some();
            conclusion.reply = Reply::Answer(refusal(rule, &outcome, now_ms));
            if cacheable && outcome.refusal_holds_until_retry() {
                conclusion.cache = Some((object, outcome));
            }
            return conclusion;
        } else {
            limit_fields(&outcome)
        };
        let release = outcome
            .lease
            .as_ref()
            .and_then(|l| l.lease.as_ref())
            .map(|lease| (object.clone(), lease.id.clone()));
        let settle = self
            .reservation
            .filter(|_| outcome.allowed)
            .zip(self.level.count)
            .map(|(reservation, counted)| Settle {
                object,
                reservation,
                counted: counted.clone(),
            })
            .into_iter()
            .collect();
        conclusion.reply = Reply::Forward(Pass {
            fields,
            key: Some(self.key),
            release,
            settle,
        });
        conclusion
    }

    /// The object could not decide: logged, counted, and then the rule's
    /// `on_error`: fail closed or fail open.
    pub fn failed(self, object: &ObjectName, error: &str) -> Conclusion {
        let rule = self.rule;
        let reply = match rule.on_error {
            OnError::Deny => Reply::Answer(unavailable()),
            OnError::Allow => Reply::Forward(Pass {
                fields: vec![("sluice-degraded", "fail-open".into())],
                key: Some(self.key.clone()),
                ..Pass::default()
            }),
        };
        Conclusion {
            record: Some((self.reported(), Verdict::Failed)),
            log: Some(Log::Error(format!(
                "sluice: rule {} could not decide for {object}: {error}",
                rule.id
            ))),
            ..Conclusion::reply(reply)
        }
    }

    /// Every part of a split quota tried or skipped was full: the refusal
    /// that can be retried soonest. Each was cached as it was found; one
    /// answered from the cache has its moment handed out.
    pub fn all_full(mut self, refused: Option<Outcome>, now_ms: u64) -> Conclusion {
        let (outcome, invited) = match (refused, self.known_full.take()) {
            (Some(asked), Some((part, known))) if known.retry < asked.retry => (known, Some(part)),
            (Some(asked), _) => (asked, None),
            (None, Some((part, known))) => (known, Some(part)),
            (None, None) => {
                let object = self.level.scope.part(0);
                return self.failed(&object, "no part to try");
            }
        };
        Conclusion {
            record: Some((self.reported(), Verdict::Refused)),
            invited,
            ..Conclusion::reply(Reply::Answer(refusal(self.rule, &outcome, now_ms)))
        }
    }

    /// The key a decision is counted under: the caller's, or under a
    /// global quota its client's address rather than `*`, so that the top
    /// refused keys name clients.
    pub(super) fn reported(&self) -> String {
        self.client.clone().unwrap_or_else(|| self.key.clone())
    }
}

/// Of two refusals, the one that can be retried sooner.
pub fn sooner(a: Option<Outcome>, b: Outcome) -> Option<Outcome> {
    match a {
        Some(a) if a.retry <= b.retry => Some(a),
        _ => Some(b),
    }
}

/// The answer to a request a rule refused: banned (429 or 403, as the rule
/// says), over quota (429), or held by requests in flight (429, `pending`),
/// with the RateLimit fields; or the state of a part an operator paused or
/// closed.
pub fn refusal(rule: &Rule, outcome: &Outcome, now_ms: u64) -> Answer {
    if let Some(control) = &outcome.halt {
        return halted(&rule.id, control);
    }
    let problem = match &outcome.ban {
        Some(ban) => {
            let status = rule.ban.map_or(429, |b| b.status);
            let until = rfc3339(ban.until_ms.max(now_ms));
            // Retry-After is when a request can pass: the ban's end, or
            // later when the rule's window is still full then.
            let detail = match outcome.retry.at(now_ms) {
                Some(pass_ms) if pass_ms > ban.until_ms => format!(
                    "banned by rule {} until {until}: {}; the rule's limit admits requests again from {}",
                    rule.id,
                    ban.reason,
                    rfc3339(pass_ms)
                ),
                _ => format!("banned by rule {} until {until}: {}", rule.id, ban.reason),
            };
            Problem::new(Code::Banned { status }, detail)
                .with("banned-until", until)
                .with("offences", ban.offences)
        }
        None if outcome.pending => {
            let violated = outcome.violated_names();
            let secs = retry_after_field(outcome.retry).unwrap_or_default();
            let detail = format!(
                "rate limit {} is held by requests still in flight, whose answers decide whether they count; retry in {secs} s",
                violated.join(", ")
            );
            Problem::quota_refusal(Code::Pending, detail, violated)
        }
        None => {
            let violated = outcome.violated_names();
            let detail = match retry_after_field(outcome.retry) {
                Some(secs) => format!(
                    "rate limit {} exceeded; retry in {secs} s",
                    violated.join(", ")
                ),
                None => format!(
                    "rate limit {} exceeded; the request costs more than the limit and can never be admitted",
                    violated.join(", ")
                ),
            };
            Problem::quota_exceeded(detail, violated)
        }
    };
    Answer {
        problem,
        fields: limit_fields(outcome),
    }
}

/// The answer to a caller an operator banned: `status` (the rule's ban
/// status, 429 unless the rule says 403; 429 on Sluice's own endpoints),
/// with Retry-After at the ban's end.
pub fn manually_banned(status: u16, ban: &BanRecord, now_ms: u64) -> Answer {
    let until = rfc3339(ban.until_ms);
    let problem = Problem::new(
        Code::Banned { status },
        manual_ban_detail(&until, &ban.reason),
    )
    .with("banned-until", until);
    let fields: Fields = vec![(
        "retry-after",
        retry_after(ban.until_ms.saturating_sub(now_ms)),
    )];
    Answer { problem, fields }
}

/// What a shadow rule would have done, for the `Sluice-Shadow` field:
/// `allow`, or `refuse` with the policies and the retry time.
fn shadow_field(outcome: &Outcome) -> String {
    if outcome.allowed {
        return "allow".to_string();
    }
    let violated = outcome.violated_names();
    let banned = if outcome.ban.is_some() {
        ";banned"
    } else if outcome.pending {
        ";pending"
    } else {
        ""
    };
    let retry = retry_after_field(outcome.retry)
        .map(|secs| format!(";retry={secs}"))
        .unwrap_or_default();
    format!("refuse;violated=\"{}\"{retry}{banned}", violated.join(" "))
}

/// No decision could be reached and the caller should come back shortly.
pub fn unavailable() -> Answer {
    let problem = Problem::new(
        Code::Unavailable,
        "the limiter could not reach a decision; retry shortly",
    );
    Answer {
        problem,
        fields: vec![("retry-after", "1".into())],
    }
}
