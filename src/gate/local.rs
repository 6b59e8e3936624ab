//! A hot key decided in the isolate (issue 30): the isolate's admission
//! blocks ([`BlockHolder`]), how hot each key is ([`Heat`]), and what a
//! check becomes with them. Pure, so every branch runs in host tests;
//! `edge/blocks.rs` keeps one per isolate and makes the calls. A check the
//! gate marks local ([`super::Try::local`]) is admitted here, with no call,
//! when a block of each of its policies, granted under the specs it asks
//! now, can take its cost; otherwise it goes to the object carrying the
//! reports of the isolate's blocks of it and an ask for new ones. Only
//! admissions come from blocks, never refusals, and a block never refuses
//! its own isolate's requests ([`Flights`]). The rest (lapsed blocks'
//! calls, [`LocalBlocks::due`]; settles, [`LocalBlocks::settle`]; what a
//! block's answer tells): docs/algorithms.md, "Admission blocks".

use std::collections::HashMap;

use crate::isolate::blocks::{BlockHolder, Reading, Reserve};
use crate::isolate::flights::Flights;
use crate::isolate::heat::Heat;
use crate::ledger::blocks::BlockReport;
use crate::ledger::{Outcome, PolicyDecision};
use crate::limit::{Decision, Retry, Spec};
use crate::objects::protocol::{BlockAskWire, CheckRequest, SettleRequest, WireReport};

/// What a check becomes.
#[derive(Debug, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Local {
    /// Admitted from blocks held: the answer, with no call.
    Admitted(Outcome),
    Call(Call),
}

/// A call to make; its answer goes to [`LocalBlocks::answered`].
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub request: CheckRequest,
    /// When it was sent, on this isolate's clock.
    pub sent: Reading,
    /// The ask of this isolate in flight when it was sent ([`Flights`]).
    raced: Option<u64>,
    /// Its id in flight, when it asks for blocks or carries reports.
    flight: Option<u64>,
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
    /// What each object's blocks were granted under: a check asking
    /// other specs (a changed config, or another decision-API caller's
    /// limits) goes to the object.
    specs: HashMap<String, Granted>,
    /// Its calls in flight that ask for blocks or carry reports.
    flights: Flights,
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
            flights: Flights::default(),
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
        let sent = self.holder.read(now_ms);
        let mut block = None;
        if local && request.lease.is_none() && request.cost > 0 {
            let rate = self.heat.record(&request.key, now_ms);
            if let Some(outcome) = self.admit(request, now_ms) {
                return Local::Admitted(outcome);
            }
            if self.flights.asking(&request.key).is_none() {
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
        Local::Call(self.send(call, reports, sent))
    }

    /// `request` as a call sent at `sent` with `reports`, and the reports
    /// of its key still in flight ([`Flights`]); counted in flight when it
    /// asks for blocks or carries reports of its own.
    fn send(
        &mut self,
        mut request: CheckRequest,
        reports: Vec<BlockReport>,
        sent: Reading,
    ) -> Call {
        let key = &request.key;
        let raced = self.flights.asking(key);
        let again = self.flights.reports(key);
        request.reports = reports
            .iter()
            .chain(again)
            .map(WireReport::encode)
            .collect();
        let asks = request.block.is_some();
        let flight = (asks || !reports.is_empty()).then(|| self.flights.send(key, asks, reports));
        Call {
            request,
            sent,
            raced,
            flight,
        }
    }

    /// The first of the objects `pick` accepts that a block held can admit
    /// one more request into at `now_ms`: a split quota's part to try
    /// first, so that a hot quota is decided here.
    pub fn usable<T>(&self, now_ms: u64, pick: impl FnMut(&str) -> Option<T>) -> Option<T> {
        self.holder.usable(now_ms).find_map(pick)
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

    /// Keeps the blocks the object granted with its answer to `call` (one
    /// [`decide`](Self::decide) or [`due`](Self::due) made); `outcome` is
    /// `None` when the call failed. True when the answer is a refusal that
    /// may be for this isolate's own block, as the call raced an ask for
    /// blocks: wait until the key is not [`asking`](Self::asking), then
    /// decide it [`again`](Self::again) if so.
    pub fn answered(&mut self, call: &Call, outcome: Option<&Outcome>) -> bool {
        let request = &call.request;
        let granted = outcome.filter(|o| !o.blocks.is_empty());
        if let Some(id) = call.flight {
            self.flights.land(id, granted.is_some());
        }
        if let (Some(outcome), Ok(specs)) = (granted, request.policies()) {
            for grant in &outcome.blocks {
                self.holder.hold(&request.key, grant, call.sent);
            }
            self.granted += outcome.blocks.len() as u64;
            let granted = Granted {
                specs,
                limits: outcome.policies.iter().map(|p| p.decision.limit).collect(),
                whole: outcome.whole.clone(),
            };
            self.specs.insert(request.key.clone(), granted);
        }
        let refused = outcome.is_some_and(|o| {
            !o.allowed && o.ban.is_none() && o.halt.is_none() && o.conflict.is_none()
        });
        refused && request.lease.is_none() && call.raced.is_some()
    }

    /// Whether `key`'s object has an ask of this isolate in flight.
    pub fn asking(&self, key: &str) -> bool {
        self.flights.asking(key).is_some()
    }

    /// Whether `call`, refused ([`answered`](Self::answered)) and the asks
    /// it raced landed, is to be decided again: one of them brought a
    /// block, which its refusal may have counted.
    pub fn again(&self, call: &Call) -> bool {
        call.raced
            .is_some_and(|ask| self.flights.brought(&call.request.key, ask))
    }

    /// The blocks lapsed at `now_ms`, or spent and not of `deciding` (the
    /// object of the check just decided), as calls that report them (cost
    /// 0: they decide nothing), one per object.
    pub fn due(&mut self, now_ms: u64, deciding: &str) -> Vec<Call> {
        let mut calls: Vec<(CheckRequest, Vec<BlockReport>)> = Vec::new();
        for (object, report) in self.holder.due(now_ms, deciding) {
            match calls.iter_mut().find(|(c, _)| c.key == object) {
                Some((_, reports)) => reports.push(report),
                None => {
                    let specs = self.specs.get(&object).map(|g| g.specs.clone());
                    let call = CheckRequest::new(&object, &specs.unwrap_or_default(), 0, None);
                    calls.push((call, vec![report]));
                }
            }
        }
        for (call, _) in &calls {
            if !self.holder.holds(&call.key) {
                self.specs.remove(&call.key);
            }
        }
        let sent = self.holder.read(now_ms);
        calls
            .into_iter()
            .map(|(call, reports)| self.send(call, reports, sent))
            .collect()
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
