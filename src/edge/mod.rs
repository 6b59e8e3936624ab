//! Everything that touches the Workers runtime: the fetch entry point
//! (proxy, decision API), the container Durable Object and its alarm.
//! It is thin glue over `config`, `http`, `ledger` and `limit`.

mod client;
mod container;
mod endpoints;
mod incoming;
mod proxy;
mod respond;
mod settings;

pub use container::Limiter;

use worker::{console_error, event, Context, Env, Request, Response, Result};

use crate::config::Rule;
use crate::http::problem::Problem;
use incoming::Parts;
use proxy::Admission;

/// Milliseconds since the epoch from JS `Date.now()`; `SystemTime` panics
/// in wasm. Inside Workers it only advances across I/O.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let config = match settings::config(&env) {
        Ok(config) => config,
        Err(e) => {
            let problem = Problem::new(
                500,
                "invalid-config",
                format!("Sluice's configuration is invalid: {e}"),
            )
            .with("field", e.field.as_str());
            return respond::problem(&problem);
        }
    };
    let path = req.path();
    if let Some(own) = config.own_path(&path) {
        return endpoints::serve(req, &env, own).await;
    }
    let method = req.method().to_string();
    match config.rule_for(&method, &path) {
        None => proxy::forward(req, &config, None).await,
        Some(rule) => limited(req, &env, &config, rule).await,
    }
}

/// A request that a rule matched: key it, decide in the key's container,
/// then refuse or forward.
async fn limited(
    req: Request,
    env: &Env,
    config: &crate::config::Config,
    rule: &Rule,
) -> Result<Response> {
    let key = match rule.key.build(&Parts::of(&req)) {
        Ok(key) => key,
        Err(missing) => {
            return respond::problem(
                &Problem::new(400, "missing-key", missing.to_string())
                    .with("rule", rule.id.as_str()),
            );
        }
    };
    let object = format!("rule:{}:{key}", rule.id);
    let policies = [(rule.id.clone(), rule.policy)];
    let outcome = match client::check(env, &object, &policies, 1).await {
        Ok(outcome) => outcome,
        Err(e) => {
            console_error!("sluice: rule {} could not decide: {e}", rule.id);
            return endpoints::unavailable();
        }
    };
    if !outcome.allowed {
        return respond::refused(&rule.id, &outcome);
    }
    let admission = Admission {
        rule_id: &rule.id,
        key: &key,
        outcome: &outcome,
    };
    proxy::forward(req, config, Some(admission)).await
}
