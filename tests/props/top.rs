//! Property tests for the top-refused-keys summary: whatever the stream and
//! however it is split across isolates and merged, every key refused more
//! than `seen / capacity` times is listed, and each count brackets the
//! truth (`count - error <= true <= count`).

use std::collections::HashMap;

use proptest::prelude::*;
use sluice::isolate::top::TopKeys;

fn stream() -> impl Strategy<Value = Vec<(u8, u8)>> {
    // (key, which isolate saw it); a skewed alphabet makes heavy hitters.
    prop::collection::vec((prop_oneof![3 => 0u8..4, 1 => 0u8..60], 0u8..4), 0..600)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn heavy_keys_are_listed_and_counts_bracket_the_truth(events in stream(), capacity in 1usize..12) {
        let mut truth: HashMap<String, u64> = HashMap::new();
        let mut isolates = vec![TopKeys::new(); 4];
        for (key, isolate) in &events {
            let key = format!("k{key}");
            *truth.entry(key.clone()).or_default() += 1;
            isolates[*isolate as usize].add(&key, capacity);
        }
        let mut merged = TopKeys::new();
        for isolate in &isolates {
            merged.merge(isolate, capacity);
        }
        prop_assert_eq!(merged.seen(), events.len() as u64);
        let ranked = merged.ranked();
        prop_assert!(ranked.len() <= capacity);
        for counted in &ranked {
            let real = truth.get(&counted.key).copied().unwrap_or(0);
            prop_assert!(counted.count >= real, "{:?} over {}", counted, real);
            prop_assert!(counted.count - counted.error <= real, "{:?} over {}", counted, real);
        }
        for (key, real) in &truth {
            if *real * capacity as u64 > merged.seen() {
                prop_assert!(ranked.iter().any(|c| &c.key == key), "{} seen {} of {} is missing", key, real, merged.seen());
            }
        }
    }
}
