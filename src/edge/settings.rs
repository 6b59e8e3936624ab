//! The validated config and the secrets it names, read once per isolate.
//!
//! Vars and secrets cannot change while an isolate lives (a new deployment
//! or secret starts new isolates), so the first request pays for parsing
//! and validation and the rest reuse the result, including an error, which
//! is logged once.

use std::cell::OnceCell;
use std::rc::Rc;

use worker::{console_error, Env};

use crate::config::{Config, ConfigError};
use crate::http::jwt::Hs256Key;

pub struct Settings {
    pub config: Config,
    /// The HS256 key, when the config verifies JWTs.
    pub jwt_key: Option<Hs256Key>,
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

fn load(env: &Env) -> Result<Settings, ConfigError> {
    let value = env
        .object_var::<serde_json::Value>("SLUICE")
        .unwrap_or(serde_json::Value::Null);
    let config = Config::from_value(value)?;
    let jwt_key = match &config.jwt {
        None => None,
        Some(jwt) => {
            let secret = env
                .secret(&jwt.secret)
                .map(|s| s.to_string())
                .unwrap_or_default();
            if secret.is_empty() {
                return Err(ConfigError {
                    field: "SLUICE.jwt.secret".into(),
                    message: format!(
                        "no secret named {name}: set it with `wrangler secret put {name}` (or in .dev.vars locally)",
                        name = jwt.secret
                    ),
                });
            }
            Some(Hs256Key::new(secret.as_bytes()))
        }
    };
    Ok(Settings { config, jwt_key })
}
