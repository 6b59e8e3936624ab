//! Failed admin authentications per client, in the isolate's memory: after
//! `MAX_FAILURES` within `FAILURE_WINDOW_MS` a client is refused for
//! `LOCKOUT_MS` without its token being looked at, so a guesser costs nothing
//! and learns nothing. Clients as `ip` keys see them; the table is bounded,
//! so more isolates or networks buy more tries, never a way in.

use std::collections::HashMap;

pub const MAX_FAILURES: u32 = 10;
pub const FAILURE_WINDOW_MS: u64 = 60_000;
pub const LOCKOUT_MS: u64 = 5 * 60_000;
pub const CAPACITY: usize = 1_024;

#[derive(Debug, Clone, Copy)]
struct Entry {
    /// When the current count of failures started.
    window_start_ms: u64,
    failures: u32,
    /// Refused until then; 0 when not locked out.
    locked_until_ms: u64,
}

impl Entry {
    fn stale(&self, now_ms: u64) -> bool {
        self.locked_until_ms <= now_ms
            && self.window_start_ms.saturating_add(FAILURE_WINDOW_MS) <= now_ms
    }

    fn last_event_ms(&self) -> u64 {
        self.window_start_ms.max(self.locked_until_ms)
    }
}

#[derive(Debug)]
pub struct Lockout {
    entries: HashMap<String, Entry>,
    capacity: usize,
}

impl Lockout {
    pub fn new(capacity: usize) -> Lockout {
        Lockout {
            entries: HashMap::new(),
            capacity,
        }
    }

    /// How long `client` must still wait, if it is locked out at `now_ms`.
    pub fn locked(&self, client: &str, now_ms: u64) -> Option<u64> {
        let entry = self.entries.get(client)?;
        (entry.locked_until_ms > now_ms).then(|| entry.locked_until_ms - now_ms)
    }

    /// Counts a failed authentication; the failure that reaches
    /// `MAX_FAILURES` within the window starts the lockout.
    pub fn fail(&mut self, client: &str, now_ms: u64) {
        if !self.entries.contains_key(client) {
            self.make_room(now_ms);
        }
        let entry = self.entries.entry(client.to_string()).or_insert(Entry {
            window_start_ms: now_ms,
            failures: 0,
            locked_until_ms: 0,
        });
        if entry.window_start_ms.saturating_add(FAILURE_WINDOW_MS) <= now_ms {
            entry.window_start_ms = now_ms;
            entry.failures = 0;
        }
        entry.failures += 1;
        if entry.failures >= MAX_FAILURES {
            entry.locked_until_ms = now_ms.saturating_add(LOCKOUT_MS);
            entry.window_start_ms = now_ms;
            entry.failures = 0;
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn make_room(&mut self, now_ms: u64) {
        if self.entries.len() < self.capacity {
            return;
        }
        self.entries.retain(|_, entry| !entry.stale(now_ms));
        if self.entries.len() < self.capacity {
            return;
        }
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, entry)| entry.last_event_ms())
            .map(|(client, _)| client.clone());
        if let Some(client) = oldest {
            self.entries.remove(&client);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 1_700_000_000_000;

    fn fail_times(lockout: &mut Lockout, client: &str, n: u32, at: u64) {
        for _ in 0..n {
            lockout.fail(client, at);
        }
    }

    #[test]
    fn ten_failures_in_a_minute_lock_a_client_out_for_five_minutes() {
        let mut lockout = Lockout::new(CAPACITY);
        fail_times(&mut lockout, "192.0.2.1", 9, T);
        assert_eq!(lockout.locked("192.0.2.1", T), None);
        lockout.fail("192.0.2.1", T + 59_999);
        assert_eq!(lockout.locked("192.0.2.1", T + 59_999), Some(LOCKOUT_MS));
        assert_eq!(
            lockout.locked("192.0.2.1", T + 60_000),
            Some(LOCKOUT_MS - 1)
        );
        assert_eq!(lockout.locked("192.0.2.2", T + 60_000), None, "others pass");
        let end = T + 59_999 + LOCKOUT_MS;
        assert_eq!(lockout.locked("192.0.2.1", end - 1), Some(1));
        assert_eq!(lockout.locked("192.0.2.1", end), None);
    }

    #[test]
    fn failures_spread_over_more_than_a_minute_do_not_lock_out() {
        let mut lockout = Lockout::new(CAPACITY);
        fail_times(&mut lockout, "a", 9, T);
        fail_times(&mut lockout, "a", 9, T + FAILURE_WINDOW_MS);
        assert_eq!(lockout.locked("a", T + FAILURE_WINDOW_MS), None);
        lockout.fail("a", T + FAILURE_WINDOW_MS + 1);
        assert!(lockout.locked("a", T + FAILURE_WINDOW_MS + 1).is_some());
    }

    #[test]
    fn after_a_lockout_a_client_starts_over() {
        let mut lockout = Lockout::new(CAPACITY);
        fail_times(&mut lockout, "a", MAX_FAILURES, T);
        let after = T + LOCKOUT_MS;
        fail_times(&mut lockout, "a", MAX_FAILURES - 1, after);
        assert_eq!(lockout.locked("a", after), None);
        lockout.fail("a", after);
        assert!(lockout.locked("a", after).is_some());
    }

    #[test]
    fn the_table_stays_within_its_capacity() {
        let mut lockout = Lockout::new(4);
        fail_times(&mut lockout, "locked", MAX_FAILURES, T);
        for i in 0..100 {
            lockout.fail(&format!("client-{i}"), T + 1 + i);
            assert!(lockout.len() <= 4);
        }
        assert!(
            lockout.locked("locked", T + 200).is_some(),
            "stalest goes first"
        );
        let mut stale = Lockout::new(2);
        stale.fail("old", T);
        stale.fail("older-but-locked", T);
        fail_times(&mut stale, "older-but-locked", MAX_FAILURES, T);
        stale.fail("new", T + FAILURE_WINDOW_MS);
        assert!(stale
            .locked("older-but-locked", T + FAILURE_WINDOW_MS)
            .is_some());
        assert_eq!(stale.len(), 2);
    }

    #[test]
    fn no_overflow_at_the_end_of_time() {
        let mut lockout = Lockout::new(CAPACITY);
        fail_times(&mut lockout, "a", MAX_FAILURES, u64::MAX - 1);
        assert_eq!(lockout.locked("a", u64::MAX - 1), Some(1));
        assert!(!lockout.is_empty());
    }
}
