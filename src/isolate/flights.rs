//! An isolate's calls in flight to each key object that change what it
//! holds there: those that ask for blocks or carry reports (issue 40).
//!
//! A call of the same key sent meanwhile may reach the object first (calls
//! overtake each other), and the object would count this isolate's blocks
//! still out in full against it. Two cases:
//! - a report on its way: every later call of the key carries a copy of
//!   it ([`reports`](Flights::reports)) until it lands, so the object
//!   takes it from whichever comes first (the other copy is refused as a
//!   report of an unknown block, changing nothing);
//! - an ask on its way, whose block the object may have granted before it
//!   decides the call: the call *races* the ask. Its refusal is looked at
//!   again once the ask has landed: if it brought a block, the request is
//!   decided again (from that block, or by a call that reports it), so
//!   the isolate's own block never refuses it.
//!
//! The other requests of a burst that asks for a block keep their calls
//! in parallel: only their refusals wait. A call lands when it is
//! answered or fails (the edge lands one dropped unanswered too), never
//! by the clock, which may step.

use std::collections::HashMap;

use crate::ledger::blocks::BlockReport;

/// How long a refusal waits at most for the asks it raced to land.
pub const FLIGHT_MS: u64 = 1_000;

/// Times a refused check is decided again after the asks it raced landed:
/// each needs one of them to have brought a block.
pub const AGAIN: u32 = 3;

/// Keys tracked at most (those in flight, and those whose asks brought
/// blocks): past it the isolate forgets them all, which costs refusals,
/// never admissions.
const CAPACITY: usize = 4096;

#[derive(Debug)]
struct Out {
    id: u64,
    asks: bool,
    reports: Vec<BlockReport>,
}

#[derive(Debug, Default)]
struct Flight {
    out: Vec<Out>,
    /// Asks landed that brought blocks.
    grants: u32,
}

/// Per key object, this isolate's calls in flight that change what it
/// holds there.
#[derive(Debug, Default)]
pub struct Flights {
    keys: HashMap<String, Flight>,
    sent: u64,
}

impl Flights {
    fn out(&self, key: &str) -> &[Out] {
        self.keys.get(key).map_or(&[][..], |f| &f.out[..])
    }

    /// Whether `key` has an ask in flight: a burst before the first grant
    /// comes back asks once, so one isolate does not take share after
    /// share of the headroom the others need.
    pub fn asking(&self, key: &str) -> bool {
        self.out(key).iter().any(|o| o.asks)
    }

    /// What a call of `key` sent now races: the grants landed so far,
    /// when an ask is in flight.
    pub fn race(&self, key: &str) -> Option<u32> {
        self.asking(key)
            .then(|| self.keys.get(key).map_or(0, |f| f.grants))
    }

    /// The reports in flight of `key`, for a call to carry again.
    pub fn reports(&self, key: &str) -> impl Iterator<Item = &BlockReport> {
        self.out(key).iter().flat_map(|o| &o.reports)
    }

    /// Counts a call of `key`, with the reports it carries first-hand; its
    /// id, to [`land`](Self::land) it with.
    pub fn send(&mut self, key: &str, asks: bool, reports: Vec<BlockReport>) -> u64 {
        if self.keys.len() >= CAPACITY && !self.keys.contains_key(key) {
            self.keys.clear();
        }
        self.sent += 1;
        let flight = self.keys.entry(key.to_string()).or_default();
        flight.out.push(Out {
            id: self.sent,
            asks,
            reports,
        });
        self.sent
    }

    /// Call `id` of `key` landed (answered, or failed); `granted` when it
    /// brought blocks.
    pub fn land(&mut self, key: &str, id: u64, granted: bool) {
        let Some(flight) = self.keys.get_mut(key) else {
            return;
        };
        if let Some(at) = flight.out.iter().position(|o| o.id == id) {
            flight.out.swap_remove(at);
        }
        flight.grants = flight.grants.wrapping_add(u32::from(granted));
        if flight.out.is_empty() && flight.grants == 0 {
            self.keys.remove(key);
        }
    }

    /// Whether `key` brought a block since `seen` (a key is tracked from
    /// its first grant on, or while in flight).
    pub fn granted(&self, key: &str, seen: u32) -> bool {
        self.keys.get(key).is_some_and(|f| f.grants != seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: u64) -> BlockReport {
        BlockReport {
            id,
            holder: "iso".into(),
            policy: "p".into(),
            times: Vec::new(),
            pending: Vec::new(),
            strikes: 0,
        }
    }

    #[test]
    fn a_call_sent_while_an_ask_is_in_flight_races_it_until_it_lands() {
        let mut flights = Flights::default();
        assert_eq!(flights.race("k"), None);
        let ask = flights.send("k", true, vec![report(1)]);
        assert!(flights.asking("k") && !flights.asking("j"));
        let seen = flights.race("k").expect("the ask is in flight");
        let reported = flights.send("k", false, vec![report(2)]);
        let ids = |flights: &Flights| -> Vec<u64> { flights.reports("k").map(|r| r.id).collect() };
        assert_eq!(ids(&flights), [1, 2], "both ride with the next call");
        flights.land("k", reported, false);
        assert_eq!(ids(&flights), [1]);
        assert!(!flights.granted("k", seen), "a report brings nothing");
        flights.land("k", ask, true);
        assert!(!flights.asking("k") && ids(&flights).is_empty());
        assert!(flights.granted("k", seen));
    }

    #[test]
    fn keys_never_landed_are_forgotten_past_its_capacity() {
        let mut flights = Flights::default();
        let quiet = flights.send("quiet", true, Vec::new());
        flights.land("quiet", quiet, false);
        assert!(flights.keys.is_empty(), "nothing to keep");
        for i in 0..CAPACITY {
            flights.send(&format!("k{i}"), true, Vec::new());
        }
        assert!(flights.asking("k0"));
        flights.send("new", true, Vec::new());
        assert!(!flights.asking("k0") && flights.asking("new"));
    }
}
