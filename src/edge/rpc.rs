//! How the worker calls its Durable Objects (key objects, hubs, room
//! shards): the runtime's RPC, one method `serve` that takes the call's JSON
//! and answers the reply's, cheaper than a `Request`/`Response` per call
//! (BENCHMARKS.md, "The call itself"). Objects still answer by `fetch` for a
//! worker of the version before, during a deploy.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::future_to_promise;
use worker::{js_sys, Response, Result};

use super::respond;
use crate::http::problem::Problem;

/// What an object answers a call with: the reply's JSON, or the problem
/// that refuses the call.
pub type Served = std::result::Result<String, Problem>;

/// A call being served. Boxed, so that the object's code for it is in the
/// wasm once, not once inlined into `fetch` and again into `serve`.
pub type Serving<'a> = Pin<Box<dyn Future<Output = Result<Served>> + 'a>>;

/// `fetch`'s answer: a 200 with the reply, or the problem.
pub fn response(served: Result<Served>) -> Result<Response> {
    match served? {
        Ok(reply) => Response::ok(reply),
        Err(problem) => respond::problem(&problem),
    }
}

/// `serve`'s answer: the reply's text, or an error. The worker takes a
/// problem as the call failing, as it took a `fetch` answered with
/// anything but a 200.
pub fn answer(served: Result<Served>) -> std::result::Result<JsValue, JsValue> {
    match served {
        Ok(Ok(reply)) => Ok(JsValue::from_str(&reply)),
        Ok(Err(problem)) => Err(js_sys::Error::new(&problem.to_json()).into()),
        Err(e) => Err(e.into()),
    }
}

/// [`answer`] for a call's future, polled once here: a call that awaits
/// nothing (a decision on a loaded key object) is answered at once,
/// without the promise, the closures and the turn of the event loop that
/// handing it to the runtime as a promise costs. Only a call that waits
/// goes on as a promise.
///
/// The first poll's waker forwards to the waker of each later poll: a
/// future may keep the waker it was first polled with (`worker::Delay`
/// does), and that one must still reach the promise's task.
pub fn answer_now(
    served: impl Future<Output = Result<Served>> + 'static,
) -> std::result::Result<JsValue, JsValue> {
    let forward = Arc::new(Forward::default());
    let mut served = Box::pin(served);
    let waker = Waker::from(Arc::clone(&forward));
    match served.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(done) => answer(done),
        Poll::Pending => Ok(future_to_promise(async move {
            let done = poll_fn(|cx| {
                forward.to(cx.waker());
                served.as_mut().poll(cx)
            })
            .await;
            answer(done)
        })
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

/// Gives an object the RPC method `serve`, answering each call with what
/// its `serve_call` serves, and `serve_text`, the same call boxed for
/// `fetch` and `serve` to share.
macro_rules! served_by_rpc {
    ($object:ty) => {
        impl $object {
            fn serve_text<'a>(&'a self, text: &'a str) -> $crate::edge::rpc::Serving<'a> {
                Box::pin(self.serve_call(text))
            }
        }

        #[worker::wasm_bindgen::prelude::wasm_bindgen(
            wasm_bindgen = ::worker::wasm_bindgen,
            wasm_bindgen_futures = ::worker::wasm_bindgen_futures,
            js_sys = ::worker::js_sys
        )]
        impl $object {
            /// One call by RPC: the call's JSON in, the reply's out.
            pub async fn serve(
                &self,
                text: String,
            ) -> std::result::Result<
                ::worker::wasm_bindgen::JsValue,
                ::worker::wasm_bindgen::JsValue,
            > {
                $crate::edge::rpc::answer(self.serve_text(&text).await)
            }
        }
    };
}
pub(crate) use served_by_rpc;

/// One call to an object, in JavaScript: the namespace looked up in the
/// worker's `env`, the object's stub, its `serve`, and the race against the
/// runtime's `scheduler.wait(ms)`, which resolves to nothing. One crossing
/// of the wasm boundary for what took eight from Rust (the binding and its
/// type check, the id, the stub, the call, the timer, the array, the race).
#[wasm_bindgen(inline_js = "export function call(env, binding, name, text, ms) {
  const namespace = env[binding];
  const stub = namespace.get(namespace.idFromName(name));
  return Promise.race([stub.serve(text), scheduler.wait(ms)]);
}")]
extern "C" {
    /// Calls object `name` of namespace `binding` with `text`; a promise of
    /// its reply's text, or of nothing if `ms` passed first. Throws if the
    /// binding is missing; the promise rejects if the object fails or
    /// refuses the call.
    #[wasm_bindgen(catch)]
    pub fn call(
        env: &JsValue,
        binding: &str,
        name: &str,
        text: &str,
        ms: f64,
    ) -> std::result::Result<js_sys::Promise, JsValue>;
}
