//! The hubs' calls ([`HubCall`]) and replies ([`HubReply`]) read from their
//! JSON.

use super::super::{HubCall, HubReply, UnbanRequest};
use crate::input::scan::{list, need, nullable, whole, Malformed, Read, Scan};
use crate::isolate::banlist::BanRecord;
use crate::isolate::pages::BanCursor;
use crate::isolate::report::{HubAnswer, Report};
use crate::isolate::stats::{HubStats, StatRow};
use crate::isolate::top::{RuleTop, TopKeys};

impl HubCall {
    /// The call a body carries, or [`Malformed`] if it carries none.
    pub fn from_json(text: &str) -> Read<HubCall> {
        whole(text, call)
    }
}

impl HubReply {
    /// The reply a hub answered, or [`Malformed`].
    pub fn from_json(text: &str) -> Read<HubReply> {
        whole(text, reply)
    }
}

fn call(scan: &mut Scan) -> Read<HubCall> {
    let (name, Some(object)) = scan.tag()? else {
        return Err(Malformed);
    };
    let call = match &*name {
        "report" => HubCall::Report(report(scan)?),
        "ban" => HubCall::Ban(ban_record(scan)?),
        "unban" => {
            let (mut key, mut source) = (None, None);
            let mut fields = scan.object()?;
            while let Some(field) = fields.key(scan)? {
                match &*field {
                    "key" => key = Some(scan.string()?),
                    "source" => source = Some(scan.string()?),
                    _ => scan.skip()?,
                }
            }
            HubCall::Unban(UnbanRequest {
                key: need(key)?,
                source: need(source)?,
            })
        }
        "stats" => HubCall::Stats {
            since_ms: need(since_ms(scan, &mut None)?)?,
        },
        "top" => {
            let mut rule = None;
            let since_ms = need(since_ms(scan, &mut rule)?)?;
            HubCall::Top {
                rule: need(rule)?,
                since_ms,
            }
        }
        "bans" => {
            let (mut limit, mut after) = (None, None);
            let mut fields = scan.object()?;
            while let Some(field) = fields.key(scan)? {
                match &*field {
                    "limit" => limit = Some(scan.u32()?),
                    "after" => after = nullable(scan, BanCursor::read)?,
                    _ => scan.skip()?,
                }
            }
            HubCall::Bans {
                limit: need(limit)?,
                after,
            }
        }
        _ => return Err(Malformed),
    };
    object.close(scan)?;
    Ok(call)
}

/// An object's `since_ms`, and its `rule` (a top call's) into `rule`.
fn since_ms(scan: &mut Scan, rule: &mut Option<String>) -> Read<Option<u64>> {
    let mut since_ms = None;
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "since_ms" => since_ms = Some(scan.u64()?),
            "rule" => *rule = Some(scan.string()?),
            _ => scan.skip()?,
        }
    }
    Ok(since_ms)
}

fn report(scan: &mut Scan) -> Read<Report> {
    let (mut stats, mut top, mut bans) = (None, None, None);
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "stats" => stats = Some(list(scan, stat_row)?),
            "top" => top = Some(list(scan, rule_top)?),
            "bans" => bans = Some(list(scan, ban_record)?),
            _ => scan.skip()?,
        }
    }
    Ok(Report {
        stats: need(stats)?,
        top: need(top)?,
        bans: need(bans)?,
    })
}

fn stat_row(scan: &mut Scan) -> Read<StatRow> {
    let mut rule = None;
    // The last two, near_limit and shadow, are absent from a worker of
    // the version before.
    let mut values = [None, None, None, None, Some(0), Some(0)];
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        let slot = match &*field {
            "rule" => {
                rule = Some(scan.string()?);
                continue;
            }
            "minute_ms" => 0,
            "admitted" => 1,
            "refused" => 2,
            "failed" => 3,
            "near_limit" => 4,
            "shadow" => 5,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        values[slot] = Some(scan.u64()?);
    }
    let [minute_ms, admitted, refused, failed, near_limit, shadow] = values;
    Ok(StatRow {
        rule: need(rule)?,
        minute_ms: need(minute_ms)?,
        admitted: need(admitted)?,
        refused: need(refused)?,
        failed: need(failed)?,
        near_limit: need(near_limit)?,
        shadow: need(shadow)?,
    })
}

fn rule_top(scan: &mut Scan) -> Read<RuleTop> {
    let (mut rule, mut minute_ms, mut keys) = (None, None, None);
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "rule" => rule = Some(scan.string()?),
            "minute_ms" => minute_ms = Some(scan.u64()?),
            "keys" => keys = Some(TopKeys::read(scan)?),
            _ => scan.skip()?,
        }
    }
    Ok(RuleTop {
        rule: need(rule)?,
        minute_ms: need(minute_ms)?,
        keys: need(keys)?,
    })
}

fn ban_record(scan: &mut Scan) -> Read<BanRecord> {
    let (mut key, mut until_ms, mut reason, mut source) = (None, None, None, None);
    let mut started_ms = 0;
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        match &*field {
            "key" => key = Some(scan.string()?),
            "until_ms" => until_ms = Some(scan.u64()?),
            "reason" => reason = Some(scan.string()?),
            "source" => source = Some(scan.string()?),
            "started_ms" => started_ms = scan.u64()?,
            _ => scan.skip()?,
        }
    }
    Ok(BanRecord {
        key: need(key)?,
        until_ms: need(until_ms)?,
        reason: need(reason)?,
        source: need(source)?,
        started_ms,
    })
}

fn reply(scan: &mut Scan) -> Read<HubReply> {
    let (name, Some(object)) = scan.tag()? else {
        return Err(Malformed);
    };
    let reply = match &*name {
        "report" => {
            let mut manual_bans = None;
            let mut fields = scan.object()?;
            while let Some(field) = fields.key(scan)? {
                match &*field {
                    "manual_bans" => manual_bans = Some(list(scan, ban_record)?),
                    _ => scan.skip()?,
                }
            }
            HubReply::Report(HubAnswer {
                manual_bans: need(manual_bans)?,
            })
        }
        "ban" => {
            let (mut banned, mut replaced) = (None, false);
            let mut fields = scan.object()?;
            while let Some(field) = fields.key(scan)? {
                match &*field {
                    "banned" => banned = Some(scan.bool()?),
                    "replaced" => replaced = scan.bool()?,
                    _ => scan.skip()?,
                }
            }
            HubReply::Ban {
                banned: need(banned)?,
                replaced,
            }
        }
        "unban" => {
            let mut removed = None;
            let mut fields = scan.object()?;
            while let Some(field) = fields.key(scan)? {
                match &*field {
                    "removed" => removed = Some(scan.bool()?),
                    _ => scan.skip()?,
                }
            }
            HubReply::Unban {
                removed: need(removed)?,
            }
        }
        "stats" => HubReply::Stats(hub_stats(scan)?),
        "top" => HubReply::Top(TopKeys::read(scan)?),
        "bans" => HubReply::Bans(list(scan, ban_record)?),
        _ => return Err(Malformed),
    };
    object.close(scan)?;
    Ok(reply)
}

fn hub_stats(scan: &mut Scan) -> Read<HubStats> {
    let (mut totals, mut recent) = (None, None);
    let mut counts = [None; 3];
    let mut fields = scan.object()?;
    while let Some(field) = fields.key(scan)? {
        let slot = match &*field {
            "totals" => {
                totals = Some(list(scan, stat_row)?);
                continue;
            }
            "recent" => {
                recent = Some(list(scan, stat_row)?);
                continue;
            }
            "requests" => 0,
            "manual_bans" => 1,
            "rule_bans" => 2,
            _ => {
                scan.skip()?;
                continue;
            }
        };
        counts[slot] = Some(scan.u64()?);
    }
    let [requests, manual_bans, rule_bans] = counts;
    Ok(HubStats {
        requests: need(requests)?,
        totals: need(totals)?,
        recent: need(recent)?,
        manual_bans: need(manual_bans)?,
        rule_bans: need(rule_bans)?,
    })
}
