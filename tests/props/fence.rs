//! Property test of lease fences through the ledger and a model of the
//! key object's storage: random schedules of acquires, renewals, releases,
//! lapses, sweeps (which free storage when nothing is held), restarts
//! (everything in memory lost, read back from storage), a clock that stands
//! still, and bursts of up to 10 000 grants in one millisecond. Every fence
//! granted must be greater than every fence the key granted before, and a
//! key holding nothing must, once a repeat is impossible, hold no bytes.

use std::collections::BTreeMap;

use proptest::prelude::*;
use sluice::ledger::{Ask, Expired, LeaseAsk, Ledger, Write};
use sluice::limit::lease::Lease;

#[derive(Debug, Clone)]
enum Op {
    Advance(u64),
    Acquire {
        ttl: u64,
    },
    Reenter {
        pick: usize,
    },
    Renew {
        pick: usize,
        ttl: u64,
    },
    Release {
        pick: usize,
    },
    /// `n` grants, each released at once, all in the same millisecond.
    Burst(u32),
    /// The alarm fires now.
    Sweep,
    /// The alarm fires when it is due.
    Alarm,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => prop_oneof![Just(0u64), 0u64..3, 0u64..2000].prop_map(Op::Advance),
        4 => (1u64..50).prop_map(|ttl| Op::Acquire { ttl }),
        1 => any::<usize>().prop_map(|pick| Op::Reenter { pick }),
        1 => (any::<usize>(), 1u64..50).prop_map(|(pick, ttl)| Op::Renew { pick, ttl }),
        3 => any::<usize>().prop_map(|pick| Op::Release { pick }),
        1 => prop_oneof![1u32..20, 900u32..1100, 1u32..=10_000].prop_map(Op::Burst),
        2 => Just(Op::Sweep),
        2 => Just(Op::Alarm),
        2 => Just(Op::Restart),
    ]
}

/// What the key object's SQLite tables would hold for the key.
#[derive(Debug, Default)]
struct Storage {
    leases: BTreeMap<String, (Lease, Option<u32>)>,
    floor: Option<u64>,
}

impl Storage {
    fn put(&mut self, writes: Vec<Write>) {
        for write in writes {
            if let Write::Lease { lease, limit } = write {
                self.leases.insert(lease.id.clone(), (lease, limit));
            }
        }
    }

    /// As the key object's `delete`: everything goes once the ledger is
    /// empty, otherwise row by row.
    fn delete(&mut self, ledger: &Ledger, expired: Vec<Expired>, now: u64) {
        if ledger.is_empty(now) {
            *self = Storage::default();
            return;
        }
        for gone in expired {
            match gone {
                Expired::Lease { id, floor } => {
                    if let Some(fence) = floor {
                        self.floor = Some(self.floor.unwrap_or(0).max(fence));
                    }
                    self.leases.remove(&id);
                }
                Expired::Floor => self.floor = None,
                _ => {}
            }
        }
    }

    fn load(&self) -> Ledger {
        let mut ledger = Ledger::new();
        for (lease, limit) in self.leases.values() {
            ledger.restore_lease(lease.clone(), *limit);
        }
        if let Some(fence) = self.floor {
            ledger.restore_floor(fence);
        }
        ledger
    }

    fn is_empty(&self) -> bool {
        self.leases.is_empty() && self.floor.is_none()
    }
}

struct World {
    ledger: Ledger,
    storage: Storage,
    now: u64,
    next_id: u64,
    held: Vec<String>,
    highest: u64,
    grants: u64,
}

impl World {
    fn acquire(
        &mut self,
        ttl: u64,
        reenter: Option<String>,
    ) -> Result<Option<Lease>, TestCaseError> {
        self.next_id += 1;
        let ask = LeaseAsk {
            name: "lock".into(),
            limit: 3,
            ttl_ms: ttl,
            owner: None,
            reenter: reenter.clone(),
            strict_limit: true,
            new_id: format!("lease-{}", self.next_id),
        };
        let (outcome, writes) = self.ledger.check(
            &Ask {
                specs: &[],
                cost: 1,
                ban: None,
                lease: Some(&ask),
            },
            self.now,
        );
        self.storage.put(writes);
        let Some(lease) = outcome.lease.and_then(|l| l.lease) else {
            return Ok(None);
        };
        if reenter.is_none() {
            prop_assert!(
                lease.fence > self.highest,
                "fence {} after {} at {} ms (grant {})",
                lease.fence,
                self.highest,
                self.now,
                self.grants
            );
            self.highest = lease.fence;
            self.grants += 1;
            self.held.push(lease.id.clone());
        }
        Ok(Some(lease))
    }

    fn release(&mut self, id: &str) {
        let (_, writes, expired) = self.ledger.release(id, self.now);
        self.storage.put(writes);
        self.storage.delete(&self.ledger, expired, self.now);
    }

    fn sweep(&mut self) {
        let expired = self.ledger.sweep(self.now);
        self.storage.delete(&self.ledger, expired, self.now);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_fence_is_greater_than_every_earlier_one(ops in prop::collection::vec(op(), 1..120)) {
        let mut world = World {
            ledger: Ledger::new(),
            storage: Storage::default(),
            now: 1_700_000_000_000,
            next_id: 0,
            held: Vec::new(),
            highest: 0,
            grants: 0,
        };
        for op in ops {
            match op {
                Op::Advance(ms) => world.now += ms,
                Op::Acquire { ttl } => {
                    world.acquire(ttl, None)?;
                }
                Op::Reenter { pick } if !world.held.is_empty() => {
                    let id = world.held[pick % world.held.len()].clone();
                    world.acquire(10, Some(id))?;
                }
                Op::Renew { pick, ttl } if !world.held.is_empty() => {
                    let id = world.held[pick % world.held.len()].clone();
                    let (_, writes) = world.ledger.renew(&id, ttl, world.now);
                    world.storage.put(writes);
                }
                Op::Release { pick } if !world.held.is_empty() => {
                    let id = world.held.swap_remove(pick % world.held.len());
                    world.release(&id);
                }
                Op::Burst(n) => {
                    for _ in 0..n {
                        if let Some(lease) = world.acquire(1, None)? {
                            world.held.retain(|id| id != &lease.id);
                            world.release(&lease.id);
                        }
                    }
                }
                Op::Sweep => world.sweep(),
                Op::Alarm => {
                    if let Some(due) = world.ledger.next_sweep(world.now) {
                        world.now = world.now.max(due);
                        world.sweep();
                    }
                }
                Op::Restart => world.ledger = world.storage.load(),
                _ => {}
            }
        }
        // Once everything has lapsed and the alarms have run, nothing is
        // kept: a repeat is impossible by then.
        while let Some(due) = world.ledger.next_sweep(world.now) {
            prop_assert!(due < world.now + 100_000, "an alarm far away: {due}");
            world.now = world.now.max(due);
            world.sweep();
        }
        prop_assert!(world.ledger.is_empty(world.now));
        prop_assert!(world.storage.is_empty(), "{:?}", world.storage);
        prop_assert!(world.now * 1000 > world.highest);
        let after = world.acquire(1, None)?;
        prop_assert!(after.is_some());
    }
}
