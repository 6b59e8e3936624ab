//! The HTTP surface, independent of the Workers runtime: how a request is
//! keyed, what the decision API accepts, and how answers are written
//! (RateLimit headers, problem details).

pub mod admin;
pub mod api;
pub mod auth;
pub mod base64url;
pub mod body;
pub mod case;
pub mod cidr;
pub mod forward;
pub mod headers;
pub mod jwt;
pub mod key;
pub mod metrics;
pub mod params;
pub mod path;
pub mod problem;
pub mod time;
pub mod url;

/// The parts of an incoming request that rules and keys look at. The edge
/// implements it over `worker::Request`; tests implement it over a plain
/// struct, so keying is tested on the host.
pub trait Incoming {
    fn method(&self) -> &str;
    /// A header's value, by case-insensitive name.
    fn header(&self, name: &str) -> Option<String>;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::Incoming;

    pub struct FakeRequest {
        method: String,
        headers: Vec<(String, String)>,
    }

    impl FakeRequest {
        pub fn new(method: &str) -> FakeRequest {
            FakeRequest {
                method: method.to_string(),
                headers: Vec::new(),
            }
        }

        pub fn get() -> FakeRequest {
            FakeRequest::new("GET")
        }

        pub fn with(mut self, name: &str, value: &str) -> FakeRequest {
            self.headers
                .push((name.to_ascii_lowercase(), value.to_string()));
            self
        }
    }

    impl Incoming for FakeRequest {
        fn method(&self) -> &str {
            &self.method
        }

        fn header(&self, name: &str) -> Option<String> {
            let name = name.to_ascii_lowercase();
            self.headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        }
    }
}
