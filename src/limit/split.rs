//! One global quota divided across K parts, each an exact log in its own
//! Durable Object (one object serves about 1 000 requests a second). Shares
//! differ by at most one and sum to the limit, so the parts together never
//! hold more than the limit in any window. A request tries a random part, then
//! one other (`examples/split_price.rs` measures what that leaves unused).

use super::Spec;

/// The most parts a quota may be split into.
pub const MAX_PARTS: u32 = 64;

/// Part `index`'s share of `limit` across `parts` parts: the first
/// `limit % parts` parts hold one more than the rest.
pub fn share(limit: u64, parts: u32, index: u32) -> u64 {
    let parts = u64::from(parts.max(1));
    limit / parts + u64::from(u64::from(index) < limit % parts)
}

/// The parts to try for one request, given two random numbers: a first
/// part, and, when there is more than one, a different second part.
pub fn route(parts: u32, first: u32, second: u32) -> (u32, Option<u32>) {
    let parts = parts.max(1);
    let one = first % parts;
    if parts == 1 {
        return (one, None);
    }
    let other = (one + 1 + second % (parts - 1)) % parts;
    (one, Some(other))
}

/// `spec` with its limit cut to part `index`'s share, or `None` for an
/// algorithm that cannot be split (GCRA's burst and rate do not divide
/// into parts that add up to the whole) or a share of zero.
pub fn share_spec(spec: &Spec, parts: u32, index: u32) -> Option<Spec> {
    spec.with_limit(share(spec.limit(), parts, index))?.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::{Policy, SlidingLog};

    #[test]
    fn shares_sum_to_the_limit_and_differ_by_at_most_one() {
        for limit in [1, 2, 7, 10, 63, 64, 65, 1000, 20_000, 1_000_000] {
            for parts in [1, 2, 3, 4, 7, 16, 64] {
                if u64::from(parts) > limit {
                    continue;
                }
                let shares: Vec<u64> = (0..parts).map(|i| share(limit, parts, i)).collect();
                assert_eq!(shares.iter().sum::<u64>(), limit, "{limit} / {parts}");
                let (min, max) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
                assert!(max - min <= 1 && *min >= 1, "{limit} / {parts}: {shares:?}");
            }
        }
        assert_eq!(share(10, 4, 0), 3);
        assert_eq!(share(10, 4, 1), 3);
        assert_eq!(share(10, 4, 2), 2);
        assert_eq!(share(10, 4, 3), 2);
    }

    #[test]
    fn the_second_part_is_always_another_part() {
        assert_eq!(route(1, 12345, 678), (0, None));
        for parts in 2..=17 {
            for first in 0..40 {
                for second in 0..40 {
                    let (one, other) = route(parts, first, second);
                    let other = other.unwrap();
                    assert!(one < parts && other < parts);
                    assert_ne!(one, other);
                }
            }
        }
        // Every other part is reachable second, evenly.
        let seconds: std::collections::BTreeSet<u32> =
            (0..6).map(|r| route(7, 3, r).1.unwrap()).collect();
        assert_eq!(seconds.len(), 6);
        assert!(!seconds.contains(&3));
    }

    #[test]
    fn specs_are_cut_to_their_share_and_gcra_is_not_split() {
        let spec = Spec::SlidingLog(Policy::new(10, 1000).unwrap());
        let parts: Vec<Spec> = (0..3).map(|i| share_spec(&spec, 3, i).unwrap()).collect();
        assert_eq!(
            parts.iter().map(Spec::limit).collect::<Vec<_>>(),
            vec![4, 3, 3]
        );
        assert!(parts.iter().all(|p| p.window_ms() == 1000));
        let fixed = Spec::FixedWindow(Policy::new(5, 60_000).unwrap());
        assert_eq!(
            share_spec(&fixed, 2, 1),
            Some(Spec::FixedWindow(Policy::new(2, 60_000).unwrap()))
        );
        assert_eq!(share_spec(&spec, 11, 10), None, "a share of zero");
        let gcra = Spec::Gcra(crate::limit::gcra::GcraPolicy::new(9, 10, 1000).unwrap());
        assert_eq!(share_spec(&gcra, 2, 0), None);
    }

    /// With the parts' exact logs, no window ever holds more than the whole
    /// limit, whatever the routing, the arrivals and the number of parts.
    #[test]
    fn the_parts_never_admit_more_than_the_limit_in_any_window() {
        let (limit, window) = (40u64, 1000u64);
        for parts in [1u32, 2, 4, 16] {
            let mut logs: Vec<SlidingLog> = (0..parts)
                .map(|i| SlidingLog::new(Policy::new(share(limit, parts, i), window).unwrap()))
                .collect();
            let mut admitted = Vec::new();
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(parts);
            let mut next = || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            let mut now = 0;
            for _ in 0..20_000 {
                now += next() % 20;
                let (one, other) = route(parts, next() as u32, next() as u32);
                let allowed = logs[one as usize].check(now, 1).allowed
                    || other.is_some_and(|o| logs[o as usize].check(now, 1).allowed);
                if allowed {
                    admitted.push(now);
                }
            }
            for (i, &start) in admitted.iter().enumerate() {
                let inside = admitted[i..].iter().take_while(|&&t| t < start + window);
                assert!(inside.count() as u64 <= limit, "K = {parts} at {start}");
            }
        }
    }
}
