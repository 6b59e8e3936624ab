//! From a matched request to what it needs: an answer at once (allow and
//! deny lists, a bad token, no key, a manual ban, a cached refusal), or a
//! question to the key's object, or to parts of a split quota.

use std::net::IpAddr;

use super::conclude::{manually_banned, refusal, sooner};
use super::halt::halted;
use super::{Answer, Conclusion, Reply};
use crate::config::{Config, OnInvalid, Rule, Tier};
use crate::control::Control;
use crate::http::api::RESERVATION_TTL_MS;
use crate::http::cidr::client_network;
use crate::http::jwt::{self, Claims, Hs256Key};
use crate::http::key::KeyInputs;
use crate::http::problem::{Code, Problem};
use crate::http::Incoming;
use crate::isolate::banlist::BanRecord;
use crate::isolate::stats::Verdict;
use crate::ledger::{LeaseAsk, Outcome};
use crate::limit::{split, Spec};
use crate::objects::name::{ObjectName, GLOBAL_KEY};
use crate::objects::protocol::{CheckRequest, QueueAsk, ReserveAsk};

/// The rule a request matched, and what the match gave keys to use.
pub struct Matched<'a> {
    pub rule: &'a Rule,
    /// The path as the rule compared it (canonical, folded per its `paths`).
    pub path: &'a str,
    pub params: &'a [(&'a str, &'a str)],
    /// The client's address (`CF-Connecting-IP`), parsed once per request
    /// for the deny list that holds before any rule.
    pub ip: Option<IpAddr>,
}

/// What the isolate knows before the request: the config, the JWT key, and
/// its memory of bans and refusals.
pub struct Known<'a, 'm, M: Memory> {
    pub config: &'a Config,
    pub jwt_key: Option<&'m Hs256Key>,
    pub memory: &'m M,
}

/// One request, as the rule that matched it sees it.
pub struct Arrival<'a, 'r, I: Incoming> {
    pub matched: Matched<'a>,
    pub request: &'r I,
    pub now_ms: u64,
}

/// What the isolate remembers between requests, read without I/O.
pub trait Memory {
    /// The operator's active ban on the client's address `ip` (or a
    /// network holding it) or on any of `keys`.
    fn manual_ban(&self, ip: Option<IpAddr>, keys: &[&str], now_ms: u64) -> Option<BanRecord>;
    /// A refusal of `object` that still holds.
    fn cached_refusal(&self, object: &ObjectName, now_ms: u64) -> Option<Outcome>;
    /// The state of rule `rule` (not a global quota: its parts hold
    /// theirs) when an operator paused or closed it, as this isolate last
    /// read it.
    fn rule_state(&self, rule: &str, now_ms: u64) -> Option<Control>;
}

/// Randomness: ids nobody can guess (leases, reservations) and the draw
/// that routes a split quota. `None` when the platform has none to give.
pub trait Chance {
    fn id(&mut self) -> Option<String>;
    fn pair(&mut self) -> Option<(u32, u32)>;
}

/// What a request needs. Returned once per request and matched at once,
/// never stored, so its variants' sizes do not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Plan<'a> {
    /// Nothing to ask: the answer is known.
    Done(Conclusion),
    /// Ask the objects in `tries`, in order, until one decides.
    Ask(Ask<'a>),
}

/// A question to a key's object, or to the parts of a split quota.
#[derive(Debug)]
pub struct Ask<'a> {
    pub rule: &'a Rule,
    pub tier: &'a Tier,
    /// The caller's key (`*` under a global quota), for reports and echoes.
    pub key: String,
    /// Under a global quota, the client its refusals are counted under
    /// among the top refused keys: its address (its network for IPv6, as
    /// `ip` keys are built), or `*` when it has none.
    pub client: Option<String>,
    /// One object; for a split quota, one part and a second chance.
    pub tries: Vec<Try>,
    /// For a split quota: the soonest refusal among parts the isolate
    /// already knows are full, which were skipped.
    pub known_full: Option<Outcome>,
    /// How long the edge waits for each answer, a lease's queue included.
    pub deadline_ms: u64,
    /// The reservation an admission takes, for a rule that counts by answer.
    pub reservation: Option<String>,
}

/// One object and what to ask it.
#[derive(Debug, Clone, PartialEq)]
pub struct Try {
    pub object: ObjectName,
    pub request: CheckRequest,
}

/// What one object's answer means for the rest of an [`Ask`].
#[derive(Debug, PartialEq)]
pub enum Judged {
    /// The decision: conclude with it.
    Decided(Outcome),
    /// A full part of a split quota: cache it, try the next part.
    Full(Outcome),
}

/// Plans a request a rule matched. Allow-listed callers and callers no
/// tier covers pass untouched; deny-listed ones, invalid tokens and
/// requests without their key's parts are answered; so are manual bans and
/// refusals the isolate remembers, without a call.
pub fn plan<'a, M: Memory, I: Incoming>(
    known: &Known<'a, '_, M>,
    arrival: Arrival<'a, '_, I>,
    chance: &mut impl Chance,
) -> Plan<'a> {
    let Arrival {
        matched,
        request,
        now_ms,
    } = arrival;
    let (config, rule) = (known.config, matched.rule);
    let ip = matched.ip;
    if let Some(ip) = ip {
        if config.allow.contains(ip) || rule.allow.contains(ip) {
            return done(Reply::untouched());
        }
        if rule.deny.contains(ip) {
            return done(Reply::Answer(denied(&rule.id).into()));
        }
    }
    let claims = match caller(known, request, rule, now_ms) {
        Ok(claims) => claims,
        Err(problem) => {
            let fields = vec![("www-authenticate", "Bearer error=\"invalid_token\"".into())];
            return done(Reply::Answer(Answer { problem, fields }));
        }
    };
    let Some(tier) = rule.tier_for(claims.as_ref()) else {
        return done(Reply::untouched());
    };
    let inputs = KeyInputs {
        path: matched.path,
        params: matched.params,
        claims: claims.as_ref(),
        action: rule.action.as_deref(),
        ipv6_prefix: config.ipv6_prefix,
    };
    let key = match tier.key.build(request, &inputs) {
        _ if rule.global.is_some() => GLOBAL_KEY.to_string(),
        Ok(key) => key,
        Err(missing) => {
            let problem = Problem::new(Code::MissingKey, missing.to_string())
                .with("rule", rule.id.as_str())
                .with("field", missing.part.as_str());
            return done(Reply::Answer(problem.into()));
        }
    };
    let network = ip.map(|ip| client_network(ip, config.ipv6_prefix));
    let candidates: Vec<&str> = network
        .iter()
        .map(String::as_str)
        .chain([key.as_str()])
        .collect();
    let client = rule
        .global
        .as_ref()
        .map(|_| network.clone().unwrap_or_else(|| GLOBAL_KEY.to_string()));
    let reported = client.clone().unwrap_or_else(|| key.clone());
    if let Some(ban) = known.memory.manual_ban(ip, &candidates, now_ms) {
        let status = rule.ban.map_or(429, |b| b.status);
        let answer = manually_banned(status, &ban, now_ms);
        return Plan::Done(refused(reported, answer));
    }
    // A global quota's state lives in its parts, which answer with it.
    if rule.global.is_none() {
        if let Some(control) = known.memory.rule_state(&rule.id, now_ms) {
            return Plan::Done(refused(reported, halted(&rule.id, &control)));
        }
    }
    let ask = Ask {
        rule,
        tier,
        key,
        client,
        tries: Vec::new(),
        known_full: None,
        deadline_ms: config.timeout_ms,
        reservation: None,
    };
    match rule.split_parts() {
        Some(parts) => ask.split(parts, known.memory, chance, now_ms),
        None => ask.one(known.memory, chance, now_ms),
    }
}

impl<'a> Ask<'a> {
    /// The key's own object, with the rule's lease, queue and reservation.
    fn one(mut self, memory: &impl Memory, chance: &mut impl Chance, now_ms: u64) -> Plan<'a> {
        let (rule, tier) = (self.rule, self.tier);
        let object = tier.scope.object(&self.key);
        if !rule.shadow {
            if let Some(cached) = memory.cached_refusal(&object, now_ms) {
                let answer = refusal(rule, &cached, now_ms);
                return Plan::Done(refused(self.reported(), answer));
            }
        }
        let ban = rule.ban.as_ref().map(|b| &b.policy);
        let mut request = CheckRequest::new(object.as_str(), &tier.policies, 1, ban);
        request.watched = rule.global.is_some();
        if let Some(concurrency) = &rule.concurrency {
            let Some(new_id) = chance.id() else {
                return Plan::Done(self.failed(&object, "no randomness for a lease id"));
            };
            request.lease = Some(LeaseAsk {
                name: format!("{}.concurrency", rule.id),
                limit: concurrency.limit,
                ttl_ms: concurrency.lease_ttl_ms,
                owner: None,
                reenter: None,
                strict_limit: false,
                new_id,
            });
            if concurrency.max_wait_ms > 0 {
                request.queue = Some(QueueAsk {
                    max_wait_ms: concurrency.max_wait_ms,
                    max_len: concurrency.max_queue,
                });
                self.deadline_ms += concurrency.max_wait_ms;
            }
        }
        if rule.count.is_some() {
            let Some(id) = chance.id() else {
                return Plan::Done(self.failed(&object, "no randomness for a reservation id"));
            };
            request.reserve = Some(ReserveAsk {
                id: id.clone(),
                ttl_ms: RESERVATION_TTL_MS,
            });
            self.reservation = Some(id);
        }
        self.tries.push(Try { object, request });
        Plan::Ask(self)
    }

    /// A split quota: a random part, and one other when that part is full.
    /// A part the isolate knows is full is skipped without a call, so a
    /// flood after a sell-out costs no calls.
    fn split(
        mut self,
        parts: &[Vec<(String, Spec)>],
        memory: &impl Memory,
        chance: &mut impl Chance,
        now_ms: u64,
    ) -> Plan<'a> {
        let scope = &self.tier.scope;
        let Some((a, b)) = chance.pair() else {
            return Plan::Done(self.failed(&scope.part(0), "no randomness to route a split quota"));
        };
        let count = u32::try_from(parts.len()).unwrap_or(split::MAX_PARTS);
        let (first, second) = split::route(count, a, b);
        for part in [Some(first), second].into_iter().flatten() {
            let object = scope.part(part);
            if !self.rule.shadow {
                if let Some(cached) = memory.cached_refusal(&object, now_ms) {
                    self.known_full = sooner(self.known_full, cached);
                    continue;
                }
            }
            if let Some(specs) = parts.get(part as usize) {
                let mut request = CheckRequest::new(object.as_str(), specs, 1, None);
                request.watched = true;
                self.tries.push(Try { object, request });
            }
        }
        if self.tries.is_empty() {
            return Plan::Done(self.all_full(None, now_ms));
        }
        Plan::Ask(self)
    }
}

fn done(reply: Reply) -> Plan<'static> {
    Plan::Done(Conclusion::reply(reply))
}

/// A refusal the isolate answers itself: counted, nothing else.
fn refused(key: String, answer: Answer) -> Conclusion {
    Conclusion {
        record: Some((key, Verdict::Refused)),
        ..Conclusion::reply(Reply::Answer(answer))
    }
}

/// A caller refused before any decision: deny-listed.
pub fn denied(rule_id: &str) -> Problem {
    Problem::new(Code::Denied, "the client address is on a deny list").with("rule", rule_id)
}

/// The verified claims of a registered caller; `None` for an anonymous one.
/// A token that fails verification is never treated as registered.
fn caller<M: Memory>(
    known: &Known<'_, '_, M>,
    request: &impl Incoming,
    rule: &Rule,
    now_ms: u64,
) -> Result<Option<Claims>, Problem> {
    let (Some(jwt_config), Some(key)) = (&known.config.jwt, known.jwt_key) else {
        return Ok(None);
    };
    if !rule.uses_jwt() {
        return Ok(None);
    }
    // Another scheme (Basic, say) carries no JWT, but a Bearer header whose
    // token is malformed (empty, or with spaces inside) fails verification
    // like any other bad token.
    let Some(header) = request.header("authorization") else {
        return Ok(None);
    };
    let scheme = header.trim_start().split(' ').next().unwrap_or("");
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Ok(None);
    }
    let token = jwt::bearer(header.trim()).unwrap_or("");
    match jwt::verify(token, key, now_ms / 1000, &jwt_config.checks) {
        Ok(claims) => Ok(Some(claims)),
        Err(e) => match jwt_config.on_invalid {
            OnInvalid::Anonymous => Ok(None),
            OnInvalid::Reject => Err(Problem::new(
                Code::InvalidToken,
                format!("the bearer token was refused: {e}"),
            )),
        },
    }
}
