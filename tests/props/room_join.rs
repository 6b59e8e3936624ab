//! A waiting room's joins, modelled whole: clients join (and join again)
//! through two isolates with clocks of their own, around a pre-queue's
//! opening, while key objects restart from their rows. Each join is
//! planned by the room (`room::visit`), decided by the gate on the room
//! rule's join limit (and, before the opening by the isolate's clock, its
//! pre-queue cap), each call a real ledger, and only then sent to a real
//! shard with a clock of its own.
//!
//! What must hold: in any window of the join limit's length (by the key
//! objects' clock), no client's joins reach a shard more than `limit`
//! times; no client holds more than `limit` numbers of the pre-queue's
//! draw, however long it keeps joining; a join the isolate's memory
//! refuses makes no call at all.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::IpAddr;

use crate::support::Object;
use proptest::prelude::*;
use serde_json::json;
use sluice::config::Config;
use sluice::control::Control;
use sluice::gate::{plan, Arrival, Chance, Known, Matched, Memory, Plan, Reply, Stack};
use sluice::http::jwt::Hs256Key;
use sluice::http::Incoming;
use sluice::isolate::banlist::BanRecord;
use sluice::isolate::refusals::RefusalCache;
use sluice::ledger::Outcome;
use sluice::objects::name::{ObjectName, Scope};
use sluice::objects::protocol::CheckRequest;
use sluice::room::shard::{Holding, Number, Shard, Turn};
use sluice::room::views::Views;
use sluice::room::visit::{Room, Step as Planned};

const LIMIT: usize = 2;
const WINDOW_MS: u64 = 10_000;
const CLIENTS: usize = 3;
const SHARDS: u32 = 2;
/// The opening, by the world's clock.
const OPENS_MS: u64 = 1_800_000_000_000;

fn config() -> Config {
    Config::from_value(json!({
        "origin": "demo",
        "rules": [{
            "id": "drop",
            "waiting_room": {
                "active": 2, "per_minute": 100, "shards": SHARDS,
                "opens_at": "2027-01-15T08:00:00Z",
                "join": {"key": "header:x-client", "limit": LIMIT, "window": "10s"},
            },
        }],
    }))
    .unwrap()
}

struct Client(usize);

impl Incoming for Client {
    fn method(&self) -> &str {
        "GET"
    }

    fn header(&self, name: &str) -> Option<String> {
        (name == "x-client").then(|| format!("c{}", self.0))
    }
}

/// One isolate: its refusal cache, its views of the shards, its clock's
/// offset from the world's.
struct Isolate {
    refusals: RefCell<RefusalCache>,
    views: Views,
    offset: i64,
}

impl Memory for Isolate {
    fn manual_ban(&self, _: Option<IpAddr>, _: &[&str], _: u64) -> Option<BanRecord> {
        None
    }

    fn cached_refusal(&self, object: &ObjectName, now_ms: u64) -> Option<Outcome> {
        self.refusals.borrow_mut().get(object.as_str(), now_ms)
    }

    fn invitations(&self, object: &ObjectName) -> u32 {
        self.refusals.borrow().invitations(object.as_str())
    }

    fn refuses(&self, object: &ObjectName, now_ms: u64) -> bool {
        self.refusals.borrow().holds(object.as_str(), now_ms)
    }

    fn rule_state(&self, _: &str, _: u64) -> Option<Control> {
        None
    }

    fn block_part(&self, _: &Scope, _: u32, _: u64) -> Option<u32> {
        None
    }
}

struct Draws(u64);

impl Chance for Draws {
    fn id(&mut self) -> Option<String> {
        self.0 += 1;
        Some(format!("r{}", self.0))
    }

    fn pair(&mut self) -> Option<(u32, u32)> {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        Some(((self.0 >> 33) as u32, (self.0 >> 13) as u32))
    }
}

struct World {
    objects: HashMap<String, Object>,
    shards: Vec<Shard>,
    /// The shards' clock's offset from the world's.
    shard_offset: i64,
    now: u64,
    calls: usize,
    /// Each client's joins that reached a shard, by the objects' clock.
    joined: Vec<Vec<u64>>,
    /// Each client's pre-queue numbers, by shard.
    drawn: Vec<Vec<(u32, u64)>>,
}

impl World {
    fn call(&mut self, request: &CheckRequest) -> Outcome {
        self.calls += 1;
        let object = self.objects.entry(request.key.clone()).or_default();
        object.answer(request, self.now)
    }
}

fn at(now: u64, offset: i64) -> u64 {
    now.saturating_add_signed(offset)
}

/// One client's join through one isolate: the room's plan, the join
/// limit climbed call by call, then the shard.
fn join(
    world: &mut World,
    isolate: &mut Isolate,
    room: &Room<'_>,
    config: &Config,
    client: usize,
    draws: &mut Draws,
) -> Result<(), TestCaseError> {
    let now = at(world.now, isolate.offset);
    let pick = draws.pair().unwrap();
    let Planned::Ask { shard, holding } = room.plan(None, now, &isolate.views, pick) else {
        return Ok(());
    };
    prop_assert!(matches!(holding, Holding::Nothing | Holding::Opened));
    let request = Client(client);
    let known = Known {
        config,
        jwt_key: None,
        memory: &*isolate,
    };
    let matched = Matched {
        rule: &config.rules[0],
        path: "/",
        params: &[],
        ip: None,
        also: holding == Holding::Nothing,
    };
    let arrival = Arrival {
        matched,
        request: &request,
        now_ms: now,
    };
    let calls = world.calls;
    let mut stack = match plan(&known, arrival, draws) {
        Plan::Done(conclusion) => {
            prop_assert!(matches!(conclusion.reply, Reply::Answer(_)));
            if let Some(object) = &conclusion.invited {
                isolate.refusals.borrow_mut().invited(object.as_str());
            }
            prop_assert_eq!(world.calls, calls, "a remembered refusal calls nothing");
            return Ok(());
        }
        Plan::Ask(ask) => Stack::single(ask),
        Plan::Stack(stack) => stack,
    };
    while let Some(call) = stack.next_call().cloned() {
        let outcome = world.call(&call);
        stack.answer(Ok(outcome));
    }
    let conclusion = stack.conclude(now);
    if let Some((object, outcome)) = &conclusion.cache {
        isolate
            .refusals
            .borrow_mut()
            .insert(object.as_str(), outcome, now);
    }
    for settle in &conclusion.settle_now {
        if let Some(object) = world.objects.get_mut(&settle.key) {
            let (_, writes, expired) =
                object
                    .ledger
                    .settle(&settle.reservation, settle.keep, world.now);
            object.rows.write(writes);
            object.rows.delete(expired);
        }
    }
    if !matches!(conclusion.reply, Reply::Forward(_)) {
        return Ok(());
    }
    world.joined[client].push(world.now);
    let shard_now = at(world.now, world.shard_offset);
    let (turn, _) = world.shards[shard as usize].visit(shard_now, holding, &mut || 7);
    if let Turn::Wait {
        number: Number::Pre(j),
        ..
    } = turn
    {
        prop_assert_eq!(holding, Holding::Nothing, "a pre-queue number uncounted");
        world.drawn[client].push((shard, j));
    }
    isolate
        .views
        .remember(room.id, shard, world.shards[shard as usize].status(), now);
    Ok(())
}

#[derive(Debug, Clone)]
enum Step {
    Join {
        client: usize,
        isolate: usize,
    },
    Tick {
        ms: u64,
    },
    /// A key object restarts from its rows.
    Restart {
        pick: usize,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0..CLIENTS, 0..2usize).prop_map(|(client, isolate)| Step::Join { client, isolate }),
        3 => (0u64..4_000).prop_map(|ms| Step::Tick { ms }),
        1 => any::<usize>().prop_map(|pick| Step::Restart { pick }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn no_client_joins_past_its_limit_nor_holds_more_of_the_draw(
        steps in prop::collection::vec(step(), 1..120),
        offsets in (-3_000i64..3_000, -3_000i64..3_000, -3_000i64..3_000),
        start_before in 0u64..60_000,
        seed in any::<u64>(),
    ) {
        let config = config();
        let room_config = config.rules[0].room.clone().unwrap();
        prop_assert_eq!(room_config.opens_at_ms, Some(OPENS_MS));
        let key = Hs256Key::new(b"a room secret of thirty-two chars!");
        let room = Room { id: "drop", config: &room_config, key: &key };
        let mut isolates: Vec<Isolate> = [offsets.0, offsets.1]
            .into_iter()
            .map(|offset| Isolate { refusals: RefCell::new(RefusalCache::new(64)), views: Views::default(), offset })
            .collect();
        let mut world = World {
            objects: HashMap::new(),
            shards: (0..SHARDS).map(|s| Shard::new(room.terms(s))).collect(),
            shard_offset: offsets.2,
            now: OPENS_MS - start_before,
            calls: 0,
            joined: vec![Vec::new(); CLIENTS],
            drawn: vec![Vec::new(); CLIENTS],
        };
        let mut draws = Draws(seed);
        for step in steps {
            match step {
                Step::Join { client, isolate } => {
                    join(&mut world, &mut isolates[isolate], &room, &config, client, &mut draws)?;
                }
                Step::Tick { ms } => world.now += ms,
                Step::Restart { pick } => {
                    let mut names: Vec<String> = world.objects.keys().cloned().collect();
                    names.sort();
                    if let Some(name) = names.get(pick % names.len().max(1)) {
                        if let Some(object) = world.objects.get_mut(name) {
                            object.ledger = object.rows.load();
                        }
                    }
                }
            }
            for (client, times) in world.joined.iter().enumerate() {
                for (i, t) in times.iter().enumerate() {
                    let in_window = times[i..].iter().filter(|u| **u < t + WINDOW_MS).count();
                    prop_assert!(in_window <= LIMIT, "client {} joined {} times from {}: {:?}", client, in_window, t, times);
                }
                prop_assert!(world.drawn[client].len() <= LIMIT, "client {} holds {:?} of the draw", client, world.drawn[client]);
            }
        }
    }
}
