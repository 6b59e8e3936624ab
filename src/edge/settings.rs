//! The validated config, read once per isolate.
//!
//! Vars cannot change while an isolate lives (a new deployment starts new
//! isolates), so the first request pays for parsing and validation and the
//! rest reuse the result, including an error, which is logged once.

use std::cell::OnceCell;
use std::rc::Rc;

use worker::{console_error, Env};

use crate::config::{Config, ConfigError};

thread_local! {
    static CONFIG: OnceCell<Result<Rc<Config>, ConfigError>> = const { OnceCell::new() };
}

pub fn config(env: &Env) -> Result<Rc<Config>, ConfigError> {
    CONFIG.with(|cell| {
        cell.get_or_init(|| {
            let value = env
                .object_var::<serde_json::Value>("SLUICE")
                .unwrap_or(serde_json::Value::Null);
            let config = Config::from_value(value).map(Rc::new);
            if let Err(e) = &config {
                console_error!("sluice: invalid configuration: {e}");
            }
            config
        })
        .clone()
    })
}
