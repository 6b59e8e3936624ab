//! A hot key decided in the isolate (issue 30): the isolate's admission
//! blocks ([`BlockHolder`]), how hot each key is ([`Heat`]), and what a
//! check becomes with them. Pure, so every branch runs in host tests;
//! `edge/blocks.rs` keeps one per isolate and makes the calls.
//!
//! A check the gate marks local ([`super::Try::local`]) is admitted here
//! when a block of each of its policies, granted under the very specs it
//! asks now, can take its cost: no call. Otherwise it goes to the object
//! as before, carrying the reports of every block the isolate holds of
//! that object (taken out, so a new block is asked for only with the old
//! ones reported) and an ask for new blocks with the key's heat: while a
//! key stays hot, one call per block reports the last and brings the next.
//! A block that lapses before its key's next call, or is spent while the
//! isolate decides for other objects, is reported by a call of its own
//! ([`LocalBlocks::due`], in the background, made after the check so that
//! the checked key's reports ride with its call): a check of cost 0, which
//! decides nothing.
//!
//! An admission a later layer or the origin's answer may give back (a
//! check with a reservation) is admitted as a reservation pending in its
//! blocks; its settle ([`LocalBlocks::settle`]) is then made here, with no
//! call, unless the block was reported meanwhile.
//!
//! Only admissions come from blocks, never refusals: a request no block
//! can take is decided as without blocks (under a ban policy, by the
//! object, which counts the refusal toward the ban).
//!
//! An answer admitted here tells each policy the block's unused
//! admissions as its `remaining`: a lower bound of the truth (see
//! `ledger::blocks`), and `reset_ms` the policy's whole window, the
//! longest the oldest admission in it can still count.

use std::collections::HashMap;

use crate::isolate::blocks::{BlockHolder, Reserve};
use crate::isolate::heat::Heat;
use crate::ledger::{Outcome, PolicyDecision};
use crate::limit::{Decision, Retry, Spec};
use crate::objects::protocol::{BlockAskWire, CheckRequest, SettleRequest, WireReport};

/// How long an ask for blocks stands in for the next ones of its key: a
/// call's answer comes much sooner, or it failed.
pub const ASK_MS: u64 = 1_000;

/// Keys with an ask in flight before the stale ones are dropped.
const ASKING_CAPACITY: usize = 1024;

/// What a check becomes.
#[derive(Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Local {
    /// Admitted from blocks held: the answer, with no call.
    Admitted(Outcome),
    /// The call to make, sent at `sent_ms` (this isolate's clock); its
    /// answer goes to [`LocalBlocks::answered`].
    Call { request: CheckRequest, sent_ms: u64 },
}

/// What an object's blocks were granted under: the specs the check that
/// asked for them named (a check asking others, after a changed config or
/// from another decision-API caller, goes to the object), and what the
/// granting answer announced, which admissions from them announce too:
/// each policy's limit in force (an operator's override included) and a
/// split quota's whole (`Outcome::whole`).
#[derive(Debug)]
struct Granted {
    specs: Vec<(String, Spec)>,
    limits: Vec<u64>,
    whole: Option<(String, u64)>,
}

/// One isolate's blocks and heat.
#[derive(Debug)]
pub struct LocalBlocks {
    holder: BlockHolder,
    heat: Heat,
    /// What each object's blocks were granted under.
    specs: HashMap<String, Granted>,
    /// The keys whose object was asked for blocks by a call not answered
    /// yet, and when: a burst of requests before the first grant comes
    /// back asks once, not once each, so one isolate does not take share
    /// after share of the headroom the others need. An ask older than
    /// [`ASK_MS`] (its call failed or was dropped) no longer counts.
    asking: HashMap<String, u64>,
    /// Checks admitted here since the isolate started.
    admitted: u64,
    /// Blocks granted to this isolate since it started.
    granted: u64,
    /// Reservations kept or refunded here since it started, with no call.
    settled: u64,
}

impl LocalBlocks {
    /// `holder`: this isolate's id, random, made once.
    pub fn new(holder: String) -> LocalBlocks {
        LocalBlocks {
            holder: BlockHolder::new(holder),
            heat: Heat::default(),
            specs: HashMap::new(),
            asking: HashMap::new(),
            admitted: 0,
            granted: 0,
            settled: 0,
        }
    }

    /// What `request` becomes at `now_ms`; `local` says whether the gate
    /// lets the isolate decide it. A check that takes a lease is never
    /// admitted here (leases stay per call); one that reserves is admitted
    /// as a reservation pending in its blocks, for
    /// [`settle`](Self::settle) to keep or refund.
    pub fn decide(&mut self, request: &CheckRequest, local: bool, now_ms: u64) -> Local {
        let mut block = None;
        if local && request.lease.is_none() && request.cost > 0 {
            let rate = self.heat.record(&request.key, now_ms);
            if let Some(outcome) = self.admit(request, now_ms) {
                return Local::Admitted(outcome);
            }
            if self.ask(&request.key, now_ms) {
                block = Some(BlockAskWire {
                    holder: self.holder.holder().to_string(),
                    rate,
                });
            }
        }
        // Copied only for a call: a check admitted here copies nothing.
        let mut call = request.clone();
        call.block = block;
        let reports = self.holder.take(&request.key);
        if !reports.is_empty() {
            self.specs.remove(&request.key);
        }
        call.reports.extend(reports.iter().map(WireReport::encode));
        Local::Call {
            request: call,
            sent_ms: now_ms,
        }
    }

    /// The first of the objects `pick` accepts that a block held can admit
    /// one more request into at `now_ms`: a split quota's part to try
    /// first, so that a hot quota is decided here.
    pub fn usable<T>(&self, now_ms: u64, pick: impl FnMut(&str) -> Option<T>) -> Option<T> {
        self.holder.usable(now_ms).find_map(pick)
    }

    /// Whether to ask `key`'s object for blocks now: not while an ask of
    /// this isolate is in flight.
    fn ask(&mut self, key: &str, now_ms: u64) -> bool {
        if self
            .asking
            .get(key)
            .is_some_and(|&at| now_ms < at.saturating_add(ASK_MS))
        {
            return false;
        }
        if self.asking.len() >= ASKING_CAPACITY {
            self.asking
                .retain(|_, at| now_ms < at.saturating_add(ASK_MS));
        }
        self.asking.insert(key.to_string(), now_ms);
        true
    }

    fn admit(&mut self, request: &CheckRequest, now_ms: u64) -> Option<Outcome> {
        let specs = request.policies().ok()?;
        let granted = self.specs.get(&request.key).filter(|g| g.specs == specs)?;
        let (limits, whole) = (granted.limits.clone(), granted.whole.clone());
        let names: Vec<&str> = specs.iter().map(|(name, _)| name.as_str()).collect();
        let reserve = request.reserve.as_ref().map(|r| Reserve {
            id: &r.id,
            ttl_ms: r.ttl_ms,
        });
        let remaining = self
            .holder
            .admit(&request.key, &names, request.cost, reserve, now_ms)?;
        self.admitted += 1;
        let policies = specs
            .iter()
            .enumerate()
            .map(|(i, (name, spec))| PolicyDecision {
                name: name.clone(),
                window_ms: spec.window_ms(),
                decision: Decision {
                    allowed: true,
                    limit: limits.get(i).copied().unwrap_or(spec.limit()),
                    remaining,
                    reset_ms: spec.window_ms(),
                    retry: Retry::NOW,
                },
            })
            .collect();
        Some(Outcome {
            allowed: true,
            pending: false,
            policies,
            ban: None,
            lease: None,
            conflict: None,
            halt: None,
            retry: Retry::NOW,
            spread: None,
            blocks: Vec::new(),
            whole,
        })
    }

    /// Keeps or refunds `settle`'s reservation where this isolate's blocks
    /// hold it pending, with no call: whether they did (otherwise the
    /// settle goes to its object, which holds it).
    pub fn settle(&mut self, settle: &SettleRequest) -> bool {
        let settled = self
            .holder
            .settle(&settle.key, &settle.reservation, settle.keep);
        self.settled += u64::from(settled);
        settled
    }

    /// Keeps the blocks the object granted with its answer to `request`
    /// (a call [`decide`](Self::decide) made, sent at `sent_ms`); `None`
    /// when the call failed.
    pub fn answered(&mut self, request: &CheckRequest, outcome: Option<&Outcome>, sent_ms: u64) {
        if request.block.is_some() {
            self.asking.remove(&request.key);
        }
        let Some(outcome) = outcome.filter(|o| !o.blocks.is_empty()) else {
            return;
        };
        let Ok(specs) = request.policies() else {
            return;
        };
        for grant in &outcome.blocks {
            self.holder.hold(&request.key, grant, sent_ms);
        }
        self.granted += outcome.blocks.len() as u64;
        let granted = Granted {
            specs,
            limits: outcome.policies.iter().map(|p| p.decision.limit).collect(),
            whole: outcome.whole.clone(),
        };
        self.specs.insert(request.key.clone(), granted);
    }

    /// The blocks lapsed at `now_ms`, or spent and not of `deciding` (the
    /// object of the check just decided), as calls that report them (cost
    /// 0: they decide nothing), one per object.
    pub fn due(&mut self, now_ms: u64, deciding: &str) -> Vec<CheckRequest> {
        let mut calls: Vec<CheckRequest> = Vec::new();
        for (object, report) in self.holder.due(now_ms, deciding) {
            let report = WireReport::encode(&report);
            match calls.iter_mut().find(|c| c.key == object) {
                Some(call) => call.reports.push(report),
                None => {
                    let specs = self.specs.get(&object).map(|g| g.specs.clone());
                    let specs = specs.unwrap_or_default();
                    let mut call = CheckRequest::new(&object, &specs, 0, None);
                    call.reports.push(report);
                    calls.push(call);
                }
            }
        }
        for call in &calls {
            if !self.holder.holds(&call.key) {
                self.specs.remove(&call.key);
            }
        }
        calls
    }

    /// For operators: `{"held", "granted", "admitted", "settled"}` since
    /// the isolate started (`GET {prefix}/admin/stats`, under
    /// `isolate.blocks`).
    pub fn figures(&self) -> crate::json::Json {
        crate::json!({
            "held": self.holder.count(),
            "granted": self.granted,
            "admitted": self.admitted,
            "settled": self.settled,
        })
    }
}

#[cfg(test)]
mod tests;
