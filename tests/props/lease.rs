//! Property tests of the lease table with an injected clock: random
//! acquires (anonymous and with owner labels, which grant nothing),
//! re-entries by lease id, renewals, releases (of real, lapsed and made-up
//! ids) and time passing, checked against a plain model.

use proptest::prelude::*;
use sluice::limit::lease::{Acquire, LeaseError, LeaseTable};

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Acquire { owner: Option<u8>, ttl: u64 },
    Reenter { pick: usize, ttl: u64 },
    Renew { pick: usize, ttl: u64 },
    Release { pick: usize },
    ReleaseUnknown,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..400).prop_map(Op::Advance),
        4 => (prop::option::of(0u8..3), 1u64..1000).prop_map(|(owner, ttl)| Op::Acquire { owner, ttl }),
        1 => (any::<usize>(), 1u64..1000).prop_map(|(pick, ttl)| Op::Renew { pick, ttl }),
        2 => (any::<usize>(), 1u64..1000).prop_map(|(pick, ttl)| Op::Reenter { pick, ttl }),
        3 => any::<usize>().prop_map(|pick| Op::Release { pick }),
        1 => Just(Op::ReleaseUnknown),
    ]
}

/// A model lease: id, expiry, holds.
#[derive(Debug, Clone)]
struct Model {
    id: String,
    expires: u64,
    holds: u32,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn the_table_matches_a_model(limit in 1u32..5, ops in prop::collection::vec(op(), 1..150)) {
        let mut table = LeaseTable::new();
        let mut model: Vec<Model> = Vec::new();
        let mut issued: Vec<String> = Vec::new();
        let mut last_fence = 0u64;
        let mut now = 10_000u64;
        let mut next = 0u32;
        for op in ops {
            model.retain(|l| l.expires > now);
            match op {
                Op::Advance(ms) => now += ms,
                Op::Acquire { owner, ttl } => {
                    let owner_name = owner.map(|o| format!("owner-{o}"));
                    let ask = Acquire {
                        limit,
                        ttl_ms: ttl,
                        owner: owner_name.as_deref(),
                        reenter: None,
                        strict_limit: true,
                    };
                    let grant = table
                        .acquire(now, &ask, || {
                            next += 1;
                            format!("id-{next}")
                        })
                        .unwrap();
                    if model.len() < limit as usize {
                        prop_assert!(grant.granted);
                        let lease = grant.lease.unwrap();
                        prop_assert!(lease.fence > last_fence, "fences strictly increase");
                        last_fence = lease.fence;
                        prop_assert!(!issued.contains(&lease.id));
                        issued.push(lease.id.clone());
                        model.push(Model { id: lease.id, expires: now + ttl, holds: 1 });
                    } else {
                        prop_assert!(!grant.granted, "never more than the limit, whatever the owner");
                        let first = model.iter().map(|l| l.expires).min().unwrap();
                        prop_assert_eq!(grant.retry_after_ms, first - now);
                    }
                }
                Op::Reenter { pick, ttl } => {
                    if issued.is_empty() { continue; }
                    let id = issued[pick % issued.len()].clone();
                    let ask = Acquire {
                        limit,
                        ttl_ms: ttl,
                        owner: None,
                        reenter: Some(&id),
                        strict_limit: true,
                    };
                    let grant = table.acquire(now, &ask, || unreachable!("re-entry makes no lease"));
                    match model.iter_mut().find(|l| l.id == id) {
                        Some(held) => {
                            let lease = grant.unwrap().lease.unwrap();
                            held.holds += 1;
                            held.expires = held.expires.max(now + ttl);
                            prop_assert_eq!(lease.holds, held.holds);
                            prop_assert_eq!(lease.expires_ms, held.expires);
                        }
                        None => prop_assert_eq!(grant, Err(LeaseError::NoSuchLease)),
                    }
                }
                Op::Renew { pick, ttl } => {
                    if issued.is_empty() { continue; }
                    let id = &issued[pick % issued.len()];
                    let renewed = table.renew(id, now, ttl);
                    match model.iter_mut().find(|l| &l.id == id) {
                        Some(live) => {
                            live.expires = now + ttl;
                            prop_assert_eq!(renewed.unwrap().expires_ms, live.expires);
                        }
                        None => prop_assert!(renewed.is_none(), "a lapsed or freed lease stays gone"),
                    }
                }
                Op::Release { pick } => {
                    if issued.is_empty() { continue; }
                    let id = issued[pick % issued.len()].clone();
                    let released = table.release(&id, now);
                    match model.iter().position(|l| l.id == id) {
                        Some(i) => {
                            model[i].holds -= 1;
                            prop_assert_eq!(released.unwrap().holds, model[i].holds);
                            if model[i].holds == 0 {
                                model.remove(i);
                            }
                        }
                        None => prop_assert!(released.is_none()),
                    }
                }
                Op::ReleaseUnknown => {
                    prop_assert!(table.release("not-a-lease", now).is_none());
                }
            }
            table.expire(now);
            model.retain(|l| l.expires > now);
            prop_assert_eq!(table.in_flight_at(now) as usize, model.len());
            prop_assert!(table.in_flight_at(now) <= limit);
        }
    }
}
