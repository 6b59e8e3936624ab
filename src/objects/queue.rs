//! Requests waiting for a lease of the object's key: first come, first
//! served.
//!
//! When a lease is released or lapses, the key object offers the freed
//! capacity to the waiters in arrival order. A waiter that still cannot be
//! served blocks those behind it, so nobody overtakes. A waiter that gives
//! up removes itself.

use std::collections::VecDeque;

#[derive(Debug)]
struct Waiter<P> {
    id: u64,
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

    /// Adds a waiter and returns its id.
    pub fn push(&mut self, payload: P) -> u64 {
        self.next_id += 1;
        self.waiters.push_back(Waiter {
            id: self.next_id,
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

    pub fn len(&self) -> usize {
        self.waiters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// Offers capacity in arrival order: `serve` returns `Some(answer)` for
    /// a waiter it could serve (granted, or refused for good) and `None`
    /// when the waiter must keep waiting, which leaves it and everyone
    /// behind it in the queue. Served waiters leave the queue and come back
    /// with their answers.
    pub fn serve<A>(&mut self, mut serve: impl FnMut(&P) -> Option<A>) -> Vec<(P, A)> {
        let mut served = Vec::new();
        while let Some(waiter) = self.waiters.pop_front() {
            match serve(&waiter.payload) {
                Some(answer) => served.push((waiter.payload, answer)),
                None => {
                    self.waiters.push_front(waiter);
                    break;
                }
            }
        }
        served
    }
}

#[cfg(test)]
mod tests {
    use super::Queue;

    #[test]
    fn serves_in_arrival_order_without_overtaking() {
        let mut queue = Queue::new();
        for name in ["w1", "w2", "w3"] {
            queue.push(name);
        }
        // Room for one: the second waiter keeps waiting, and so does the
        // third, which would be served (refused for good) were it reached,
        // but must not overtake it.
        let mut capacity = 1;
        let served = queue.serve(|name: &&str| match (*name, capacity) {
            (_, 1) => {
                capacity -= 1;
                Some(format!("granted {name}"))
            }
            ("w3", _) => Some("refused for good".to_string()),
            _ => None,
        });
        assert_eq!(served, [("w1", "granted w1".to_string())]);
        assert_eq!(queue.len(), 2);
        let served = queue.serve(|name| Some(*name));
        let order: Vec<&str> = served.iter().map(|(name, _)| *name).collect();
        assert_eq!(order, ["w2", "w3"]);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_waiter_that_gives_up_leaves() {
        let mut queue = Queue::new();
        let first = queue.push(1);
        let second = queue.push(2);
        assert!(queue.remove(first));
        assert!(!queue.remove(first));
        let served = queue.serve(|n| Some(*n));
        assert_eq!(served, [(2, 2)]);
        assert!(!queue.remove(second), "already served");
    }
}
