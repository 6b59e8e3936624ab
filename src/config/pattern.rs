//! Path patterns for rules: `/login`, `/api/*`, `/threads/:id/reply`
//! (literals, `:name` one whole segment, `*` only at the end), matched
//! against the canonical path in one left-to-right pass, so a hostile path
//! costs linear time. A pattern must be written canonically.

use std::fmt;

use super::{error, ConfigError};
use crate::http::case::lowercase;
use crate::http::key::{KeySpec, Part};
use crate::http::path::{PathForm, PathOptions, RequestPath};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(String),
    Param(String),
    Rest,
}

/// One step of a pattern: a character, one whole non-empty segment
/// (`:name`), or any rest (`*`, always the last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    Char(char),
    Segment,
    Rest,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    tokens: Vec<Token>,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, String> {
        if !text.starts_with('/') {
            return Err(format!("{text:?} must start with \"/\""));
        }
        let canonical = RequestPath::new(text);
        let canonical = canonical
            .form(PathOptions {
                case_insensitive: false,
                ignore_trailing_slash: false,
            })
            .text();
        if canonical != text {
            return Err(format!(
                "{text:?} is not a canonical path (requests are matched as {canonical:?}): write it without \"//\", \".\" or \"..\" segments, \";\" parameters, or escapes of letters, digits, \"-._~\" and \"/\""
            ));
        }
        let mut tokens = Vec::new();
        let mut literal = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '*' => {
                    if chars.peek().is_some() {
                        return Err(format!("in {text:?}, \"*\" may only end the pattern"));
                    }
                    flush(&mut literal, &mut tokens);
                    tokens.push(Token::Rest);
                }
                ':' if literal.ends_with('/') => {
                    let mut name = String::new();
                    while let Some(&n) = chars.peek() {
                        if n == '/' {
                            break;
                        }
                        if !(n.is_ascii_alphanumeric() || n == '_') {
                            return Err(format!(
                                "in {text:?}, a parameter name may hold only letters, digits and \"_\", and a parameter fills its whole segment"
                            ));
                        }
                        name.push(n);
                        chars.next();
                    }
                    if name.is_empty() {
                        return Err(format!(
                            "in {text:?}, \":\" must be followed by a parameter name"
                        ));
                    }
                    if tokens.contains(&Token::Param(name.clone())) {
                        return Err(format!("in {text:?}, parameter :{name} appears twice"));
                    }
                    flush(&mut literal, &mut tokens);
                    tokens.push(Token::Param(name));
                }
                _ => literal.push(c),
            }
        }
        flush(&mut literal, &mut tokens);
        Ok(Pattern { tokens })
    }

    /// The same pattern for case-insensitive matching: its literal text
    /// lower-cased, as [`RequestPath`] folds a request's path.
    pub fn folded(mut self) -> Pattern {
        for token in &mut self.tokens {
            if let Token::Literal(text) = token {
                *text = lowercase(text);
            }
        }
        self
    }

    /// The captured parameters if the path, in any of the readings its
    /// rule allows, matches.
    pub fn captures<'p>(&self, path: PathForm<'p>) -> Option<Vec<(&str, &'p str)>> {
        path.readings()
            .find_map(|reading| self.captures_text(reading))
    }

    /// The captured parameters if `path` matches, in pattern order.
    fn captures_text<'p>(&self, path: &'p str) -> Option<Vec<(&str, &'p str)>> {
        let mut rest = path;
        let mut captured = Vec::new();
        for token in &self.tokens {
            match token {
                Token::Literal(literal) => rest = rest.strip_prefix(literal.as_str())?,
                Token::Param(name) => {
                    let end = rest.find('/').unwrap_or(rest.len());
                    if end == 0 {
                        return None;
                    }
                    captured.push((name.as_str(), &rest[..end]));
                    rest = &rest[end..];
                }
                Token::Rest => rest = "",
            }
        }
        rest.is_empty().then_some(captured)
    }

    /// The literal text the pattern starts with, up to its first
    /// parameter or `*`: every path it matches starts with it.
    pub fn literal_head(&self) -> &str {
        match self.tokens.first() {
            Some(Token::Literal(text)) => text,
            _ => "",
        }
    }

    /// What the pattern matches, one step at a time, for reasoning about
    /// the paths a rule can match (`config::reach`).
    pub(super) fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        for token in &self.tokens {
            match token {
                Token::Literal(text) => steps.extend(text.chars().map(Step::Char)),
                Token::Param(_) => steps.push(Step::Segment),
                Token::Rest => steps.push(Step::Rest),
            }
        }
        steps
    }

    /// Whether the pattern captures a parameter called `name`.
    pub fn has_param(&self, name: &str) -> bool {
        self.tokens
            .iter()
            .any(|t| matches!(t, Token::Param(p) if p == name))
    }
}

/// The pattern as written in the config (lower-cased when folded); it
/// parses back to the same pattern.
impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for token in &self.tokens {
            match token {
                Token::Literal(text) => f.write_str(text)?,
                Token::Param(name) => write!(f, ":{name}")?,
                Token::Rest => f.write_str("*")?,
            }
        }
        Ok(())
    }
}

fn flush(literal: &mut String, tokens: &mut Vec<Token>) {
    if !literal.is_empty() {
        tokens.push(Token::Literal(std::mem::take(literal)));
    }
}

/// Every part a key names must be something the rule can provide: a path
/// parameter its pattern captures, the action if it sets one.
pub(super) fn check_key_parts(
    key: &KeySpec,
    path: &Pattern,
    has_action: bool,
    at: &str,
) -> Result<(), ConfigError> {
    for part in key.parts() {
        match part {
            Part::Param(name) if !path.has_param(name) => {
                return Err(error(
                    at,
                    format!(
                        "the key uses path parameter {name:?}, which match.path does not capture"
                    ),
                ))
            }
            Part::Action if !has_action => {
                return Err(error(
                    at,
                    "the key uses {action}, and the rule sets no action",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    fn p(text: &str) -> Pattern {
        Pattern::parse(text).unwrap()
    }

    impl Pattern {
        fn matches(&self, path: &str) -> bool {
            self.captures_text(path).is_some()
        }
    }

    #[test]
    fn patterns_print_as_written() {
        for text in [
            "/",
            "/login",
            "/api/*",
            "/threads/:id/reply",
            "/u/:user/:item/*",
        ] {
            assert_eq!(p(text).to_string(), text);
            assert_eq!(p(&p(text).to_string()), p(text));
        }
        assert_eq!(p("/API/:Id").folded().to_string(), "/api/:Id");
    }

    #[test]
    fn literal_patterns_match_exactly() {
        assert!(p("/login").matches("/login"));
        assert!(!p("/login").matches("/login/"));
        assert!(!p("/login").matches("/logins"));
        assert!(p("/").matches("/"));
    }

    #[test]
    fn a_trailing_star_matches_any_rest() {
        let api = p("/api/*");
        assert!(api.matches("/api/"));
        assert!(api.matches("/api/v1/users"));
        assert!(!api.matches("/api"));
        assert!(!api.matches("/apix"));
        assert!(p("/api*").matches("/api"));
        assert!(p("/*").matches("/anything/at/all"));
    }

    #[test]
    fn parameters_capture_one_segment() {
        let reply = p("/threads/:id/reply");
        assert_eq!(
            reply.captures_text("/threads/42/reply"),
            Some(vec![("id", "42")])
        );
        assert_eq!(reply.captures_text("/threads//reply"), None);
        assert_eq!(reply.captures_text("/threads/4/2/reply"), None);
        assert!(reply.has_param("id"));
        assert!(!reply.has_param("reply"));
        let two = p("/u/:user/:action");
        assert_eq!(
            two.captures_text("/u/ann/post"),
            Some(vec![("user", "ann"), ("action", "post")])
        );
        assert_eq!(
            p("/f/:name/*").captures_text("/f/x/y/z"),
            Some(vec![("name", "x")])
        );
        // A colon inside a segment is literal.
        assert!(p("/a:b").matches("/a:b"));
    }

    #[test]
    fn rejects_malformed_patterns() {
        for bad in [
            "api",
            "",
            "/a*/b",
            "/**",
            "/t/:",
            "/t/:id.json",
            "/t/:a/:a",
            "/t/:i-d",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/a;x",
            "/%61pi",
            "/a%2fb",
        ] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
