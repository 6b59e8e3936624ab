//! A key object's calls ([`LimiterCall`]) read from their JSON.

use super::super::{
    BlockAskWire, CheckRequest, ControlRequest, KeyBan, KeyBanRequest, KeyRequest, LeaseRequest,
    LimiterCall, OverrideRequest, PeekRequest, QueueAsk, ReserveAsk, SettleRequest, StockRequest,
    ThrottleRequest, WireBan, WireOverride, WirePolicy, WireReport,
};
use crate::control::Control;
use crate::input::scan::{list, need, nullable, whole, Malformed, Read, Scan};
use crate::ledger::blocks::Pending;
use crate::ledger::overrides::read_whole;
use crate::ledger::{LeaseAsk, StockAsk, Told};

impl LimiterCall {
    /// The call a body carries, or [`Malformed`] if it carries none.
    pub fn from_json(text: &str) -> Read<LimiterCall> {
        whole(text, call)
    }
}

fn call(scan: &mut Scan) -> Read<LimiterCall> {
    let (name, object) = scan.tag()?;
    let Some(object) = object else {
        return match &*name {
            "inspect" => Ok(LimiterCall::Inspect),
            _ => Err(Malformed),
        };
    };
    let call = match &*name {
        "check" => LimiterCall::Check(check(scan)?),
        "settle" => LimiterCall::Settle(settle(scan)?),
        "renew" => LimiterCall::Renew(lease_request(scan)?),
        "release" => LimiterCall::Release(lease_request(scan)?),
        "throttle" => LimiterCall::Throttle(throttle(scan)?),
        "peek" => LimiterCall::Peek(peek(scan)?),
        "reset" => LimiterCall::Reset(reset(scan)?),
        "override" => LimiterCall::Override(override_request(scan)?),
        "ban" => LimiterCall::Ban(ban_request(scan)?),
        "control" => LimiterCall::Control(control_request(scan)?),
        "stock" => LimiterCall::Stock(stock_request(scan)?),
        "inspect" if scan.null() => LimiterCall::Inspect,
        _ => return Err(Malformed),
    };
    object.close(scan)?;
    Ok(call)
}

fn check(scan: &mut Scan) -> Read<CheckRequest> {
    let (mut key, mut policies, mut cost) = (None, None, None);
    // Every optional field at its default, as a worker of the version
    // before left it out.
    let mut request = CheckRequest::new("", &[], 0, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "policies" => policies = Some(list(scan, policy)?),
            "cost" => cost = Some(scan.u32()?),
            "ban" => request.ban = nullable(scan, ban)?,
            "lease" => request.lease = nullable(scan, lease_ask)?,
            "queue" => request.queue = nullable(scan, queue)?,
            "refuse_conflicts" => request.refuse_conflicts = scan.bool()?,
            "reserve" => request.reserve = nullable(scan, reserve)?,
            "invitations" => request.invitations = scan.u32()?,
            "watched" => request.watched = scan.bool()?,
            "block" => request.block = nullable(scan, block_ask)?,
            "reports" => request.reports = list(scan, report)?,
            "stock" => request.stock = nullable(scan, StockAsk::read)?,
            _ => scan.skip()?,
        }
    }
    request.key = need(key)?;
    request.policies = need(policies)?;
    request.cost = need(cost)?;
    Ok(request)
}

fn stock_request(scan: &mut Scan) -> Read<StockRequest> {
    let (mut key, mut from, mut ask, mut told) = (None, None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "from" => from = Some(scan.u32()?),
            "ask" => ask = Some(StockAsk::read(scan)?),
            "told" => told = Some(Told::read(scan)?),
            _ => scan.skip()?,
        }
    }
    Ok(StockRequest {
        key: need(key)?,
        from: need(from)?,
        ask: need(ask)?,
        told: need(told)?,
    })
}

fn block_ask(scan: &mut Scan) -> Read<BlockAskWire> {
    let (mut holder, mut rate) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "holder" => holder = Some(scan.string()?),
            "rate" => rate = Some(scan.u32()?),
            _ => scan.skip()?,
        }
    }
    Ok(BlockAskWire {
        holder: need(holder)?,
        rate: need(rate)?,
    })
}

fn report(scan: &mut Scan) -> Read<WireReport> {
    let (mut id, mut holder, mut policy, mut times, mut strikes) = (None, None, None, None, 0);
    let mut held = Vec::new();
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "id" => id = Some(scan.u64()?),
            "holder" => holder = Some(scan.string()?),
            "policy" => policy = Some(scan.string()?),
            "times" => times = Some(scan.string()?),
            "pending" => held = list(scan, pending)?,
            "strikes" => strikes = scan.u32()?,
            _ => scan.skip()?,
        }
    }
    Ok(WireReport {
        id: need(id)?,
        holder: need(holder)?,
        policy: need(policy)?,
        times: need(times)?,
        pending: held,
        strikes,
    })
}

fn pending(scan: &mut Scan) -> Read<Pending> {
    let (mut id, mut at_ms, mut cost, mut lapses_ms) = (None, None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "id" => id = Some(scan.string()?),
            "at_ms" => at_ms = Some(scan.u64()?),
            "cost" => cost = Some(scan.u32()?),
            "lapses_ms" => lapses_ms = Some(scan.u64()?),
            _ => scan.skip()?,
        }
    }
    Ok(Pending {
        id: need(id)?,
        at_ms: need(at_ms)?,
        cost: need(cost)?,
        lapses_ms: need(lapses_ms)?,
    })
}

/// A policy, tagged by its algorithm.
pub(in crate::objects::protocol) fn policy(scan: &mut Scan) -> Read<WirePolicy> {
    let (algorithm, Some(tagged)) = scan.tag()? else {
        return Err(Malformed);
    };
    let gcra = match &*algorithm {
        "sliding_log" | "fixed_window" => false,
        "gcra" => true,
        _ => return Err(Malformed),
    };
    let (mut name, mut a, mut b, mut c) = (None, None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match (&*field, gcra) {
            ("name", _) => name = Some(scan.string()?),
            ("limit", false) | ("max_burst", true) => a = Some(scan.u64()?),
            ("window_ms", false) | ("count", true) => b = Some(scan.u64()?),
            ("period_ms", true) => c = Some(scan.u64()?),
            _ => scan.skip()?,
        }
    }
    tagged.close(scan)?;
    let (name, a, b) = (need(name)?, need(a)?, need(b)?);
    Ok(match &*algorithm {
        "sliding_log" => WirePolicy::SlidingLog {
            name,
            limit: a,
            window_ms: b,
        },
        "fixed_window" => WirePolicy::FixedWindow {
            name,
            limit: a,
            window_ms: b,
        },
        _ => WirePolicy::Gcra {
            name,
            max_burst: a,
            count: b,
            period_ms: need(c)?,
        },
    })
}

fn ban(scan: &mut Scan) -> Read<WireBan> {
    let mut values = [None; 5];
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        let slot = match &*field {
            "after" => 0,
            "within_ms" => 1,
            "for_ms" => 2,
            "multiplier" => 3,
            "max_ms" => 4,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        values[slot] = Some(scan.u64()?);
    }
    let [after, within_ms, for_ms, multiplier, max_ms] = values;
    Ok(WireBan {
        after: need(after)?,
        within_ms: need(within_ms)?,
        for_ms: need(for_ms)?,
        multiplier: need(multiplier)?,
        max_ms: need(max_ms)?,
    })
}

fn lease_ask(scan: &mut Scan) -> Read<LeaseAsk> {
    let (mut name, mut limit, mut ttl_ms, mut new_id) = (None, None, None, None);
    let (mut owner, mut reenter, mut strict_limit) = (None, None, false);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "name" => name = Some(scan.string()?),
            "limit" => limit = Some(scan.u32()?),
            "ttl_ms" => ttl_ms = Some(scan.u64()?),
            "owner" => owner = nullable(scan, Scan::string)?,
            "reenter" => reenter = nullable(scan, Scan::string)?,
            "strict_limit" => strict_limit = scan.bool()?,
            "new_id" => new_id = Some(scan.string()?),
            _ => scan.skip()?,
        }
    }
    Ok(LeaseAsk {
        name: need(name)?,
        limit: need(limit)?,
        ttl_ms: need(ttl_ms)?,
        owner,
        reenter,
        strict_limit,
        new_id: need(new_id)?,
    })
}

fn queue(scan: &mut Scan) -> Read<QueueAsk> {
    let (mut max_wait_ms, mut max_len) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "max_wait_ms" => max_wait_ms = Some(scan.u64()?),
            "max_len" => max_len = Some(scan.u32()?),
            _ => scan.skip()?,
        }
    }
    Ok(QueueAsk {
        max_wait_ms: need(max_wait_ms)?,
        max_len: need(max_len)?,
    })
}

fn reserve(scan: &mut Scan) -> Read<ReserveAsk> {
    let (mut id, mut ttl_ms) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "id" => id = Some(scan.string()?),
            "ttl_ms" => ttl_ms = Some(scan.u64()?),
            _ => scan.skip()?,
        }
    }
    Ok(ReserveAsk {
        id: need(id)?,
        ttl_ms: need(ttl_ms)?,
    })
}

fn settle(scan: &mut Scan) -> Read<SettleRequest> {
    let (mut key, mut reservation, mut keep) = (None, None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "reservation" => reservation = Some(scan.string()?),
            "keep" => keep = Some(scan.bool()?),
            _ => scan.skip()?,
        }
    }
    Ok(SettleRequest {
        key: need(key)?,
        reservation: need(reservation)?,
        keep: need(keep)?,
    })
}

fn lease_request(scan: &mut Scan) -> Read<LeaseRequest> {
    let (mut key, mut id, mut ttl_ms) = (None, None, 0);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "id" => id = Some(scan.string()?),
            "ttl_ms" => ttl_ms = scan.u64()?,
            _ => scan.skip()?,
        }
    }
    Ok(LeaseRequest {
        key: need(key)?,
        id: need(id)?,
        ttl_ms,
    })
}

fn throttle(scan: &mut Scan) -> Read<ThrottleRequest> {
    let (mut key, mut quantity) = (None, None);
    let mut values = [None; 3];
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        let slot = match &*field {
            "key" => {
                key = Some(scan.string()?);
                continue;
            }
            "quantity" => {
                quantity = Some(scan.u32()?);
                continue;
            }
            "max_burst" => 0,
            "count" => 1,
            "period_ms" => 2,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        values[slot] = Some(scan.u64()?);
    }
    let [max_burst, count, period_ms] = values;
    Ok(ThrottleRequest {
        key: need(key)?,
        max_burst: need(max_burst)?,
        count: need(count)?,
        period_ms: need(period_ms)?,
        quantity: need(quantity)?,
    })
}

fn peek(scan: &mut Scan) -> Read<PeekRequest> {
    let (mut key, mut policies) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "policies" => policies = nullable(scan, |scan| list(scan, policy))?,
            _ => scan.skip()?,
        }
    }
    Ok(PeekRequest {
        key: need(key)?,
        policies,
    })
}

/// A call whose only field is the key it is for.
fn reset(scan: &mut Scan) -> Read<KeyRequest> {
    let mut key = None;
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            _ => scan.skip()?,
        }
    }
    Ok(KeyRequest { key: need(key)? })
}

fn override_request(scan: &mut Scan) -> Read<OverrideRequest> {
    let (mut key, mut overridden) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "override" => overridden = nullable(scan, wire_override)?,
            _ => scan.skip()?,
        }
    }
    Ok(OverrideRequest {
        key: need(key)?,
        overridden,
    })
}

pub(in crate::objects::protocol) fn wire_override(scan: &mut Scan) -> Read<WireOverride> {
    let (mut policies, mut until_ms, mut reason, mut set_ms) = (None, None, None, None);
    let mut whole = None;
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "policies" => policies = Some(list(scan, policy)?),
            "until_ms" => until_ms = nullable(scan, Scan::u64)?,
            "reason" => reason = Some(scan.string()?),
            "set_ms" => set_ms = Some(scan.u64()?),
            "whole" => whole = nullable(scan, read_whole)?,
            _ => scan.skip()?,
        }
    }
    Ok(WireOverride {
        policies: need(policies)?,
        until_ms,
        reason: need(reason)?,
        set_ms: need(set_ms)?,
        whole,
    })
}

fn ban_request(scan: &mut Scan) -> Read<KeyBanRequest> {
    let (mut key, mut ban) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "ban" => ban = nullable(scan, key_ban)?,
            _ => scan.skip()?,
        }
    }
    Ok(KeyBanRequest {
        key: need(key)?,
        ban,
    })
}

fn key_ban(scan: &mut Scan) -> Read<KeyBan> {
    let (mut until_ms, mut reason) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "until_ms" => until_ms = Some(scan.u64()?),
            "reason" => reason = Some(scan.string()?),
            _ => scan.skip()?,
        }
    }
    Ok(KeyBan {
        until_ms: need(until_ms)?,
        reason: need(reason)?,
    })
}

fn control_request(scan: &mut Scan) -> Read<ControlRequest> {
    let (mut key, mut state) = (None, None);
    let mut object = scan.object()?;
    while let Some(field) = object.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "control" => state = Some(Control::read(scan)?),
            _ => scan.skip()?,
        }
    }
    Ok(ControlRequest {
        key: need(key)?,
        control: need(state)?,
    })
}
