//! One part's admissions and refusals per second over the last
//! [`SPAN_S`] seconds: a ring of that many counters, so its memory is
//! fixed (4.8 KB) whatever the traffic. It lives in the part's memory
//! only: a part that restarts (or that the runtime evicts when idle)
//! counts from zero again. So its admissions are read from the part's log
//! instead wherever the log holds them ([`Seconds::with_log`]): the log is
//! stored, and holds every admission of its window, exactly; refusals,
//! which write nothing, are only counted here.

use crate::input::scan::{FromScan, Malformed, Read, Scan};

/// How far back a part counts: five minutes.
pub const SPAN_S: u64 = 300;

/// One second's counts: `[at_s, admitted, refused]`, `at_s` in seconds
/// since the epoch (an array on the wire, since a view carries hundreds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Second(pub u64, pub u64, pub u64);

impl crate::json::Write for Second {
    fn write(&self, out: &mut crate::json::Text) {
        (self.0, self.1, self.2).write(out);
    }
}

impl FromScan for Second {
    fn from_scan(scan: &mut Scan<'_>) -> Read<Second> {
        match Vec::<u64>::from_scan(scan)?[..] {
            [at_s, admitted, refused] => Ok(Second(at_s, admitted, refused)),
            _ => Err(Malformed),
        }
    }
}

impl Second {
    pub fn at_s(&self) -> u64 {
        self.0
    }

    pub fn admitted(&self) -> u64 {
        self.1
    }

    pub fn refused(&self) -> u64 {
        self.2
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The second the counts are for; a bucket of an older second is
    /// stale and counts as empty.
    at_s: u64,
    admitted: u32,
    refused: u32,
}

#[derive(Debug, Default)]
pub struct Seconds {
    /// `SPAN_S` buckets once anything was counted, indexed by the second
    /// modulo `SPAN_S`.
    buckets: Vec<Bucket>,
}

impl Seconds {
    pub fn new() -> Seconds {
        Seconds::default()
    }

    /// Counts one decision made at `now_ms`.
    pub fn count(&mut self, now_ms: u64, admitted: bool) {
        if self.buckets.is_empty() {
            self.buckets = vec![Bucket::default(); SPAN_S as usize];
        }
        let Some(bucket) = self.bucket(now_ms) else {
            return;
        };
        if admitted {
            bucket.admitted = bucket.admitted.saturating_add(1);
        } else {
            bucket.refused = bucket.refused.saturating_add(1);
        }
    }

    /// Counts `admitted` admissions an isolate made from admission blocks
    /// (`ledger::blocks`) in the second their report reached the part, at
    /// `now_ms`: at most a lease (1 s) and a call after they happened. Only
    /// where decisions are counted already: a part's first admission from
    /// a block came with a counted decision, the one that granted it.
    pub fn count_reported(&mut self, now_ms: u64, admitted: u32) {
        if admitted == 0 || self.buckets.is_empty() {
            return;
        }
        if let Some(bucket) = self.bucket(now_ms) {
            bucket.admitted = bucket.admitted.saturating_add(admitted);
        }
    }

    /// The bucket of `now_ms`'s second, emptied if it held an older one.
    fn bucket(&mut self, now_ms: u64) -> Option<&mut Bucket> {
        let at_s = now_ms / 1000;
        let bucket = usize::try_from(at_s % SPAN_S)
            .ok()
            .and_then(|i| self.buckets.get_mut(i))?;
        if bucket.at_s != at_s {
            *bucket = Bucket {
                at_s,
                admitted: 0,
                refused: 0,
            };
        }
        Some(bucket)
    }

    /// [`recent`](Self::recent), each second's admissions read from the
    /// part's log where it covers that second: `log` is the log's window
    /// and its entries `(at_ms, count)`, oldest first.
    pub fn with_log(&self, now_ms: u64, log: Option<(u64, Vec<(u64, u32)>)>) -> Vec<Second> {
        let mut seconds = self.recent(now_ms);
        let Some((window_ms, entries)) = log else {
            return seconds;
        };
        // Seconds wholly inside the log's window: their admissions are the
        // log's, counted or not.
        let from_s = now_ms.saturating_sub(window_ms) / 1000 + 1;
        seconds.retain_mut(|s| {
            s.1 = if s.0 >= from_s { 0 } else { s.1 };
            s.1 + s.2 > 0
        });
        for (at_ms, count) in entries {
            let at_s = at_ms / 1000;
            if at_s < from_s || at_s + SPAN_S <= now_ms / 1000 {
                continue;
            }
            match seconds.binary_search_by_key(&at_s, |s| s.0) {
                Ok(i) => seconds[i].1 += u64::from(count),
                Err(i) => seconds.insert(i, Second(at_s, u64::from(count), 0)),
            }
        }
        seconds
    }

    /// The seconds of the last [`SPAN_S`] (the current one included) that
    /// saw a decision, oldest first.
    pub fn recent(&self, now_ms: u64) -> Vec<Second> {
        let now_s = now_ms / 1000;
        let oldest = now_s.saturating_sub(SPAN_S - 1);
        // The ring from the bucket after the current second's: oldest
        // first, with no sort.
        let start = usize::try_from((now_s + 1) % SPAN_S).unwrap_or(0);
        let (newer, older) = self.buckets.split_at(start.min(self.buckets.len()));
        older
            .iter()
            .chain(newer)
            .filter(|b| (oldest..=now_s).contains(&b.at_s) && b.admitted + b.refused > 0)
            .map(|b| Second(b.at_s, u64::from(b.admitted), u64::from(b.refused)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_counted_holds_no_memory_and_reports_nothing() {
        let seconds = Seconds::new();
        assert!(seconds.buckets.is_empty());
        assert!(seconds.recent(1_000_000).is_empty());
    }

    #[test]
    fn decisions_are_counted_per_second_and_forgotten_after_five_minutes() {
        let mut seconds = Seconds::new();
        let t0 = 1_700_000_000_000;
        seconds.count(t0, true);
        seconds.count(t0 + 999, false);
        seconds.count(t0 + 1_000, true);
        let at = t0 / 1000;
        assert_eq!(
            seconds.recent(t0 + 1_500),
            [Second(at, 1, 1), Second(at + 1, 1, 0)]
        );
        // The first second is still in the span 299 s later, gone at 300.
        assert_eq!(seconds.recent(t0 + 299_000).len(), 2);
        assert_eq!(seconds.recent(t0 + 300_000), [Second(at + 1, 1, 0)]);
        // A second 300 s later reuses its bucket from zero.
        seconds.count(t0 + 300_000, false);
        assert_eq!(
            seconds.recent(t0 + 300_000),
            [Second(at + 1, 1, 0), Second(at + 300, 0, 1)]
        );
        // A clock that steps back reports nothing from the future.
        assert!(seconds.recent(t0 - 10_000).is_empty());
    }

    #[test]
    fn admissions_come_from_the_log_where_it_holds_them_and_survive_a_restart() {
        let t0 = 1_700_000_000_000;
        let at = t0 / 1000;
        let log = |entries: &[(u64, u32)]| Some((60_000, entries.to_vec()));
        // Counted in memory: two admissions and a refusal at t0, one at +1 s.
        let mut seconds = Seconds::new();
        seconds.count(t0, true);
        seconds.count(t0, true);
        seconds.count(t0, false);
        seconds.count(t0 + 1_000, true);
        // The log holds three at t0 (one an isolate admitted from a block)
        // and one at +1 s: the log's figures, the memory's refusal.
        let logged = [(t0, 2), (t0 + 10, 1), (t0 + 1_000, 1)];
        assert_eq!(
            seconds.with_log(t0 + 1_500, log(&logged)),
            [Second(at, 3, 1), Second(at + 1, 1, 0)]
        );
        // Restarted: nothing in memory, the same admissions from the log.
        let restarted = Seconds::new();
        assert_eq!(
            restarted.with_log(t0 + 1_500, log(&logged)),
            [Second(at, 3, 0), Second(at + 1, 1, 0)]
        );
        // Beyond the log's window, the memory's count stands.
        let late = t0 + 61_500;
        assert_eq!(
            seconds.with_log(late, log(&[(t0 + 1_000, 1)])),
            [Second(at, 2, 1), Second(at + 1, 1, 0)]
        );
        assert_eq!(seconds.with_log(late, None), seconds.recent(late));
    }

    #[test]
    fn reported_admissions_count_in_their_reports_second_where_decisions_do() {
        let t0 = 1_700_000_000_000;
        let mut unwatched = Seconds::new();
        unwatched.count_reported(t0, 5);
        assert!(unwatched.buckets.is_empty(), "no ring for an unwatched key");
        let mut seconds = Seconds::new();
        seconds.count(t0, true);
        seconds.count_reported(t0 + 1_200, 40);
        seconds.count_reported(t0 + 1_300, 0);
        let at = t0 / 1000;
        assert_eq!(
            seconds.recent(t0 + 1_500),
            [Second(at, 1, 0), Second(at + 1, 40, 0)]
        );
    }
}
