//! A flash sale, "1 per user under N in total", decided by several
//! isolates that each hold admission blocks of the global layer: planned,
//! climbed with `gate::local` in the loop (as `edge/gate.rs` climbs) and
//! answered by real ledgers. Whatever the interleaving, never more than N
//! in total and no user twice; and the hot global layer is decided from
//! blocks, not by a call each.

use super::layers::{buyer, Objects};
use super::*;
use crate::gate::local::{Local, LocalBlocks};
use crate::objects::protocol::{CheckRequest, SettleRequest};

/// One isolate: its blocks, as the plan reads them, and its randomness.
struct Isolate {
    blocks: LocalBlocks,
    dice: Dice,
}

impl Isolate {
    /// Isolate `i`, whose reservation ids no other isolate draws.
    fn new(i: usize) -> Isolate {
        Isolate {
            blocks: LocalBlocks::new(format!("iso{i}")),
            dice: Dice {
                ids: u32::try_from(i).unwrap() * 1_000_000,
                ..Dice::new()
            },
        }
    }
}

/// The plan's memory: nothing remembered but the blocks held.
struct Holding<'a>(&'a LocalBlocks);

impl Memory for Holding<'_> {
    fn manual_ban(&self, _: Option<IpAddr>, _: &[&str], _: u64) -> Option<BanRecord> {
        None
    }

    fn cached_refusal(&self, _: &ObjectName, _: u64) -> Option<Outcome> {
        None
    }

    fn invitations(&self, _: &ObjectName) -> u32 {
        1
    }

    fn refuses(&self, _: &ObjectName, _: u64) -> bool {
        false
    }

    fn rule_state(&self, _: &str, _: u64) -> Option<Control> {
        None
    }

    fn block_part(&self, scope: &Scope, parts: u32, now_ms: u64) -> Option<u32> {
        self.0.usable(now_ms, |object| {
            scope.part_of(object).filter(|&part| part < parts)
        })
    }
}

/// What a sale's decisions cost.
#[derive(Debug, Default)]
struct Tally {
    decisions: u64,
    /// Calls to key objects: checks, reports and settles.
    calls: u64,
    /// Layers admitted from a block.
    from_blocks: u64,
    /// Reservations kept or refunded in the isolate, with no call.
    settled_here: u64,
}

/// A check of `isolate`'s at `now`, from its blocks or by a call.
fn check(
    isolate: &mut Isolate,
    objects: &mut Objects,
    request: &CheckRequest,
    local: bool,
    now: u64,
    tally: &mut Tally,
) -> Result<Outcome, String> {
    // As `edge/blocks` does: the check first, then the blocks due.
    let decided = isolate.blocks.decide(request, local, now);
    for due in isolate.blocks.due(now, &request.key) {
        tally.calls += 1;
        let answer = objects.call(&due.request, now).unwrap();
        isolate.blocks.answered(&due, Some(&answer));
    }
    match decided {
        Local::Admitted(outcome) => {
            tally.from_blocks += 1;
            Ok(outcome)
        }
        Local::Call(call) => {
            tally.calls += 1;
            let answer = objects.call(&call.request, now);
            isolate.blocks.answered(&call, answer.as_ref().ok());
            answer
        }
    }
}

/// A settle, in the isolate's blocks where they hold its reservation
/// pending, else by a call to its object (as `edge/gate.rs` settles).
fn settle(
    isolate: &mut Isolate,
    objects: &mut Objects,
    settle: &SettleRequest,
    now: u64,
    tally: &mut Tally,
) {
    if isolate.blocks.settle(settle) {
        tally.settled_here += 1;
    } else {
        tally.calls += 1;
        objects.settle(settle, now);
    }
}

/// `user`'s request through `isolate` at `now`, answered `status` by the
/// origin when forwarded: whether it was admitted.
fn buy(
    config: &Config,
    isolate: &mut Isolate,
    objects: &mut Objects,
    (user, status): (&str, u16),
    now: u64,
    tally: &mut Tally,
) -> bool {
    tally.decisions += 1;
    let request = buyer(user);
    let known = Known {
        config,
        jwt_key: None,
        memory: &Holding(&isolate.blocks),
    };
    let arrival = Arrival {
        matched: Matched {
            rule: &config.rules[0],
            path: "/",
            params: &[],
            ip: crate::http::key::client_ip(&request),
            also: true,
        },
        request: &request,
        now_ms: now,
    };
    let mut stack = match plan(&known, arrival, &mut isolate.dice) {
        Plan::Stack(stack) => stack,
        Plan::Ask(ask) => Stack::single(ask),
        Plan::Done(conclusion) => panic!("nothing is remembered: {conclusion:?}"),
    };
    while let Some(request) = stack.next_call() {
        let (request, local) = (request.clone(), stack.next_local());
        let answer = check(isolate, objects, &request, local, now, tally);
        stack.answer(answer);
    }
    let conclusion = stack.conclude(now);
    for request in &conclusion.settle_now {
        settle(isolate, objects, request, now, tally);
    }
    let Reply::Forward(pass) = conclusion.reply else {
        return false;
    };
    for by_answer in &pass.settle {
        let request = SettleRequest {
            key: by_answer.object.to_string(),
            reservation: by_answer.reservation.clone(),
            keep: by_answer.keeps(status),
        };
        settle(isolate, objects, &request, now, tally);
    }
    true
}

/// 1 per user under `total`, the global layer split into `split` parts
/// (one object when 1).
fn flash_sale(total: u64, split: u32) -> Config {
    let mut global = json!({"id": "all", "scope": "global", "limit": total, "window": "1m"});
    if split > 1 {
        global["split"] = json!(split);
    }
    let config = super::layers::checkout(json!({"also": [global]}));
    assert_eq!(config.rules[0].also.len(), 1);
    config
}

/// A sale of `total` in `split` parts, `buyers` users among `isolates`
/// isolates, one request a millisecond (a user may come back): every
/// admission, by user, and what it cost.
fn run(total: u64, split: u32, isolates: usize, buyers: u64, seed: u64) -> (Vec<String>, Tally) {
    let config = flash_sale(total, split);
    let mut objects = Objects::default();
    let mut isolates: Vec<Isolate> = (0..isolates).map(Isolate::new).collect();
    let mut rng = seed | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut admitted = Vec::new();
    let mut tally = Tally::default();
    for i in 0..buyers * 2 {
        let now = NOW + i;
        let user = format!("u{}", next() % buyers);
        let n = isolates.len() as u64;
        let isolate = &mut isolates[(next() % n) as usize];
        isolate.dice.pair = Some(((next() >> 8) as u32, (next() >> 8) as u32));
        if buy(
            &config,
            isolate,
            &mut objects,
            (&user, 200),
            now,
            &mut tally,
        ) {
            admitted.push(user);
        }
    }
    // Every block reported: the objects count exactly what was admitted.
    let end = NOW + buyers * 2 + 2_000;
    report_all(&mut isolates, &mut objects, end);
    let global: u64 = objects
        .ledgers
        .iter_mut()
        .filter(|(name, _)| name.starts_with("rule:checkout.all:"))
        .map(|(_, ledger)| ledger.peek(end).0.iter().map(|s| s.used).sum::<u64>())
        .sum();
    assert_eq!(
        global,
        admitted.len() as u64,
        "nothing admitted is forgotten"
    );
    (admitted, tally)
}

fn exact(admitted: &[String], total: u64) {
    assert!(
        admitted.len() as u64 <= total,
        "{} > {total}",
        admitted.len()
    );
    let mut users = admitted.to_vec();
    users.sort();
    users.dedup();
    assert_eq!(users.len(), admitted.len(), "a user admitted twice");
}

#[test]
fn a_global_layer_is_decided_from_blocks_exactly_split_or_not() {
    for (split, seed) in [(1, 7), (4, 11), (4, 12), (8, 13)] {
        let (admitted, tally) = run(600, split, 4, 1_000, seed);
        exact(&admitted, 600);
        assert!(
            admitted.len() >= 550,
            "split {split}: {} of 600 sold to 1 000 buyers",
            admitted.len()
        );
        // Each admission is one call for its user's layer (and a settle);
        // the global layer's call is the one blocks save.
        println!("split {split}: {} admitted, {tally:?}", admitted.len());
        assert!(
            tally.from_blocks * 2 >= admitted.len() as u64,
            "split {split}: {tally:?}"
        );
    }
}

#[test]
fn a_sold_out_sale_never_admits_one_more_however_the_isolates_interleave() {
    for seed in 1..20 {
        let (admitted, _) = run(100, 4, 3, 400, seed);
        exact(&admitted, 100);
    }
}

/// Every isolate reports what it holds, at `at`.
fn report_all(isolates: &mut [Isolate], objects: &mut Objects, at: u64) {
    for isolate in isolates {
        for due in isolate.blocks.due(at, "") {
            let answer = objects.call(&due.request, at).unwrap();
            isolate.blocks.answered(&due, Some(&answer));
        }
    }
}

#[test]
fn a_hot_rule_counted_by_answer_reserves_from_blocks_and_settles_in_the_isolate() {
    // 100 failed logins a minute; a success gives its unit back.
    let config = config(json!([{
        "id": "login", "key": "header:x-user", "limit": 100, "window": "1m",
        "count": {"status": [401]},
    }]));
    let mut objects = Objects::default();
    let mut isolates: Vec<Isolate> = (0..2).map(Isolate::new).collect();
    let mut tally = Tally::default();
    let mut failed = 0;
    for i in 0..600u64 {
        // Every third attempt fails: it counts.
        let status = if i % 3 == 0 { 401 } else { 200 };
        let isolate = &mut isolates[(i % 2) as usize];
        let admitted = buy(
            &config,
            isolate,
            &mut objects,
            ("mallory", status),
            NOW + i,
            &mut tally,
        );
        failed += u64::from(admitted && status == 401);
    }
    assert!(failed <= 100, "{failed} failures counted of 100");
    assert!(failed >= 90, "only {failed} failures admitted: {tally:?}");
    println!("login: {failed} failures counted, {tally:?}");
    assert!(tally.from_blocks > 0 && tally.settled_here > 0, "{tally:?}");
    // Once every block is reported (pending reservations lapsing into
    // kept ones where a settle never came), the object counts exactly the
    // failures.
    let end = NOW + 600 + 2_000;
    report_all(&mut isolates, &mut objects, end);
    let ledger = objects.ledgers.get_mut("rule:login:mallory").unwrap();
    let used = ledger.peek(end).0[0].used;
    assert_eq!(used, failed, "{tally:?}");
}
