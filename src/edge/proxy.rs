//! Forwarding requests to the origin, or answering them with the built-in
//! demo origin (only when the config says `origin = "demo"`).

use std::cell::Cell;
use std::time::Duration;

use crate::json;
use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_error, js_sys, web_sys, Delay, Headers, Response, Result};

use super::clock::now_ms;
use super::incoming::ClientRequest;
use super::respond;
use super::settings::Settings;
use crate::config::Origin;
use crate::http::forward::{to_origin, Facts, OriginAuth};
use crate::http::key::client_ip;
use crate::http::problem::{Code, Problem};
use crate::http::url;

/// What Sluice adds on the way back, and what the demo origin echoes.
pub struct Forward<'a> {
    pub rule_id: Option<&'a str>,
    pub key: Option<&'a str>,
    /// Fields added to the origin's response (RateLimit, Sluice-Shadow...).
    pub headers: Headers,
    /// The request's `Sluice-Room-Pass`, when it holds a room's session.
    pub room_pass: Option<String>,
}

impl Forward<'_> {
    /// A request no rule limits.
    pub fn untouched() -> Forward<'static> {
        Forward {
            rule_id: None,
            key: None,
            headers: Headers::new(),
            room_pass: None,
        }
    }
}

/// Sends the request on with its method, path, query and body, and with
/// the header fields `http::forward::to_origin` passes, and adds
/// `forward.headers` to the response.
pub async fn forward(
    req: ClientRequest,
    settings: &Settings,
    forward: Forward<'_>,
) -> Result<Response> {
    let target = match &settings.config.origin {
        Origin::Demo => return demo(&req, forward).await,
        Origin::Route => Ok(req.url().to_string()),
        Origin::Url(base) => Ok(below(&req, base)),
    };
    let pass = forward.room_pass.as_deref();
    let response = match target.and_then(|target| upstream(&req, &target, settings, pass)) {
        Ok(upstream) => send(&upstream).await,
        Err(e) => Err(e),
    };
    let response = match response {
        Ok(response) => response,
        Err(e) => {
            console_error!("sluice: origin unreachable: {e}");
            return respond::problem(&Problem::new(
                Code::OriginUnreachable,
                "the origin could not be reached",
            ));
        }
    };
    if forward.headers.entries().next().is_none() {
        return Ok(response);
    }
    let response = respond::with_mutable_headers(response);
    for (name, value) in forward.headers.entries() {
        response.headers().set(&name, &value)?;
    }
    Ok(response)
}

/// `base` + the request's path and query.
fn below(req: &ClientRequest, base: &str) -> String {
    match url::query(req.url()) {
        Some(query) => format!("{base}{}?{query}", req.path()),
        None => format!("{base}{}", req.path()),
    }
}

/// The request aimed at `target`, carrying the fields the origin may see.
///
/// Made with the runtime's own `Request` and `RequestInit`, as
/// `client::Objects` makes its calls: `worker::RequestInit`'s conversion
/// also writes the `cf` options Sluice never sets, and brings their
/// serialisation with it.
fn upstream(
    req: &ClientRequest,
    target: &str,
    settings: &Settings,
    room_pass: Option<&str>,
) -> Result<web_sys::Request> {
    let auth = match (&settings.config.origin_auth, &settings.origin_secret) {
        (Some(auth), Some(secret)) => Some(OriginAuth {
            header: &auth.header,
            secret,
        }),
        _ => None,
    };
    let received = url::scheme_and_host(req.url());
    let facts = Facts {
        client: client_ip(req),
        host: received.map(|(_, host)| host),
        proto: received.map(|(scheme, _)| scheme),
        keep: &settings.config.keep_headers,
        auth,
        room_pass,
    };
    let headers = Headers::new();
    for (name, value) in to_origin(req.headers().entries().collect(), &facts) {
        headers.append(&name, &value)?;
    }
    headers.set(LOOP_FIELD, "1")?;
    // The runtime's own init rather than `worker`'s, whose `Method` has no
    // name for PROPFIND and the like and would send them as GET.
    let init = web_sys::RequestInit::new();
    init.set_method(req.method_as_sent());
    init.set_headers(headers.as_ref());
    init.set_redirect(web_sys::RequestRedirect::Manual);
    if let Some(body) = req.body() {
        init.set_body(&body);
    }
    web_sys::Request::new_with_str_and_init(target, &init).map_err(|e| {
        worker::Error::JsError(
            e.as_string()
                .unwrap_or_else(|| "invalid URL or options for Request".to_string()),
        )
    })
}

/// `fetch(request)`, answered with the origin's response as it came.
async fn send(request: &web_sys::Request) -> Result<Response> {
    let global: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
    let answer = JsFuture::from(global.fetch_with_request(request)).await?;
    Ok(Response::from(answer.dyn_into::<web_sys::Response>()?))
}

/// The field Sluice adds to every request it forwards. An origin that leads
/// back to Sluice (`origin = "route"` under `wrangler dev`, or a URL of the
/// worker itself) would otherwise forward the request to itself forever,
/// each pass counted by the rules and holding a connection open.
const LOOP_FIELD: &str = "sluice-loop";

/// Whether this request was already forwarded by a Sluice.
pub fn has_looped(req: &ClientRequest) -> bool {
    req.headers().has(LOOP_FIELD).unwrap_or(false)
}

/// The answer to a request that came back to Sluice: `508 Loop Detected`.
pub fn loop_detected() -> Result<Response> {
    respond::problem(&Problem::new(
        Code::LoopDetected,
        "this request was already forwarded by Sluice: the origin leads back to Sluice itself; set origin to the server behind it",
    ))
}

/// The longest the demo origin holds a request (`?hold_ms=`).
const MAX_HOLD_MS: u64 = 10_000;

/// The most requests the demo origin holds at once in one isolate. Held
/// requests cost memory and timers while doing nothing, so a demo left
/// reachable must not let anyone pile them up; enough for the concurrency
/// examples and tests.
const MAX_HELD: u32 = 32;

thread_local! {
    /// Requests the demo origin is serving now, and the most it ever served
    /// at once: what a concurrency limit in front of it is meant to bound.
    static DEMO_IN_FLIGHT: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// Counts a request in flight at the demo origin while it lives.
struct InFlight;

impl InFlight {
    fn enter() -> (InFlight, u32) {
        let now = DEMO_IN_FLIGHT.with(|cell| {
            let (current, peak) = cell.get();
            cell.set((current + 1, peak.max(current + 1)));
            current + 1
        });
        (InFlight, now)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        DEMO_IN_FLIGHT.with(|cell| {
            let (current, peak) = cell.get();
            cell.set((current.saturating_sub(1), peak));
        });
    }
}

/// The demo origin: a small JSON echo, so `npm run dev` shows Sluice
/// working with nothing else set up. `?hold_ms=N` makes it take N ms
/// (at most 10 s), standing in for a slow endpoint; it reports how many
/// requests it was serving when this one arrived, and the peak. A request
/// that would be held while `MAX_HELD` already are gets 503 at once.
async fn demo(req: &ClientRequest, forward: Forward<'_>) -> Result<Response> {
    let param =
        |name: &str| url::param(req.url(), name).and_then(|value| value.parse::<u64>().ok());
    let hold_ms = param("hold_ms").unwrap_or(0).min(MAX_HOLD_MS);
    // `?status=401` answers that status, so a rule that counts by answer
    // can be tried with curl alone.
    let status = param("status")
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| (200..=599).contains(s))
        .unwrap_or(200);
    // Only held requests stay in flight across an await, so the count of
    // those in flight is the count of those held.
    let held = DEMO_IN_FLIGHT.with(|cell| cell.get().0);
    if hold_ms > 0 && held >= MAX_HELD {
        let headers = Headers::new();
        headers.set("retry-after", "1")?;
        let problem = Problem::new(
            Code::DemoBusy,
            format!("the demo origin holds at most {MAX_HELD} requests at once"),
        );
        return respond::problem_with(&problem, headers);
    }
    let (_in_flight, arrived_with) = InFlight::enter();
    if hold_ms > 0 {
        Delay::from(Duration::from_millis(hold_ms)).await;
    }
    let peak = DEMO_IN_FLIGHT.with(|cell| cell.get().1);
    let body = json!({
        "origin": "sluice demo",
        "method": req.method_as_sent(),
        "path": req.path(),
        "rule": forward.rule_id,
        "key": forward.key,
        "time_ms": now_ms(),
        "in_flight": arrived_with,
        "peak_in_flight": peak,
        "status": status,
    });
    // `?room=end` answers as an origin does when a visitor is done (a
    // checkout completed): a waiting room in front ends its session. Any
    // other word is sent too, to show that the room takes the field out.
    let room = url::param(req.url(), "room")
        .filter(|word| !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric()));
    if let Some(word) = room {
        forward.headers.set("sluice-room", &word)?;
    }
    Ok(respond::json(&body, forward.headers)?.with_status(status))
}
