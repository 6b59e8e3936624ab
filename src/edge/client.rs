//! Calls from the worker to Durable Objects (key containers and the
//! hubs), each bounded by a deadline so that a slow object cannot hold a
//! request forever.

use std::time::Duration;

use futures_util::future::{join_all, select, Either};
use serde::de::DeserializeOwned;
use serde::Serialize;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::DurableObject;
use worker::{web_sys, Delay, Env, Method, Result};

use crate::isolate::banlist::BanRecord;
use crate::isolate::report::{HubAnswer, HubSummary, Report, HUBS};
use crate::ledger::Outcome;
use crate::limit::gcra::Throttle;
use crate::limit::lease::Lease;
use crate::protocol::{
    CheckRequest, KeyRequest, KeyState, LeaseRequest, OverrideRequest, SettleAnswer, SettleRequest,
    ThrottleRequest, UnbanRequest, WireOverride,
};

/// The container objects' namespace binding in wrangler.toml.
pub const CONTAINERS: &str = "LIMITER";
/// The hubs' namespace binding.
pub const HUB_BINDING: &str = "HUB";

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
        self.call(
            CONTAINERS,
            &request.key,
            Method::Post,
            "check",
            Some(request),
        )
        .await
    }

    /// Extends a live lease; `None` if it is unknown or has lapsed.
    pub async fn renew(&self, key: &str, id: &str, ttl_ms: u64) -> Result<Option<Lease>> {
        let body = LeaseRequest {
            key: key.to_string(),
            id: id.to_string(),
            ttl_ms,
        };
        self.call_maybe(CONTAINERS, key, "renew", &body).await
    }

    /// Drops one hold on a lease; `None` if it is unknown or has lapsed.
    pub async fn release(&self, key: &str, id: &str) -> Result<Option<Lease>> {
        let body = LeaseRequest {
            key: key.to_string(),
            id: id.to_string(),
            ttl_ms: 0,
        };
        self.call_maybe(CONTAINERS, key, "release", &body).await
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
        self.call(
            CONTAINERS,
            &request.key,
            Method::Post,
            "throttle",
            Some(request),
        )
        .await
    }

    /// A key's state, changing nothing.
    pub async fn peek(&self, key: &str) -> Result<KeyState> {
        let body = KeyRequest {
            key: key.to_string(),
        };
        self.call(CONTAINERS, key, Method::Post, "peek", Some(&body))
            .await
    }

    /// Keeps or refunds a reservation; `None` if it is unknown or lapsed.
    pub async fn settle(&self, request: &SettleRequest) -> Result<Option<SettleAnswer>> {
        self.call_maybe(CONTAINERS, &request.key, "settle", request)
            .await
    }

    /// Sets or lifts the override of the key an object holds; answers the
    /// one it replaced.
    pub async fn set_override(
        &self,
        key: &str,
        overridden: Option<WireOverride>,
    ) -> Result<Option<WireOverride>> {
        let body = OverrideRequest {
            key: key.to_string(),
            overridden,
        };
        let answer: serde_json::Value = self
            .call(CONTAINERS, key, Method::Post, "override", Some(&body))
            .await?;
        Ok(serde_json::from_value(answer["previous"].clone()).unwrap_or(None))
    }

    /// Forgets everything about a key; true if there was anything.
    pub async fn reset(&self, key: &str) -> Result<bool> {
        let body = KeyRequest {
            key: key.to_string(),
        };
        let answer: serde_json::Value = self
            .call(CONTAINERS, key, Method::Post, "reset", Some(&body))
            .await?;
        Ok(answer["reset"].as_bool().unwrap_or(false))
    }

    /// Sends an isolate's report to one hub, picked at random so that the
    /// reports of many isolates spread evenly, and takes its answer.
    pub async fn report(&self, report: &Report) -> Result<HubAnswer> {
        let (pick, _) = random_pair()?;
        self.call(
            HUB_BINDING,
            &hub_name(pick % HUBS),
            Method::Post,
            "report",
            Some(report),
        )
        .await
    }

    /// Records a manual ban in every hub, so that every isolate learns it
    /// whichever hub it reports to; false if a hub holds as many manual
    /// bans as it may.
    pub async fn ban_everywhere(&self, record: &BanRecord) -> Result<bool> {
        let mut banned = true;
        for answer in self
            .each_hub::<_, serde_json::Value>(Method::Put, "bans", Some(record))
            .await
        {
            banned &= answer?["banned"].as_bool().unwrap_or(false);
        }
        Ok(banned)
    }

    /// Lifts a ban in every hub; true if any hub held it.
    pub async fn unban_everywhere(&self, key: &str, source: &str) -> Result<bool> {
        let body = UnbanRequest {
            key: key.to_string(),
            source: source.to_string(),
        };
        let mut removed = false;
        for answer in self
            .each_hub::<_, serde_json::Value>(Method::Delete, "bans", Some(&body))
            .await
        {
            removed |= answer?["removed"].as_bool().unwrap_or(false);
        }
        Ok(removed)
    }

    /// What each hub holds: its counts, top refused keys and bans since
    /// `since_ms`, and the requests it has received.
    pub async fn hub_summaries(&self, since_ms: u64) -> Vec<Result<HubSummary>> {
        self.each_hub::<(), _>(Method::Get, &format!("summary?since={since_ms}"), None)
            .await
    }

    /// The same call to every hub at once, in hub order.
    async fn each_hub<B: Serialize, T: DeserializeOwned>(
        &self,
        method: Method,
        route: &str,
        body: Option<&B>,
    ) -> Vec<Result<T>> {
        join_all((0..HUBS).map(|n| {
            let name = hub_name(n);
            let method = method.clone();
            async move { self.call(HUB_BINDING, &name, method, route, body).await }
        }))
        .await
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        binding: &str,
        object: &str,
        method: Method,
        route: &str,
        body: Option<&B>,
    ) -> Result<T> {
        let (status, answer) = self
            .exchange::<B, T>(binding, object, method, route, body)
            .await?;
        answer.ok_or_else(|| worker::Error::RustError(format!("{binding} answered {status}")))
    }

    /// Like `call`, but a 404 from the object is `None`, not an error.
    async fn call_maybe<B: Serialize, T: DeserializeOwned>(
        &self,
        binding: &str,
        object: &str,
        route: &str,
        body: &B,
    ) -> Result<Option<T>> {
        let (status, answer) = self
            .exchange::<B, T>(binding, object, Method::Post, route, Some(body))
            .await?;
        match (status, answer) {
            (_, Some(answer)) => Ok(Some(answer)),
            (404, None) => Ok(None),
            (status, None) => Err(worker::Error::RustError(format!(
                "{binding} answered {status}"
            ))),
        }
    }

    /// One request to an object within the deadline: the status, and the
    /// parsed body when the status is 200.
    ///
    /// Built and read through the runtime's own Request and Response, not
    /// `worker`'s wrappers: those read the object's answer as a stream (a
    /// call per chunk and per reader) and copy every request's method, URL,
    /// headers and `cf` across the wasm boundary on construction, which on a
    /// new key's first request cost more than the object's own work (CPU
    /// profile in BENCHMARKS.md).
    async fn exchange<B: Serialize, T: DeserializeOwned>(
        &self,
        binding: &str,
        object: &str,
        method: Method,
        route: &str,
        body: Option<&B>,
    ) -> Result<(u16, Option<T>)> {
        let init = web_sys::RequestInit::new();
        init.set_method(method.as_ref());
        if let Some(body) = body {
            init.set_body(&JsValue::from_str(&serde_json::to_string(body)?));
        }
        let request =
            web_sys::Request::new_with_str_and_init(&format!("https://object/{route}"), &init)?;
        let stub: DurableObject = self
            .env
            .durable_object(binding)?
            .id_from_name(object)?
            .get_stub()?
            .into_rpc();
        let exchange = async move {
            let response: web_sys::Response = JsFuture::from(stub.fetch_with_request(&request)?)
                .await?
                .dyn_into()?;
            let status = response.status();
            if status != 200 {
                return Ok((status, None));
            }
            let text = JsFuture::from(response.text()?).await?.as_string();
            let text = text
                .ok_or_else(|| worker::Error::RustError(format!("{binding} answered no text")))?;
            Ok((status, Some(serde_json::from_str::<T>(&text)?)))
        };
        let deadline = Delay::from(Duration::from_millis(self.timeout_ms));
        match select(Box::pin(exchange), deadline).await {
            Either::Left((answer, _)) => answer,
            Either::Right(_) => Err(worker::Error::RustError(format!(
                "{binding} did not answer within {} ms",
                self.timeout_ms
            ))),
        }
    }
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
