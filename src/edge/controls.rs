//! The states of rules that neither count a global quota (whose parts
//! hold their state) nor are waiting rooms (whose shards do), in Workers KV: one key
//! ([`STATES_KEY`]) of the namespace bound as [`BINDING`] holds every such
//! rule's state ([`RuleStates`]). Each isolate reads it in the background
//! at most once per `REFRESH_MS` ([`upkeep`]); no request waits for it. The
//! admin API rewrites it and applies the change to its own isolate at once.
//! Also the lookup other parts of the edge call: [`rule_state`].

use std::cell::{Cell, RefCell};

use wasm_bindgen::{JsCast, JsValue};
use worker::js_sys::{Function, Promise, Reflect};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_error, Context, Env, Result};

use super::clock::now_ms;
use crate::config::lookup::state_in_parts;
use crate::config::{Config, Rule};
use crate::control::{Control, RuleStates};
use crate::isolate::states::StateCopy;

/// The KV namespace binding in wrangler.toml.
pub const BINDING: &str = "RULE_STATES";

/// The one key the states are kept under.
pub const STATES_KEY: &str = "rule-states";

thread_local! {
    static COPY: RefCell<StateCopy> = RefCell::new(StateCopy::new());
    /// Whether a missing binding was logged already: said once per isolate.
    static WARNED: Cell<bool> = const { Cell::new(false) };
}

/// The state of rule `rule` (a rule's id) when an operator paused or
/// closed it, as this isolate last read it: a lookup in memory, never I/O.
/// A global quota's state lives in its parts (so does the state of a rule
/// with a global layer), a waiting room's in its shards, and none is here.
pub fn rule_state(rule: &str, now_ms: u64) -> Option<Control> {
    COPY.with(|copy| copy.borrow().get(rule, now_ms).cloned())
}

/// Whether the states' KV namespace is bound.
pub fn bound(env: &Env) -> bool {
    Reflect::get(env.as_ref(), &JsValue::from_str(BINDING)).is_ok_and(|ns| !ns.is_undefined())
}

/// How many rules this isolate holds paused or closed, for operators.
pub fn held() -> usize {
    COPY.with(|copy| copy.borrow().len())
}

/// Starts a read of the states in the background when one is due (at once
/// in a new isolate, then every `every_ms`) and the config has a rule
/// they can concern. The request that triggers it never waits for it.
pub fn upkeep(env: &Env, ctx: &Context, config: &Config, every_ms: u64) {
    if !config.rules.iter().any(kept_in_kv) {
        return;
    }
    if COPY.with(|copy| copy.borrow_mut().claim(now_ms(), every_ms)) {
        let env = env.clone();
        ctx.wait_until(async move {
            match read(&env).await {
                Ok(states) => COPY.with(|copy| copy.borrow_mut().replace(states, now_ms())),
                Err(e) => warn(&e),
            }
        });
    }
}

/// Sets rule `rule`'s state in KV, keeping only the states of rules the
/// config has, and applies it to this isolate at once; answers the state
/// it replaced (`None`: open). Two changes written at the same moment
/// through two isolates may lose one: KV keeps the last write of the key.
pub async fn write(
    env: &Env,
    config: &Config,
    rule: &str,
    control: Control,
) -> Result<Option<Control>> {
    let mut states = read(env).await?;
    let previous = states.set(rule, control.clone());
    states.retain(|id| config.rules.iter().any(|r| r.id == id && kept_in_kv(r)));
    call(env, "put", &[STATES_KEY.into(), states.encode().into()]).await?;
    COPY.with(|copy| copy.borrow_mut().set(rule, control, now_ms()));
    Ok(previous)
}

/// Whether a rule's state is kept here: not one its parts hold (a global
/// quota's or a global layer's), not a room's.
fn kept_in_kv(rule: &Rule) -> bool {
    rule.room.is_none() && !state_in_parts(rule)
}

/// The states as KV holds them: none when the key was never written. A
/// value that is not a document is an error, so a reader keeps what it has.
pub async fn read(env: &Env) -> Result<RuleStates> {
    let value = call(env, "get", &[STATES_KEY.into()]).await?;
    match value.as_string() {
        None => Ok(RuleStates::new()),
        Some(text) => RuleStates::decode(&text).ok_or_else(|| {
            worker::Error::RustError(format!("{BINDING}: {STATES_KEY} holds no rule states"))
        }),
    }
}

/// Calls the KV binding's `method` with `args` and awaits its promise.
/// The binding is the runtime's own object, called directly: `worker`'s
/// wrapper builds its options with `serde_wasm_bindgen`, which this one
/// call does not need.
async fn call(env: &Env, method: &str, args: &[JsValue]) -> Result<JsValue> {
    let namespace = Reflect::get(env.as_ref(), &JsValue::from_str(BINDING))?;
    if namespace.is_undefined() {
        return Err(worker::Error::RustError(format!(
            "no KV namespace bound as {BINDING}: add it to wrangler.toml (see docs/operations.md)"
        )));
    }
    let function: Function = Reflect::get(&namespace, &JsValue::from_str(method))?.dyn_into()?;
    let promise: Promise = match args {
        [key] => function.call1(&namespace, key)?,
        [key, value] => function.call2(&namespace, key, value)?,
        _ => function.call0(&namespace)?,
    }
    .dyn_into()?;
    Ok(JsFuture::from(promise).await?)
}

/// Logs a failed background read, once per isolate: the states in force
/// stay as they were.
fn warn(e: &worker::Error) {
    if !WARNED.with(|warned| warned.replace(true)) {
        console_error!("sluice: could not read the rule states: {e}");
    }
}
