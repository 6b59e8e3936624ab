//! The admin token check.
//!
//! Both tokens are hashed with SHA-256 first and the digests compared with
//! a loop that always runs to the end, so the time taken reveals neither how
//! much of the token was right nor its length.

use sha2::{Digest, Sha256};

use super::jwt::bearer;

/// Whether an `Authorization` header carries exactly `expected` as a bearer
/// token.
pub fn authorized(authorization: Option<&str>, expected: &str) -> bool {
    let given = authorization.and_then(bearer).unwrap_or("");
    let a = Sha256::digest(given.as_bytes());
    let b = Sha256::digest(expected.as_bytes());
    let differences = a
        .iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    differences == 0 && !given.is_empty()
}

#[cfg(test)]
mod tests {
    use super::authorized;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        assert!(authorized(Some("Bearer s3cret-token"), "s3cret-token"));
        assert!(authorized(Some("bearer s3cret-token"), "s3cret-token"));
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
            assert!(!authorized(wrong, "s3cret-token"), "{wrong:?}");
        }
    }
}
