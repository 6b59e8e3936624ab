//! Requests waiting for a lease: first come, first served within each key.
//!
//! When a lease is released or lapses, the key object offers the freed
//! capacity to the waiters in arrival order. A waiter that still cannot be
//! served blocks those behind it on the same key (so nobody overtakes), but
//! not waiters on other keys. A waiter that gives up removes itself.

use std::collections::{HashSet, VecDeque};

#[derive(Debug)]
struct Waiter<P> {
    id: u64,
    key: String,
    payload: P,
}

#[derive(Debug)]
pub struct Queue<P> {
    waiters: VecDeque<Waiter<P>>,
    next_id: u64,
}

impl<P> Default for Queue<P> {
    fn default() -> Queue<P> {
        Queue {
            waiters: VecDeque::new(),
            next_id: 0,
        }
    }
}

impl<P> Queue<P> {
    pub fn new() -> Queue<P> {
        Queue::default()
    }

    /// Adds a waiter for `key` and returns its id.
    pub fn push(&mut self, key: &str, payload: P) -> u64 {
        self.next_id += 1;
        self.waiters.push_back(Waiter {
            id: self.next_id,
            key: key.to_string(),
            payload,
        });
        self.next_id
    }

    /// Removes a waiter that gave up; false if it was already served.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.waiters.len();
        self.waiters.retain(|w| w.id != id);
        self.waiters.len() < before
    }

    pub fn len_for(&self, key: &str) -> usize {
        self.waiters.iter().filter(|w| w.key == key).count()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Offers capacity in arrival order: `serve` returns `Some(answer)` for
    /// a waiter it could serve (granted, or refused for good) and `None`
    /// when the waiter must keep waiting. Served waiters leave the queue and
    /// come back with their answers.
    pub fn serve<A>(&mut self, mut serve: impl FnMut(&str, &P) -> Option<A>) -> Vec<(P, A)> {
        let mut blocked: HashSet<String> = HashSet::new();
        let mut served = Vec::new();
        let mut waiting = VecDeque::with_capacity(self.waiters.len());
        while let Some(waiter) = self.waiters.pop_front() {
            if blocked.contains(&waiter.key) {
                waiting.push_back(waiter);
                continue;
            }
            match serve(&waiter.key, &waiter.payload) {
                Some(answer) => served.push((waiter.payload, answer)),
                None => {
                    blocked.insert(waiter.key.clone());
                    waiting.push_back(waiter);
                }
            }
        }
        self.waiters = waiting;
        served
    }
}

#[cfg(test)]
mod tests {
    use super::Queue;

    #[test]
    fn serves_in_arrival_order_without_overtaking_on_a_key() {
        let mut queue = Queue::new();
        for (key, name) in [
            ("a", "a1"),
            ("b", "b1"),
            ("a", "a2"),
            ("a", "a3"),
            ("b", "b2"),
        ] {
            queue.push(key, name);
        }
        let mut capacity = 1;
        // Key a has room for one; key b for none.
        let served = queue.serve(|key, name: &&str| {
            if key == "a" && capacity > 0 {
                capacity -= 1;
                Some(format!("granted {name}"))
            } else {
                None
            }
        });
        assert_eq!(served, [("a1", "granted a1".to_string())]);
        assert_eq!((queue.len_for("a"), queue.len_for("b")), (2, 2));
        let served = queue.serve(|_, name| Some(*name));
        let order: Vec<&str> = served.iter().map(|(name, _)| *name).collect();
        assert_eq!(order, ["b1", "a2", "a3", "b2"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_waiter_that_gives_up_leaves() {
        let mut queue = Queue::new();
        let first = queue.push("k", 1);
        let second = queue.push("k", 2);
        assert!(queue.remove(first));
        assert!(!queue.remove(first));
        let served = queue.serve(|_, n| Some(*n));
        assert_eq!(served, [(2, 2)]);
        assert!(!queue.remove(second), "already served");
    }
}
