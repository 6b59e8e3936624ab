//! The request a client sent, as the worker reads it: the method, URL and
//! header set, once. `worker::Request` also copies the runtime's `cf` object
//! into Rust for every request, which Sluice never reads (its cost:
//! BENCHMARKS.md).

use std::cell::Cell;

use worker::wasm_bindgen::JsCast;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{js_sys, web_sys, ByteStream, Headers, Method, Result};

use crate::http::{url, Incoming};

pub struct ClientRequest {
    raw: web_sys::Request,
    /// The method as the client sent it, which is what the origin gets.
    sent: String,
    /// The method's name upper case, as rules are: the runtime hands the
    /// standard methods over in upper case, and so the rest must be, or a
    /// spelling could skip a rule.
    method: String,
    /// The method as `worker` names it; `None` for one it has no name for
    /// (such as PROPFIND), which `worker`'s `Method` would read as GET.
    known: Option<Method>,
    url: String,
    headers: Headers,
    /// Whether the body has been read or handed on: a second reader would
    /// find the stream locked, and making a stream of a locked one panics.
    body_taken: Cell<bool>,
}

impl ClientRequest {
    pub fn new(raw: web_sys::Request) -> ClientRequest {
        let sent = raw.method();
        let method = sent.to_ascii_uppercase();
        let named = Method::from(method.clone());
        ClientRequest {
            known: (named.as_ref() == method).then_some(named),
            sent,
            method,
            url: raw.url(),
            headers: Headers(raw.headers()),
            body_taken: Cell::new(false),
            raw,
        }
    }

    /// The method as the client sent it, for the origin.
    pub fn method_as_sent(&self) -> &str {
        &self.sent
    }

    /// The method for Sluice's own routes, which only serve methods
    /// `worker` names; `None` answers 405 there.
    pub fn known_method(&self) -> Option<Method> {
        self.known.clone()
    }

    /// The whole URL, as the runtime serialised it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The path, still percent-encoded.
    pub fn path(&self) -> &str {
        url::path(&self.url)
    }

    pub fn headers(&self) -> &Headers {
        &self.headers
    }

    /// The body as the runtime holds it, to send on unread; `None` without
    /// a body or once it was taken.
    pub fn body(&self) -> Option<web_sys::ReadableStream> {
        if self.body_taken.replace(true) {
            return None;
        }
        self.raw.body()
    }

    /// The whole body, in one call to the runtime.
    pub async fn bytes(&self) -> Result<Vec<u8>> {
        if self.body_taken.replace(true) {
            return Err(worker::Error::BodyUsed);
        }
        let buffer = JsFuture::from(self.raw.array_buffer()?).await?;
        Ok(js_sys::Uint8Array::new(&buffer).to_vec())
    }

    /// The body chunk by chunk; `None` without a body or once it was taken.
    pub fn chunks(&self) -> Option<ByteStream> {
        let body: web_sys::ReadableStream = self.body()?.unchecked_into();
        Some(ByteStream::from(body))
    }
}

impl Incoming for ClientRequest {
    /// The method by its own name, upper case: what rules match and keys
    /// read.
    fn method(&self) -> &str {
        &self.method
    }

    fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).ok().flatten()
    }
}
