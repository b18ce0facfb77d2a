//! RFC 3339 timestamps in UTC with milliseconds, both ways, without a date library: the
//! service needs only this one format.

/// `2026-10-11T12:35:21.659Z` for a Unix millisecond. Years after 9999, which RFC 3339
/// cannot write, take ISO 8601's expanded form with a sign and six digits
/// (`+010000-01-01T00:00:00.000Z`), as JavaScript's `Date` writes and reads them.
pub fn rfc3339_ms(unix_ms: u64) -> String {
    let (days, ms_of_day) = (unix_ms / 86_400_000, unix_ms % 86_400_000);
    let (year, month, day) = civil_from_days(days as i64);
    let seconds = ms_of_day / 1000;
    let year = if year > 9999 {
        format!("+{year:06}")
    } else {
        format!("{year:04}")
    };
    format!(
        "{year}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60,
        ms_of_day % 1000
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (UTC only), or the expanded `+YYYYYY-...` form of a
/// year after 9999, into Unix milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a UTC time like 2024-01-01T00:00:00Z");
    let rest = text.strip_suffix('Z').ok_or_else(bad)?;
    let (rest, year_width) = match rest.strip_prefix('+') {
        Some(rest) => (rest, 6),
        None => (rest, 4),
    };
    let (date, clock) = rest.split_once('T').ok_or_else(bad)?;
    let (clock, millis) = match clock.split_once('.') {
        Some((clock, fraction)) if (1..=3).contains(&fraction.len()) => {
            let padded = format!("{fraction:0<3}");
            (clock, digits(&padded).ok_or_else(bad)?)
        }
        Some(_) => return Err(bad()),
        None => (clock, 0),
    };
    // Each field exactly as wide as given; the expanded year at least six digits.
    let numbers = |part: &str, separator: char, widths: [usize; 3]| -> Option<Vec<u64>> {
        let fields: Vec<&str> = part.split(separator).collect();
        // Nine digits at most: years up to 999,999,999, beyond any u64 of milliseconds.
        let fits = |(i, (field, width)): (usize, (&&str, usize))| {
            field.len() == width || (i == 0 && width == 6 && (7..=9).contains(&field.len()))
        };
        if fields.len() != 3 || !fields.iter().zip(widths).enumerate().all(fits) {
            return None;
        }
        fields.iter().map(|f| digits(f)).collect()
    };
    let date = numbers(date, '-', [year_width, 2, 2]).ok_or_else(bad)?;
    // The expanded form is only for years the plain one cannot write.
    if year_width == 6 && date[0] <= 9999 {
        return Err(bad());
    }
    let clock = numbers(clock, ':', [2, 2, 2]).ok_or_else(bad)?;
    let (year, month, day) = (date[0], date[1], date[2]);
    let days_in_month = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if year < 1970
        || day == 0
        || day > days_in_month
        || clock[0] > 23
        || clock[1] > 59
        || clock[2] > 59
    {
        return Err(bad());
    }
    let days = days_from_civil(year as i64, month, day) as u64;
    let seconds = days * 86_400 + clock[0] * 3600 + clock[1] * 60 + clock[2];
    seconds
        .checked_mul(1000)
        .and_then(|ms| ms.checked_add(millis))
        .ok_or_else(bad)
}

fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(days: i64) -> (i64, u64, u64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The inverse: (year, month, day) to days since 1970-01-01.
fn days_from_civil(year: i64, month: u64, day: u64) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = month as i64;
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants_format_and_parse_both_ways() {
        for (ms, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_704_067_200_000, "2024-01-01T00:00:00.000Z"),
            (1_709_164_800_000, "2024-02-29T00:00:00.000Z"),
            (1_791_722_121_659, "2026-10-11T12:35:21.659Z"),
            (3_903_090_455_551, "2093-09-06T15:47:35.551Z"),
        ] {
            assert_eq!(rfc3339_ms(ms), text);
            assert_eq!(parse_rfc3339_ms(text), Ok(ms));
        }
        assert_eq!(
            parse_rfc3339_ms("2024-01-01T00:00:00Z"),
            Ok(1_704_067_200_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2024-01-01T00:00:00.5Z"),
            Ok(1_704_067_200_500)
        );
    }

    #[test]
    fn years_after_9999_take_the_expanded_form_and_round_trip() {
        let year_10000 = 253_402_300_800_000;
        assert_eq!(rfc3339_ms(year_10000), "+010000-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(year_10000 - 1), "9999-12-31T23:59:59.999Z");
        for ms in [
            year_10000,
            year_10000 + 86_400_123,
            1 << 61,
            u64::MAX / 1000,
        ] {
            assert_eq!(
                parse_rfc3339_ms(&rfc3339_ms(ms)),
                Ok(ms),
                "{}",
                rfc3339_ms(ms)
            );
        }
        for bad in [
            "+009999-01-01T00:00:00Z",
            "+10000-01-01T00:00:00Z",
            "+-10000-01-01T00:00:00Z",
            "+1000000000000-01-01T00:00:00Z",
            "+999999999-12-31T23:59:59Z",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn every_day_round_trips() {
        for day in 0..60_000u64 {
            let ms = day * 86_400_000 + 12_345;
            assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Ok(ms));
        }
    }

    #[test]
    fn malformed_times_are_refused() {
        for bad in [
            "",
            "2024-01-01",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00+01:00",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "1969-12-31T23:59:59Z",
            "2024-1-01T00:00:00Z",
            "2024-01-01T00:00:00.1234Z",
            "２024-01-01T00:00:00Z",
            "2024-01-01T00:00:60Z",
            "2024-01-01T00:00:00.Z",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad:?}");
        }
    }
}
