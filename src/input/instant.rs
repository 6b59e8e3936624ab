//! Instants as people write them in config: RFC 3339, e.g.
//! `2026-12-01T10:00:00Z` or `2026-12-01T11:00:00+01:00`.

/// Parses an RFC 3339 date-time (`T` and `Z` in either case, optional
/// fraction of a second down to milliseconds, `Z` or a `±HH:MM` offset)
/// into milliseconds since the epoch. Years 1970 to 9999; a leap second
/// (`:60`) is not accepted, since no clock Sluice reads shows one.
pub fn parse_ms(text: &str) -> Result<u64, String> {
    parse(text).ok_or_else(|| {
        format!("{text:?} is not a date and time: write RFC 3339, e.g. \"2026-12-01T10:00:00Z\"")
    })
}

fn parse(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year = digits(&b[0..4])?;
    let month = digits(&b[5..7])?;
    let day = digits(&b[8..10])?;
    let (hour, minute, second) = (
        digits(&b[11..13])?,
        digits(&b[14..16])?,
        digits(&b[17..19])?,
    );
    let mut rest = &b[19..];
    let mut millis = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let n = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return None;
        }
        millis = fraction[..n.min(3)]
            .iter()
            .chain(std::iter::repeat(&b'0'))
            .take(3)
            .try_fold(0, |acc, c| Some(acc * 10 + u64::from(c - b'0')))?;
        rest = &fraction[n..];
    }
    let offset_min: i64 = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, m) = (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = (h * 60 + m) as i64;
            if *sign == b'-' {
                -minutes
            } else {
                minutes
            }
        }
        _ => return None,
    };
    if !(1970..=9999).contains(&year) || !(1..=12).contains(&month) {
        return None;
    }
    if day < 1 || day > days_in_month(year, month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let local_ms = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis;
    let utc = local_ms as i64 - offset_min * 60_000;
    u64::try_from(utc).ok()
}

fn digits(b: &[u8]) -> Option<u64> {
    b.iter().try_fold(0u64, |acc, c| {
        c.is_ascii_digit().then(|| acc * 10 + u64::from(c - b'0'))
    })
}

fn days_in_month(year: u64, month: u64) -> u64 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's days_from_civil, for years
/// from 1970 on), the inverse of what `http::time::rfc3339` does.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::parse_ms;
    use crate::http::time::rfc3339;

    #[test]
    fn reads_what_rfc3339_writes() {
        for ms in [0, 951_782_400_000, 1_795_381_518_026, 4_102_444_799_999] {
            assert_eq!(parse_ms(&rfc3339(ms)), Ok(ms));
        }
        assert_eq!(parse_ms("2026-12-01T10:00:00Z"), Ok(1_796_119_200_000));
        assert_eq!(parse_ms("2026-12-01t10:00:00z"), Ok(1_796_119_200_000));
    }

    #[test]
    fn offsets_and_fractions() {
        let utc = parse_ms("2026-12-01T10:00:00Z").unwrap();
        assert_eq!(parse_ms("2026-12-01T11:30:00+01:30"), Ok(utc));
        assert_eq!(parse_ms("2026-12-01T05:00:00-05:00"), Ok(utc));
        assert_eq!(parse_ms("2026-12-01T10:00:00.5Z"), Ok(utc + 500));
        assert_eq!(parse_ms("2026-12-01T10:00:00.123456789Z"), Ok(utc + 123));
    }

    #[test]
    fn refuses_what_is_not_one() {
        for bad in [
            "",
            "2026-12-01",
            "2026-12-01 10:00:00Z",
            "2026-12-01T10:00:00",
            "2026-13-01T10:00:00Z",
            "2026-02-29T10:00:00Z",
            "2026-12-01T24:00:00Z",
            "2026-12-01T10:00:60Z",
            "2026-12-01T10:00:00.Z",
            "2026-12-01T10:00:00+1:00",
            "1969-12-31T23:59:59Z",
            "1970-01-01T00:00:00+01:00",
            "２026-12-01T10:00:00Z",
            "2026-12-01T10:00:00Zjunk",
        ] {
            assert!(parse_ms(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_ms("2024-02-29T00:00:00Z").is_ok());
    }
}
