//! A key object's replies ([`LimiterReply`]) read from their JSON.

use super::super::{Inspection, KeyState, LimiterReply, Meter, SettleAnswer};
use super::call::wire_override;
use crate::control::Control;
use crate::input::scan::{list, need, nullable, whole, Malformed, Read, Scan};
use crate::ledger::blocks::BlockGrant;
use crate::ledger::overrides::read_whole;
use crate::ledger::{BanNotice, LeaseOutcome, Outcome, PolicyDecision, SlotReport, Spread};
use crate::limit::gcra::Throttle;
use crate::limit::lease::{Lease, LeaseError};
use crate::limit::{Decision, Retry};
use crate::sale::Second;

impl LimiterReply {
    /// The reply a key object answered, or [`Malformed`].
    pub fn from_json(text: &str) -> Read<LimiterReply> {
        whole(text, reply)
    }
}

fn reply(scan: &mut Scan) -> Read<LimiterReply> {
    let (name, object) = scan.tag()?;
    let Some(object) = object else {
        return match &*name {
            "no_such_reservation" => Ok(LimiterReply::NoSuchReservation),
            "no_such_lease" => Ok(LimiterReply::NoSuchLease),
            _ => Err(Malformed),
        };
    };
    let reply = match &*name {
        "outcome" => LimiterReply::Outcome(outcome(scan)?),
        "settled" => LimiterReply::Settled(settled(scan)?),
        "lease" => LimiterReply::Lease(lease(scan)?),
        "throttle" => LimiterReply::Throttle(throttle(scan)?),
        "key" => LimiterReply::Key(key_state(scan)?),
        "reset" => LimiterReply::Reset {
            forgot: need(one_field(scan, "forgot", |scan| scan.bool().map(Some))?)?,
        },
        "override" => LimiterReply::Override {
            previous: one_field(scan, "previous", |scan| nullable(scan, wire_override))?,
        },
        "ban" => LimiterReply::Ban {
            previous: one_field(scan, "previous", |scan| nullable(scan, ban_notice))?,
        },
        "control" => LimiterReply::Control {
            previous: one_field(scan, "previous", |scan| nullable(scan, Control::read))?,
        },
        "inspection" => LimiterReply::Inspection(inspection(scan)?),
        "no_such_reservation" if scan.null() => LimiterReply::NoSuchReservation,
        "no_such_lease" if scan.null() => LimiterReply::NoSuchLease,
        _ => return Err(Malformed),
    };
    object.close(scan)?;
    Ok(reply)
}

/// An object with one field of interest, `None` when it is absent.
fn one_field<'a, T>(
    scan: &mut Scan<'a>,
    name: &str,
    read: fn(&mut Scan<'a>) -> Read<Option<T>>,
) -> Read<Option<T>> {
    let mut value = None;
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        if *field == *name {
            value = read(scan)?;
        } else {
            scan.skip()?;
        }
    }
    Ok(value)
}

fn outcome(scan: &mut Scan) -> Read<Outcome> {
    let (mut allowed, mut policies, mut retry) = (None, None, None);
    let mut outcome = Outcome {
        allowed: false,
        pending: false,
        policies: Vec::new(),
        ban: None,
        lease: None,
        conflict: None,
        halt: None,
        retry: Retry::Never,
        spread: None,
        blocks: Vec::new(),
        whole: None,
    };
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "allowed" => allowed = Some(scan.bool()?),
            "pending" => outcome.pending = scan.bool()?,
            "policies" => policies = Some(list(scan, policy_decision)?),
            "ban" => outcome.ban = nullable(scan, ban_notice)?,
            "lease" => outcome.lease = nullable(scan, lease_outcome)?,
            "conflict" => outcome.conflict = nullable(scan, Scan::string)?,
            "halt" => outcome.halt = nullable(scan, Control::read)?,
            "retry_after_ms" => retry = Some(retry_after(scan)?),
            "spread" => outcome.spread = nullable(scan, spread)?,
            "blocks" => outcome.blocks = list(scan, block_grant)?,
            "whole" => outcome.whole = nullable(scan, read_whole)?,
            _ => scan.skip()?,
        }
    }
    outcome.allowed = need(allowed)?;
    outcome.policies = need(policies)?;
    // serde read a missing wait as `null`, never; so does this.
    outcome.retry = retry.unwrap_or(Retry::Never);
    Ok(outcome)
}

fn block_grant(scan: &mut Scan) -> Read<BlockGrant> {
    let (mut id, mut policy, mut admissions, mut granted_ms, mut until_ms) =
        (None, None, None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "id" => id = Some(scan.u64()?),
            "policy" => policy = Some(scan.string()?),
            "admissions" => admissions = Some(scan.u32()?),
            "granted_ms" => granted_ms = Some(scan.u64()?),
            "until_ms" => until_ms = Some(scan.u64()?),
            _ => scan.skip()?,
        }
    }
    Ok(BlockGrant {
        id: need(id)?,
        policy: need(policy)?,
        admissions: need(admissions)?,
        granted_ms: need(granted_ms)?,
        until_ms: need(until_ms)?,
    })
}

/// A wait in ms, `null` for never.
fn retry_after(scan: &mut Scan) -> Read<Retry> {
    nullable(scan, Scan::u64).map(Retry::from)
}

fn policy_decision(scan: &mut Scan) -> Read<PolicyDecision> {
    let (mut name, mut allowed, mut retry) = (None, None, None);
    let mut values = [None; 4];
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        let slot = match &*field {
            "name" => {
                name = Some(scan.string()?);
                continue;
            }
            "allowed" => {
                allowed = Some(scan.bool()?);
                continue;
            }
            "retry_after_ms" => {
                retry = Some(retry_after(scan)?);
                continue;
            }
            "window_ms" => 0,
            "limit" => 1,
            "remaining" => 2,
            "reset_ms" => 3,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        values[slot] = Some(scan.u64()?);
    }
    let [window_ms, limit, remaining, reset_ms] = values;
    Ok(PolicyDecision {
        name: need(name)?,
        window_ms: need(window_ms)?,
        decision: Decision {
            allowed: need(allowed)?,
            limit: need(limit)?,
            remaining: need(remaining)?,
            reset_ms: need(reset_ms)?,
            retry: retry.unwrap_or(Retry::Never),
        },
    })
}

fn ban_notice(scan: &mut Scan) -> Read<BanNotice> {
    let (mut until_ms, mut reason, mut offences, mut started) = (None, None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "until_ms" => until_ms = Some(scan.u64()?),
            "reason" => reason = Some(scan.string()?),
            "offences" => offences = Some(scan.u32()?),
            "started" => started = Some(scan.bool()?),
            _ => scan.skip()?,
        }
    }
    Ok(BanNotice {
        until_ms: need(until_ms)?,
        reason: need(reason)?,
        offences: need(offences)?,
        started: need(started)?,
    })
}

fn lease_outcome(scan: &mut Scan) -> Read<LeaseOutcome> {
    let (mut name, mut limit, mut in_flight, mut lease_held) = (None, None, None, None);
    let (mut refused, mut retry_after_ms, mut error) = (None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "name" => name = Some(scan.string()?),
            "limit" => limit = Some(scan.u32()?),
            "in_flight" => in_flight = Some(scan.u32()?),
            "lease" => lease_held = Some(nullable(scan, lease)?),
            "refused" => refused = Some(scan.bool()?),
            "retry_after_ms" => retry_after_ms = Some(scan.u64()?),
            "error" => error = nullable(scan, lease_error)?,
            _ => scan.skip()?,
        }
    }
    Ok(LeaseOutcome {
        name: need(name)?,
        limit: need(limit)?,
        in_flight: need(in_flight)?,
        lease: lease_held.flatten(),
        refused: need(refused)?,
        retry_after_ms: need(retry_after_ms)?,
        error,
    })
}

/// A lease error, tagged inside its object by `kind`.
fn lease_error(scan: &mut Scan) -> Read<LeaseError> {
    let (mut kind, mut held) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "kind" => kind = Some(scan.str()?),
            "held" => held = nullable(scan, Scan::u32)?,
            _ => scan.skip()?,
        }
    }
    match (need(kind)?.as_ref(), held) {
        ("limit_mismatch", Some(held)) => Ok(LeaseError::LimitMismatch { held }),
        ("no_such_lease", _) => Ok(LeaseError::NoSuchLease),
        _ => Err(Malformed),
    }
}

fn lease(scan: &mut Scan) -> Read<Lease> {
    let (mut id, mut owner, mut fence, mut expires_ms, mut holds) = (None, None, None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "id" => id = Some(scan.string()?),
            "owner" => owner = nullable(scan, Scan::string)?,
            "fence" => fence = Some(scan.u64()?),
            "expires_ms" => expires_ms = Some(scan.u64()?),
            "holds" => holds = Some(scan.u32()?),
            _ => scan.skip()?,
        }
    }
    Ok(Lease {
        id: need(id)?,
        owner,
        fence: need(fence)?,
        expires_ms: need(expires_ms)?,
        holds: need(holds)?,
    })
}

fn spread(scan: &mut Scan) -> Read<Spread> {
    let (mut earliest, mut next) = (None, Vec::new());
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "earliest_ms" => earliest = Some(scan.u64()?),
            "next_ms" => next = list(scan, Scan::u64)?,
            _ => scan.skip()?,
        }
    }
    Ok(Spread {
        earliest: need(earliest)?,
        next,
    })
}

fn settled(scan: &mut Scan) -> Read<SettleAnswer> {
    let (mut kept, mut repeated) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "kept" => kept = Some(scan.bool()?),
            "repeated" => repeated = Some(scan.bool()?),
            _ => scan.skip()?,
        }
    }
    Ok(SettleAnswer {
        kept: need(kept)?,
        repeated: need(repeated)?,
    })
}

fn throttle(scan: &mut Scan) -> Read<Throttle> {
    let (mut limited, mut retry_after_ms, mut retry_after_s) = (None, None, None);
    let mut values = [None; 4];
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        let slot = match &*field {
            "limited" => {
                limited = Some(scan.bool()?);
                continue;
            }
            "retry_after_ms" => {
                retry_after_ms = Some(scan.i64()?);
                continue;
            }
            "retry_after_s" => {
                retry_after_s = Some(scan.i64()?);
                continue;
            }
            "limit" => 0,
            "remaining" => 1,
            "reset_after_ms" => 2,
            "reset_after_s" => 3,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        values[slot] = Some(scan.u64()?);
    }
    let [limit, remaining, reset_after_ms, reset_after_s] = values;
    Ok(Throttle {
        limited: need(limited)?,
        limit: need(limit)?,
        remaining: need(remaining)?,
        retry_after_ms: need(retry_after_ms)?,
        reset_after_ms: need(reset_after_ms)?,
        retry_after_s: need(retry_after_s)?,
        reset_after_s: need(reset_after_s)?,
    })
}

fn key_state(scan: &mut Scan) -> Read<KeyState> {
    let (mut slots, mut leases) = (None, None);
    let mut state = KeyState {
        slots: Vec::new(),
        ban: None,
        leases: Vec::new(),
        overridden: None,
        control: None,
        seconds: Vec::new(),
    };
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "slots" => slots = Some(list(scan, slot_report)?),
            "ban" => state.ban = nullable(scan, ban_notice)?,
            "leases" => leases = Some(list(scan, lease)?),
            "override" => state.overridden = nullable(scan, wire_override)?,
            "control" => state.control = nullable(scan, Control::read)?,
            "seconds" => state.seconds = list(scan, second)?,
            _ => scan.skip()?,
        }
    }
    state.slots = need(slots)?;
    state.leases = need(leases)?;
    Ok(state)
}

fn slot_report(scan: &mut Scan) -> Read<SlotReport> {
    let mut policy = None;
    let mut values = [None; 5];
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        let slot = match &*field {
            "policy" => {
                policy = Some(scan.string()?);
                continue;
            }
            "limit" => 0,
            "window_ms" => 1,
            "used" => 2,
            "remaining" => 3,
            "reset_ms" => 4,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        values[slot] = Some(scan.u64()?);
    }
    let [limit, window_ms, used, remaining, reset_ms] = values;
    Ok(SlotReport {
        policy: need(policy)?,
        limit: need(limit)?,
        window_ms: need(window_ms)?,
        used: need(used)?,
        remaining: need(remaining)?,
        reset_ms: need(reset_ms)?,
    })
}

/// A second of a global quota's part: `[at_s, admitted, refused]`.
fn second(scan: &mut Scan) -> Read<Second> {
    let mut values = list(scan, Scan::u64)?.into_iter();
    let second = Second(
        need(values.next())?,
        need(values.next())?,
        need(values.next())?,
    );
    match values.next() {
        Some(_) => Err(Malformed),
        None => Ok(second),
    }
}

fn inspection(scan: &mut Scan) -> Read<Inspection> {
    let (mut held, mut has_storage, mut alarm_ms, mut meter_read) = (None, None, None, None);
    let (mut stored_rows, mut checks) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "held" => held = Some(scan.bool()?),
            "stored_rows" => stored_rows = Some(scan.u64()?),
            "has_storage" => has_storage = Some(scan.bool()?),
            "alarm_ms" => alarm_ms = nullable(scan, Scan::u64)?,
            "checks" => checks = Some(scan.u64()?),
            "meter" => meter_read = Some(meter(scan)?),
            _ => scan.skip()?,
        }
    }
    Ok(Inspection {
        held: need(held)?,
        stored_rows: need(stored_rows)?,
        has_storage: need(has_storage)?,
        alarm_ms,
        checks: need(checks)?,
        meter: need(meter_read)?,
    })
}

fn meter(scan: &mut Scan) -> Read<Meter> {
    let mut values = [None; 4];
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        let slot = match &*field {
            "requests" => 0,
            "alarms" => 1,
            "rows_read" => 2,
            "rows_written" => 3,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        values[slot] = Some(scan.u64()?);
    }
    let [requests, alarms, rows_read, rows_written] = values;
    Ok(Meter {
        requests: need(requests)?,
        alarms: need(alarms)?,
        rows_read: need(rows_read)?,
        rows_written: need(rows_written)?,
    })
}
