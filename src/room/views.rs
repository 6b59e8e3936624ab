//! What an isolate knows of each shard: the status of its last answer and
//! when it came. Fresh for [`STATUS_TTL_MS`], a view answers waiting
//! visitors' refreshes without a call. While one request asks a shard for
//! a fresh view, the isolate's other requests answer from the one it has,
//! so an isolate calls each shard about once per lifetime however many of
//! its visitors refresh at once. Older than that, a view is a fallback
//! when the shard cannot be reached, and what places a newcomer. One entry
//! per shard of each configured room, so the map is bounded by the config.

use std::collections::HashMap;

use super::shard::Status;

/// How long an isolate shows a shard's "now serving" without asking it
/// again: the most a displayed position lags, and the most a visitor's
/// turn waits on top of its page's refresh.
pub const STATUS_TTL_MS: u64 = 2_000;

#[derive(Debug, Default)]
pub struct Views {
    seen: HashMap<(String, u32), View>,
}

#[derive(Debug, Clone)]
struct View {
    status: Status,
    /// When the status was answered.
    at: u64,
    /// When a request went to ask for a fresher one, if one is out.
    asked: Option<u64>,
}

impl Views {
    /// Shard `shard` of room `room` as of `now`, if its view is fresh or a
    /// fresher one is on its way.
    pub fn fresh(&self, room: &str, shard: u32, now: u64) -> Option<&Status> {
        let view = self.seen.get(&(room.to_string(), shard))?;
        let young = |at: u64| now.saturating_sub(at) < STATUS_TTL_MS;
        (young(view.at) || view.asked.is_some_and(young)).then_some(&view.status)
    }

    /// The last view of the shard, however old.
    pub fn last(&self, room: &str, shard: u32) -> Option<&Status> {
        self.seen
            .get(&(room.to_string(), shard))
            .map(|view| &view.status)
    }

    /// Notes that a request is asking the shard now.
    pub fn asking(&mut self, room: &str, shard: u32, now: u64) {
        if let Some(view) = self.seen.get_mut(&(room.to_string(), shard)) {
            view.asked = Some(now);
        }
    }

    /// Keeps `status`, answered at `now`, unless the view holds a later
    /// one: answers can arrive out of order, and "now serving" only grows.
    /// (An operator's change of state moves neither number, so the status
    /// that carries it replaces a view with the same ones.)
    pub fn remember(&mut self, room: &str, shard: u32, status: Status, now: u64) {
        let key = (room.to_string(), shard);
        let newer = self.seen.get(&key).is_none_or(|view| {
            status.counters.serving >= view.status.counters.serving
                && status.counters.next >= view.status.counters.next
        });
        if newer {
            let fresh = View {
                status,
                at: now,
                asked: None,
            };
            self.seen.insert(key, fresh);
        } else if let Some(view) = self.seen.get_mut(&key) {
            view.asked = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(serving: u64) -> Status {
        Status::sample(serving, serving + 5, 1)
    }

    #[test]
    fn a_view_is_fresh_for_its_lifetime_then_only_a_fallback() {
        let mut views = Views::default();
        views.remember("shop", 2, status(10), 1_000);
        assert_eq!(
            views.fresh("shop", 2, 1_000 + STATUS_TTL_MS - 1),
            Some(&status(10))
        );
        assert_eq!(views.fresh("shop", 2, 1_000 + STATUS_TTL_MS), None);
        assert_eq!(views.last("shop", 2), Some(&status(10)));
        assert_eq!(views.fresh("shop", 1, 1_000), None);
        assert_eq!(views.fresh("shoes", 2, 1_000), None);
    }

    #[test]
    fn while_one_request_asks_the_others_use_the_view_they_have() {
        let mut views = Views::default();
        views.asking("shop", 0, 0);
        assert_eq!(views.fresh("shop", 0, 0), None, "nothing to use yet");
        views.remember("shop", 0, status(10), 1_000);
        let stale = 1_000 + STATUS_TTL_MS;
        assert_eq!(views.fresh("shop", 0, stale), None);
        views.asking("shop", 0, stale);
        assert_eq!(
            views.fresh("shop", 0, stale + STATUS_TTL_MS - 1),
            Some(&status(10))
        );
        // An ask that never came back stops holding the others up.
        assert_eq!(views.fresh("shop", 0, stale + STATUS_TTL_MS), None);
        views.remember("shop", 0, status(11), stale + 50);
        assert_eq!(views.fresh("shop", 0, stale + 60), Some(&status(11)));
    }

    #[test]
    fn an_answer_that_arrives_late_does_not_undo_a_newer_one() {
        let mut views = Views::default();
        views.remember("shop", 0, status(10), 1_000);
        views.remember("shop", 0, status(8), 1_500);
        assert_eq!(views.last("shop", 0), Some(&status(10)));
        views.remember("shop", 0, status(12), 1_600);
        assert_eq!(views.fresh("shop", 0, 1_700), Some(&status(12)));
    }
}
