//! What a block does to each algorithm's state: what headroom it sees, how
//! a grant charges it, and what a report gives back.
//!
//! - **Sliding log**: nothing is written into the log at grant; the block
//!   is counted beside it, at its worst, in every window its lease overlaps
//!   (`worst`), and its report inserts the real times.
//! - **Fixed window**: the block is `b` tokens of the window open at the
//!   grant (opened by it if none is), and its lease ends with that window,
//!   so its admissions can only fall in it; the report refunds the unused
//!   tokens if that window is still the one open (after it, they count for
//!   nothing anyway).
//! - **GCRA**: the block's `b` units must conform at the grant (all of them
//!   may come at once), and the TAT becomes `max(TAT, e) + b·T`: as if they
//!   came at the lease's end, the latest they can, so that every later
//!   decision is made as if they came as late as they can. Checked at the
//!   earliest moment and charged at the latest, every placement of the real
//!   times within the lease conforms. A grant on an idle key therefore
//!   pushes the TAT up to `d` further than `b` admissions at once would:
//!   the first lease of a burst is charged, in the schedule, as time.
//!   **The report gives back only when that is safe**: if nothing was
//!   charged since the grant (the TAT is the one the grant set), the TAT
//!   becomes the real times replayed from the TAT before the grant, which
//!   is what the algorithm would hold had it decided each one; if anything
//!   was charged since, later decisions were made counting the block's
//!   units in full, and subtracting them could let those decisions' units
//!   and the block's real ones break the schedule, so the block's charge
//!   stays and its unused units are lost (refusals possible, never
//!   over-admission).
//!
//! **A reset** forgets the object's own admissions, not the blocks still
//! out (issue 39): a log counts them beside it anyway; a fixed window
//! keeps the window open with their tokens alone, and a GCRA a schedule of
//! their units alone, all at the latest lease's end (`recharge`).

use super::Block;
use crate::limit::gcra::Gcra;
use crate::limit::{Algorithm, FixedWindow};

const NS_PER_MS: u64 = 1_000_000;

/// A fixed window's unused tokens given back; how many it took back.
pub(super) fn return_tokens(window: &mut FixedWindow, block: &Block, used: usize) -> u32 {
    let unused = block.admissions.saturating_sub(used as u32);
    window.refund(block.granted_ms, unused)
}

/// Charges `admissions` units of a GCRA for a lease ending `until_ms`:
/// `(TAT before, TAT after)` in ns, `None` when the TAT would pass `u64`.
/// The caller checked they conform at the grant.
pub(super) fn charge_schedule(
    cell: &mut Gcra,
    admissions: u32,
    until_ms: u64,
) -> Option<(u64, u64)> {
    let before = cell.tat_ns().unwrap_or(0);
    let interval = u64::try_from(cell.policy().emission_interval_ns()).ok()?;
    let from = before.max(until_ms.checked_mul(NS_PER_MS)?);
    let after = from.checked_add(interval.checked_mul(u64::from(admissions))?)?;
    cell.restore(after);
    Some((before, after))
}

/// Gives a GCRA block's charge back for its real `times` (sorted), if no
/// charge came after it; whether it did.
pub(super) fn replay_schedule(cell: &mut Gcra, block: &Block, times: &[u64]) -> bool {
    let Some((before, after)) = block.tat else {
        return false;
    };
    if cell.tat_ns() != Some(after) {
        return false;
    }
    let interval = cell.policy().emission_interval_ns();
    let replayed = times.iter().fold(i128::from(before), |tat, &t| {
        tat.max(i128::from(t) * i128::from(NS_PER_MS)) + interval
    });
    // At most `after`: the real times lie before the lease's end.
    cell.restore(u64::try_from(replayed).unwrap_or(after).min(after));
    true
}

/// `limiter` afresh but for the charge of `out`, the blocks of its policy
/// still out; `None` when they hold nothing in it (a log counts its
/// blocks beside it).
pub(super) fn recharge<'a>(
    limiter: &Algorithm,
    out: impl Iterator<Item = &'a Block>,
    now_ms: u64,
) -> Option<Algorithm> {
    let mut fresh = Algorithm::new(limiter.spec());
    match (limiter, &mut fresh) {
        (Algorithm::Window(old), Algorithm::Window(new)) => {
            old.open_until(now_ms)?;
            let (opened, _) = old.state();
            let tokens: u32 = out
                .filter(|b| b.granted_ms >= opened)
                .map(|b| b.admissions)
                .sum();
            (tokens > 0).then(|| new.admit(opened, tokens))?;
        }
        (Algorithm::Cell(_), Algorithm::Cell(new)) => {
            let interval = u64::try_from(new.policy().emission_interval_ns()).ok()?;
            let (end, units) = out.fold((0, 0), |(end, units), b| {
                (end.max(b.until_ms), units + u64::from(b.admissions))
            });
            let tat = end
                .saturating_mul(NS_PER_MS)
                .saturating_add(interval.saturating_mul(units));
            (tat > now_ms.saturating_mul(NS_PER_MS)).then(|| new.restore(tat))?;
        }
        _ => return None,
    }
    Some(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limit::gcra::GcraPolicy;
    use crate::limit::{Policy, Spec};

    fn gcra_block(tat: Option<(u64, u64)>) -> Block {
        Block {
            id: 1,
            holder: "i".into(),
            policy: "p".into(),
            spec: Spec::Gcra(GcraPolicy::new(9, 10, 1000).unwrap()),
            admissions: 4,
            granted_ms: 1_000,
            until_ms: 1_200,
            tat,
        }
    }

    #[test]
    fn a_gcra_block_is_charged_as_if_it_came_at_its_leases_end() {
        // T = 100 ms.
        let mut cell = Gcra::new(GcraPolicy::new(9, 10, 1000).unwrap());
        let tat = charge_schedule(&mut cell, 4, 1_200).unwrap();
        assert_eq!(tat, (0, 1_600 * NS_PER_MS));
        // Nothing since: the real times replace the charge.
        let mut block = gcra_block(Some(tat));
        assert!(replay_schedule(&mut cell, &block, &[1_000, 1_050]));
        assert_eq!(cell.tat_ns(), Some(1_200 * NS_PER_MS));
        // Something since: the charge stays.
        let tat = charge_schedule(&mut cell, 4, 1_300).unwrap();
        block.tat = Some(tat);
        cell.check(1_300, 1);
        let charged = cell.tat_ns();
        assert!(!replay_schedule(&mut cell, &block, &[1_250]));
        assert_eq!(cell.tat_ns(), charged);
        assert!(!replay_schedule(&mut cell, &gcra_block(None), &[]));
        // A schedule past u64 grants nothing.
        assert_eq!(charge_schedule(&mut cell, 4, u64::MAX / 1000), None);
    }

    #[test]
    fn a_fixed_windows_block_is_tokens_of_its_window() {
        let mut window = FixedWindow::new(Policy::new(10, 1000).unwrap());
        window.admit(500, 4);
        assert_eq!(window.state(), (500, 4));
        let mut block = gcra_block(None);
        block.granted_ms = 500;
        assert_eq!(return_tokens(&mut window, &block, 1), 3);
        assert_eq!(window.state(), (500, 1));
        window.admit(1_600, 1);
        assert_eq!(return_tokens(&mut window, &block, 0), 0, "another window");
    }
}
