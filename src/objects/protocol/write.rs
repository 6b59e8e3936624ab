//! The calls and replies written by hand ([`crate::json::Write`]): the
//! JSON serde's derives write, which the tests compare with.

use super::hub::{HubCall, HubReply, UnbanRequest};
use super::policy::WirePolicy;
use super::*;
use crate::json::{Text, Write};

impl Write for LimiterCall {
    fn write(&self, out: &mut Text) {
        let name = self.name();
        match self {
            LimiterCall::Check(r) => out.tagged(name, r),
            LimiterCall::Settle(r) => out.tagged(name, r),
            LimiterCall::Renew(r) | LimiterCall::Release(r) => out.tagged(name, r),
            LimiterCall::Throttle(r) => out.tagged(name, r),
            LimiterCall::Peek(r) => out.tagged(name, r),
            LimiterCall::Reset(r) => out.tagged(name, r),
            LimiterCall::Override(r) => out.tagged(name, r),
            LimiterCall::Ban(r) => out.tagged(name, r),
            LimiterCall::Control(r) => out.tagged(name, r),
            LimiterCall::Stock(r) => out.tagged(name, r),
            LimiterCall::Inspect => out.str(name),
        }
    }
}

/// A struct variant's one field: `{"variant":{"field":value}}`.
fn one_field<T: Write + ?Sized>(
    out: &mut Text,
    variant: &'static str,
    field: &'static str,
    value: &T,
) {
    let mut outer = out.object();
    outer.at(variant).tagged(field, value);
    outer.end();
}

/// A struct variant's two fields: `{"variant":{"a":..,"b":..}}`.
fn two_fields<A: Write, B: Write>(
    out: &mut Text,
    variant: &'static str,
    (a, a_value): (&'static str, &A),
    (b, b_value): (&'static str, &B),
) {
    let mut outer = out.object();
    let mut fields = outer.at(variant).object();
    fields.field(a, a_value);
    fields.field(b, b_value);
    fields.end();
    outer.end();
}

impl Write for LimiterReply {
    fn write(&self, out: &mut Text) {
        let name = self.name();
        match self {
            LimiterReply::Outcome(o) => out.tagged(name, o),
            LimiterReply::Settled(s) => out.tagged(name, s),
            LimiterReply::NoSuchReservation | LimiterReply::NoSuchLease => out.str(name),
            LimiterReply::Lease(l) => out.tagged(name, l),
            LimiterReply::Throttle(t) => out.tagged(name, t),
            LimiterReply::Key(k) => out.tagged(name, k),
            LimiterReply::Reset { forgot } => one_field(out, name, "forgot", forgot),
            LimiterReply::Override { previous } => one_field(out, name, "previous", previous),
            LimiterReply::Ban { previous } => one_field(out, name, "previous", previous),
            LimiterReply::Control { previous } => one_field(out, name, "previous", previous),
            LimiterReply::Inspection(i) => out.tagged(name, i),
        }
    }
}

crate::write_json!(WireBan {
    after,
    within_ms,
    for_ms,
    multiplier,
    max_ms
});
crate::write_json!(CheckRequest {
    key,
    policies,
    cost,
    ban if Option::is_none,
    lease if Option::is_none,
    queue if Option::is_none,
    refuse_conflicts if std::ops::Not::not,
    reserve if Option::is_none,
    invitations if is_one_invitation,
    watched if std::ops::Not::not,
    block if Option::is_none,
    reports if Vec::is_empty,
    stock if Option::is_none,
});
crate::write_json!(StockRequest {
    key,
    from,
    ask,
    told
});
crate::write_json!(BlockAskWire { holder, rate });
crate::write_json!(WireReport {
    id,
    holder,
    policy,
    times,
    pending if Vec::is_empty,
    strikes if is_zero,
});
crate::write_json!(ReserveAsk { id, ttl_ms });
crate::write_json!(SettleRequest {
    key,
    reservation,
    keep
});
crate::write_json!(SettleAnswer { kept, repeated });
crate::write_json!(QueueAsk {
    max_wait_ms,
    max_len
});
crate::write_json!(ThrottleRequest {
    key,
    max_burst,
    count,
    period_ms,
    quantity
});
crate::write_json!(KeyRequest { key });
crate::write_json!(PeekRequest { key, policies if Option::is_none });
crate::write_json!(KeyState {
    slots,
    ban,
    leases,
    overridden as "override",
    control if Option::is_none,
    seconds if Vec::is_empty,
});
crate::write_json!(WireOverride {
    policies,
    until_ms,
    reason,
    set_ms,
    whole if Option::is_none,
});
crate::write_json!(OverrideRequest { key, overridden as "override" });
crate::write_json!(KeyBanRequest { key, ban });
crate::write_json!(ControlRequest { key, control });
crate::write_json!(KeyBan { until_ms, reason });
crate::write_json!(LeaseRequest { key, id, ttl_ms });
crate::write_json!(Inspection {
    held,
    stored_rows,
    has_storage,
    alarm_ms,
    checks,
    meter
});
crate::write_json!(Meter {
    requests,
    alarms,
    rows_read,
    rows_written
});

impl Write for WirePolicy {
    fn write(&self, out: &mut Text) {
        let mut outer = out.object();
        let inner = match self {
            WirePolicy::SlidingLog { .. } => "sliding_log",
            WirePolicy::FixedWindow { .. } => "fixed_window",
            WirePolicy::Gcra { .. } => "gcra",
        };
        let mut fields = outer.at(inner).object();
        match self {
            WirePolicy::SlidingLog {
                name,
                limit,
                window_ms,
            }
            | WirePolicy::FixedWindow {
                name,
                limit,
                window_ms,
            } => {
                fields.field("name", name);
                fields.field("limit", limit);
                fields.field("window_ms", window_ms);
            }
            WirePolicy::Gcra {
                name,
                max_burst,
                count,
                period_ms,
            } => {
                fields.field("name", name);
                fields.field("max_burst", max_burst);
                fields.field("count", count);
                fields.field("period_ms", period_ms);
            }
        }
        fields.end();
        outer.end();
    }
}

impl Write for HubCall {
    fn write(&self, out: &mut Text) {
        let name = self.name();
        match self {
            HubCall::Report(r) => out.tagged(name, r),
            HubCall::Ban(b) => out.tagged(name, b),
            HubCall::Unban(u) => out.tagged(name, u),
            HubCall::Stats { since_ms } => one_field(out, name, "since_ms", since_ms),
            HubCall::Top { rule, since_ms } => {
                two_fields(out, name, ("rule", rule), ("since_ms", since_ms));
            }
            HubCall::Bans { limit, after } => {
                two_fields(out, name, ("limit", limit), ("after", after));
            }
        }
    }
}

impl Write for HubReply {
    fn write(&self, out: &mut Text) {
        let name = self.name();
        match self {
            HubReply::Report(r) => out.tagged(name, r),
            HubReply::Ban { banned, replaced } => {
                two_fields(out, name, ("banned", banned), ("replaced", replaced));
            }
            HubReply::Unban { removed } => one_field(out, name, "removed", removed),
            HubReply::Stats(s) => out.tagged(name, s),
            HubReply::Top(t) => out.tagged(name, t),
            HubReply::Bans(b) => out.tagged(name, b),
        }
    }
}

crate::write_json!(UnbanRequest { key, source });
