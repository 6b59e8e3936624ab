//! Everything that touches the Workers runtime: the fetch entry point
//! (proxy, decision API, admin API), the key object and hub Durable
//! Objects and their alarms, and what an isolate keeps between requests.
//! It is thin glue over `config`, `http`, `ledger` and `limit`.

mod admin;
mod blocks;
mod client;
mod clock;
mod controls;
mod dashboard;
mod delivery;
mod endpoints;
mod gate;
mod hub;
mod incoming;
mod isolate;
mod limiter;
mod proxy;
mod quota;
mod respond;
mod room;
mod rpc;
mod settings;
mod storage;

pub use hub::Hub;
pub use limiter::Limiter;
pub use room::Room;

use worker::{event, web_sys, Context, Env, Result};

use crate::gate::Matched;
use crate::http::admin::admin_path;
use crate::http::key::client_ip;
use crate::http::path::RequestPath;
use crate::http::problem::{Code, Problem};
use crate::http::Incoming;
use client::Objects;
use incoming::ClientRequest;
use proxy::Forward;
use respond::Reply;

#[event(fetch)]
async fn fetch(raw: web_sys::Request, env: Env, ctx: Context) -> Result<Reply> {
    let req = ClientRequest::new(raw);
    let settings = match settings::settings(&env) {
        Ok(settings) => settings,
        Err(e) => {
            let problem = Problem::new(
                Code::InvalidConfig,
                format!("Sluice's configuration is invalid: {e}"),
            )
            .with("field", e.field.as_str());
            return respond::problem(&problem).map(Reply::from);
        }
    };
    let config = &settings.config;
    let objects = Objects::new(&env, config.timeout_ms);
    isolate::upkeep(&objects, &ctx, settings.report_ms);
    controls::upkeep(&env, &ctx, config, settings.refresh_ms);
    let path = req.path().to_string();
    let own = config.own_path(&path);
    // The client's address, a header read and parsed: Sluice's own paths
    // read it only when a deny list or a manual ban could hold it (its
    // cost: BENCHMARKS.md); rules need it.
    let ip = if own.is_none() || !config.deny.is_empty() || isolate::any_manual_ban() {
        client_ip(&req)
    } else {
        None
    };
    // The deny list holds on every path, Sluice's own endpoints included:
    // a denied client gets no decisions, no health answer, no admin API.
    if ip.is_some_and(|ip| config.deny.contains(ip)) {
        return respond::problem(&crate::gate::denied("*")).map(Reply::from);
    }
    if let Some(own) = own {
        // So does an operator's ban on the client's address or network.
        if let Some(banned) = isolate::address_banned(ip, config.ipv6_prefix) {
            return respond::answer(&banned).map(Reply::from);
        }
        return match admin_path(own) {
            Some(below) => admin::serve(req, &env, &objects, below)
                .await
                .map(Reply::from),
            None => endpoints::serve(req, &env, &ctx, &objects, own).await,
        };
    }
    if proxy::has_looped(&req) {
        return proxy::loop_detected().map(Reply::from);
    }
    let method = Incoming::method(&req).to_string();
    let path = RequestPath::new(&path);
    let response = match config.rule_for(&method, &path) {
        None => proxy::forward(req, &settings, Forward::untouched()).await,
        Some((rule, params)) => {
            let matched = Matched {
                rule,
                path: path.form(rule.paths).text(),
                params: &params,
                ip,
                also: true,
            };
            // A room's own rule, or a rule behind a room, goes through it.
            match config.room_for(rule) {
                Some(room) => room::serve(req, &ctx, &objects, &settings, room, matched).await,
                None => gate::limited(req, &ctx, &objects, &settings, matched, None).await,
            }
        }
    };
    response.map(Reply::from)
}
