//! The keys refused most often, in bounded memory: the space-saving summary
//! (Metwally, Agrawal, El Abbadi, 2005). Each `count` is an upper bound of a
//! key's true count and `count - error` a lower one; a key seen more than
//! `n / capacity` times is always listed; summaries merge keeping both bounds.

/// How many keys an isolate (and a hub, per rule and minute) keeps.
pub const CAPACITY: usize = 32;

crate::wire! {
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Counted {
        pub key: String,
        /// At least the key's true count.
        pub count: u64,
        /// How much `count` may overstate it.
        pub error: u64,
    }
}

crate::wire! {
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct TopKeys {
        counted: Vec<Counted>,
        /// Everything ever added, so readers can state the guarantee.
        seen: u64,
    }
}

impl TopKeys {
    pub fn new() -> TopKeys {
        TopKeys::default()
    }

    /// Counts `key` once more.
    pub fn add(&mut self, key: &str, capacity: usize) {
        self.seen += 1;
        if let Some(c) = self.counted.iter_mut().find(|c| c.key == key) {
            c.count += 1;
            return;
        }
        if self.counted.len() < capacity {
            self.counted.push(Counted {
                key: key.to_string(),
                count: 1,
                error: 0,
            });
            return;
        }
        if let Some(smallest) = self.counted.iter_mut().min_by_key(|c| c.count) {
            *smallest = Counted {
                key: key.to_string(),
                count: smallest.count + 1,
                error: smallest.count,
            };
        }
    }

    /// Adds `other` in and keeps the `capacity` largest counters.
    pub fn merge(&mut self, other: &TopKeys, capacity: usize) {
        // A key one side does not list may have counted up to that side's
        // smallest count there (or nothing, if that side was not full).
        let floor = |side: &TopKeys| {
            if side.counted.len() >= capacity {
                side.counted.iter().map(|c| c.count).min().unwrap_or(0)
            } else {
                0
            }
        };
        let (mine, theirs) = (floor(self), floor(other));
        let mut merged: Vec<Counted> = Vec::with_capacity(self.counted.len() + other.counted.len());
        for c in &self.counted {
            let (count, error) = match other.counted.iter().find(|o| o.key == c.key) {
                Some(o) => (c.count + o.count, c.error + o.error),
                None => (c.count + theirs, c.error + theirs),
            };
            merged.push(Counted {
                key: c.key.clone(),
                count,
                error,
            });
        }
        for o in &other.counted {
            if !self.counted.iter().any(|c| c.key == o.key) {
                merged.push(Counted {
                    key: o.key.clone(),
                    count: o.count + mine,
                    error: o.error + mine,
                });
            }
        }
        merged.sort_by(by_rank);
        merged.truncate(capacity);
        self.counted = merged;
        self.seen += other.seen;
    }

    /// The counters, largest first.
    pub fn ranked(&self) -> Vec<Counted> {
        let mut ranked = self.counted.clone();
        ranked.sort_by(by_rank);
        ranked
    }

    pub fn seen(&self) -> u64 {
        self.seen
    }

    pub fn is_empty(&self) -> bool {
        self.seen == 0
    }

    /// Counters held (at most the capacity).
    pub fn len(&self) -> usize {
        self.counted.len()
    }
}

/// Summaries merged into one, keeping `capacity` counters: a rule's
/// minutes in a hub, or the hubs' answers in the worker.
pub fn merge_all<'a>(parts: impl IntoIterator<Item = &'a TopKeys>, capacity: usize) -> TopKeys {
    let mut merged = TopKeys::new();
    for part in parts {
        merged.merge(part, capacity);
    }
    merged
}

/// Larger counts first, then keys in order. One named function for both
/// sorts, so the sort is compiled once for it rather than once per
/// closure (BENCHMARKS.md).
fn by_rank(a: &Counted, b: &Counted) -> std::cmp::Ordering {
    b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key))
}

crate::wire! {
    /// One rule's most refused keys in one minute: what an isolate reports,
    /// what a hub keeps and what the admin stats merge.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct RuleTop {
        pub rule: String,
        /// The minute the keys were counted in (when the report was made).
        pub minute_ms: u64,
        pub keys: TopKeys,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_exactly_while_there_is_room() {
        let mut top = TopKeys::new();
        for key in ["a", "b", "a", "c", "a", "b"] {
            top.add(key, 3);
        }
        let ranked = top.ranked();
        let counts: Vec<(&str, u64, u64)> = ranked
            .iter()
            .map(|c| (c.key.as_str(), c.count, c.error))
            .collect();
        assert_eq!(counts, [("a", 3, 0), ("b", 2, 0), ("c", 1, 0)]);
        assert_eq!(top.seen(), 6);
    }

    #[test]
    fn a_new_key_replaces_the_smallest_and_inherits_its_count_as_error() {
        let mut top = TopKeys::new();
        for key in ["a", "a", "b", "c"] {
            top.add(key, 2);
        }
        let ranked = top.ranked();
        assert_eq!(ranked[0].key, "a");
        assert_eq!(
            (ranked[1].key.as_str(), ranked[1].count, ranked[1].error),
            ("c", 2, 1)
        );
        assert_eq!(top.len(), 2);
    }

    #[test]
    fn summaries_of_many_minutes_merge_into_one() {
        let minute = |keys: &[&str]| {
            let mut top = TopKeys::new();
            for key in keys {
                top.add(key, CAPACITY);
            }
            top
        };
        let parts = [minute(&["a", "b", "a"]), minute(&["a", "c"]), minute(&[])];
        let merged = merge_all(&parts, CAPACITY);
        let ranked: Vec<(String, u64)> = merged
            .ranked()
            .into_iter()
            .map(|c| (c.key, c.count))
            .collect();
        assert_eq!(ranked, [("a".into(), 3), ("b".into(), 1), ("c".into(), 1)]);
        assert_eq!(merged.seen(), 5);
        assert!(merge_all(&[], CAPACITY).is_empty());
    }

    #[test]
    fn merging_adds_counts_and_keeps_the_largest() {
        let mut left = TopKeys::new();
        let mut right = TopKeys::new();
        for key in ["a", "a", "b"] {
            left.add(key, 2);
        }
        for key in ["b", "b", "c"] {
            right.add(key, 2);
        }
        left.merge(&right, 2);
        let ranked = left.ranked();
        let ranked: Vec<(&str, u64, u64)> = ranked
            .iter()
            .map(|c| (c.key.as_str(), c.count, c.error))
            .collect();
        assert_eq!(
            ranked,
            [("a", 3, 1), ("b", 3, 0)],
            "a may also have been seen once on the right, which was full"
        );
        assert_eq!(left.seen(), 6);
    }
}
