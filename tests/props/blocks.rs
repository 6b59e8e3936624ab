//! The model check of admission blocks (issue 30): random interleavings,
//! over 2 to 5 isolates and all three algorithms, of grants, admissions
//! from blocks (at the grant, at random, and at the lease's last
//! millisecond), decisions by the object, reports (spent, lapsed, taken
//! with a call, at the edge of the lease), lapses, isolates that die
//! holding blocks and never report, limits lowered and raised, restarts
//! of the object from its rows, and clock steps; and reservations admitted
//! from blocks (a later layer, or the origin's answer, may give them
//! back), kept or refunded in the isolate while its block holds them, or
//! at the object once a report carried them there pending (across
//! restarts), or never settled at all. Every admission's real time is
//! kept (a refunded reservation's is dropped), and the promise is checked
//! by brute force over them:
//!
//! - sliding log: no window of W holds more units than the highest limit
//!   in force at a decision that admitted one of them (a lowered limit
//!   applies from the next decision; a block granted before keeps the
//!   limit it was granted under, "within one lease");
//! - fixed window: the window open now (as the object reports it) holds no
//!   more units than that, and no interval of W more than twice that;
//! - GCRA: every run of units from the i-th to the j-th (in time order)
//!   spans at least `(j − i + 1)·T − τ`, τ the highest tolerance in force
//!   at their decisions: the schedule a conforming sequence keeps.
//!
//! And once every isolate has died, the key is whole again (the limit in
//! force admitted at once) after the last lease's end plus a window.

use crate::support::Rows;
use proptest::prelude::*;
use sluice::isolate::blocks::{BlockHolder, Reserve};
use sluice::ledger::blocks::{Block, BlockAsk};
use sluice::ledger::{Ask, Ledger};
use sluice::limit::gcra::GcraPolicy;
use sluice::limit::{Policy, Spec};

const T0: u64 = 1_700_000_000_000;
const OBJECT: &str = "k";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Log,
    Window,
    Cell,
}

#[derive(Debug, Clone)]
enum Step {
    /// Isolate `iso` asks for a block, having seen `rate` decisions.
    Grant {
        iso: usize,
        rate: u32,
    },
    /// Isolate `iso` admits up to `n` requests now from its blocks.
    Local {
        iso: usize,
        n: u32,
    },
    /// The clock moves to the last millisecond of a lease `iso` holds (its
    /// worst moment), and it spends what it can there.
    Edge {
        iso: usize,
        n: u32,
    },
    /// Isolate `iso` admits up to `n` reservations now from its blocks,
    /// each kept unless settled within `ttl_ms`.
    Reserve {
        iso: usize,
        n: u32,
        ttl_ms: u64,
    },
    /// A reservation isolate `iso` admitted (the `pick`-th still unsettled)
    /// is kept or refunded: in its blocks if they still hold it, else by
    /// its object.
    Settle {
        iso: usize,
        pick: usize,
        keep: bool,
    },
    /// `n` requests decided by the object now.
    Direct {
        n: u32,
    },
    /// Isolate `iso`'s call as `edge/limiter` serves it: every block it
    /// holds reported, one request decided, a block asked for (with
    /// `rate`), the call's rows merged (`Taken::rows`: the decision's hit
    /// in the report's times row, the grant over the reported block's
    /// row).
    Call {
        iso: usize,
        rate: u32,
    },
    /// Isolate `iso` reports what is due, or everything (with a call).
    Report {
        iso: usize,
        all: bool,
    },
    /// Isolate `iso` dies: its blocks are never reported.
    Die {
        iso: usize,
    },
    /// The limit changes (lowered or raised).
    Limit {
        limit: u64,
    },
    Tick {
        ms: u64,
    },
    /// The object's alarm: lapsed blocks dropped, expired rows swept.
    Sweep,
    /// The object restarts from its rows.
    Restart,
}

fn step(isolates: usize) -> impl Strategy<Value = Step> {
    let iso = 0..isolates;
    prop_oneof![
        4 => (iso.clone(), prop_oneof![Just(5u32), 5u32..2_000]).prop_map(|(iso, rate)| Step::Grant { iso, rate }),
        4 => (iso.clone(), 1u32..30).prop_map(|(iso, n)| Step::Local { iso, n }),
        3 => (iso.clone(), 1u32..30).prop_map(|(iso, n)| Step::Edge { iso, n }),
        3 => (iso.clone(), 1u32..10, prop_oneof![Just(1u64), 1u64..500, 500u64..5_000])
            .prop_map(|(iso, n, ttl_ms)| Step::Reserve { iso, n, ttl_ms }),
        4 => (iso.clone(), any::<usize>(), any::<bool>())
            .prop_map(|(iso, pick, keep)| Step::Settle { iso, pick, keep }),
        3 => (1u32..20).prop_map(|n| Step::Direct { n }),
        3 => (iso.clone(), any::<bool>()).prop_map(|(iso, all)| Step::Report { iso, all }),
        4 => (iso.clone(), prop_oneof![Just(5u32), 5u32..2_000]).prop_map(|(iso, rate)| Step::Call { iso, rate }),
        1 => iso.prop_map(|iso| Step::Die { iso }),
        1 => (4u64..60).prop_map(|limit| Step::Limit { limit }),
        4 => prop_oneof![Just(0u64), Just(1u64), 1u64..50, 50u64..400].prop_map(|ms| Step::Tick { ms }),
        1 => Just(Step::Sweep),
        1 => Just(Step::Restart),
    ]
}

/// The policy for `kind` at `limit`: W = 200 ms for the log and the fixed
/// window; GCRA at one unit per 10 ms with a burst of `limit`.
fn spec(kind: Kind, limit: u64) -> Spec {
    match kind {
        Kind::Log => Spec::SlidingLog(Policy::new(limit, 200).unwrap()),
        Kind::Window => Spec::FixedWindow(Policy::new(limit, 200).unwrap()),
        Kind::Cell => Spec::Gcra(GcraPolicy::new(limit - 1, 100, 1_000).unwrap()),
    }
}

/// One isolate: its holder, and the blocks it holds with the limit each
/// was granted under.
struct Isolate {
    holder: BlockHolder,
    blocks: Vec<(Block, u64)>,
}

impl Isolate {
    fn new(name: String) -> Isolate {
        Isolate {
            holder: BlockHolder::new(name),
            blocks: Vec::new(),
        }
    }

    /// The highest limit its blocks were granted under.
    fn limit(&self) -> u64 {
        self.blocks.iter().map(|(_, l)| *l).max().unwrap_or(0)
    }
}

struct World {
    kind: Kind,
    limit: u64,
    now: u64,
    ledger: Ledger,
    rows: Rows,
    isolates: Vec<Isolate>,
    generation: usize,
    /// Every admitted unit: (real time, the limit its decision was made under).
    admitted: Vec<(u64, u64)>,
    /// Reservations admitted from blocks and not refunded: id, the
    /// isolate that admitted it, and its unit (in `admitted` too).
    reserved: Vec<(String, usize, (u64, u64))>,
    /// Reservation ids drawn.
    ids: u64,
    /// The last moment anything could still count: leases' ends and
    /// admissions.
    last: u64,
    widest_window: u64,
}

impl World {
    fn spec(&self) -> Spec {
        spec(self.kind, self.limit)
    }

    fn direct(&mut self, n: u32) {
        let specs = [("p".to_string(), self.spec())];
        let ask = Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: None,
        };
        for _ in 0..n {
            let (outcome, writes) = self.ledger.check(&ask, self.now);
            self.rows.write(writes);
            if outcome.allowed {
                self.admitted.push((self.now, self.limit));
                self.last = self.last.max(self.now);
            }
        }
    }

    fn local(&mut self, iso: usize, n: u32) {
        let limit = self.isolates[iso].limit();
        for _ in 0..n {
            let admitted = self.isolates[iso]
                .holder
                .admit(OBJECT, &["p"], 1, None, self.now);
            match admitted {
                Some(_) => self.admitted.push((self.now, limit)),
                None => break,
            }
        }
    }

    fn reserve(&mut self, iso: usize, n: u32, ttl_ms: u64) {
        let limit = self.isolates[iso].limit();
        for _ in 0..n {
            self.ids += 1;
            let id = format!("r{}", self.ids);
            let reserve = Reserve { id: &id, ttl_ms };
            let holder = &mut self.isolates[iso].holder;
            if holder
                .admit(OBJECT, &["p"], 1, Some(reserve), self.now)
                .is_none()
            {
                break;
            }
            self.admitted.push((self.now, limit));
            self.reserved.push((id, iso, (self.now, limit)));
        }
    }

    /// A refund takes its unit out of what was admitted only where it
    /// landed: in the blocks that hold it, or at an object that still
    /// holds it pending (not lapsed into a kept one, not lost with a dead
    /// isolate's block).
    fn settle(&mut self, iso: usize, pick: usize, keep: bool) {
        let mine: Vec<usize> = (0..self.reserved.len())
            .filter(|&i| self.reserved[i].1 == iso)
            .collect();
        if mine.is_empty() {
            return;
        }
        let at = mine[pick % mine.len()];
        let (id, _, unit) = self.reserved.swap_remove(at);
        let refunded = if self.isolates[iso].holder.settle(OBJECT, &id, keep) {
            !keep
        } else {
            let (settled, writes, expired) = self.ledger.settle(&id, keep, self.now);
            self.rows.write(writes);
            self.rows.delete(expired);
            settled.is_some_and(|s| !s.kept && !s.repeated)
        };
        if refunded {
            let gone = self.admitted.iter().position(|&u| u == unit);
            self.admitted
                .swap_remove(gone.expect("a refunded unit was admitted"));
        }
    }

    fn report(&mut self, iso: usize, all: bool) {
        let reports = if all {
            self.isolates[iso].holder.take(OBJECT)
        } else {
            let due = self.isolates[iso].holder.due(self.now, "");
            due.into_iter().map(|(_, report)| report).collect()
        };
        for report in reports {
            let block = self.isolates[iso]
                .blocks
                .iter()
                .position(|(b, _)| b.id == report.id)
                .map(|at| self.isolates[iso].blocks.swap_remove(at).0)
                .expect("the isolate holds what it reports");
            let result = self
                .ledger
                .report_block(&report, self.spec(), None, self.now);
            match result {
                Ok(reported) => {
                    self.rows.write(reported.writes);
                    self.rows.times.extend(reported.times);
                    self.rows.blocks.retain(|b| b.id != report.id);
                }
                // Only a block that lapsed before its report is unknown.
                Err(error) => assert!(
                    self.now >= block.lapses_ms(),
                    "a valid report refused: {error:?} {report:?} at {}",
                    self.now
                ),
            }
        }
    }

    fn grant(&mut self, iso: usize, rate: u32) {
        let name = self.isolates[iso].holder.holder().to_string();
        let ask = BlockAsk {
            policy: "p",
            spec: self.spec(),
            holder: &name,
            rate,
        };
        if let Some((block, writes)) = self.ledger.grant_block(&ask, self.now) {
            assert!(block.admissions >= 2 && block.until_ms >= block.granted_ms);
            self.rows.write(writes);
            self.rows.blocks.push(block.clone());
            self.last = self.last.max(block.until_ms);
            self.isolates[iso]
                .holder
                .hold(OBJECT, &block.grant(), self.now);
            self.isolates[iso].blocks.push((block, self.limit));
        }
    }

    fn call(&mut self, iso: usize, rate: u32) {
        let reports = self.isolates[iso].holder.take(OBJECT);
        let specs = [("p".to_string(), self.spec())];
        let taken = self.ledger.take_reports(&reports, &specs, None, self.now);
        let mut lapsed = 0;
        for report in &reports {
            let gone = self.isolates[iso]
                .blocks
                .iter()
                .position(|(b, _)| b.id == report.id);
            let (block, _) = self.isolates[iso].blocks.swap_remove(gone.expect("held"));
            lapsed += u32::from(self.now >= block.lapses_ms());
        }
        // Only a block that lapsed before its report is unknown.
        assert!(
            taken.refused <= lapsed,
            "a valid report refused at {}",
            self.now
        );
        let ask = Ask {
            specs: &specs,
            cost: 1,
            ban: None,
            lease: None,
        };
        let (outcome, mut writes) = self.ledger.check(&ask, self.now);
        if outcome.allowed {
            self.admitted.push((self.now, self.limit));
            self.last = self.last.max(self.now);
            let name = self.isolates[iso].holder.holder().to_string();
            let (grants, granted) = self.ledger.grant_blocks(&specs, &name, rate, self.now);
            writes.extend(granted);
            for grant in grants {
                let block = self.ledger.blocks().iter().find(|b| b.id == grant.id);
                let block = block.expect("granted").clone();
                self.last = self.last.max(block.until_ms);
                self.isolates[iso].holder.hold(OBJECT, &grant, self.now);
                self.isolates[iso].blocks.push((block, self.limit));
            }
        }
        let (writes, expired) = taken.rows(writes);
        self.rows.write(writes);
        self.rows.delete(expired);
        // Read back, the rows hold the very blocks the object counts (the
        // grant written over the reported block's row); the times, the
        // Restart steps check: one lost would let too many in.
        let ids = |blocks: &[Block]| {
            let mut ids: Vec<u64> = blocks.iter().map(|b| b.id).collect();
            ids.sort_unstable();
            ids
        };
        assert_eq!(ids(self.rows.load().blocks()), ids(self.ledger.blocks()));
    }

    fn sweep(&mut self) {
        let lapsed = self.ledger.lapse_blocks(self.now);
        self.rows.blocks.retain(|b| !lapsed.contains(&b.id));
        let expired = self.ledger.sweep(self.now);
        self.rows.delete(expired);
    }

    fn run(&mut self, step: Step) {
        match step {
            Step::Grant { iso, rate } => self.grant(iso, rate),
            Step::Local { iso, n } => self.local(iso, n),
            Step::Reserve { iso, n, ttl_ms } => self.reserve(iso, n, ttl_ms),
            Step::Settle { iso, pick, keep } => self.settle(iso, pick, keep),
            Step::Edge { iso, n } => {
                let edge = self.isolates[iso]
                    .blocks
                    .iter()
                    .map(|(b, _)| b.until_ms)
                    .max();
                if let Some(edge) = edge.filter(|&e| e >= self.now) {
                    self.now = edge;
                    self.local(iso, n);
                }
            }
            Step::Direct { n } => self.direct(n),
            Step::Report { iso, all } => self.report(iso, all),
            Step::Call { iso, rate } => self.call(iso, rate),
            Step::Die { iso } => {
                self.generation += 1;
                self.isolates[iso] = Isolate::new(format!("iso-{}", self.generation));
            }
            Step::Limit { limit } => {
                self.limit = limit;
                self.widest_window = self.widest_window.max(self.spec().window_ms());
            }
            Step::Tick { ms } => self.now += ms,
            Step::Sweep => self.sweep(),
            // A restart takes more than a millisecond.
            Step::Restart => {
                self.ledger = self.rows.load();
                self.now += 1;
            }
        }
    }
}

/// The algorithm's promise over the real times, by brute force.
fn check_promise(kind: Kind, admitted: &[(u64, u64)]) -> Result<(), String> {
    let mut units = admitted.to_vec();
    units.sort_unstable();
    match kind {
        Kind::Log | Kind::Window => {
            let factor = if kind == Kind::Log { 1 } else { 2 };
            for (i, &(start, _)) in units.iter().enumerate() {
                let window: Vec<_> = units[i..]
                    .iter()
                    .take_while(|u| u.0 < start + 200)
                    .collect();
                let allowed = factor * window.iter().map(|u| u.1).max().unwrap_or(0);
                if window.len() as u64 > allowed {
                    return Err(format!(
                        "{} units in [{start}, +200): {window:?}",
                        window.len()
                    ));
                }
            }
        }
        Kind::Cell => {
            // T = 10 ms; τ = T · limit.
            for j in 0..units.len() {
                let mut tau_limit = 0;
                for i in (0..=j).rev() {
                    tau_limit = tau_limit.max(units[i].1);
                    let run = (j - i + 1) as u64;
                    let span = units[j].0 - units[i].0;
                    if run * 10 > span + 10 * tau_limit {
                        return Err(format!(
                            "units {i}..={j} span {span} ms: {:?}",
                            &units[i..=j]
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A fixed window's own promise: the units whose real times fall in the
/// window open now (every one of them was charged to it: windows do not
/// overlap, and a block's lease ends with its window) are at most the
/// highest limit they were decided under.
fn check_open_window(world: &mut World) -> Result<(), String> {
    let (slots, _) = world.ledger.peek(world.now);
    let Some(slot) = slots.into_iter().find(|s| s.used > 0 && s.reset_ms > 0) else {
        return Ok(());
    };
    let opened = world.now + slot.reset_ms - 200;
    let inside: Vec<_> = world
        .admitted
        .iter()
        .filter(|u| (opened..opened + 200).contains(&u.0))
        .collect();
    let allowed = inside.iter().map(|u| u.1).max().unwrap_or(0);
    match inside.len() as u64 <= allowed {
        true => Ok(()),
        false => Err(format!(
            "{} units in the window from {opened}: {inside:?}",
            inside.len()
        )),
    }
}

fn scenario() -> impl Strategy<Value = (Kind, u64, usize, Vec<Step>)> {
    (
        prop::sample::select(vec![Kind::Log, Kind::Window, Kind::Cell]),
        4u64..60,
        2usize..=5,
    )
        .prop_flat_map(|(kind, limit, isolates)| {
            (
                Just(kind),
                Just(limit),
                Just(isolates),
                prop::collection::vec(step(isolates), 1..120),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn real_admissions_keep_the_promise_and_dead_isolates_cost_only_a_lease(
        (kind, limit, isolates, steps) in scenario(),
    ) {
        let mut world = World {
            kind,
            limit,
            now: T0,
            ledger: Ledger::new(),
            rows: Rows::default(),
            isolates: (0..isolates).map(|i| Isolate::new(format!("iso-{i}"))).collect(),
            generation: isolates,
            admitted: Vec::new(),
            reserved: Vec::new(),
            ids: 0,
            last: T0,
            widest_window: spec(kind, limit).window_ms(),
        };
        for step in steps {
            world.run(step);
            prop_assert_eq!(check_promise(kind, &world.admitted), Ok(()));
            if kind == Kind::Window {
                prop_assert_eq!(check_open_window(&mut world), Ok(()));
            }
        }
        // Every isolate dies; after the last lease's end and a window, the
        // key is whole again.
        world.now = world.now.max(world.last) + world.widest_window + 1;
        world.sweep();
        prop_assert!(world.ledger.blocks().is_empty());
        let specs = [("p".to_string(), world.spec())];
        let whole = Ask { specs: &specs, cost: world.limit as u32, ban: None, lease: None };
        let (outcome, _) = world.ledger.check(&whole, world.now);
        prop_assert!(outcome.allowed, "the key is not whole: {:?}", outcome);
        world.admitted.extend(std::iter::repeat_n((world.now, world.limit), world.limit as usize));
        prop_assert_eq!(check_promise(kind, &world.admitted), Ok(()));
    }
}
