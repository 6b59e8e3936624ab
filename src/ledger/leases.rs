//! A key's leases under a concurrency limit: what a request asks, what
//! the outcome reports, and renewing, releasing and restoring them.

use super::{Expired, LeaseOutcome, Ledger, Write};
use crate::limit::lease::{Acquire, Grant, Lease, LeaseError, LeaseTable};

crate::wire! {
    /// A request for a lease under a concurrency limit.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct LeaseAsk {
        /// How the limit is named in headers and refusals.
        pub name: String,
        pub limit: u32,
        pub ttl_ms: u64,
        /// A label for operators; it grants nothing.
        pub owner: Option<String>,
        /// The id of a live lease to take one more hold on (re-entry).
        pub reenter: Option<String> = None,
        /// Whether a limit the key's leases are held under stands against this
        /// one: the caller chose it (the decision API), not the operator.
        pub strict_limit: bool => Default::default(),
        /// The id a new lease gets; chosen by the caller (randomly) so the
        /// ledger stays deterministic.
        pub new_id: String,
    }
}

impl LeaseAsk {
    pub(super) fn acquire(&self) -> Acquire<'_> {
        Acquire {
            limit: self.limit,
            ttl_ms: self.ttl_ms,
            owner: self.owner.as_deref(),
            reenter: self.reenter.as_deref(),
            strict_limit: self.strict_limit,
        }
    }
}

impl Ledger {
    /// Extends a live lease.
    pub fn renew(&mut self, id: &str, ttl_ms: u64, now_ms: u64) -> (Option<Lease>, Vec<Write>) {
        let renewed = self.leases.renew(id, now_ms, ttl_ms);
        let writes = renewed
            .iter()
            .map(|lease| Write::Lease {
                lease: lease.clone(),
                limit: self.leases.limit(),
            })
            .collect();
        (renewed, writes)
    }

    /// Drops one hold on a live lease; `None`, changing nothing, for an
    /// unknown or lapsed one.
    pub fn release(&mut self, id: &str, now_ms: u64) -> (Option<Lease>, Vec<Write>, Vec<Expired>) {
        let released = self.leases.release(id, now_ms);
        let (mut writes, mut expired) = (Vec::new(), Vec::new());
        match &released {
            Some(lease) if lease.holds == 0 => {
                expired.push(self.lease_gone(id.to_string(), now_ms));
            }
            Some(lease) => writes.push(Write::Lease {
                lease: lease.clone(),
                limit: self.leases.limit(),
            }),
            None => {}
        }
        self.forget_idle_leases(now_ms);
        (released, writes, expired)
    }

    /// The leases held.
    pub fn leases(&self) -> &[Lease] {
        self.leases.leases()
    }

    /// Restores a lease row and the limit it names (`None` in rows written
    /// before limits were stored).
    pub fn restore_lease(&mut self, lease: Lease, limit: Option<u32>) {
        self.leases.restore(lease, limit);
    }

    /// Restores a fence floor row.
    pub fn restore_floor(&mut self, fence: u64) {
        self.leases.restore_floor(fence);
    }

    /// Forgets the lease table once nothing in it is needed: no lease, and
    /// no fence a later lease could repeat, in memory or in a floor row.
    /// Its last fence would otherwise ask for a sweep long past (the keyed
    /// ledger forgot it with the empty key).
    pub(super) fn forget_idle_leases(&mut self, now_ms: u64) {
        if self.leases.is_idle(now_ms) && !self.leases.floor_stored() {
            self.leases = LeaseTable::default();
        }
    }

    /// Removes lease `id`'s row, keeping the last fence as a floor row if a
    /// repeat is still possible.
    pub(super) fn lease_gone(&mut self, id: String, now_ms: u64) -> Expired {
        let floor = self
            .leases
            .needs_floor(now_ms)
            .then(|| self.leases.last_fence());
        if floor.is_some() {
            self.leases.set_floor_stored(true);
        }
        Expired::Lease { id, floor }
    }
}

/// The lease part of an outcome: the grant if one was tried, otherwise the
/// table as it stands.
pub(super) fn lease_report(
    table: &LeaseTable,
    ask: &LeaseAsk,
    grant: Option<Result<Grant, LeaseError>>,
    now_ms: u64,
) -> LeaseOutcome {
    let (lease, refused, retry_after_ms, error) = match grant {
        Some(Ok(grant)) => (grant.lease, !grant.granted, grant.retry_after_ms, None),
        Some(Err(error)) => (None, false, 0, Some(error)),
        None => (None, false, 0, None),
    };
    LeaseOutcome {
        name: ask.name.clone(),
        limit: ask.limit,
        in_flight: table.in_flight_at(now_ms),
        lease,
        refused,
        retry_after_ms,
        error,
    }
}
