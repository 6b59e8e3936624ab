//! The sale's figures against a naive model: whatever decisions the parts
//! count and whenever the view is read (before some of them too, as a
//! clock that steps back would: a second a later one reused is forgotten),
//! each part's seconds are exactly its decisions of the last five minutes,
//! their sum over the parts is exactly every decision of those minutes,
//! the rate is exactly the admissions of the last complete seconds, and a
//! part's memory stays fixed.

use proptest::prelude::*;
use sluice::sale::view::{merge, recent_admissions, totals, RATE_S};
use sluice::sale::{Second, Seconds, SPAN_S};

const T0: u64 = 1_700_000_000_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn the_seconds_add_up_to_every_decision_of_the_last_five_minutes(
        decisions in prop::collection::vec((0usize..4, 0u64..400_000, any::<bool>()), 0..400),
        read_at in 0u64..800_000,
    ) {
        let mut parts: Vec<Seconds> = (0..4).map(|_| Seconds::new()).collect();
        let mut sorted = decisions.clone();
        sorted.sort_by_key(|d| d.1);
        for &(part, at, admitted) in &sorted {
            parts[part].count(T0 + at, admitted);
        }
        let now = T0 + read_at;
        let now_s = now / 1000;
        let counts = |part: Option<usize>| {
            let mut model: Vec<Second> = Vec::new();
            for &(p, at, admitted) in &sorted {
                let at_s = (T0 + at) / 1000;
                // A bucket only keeps its latest second: a decision whose
                // second a later one reused is forgotten, as it is older.
                let newest = sorted.iter().filter(|d| (T0 + d.1) / 1000 % SPAN_S == at_s % SPAN_S && d.0 == p).map(|d| (T0 + d.1) / 1000).max();
                if part.is_some_and(|q| q != p) || at_s > now_s || at_s + SPAN_S <= now_s || newest != Some(at_s) {
                    continue;
                }
                match model.iter_mut().find(|s| s.at_s() == at_s) {
                    Some(s) => *s = Second(at_s, s.1 + u64::from(admitted), s.2 + u64::from(!admitted)),
                    None => model.push(Second(at_s, u64::from(admitted), u64::from(!admitted))),
                }
            }
            model.sort_by_key(Second::at_s);
            model
        };
        let seen: Vec<Vec<Second>> = parts.iter().map(|p| p.recent(now)).collect();
        for (i, part) in seen.iter().enumerate() {
            prop_assert_eq!(part, &counts(Some(i)), "part {}", i);
        }
        let merged = merge(&seen, now);
        prop_assert_eq!(&merged, &counts(None));
        let all: u64 = merged.iter().map(|s| s.admitted() + s.refused()).sum();
        prop_assert_eq!(totals(&merged).0 + totals(&merged).1, all);
        let rate: u64 = merged.iter().filter(|s| s.at_s() < now_s && s.at_s() + RATE_S >= now_s).map(Second::admitted).sum();
        prop_assert_eq!(recent_admissions(&merged, now), rate);
    }
}
