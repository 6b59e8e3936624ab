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

/// Milliseconds as a duration is written in config: a whole number of the
/// largest unit that divides it (`3600000` is `1h`, `90000` is `90s`,
/// `1500` is `1500ms`), which [`parse_ms`] reads back to the same value.
pub fn format_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    UNITS
        .iter()
        .find(|(scale, _)| ms > 0 && ms.is_multiple_of(*scale))
        .map_or_else(
            || format!("{ms}ms"),
            |(scale, unit)| format!("{}{unit}", ms / scale),
        )
}

#[cfg(test)]
mod tests {
    use super::{format_ms, parse_ms};

    #[test]
    fn formats_in_the_largest_whole_unit_and_reads_back() {
        for (ms, text) in [
            (3_600_000, "1h"),
            (60_000, "1m"),
            (90_000, "90s"),
            (1_500, "1500ms"),
            (172_800_000, "2d"),
            (0, "0ms"),
            (u64::MAX, "18446744073709551615ms"),
        ] {
            assert_eq!(format_ms(ms), text);
            assert_eq!(parse_ms(text), Ok(ms));
        }
    }

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
