//! An isolate's calls in flight to key objects that change what it holds
//! there (issue 40): asks for blocks and reports. Calls overtake each
//! other, so a later call of the key carries the reports still on their
//! way ([`reports`](Flights::reports)), and a call that *races* an ask (sent
//! while it was in flight) has its refusal looked at again once the ask
//! landed, since the object may have counted the block it granted
//! ([`brought`](Flights::brought)). A call lands when answered or failed,
//! never by the clock. docs/algorithms.md, "What it can cost".

use crate::ledger::blocks::BlockReport;

/// Times a refused check is decided again after the ask it raced landed
/// with a block.
pub const AGAIN: u32 = 3;

/// Calls in flight at most: past it (calls never landed) the isolate
/// forgets them all, which costs refusals, never admissions.
const CAPACITY: usize = 4096;

/// The asks that brought blocks remembered: a refusal waits for its ask,
/// whose answer comes long before this many more asks have.
const BROUGHT: usize = 32;

#[derive(Debug)]
struct Out {
    key: String,
    id: u64,
    asks: bool,
    reports: Vec<BlockReport>,
}

/// This isolate's calls in flight that change what it holds at their
/// objects.
#[derive(Debug, Default)]
pub struct Flights {
    out: Vec<Out>,
    sent: u64,
    /// The latest asks that landed with blocks, and their keys.
    brought: Vec<(String, u64)>,
}

impl Flights {
    fn of<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Out> {
        self.out.iter().filter(move |o| o.key == key)
    }

    /// The ask of `key` in flight, if any: a burst before the first grant
    /// comes back asks once, so one isolate does not take share after
    /// share of the headroom the others need; and a call of the key sent
    /// now races it.
    pub fn asking(&self, key: &str) -> Option<u64> {
        self.of(key).find(|o| o.asks).map(|o| o.id)
    }

    /// The reports in flight of `key`, for a call to carry again.
    pub fn reports<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a BlockReport> {
        self.of(key).flat_map(|o| &o.reports)
    }

    /// Counts a call of `key`, with the reports it carries first-hand; its
    /// id, to [`land`](Self::land) it with.
    pub fn send(&mut self, key: &str, asks: bool, reports: Vec<BlockReport>) -> u64 {
        if self.out.len() >= CAPACITY {
            self.out.clear();
        }
        self.sent += 1;
        self.out.push(Out {
            key: key.to_string(),
            id: self.sent,
            asks,
            reports,
        });
        self.sent
    }

    /// Call `id` landed (answered, or failed); `granted` when it brought
    /// blocks.
    pub fn land(&mut self, id: u64, granted: bool) {
        if let Some(at) = self.out.iter().position(|o| o.id == id) {
            let out = self.out.swap_remove(at);
            if granted {
                if self.brought.len() >= BROUGHT {
                    self.brought.remove(0);
                }
                self.brought.push((out.key, id));
            }
        }
    }

    /// Whether an ask of `key` from `ask` on (the one a call raced, or one
    /// sent after it, which may overtake the call too) landed with blocks.
    pub fn brought(&self, key: &str, ask: u64) -> bool {
        self.brought.iter().any(|(k, id)| k == key && *id >= ask)
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
        assert_eq!(flights.asking("k"), None);
        let ask = flights.send("k", true, vec![report(1)]);
        assert_eq!(flights.asking("k"), Some(ask));
        assert_eq!(flights.asking("j"), None);
        let reported = flights.send("k", false, vec![report(2)]);
        let ids = |flights: &Flights| -> Vec<u64> { flights.reports("k").map(|r| r.id).collect() };
        assert_eq!(ids(&flights), [1, 2], "both ride with the next call");
        flights.land(reported, false);
        assert_eq!(ids(&flights), [1]);
        assert!(!flights.brought("k", ask));
        flights.land(ask, true);
        assert_eq!(flights.asking("k"), None);
        assert!(ids(&flights).is_empty() && flights.brought("k", ask));
        assert!(!flights.brought("j", ask), "of its key");
        let next = flights.send("k", true, Vec::new());
        flights.land(next, true);
        assert!(flights.brought("k", ask) && !flights.brought("k", next + 1));
        for _ in 0..BROUGHT {
            let next = flights.send("j", true, Vec::new());
            flights.land(next, true);
        }
        assert!(!flights.brought("k", ask), "remembered for a while");
    }

    #[test]
    fn calls_never_landed_are_forgotten_past_its_capacity() {
        let mut flights = Flights::default();
        for i in 0..CAPACITY {
            flights.send(&format!("k{i}"), true, Vec::new());
        }
        assert!(flights.asking("k0").is_some());
        flights.send("new", true, Vec::new());
        assert!(flights.asking("k0").is_none() && flights.asking("new").is_some());
    }
}
