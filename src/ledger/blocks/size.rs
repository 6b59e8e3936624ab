//! How big a block is, and whether there is one at all: pure, from the
//! figures the object knows at the asking isolate's call. A block goes only
//! to a key that is hot (at least [`HOT_RATE`] decisions in the last second)
//! and far from its limit (headroom `H` at least a quarter of it, the
//! asker's share at least [`MIN_BLOCK`]). Its size is
//! `b = min(H / (2·(h + 1)), max(MIN_BLOCK, rate · cap / 1 s))`, `h` the
//! other isolates holding one; its lease `d = min(cap, max(MIN_LEASE_MS,
//! 2·b / rate))`, `cap = min(MAX_LEASE_MS, W / 2, what the caller allows)`.
//! Why, and what blocks cost: docs/algorithms.md, "Admission blocks".

/// Decisions in the last second, seen by one isolate, that make a key hot.
pub const HOT_RATE: u32 = 5;

/// The smallest block worth a grant: one admission saves no call.
pub const MIN_BLOCK: u32 = 2;

/// The longest lease: a block counts in full until reported, so a short
/// lease bounds what an unused block can hold back.
pub const MAX_LEASE_MS: u64 = 1_000;

/// How far an isolate's clock may fall behind its key object's within a
/// lease, beyond the send-to-grant delay its mapping already allows for:
/// an isolate uses a block only while its mapped reading plus this is
/// within the lease, and stamps each admission that much later
/// (`isolate::blocks`). Workers' `Date.now()` is the time of the last I/O
/// (frozen while a turn runs, and while turns queued ahead of it run),
/// in ticks of up to 3 ms, and a slewed clock drifts at most 500 ppm (0.5
/// ms over a 1 s lease); steps back the isolate reads end its blocks.
/// docs/algorithms.md, "Admission blocks", has the argument.
pub const CLOCK_MARGIN_MS: u64 = 20;

/// The shortest lease, so that a block survives the call that brings it
/// and the margin leaves it as long again.
pub const MIN_LEASE_MS: u64 = 2 * CLOCK_MARGIN_MS;

/// What the object knows when an isolate asks for a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    /// Decisions for the key the asking isolate saw in the last second.
    pub rate: u32,
    pub limit: u64,
    /// The limit, less what counts at worst (outstanding blocks in full).
    pub headroom: u64,
    /// Other isolates holding a block of this policy.
    pub holders: u32,
    /// The longest lease the algorithm allows here.
    pub cap_ms: u64,
}

/// A block's admissions and lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub admissions: u32,
    pub lease_ms: u64,
}

/// The block the rule gives, or `None` (not hot, or near the limit).
pub fn size(s: Sizing) -> Option<Size> {
    if s.rate < HOT_RATE || s.headroom.saturating_mul(4) < s.limit {
        return None;
    }
    let cap = s.cap_ms.min(MAX_LEASE_MS);
    if cap < MIN_LEASE_MS {
        return None;
    }
    let share = s.headroom / (2 * (u64::from(s.holders) + 1));
    let rate = u64::from(s.rate);
    let one_lease = (rate * cap / 1_000).max(u64::from(MIN_BLOCK));
    let admissions = u32::try_from(share.min(one_lease)).unwrap_or(u32::MAX);
    if admissions < MIN_BLOCK {
        return None;
    }
    let spend_ms = (2 * u64::from(admissions) * 1_000).div_ceil(rate);
    Some(Size {
        admissions,
        lease_ms: spend_ms.clamp(MIN_LEASE_MS, cap),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizing(rate: u32, limit: u64, headroom: u64, holders: u32) -> Sizing {
        Sizing {
            rate,
            limit,
            headroom,
            holders,
            cap_ms: 30_000,
        }
    }

    #[test]
    fn a_hot_key_far_from_its_limit_gets_a_lease_of_its_rate() {
        // 100 decisions a second, 10,000 per minute, nothing used.
        let s = size(sizing(100, 10_000, 10_000, 0)).unwrap();
        assert_eq!(
            s,
            Size {
                admissions: 100,
                lease_ms: 1_000
            }
        );
        // Faster: the block is what one second needs, the lease capped.
        let s = size(sizing(2_000, 10_000, 10_000, 0)).unwrap();
        assert_eq!(
            s,
            Size {
                admissions: 2_000,
                lease_ms: 1_000
            }
        );
        // A slower hot key: a small block, a lease twice its spending time.
        let s = size(sizing(5, 10_000, 10_000, 0)).unwrap();
        assert_eq!(
            s,
            Size {
                admissions: 5,
                lease_ms: 1_000
            }
        );
    }

    #[test]
    fn the_headroom_is_shared_among_the_holders() {
        let alone = size(sizing(5_000, 1_000, 1_000, 0)).unwrap();
        assert_eq!(alone.admissions, 500, "half of the headroom at most");
        let fourth = size(sizing(5_000, 1_000, 1_000, 3)).unwrap();
        assert_eq!(fourth.admissions, 125, "1000 / (2 * 4)");
        assert_eq!(fourth.lease_ms, 50, "125 at 5000/s, twice over");
    }

    #[test]
    fn a_cold_key_or_one_near_its_limit_gets_none() {
        assert_eq!(size(sizing(HOT_RATE - 1, 1_000, 1_000, 0)), None);
        assert_eq!(
            size(sizing(100, 1_000, 249, 0)),
            None,
            "under a quarter left"
        );
        assert!(size(sizing(100, 1_000, 250, 0)).is_some());
        assert_eq!(size(sizing(100, 6, 3, 0)), None, "a share under MIN_BLOCK");
        let short = Sizing {
            cap_ms: MIN_LEASE_MS - 1,
            ..sizing(100, 1_000, 1_000, 0)
        };
        assert_eq!(size(short), None, "no lease long enough");
    }

    #[test]
    fn the_outstanding_units_stay_under_the_headroom() {
        // Every isolate takes its share of what the others left.
        let limit = 1_000_000;
        let mut outstanding = 0;
        for holders in 0..64 {
            let s = size(sizing(u32::MAX, limit, limit - outstanding, holders));
            outstanding += s.map_or(0, |s| u64::from(s.admissions));
            assert!(outstanding < limit, "{holders}: {outstanding}");
        }
        assert!(outstanding >= limit / 2);
    }
}
