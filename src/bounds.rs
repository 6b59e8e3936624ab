//! The bounds on what callers and operators may ask for, each written once
//! and read by the config (`src/config/`), the decision and admin APIs
//! (`src/http/`) and the ledger, so that a rule and an API call asking for
//! the same thing meet the same bound and the same message.
//!
//! The algorithms' own bounds (`MAX_LIMIT`, `MAX_WINDOW_MS`, GCRA's
//! `MAX_BURST`, `MAX_COUNT` and `MAX_PERIOD_MS`, split's `MAX_PARTS`) stay
//! beside the algorithms in `src/limit/`, whose constructors enforce them.

/// A day in milliseconds, the unit the longer bounds are written in.
pub const DAY_MS: u64 = 86_400_000;

/// The largest API body read; anything larger is refused with 413 before it
/// is parsed, so a caller cannot make an isolate buffer megabytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The longest key kept verbatim: a key names a Durable Object and is
/// stored in its rows. A longer derived key is replaced by its SHA-256
/// digest; a longer API key is refused.
pub const MAX_KEY_BYTES: usize = 512;

/// The longest name of a rule, tier or policy: names travel in RateLimit
/// headers and problem bodies, where a short name stays readable.
pub const MAX_NAME_BYTES: usize = 64;

/// The most policies one tier or one API call checks at once: each is a
/// limiter the key's object runs on every request, and real layered
/// limits (per second, per minute, per day) need a handful.
pub const MAX_POLICIES: usize = 8;

/// The most layers one request is asked about (a rule's own and its
/// `also` layers, or a decision-API call's `layers`): each is one more
/// object call on the request's path, and a per-user limit under a per-IP
/// one under a global ceiling is three.
pub const MAX_LAYERS: usize = 4;

/// The highest concurrency limit: a key's leases are held in its object's
/// memory and rows, one per holder.
pub const MAX_CONCURRENCY: u32 = 100_000;

/// How long a lease lasts when neither the rule (`lease_ttl`) nor the call
/// (`ttl_ms`) says: long enough for a slow request, short enough that a
/// crashed holder's place is free again soon.
pub const DEFAULT_LEASE_TTL_MS: u64 = 30_000;

/// The longest a lease may be asked to last in one go: a holder that needs
/// longer renews, which proves it is still alive.
pub const MAX_LEASE_TTL_MS: u64 = DAY_MS;

/// The longest ban, by rule or by an operator: a year. Longer is a block,
/// which belongs in the deny list.
pub const MAX_BAN_MS: u64 = 365 * DAY_MS;

/// The longest an override may be set for: a year and a day, so a yearly
/// plan fits.
pub const MAX_OVERRIDE_MS: u64 = 366 * DAY_MS;

/// The longest lease `owner` label or `lease_id` an API call may carry:
/// labels are for operators, and ids Sluice grants are far shorter.
pub const MAX_LEASE_LABEL_BYTES: usize = 256;

/// The longest a reservation may wait for its settle before it lapses
/// (and is kept): it holds its units all that time.
pub const MAX_RESERVATION_TTL_MS: u64 = DAY_MS;

/// The longest reservation id: Sluice's own ids are far shorter, so a
/// longer one cannot name a reservation.
pub const MAX_RESERVATION_ID_BYTES: usize = 64;

/// The longest reason an operator may give a ban, the same as an
/// override's: it is stored with the ban, shown in every refusal and listed
/// with the bans.
pub const MAX_BAN_REASON_BYTES: usize = MAX_OVERRIDE_REASON_BYTES;

/// The longest reason an operator may give an override: it is stored with
/// the override and listed with the key.
pub const MAX_OVERRIDE_REASON_BYTES: usize = 200;

/// Whether an operator's reason for an override or a rule's state fits:
/// at most [`MAX_OVERRIDE_REASON_BYTES`] and no control characters (it is
/// stored, listed, and quoted in every answer a state gives).
pub fn reason_fits(reason: &str) -> bool {
    reason.len() <= MAX_OVERRIDE_REASON_BYTES && !reason.chars().any(char::is_control)
}

/// What a reason that does not fit is told.
pub const REASON_RULE: &str = "reason is a string of at most 200 bytes and no control characters";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_fits_its_bound_and_the_rule_says_it() {
        assert!(REASON_RULE.contains(&MAX_OVERRIDE_REASON_BYTES.to_string()));
        assert!(reason_fits("") && reason_fits(&"é".repeat(100)));
        assert!(!reason_fits(&"x".repeat(MAX_OVERRIDE_REASON_BYTES + 1)));
        assert!(!reason_fits("a\nb") && !reason_fits("a\u{7f}"));
    }
}
