//! A global quota's sale figures from its parts': the seconds added up,
//! the current rate, and the time to sell out at it. Integer arithmetic
//! only (the worker formats no floating-point numbers).

use super::{Second, SPAN_S};

/// The current rate is the admissions of the last this many complete
/// seconds: short enough to follow a sale that starts or stalls, long
/// enough not to jump with every second.
pub const RATE_S: u64 = 10;

/// Every part's seconds of the [`SPAN_S`] seconds up to `now_ms` added up,
/// second by second, oldest first.
pub fn merge(parts: &[Vec<Second>], now_ms: u64) -> Vec<Second> {
    let now_s = now_ms / 1000;
    let oldest = now_s.saturating_sub(SPAN_S - 1);
    let mut sum = vec![(0u64, 0u64); SPAN_S as usize];
    for second in parts.iter().flatten() {
        let slot = second
            .at_s()
            .checked_sub(oldest)
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| sum.get_mut(i));
        if let Some((admitted, refused)) = slot {
            *admitted = admitted.saturating_add(second.admitted());
            *refused = refused.saturating_add(second.refused());
        }
    }
    (oldest..)
        .zip(sum)
        .filter(|(_, (admitted, refused))| admitted + refused > 0)
        .map(|(at_s, (admitted, refused))| Second(at_s, admitted, refused))
        .collect()
}

/// Admissions and refusals in all of `seconds`.
pub fn totals(seconds: &[Second]) -> (u64, u64) {
    seconds.iter().fold((0, 0), |(a, r), s| {
        (
            a.saturating_add(s.admitted()),
            r.saturating_add(s.refused()),
        )
    })
}

/// Admissions in the last [`RATE_S`] complete seconds before `now_ms`
/// (the current second, still counting, is left out): the rate is this
/// many per [`RATE_S`] seconds.
pub fn recent_admissions(seconds: &[Second], now_ms: u64) -> u64 {
    let now_s = now_ms / 1000;
    let from = now_s.saturating_sub(RATE_S);
    seconds
        .iter()
        .filter(|s| (from..now_s).contains(&s.at_s()))
        .fold(0, |sum, s| sum.saturating_add(s.admitted()))
}

/// How long until a policy of `limit` per `window_ms` with `remaining`
/// units left sells out, at `admitted` admissions per [`RATE_S`] seconds:
/// `Some(0)` when nothing is left; `None` when it never does at this rate,
/// because nothing is being admitted or because the window frees places
/// as fast as they are taken (the rate times the window is below the
/// limit). Otherwise the remaining units divided by the rate, rounded up
/// to a millisecond: a lower bound when the window is shorter than that,
/// since places the window frees meanwhile are not counted.
pub fn sell_out_ms(limit: u64, window_ms: u64, remaining: u64, admitted: u64) -> Option<u64> {
    if remaining == 0 {
        return Some(0);
    }
    let rate_ms = u128::from(RATE_S) * 1000;
    let in_window = u128::from(admitted) * u128::from(window_ms);
    if admitted == 0 || in_window < u128::from(limit) * rate_ms {
        return None;
    }
    let ms = (u128::from(remaining) * rate_ms).div_ceil(u128::from(admitted));
    Some(u64::try_from(ms).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_add_up_second_by_second() {
        let merged = merge(
            &[
                vec![Second(10, 1, 0), Second(12, 2, 5)],
                vec![],
                vec![Second(12, 3, 1), Second(11, 0, 4)],
            ],
            12_500,
        );
        assert_eq!(
            merged,
            [Second(10, 1, 0), Second(11, 0, 4), Second(12, 5, 6)]
        );
        // Seconds outside the span up to now are left out.
        let now_ms = (10 + SPAN_S) * 1000;
        let late = [vec![
            Second(10, 1, 0),
            Second(11, 2, 0),
            Second(11 + SPAN_S, 1, 1),
        ]];
        assert_eq!(merge(&late, now_ms), [Second(11, 2, 0)]);
        assert_eq!(totals(&merged), (6, 10));
        assert_eq!(totals(&[]), (0, 0));
    }

    #[test]
    fn the_rate_counts_the_last_complete_seconds_only() {
        let seconds: Vec<Second> = (100..=120).map(|s| Second(s, 1, 7)).collect();
        // At 120.5 s: seconds 110 to 119, not the current 120, nor 109.
        assert_eq!(recent_admissions(&seconds, 120_500), 10);
        assert_eq!(recent_admissions(&seconds, 200_000), 0);
        assert_eq!(recent_admissions(&seconds, 5_000), 0);
    }

    #[test]
    fn time_to_sell_out_at_the_current_rate() {
        // A day's stock of 1 000 with 400 left, 50 admitted in 10 s (5/s):
        // 80 s to go.
        assert_eq!(sell_out_ms(1000, 86_400_000, 400, 50), Some(80_000));
        assert_eq!(sell_out_ms(1000, 86_400_000, 0, 50), Some(0));
        assert_eq!(sell_out_ms(1000, 86_400_000, 400, 0), None);
        // 3 left at 7 per 10 s: 4 286 ms, rounded up.
        assert_eq!(sell_out_ms(10, 60_000, 3, 7), Some(4_286));
        // 20 000 a second taken at 15 000 a second never fills: each
        // second's admissions leave the window as the next come.
        assert_eq!(sell_out_ms(20_000, 1_000, 5_000, 150_000), None);
        // At exactly the limit's rate it does.
        assert_eq!(sell_out_ms(20_000, 1_000, 5_000, 200_000), Some(250));
        assert_eq!(sell_out_ms(1, u64::MAX, u64::MAX, 1), Some(u64::MAX));
    }
}
