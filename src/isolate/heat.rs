//! How hot each key is in this isolate: its decisions within the last
//! second, the figure an isolate sends with its call so that the key's
//! object grants blocks only to hot keys (`ledger::blocks::size`).
//!
//! Counted in ten 100 ms buckets per key, so a key costs 56 bytes however
//! hot it runs; "the last second" is the ten buckets up to the current
//! one, within 100 ms of exact, which is all a threshold of a few a second
//! needs. Bounded: when full, the key decided least recently goes.
//!
//! **Warming up.** A key that has been deciding for less than a second
//! (since it was last cold for one) and is hot already (at least
//! [`HOT_RATE`] decisions) counts at its pace so far: its decisions times
//! ten over the buckets it has been deciding in, its current one included.
//! Counted as "within the last second" it would read 5, 11, 23, … at each
//! ask while it warms up, and each block, sized on that figure, would last
//! a fraction of the lease: a call each. At its pace, the second block is
//! already a lease's worth. The pace rounds the current bucket up to a
//! whole 100 ms, so it reads low, never high, for decisions spread evenly;
//! a burst that stops at once reads high, which a lease bounds (an unused
//! block holds its units back for at most one, `ledger::blocks::size`).

use std::collections::HashMap;

use crate::ledger::blocks::size::HOT_RATE;

/// Keys counted at once.
pub const CAPACITY: usize = 1024;

const BUCKET_MS: u64 = 100;
const BUCKETS: u64 = 10;

#[derive(Debug, Default, Clone)]
struct Counter {
    counts: [u32; BUCKETS as usize],
    /// The newest bucket counted (`now / 100`).
    newest: u64,
    /// The bucket it has been deciding since, cold before.
    since: u64,
}

impl Counter {
    fn count(&mut self, bucket: u64) {
        if bucket >= self.newest.saturating_add(BUCKETS) {
            self.since = bucket;
        }
        if bucket > self.newest {
            for b in (self.newest + 1).max(bucket.saturating_sub(BUCKETS - 1))..=bucket {
                self.counts[(b % BUCKETS) as usize] = 0;
            }
            self.newest = bucket;
        }
        if bucket + BUCKETS > self.newest {
            let slot = &mut self.counts[(bucket % BUCKETS) as usize];
            *slot = slot.saturating_add(1);
        }
    }

    fn rate(&self, bucket: u64) -> u32 {
        let from = bucket
            .saturating_sub(BUCKETS - 1)
            .max(self.newest.saturating_sub(BUCKETS - 1));
        let counted = (from..=self.newest.min(bucket))
            .map(|b| self.counts[(b % BUCKETS) as usize])
            .fold(0, u32::saturating_add);
        let span = bucket.saturating_sub(self.since).saturating_add(1);
        if counted < HOT_RATE || span >= BUCKETS {
            return counted;
        }
        let pace = u64::from(counted) * BUCKETS / span;
        u32::try_from(pace).unwrap_or(u32::MAX)
    }
}

/// Decisions per key in the last second (at its pace so far, warming up).
#[derive(Debug, Default)]
pub struct Heat {
    keys: HashMap<String, Counter>,
}

impl Heat {
    /// Counts a decision for `key` (an object's name) at `now_ms`, and
    /// answers its decisions within the last second, this one included (at
    /// its pace so far while it warms up).
    pub fn record(&mut self, key: &str, now_ms: u64) -> u32 {
        let bucket = now_ms / BUCKET_MS;
        // Full: every key not counted within the last second goes (its rate
        // is 0 anyway), or, when all were, every key: a flood of new keys
        // then costs one pass per CAPACITY of them, not a search for the
        // coldest per request, and a hot key is hot again within 5
        // decisions.
        if !self.keys.contains_key(key) && self.keys.len() >= CAPACITY {
            self.keys.retain(|_, c| c.newest + BUCKETS > bucket);
            if self.keys.len() >= CAPACITY {
                self.keys.clear();
            }
        }
        let counter = self.keys.entry(key.to_string()).or_default();
        counter.count(bucket);
        // A clock that stepped back reads the last second it counted.
        counter.rate(bucket.max(counter.newest))
    }

    /// `key`'s decisions within the last second at `now_ms`.
    pub fn rate(&self, key: &str, now_ms: u64) -> u32 {
        self.keys.get(key).map_or(0, |c| c.rate(now_ms / BUCKET_MS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;

    #[test]
    fn counts_the_last_second_per_key() {
        let mut heat = Heat::default();
        for i in 0..20 {
            let rate = heat.record("a", T0 + i * 50);
            if i + 1 < u64::from(HOT_RATE) {
                assert_eq!(rate, i as u32 + 1);
            }
        }
        heat.record("b", T0);
        assert_eq!(heat.rate("b", T0 + 999), 1);
        // At T0 + 1000 the bucket of [T0, T0 + 100) is a second old.
        assert_eq!(heat.rate("a", T0 + 950), 20);
        assert_eq!(heat.rate("a", T0 + 1_000), 18);
        assert_eq!(heat.rate("a", T0 + 1_950), 0);
        assert_eq!(heat.record("a", T0 + 5_000), 1, "a key cold again");
        assert_eq!(heat.rate("c", T0), 0);
        // A late decision (an earlier clock) counts, or is too old to.
        assert_eq!(heat.record("a", T0 + 4_950), 2);
        assert_eq!(heat.record("a", T0 + 3_000), 2);
    }

    #[test]
    fn a_key_hot_for_less_than_a_second_counts_at_its_pace_so_far() {
        let mut heat = Heat::default();
        // 70 a second from cold: under HOT_RATE decisions, their count.
        let rates: Vec<u32> = (0..5).map(|i| heat.record("a", T0 + i * 14)).collect();
        assert_eq!(
            rates,
            [1, 2, 3, 4, 50],
            "5 in the first 100 ms: 50 a second"
        );
        for i in 5..30 {
            heat.record("a", T0 + i * 14);
        }
        assert_eq!(heat.rate("a", T0 + 29 * 14), 30 * 10 / 5, "30 in 5 buckets");
        // A second on, the last second as it is.
        for i in 30..100 {
            heat.record("a", T0 + i * 14);
        }
        assert_eq!(heat.rate("a", T0 + 1_386), 71);
        // Cold for a second: counted from its next decision again.
        assert_eq!(heat.record("a", T0 + 5_000), 1);
        let rates: Vec<u32> = (1..5).map(|i| heat.record("a", T0 + 5_000 + i)).collect();
        assert_eq!(rates, [2, 3, 4, 50]);
    }

    #[test]
    fn holds_at_most_its_capacity_and_drops_keys_cold_for_a_second() {
        let mut heat = Heat::default();
        for i in 0..CAPACITY as u64 {
            heat.record(&format!("k{i}"), T0 + i);
        }
        heat.record("k0", T0 + 5_000);
        heat.record("new", T0 + 5_001);
        assert_eq!(heat.keys.len(), 2, "every key cold for a second went");
        assert_eq!(heat.rate("k1", T0 + 5_001), 0);
        assert_eq!(heat.rate("k0", T0 + 5_001), 1);
    }

    #[test]
    fn a_flood_of_new_keys_stays_bounded_and_a_hot_key_is_hot_again() {
        let mut heat = Heat::default();
        for i in 0..3 * CAPACITY as u64 {
            heat.record(&format!("k{i}"), T0 + i / 10);
            assert!(heat.keys.len() <= CAPACITY);
        }
        let later = T0 + 400;
        let rates: Vec<u32> = (0..5).map(|i| heat.record("hot", later + i)).collect();
        assert_eq!(rates, [1, 2, 3, 4, 50], "5 in its first 100 ms");
    }
}
