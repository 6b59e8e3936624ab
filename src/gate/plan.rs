//! From a matched request to what it needs: an answer at once (allow and
//! deny lists, a bad token, no key, a manual ban, a cached refusal), or a
//! question to the key's object, or to parts of a split quota.

use std::net::IpAddr;

use super::conclude::{manually_banned, refusal};
use super::halt::halted;
use super::layers::Stack;
use super::{Answer, Conclusion, Reply};
use crate::config::lookup::state_in_parts;
use crate::config::{Config, Level, OnInvalid, Rule};
use crate::control::Control;
use crate::http::api::RESERVATION_TTL_MS;
use crate::http::cidr::client_network;
use crate::http::jwt::{self, Claims, Hs256Key};
use crate::http::key::{KeyError, KeyInputs};
use crate::http::problem::{Code, Problem};
use crate::http::Incoming;
use crate::isolate::banlist::BanRecord;
use crate::isolate::stats::Verdict;
use crate::ledger::{LeaseAsk, Outcome, StockAsk};
use crate::limit::{split, Spec};
use crate::objects::name::{ObjectName, Scope, GLOBAL_KEY};
use crate::objects::protocol::{CheckRequest, QueueAsk, ReserveAsk};
use crate::short_sort;

/// The rule a request matched, and what the match gave keys to use.
pub struct Matched<'a> {
    pub rule: &'a Rule,
    /// The path as the rule compared it (canonical, folded per its `paths`).
    pub path: &'a str,
    pub params: &'a [(&'a str, &'a str)],
    /// The client's address (`CF-Connecting-IP`), parsed once per request
    /// for the deny list that holds before any rule.
    pub ip: Option<IpAddr>,
    /// Whether the rule's `also` layers are asked: always, but for a
    /// waiting room's join after its opening, which the room's pre-queue
    /// cap no longer counts.
    pub also: bool,
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
    /// A refusal of `object` that still holds, telling the next moment
    /// its batch holds (handed out only when a conclusion's `invited` says
    /// it was told).
    fn cached_refusal(&self, object: &ObjectName, now_ms: u64) -> Option<Outcome>;
    /// How many moments to ask `object` for, should it refuse over quota:
    /// its own and a batch for the refusals that follow to be answered
    /// from the cache.
    fn invitations(&self, object: &ObjectName) -> u32;
    /// Whether the isolate holds a refusal of `object` at `now_ms`, its
    /// batch of moments spent or not: a layer whose objects all refuse is
    /// asked first, so that a flood after a sell-out costs the per-user
    /// layers no call, and the full layer one call per batch.
    fn refuses(&self, object: &ObjectName, now_ms: u64) -> bool;
    /// The state of rule `rule` (not a global quota: its parts hold
    /// theirs) when an operator paused or closed it, as this isolate last
    /// read it.
    fn rule_state(&self, rule: &str, now_ms: u64) -> Option<Control>;
    /// A part of `scope`'s split quota (of `parts`) that an admission
    /// block the isolate holds can admit one more request into at
    /// `now_ms`, if any.
    fn block_part(&self, scope: &Scope, parts: u32, now_ms: u64) -> Option<u32>;
}

/// Randomness: ids nobody can guess (leases, reservations) and the draw
/// that routes a split quota. `None` when the platform has none to give.
pub trait Chance {
    fn id(&mut self) -> Option<String>;
    fn pair(&mut self) -> Option<(u32, u32)>;
}

/// The parts of a split quota one request tries: a random one, and a
/// different second when there are two or more (`split::route`).
type Route = (u32, Option<u32>);

/// What a request needs. Returned once per request and matched at once,
/// never stored, so its variants' sizes do not matter.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Plan<'a> {
    /// Nothing to ask: the answer is known.
    Done(Conclusion),
    /// Ask the objects in `tries`, in order, until one decides.
    Ask(Ask<'a>),
    /// Ask each layer of a rule with `also` in turn
    /// ([`Stack`](super::Stack)), until every one admitted or one refused.
    Stack(Stack<'a>),
}

/// A question to one layer of a rule: a key's object, or the parts of a
/// split quota.
#[derive(Debug)]
pub struct Ask<'a> {
    pub rule: &'a Rule,
    /// The rule's own layer (its tier's) or one of its `also` layers.
    pub level: Level<'a>,
    /// Its place among the rule's layers, which orders the RateLimit
    /// fields of an admission whatever order the layers were asked in.
    pub position: usize,
    /// The caller's key in this layer (`*` under a global quota), for
    /// reports and echoes.
    pub key: String,
    /// Under a global quota, the client its refusals are counted under
    /// among the top refused keys: its address (its network for IPv6, as
    /// `ip` keys are built), or `*` when it has none.
    pub client: Option<String>,
    /// One object; for a split quota, one part and a second chance.
    pub tries: Vec<Try>,
    /// For a split quota: the soonest refusal among parts the isolate
    /// already knows are full, which were skipped, and its part.
    pub known_full: Option<(ObjectName, Outcome)>,
    /// How long the edge waits for each answer, a lease's queue included.
    pub deadline_ms: u64,
    /// The reservation an admission takes: in a layer that counts by
    /// answer, or one that a later layer may refuse.
    pub reservation: Option<String>,
}

/// One object and what to ask it.
#[derive(Debug, Clone, PartialEq)]
pub struct Try {
    pub object: ObjectName,
    pub request: CheckRequest,
    /// Whether the isolate may decide it from an admission block
    /// (`crate::ledger::blocks`): a check whose every answer the object
    /// would give a block's holder too, a reservation included (held
    /// pending in the block). Off for shadow rules and concurrency.
    pub local: bool,
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
    let mut levels = rule.levels(tier);
    levels.retain(|level| level.own || matched.also);
    let mut keys = Vec::with_capacity(levels.len());
    for level in &levels {
        match level.key.map(|spec| spec.build(request, &inputs)) {
            None => keys.push(GLOBAL_KEY.to_string()),
            Some(Ok(key)) => keys.push(key),
            Some(Err(unusable)) => {
                return done(Reply::Answer(unusable_key(rule, &unusable).into()))
            }
        }
    }
    // The key reported for the request: the caller's, from the first
    // layer that has one (`*` when every layer is global).
    let key = levels
        .iter()
        .zip(&keys)
        .find(|(level, _)| level.key.is_some())
        .map_or_else(|| GLOBAL_KEY.to_string(), |(_, key)| key.clone());
    let network = ip.map(|ip| client_network(ip, config.ipv6_prefix));
    let candidates: Vec<&str> = network
        .iter()
        .map(String::as_str)
        .chain(keys.iter().map(String::as_str))
        .collect();
    // Under a global quota a request is counted by its client's address
    // rather than `*`, so that the top refused keys name clients; a rule
    // with a keyed layer is counted by the caller's key.
    let client = network.clone().unwrap_or_else(|| GLOBAL_KEY.to_string());
    let reported = if levels.iter().any(|level| level.key.is_some()) {
        key.clone()
    } else {
        client.clone()
    };
    if let Some(ban) = known.memory.manual_ban(ip, &candidates, now_ms) {
        let status = rule.ban.map_or(429, |b| b.status);
        let answer = manually_banned(status, &ban, now_ms);
        return Plan::Done(refused(reported, answer));
    }
    // A global quota's state lives in its parts (a global layer's too),
    // which answer with it.
    if !state_in_parts(rule) {
        if let Some(control) = known.memory.rule_state(&rule.id, now_ms) {
            return Plan::Done(refused(reported, halted(&rule.id, &control)));
        }
    }
    // Every layer is planned before any is asked, so that a refusal the
    // isolate remembers for any of them (a sold-out quota's parts, say)
    // answers the request with no call at all. A layer it knows refuses,
    // with no moment left to tell, is asked first (the sort is stable:
    // the others keep the config's order, the per-user layer first). A
    // split quota's parts are routed first, so that it is the parts this
    // request would ask that are looked up.
    let last = levels.len().saturating_sub(1);
    let mut layers: Vec<_> = levels
        .into_iter()
        .zip(keys)
        .map(|(level, key)| {
            let route = level.split_parts().and_then(|parts| {
                let (a, b) = chance.pair()?;
                let count = u32::try_from(parts.len()).unwrap_or(split::MAX_PARTS);
                Some(split::route(count, a, b))
            });
            (level, key, route)
        })
        .enumerate()
        .collect();
    if layers.len() > 1 {
        short_sort::sort_by_key(&mut layers, |(_, (level, key, route))| {
            !known_refused(known.memory, level, key, *route, now_ms)
        });
    }
    let mut asks = Vec::with_capacity(layers.len());
    for (i, (position, (level, layer_key, route))) in layers.into_iter().enumerate() {
        let ask = Ask {
            rule,
            level,
            position,
            key: layer_key,
            client: level.key.is_none().then(|| client.clone()),
            tries: Vec::new(),
            known_full: None,
            deadline_ms: config.timeout_ms,
            reservation: None,
        };
        let reserve = i < last || level.count.is_some();
        let planned = match level.split_parts() {
            Some(parts) => ask.split(parts, route, known.memory, chance, now_ms, reserve),
            None => ask.one(known.memory, chance, now_ms, reserve),
        };
        match planned {
            Ok(ask) => asks.push(ask),
            Err(mut conclusion) => {
                conclusion.record = conclusion.record.map(|(_, verdict)| (reported, verdict));
                return Plan::Done(conclusion);
            }
        }
    }
    match asks.len() {
        1 => asks
            .pop()
            .map_or_else(|| done(Reply::untouched()), Plan::Ask),
        _ => Plan::Stack(Stack::new(rule, key, reported, asks)),
    }
}

/// Whether the isolate holds a refusal of every object this request would
/// ask of a layer: its key's, or the parts `route` picked of its split
/// quota. A layer with a GCRA policy is never moved ahead: asked first it
/// would reserve, and a GCRA unit cannot be given back.
fn known_refused(
    memory: &impl Memory,
    level: &Level<'_>,
    key: &str,
    route: Option<Route>,
    now_ms: u64,
) -> bool {
    if level.policies.iter().any(|(_, spec)| !spec.refunds()) {
        return false;
    }
    match (level.split_parts(), route) {
        (Some(_), Some((first, second))) => [Some(first), second]
            .into_iter()
            .flatten()
            .all(|part| memory.refuses(&level.scope.part(part), now_ms)),
        (Some(_), None) => false,
        (None, _) => memory.refuses(&level.scope.object(key), now_ms),
    }
}

/// A request without a part its key needs: a 400 naming the part.
fn unusable_key(rule: &Rule, unusable: &KeyError) -> Problem {
    Problem::new(unusable.code(), unusable.to_string())
        .with("rule", rule.id.as_str())
        .with("field", unusable.part())
}

impl<'a> Ask<'a> {
    /// The key's own object, with the layer's lease, queue and
    /// reservation; a refusal the isolate remembers answers at once. (The
    /// answer is matched at once, once per layer, so its size does not
    /// matter.)
    #[allow(clippy::result_large_err)]
    fn one(
        mut self,
        memory: &impl Memory,
        chance: &mut impl Chance,
        now_ms: u64,
        reserve: bool,
    ) -> Result<Ask<'a>, Conclusion> {
        let (rule, level) = (self.rule, self.level);
        let object = level.scope.object(&self.key);
        if !rule.shadow {
            if let Some(cached) = memory.cached_refusal(&object, now_ms) {
                let answer = refusal(rule, &cached, now_ms);
                return Err(Conclusion {
                    invited: Some(object),
                    ..refused(self.reported(), answer)
                });
            }
        }
        let ban = level.ban.map(|b| &b.policy);
        let mut request = CheckRequest::new(object.as_str(), level.policies, 1, ban);
        request.watched = level.key.is_none();
        request.stock = stock(&level, 0, 1);
        // Only refusals the isolate caches need moments for its cache:
        // under a ban policy each refusal goes to the object to count.
        if !rule.shadow && ban.is_none() {
            request.invitations = memory.invitations(&object);
        }
        if let Some(concurrency) = rule.concurrency.as_ref().filter(|_| level.own) {
            let Some(new_id) = chance.id() else {
                return Err(self.failed(&object, "no randomness for a lease id"));
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
        if reserve {
            let Some(id) = chance.id() else {
                return Err(self.failed(&object, "no randomness for a reservation id"));
            };
            request.reserve = Some(reservation(&id));
            self.reservation = Some(id);
        }
        // A rule with a ban may: an isolate admits from a block but never
        // refuses from one, so every refusal still reaches the object (or
        // the isolate's copy of a ban it answered) and counts there.
        let local = self.local() && request.lease.is_none();
        self.tries.push(Try {
            object,
            request,
            local,
        });
        Ok(self)
    }

    /// Whether this layer's admission may come from a block: the rule
    /// allows it. A reservation (a layer a later one may refuse, or one
    /// counted by the answer) is then held pending in the block, and its
    /// settle made in the isolate (`gate::local`).
    fn local(&self) -> bool {
        self.rule.local && !self.rule.shadow
    }

    /// A split quota: a random part, and one other when that part is full
    /// (`route`, drawn when the layers were ordered; `None` when the
    /// platform had no randomness). A part that a block the isolate holds
    /// can admit into goes first instead of the random one, so that a hot
    /// quota is decided in the isolate; the random part is then the second
    /// chance. A part the isolate knows is full is skipped without a call,
    /// so a flood after a sell-out costs no calls. Both parts are asked for
    /// the same reservation; only the one that admits holds it.
    #[allow(clippy::result_large_err)]
    fn split(
        mut self,
        parts: &[Vec<(String, Spec)>],
        route: Option<Route>,
        memory: &impl Memory,
        chance: &mut impl Chance,
        now_ms: u64,
        reserve: bool,
    ) -> Result<Ask<'a>, Conclusion> {
        let scope = self.level.scope;
        let Some((mut first, mut second)) = route else {
            return Err(self.failed(&scope.part(0), "no randomness to route a split quota"));
        };
        if reserve {
            let Some(id) = chance.id() else {
                return Err(self.failed(&scope.part(0), "no randomness for a reservation id"));
            };
            self.reservation = Some(id);
        }
        let local = self.local();
        let count = u32::try_from(parts.len()).unwrap_or(split::MAX_PARTS);
        if let Some(held) = local
            .then(|| memory.block_part(scope, count, now_ms))
            .flatten()
        {
            if held != first {
                second = Some(first);
                first = held;
            }
        }
        for part in [Some(first), second].into_iter().flatten() {
            let object = scope.part(part);
            if !self.rule.shadow {
                if let Some(cached) = memory.cached_refusal(&object, now_ms) {
                    let sooner = match &self.known_full {
                        Some((_, known)) => cached.retry < known.retry,
                        None => true,
                    };
                    if sooner {
                        self.known_full = Some((object, cached));
                    }
                    continue;
                }
            }
            if let Some(specs) = parts.get(part as usize) {
                let mut request = CheckRequest::new(object.as_str(), specs, 1, None);
                request.reserve = self.reservation.as_deref().map(reservation);
                request.watched = true;
                request.stock = stock(&self.level, part, count);
                if !self.rule.shadow {
                    request.invitations = memory.invitations(&object);
                }
                self.tries.push(Try {
                    object,
                    request,
                    local,
                });
            }
        }
        if self.tries.is_empty() {
            return Err(self.all_full(None, now_ms));
        }
        Ok(self)
    }
}

/// What a part of a quota that closes once sold out is told of it: which
/// part it is, of how many, and the whole limit.
fn stock(level: &Level<'_>, part: u32, parts: u32) -> Option<StockAsk> {
    level.global.filter(|g| g.sold_out)?;
    let whole = level.policies.first()?.1.limit();
    Some(StockAsk { part, parts, whole })
}

/// A reservation asked of a rule's object: kept when no settle comes
/// within the decision API's default wait.
fn reservation(id: &str) -> ReserveAsk {
    ReserveAsk {
        id: id.to_string(),
        ttl_ms: RESERVATION_TTL_MS,
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
