//! The admin API's counts: `GET {prefix}/admin/stats`, read from every hub
//! after this isolate has sent what it holds.

use serde_json::json;
use worker::{console_error, Headers, Response, Result};

use super::client::{hub_name, Objects};
use super::clock::now_ms;
use super::{isolate, respond};
use crate::http::admin::{SINCE, TOP_MINUTES};
use crate::http::params::Params;
use crate::isolate::report::HUBS;
use crate::isolate::stats::summarize;

/// `GET /admin/stats?since=<ms>&top_minutes=<1..60>`: counts, top refused
/// keys and the hubs' own figures, merged from every hub. A hub that does
/// not answer is named in `unreachable`, and the rest still count.
pub async fn get(objects: &Objects, params: &Params) -> Result<Response> {
    let (since, top_minutes) = match (params.whole(&SINCE), params.whole(&TOP_MINUTES)) {
        (Ok(since), Ok(top_minutes)) => (since, top_minutes),
        (Err(problem), _) | (_, Err(problem)) => return respond::problem(&problem),
    };
    isolate::report(objects).await;
    let mut rows = Vec::new();
    let mut top = Vec::new();
    let mut shared = serde_json::Map::new();
    let mut unreachable = Vec::new();
    for (n, summary) in (0..HUBS).zip(objects.hub_summaries(since).await) {
        match summary {
            Ok(summary) => {
                shared.insert(hub_name(n), json!({"requests": summary.requests}));
                rows.extend(summary.stats);
                top.extend(summary.top);
            }
            Err(e) => {
                console_error!("sluice: hub {n} did not answer: {e}");
                unreachable.push(hub_name(n));
            }
        }
    }
    let mut body = serde_json::to_value(summarize(&rows, &top, since, top_minutes, now_ms()))?;
    body["shared"] = shared.into();
    body["unreachable"] = unreachable.into();
    body["isolate"] = isolate::figures();
    respond::json(&body, Headers::new())
}
