//! The operator's dashboard: `{prefix}/admin/` and its files, served from
//! the Workers static assets the build writes to `build/dashboard` (see
//! docs/http-api.md, "Dashboard"). The worker runs first on every request and
//! fetches a file through the `ASSETS` binding only here, after the admin
//! API has checked that `ADMIN_TOKEN` is set: without it the page does not
//! exist. The files hold no data; the page asks for the token and sends it
//! to the admin API, whose answers carry [`protect_data`]'s fields.

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::Fetcher;
use worker::{web_sys, Env, Headers, Method, Response, Result};

use super::endpoints::not_allowed;
use super::incoming::ClientRequest;
use super::respond;
use crate::http::problem::{Code, Problem};

/// The page loads its own script, style and icon and talks to its own
/// origin only: no inline script or style, no other host, no frames.
const PAGE_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Admin API answers are data, never a document to render.
const DATA_POLICY: &str = "default-src 'none'; frame-ancestors 'none'";

/// One of the dashboard's files, by its name in the asset directory.
pub async fn file(req: &ClientRequest, env: &Env, file: &str) -> Result<Response> {
    if !matches!(req.known_method(), Some(Method::Get | Method::Head)) {
        return not_allowed("GET, HEAD");
    }
    let asset = asset(env, file).await?;
    if asset.status_code() != 200 {
        return respond::problem(&Problem::new(
            Code::NotFound,
            format!(
                "the dashboard's {file} is not in the deployed assets: build with scripts/build.sh"
            ),
        ));
    }
    let mut response = respond::with_mutable_headers(asset);
    let headers = response.headers_mut();
    headers.set("content-security-policy", PAGE_POLICY)?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("referrer-policy", "no-referrer")?;
    headers.set("x-frame-options", "DENY")?;
    headers.set("cache-control", "no-cache")?;
    Ok(response)
}

/// The asset `file`, fetched through the raw binding: `worker::Fetcher::fetch`
/// takes an optional `worker::RequestInit`, whose conversion (with the `cf`
/// options' serialisation) is linked even when none is given.
async fn asset(env: &Env, file: &str) -> Result<Response> {
    let assets: Fetcher = env.assets("ASSETS")?.into_rpc();
    let promise = assets.fetch_with_str(&format!("https://assets.invalid/{file}"))?;
    let answer: web_sys::Response = JsFuture::from(promise).await?.dyn_into()?;
    Ok(Response::from(answer))
}

/// `{prefix}/admin` sent to `{prefix}/admin/`, where the page's relative
/// URLs resolve below the admin path.
pub fn home(prefix: &str) -> Result<Response> {
    let headers = Headers::new();
    headers.set("location", &format!("{prefix}/admin/"))?;
    headers.set("referrer-policy", "no-referrer")?;
    Ok(Response::empty()?.with_status(308).with_headers(headers))
}

/// What every admin API answer carries: never cached or sniffed as a
/// document, never framed, no referrer.
pub fn protect_data(headers: &Headers) -> Result<()> {
    headers.set("cache-control", "no-store")?;
    headers.set("content-security-policy", DATA_POLICY)?;
    headers.set("x-content-type-options", "nosniff")?;
    headers.set("referrer-policy", "no-referrer")?;
    Ok(())
}
