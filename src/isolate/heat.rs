//! How hot each key is in this isolate: its decisions within the last
//! second, the figure an isolate sends with its call so that the key's
//! object grants blocks only to hot keys (`ledger::blocks::size`).
//!
//! Counted in ten 100 ms buckets per key, so a key costs 48 bytes however
//! hot it runs; "the last second" is the ten buckets up to the current
//! one, within 100 ms of exact, which is all a threshold of a few a second
//! needs. Bounded: when full, the key decided least recently goes.

use std::collections::HashMap;

/// Keys counted at once.
pub const CAPACITY: usize = 1024;

const BUCKET_MS: u64 = 100;
const BUCKETS: u64 = 10;

#[derive(Debug, Default, Clone)]
struct Counter {
    counts: [u32; BUCKETS as usize],
    /// The newest bucket counted (`now / 100`).
    newest: u64,
}

impl Counter {
    fn count(&mut self, bucket: u64) {
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
        (from..=self.newest.min(bucket))
            .map(|b| self.counts[(b % BUCKETS) as usize])
            .fold(0, u32::saturating_add)
    }
}

/// Decisions per key in the last second.
#[derive(Debug, Default)]
pub struct Heat {
    keys: HashMap<String, Counter>,
}

impl Heat {
    /// Counts a decision for `key` (an object's name) at `now_ms`, and
    /// answers its decisions within the last second, this one included.
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
            assert_eq!(heat.record("a", T0 + i * 50), i as u32 + 1);
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
        assert_eq!(rates, [1, 2, 3, 4, 5]);
    }
}
