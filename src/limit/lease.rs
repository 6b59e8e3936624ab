//! Leases: at most N holders at a time, each for a limited time (a
//! concurrency limit, or with N = 1 a lock), every lease with an expiry so a
//! holder that dies cannot keep its slot. Each new lease gets a fence larger
//! than any the key gave before; only its id (a secret) renews, releases or
//! re-enters it. Fences, holders and limits: docs/algorithms.md ("How it
//! works": leases).

use crate::input::scan::{need, FromScan, Malformed, Read, Scan};

/// Fence numbers per millisecond of the clock.
pub const FENCES_PER_MS: u64 = 1000;

crate::wire! {
    /// One lease, as stored and reported.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Lease {
        pub id: String,
        pub owner: Option<String>,
        pub fence: u64,
        /// When the lease lapses, ms since the epoch.
        pub expires_ms: u64,
        pub holds: u32,
    }
}

/// The answer to an acquire that was tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub granted: bool,
    /// The lease, when granted.
    pub lease: Option<Lease>,
    /// Live leases after this call.
    pub in_flight: u32,
    /// 0 when granted; otherwise ms until the first lease lapses (a release
    /// may come sooner).
    pub retry_after_ms: u64,
}

/// Why an acquire was not even tried. On the wire tagged inside its
/// object by `kind`: `{"kind":"limit_mismatch","held":3}`,
/// `{"kind":"no_such_lease"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseError {
    /// The key's leases are held under another limit.
    LimitMismatch { held: u32 },
    /// The lease to re-enter is unknown, lapsed or released.
    NoSuchLease,
}

impl crate::json::Write for LeaseError {
    fn write(&self, out: &mut crate::json::Text) {
        let mut fields = out.object();
        match self {
            LeaseError::LimitMismatch { held } => {
                fields.field("kind", "limit_mismatch");
                fields.field("held", held);
            }
            LeaseError::NoSuchLease => fields.field("kind", "no_such_lease"),
        }
        fields.end();
    }
}

impl FromScan for LeaseError {
    fn from_scan(scan: &mut Scan<'_>) -> Read<LeaseError> {
        let (mut kind, mut held) = (None, None);
        let mut object = scan.object()?;
        while let Some(field) = object.key(scan)? {
            match &*field {
                "kind" => kind = Some(scan.str()?),
                "held" => held = Option::<u32>::from_scan(scan)?,
                _ => scan.skip()?,
            }
        }
        match (need(kind)?.as_ref(), held) {
            ("limit_mismatch", Some(held)) => Ok(LeaseError::LimitMismatch { held }),
            ("no_such_lease", _) => Ok(LeaseError::NoSuchLease),
            _ => Err(Malformed),
        }
    }
}

/// What an acquire asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquire<'a> {
    pub limit: u32,
    pub ttl_ms: u64,
    /// A label for operators.
    pub owner: Option<&'a str>,
    /// The id of a live lease to take one more hold on; knowing it is the
    /// proof of holding it.
    pub reenter: Option<&'a str>,
    /// Whether the limit held stands against a different one (see the
    /// module documentation).
    pub strict_limit: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseTable {
    /// Leases granted and not released. Lapsed ones stay until
    /// [`expire`](Self::expire) returns them, so that their rows are deleted
    /// and the fence floor kept when they go; they count for nothing.
    leases: Vec<Lease>,
    /// The largest fence granted, or restored from storage.
    last_fence: u64,
    /// The limit the live leases were granted under; `None` when none are
    /// held or storage did not say (rows from before limits were stored).
    limit: Option<u32>,
    /// Whether storage holds a floor row for this key.
    floor_stored: bool,
}

impl LeaseTable {
    pub fn new() -> LeaseTable {
        LeaseTable::default()
    }

    /// Takes a slot if fewer than `ask.limit` are live, or one more hold on
    /// the live lease `ask.reenter`. `new_id` names a new lease; it is only
    /// called when one is made.
    pub fn acquire(
        &mut self,
        now_ms: u64,
        ask: &Acquire<'_>,
        new_id: impl FnOnce() -> String,
    ) -> Result<Grant, LeaseError> {
        let live = self.in_flight_at(now_ms);
        if live == 0 {
            self.limit = None;
        }
        if let Some(held) = self
            .limit
            .filter(|&held| ask.strict_limit && held != ask.limit)
        {
            return Err(LeaseError::LimitMismatch { held });
        }
        let expires_ms = now_ms.saturating_add(ask.ttl_ms);
        if let Some(id) = ask.reenter {
            let held = self
                .leases
                .iter_mut()
                .find(|l| l.id == id && l.expires_ms > now_ms)
                .ok_or(LeaseError::NoSuchLease)?;
            held.holds = held.holds.saturating_add(1);
            held.expires_ms = held.expires_ms.max(expires_ms);
            let lease = held.clone();
            self.limit = Some(ask.limit);
            return Ok(self.granted(lease, now_ms));
        }
        if live >= ask.limit {
            let first_lapse = self
                .live(now_ms)
                .map(|l| l.expires_ms)
                .min()
                .unwrap_or(now_ms);
            return Ok(Grant {
                granted: false,
                lease: None,
                in_flight: live,
                retry_after_ms: first_lapse.saturating_sub(now_ms),
            });
        }
        let fence = self
            .last_fence
            .saturating_add(1)
            .max(now_ms.saturating_mul(FENCES_PER_MS));
        self.last_fence = fence;
        self.limit = Some(ask.limit);
        let lease = Lease {
            id: new_id(),
            owner: ask.owner.map(str::to_string),
            fence,
            expires_ms,
            holds: 1,
        };
        self.leases.push(lease.clone());
        Ok(self.granted(lease, now_ms))
    }

    /// Sets a live lease to lapse at `now + ttl`, sooner than before too: a
    /// holder that knows it needs less time gives the slot back early if it
    /// dies. `None` if it is unknown or has lapsed.
    pub fn renew(&mut self, id: &str, now_ms: u64, ttl_ms: u64) -> Option<Lease> {
        let lease = self
            .leases
            .iter_mut()
            .find(|l| l.id == id && l.expires_ms > now_ms)?;
        lease.expires_ms = now_ms.saturating_add(ttl_ms);
        Some(lease.clone())
    }

    /// Drops one hold on a live lease and returns it as it now is (`holds`
    /// 0 once freed, and then it is gone); `None`, changing nothing, if it
    /// is unknown or has lapsed: only a holder knows the id.
    pub fn release(&mut self, id: &str, now_ms: u64) -> Option<Lease> {
        let i = self
            .leases
            .iter()
            .position(|l| l.id == id && l.expires_ms > now_ms)?;
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

    /// Puts back a lease read from storage, with the limit its row names
    /// (`None` for rows written before limits were stored).
    pub fn restore(&mut self, lease: Lease, limit: Option<u32>) {
        self.last_fence = self.last_fence.max(lease.fence);
        self.limit = limit.or(self.limit);
        self.leases.retain(|l| l.id != lease.id);
        self.leases.push(lease);
    }

    /// Puts back a floor row read from storage.
    pub fn restore_floor(&mut self, fence: u64) {
        self.last_fence = self.last_fence.max(fence);
        self.floor_stored = true;
    }

    /// Whether the last fence must still be remembered at `now_ms`: a table
    /// that had forgotten it would grant `now_ms × 1000` (at least 1),
    /// which is not above it.
    pub fn needs_floor(&self, now_ms: u64) -> bool {
        self.last_fence >= now_ms.saturating_mul(FENCES_PER_MS).max(1)
    }

    /// The last fence granted.
    pub fn last_fence(&self) -> u64 {
        self.last_fence
    }

    /// The limit the live leases hold, if known.
    pub fn limit(&self) -> Option<u32> {
        self.limit
    }

    /// Whether storage holds a floor row.
    pub fn floor_stored(&self) -> bool {
        self.floor_stored
    }

    /// Records that the floor row was written (`true`) or deleted.
    pub fn set_floor_stored(&mut self, stored: bool) {
        self.floor_stored = stored;
    }

    /// Live leases at `now_ms`.
    pub fn in_flight_at(&self, now_ms: u64) -> u32 {
        u32::try_from(self.live(now_ms).count()).unwrap_or(u32::MAX)
    }

    /// Every lease not yet expired by [`expire`](Self::expire), lapsed or not.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// Whether the table can be forgotten at `now_ms`: no lease is left and
    /// the last fence is needed no longer.
    pub fn is_idle(&self, now_ms: u64) -> bool {
        self.leases.is_empty() && !self.needs_floor(now_ms)
    }

    /// When the table next needs a sweep: when a lease lapses, and when the
    /// last fence stops being needed if it is kept for itself (no lease
    /// left) or in a floor row.
    pub fn next_expiry(&self) -> Option<u64> {
        let lapse = self.leases.iter().map(|l| l.expires_ms).min();
        let floor = (self.last_fence > 0 && (self.leases.is_empty() || self.floor_stored))
            .then(|| (self.last_fence / FENCES_PER_MS).saturating_add(1));
        lapse.into_iter().chain(floor).min()
    }

    /// Forgets what is needed no longer at `now_ms`: the last fence once no
    /// lease is left and no repeat is possible. Returns whether a floor row
    /// is to be deleted (it is then counted as gone).
    pub fn forget_unneeded(&mut self, now_ms: u64) -> bool {
        if self.needs_floor(now_ms) {
            return false;
        }
        if self.leases.is_empty() {
            self.last_fence = 0;
            self.limit = None;
        }
        std::mem::replace(&mut self.floor_stored, false)
    }

    fn live(&self, now_ms: u64) -> impl Iterator<Item = &Lease> {
        self.leases.iter().filter(move |l| l.expires_ms > now_ms)
    }

    fn granted(&self, lease: Lease, now_ms: u64) -> Grant {
        Grant {
            granted: true,
            lease: Some(lease),
            in_flight: self.in_flight_at(now_ms),
            retry_after_ms: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_error_reads_back_what_it_writes() {
        for error in [
            LeaseError::LimitMismatch { held: 3 },
            LeaseError::NoSuchLease,
        ] {
            let wire = crate::json::to_string(&error);
            assert_eq!(LeaseError::from_json(&wire).unwrap(), error);
        }
        assert_eq!(
            crate::json::to_string(&LeaseError::LimitMismatch { held: 3 }),
            r#"{"kind":"limit_mismatch","held":3}"#
        );
        assert_eq!(
            crate::json::to_string(&LeaseError::NoSuchLease),
            r#"{"kind":"no_such_lease"}"#
        );
        assert_eq!(
            LeaseError::from_json(r#"{"held":2,"kind":"limit_mismatch"}"#).unwrap(),
            LeaseError::LimitMismatch { held: 2 }
        );
        for bad in [
            r#"{"kind":"limit_mismatch"}"#,
            r#"{"kind":"other"}"#,
            r#"{"held":2}"#,
            r#""no_such_lease""#,
        ] {
            assert!(LeaseError::from_json(bad).is_err(), "{bad}");
        }
    }

    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("lease-{n}")
        }
    }

    fn ask(limit: u32, ttl_ms: u64) -> Acquire<'static> {
        Acquire {
            limit,
            ttl_ms,
            owner: None,
            reenter: None,
            strict_limit: true,
        }
    }

    fn take(
        table: &mut LeaseTable,
        now: u64,
        ask: Acquire<'_>,
        id: impl FnMut() -> String,
    ) -> Grant {
        table.acquire(now, &ask, id).unwrap()
    }

    #[test]
    fn at_most_limit_at_once_and_a_release_frees_a_slot() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let a = take(&mut table, 1000, ask(2, 30_000), &mut id);
        let b = take(&mut table, 1000, ask(2, 30_000), &mut id);
        assert!(a.granted && b.granted);
        let refused = take(&mut table, 1500, ask(2, 30_000), &mut id);
        assert!(!refused.granted);
        assert_eq!((refused.in_flight, refused.retry_after_ms), (2, 29_500));
        let a_id = a.lease.unwrap().id;
        assert_eq!(table.release(&a_id, 1600).unwrap().holds, 0);
        assert!(table.release(&a_id, 1600).is_none(), "released twice");
        assert!(take(&mut table, 1700, ask(2, 30_000), &mut id).granted);
    }

    #[test]
    fn lapsed_leases_are_reclaimed_and_renewal_keeps_one_alive() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let kept = take(&mut table, 0, ask(1, 1000), &mut id).lease.unwrap();
        assert_eq!(table.renew(&kept.id, 900, 1000).unwrap().expires_ms, 1900);
        assert_eq!(
            table.renew(&kept.id, 900, 30_000).unwrap().expires_ms,
            30_900
        );
        assert_eq!(
            table.renew(&kept.id, 900, 1000).unwrap().expires_ms,
            1900,
            "a renewal sets now + ttl, shorter too"
        );
        assert!(!take(&mut table, 1500, ask(1, 1000), &mut id).granted);
        assert_eq!(table.next_expiry(), Some(1900));
        assert!(
            table.renew(&kept.id, 1900, 1000).is_none(),
            "too late to renew"
        );
        assert!(table.release(&kept.id, 1900).is_none(), "and to release");
        assert!(take(&mut table, 1900, ask(1, 1000), &mut id).granted);
        let lapsed = table.expire(1900);
        assert_eq!(lapsed.len(), 1, "the lapsed lease is handed over once");
        assert_eq!(lapsed[0].id, kept.id);
    }

    #[test]
    fn only_the_lease_id_reenters_and_an_owner_name_grants_nothing() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let named = Acquire {
            owner: Some("worker-a"),
            ..ask(1, 1000)
        };
        let first = take(&mut table, 0, named, &mut id).lease.unwrap();
        assert!(
            !take(&mut table, 100, named, &mut id).granted,
            "a name is no proof"
        );
        let again = Acquire {
            reenter: Some(&first.id),
            ..ask(1, 1000)
        };
        let held = take(&mut table, 500, again, &mut id).lease.unwrap();
        assert_eq!(
            (held.id.as_str(), held.fence, held.holds, held.expires_ms),
            (first.id.as_str(), first.fence, 2, 1500)
        );
        assert_eq!(table.release(&first.id, 700).unwrap().holds, 1);
        assert!(
            !take(&mut table, 700, ask(1, 1000), &mut id).granted,
            "still held once"
        );
        assert_eq!(table.release(&first.id, 800).unwrap().holds, 0);
        assert_eq!(
            table.acquire(900, &again, &mut id),
            Err(LeaseError::NoSuchLease),
            "a released lease cannot be re-entered"
        );
        assert!(take(&mut table, 900, ask(1, 1000), &mut id).granted);
    }

    #[test]
    fn a_strict_limit_stands_while_leases_are_held() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let lock = take(&mut table, 0, ask(1, 1000), &mut id).lease.unwrap();
        assert_eq!(
            table.acquire(10, &ask(2, 1000), &mut id),
            Err(LeaseError::LimitMismatch { held: 1 })
        );
        let reenter = Acquire {
            reenter: Some(&lock.id),
            ..ask(2, 1000)
        };
        assert_eq!(
            table.acquire(10, &reenter, &mut id),
            Err(LeaseError::LimitMismatch { held: 1 })
        );
        let config = Acquire {
            strict_limit: false,
            ..ask(2, 1000)
        };
        assert!(
            take(&mut table, 10, config, &mut id).granted,
            "a config change applies"
        );
        table.expire(2000);
        assert!(
            take(&mut table, 2000, ask(3, 1000), &mut id).granted,
            "free once none is held"
        );
    }

    #[test]
    fn fences_strictly_increase_across_restores_bursts_and_a_still_clock() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let mut fences = Vec::new();
        for _ in 0..2500 {
            let lease = take(&mut table, 5, ask(1, 1000), &mut id).lease.unwrap();
            table.release(&lease.id, 5);
            fences.push(lease.fence);
        }
        assert_eq!(fences[0], 5000);
        assert!(
            table.needs_floor(7),
            "2 500 grants ran into the 7th millisecond"
        );
        assert!(!table.needs_floor(8));
        let mut restored = LeaseTable::new();
        restored.restore_floor(table.last_fence());
        fences.push(
            take(&mut restored, 6, ask(1, 1000), &mut id)
                .lease
                .unwrap()
                .fence,
        );
        let mut forgotten = LeaseTable::new();
        fences.push(
            take(&mut forgotten, 8, ask(1, 1000), &mut id)
                .lease
                .unwrap()
                .fence,
        );
        assert!(fences.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn the_last_fence_is_forgotten_only_once_no_repeat_is_possible() {
        let mut table = LeaseTable::new();
        let mut id = ids();
        let lease = take(&mut table, 5, ask(1, 1000), &mut id).lease.unwrap();
        table.release(&lease.id, 5);
        table.set_floor_stored(true);
        assert_eq!(table.next_expiry(), Some(6));
        assert!(!table.is_idle(5));
        assert!(!table.forget_unneeded(5));
        assert!(table.is_idle(6));
        assert!(table.forget_unneeded(6), "the floor row goes");
        assert_eq!((table.last_fence(), table.next_expiry()), (0, None));
    }
}
