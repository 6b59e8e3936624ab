//! A request asked of several layers in turn (a rule's `also`, or a
//! decision-API call's `layers`), admitted only when every layer admits.
//! [`Climb`] stops at the first refusal (or failure); every layer but the
//! last admits as a reservation, which [`Climb::settle_now`] keeps or
//! refunds, so no window ever holds more than its limit and nothing
//! admitted is forgotten (docs/algorithms.md). [`Stack`] is a rule's climb,
//! [`key_climb`] a decision-API call's.

use super::{sooner, unavailable};
use super::{Ask, Conclusion, Judged, Pass, Reply, Try};
use crate::config::{OnError, Rule};
use crate::http::api::{LayeredRequest, LimitRequest, RESERVATION_TTL_MS};
use crate::ledger::Outcome;
use crate::objects::name::{ObjectName, Scope};
use crate::objects::protocol::{CheckRequest, ReserveAsk, SettleRequest};
use crate::short_sort;

/// One layer as a climb asks it.
pub trait Layered {
    /// The objects to ask, in order, until one decides.
    fn tries(&self) -> &[Try];
    /// The reservation its admission takes, if it takes one.
    fn reservation(&self) -> Option<&str>;
    /// Whether the origin's answer settles its reservation; otherwise it
    /// is kept as soon as every layer has admitted.
    fn settled_by_answer(&self) -> bool;
    /// What an answer means for the rest of the layer's tries.
    fn judge(&self, outcome: Outcome) -> Judged;
}

/// How a layer the climb went past answered. At most one per layer is
/// held, for one request, so its variants' sizes do not matter.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Passed {
    Admitted {
        object: ObjectName,
        outcome: Outcome,
    },
    /// Its object could not decide and the rule fails open: the layer is
    /// left out, and the reservation it may hold is kept once every layer
    /// has admitted (refunded when one refused).
    Skipped { object: ObjectName, error: String },
}

impl Passed {
    fn object(&self) -> &ObjectName {
        match self {
            Passed::Admitted { object, .. } | Passed::Skipped { object, .. } => object,
        }
    }
}

/// What ended a climb before every layer admitted; one per request.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Stop {
    /// The layer refused; `object` is `None` when every part of a split
    /// quota tried was full (each is remembered as it is found).
    Refused {
        object: Option<ObjectName>,
        outcome: Outcome,
    },
    /// The layer's object could not decide, and the rule fails closed.
    Failed { object: ObjectName, error: String },
}

/// Layers asked in turn; pure, so the edge only makes the calls it names.
#[derive(Debug)]
pub struct Climb<L> {
    layers: Vec<L>,
    /// The layers gone past, in order: `passed.len()` is the layer asked.
    passed: Vec<Passed>,
    /// How many of the asked layer's tries have been answered.
    tried: usize,
    /// The soonest refusal among the asked layer's full parts.
    full: Option<Outcome>,
    stop: Option<Stop>,
    fail_open: bool,
}

impl<L: Layered> Climb<L> {
    /// A climb of `layers` in order; with `fail_open`, a layer whose
    /// object cannot decide is left out instead of ending the climb.
    pub fn new(layers: Vec<L>, fail_open: bool) -> Climb<L> {
        Climb {
            layers,
            passed: Vec::new(),
            tried: 0,
            full: None,
            stop: None,
            fail_open,
        }
    }

    /// The call to make next; `None` once the climb has ended.
    pub fn next_call(&self) -> Option<&CheckRequest> {
        if self.stop.is_some() {
            return None;
        }
        let layer = self.layers.get(self.passed.len())?;
        layer.tries().get(self.tried).map(|t| &t.request)
    }

    /// Whether the isolate may decide the call [`next_call`](Self::next_call)
    /// names from an admission block, as its try says: any layer may, a
    /// reserving one as a reservation pending in the block, which
    /// [`settle_now`](Self::settle_now)'s keep or refund then settles in
    /// the isolate.
    pub fn next_local(&self) -> bool {
        self.stop.is_none()
            && self
                .layers
                .get(self.passed.len())
                .and_then(|layer| layer.tries().get(self.tried))
                .is_some_and(|t| t.local)
    }

    /// Takes the answer to the call [`next_call`](Self::next_call) named
    /// (or why none came). Answers a full part of a split quota, for the
    /// isolate to remember.
    pub fn answer(&mut self, answer: Result<Outcome, String>) -> Option<(ObjectName, Outcome)> {
        let layer = self.layers.get(self.passed.len())?;
        let object = layer.tries().get(self.tried)?.object.clone();
        self.tried += 1;
        let outcome = match answer {
            Ok(outcome) => outcome,
            Err(error) if self.fail_open => {
                self.pass(Passed::Skipped { object, error });
                return None;
            }
            Err(error) => {
                self.stop = Some(Stop::Failed { object, error });
                return None;
            }
        };
        match layer.judge(outcome) {
            Judged::Decided(outcome) if outcome.allowed => {
                self.pass(Passed::Admitted { object, outcome });
                None
            }
            Judged::Decided(outcome) => {
                let object = Some(object);
                self.stop = Some(Stop::Refused { object, outcome });
                None
            }
            Judged::Full(outcome) => {
                self.full = sooner(self.full.take(), outcome.clone());
                if self.tried >= layer.tries().len() {
                    if let Some(soonest) = self.full.take() {
                        self.stop = Some(Stop::Refused {
                            object: None,
                            outcome: soonest,
                        });
                    }
                }
                Some((object, outcome))
            }
        }
    }

    fn pass(&mut self, passed: Passed) {
        self.passed.push(passed);
        self.tried = 0;
        self.full = None;
    }

    /// The reservations to keep or refund now, in the background, once the
    /// climb has ended. A climb that stopped refunds every reservation
    /// taken, a failed call's too (the object may have taken it before the
    /// answer was lost); one that went past every layer keeps those the
    /// origin's answer does not settle.
    pub fn settle_now(&self) -> Vec<SettleRequest> {
        let refund = self.stop.is_some();
        let settle = |object: &ObjectName, id: &str| SettleRequest {
            key: object.to_string(),
            reservation: id.to_string(),
            keep: !refund,
        };
        let mut settles: Vec<SettleRequest> = self
            .layers
            .iter()
            .zip(&self.passed)
            .filter(|(layer, passed)| {
                refund || !layer.settled_by_answer() || matches!(passed, Passed::Skipped { .. })
            })
            .filter_map(|(layer, passed)| Some(settle(passed.object(), layer.reservation()?)))
            .collect();
        if let Some(Stop::Failed { object, .. }) = &self.stop {
            let failed = self.layers.get(self.passed.len());
            if let Some(id) = failed.and_then(Layered::reservation) {
                settles.push(settle(object, id));
            }
        }
        settles
    }

    /// The layers, how each one gone past answered, and what stopped the
    /// climb, if anything did.
    pub fn into_parts(self) -> (Vec<L>, Vec<Passed>, Option<Stop>) {
        (self.layers, self.passed, self.stop)
    }
}

impl Layered for Ask<'_> {
    fn tries(&self) -> &[Try] {
        &self.tries
    }

    fn reservation(&self) -> Option<&str> {
        self.reservation.as_deref()
    }

    fn settled_by_answer(&self) -> bool {
        self.level.count.is_some()
    }

    fn judge(&self, outcome: Outcome) -> Judged {
        Ask::judge(self, outcome)
    }
}

/// A request of a rule, asked of each of its layers in turn.
#[derive(Debug)]
pub struct Stack<'a> {
    /// The caller's key (the first keyed layer's), for echoes.
    key: String,
    /// What the request is counted under: the caller's key, or under
    /// global layers alone its client's address.
    reported: String,
    climb: Climb<Ask<'a>>,
    /// How long the edge waits for each answer: the longest any layer
    /// asks (a lease's queue included).
    pub deadline_ms: u64,
}

impl<'a> Stack<'a> {
    pub(super) fn new(
        rule: &'a Rule,
        key: String,
        reported: String,
        asks: Vec<Ask<'a>>,
    ) -> Stack<'a> {
        let deadline_ms = asks.iter().map(|a| a.deadline_ms).max().unwrap_or(0);
        let fail_open = rule.on_error == OnError::Allow;
        Stack {
            key,
            reported,
            climb: Climb::new(asks, fail_open),
            deadline_ms,
        }
    }

    /// A rule of one layer: the same climb, one step long.
    pub fn single(ask: Ask<'a>) -> Stack<'a> {
        let (rule, key, reported) = (ask.rule, ask.key.clone(), ask.reported());
        Stack::new(rule, key, reported, vec![ask])
    }

    pub fn next_call(&self) -> Option<&CheckRequest> {
        self.climb.next_call()
    }

    pub fn next_local(&self) -> bool {
        self.climb.next_local()
    }

    pub fn answer(&mut self, answer: Result<Outcome, String>) -> Option<(ObjectName, Outcome)> {
        self.climb.answer(answer)
    }

    /// What the request's climb ends in. A layer that stopped it concludes
    /// as a rule of that one layer would (a refusal names its policies; a
    /// failure takes `on_error`); when every layer admitted, the request is
    /// forwarded with every layer's RateLimit fields, in the config's order.
    /// Either way the reservations to keep or refund go with it.
    pub fn conclude(self, now_ms: u64) -> Conclusion {
        let settle_now = self.climb.settle_now();
        let (asks, passed, stop) = self.climb.into_parts();
        let at = passed.len();
        let mut asks = asks.into_iter();
        let concluded = match stop {
            Some(stop) => asks.nth(at).map(|ask| match stop {
                Stop::Refused {
                    object: Some(object),
                    outcome,
                } => ask.conclude(object, outcome, now_ms),
                Stop::Refused {
                    object: None,
                    outcome,
                } => ask.all_full(Some(outcome), now_ms),
                Stop::Failed { object, error } => ask.failed(&object, &error),
            }),
            None => {
                let mut admitted: Vec<(usize, Conclusion)> = passed
                    .into_iter()
                    .zip(asks)
                    .map(|(passed, ask)| {
                        let position = ask.position;
                        let concluded = match passed {
                            Passed::Admitted { object, outcome } => {
                                ask.conclude(object, outcome, now_ms)
                            }
                            Passed::Skipped { object, error } => ask.failed(&object, &error),
                        };
                        (position, concluded)
                    })
                    .collect();
                short_sort::sort_by_key(&mut admitted, |(position, _)| *position);
                admitted.into_iter().map(|(_, c)| c).reduce(merge)
            }
        };
        let mut conclusion =
            concluded.unwrap_or_else(|| Conclusion::reply(Reply::Answer(unavailable())));
        let key = self.key;
        if let Reply::Forward(pass) = &mut conclusion.reply {
            if pass.key.is_some() {
                pass.key = Some(key.clone());
            }
        }
        let reported = self.reported;
        conclusion.record = conclusion.record.map(|(_, verdict)| (reported, verdict));
        conclusion.settle_now = settle_now;
        conclusion
    }
}

/// Two layers' conclusions for one admitted request: one forward with
/// both layers' RateLimit members, both settles, the lease, the first log
/// line, and what the more telling layer was counted as (a failure if
/// either failed open, an admission near a limit if either was).
fn merge(mut first: Conclusion, second: Conclusion) -> Conclusion {
    first.record = match (first.record, second.record) {
        (Some((key, a)), Some((_, b))) => Some((key, a.max(b))),
        (record, other) => record.or(other),
    };
    first.log = first.log.or(second.log);
    if let (Reply::Forward(pass), Reply::Forward(other)) = (&mut first.reply, second.reply) {
        merge_pass(pass, other);
    }
    first
}

fn merge_pass(pass: &mut Pass, other: Pass) {
    for (name, value) in other.fields {
        match pass.fields.iter_mut().find(|(n, _)| *n == name) {
            // Both are structured-field lists: one member per policy.
            Some((_, members)) if name == "ratelimit-policy" || name == "ratelimit" => {
                members.push_str(", ");
                members.push_str(&value);
            }
            Some(_) => {}
            None => pass.fields.push((name, value)),
        }
    }
    pass.key = pass.key.take().or(other.key);
    pass.release = pass.release.take().or(other.release);
    pass.settle.extend(other.settle);
}

/// One key of a decision-API call: one call to its object.
#[derive(Debug)]
pub struct KeyCall {
    attempt: Try,
    reservation: Option<String>,
}

impl Layered for KeyCall {
    fn tries(&self) -> &[Try] {
        std::slice::from_ref(&self.attempt)
    }

    fn reservation(&self) -> Option<&str> {
        self.reservation.as_deref()
    }

    fn settled_by_answer(&self) -> bool {
        false
    }

    fn judge(&self, outcome: Outcome) -> Judged {
        Judged::Decided(outcome)
    }
}

/// The check a decision-API call makes of its key's object. Any caller may
/// send any policy, so a conflict with the state the key holds is refused,
/// not adopted.
pub fn api_check(request: &LimitRequest) -> Try {
    let object = Scope::Api.object(&request.key);
    let mut check = CheckRequest::new(object.as_str(), &request.policies, request.cost, None);
    check.refuse_conflicts = true;
    Try {
        object,
        request: check,
        local: request.local,
    }
}

/// A decision-API call with `layers` as a climb: each key's object in
/// turn, every one but the last reserving (a peek reserves nothing), and
/// a failure failing the call. `new_id` draws reservation ids; `None` when
/// it has none to give.
pub fn key_climb(
    request: &LayeredRequest,
    mut new_id: impl FnMut() -> Option<String>,
) -> Option<Climb<KeyCall>> {
    let last = request.layers.len().saturating_sub(1);
    let mut calls = Vec::with_capacity(request.layers.len());
    for (i, layer) in request.layers.iter().enumerate() {
        let mut attempt = api_check(&layer.request);
        let reservation = if i < last && request.cost > 0 {
            Some(new_id()?)
        } else {
            None
        };
        attempt.request.reserve = reservation.as_ref().map(|id| ReserveAsk {
            id: id.clone(),
            ttl_ms: RESERVATION_TTL_MS,
        });
        calls.push(KeyCall {
            attempt,
            reservation,
        });
    }
    Some(Climb::new(calls, false))
}
