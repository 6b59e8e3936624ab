//! Calls from the worker to Durable Objects (key objects and the
//! hubs), each bounded by a deadline so that a slow object cannot hold a
//! request forever.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;

use worker::wasm_bindgen_futures::JsFuture;
use worker::{Env, Result};

use super::rpc;
use crate::control::Control;
use crate::input::scan::FromScan;
use crate::isolate::banlist::BanRecord;
use crate::isolate::calls::ObjectCalls;
use crate::isolate::pages::BanCursor;
use crate::isolate::report::{HubAnswer, Report, HUBS};
use crate::isolate::stats::HubStats;
use crate::isolate::top::TopKeys;
use crate::ledger::{BanNotice, Outcome};
use crate::limit::gcra::Throttle;
use crate::limit::lease::Lease;
use crate::limit::Spec;
use crate::objects::name::ObjectName;
use crate::objects::protocol::{
    CheckRequest, ControlRequest, HubCall, HubReply, KeyBan, KeyBanRequest, KeyRequest, KeyState,
    LeaseRequest, LimiterCall, LimiterReply, OverrideRequest, PeekRequest, SettleAnswer,
    SettleRequest, StockRequest, ThrottleRequest, UnbanRequest, WireOverride,
};
use crate::room::protocol::{RoomCall, RoomReply};

/// The key objects' namespace binding in wrangler.toml.
pub const LIMITER_BINDING: &str = "LIMITER";
/// The hubs' namespace binding.
pub const HUB_BINDING: &str = "HUB";
/// The waiting rooms' shards' namespace binding.
pub const ROOM_BINDING: &str = "ROOM";

thread_local! {
    /// Every call this isolate has made, by binding.
    static CALLS: RefCell<ObjectCalls> = RefCell::new(ObjectCalls::default());
}

/// The object calls this isolate has made since it started, by binding
/// (`GET {prefix}/admin/stats`, under `isolate`).
pub fn object_calls() -> crate::json::Json {
    CALLS.with(|calls| calls.borrow().figures())
}

/// The name of hub `n`, `hub-0` to `hub-15`.
pub fn hub_name(n: u32) -> String {
    format!("hub-{n}")
}

/// Durable Objects, reached with a deadline.
#[derive(Clone)]
pub struct Objects {
    env: Env,
    timeout_ms: u64,
}

impl Objects {
    pub fn new(env: &Env, timeout_ms: u64) -> Objects {
        Objects {
            env: env.clone(),
            timeout_ms,
        }
    }

    /// A check with everything a request may ask (a lease, a queue).
    pub async fn check_request(&self, request: &CheckRequest) -> Result<Outcome> {
        let call = LimiterCall::Check(request.clone());
        match self.limiter(&request.key, &call).await? {
            LimiterReply::Outcome(outcome) => Ok(outcome),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Extends a live lease; `None` if it is unknown or has lapsed.
    pub async fn renew(&self, key: &str, id: &str, ttl_ms: u64) -> Result<Option<Lease>> {
        let call = LimiterCall::Renew(LeaseRequest {
            key: key.to_string(),
            id: id.to_string(),
            ttl_ms,
        });
        self.lease_call(key, call).await
    }

    /// Drops one hold on a lease; `None` if it is unknown or has lapsed.
    pub async fn release(&self, key: &str, id: &str) -> Result<Option<Lease>> {
        let call = LimiterCall::Release(LeaseRequest {
            key: key.to_string(),
            id: id.to_string(),
            ttl_ms: 0,
        });
        self.lease_call(key, call).await
    }

    async fn lease_call(&self, key: &str, call: LimiterCall) -> Result<Option<Lease>> {
        match self.limiter(key, &call).await? {
            LimiterReply::Lease(lease) => Ok(Some(lease)),
            LimiterReply::NoSuchLease => Ok(None),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// The worker's bindings.
    pub fn env(&self) -> &Env {
        &self.env
    }

    /// The same objects with a longer deadline, for a call that may wait.
    pub fn with_timeout(&self, timeout_ms: u64) -> Objects {
        Objects {
            env: self.env.clone(),
            timeout_ms,
        }
    }

    /// redis-cell's `CL.THROTTLE` in the key's object.
    pub async fn throttle(&self, request: &ThrottleRequest) -> Result<Throttle> {
        let call = LimiterCall::Throttle(request.clone());
        match self.limiter(&request.key, &call).await? {
            LimiterReply::Throttle(throttle) => Ok(throttle),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// A key's state under `policies` (the config's for it now; `None`:
    /// as it stored them), changing nothing.
    pub async fn peek(&self, key: &str, policies: Option<&[(String, Spec)]>) -> Result<KeyState> {
        let call = LimiterCall::Peek(PeekRequest::new(key, policies));
        match self.limiter(key, &call).await? {
            LimiterReply::Key(state) => Ok(state),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Keeps or refunds a reservation; `None` if it is unknown or lapsed.
    pub async fn settle(&self, request: &SettleRequest) -> Result<Option<SettleAnswer>> {
        let call = LimiterCall::Settle(request.clone());
        match self.limiter(&request.key, &call).await? {
            LimiterReply::Settled(answer) => Ok(Some(answer)),
            LimiterReply::NoSuchReservation => Ok(None),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Sets or lifts the override of the key an object holds; answers the
    /// one it replaced.
    pub async fn set_override(
        &self,
        key: &str,
        overridden: Option<WireOverride>,
    ) -> Result<Option<WireOverride>> {
        let call = LimiterCall::Override(OverrideRequest {
            key: key.to_string(),
            overridden,
        });
        match self.limiter(key, &call).await? {
            LimiterReply::Override { previous } => Ok(previous),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Bans the key an object holds on its rule, or with `None` lifts its
    /// ban; answers the ban that was in force.
    pub async fn set_ban(&self, key: &str, ban: Option<KeyBan>) -> Result<Option<BanNotice>> {
        let call = LimiterCall::Ban(KeyBanRequest {
            key: key.to_string(),
            ban,
        });
        match self.limiter(key, &call).await? {
            LimiterReply::Ban { previous } => Ok(previous),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Sets the state of the rule a global quota's part belongs to;
    /// answers the state that was in force (`None`: open).
    pub async fn set_control(&self, key: &str, control: Control) -> Result<Option<Control>> {
        let call = LimiterCall::Control(ControlRequest {
            key: key.to_string(),
            control,
        });
        match self.limiter(key, &call).await? {
            LimiterReply::Control { previous } => Ok(previous),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Tells a sibling part what a part of a sold-out quota says of its
    /// stock.
    pub async fn tell_stock(&self, request: StockRequest) -> Result<()> {
        let key = request.key.clone();
        let call = LimiterCall::Stock(request);
        match self.limiter(&key, &call).await? {
            LimiterReply::Control { .. } => Ok(()),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Forgets everything about a key; true if there was anything.
    pub async fn reset(&self, key: &str) -> Result<bool> {
        let call = LimiterCall::Reset(KeyRequest {
            key: key.to_string(),
        });
        match self.limiter(key, &call).await? {
            LimiterReply::Reset { forgot } => Ok(forgot),
            other => Err(unexpected(LIMITER_BINDING, call.name(), other.name())),
        }
    }

    /// Sends an isolate's report to one hub, picked at random so that the
    /// reports of many isolates spread evenly, and takes its answer.
    pub async fn report(&self, report: &Report) -> Result<HubAnswer> {
        let (pick, _) = random_pair()?;
        let call = HubCall::Report(report.clone());
        match self.hub(&hub_name(pick % HUBS), &call).await? {
            HubReply::Report(answer) => Ok(answer),
            other => Err(unexpected(HUB_BINDING, call.name(), other.name())),
        }
    }

    /// Records a manual ban in every hub, so that every isolate learns it
    /// whichever hub it reports to: whether it was recorded (false if a hub
    /// holds as many manual bans as it may), and whether any hub held a
    /// manual ban on the key that it replaced.
    pub async fn ban_everywhere(&self, record: &BanRecord) -> Result<(bool, bool)> {
        let call = HubCall::Ban(record.clone());
        let (mut banned, mut replaced) = (true, false);
        for reply in self.each_hub(&call).await {
            match reply? {
                HubReply::Ban {
                    banned: this,
                    replaced: held,
                } => {
                    banned &= this;
                    replaced |= held;
                }
                other => return Err(unexpected(HUB_BINDING, call.name(), other.name())),
            }
        }
        Ok((banned, replaced))
    }

    /// Lifts a ban in every hub; true if any hub held it.
    pub async fn unban_everywhere(&self, key: &str, source: &str) -> Result<bool> {
        let call = HubCall::Unban(UnbanRequest {
            key: key.to_string(),
            source: source.to_string(),
        });
        let mut removed = false;
        for reply in self.each_hub(&call).await {
            match reply? {
                HubReply::Unban { removed: this } => removed |= this,
                other => return Err(unexpected(HUB_BINDING, call.name(), other.name())),
            }
        }
        Ok(removed)
    }

    /// Each hub's counts since `since_ms` and of the last hour, in hub
    /// order.
    pub async fn hub_stats(&self, since_ms: u64) -> Vec<Result<HubStats>> {
        self.ask_each_hub(&HubCall::Stats { since_ms }, |reply| match reply {
            HubReply::Stats(stats) => Ok(stats),
            other => Err(other),
        })
        .await
    }

    /// Each hub's top refused keys of `rule` counted since `since_ms`.
    pub async fn hub_top(&self, rule: &str, since_ms: u64) -> Vec<Result<TopKeys>> {
        let call = HubCall::Top {
            rule: rule.to_string(),
            since_ms,
        };
        self.ask_each_hub(&call, |reply| match reply {
            HubReply::Top(top) => Ok(top),
            other => Err(other),
        })
        .await
    }

    /// Each hub's first `limit` bans after `after`, newest first.
    pub async fn hub_bans(
        &self,
        limit: u32,
        after: Option<BanCursor>,
    ) -> Vec<Result<Vec<BanRecord>>> {
        self.ask_each_hub(&HubCall::Bans { limit, after }, |reply| match reply {
            HubReply::Bans(bans) => Ok(bans),
            other => Err(other),
        })
        .await
    }

    /// One call to every hub, each reply taken by `take` (which hands back
    /// a reply of another kind, an error).
    async fn ask_each_hub<T>(
        &self,
        call: &HubCall,
        take: impl Fn(HubReply) -> std::result::Result<T, HubReply>,
    ) -> Vec<Result<T>> {
        self.each_hub(call)
            .await
            .into_iter()
            .map(|reply| {
                take(reply?).map_err(|other| unexpected(HUB_BINDING, call.name(), other.name()))
            })
            .collect()
    }

    /// The same call to every hub at once, in hub order.
    async fn each_hub(&self, call: &HubCall) -> Vec<Result<HubReply>> {
        let calls = (0..HUBS)
            .map(|n| {
                let name = hub_name(n);
                Box::pin(async move { self.hub(&name, call).await })
            })
            .collect();
        joined(calls).await
    }

    /// One call to a room's shard.
    pub async fn room(&self, shard: &ObjectName, call: &RoomCall) -> Result<RoomReply> {
        self.exchange(ROOM_BINDING, shard.as_str(), call, |text| {
            RoomReply::from_json(text).ok()
        })
        .await
    }

    /// Calls to several shards at once, answered in the order given.
    pub async fn rooms(&self, calls: &[(ObjectName, RoomCall)]) -> Vec<Result<RoomReply>> {
        let calls = calls
            .iter()
            .map(|(shard, call)| Box::pin(self.room(shard, call)))
            .collect();
        joined(calls).await
    }

    async fn limiter(&self, object: &str, call: &LimiterCall) -> Result<LimiterReply> {
        self.exchange(LIMITER_BINDING, object, call, |text| {
            LimiterReply::from_json(text).ok()
        })
        .await
    }

    async fn hub(&self, object: &str, call: &HubCall) -> Result<HubReply> {
        self.exchange(HUB_BINDING, object, call, |text| {
            HubReply::from_json(text).ok()
        })
        .await
    }

    /// One call to an object within the deadline, and its reply as `read`
    /// reads it. Anything but a 200 with a reply (a problem, a failure) is
    /// an error.
    async fn exchange<C: crate::json::Write, R>(
        &self,
        binding: &'static str,
        object: &str,
        call: &C,
        read: fn(&str) -> Option<R>,
    ) -> Result<R> {
        let text = self
            .post(binding, object, &crate::json::to_string(call))
            .await?;
        read(&text).ok_or_else(|| worker::Error::RustError(format!("{binding} answered no reply")))
    }

    /// Sends `body` to an object's `serve` within the deadline and
    /// answers the text of its reply. Apart from
    /// [`exchange`](Self::exchange), which is generic, so that the key
    /// objects', the hubs' and the rooms' calls share one copy of it.
    ///
    /// By the runtime's RPC (`edge::rpc`): a string in, a string out, where
    /// a `Request` and a `Response` cost a wasm↔JS call per part and an
    /// await for each body. The deadline races the call against the
    /// runtime's `scheduler.wait`, which needs no closure: a call that
    /// loses is left to finish unheard. An object that fails, or refuses
    /// the call with a problem, rejects it.
    async fn post(&self, binding: &'static str, object: &str, body: &str) -> Result<String> {
        CALLS.with(|calls| calls.borrow_mut().count(binding));
        let reply = rpc::call(
            self.env.as_ref(),
            binding,
            object,
            body,
            self.timeout_ms as f64,
        )?;
        let answered = JsFuture::from(reply).await?;
        answered.as_string().ok_or_else(|| {
            worker::Error::RustError(format!(
                "{binding} did not answer within {} ms",
                self.timeout_ms
            ))
        })
    }
}

/// Runs `calls` at once and answers their outputs in order.
///
/// Joined by hand rather than with `futures_util`'s `join_all`, which for
/// a long list switches to `FuturesOrdered`: that branch was linked for the
/// hubs' calls and never taken with 16 hubs.
/// Each call is boxed so that it stays put while it is polled.
async fn joined<F: Future>(mut calls: Vec<Pin<Box<F>>>) -> Vec<F::Output> {
    let mut outputs: Vec<Option<F::Output>> = calls.iter().map(|_| None).collect();
    poll_fn(|cx| {
        let mut waiting = false;
        for (output, call) in outputs.iter_mut().zip(&mut calls) {
            if output.is_none() {
                match call.as_mut().poll(cx) {
                    Poll::Ready(answer) => *output = Some(answer),
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// An object that answered a call with a reply meant for another: both
/// sides are this crate, so only a mixed deployment could cause it.
fn unexpected(binding: &str, call: &str, reply: &str) -> worker::Error {
    worker::Error::RustError(format!("{binding} answered {call:?} with {reply:?}"))
}

/// A lease id nobody can guess, so nobody can release someone else's lease.
pub fn new_lease_id() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| worker::Error::RustError(format!("no randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Two random numbers, to route a request to the parts of a split quota.
pub fn random_pair() -> Result<(u32, u32)> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| worker::Error::RustError(format!("no randomness: {e}")))?;
    let [a0, a1, a2, a3, b0, b1, b2, b3] = bytes;
    Ok((
        u32::from_le_bytes([a0, a1, a2, a3]),
        u32::from_le_bytes([b0, b1, b2, b3]),
    ))
}
