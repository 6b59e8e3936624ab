//! Stacked limits and exactness: random interleavings of layered requests
//! (a per-user layer, a per-team layer and a split global one), answers
//! lost after the object decided, keeps and refunds delivered late, out of
//! order, after their reservation lapsed or never, objects restarted from
//! their rows, and the isolate's refusal cache in front of them all. Every
//! request is planned, climbed and concluded by the gate itself, and every
//! object is a real ledger fed the very calls the gate makes.
//!
//! What must hold: no layer ever counts more than its limit (the windows
//! here outlast the test, so "in any window" is "at every moment"); a
//! request climbs on only past layers that admitted it, and its conclusion
//! keeps exactly the reservations of an admitted request and refunds every
//! reservation of a refused one; a refund delivered before its reservation
//! lapses takes the unit back, even across a restart; and in the end each
//! object counts exactly the admitted requests plus the units whose refund
//! was lost (or came too late) plus plain admissions whose answer was lost,
//! so never fewer than the requests it admitted.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;

use crate::support::Object;
use proptest::prelude::*;
use serde_json::json;
use sluice::config::Config;
use sluice::control::Control;
use sluice::gate::{plan, Arrival, Chance, Known, Matched, Memory, Plan, Reply, Stack};
use sluice::http::api::RESERVATION_TTL_MS;
use sluice::http::Incoming;
use sluice::isolate::banlist::BanRecord;
use sluice::isolate::refusals::RefusalCache;
use sluice::ledger::{Outcome, Settled};
use sluice::limit::split::share;
use sluice::objects::name::{ObjectName, Scope};
use sluice::objects::protocol::{CheckRequest, SettleRequest};

const USER_LIMIT: u64 = 2;
const TEAM_LIMIT: u64 = 3;
const GLOBAL_LIMIT: u64 = 5;
const PARTS: u32 = 2;
const USERS: usize = 5;

fn config() -> Config {
    Config::from_value(json!({
        "origin": "demo",
        "rules": [{
            "id": "checkout",
            "key": "header:x-user",
            "limit": USER_LIMIT,
            "window": "1d",
            "also": [
                {"id": "all", "scope": "global", "split": PARTS, "limit": GLOBAL_LIMIT, "window": "1d"},
                {"id": "team", "key": "header:x-team", "limit": TEAM_LIMIT, "window": "1d"},
            ],
        }],
    }))
    .unwrap()
}

/// The limit of the object `name` holds, by its layer.
fn limit_of(name: &str) -> u64 {
    match name.rsplit_once('#') {
        Some((_, part)) => share(GLOBAL_LIMIT, PARTS, part.parse().unwrap()),
        None if name.starts_with("rule:checkout.team:") => TEAM_LIMIT,
        None => USER_LIMIT,
    }
}

/// A buyer's request: who and in which team.
struct Buyer {
    user: String,
    team: String,
}

impl Incoming for Buyer {
    fn method(&self) -> &str {
        "POST"
    }

    fn header(&self, name: &str) -> Option<String> {
        match name {
            "x-user" => Some(self.user.clone()),
            "x-team" => Some(self.team.clone()),
            _ => None,
        }
    }
}

/// The isolate's refusal cache, as the plan reads it.
struct Isolate(RefCell<RefusalCache>);

impl Memory for Isolate {
    fn manual_ban(&self, _: Option<IpAddr>, _: &[&str], _: u64) -> Option<BanRecord> {
        None
    }

    fn cached_refusal(&self, object: &ObjectName, now_ms: u64) -> Option<Outcome> {
        self.0.borrow_mut().get(object.as_str(), now_ms)
    }

    fn invitations(&self, object: &ObjectName) -> u32 {
        self.0.borrow().invitations(object.as_str())
    }

    fn refuses(&self, object: &ObjectName, now_ms: u64) -> bool {
        self.0.borrow().holds(object.as_str(), now_ms)
    }

    fn rule_state(&self, _: &str, _: u64) -> Option<Control> {
        None
    }

    fn block_part(&self, _: &Scope, _: u32, _: u64) -> Option<u32> {
        None
    }
}

/// Reservation ids that never repeat, and routing draws from the test.
struct Draws {
    ids: u64,
    seed: u64,
}

impl Chance for Draws {
    fn id(&mut self) -> Option<String> {
        self.ids += 1;
        Some(format!("r{}", self.ids))
    }

    fn pair(&mut self) -> Option<(u32, u32)> {
        self.seed = self
            .seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        Some(((self.seed >> 33) as u32, (self.seed >> 13) as u32))
    }
}

/// A unit an object admitted for a request: where, the reservation it is
/// (`None` for a plain admission) with its lapse time, and whether the
/// answer that admitted it was lost.
#[derive(Debug, Clone)]
struct Unit {
    object: String,
    reservation: Option<(String, u64)>,
    lost: bool,
}

/// A request in flight or concluded.
struct Request<'a> {
    stack: Option<Stack<'a>>,
    /// Units objects admitted for it, whether or not the answer arrived.
    units: Vec<Unit>,
    forwarded: Option<bool>,
}

/// A settle sent in the background, for the request `from`.
struct Sent {
    from: usize,
    settle: SettleRequest,
}

#[derive(Default)]
struct World {
    objects: HashMap<String, Object>,
    now: u64,
}

impl World {
    /// What the object `request` names answers, as a key object does: it
    /// decides and writes before it answers.
    fn call(&mut self, request: &CheckRequest) -> Outcome {
        let object = self.objects.entry(request.key.clone()).or_default();
        object.answer(request, self.now)
    }

    fn settle(&mut self, settle: &SettleRequest) -> Option<Settled> {
        let object = self.objects.get_mut(&settle.key)?;
        let (settled, writes, expired) =
            object
                .ledger
                .settle(&settle.reservation, settle.keep, self.now);
        object.rows.write(writes);
        object.rows.delete(expired);
        settled
    }

    fn used(&mut self, name: &str) -> u64 {
        let now = self.now;
        self.objects.get_mut(name).map_or(0, |object| {
            object.ledger.peek(now).0.iter().map(|s| s.used).sum()
        })
    }
}

#[derive(Debug, Clone)]
enum Step {
    /// A new request from user `user`.
    Start {
        user: usize,
    },
    /// The next call of an in-flight request; its answer lost if `lose`.
    Call {
        pick: usize,
        lose: bool,
    },
    /// A background settle arrives.
    Deliver {
        pick: usize,
    },
    /// A background settle is lost.
    Drop {
        pick: usize,
    },
    /// An object restarts from its rows.
    Restart {
        pick: usize,
    },
    Tick {
        ms: u64,
    },
    /// Long enough for every pending reservation to lapse.
    Stall,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..USERS).prop_map(|user| Step::Start { user }),
        8 => (any::<usize>(), prop::bool::weighted(0.1)).prop_map(|(pick, lose)| Step::Call { pick, lose }),
        3 => any::<usize>().prop_map(|pick| Step::Deliver { pick }),
        1 => any::<usize>().prop_map(|pick| Step::Drop { pick }),
        1 => any::<usize>().prop_map(|pick| Step::Restart { pick }),
        2 => (0u64..2_000).prop_map(|ms| Step::Tick { ms }),
        1 => Just(Step::Stall),
    ]
}

/// What each object counts after every step: no more than its limit, and
/// the global parts together no more than the global limit.
fn check_limits(world: &mut World) -> Result<(), TestCaseError> {
    let names: Vec<String> = world.objects.keys().cloned().collect();
    let mut global = 0;
    for name in names {
        let used = world.used(&name);
        prop_assert!(used <= limit_of(&name), "{} counts {}", name, used);
        if name.contains('#') {
            global += used;
        }
    }
    prop_assert!(global <= GLOBAL_LIMIT, "the global layer counts {}", global);
    Ok(())
}

/// Makes `requests[i]`'s next call, or concludes it when it has none.
fn advance(
    world: &mut World,
    isolate: &Isolate,
    requests: &mut [Request<'_>],
    sent: &mut Vec<Sent>,
    i: usize,
    lose: bool,
) -> Result<(), TestCaseError> {
    let request = &mut requests[i];
    let Some(stack) = request.stack.as_mut() else {
        return Ok(());
    };
    if let Some(call) = stack.next_call().cloned() {
        let outcome = world.call(&call);
        if outcome.allowed {
            let reservation = call
                .reserve
                .as_ref()
                .map(|r| (r.id.clone(), world.now + r.ttl_ms));
            request.units.push(Unit {
                object: call.key.clone(),
                reservation,
                lost: lose,
            });
        }
        let answer = if lose {
            Err("the answer was lost".to_string())
        } else {
            Ok(outcome)
        };
        if let Some((part, full)) = stack.answer(answer) {
            isolate
                .0
                .borrow_mut()
                .insert(part.as_str(), &full, world.now);
        }
        return Ok(());
    }
    let Some(stack) = request.stack.take() else {
        return Ok(());
    };
    let conclusion = stack.conclude(world.now);
    let forwarded = matches!(conclusion.reply, Reply::Forward(_));
    if let Some((object, outcome)) = &conclusion.cache {
        isolate
            .0
            .borrow_mut()
            .insert(object.as_str(), outcome, world.now);
    }
    if let Some(object) = &conclusion.invited {
        isolate.0.borrow_mut().invited(object.as_str());
    }
    // An admitted request keeps every reservation it took; a refused one
    // refunds every one (and may refund one it was not granted).
    for unit in &request.units {
        let Some((id, _)) = &unit.reservation else {
            // Only the last layer admits plainly: past it, nothing can
            // refuse, so an unanswered call is the only way a plain unit
            // belongs to a refused request.
            prop_assert!(forwarded || unit.lost, "{:?} cannot be given back", unit);
            continue;
        };
        let settled = conclusion
            .settle_now
            .iter()
            .find(|s| s.key == unit.object && &s.reservation == id);
        prop_assert!(settled.is_some(), "{:?} is settled", unit);
        prop_assert_eq!(settled.map(|s| s.keep), Some(forwarded));
    }
    if forwarded {
        let reserved = request
            .units
            .iter()
            .filter(|u| u.reservation.is_some())
            .count();
        prop_assert_eq!(conclusion.settle_now.len(), reserved);
    }
    request.forwarded = Some(forwarded);
    sent.extend(
        conclusion
            .settle_now
            .into_iter()
            .map(|settle| Sent { from: i, settle }),
    );
    Ok(())
}

/// Delivers a settle; a refund that arrives before its reservation lapses
/// must take its unit back, whatever restarts happened meanwhile.
fn deliver(
    world: &mut World,
    requests: &[Request<'_>],
    refunded: &mut Vec<(String, String)>,
    sent: Sent,
) -> Result<(), TestCaseError> {
    let settled = world.settle(&sent.settle);
    let unit = requests[sent.from].units.iter().find(|u| {
        u.object == sent.settle.key
            && u.reservation.as_ref().map(|(id, _)| id) == Some(&sent.settle.reservation)
    });
    let Some((_, lapses)) = unit.and_then(|u| u.reservation.clone()) else {
        // A refund of a reservation the object never granted.
        prop_assert!(!sent.settle.keep && settled.is_none());
        return Ok(());
    };
    if world.now < lapses {
        prop_assert_eq!(settled.map(|s| s.kept), Some(sent.settle.keep));
        if !sent.settle.keep {
            refunded.push((sent.settle.key, sent.settle.reservation));
        }
    } else {
        prop_assert_eq!(settled, None, "a lapsed reservation was kept");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_layer_holds_its_limit_and_counts_exactly_what_it_must(
        steps in prop::collection::vec(step(), 1..150),
        seed in any::<u64>(),
    ) {
        let config = config();
        let rule = &config.rules[0];
        let isolate = Isolate(RefCell::new(RefusalCache::new(64)));
        let mut draws = Draws { ids: 0, seed };
        let mut world = World { now: 1_000_000, ..World::default() };
        let mut requests: Vec<Request<'_>> = Vec::new();
        let mut sent: Vec<Sent> = Vec::new();
        let mut refunded: Vec<(String, String)> = Vec::new();
        for step in steps {
            match step {
                Step::Start { user } => {
                    let buyer = Buyer { user: format!("u{user}"), team: format!("t{}", user % 2) };
                    let known = Known { config: &config, jwt_key: None, memory: &isolate };
                    let arrival = Arrival {
                        matched: Matched { rule, path: "/checkout", params: &[], ip: None, also: true },
                        request: &buyer,
                        now_ms: world.now,
                    };
                    let stack = match plan(&known, arrival, &mut draws) {
                        Plan::Stack(stack) => Some(stack),
                        Plan::Done(conclusion) => {
                            // Answered from the isolate's memory: refused, no call.
                            prop_assert!(matches!(conclusion.reply, Reply::Answer(_)));
                            None
                        }
                        Plan::Ask(_) => panic!("a stacked rule climbs"),
                    };
                    let forwarded = stack.is_none().then_some(false);
                    requests.push(Request { stack, units: Vec::new(), forwarded });
                }
                Step::Call { pick, lose } => {
                    let flying: Vec<usize> = (0..requests.len()).filter(|&i| requests[i].stack.is_some()).collect();
                    if let Some(&i) = flying.get(pick % flying.len().max(1)) {
                        advance(&mut world, &isolate, &mut requests, &mut sent, i, lose)?;
                    }
                }
                Step::Deliver { pick } if !sent.is_empty() => {
                    let settle = sent.remove(pick % sent.len());
                    deliver(&mut world, &requests, &mut refunded, settle)?;
                }
                Step::Drop { pick } if !sent.is_empty() => {
                    sent.remove(pick % sent.len());
                }
                Step::Deliver { .. } | Step::Drop { .. } => {}
                Step::Restart { pick } => {
                    let mut names: Vec<String> = world.objects.keys().cloned().collect();
                    names.sort();
                    if let Some(name) = names.get(pick % names.len().max(1)) {
                        if let Some(object) = world.objects.get_mut(name) {
                            object.ledger = object.rows.load();
                        }
                    }
                }
                Step::Tick { ms } => world.now += ms,
                Step::Stall => world.now += RESERVATION_TTL_MS + 1,
            }
            check_limits(&mut world)?;
        }
        // Every request still in flight finishes, its answers arriving; the
        // settles still on their way arrive; then every pending
        // reservation lapses.
        for i in 0..requests.len() {
            while requests[i].stack.is_some() {
                advance(&mut world, &isolate, &mut requests, &mut sent, i, false)?;
            }
        }
        for settle in std::mem::take(&mut sent) {
            deliver(&mut world, &requests, &mut refunded, settle)?;
        }
        world.now += RESERVATION_TTL_MS + 1;
        for object in world.objects.values_mut() {
            let expired = object.ledger.lapse(world.now);
            object.rows.delete(expired);
        }
        check_limits(&mut world)?;
        let mut expected: HashMap<String, u64> = HashMap::new();
        let mut admitted: HashMap<String, u64> = HashMap::new();
        for request in &requests {
            let forwarded = request.forwarded == Some(true);
            for unit in &request.units {
                let given_back = unit.reservation.as_ref().is_some_and(|(id, _)| {
                    refunded.contains(&(unit.object.clone(), id.clone()))
                });
                prop_assert!(!(forwarded && given_back), "an admitted request's unit was refunded");
                if !given_back {
                    *expected.entry(unit.object.clone()).or_default() += 1;
                }
                if forwarded {
                    *admitted.entry(unit.object.clone()).or_default() += 1;
                }
            }
        }
        let names: Vec<String> = world.objects.keys().cloned().collect();
        for name in names {
            let counted = world.used(&name);
            prop_assert_eq!(counted, expected.get(&name).copied().unwrap_or(0), "{}", name);
            prop_assert!(counted >= admitted.get(&name).copied().unwrap_or(0), "{}", name);
            let restarted = world.objects[&name].rows.load().peek(world.now).0;
            prop_assert_eq!(restarted.iter().map(|s| s.used).sum::<u64>(), counted, "{}'s rows", name);
        }
    }
}
