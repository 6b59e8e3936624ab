//! Releasing a request's lease once its response has been delivered: the
//! release is registered with `waitUntil` when the lease is granted and
//! triggered by dropping a guard that travels with the body stream, so it
//! runs when the last byte goes, forwarding fails or the client leaves.

use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use futures_channel::oneshot;
use futures_util::Stream;
use worker::{console_error, Context, Response, ResponseBody, Result};

use super::client::Objects;
use crate::objects::name::ObjectName;

/// Dropping it releases the lease.
pub struct ReleaseGuard {
    _dropped: oneshot::Sender<()>,
}

/// Registers the release of lease `lease_id` of `object`, to run when the
/// returned guard is dropped.
pub fn release_on_drop(
    ctx: &Context,
    objects: Objects,
    object: ObjectName,
    lease_id: String,
) -> ReleaseGuard {
    let (dropped, released) = oneshot::channel::<()>();
    ctx.wait_until(async move {
        // Resolves (cancelled) when the guard is dropped.
        let _ = released.await;
        if let Err(e) = objects.release(object.as_str(), &lease_id).await {
            console_error!("sluice: could not release lease {lease_id} of {object}: {e}");
        }
    });
    ReleaseGuard { _dropped: dropped }
}

/// The response, with the guard riding on its body so the lease is released
/// once the body is delivered (at once for a body held in memory, which is
/// sent in one go).
pub fn hold_until_delivered(mut response: Response, guard: ReleaseGuard) -> Result<Response> {
    if !matches!(response.body(), ResponseBody::Stream(_)) {
        return Ok(response);
    }
    let status = response.status_code();
    let headers = response.headers().clone();
    let body = Guarded {
        inner: response.stream()?,
        _guard: guard,
    };
    Ok(Response::from_stream(body)?
        .with_status(status)
        .with_headers(headers))
}

/// A body stream that carries the release guard.
struct Guarded<S> {
    inner: S,
    _guard: ReleaseGuard,
}

impl<S: Stream + Unpin> Stream for Guarded<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Option<S::Item>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}
