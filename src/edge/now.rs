//! Answering a call into the wasm at once when its future is ready on its
//! first poll, and as a promise only when it waits. wasm-bindgen's async
//! exports cost, on every call, a promise, an executor closure, a spawned
//! task and a `queueMicrotask` per awaited promise, and the runtime one
//! more turn to read the answer (BENCHMARKS.md, "The call itself"). The
//! worker's `fetch` (a decision from a block awaits nothing) and the
//! objects' `serve` (a decision on a loaded key) are answered this way.

use std::future::{poll_fn, Future};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::future_to_promise;

/// `answer`'s value, polled once here: at once when it is ready, else a
/// promise of it.
///
/// The first poll's waker forwards to the waker of each later poll: a
/// future may keep the waker it was first polled with (`worker::Delay`
/// does), and that one must still reach the promise's task.
pub fn or_promise(
    answer: impl Future<Output = Result<JsValue, JsValue>> + 'static,
) -> Result<JsValue, JsValue> {
    let forward = Arc::new(Forward::default());
    let mut answer = Box::pin(answer);
    let waker = Waker::from(Arc::clone(&forward));
    match answer.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(done) => done,
        Poll::Pending => Ok(future_to_promise(poll_fn(move |cx| {
            forward.to(cx.waker());
            answer.as_mut().poll(cx)
        }))
        .into()),
    }
}

/// A waker that wakes whichever waker it was last told to.
#[derive(Default)]
struct Forward(Mutex<Option<Waker>>);

impl Forward {
    fn to(&self, waker: &Waker) {
        if let Ok(mut target) = self.0.lock() {
            target.clone_from(&Some(waker.clone()));
        }
    }
}

impl Wake for Forward {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let target = self.0.lock().ok().and_then(|target| target.clone());
        if let Some(target) = target {
            target.wake();
        }
    }
}
