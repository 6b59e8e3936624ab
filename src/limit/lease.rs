//! Leases: at most N holders at a time, each for a limited time.
//!
//! One mechanism serves two needs: a concurrency limit ("at most 10 callers
//! run this at once") and a lock (a lease with limit 1). Every lease has an
//! expiry, so a holder that dies cannot keep its slot; the container's alarm
//! reclaims it.
//!
//! **Fences.** Every new lease gets a fence number that is larger than any
//! the key has given before, so a storage layer can refuse writes from a
//! holder whose lease has expired and been granted again. A fence is
//! `max(last fence + 1, now_ms × 1000)`: the clock part keeps fences growing
//! even after the key's state was swept away and its storage freed, as long
//! as the clock does not step back by more than the key was idle.
//!
//! **Owners.** A lease may name an owner; the same owner acquiring again
//! gets the same lease (and fence) with one more hold, and the lease frees
//! when the holds return to zero or it expires.

use serde::{Deserialize, Serialize};

/// One lease, as stored and reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    pub id: String,
    pub owner: Option<String>,
    pub fence: u64,
    /// When the lease lapses, ms since the epoch.
    pub expires_ms: u64,
    pub holds: u32,
}

/// The answer to an acquire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub granted: bool,
    /// The lease, when granted.
    pub lease: Option<Lease>,
    /// Leases held after this call.
    pub in_flight: u32,
    /// 0 when granted; otherwise ms until the first lease lapses (a release
    /// may come sooner).
    pub retry_after_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseTable {
    leases: Vec<Lease>,
    last_fence: u64,
}

impl LeaseTable {
    pub fn new() -> LeaseTable {
        LeaseTable::default()
    }

    /// Takes a slot if fewer than `limit` are held, or another hold on the
    /// lease `owner` already has. `new_id` names a new lease; it is only
    /// called when one is made.
    pub fn acquire(
        &mut self,
        now_ms: u64,
        limit: u32,
        ttl_ms: u64,
        owner: Option<&str>,
        new_id: impl FnOnce() -> String,
    ) -> Grant {
        self.expire(now_ms);
        let expires_ms = now_ms.saturating_add(ttl_ms);
        if let Some(owner) = owner {
            if let Some(held) = self
                .leases
                .iter_mut()
                .find(|l| l.owner.as_deref() == Some(owner))
            {
                held.holds = held.holds.saturating_add(1);
                held.expires_ms = held.expires_ms.max(expires_ms);
                let lease = held.clone();
                return self.granted(lease);
            }
        }
        if self.leases.len() >= limit as usize {
            let first_lapse = self
                .leases
                .iter()
                .map(|l| l.expires_ms)
                .min()
                .unwrap_or(now_ms);
            return Grant {
                granted: false,
                lease: None,
                in_flight: self.in_flight(),
                retry_after_ms: first_lapse.saturating_sub(now_ms),
            };
        }
        let fence = (self.last_fence + 1).max(now_ms.saturating_mul(1000));
        self.last_fence = fence;
        let lease = Lease {
            id: new_id(),
            owner: owner.map(str::to_string),
            fence,
            expires_ms,
            holds: 1,
        };
        self.leases.push(lease.clone());
        self.granted(lease)
    }

    /// Extends a live lease to `now + ttl`; `None` if it is unknown or has
    /// lapsed.
    pub fn renew(&mut self, id: &str, now_ms: u64, ttl_ms: u64) -> Option<Lease> {
        self.expire(now_ms);
        let lease = self.leases.iter_mut().find(|l| l.id == id)?;
        lease.expires_ms = lease.expires_ms.max(now_ms.saturating_add(ttl_ms));
        Some(lease.clone())
    }

    /// Drops one hold on a live lease and returns it as it now is (`holds`
    /// 0 once freed); `None`, changing nothing, if it is unknown or has
    /// lapsed, so nobody can release someone else's lease.
    pub fn release(&mut self, id: &str, now_ms: u64) -> Option<Lease> {
        self.expire(now_ms);
        let i = self.leases.iter().position(|l| l.id == id)?;
        let lease = &mut self.leases[i];
        lease.holds = lease.holds.saturating_sub(1);
        let after = lease.clone();
        if after.holds == 0 {
            self.leases.remove(i);
        }
        Some(after)
    }

    /// Drops lapsed leases (at exactly `expires_ms` a lease has lapsed) and
    /// returns them.
    pub fn expire(&mut self, now_ms: u64) -> Vec<Lease> {
        let (lapsed, live): (Vec<Lease>, Vec<Lease>) = std::mem::take(&mut self.leases)
            .into_iter()
            .partition(|l| l.expires_ms <= now_ms);
        self.leases = live;
        lapsed
    }

    /// Puts back a lease read from storage.
    pub fn restore(&mut self, lease: Lease) {
        self.last_fence = self.last_fence.max(lease.fence);
        self.leases.retain(|l| l.id != lease.id);
        self.leases.push(lease);
    }

    pub fn in_flight(&self) -> u32 {
        u32::try_from(self.leases.len()).unwrap_or(u32::MAX)
    }

    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    pub fn is_empty(&self) -> bool {
        self.leases.is_empty()
    }

    /// When the next lease lapses.
    pub fn next_expiry(&self) -> Option<u64> {
        self.leases.iter().map(|l| l.expires_ms).min()
    }

    fn granted(&self, lease: Lease) -> Grant {
        Grant {
            granted: true,
            lease: Some(lease),
            in_flight: self.in_flight(),
            retry_after_ms: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("lease-{n}")
        }
    }

    #[test]
    fn at_most_limit_at_once_and_a_release_frees_a_slot() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let a = table.acquire(1000, 2, 30_000, None, &mut id);
        let b = table.acquire(1000, 2, 30_000, None, &mut id);
        assert!(a.granted && b.granted);
        let refused = table.acquire(1500, 2, 30_000, None, &mut id);
        assert!(!refused.granted);
        assert_eq!((refused.in_flight, refused.retry_after_ms), (2, 29_500));
        let a_id = a.lease.unwrap().id;
        assert_eq!(table.release(&a_id, 1600).unwrap().holds, 0);
        assert!(table.release(&a_id, 1600).is_none(), "released twice");
        assert!(table.acquire(1700, 2, 30_000, None, &mut id).granted);
    }

    #[test]
    fn lapsed_leases_are_reclaimed_and_renewal_keeps_one_alive() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let kept = table.acquire(0, 1, 1000, None, &mut id).lease.unwrap();
        assert_eq!(table.renew(&kept.id, 900, 1000).unwrap().expires_ms, 1900);
        assert!(!table.acquire(1500, 1, 1000, None, &mut id).granted);
        assert_eq!(table.next_expiry(), Some(1900));
        assert_eq!(table.expire(1900).len(), 1);
        assert!(
            table.renew(&kept.id, 1900, 1000).is_none(),
            "too late to renew"
        );
        assert!(table.release(&kept.id, 1900).is_none(), "and to release");
        assert!(table.acquire(1900, 1, 1000, None, &mut id).granted);
    }

    #[test]
    fn an_owner_reacquires_its_own_lease() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let first = table
            .acquire(0, 1, 1000, Some("worker-a"), &mut id)
            .lease
            .unwrap();
        let again = table
            .acquire(500, 1, 1000, Some("worker-a"), &mut id)
            .lease
            .unwrap();
        assert_eq!(
            (
                again.id.as_str(),
                again.fence,
                again.holds,
                again.expires_ms
            ),
            (first.id.as_str(), first.fence, 2, 1500)
        );
        assert!(
            !table
                .acquire(600, 1, 1000, Some("worker-b"), &mut id)
                .granted
        );
        assert_eq!(table.release(&first.id, 700).unwrap().holds, 1);
        assert!(
            !table.acquire(700, 1, 1000, None, &mut id).granted,
            "still held once"
        );
        assert_eq!(table.release(&first.id, 800).unwrap().holds, 0);
        assert!(
            table
                .acquire(800, 1, 1000, Some("worker-b"), &mut id)
                .granted
        );
    }

    #[test]
    fn fences_strictly_increase_even_after_a_restart_or_a_sweep() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let mut fences = Vec::new();
        for t in [5, 5, 5] {
            let lease = table.acquire(t, 10, 1000, None, &mut id).lease.unwrap();
            fences.push(lease.fence);
        }
        let mut restored = LeaseTable::new();
        for lease in table.leases() {
            restored.restore(lease.clone());
        }
        fences.push(
            restored
                .acquire(5, 10, 1000, None, &mut id)
                .lease
                .unwrap()
                .fence,
        );
        let mut swept = LeaseTable::new();
        fences.push(
            swept
                .acquire(2000, 10, 1000, None, &mut id)
                .lease
                .unwrap()
                .fence,
        );
        assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
        assert_eq!(fences[0], 5000);
    }
}
