//! The token checks of the admin API and of the decision API.
//!
//! Both tokens are hashed with SHA-256 first and the digests compared with
//! a loop that always runs to the end, so the time taken reveals neither how
//! much of the token was right nor its length.

use sha2::{Digest, Sha256};

use super::jwt::bearer;

/// A configured token, kept as its SHA-256 digest: it is taken once per
/// isolate with the settings, so a request hashes only the token it
/// brings (BENCHMARKS.md).
pub struct Token([u8; 32]);

impl Token {
    pub fn new(token: &str) -> Token {
        Token(Sha256::digest(token.as_bytes()).into())
    }

    /// Whether an `Authorization` header carries exactly this token as a
    /// bearer token.
    pub fn admits(&self, authorization: Option<&str>) -> bool {
        let given = authorization.and_then(bearer).unwrap_or("");
        let digest = Sha256::digest(given.as_bytes());
        let differences = digest
            .iter()
            .zip(self.0.iter())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y));
        differences == 0 && !given.is_empty()
    }
}

/// Who may call the decision, throttle and lease APIs (`{prefix}/v1/...`)
/// when no `API_TOKEN` secret is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiAccess {
    /// Nobody: without the secret the API does not exist. The default, so
    /// deploying a config that forgot the secret exposes nothing.
    #[default]
    Token,
    /// Anybody who can reach the Worker. Only for a Worker that no route
    /// or `workers.dev` address exposes (reached through service
    /// bindings), and only when asked for by name (`api = "open"`).
    Open,
}

/// What happens to a call to the decision API, before anything else is
/// looked at (method, path, body), so that a caller without the token
/// learns nothing about the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiGate {
    Pass,
    /// 404, as for any path Sluice does not serve.
    Hidden,
    /// 401.
    Unauthorized,
}

/// A set token is always required, whatever `access` says: `api = "open"`
/// only decides what happens when there is none, so adding the secret can
/// never make the API less protected.
pub fn api_gate(access: ApiAccess, token: Option<&Token>, authorization: Option<&str>) -> ApiGate {
    match token {
        Some(token) if token.admits(authorization) => ApiGate::Pass,
        Some(_) => ApiGate::Unauthorized,
        None if access == ApiAccess::Open => ApiGate::Pass,
        None => ApiGate::Hidden,
    }
}

#[cfg(test)]
mod tests {
    use super::{api_gate, ApiAccess, ApiGate, Token};

    #[test]
    fn the_api_needs_its_token_and_hides_without_one_unless_open() {
        let token = Token::new("t0ken-t0ken-t0ken-t0ken-t0ken-32");
        let token = Some(&token);
        let right = Some("Bearer t0ken-t0ken-t0ken-t0ken-t0ken-32");
        for access in [ApiAccess::Token, ApiAccess::Open] {
            assert_eq!(api_gate(access, token, right), ApiGate::Pass);
            for wrong in [
                None,
                Some("Bearer "),
                Some("Basic t0ken-t0ken-t0ken-t0ken-t0ken-32"),
            ] {
                assert_eq!(api_gate(access, token, wrong), ApiGate::Unauthorized);
            }
        }
        assert_eq!(api_gate(ApiAccess::Token, None, None), ApiGate::Hidden);
        assert_eq!(api_gate(ApiAccess::Token, None, right), ApiGate::Hidden);
        assert_eq!(api_gate(ApiAccess::Open, None, None), ApiGate::Pass);
        assert_eq!(ApiAccess::default(), ApiAccess::Token);
    }

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let token = Token::new("s3cret-token");
        assert!(token.admits(Some("Bearer s3cret-token")));
        assert!(token.admits(Some("bearer s3cret-token")));
        for wrong in [
            None,
            Some(""),
            Some("Bearer"),
            Some("Bearer "),
            Some("Bearer s3cret-toke"),
            Some("Bearer s3cret-token2"),
            Some("Basic s3cret-token"),
            Some("s3cret-token"),
        ] {
            assert!(!token.admits(wrong), "{wrong:?}");
        }
    }
}
