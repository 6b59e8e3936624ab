//! A sliding log's windows with blocks outstanding: each block counts its
//! `b` admissions in every window its lease overlaps, as if they all fell
//! at the worst moment, until its report replaces it by the real times.
//!
//! With integer milliseconds, the window starting at `a` is `[a, a + W)`;
//! it holds a time `t` when `a ∈ [t − W + 1, t]` and overlaps a lease
//! `[g, e]` when `a ∈ [g − W + 1, e]`. So every admission and every block
//! is an interval of window starts, and "the most any window in a range
//! can hold" is the highest overlap of those intervals over the range.
//! Over the starts at or after `lo`, the log's part (units logged at or
//! after `a`) only falls as `a` grows, and a block's part rises only at
//! `g − W + 1`: the highest overlap is at `lo` or at one of those points,
//! so a check costs O(blocks · (log runs' binary search + blocks)).
//!
//! Counting the units at or after `a` rather than those before `a + W`
//! is exact while no unit is logged after the range's windows end, and
//! only stricter otherwise: a decision checks the windows that hold `now`
//! (issue 39: not those from the newest time logged, which a report
//! stamped in the object's future moves past a block still counting),
//! and units logged later count in each of them.

use super::Block;
use crate::limit::SlidingLog;

/// The most units a window starting anywhere in `[lo, hi]` can hold, with
/// each of `blocks` at its worst.
pub(super) fn most_in_a_window<'a>(
    log: &SlidingLog,
    blocks: impl Iterator<Item = &'a Block> + Clone,
    lo: u64,
    hi: u64,
) -> u64 {
    let window = log.policy().window_ms();
    let rises = blocks
        .clone()
        .map(|block| first_start(block, window))
        .filter(|&a| a > lo && a <= hi);
    std::iter::once(lo)
        .chain(rises)
        .map(|a| {
            let logged = log.held() - log.logged_before(a);
            let held: u64 = blocks
                .clone()
                .filter(|block| first_start(block, window) <= a && a <= block.until_ms)
                .map(|block| u64::from(block.admissions))
                .sum();
            logged + held
        })
        .max()
        .unwrap_or(0)
}

/// The first window start whose window overlaps the block's lease.
fn first_start(block: &Block, window: u64) -> u64 {
    (block.granted_ms + 1).saturating_sub(window)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::{Policy, Spec};

    fn block(admissions: u32, granted_ms: u64, until_ms: u64) -> Block {
        Block {
            id: 1,
            holder: "i".into(),
            policy: "p".into(),
            spec: Spec::SlidingLog(Policy::new(10, 100).unwrap()),
            admissions,
            granted_ms,
            until_ms,
            tat: None,
        }
    }

    /// The same figure, by trying every window start.
    fn brute(log: &SlidingLog, blocks: &[Block], lo: u64, hi: u64) -> u64 {
        let w = log.policy().window_ms();
        (lo..=hi)
            .map(|a| {
                let logged: u64 = log
                    .entries()
                    .filter(|&(t, _)| t >= a && t < a + w)
                    .map(|(_, n)| u64::from(n))
                    .sum();
                let held: u64 = blocks
                    .iter()
                    .filter(|b| b.granted_ms < a + w && a <= b.until_ms)
                    .map(|b| u64::from(b.admissions))
                    .sum();
                logged + held
            })
            .max()
            .unwrap()
    }

    #[test]
    fn a_block_counts_in_every_window_its_lease_overlaps() {
        let mut log = SlidingLog::new(Policy::new(10, 100).unwrap());
        for t in [0, 10, 10, 50, 90] {
            log.admit(t, 1);
        }
        let blocks = [block(3, 95, 140), block(2, 180, 200), block(4, 300, 320)];
        for (lo, hi) in [(0, 0), (0, 90), (0, 150), (41, 200), (150, 330), (330, 400)] {
            assert_eq!(
                most_in_a_window(&log, blocks.iter(), lo, hi),
                brute(&log, &blocks, lo, hi),
                "[{lo}, {hi}]"
            );
        }
        // The window from 0 holds the five logged and the first block.
        assert_eq!(most_in_a_window(&log, blocks.iter(), 0, 0), 8);
        // From 81: the block at 180 and the one at 95 share a window.
        assert_eq!(most_in_a_window(&log, blocks.iter(), 81, 81), 6);
    }
}
