//! A sorted `Vec` keyed by place or session id: the shard's offers and
//! sessions.

/// Entries sorted by key. A shard's offers and sessions are at most its
/// places and their keys mostly come in order (places are handed out in
/// order), so a sorted `Vec` does what a `BTreeMap` would, with a fraction
/// of its code in the wasm.
#[derive(Debug, Clone)]
pub(super) struct Keyed<T>(Vec<(u64, T)>);

impl<T> Keyed<T> {
    pub(super) fn new() -> Keyed<T> {
        Keyed(Vec::new())
    }

    pub(super) fn find(&self, key: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&key, |(k, _)| *k)
    }

    pub(super) fn get(&self, key: u64) -> Option<&T> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    pub(super) fn get_mut(&mut self, key: u64) -> Option<&mut T> {
        self.find(key).ok().map(|i| &mut self.0[i].1)
    }

    pub(super) fn insert(&mut self, key: u64, value: T) {
        match self.find(key) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    pub(super) fn remove(&mut self, key: u64) -> Option<T> {
        self.find(key).ok().map(|i| self.0.remove(i).1)
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (u64, &mut T)> {
        self.0.iter_mut().map(|(key, value)| (*key, value))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &T> {
        self.0.iter().map(|(_, value)| value)
    }

    /// Keeps the entries `keep` says to keep, in order.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(u64, &T) -> bool) {
        self.0.retain(|(key, value)| keep(*key, value));
    }
}
