//! The validated config and the secrets it names, read once per isolate.
//!
//! Vars and secrets cannot change while an isolate lives (a new deployment
//! or secret starts new isolates), so the first request pays for parsing
//! and validation and the rest reuse the result, including an error, which
//! is logged once.

use std::cell::OnceCell;
use std::rc::Rc;

use serde_json::Value;
use wasm_bindgen::JsValue;
use worker::js_sys::{Reflect, JSON};
use worker::{console_error, Env};

use super::client::ROOM_BINDING;
use crate::config::{check_secret_strength, Config, ConfigError};
use crate::http::auth::Token;
use crate::http::jwt::Hs256Key;
use crate::isolate::report::{test_interval, INTERVAL_MS, TEST_INTERVAL_VAR};
use crate::isolate::states::REFRESH_MS;

/// The secret that holds the admin token.
pub const ADMIN_TOKEN: &str = "ADMIN_TOKEN";

/// The secret that holds the decision API's token.
pub const API_TOKEN: &str = "API_TOKEN";

pub struct Settings {
    pub config: Config,
    /// The HS256 key, when the config verifies JWTs.
    pub jwt_key: Option<Hs256Key>,
    /// The admin token; the admin API exists only when it is set.
    pub admin_token: Option<Token>,
    /// The decision API's token; without it the API exists only when the
    /// config says `api = "open"`.
    pub api_token: Option<Token>,
    /// The value sent in `origin_auth.header`, when the config has one.
    pub origin_secret: Option<String>,
    /// The keys each waiting room signs its cookies and its origin's
    /// pass with, by rule id.
    pub room_keys: Vec<(String, RoomKeys)>,
    /// How often the isolate reports to the hubs, and how often it reads
    /// the rules' states: as documented, or shorter in a test.
    pub report_ms: u64,
    pub refresh_ms: u64,
}

/// A waiting room's signing keys.
pub struct RoomKeys {
    pub cookies: Hs256Key,
    /// `Sluice-Room-Pass`'s: the cookies' unless `pass_secret` names
    /// another secret.
    pub pass: Hs256Key,
}

impl Settings {
    /// The keys room `rule` signs with.
    pub fn room_keys(&self, rule: &str) -> Option<&RoomKeys> {
        self.room_keys
            .iter()
            .find(|(id, _)| id == rule)
            .map(|(_, keys)| keys)
    }
}

thread_local! {
    static SETTINGS: OnceCell<Result<Rc<Settings>, ConfigError>> = const { OnceCell::new() };
}

pub fn settings(env: &Env) -> Result<Rc<Settings>, ConfigError> {
    SETTINGS.with(|cell| {
        cell.get_or_init(|| {
            let loaded = load(env).map(Rc::new);
            if let Err(e) = &loaded {
                console_error!("sluice: invalid configuration: {e}");
            }
            loaded
        })
        .clone()
    })
}

/// The config and the secrets it names. A weak admin or API token or origin
/// secret fails like an invalid config (every request answers 500 naming
/// it), so it is found on the first request after a deploy rather than by
/// an attacker.
fn load(env: &Env) -> Result<Settings, ConfigError> {
    let config = Config::from_value(raw_config(env)?)?;
    let jwt_key = match &config.jwt {
        None => None,
        Some(jwt) => Some(Hs256Key::new(
            required_secret(env, &jwt.secret, "SLUICE.jwt.secret")?.as_bytes(),
        )),
    };
    let admin_token = token(env, ADMIN_TOKEN)?;
    let api_token = token(env, API_TOKEN)?;
    let origin_secret = match &config.origin_auth {
        None => None,
        Some(auth) => {
            let field = "SLUICE.origin_auth.secret";
            let value = required_secret(env, &auth.secret, field)?;
            check_secret_strength(field, &auth.secret, &value)?;
            Some(value)
        }
    };
    let room_keys = room_keys(env, &config)?;
    let test_var = env.var(TEST_INTERVAL_VAR).ok().map(|v| v.to_string());
    let test_ms = test_interval(test_var.as_deref()).map_err(|message| ConfigError {
        field: TEST_INTERVAL_VAR.into(),
        message: message.into(),
    })?;
    Ok(Settings {
        config,
        jwt_key,
        admin_token,
        api_token,
        origin_secret,
        room_keys,
        report_ms: test_ms.unwrap_or(INTERVAL_MS),
        refresh_ms: test_ms.unwrap_or(REFRESH_MS),
    })
}

/// Each waiting room's signing key, from the secret its config names: a
/// missing or short one is an invalid config naming the room's field, so
/// no room runs with cookies anyone could forge. A room without the `ROOM`
/// namespace in wrangler.toml is one too, rather than a 503 on every visit.
fn room_keys(env: &Env, config: &Config) -> Result<Vec<(String, RoomKeys)>, ConfigError> {
    let rooms = config
        .rules
        .iter()
        .enumerate()
        .filter_map(|(i, rule)| Some((i, rule, rule.room.as_ref()?)));
    rooms
        .map(|(i, rule, room)| {
            if env.durable_object(ROOM_BINDING).is_err() {
                return Err(ConfigError {
                    field: format!("SLUICE.rules[{i}].waiting_room"),
                    message: format!("a waiting room needs the {ROOM_BINDING} Durable Object binding (class Room) and its migration: see wrangler.toml in Sluice's repository"),
                });
            }
            let key = |name: &str, field: &str| {
                let field = format!("SLUICE.rules[{i}].waiting_room.{field}");
                let value = required_secret(env, name, &field)?;
                check_secret_strength(&field, name, &value)?;
                Ok(Hs256Key::new(value.as_bytes()))
            };
            let cookies = key(&room.secret, "secret")?;
            let pass = match room.pass_secret == room.secret {
                true => cookies.clone(),
                false => key(&room.pass_secret, "pass_secret")?,
            };
            Ok((rule.id.clone(), RoomKeys { cookies, pass }))
        })
        .collect()
}

/// The token in secret `name`, if set, checked for strength.
fn token(env: &Env, name: &str) -> Result<Option<Token>, ConfigError> {
    let Some(token) = secret(env, name) else {
        return Ok(None);
    };
    check_secret_strength(name, name, &token)?;
    Ok(Some(Token::new(&token)))
}

/// A secret's value; an empty one counts as unset.
fn secret(env: &Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .ok()
        .filter(|s| !s.is_empty())
}

/// A secret the config names, which must be set.
fn required_secret(env: &Env, name: &str, field: &str) -> Result<String, ConfigError> {
    secret(env, name).ok_or_else(|| ConfigError {
        field: field.into(),
        message: format!(
            "no secret named {name}: set it with `wrangler secret put {name}` (or in .dev.vars locally)"
        ),
    })
}

/// The `SLUICE` var as JSON: absent (no rules), a JSON string (as the
/// dashboard stores it), or a structured var. A var that is present but
/// unreadable is an error, never a silent "no rules".
///
/// A structured var is written out by the runtime's `JSON.stringify` and
/// parsed as bodies are (`input::tree::parse`), not walked by
/// `Env::object_var` with `serde_wasm_bindgen`, whose reader was in the
/// wasm for this alone (BENCHMARKS.md).
fn raw_config(env: &Env) -> Result<Value, ConfigError> {
    let raw =
        Reflect::get(env.as_ref(), &JsValue::from_str("SLUICE")).unwrap_or(JsValue::UNDEFINED);
    if raw.is_undefined() {
        return Ok(Value::Null);
    }
    if let Some(text) = raw.as_string() {
        return Ok(Value::String(text));
    }
    let unreadable = |e: String| ConfigError {
        field: "SLUICE".into(),
        message: format!("must be a table of settings or a JSON string: {e}"),
    };
    let text = JSON::stringify(&raw)
        .map_err(|e| unreadable(format!("{e:?}")))?
        .as_string()
        .ok_or_else(|| unreadable("it has no JSON form".into()))?;
    crate::input::tree::parse(&text).map_err(|e| unreadable(format!("{e:?}")))
}
