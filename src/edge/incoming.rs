//! `http::Incoming` over a `worker::Request`.

use worker::Request;

use crate::http::Incoming;

pub struct Parts<'r> {
    request: &'r Request,
    method: String,
}

impl<'r> Parts<'r> {
    pub fn of(request: &'r Request) -> Parts<'r> {
        Parts {
            request,
            method: request.method().to_string(),
        }
    }
}

impl Incoming for Parts<'_> {
    fn method(&self) -> &str {
        &self.method
    }

    fn header(&self, name: &str) -> Option<String> {
        self.request.headers().get(name).ok().flatten()
    }
}
