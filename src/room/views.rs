//! What an isolate knows of each shard: the status of its last answer and
//! when it came. Fresh for [`STATUS_TTL_MS`], a view answers waiting
//! visitors' refreshes without a call; older, it is only a fallback when
//! the shard cannot be reached. One entry per shard of each configured
//! room, so the map is bounded by the config.

use std::collections::HashMap;

use super::shard::Status;
use super::visit::STATUS_TTL_MS;

#[derive(Debug, Default)]
pub struct Views {
    seen: HashMap<(String, u32), (Status, u64)>,
}

impl Views {
    /// Shard `shard` of room `room` as of `now`, if its view is fresh.
    pub fn fresh(&self, room: &str, shard: u32, now: u64) -> Option<Status> {
        let (status, at) = self.seen.get(&(room.to_string(), shard))?;
        (now.saturating_sub(*at) < STATUS_TTL_MS).then_some(*status)
    }

    /// The last view of the shard, however old.
    pub fn last(&self, room: &str, shard: u32) -> Option<Status> {
        self.seen
            .get(&(room.to_string(), shard))
            .map(|(status, _)| *status)
    }

    /// Keeps `status`, answered at `now`, unless the view holds a later
    /// one: answers can arrive out of order, and "now serving" only grows.
    pub fn remember(&mut self, room: &str, shard: u32, status: Status, now: u64) {
        let entry = self
            .seen
            .entry((room.to_string(), shard))
            .or_insert((status, now));
        let newer = status.counters.serving >= entry.0.counters.serving
            && status.counters.next >= entry.0.counters.next;
        if newer {
            *entry = (status, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::room::shard::Counters;

    fn status(serving: u64) -> Status {
        Status {
            counters: Counters {
                next: serving + 5,
                serving,
                pre: 0,
                opened: true,
                seed: 0,
            },
            places: 1,
            per_minute: 1,
            session_ms: 60_000,
            active: 1,
            offered: 0,
            admitted: 0,
        }
    }

    #[test]
    fn a_view_is_fresh_for_its_lifetime_then_only_a_fallback() {
        let mut views = Views::default();
        views.remember("shop", 2, status(10), 1_000);
        assert_eq!(
            views.fresh("shop", 2, 1_000 + STATUS_TTL_MS - 1),
            Some(status(10))
        );
        assert_eq!(views.fresh("shop", 2, 1_000 + STATUS_TTL_MS), None);
        assert_eq!(views.last("shop", 2), Some(status(10)));
        assert_eq!(views.fresh("shop", 1, 1_000), None);
        assert_eq!(views.fresh("shoes", 2, 1_000), None);
    }

    #[test]
    fn an_answer_that_arrives_late_does_not_undo_a_newer_one() {
        let mut views = Views::default();
        views.remember("shop", 0, status(10), 1_000);
        views.remember("shop", 0, status(8), 1_500);
        assert_eq!(views.last("shop", 0), Some(status(10)));
        views.remember("shop", 0, status(12), 1_600);
        assert_eq!(views.fresh("shop", 0, 1_700), Some(status(12)));
    }
}
