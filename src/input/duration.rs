//! Durations as people write them in config: `500ms`, `10s`, `1m`, `1h`, `1d`.

/// Parses `<integer><unit>` into milliseconds. Compound forms (`1m30s`) are
/// left out on purpose: a window is one number and one unit, which keeps the
/// RateLimit-Policy `w` parameter readable.
pub fn parse_ms(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let scale: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!(
            "{text:?} is not a duration: write a whole number and one unit of ms, s, m, h or d (e.g. \"500ms\", \"10s\", \"1m\")"
        )),
    };
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration: the number is missing or too large"))?;
    amount
        .checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too long a duration"))
}

#[cfg(test)]
mod tests {
    use super::parse_ms;

    #[test]
    fn parses_each_unit() {
        assert_eq!(parse_ms("500ms"), Ok(500));
        assert_eq!(parse_ms("10s"), Ok(10_000));
        assert_eq!(parse_ms("1m"), Ok(60_000));
        assert_eq!(parse_ms("2h"), Ok(7_200_000));
        assert_eq!(parse_ms("1d"), Ok(86_400_000));
        assert_eq!(parse_ms("0s"), Ok(0));
    }

    #[test]
    fn rejects_what_is_not_one_number_and_one_unit() {
        for bad in [
            "",
            "10",
            "s",
            "1.5s",
            "-1s",
            "1 s",
            "1m30s",
            "1w",
            "10S",
            "99999999999999999999s",
        ] {
            assert!(parse_ms(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_ms("18446744073709551615d")
            .unwrap_err()
            .contains("too long"));
    }
}
