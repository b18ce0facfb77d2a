//! RFC 3339 timestamps in UTC with milliseconds, both ways: the one format the command
//! writes and reads. The calendar is jiff's.
//!
//! jiff's years end at 9999, but a layout's last instant can lie millions of years ahead
//! (62 time bits). The Gregorian calendar repeats exactly every 400 years (146,097 days,
//! weekdays and leap days included), so a later instant is moved back by whole 400-year
//! cycles, read or written by jiff, and its year moved forward again.

use jiff::Timestamp;
use jiff::civil::{Date, Time};
use jiff::tz::TimeZone;

/// 400 Gregorian years in milliseconds.
const CYCLE_MS: u64 = 146_097 * 86_400_000;
const CYCLE_YEARS: u64 = 400;
/// The last millisecond jiff's `Timestamp` holds, a few hours before the end of 9999 (so
/// that every offset stays within its civil dates).
fn last_timestamp_ms() -> u64 {
    Timestamp::MAX.as_millisecond() as u64
}

/// `2026-10-11T12:35:21.659Z` for a Unix millisecond. Years after 9999, which RFC 3339
/// cannot write, take ISO 8601's expanded form with a sign and six digits
/// (`+010000-01-01T00:00:00.000Z`), as JavaScript's `Date` writes and reads them.
pub fn rfc3339_ms(unix_ms: u64) -> String {
    let cycles = unix_ms
        .saturating_sub(last_timestamp_ms())
        .div_ceil(CYCLE_MS);
    let shifted = unix_ms - cycles * CYCLE_MS;
    let at = Timestamp::from_millisecond(shifted as i64)
        .expect("moved back within 0 and 9999-12-31 by whole cycles");
    let time = TimeZone::UTC.to_datetime(at);
    let year = time.year() as u64 + cycles * CYCLE_YEARS;
    let year = if year > 9999 {
        format!("+{year:06}")
    } else {
        format!("{year:04}")
    };
    format!(
        "{year}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        time.month(),
        time.day(),
        time.hour(),
        time.minute(),
        time.second(),
        time.millisecond()
    )
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff]Z` (UTC only, 1 to 3 digits of fraction), or the
/// expanded `+YYYYYY-...` form of a year after 9999, into Unix milliseconds. Every field
/// has exactly its width; nothing before 1970.
pub fn parse_rfc3339_ms(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a UTC time like 2024-01-01T00:00:00Z");
    let rest = text.strip_suffix('Z').ok_or_else(bad)?;
    let (rest, expanded) = match rest.strip_prefix('+') {
        Some(rest) => (rest, true),
        None => (rest, false),
    };
    let (date, clock) = rest.split_once('T').ok_or_else(bad)?;
    let (clock, millis) = match clock.split_once('.') {
        Some((clock, fraction)) if (1..=3).contains(&fraction.len()) => {
            (clock, digits(&format!("{fraction:0<3}")).ok_or_else(bad)?)
        }
        Some(_) => return Err(bad()),
        None => (clock, 0),
    };
    // The expanded year has six to nine digits (years up to 999,999,999, beyond any u64 of
    // milliseconds) and is only for years the plain form cannot write.
    let year_widths = if expanded { 6..=9 } else { 4..=4 };
    let date = fields(date, '-', [year_widths, 2..=2, 2..=2]).ok_or_else(bad)?;
    let clock = fields(clock, ':', [2..=2, 2..=2, 2..=2]).ok_or_else(bad)?;
    let year = date[0];
    if expanded && year <= 9999 || year < 1970 {
        return Err(bad());
    }
    // Back by whole cycles into jiff's years, and forward again after.
    let cycles = year.saturating_sub(9998).div_ceil(CYCLE_YEARS);
    let narrow = |n: u64| i8::try_from(n).map_err(|_| bad());
    let day = Date::new(
        (year - cycles * CYCLE_YEARS) as i16,
        narrow(date[1])?,
        narrow(date[2])?,
    )
    .map_err(|_| bad())?;
    // jiff refuses a leap second (:60) and 24:00.
    let time =
        Time::new(narrow(clock[0])?, narrow(clock[1])?, narrow(clock[2])?, 0).map_err(|_| bad())?;
    let at = TimeZone::UTC
        .to_timestamp(day.to_datetime(time))
        .map_err(|_| bad())?;
    let ms = u64::try_from(at.as_millisecond()).map_err(|_| bad())?;
    cycles
        .checked_mul(CYCLE_MS)
        .and_then(|shift| shift.checked_add(ms))
        .and_then(|ms| ms.checked_add(millis))
        .ok_or_else(bad)
}

/// Three `separator`-separated runs of ASCII digits, each of a width in its range.
fn fields(
    text: &str,
    separator: char,
    widths: [std::ops::RangeInclusive<usize>; 3],
) -> Option<Vec<u64>> {
    let parts: Vec<&str> = text.split(separator).collect();
    if parts.len() != 3 || !parts.iter().zip(&widths).all(|(p, w)| w.contains(&p.len())) {
        return None;
    }
    parts.iter().map(|part| digits(part)).collect()
}

fn digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 9999-12-31T23:59:59.999Z: the last millisecond of year 9999.
    const LAST_OF_9999_MS: u64 = 253_402_300_799_999;

    /// (Unix ms, text): the instants the command shows most.
    const BOUNDARIES: [(u64, &str); 8] = [
        // The Unix epoch: the first instant a layout's epoch may be.
        (0, "1970-01-01T00:00:00.000Z"),
        // The default epoch.
        (1_704_067_200_000, "2024-01-01T00:00:00.000Z"),
        // Leap days: in a year divisible by 4, and by 400; the day after.
        (1_709_164_800_000, "2024-02-29T00:00:00.000Z"),
        (951_782_400_000, "2000-02-29T00:00:00.000Z"),
        (1_709_251_199_999, "2024-02-29T23:59:59.999Z"),
        // The README's example ID, 385628494224322560: its time field is 91,940,997,654
        // ms after the default epoch.
        (
            1_704_067_200_000 + (385_628_494_224_322_560 >> 22),
            "2026-11-30T03:09:57.654Z",
        ),
        // The default layout's last instant: 2^41 - 1 ms after the default epoch.
        (
            1_704_067_200_000 + (1 << 41) - 1,
            "2093-09-06T15:47:35.551Z",
        ),
        // The last millisecond of year 9999: past jiff's last timestamp, so moved a cycle.
        (LAST_OF_9999_MS, "9999-12-31T23:59:59.999Z"),
    ];

    #[test]
    fn boundary_instants_format_and_parse_both_ways() {
        for (ms, text) in BOUNDARIES {
            assert_eq!(rfc3339_ms(ms), text, "{ms}");
            assert_eq!(parse_rfc3339_ms(text), Ok(ms), "{text}");
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
    fn the_last_instant_of_the_widest_layouts_is_written_and_read_back() {
        // After 9999: one 400-year cycle, many, and the last u64 of milliseconds that a
        // year of at most nine digits can hold (62 time bits: 146 million years).
        let year_10000 = LAST_OF_9999_MS + 1;
        assert_eq!(rfc3339_ms(year_10000), "+010000-01-01T00:00:00.000Z");
        // 10400-02-29 exists (divisible by 400), 10100-02-29 does not.
        let leap = parse_rfc3339_ms("+010400-02-29T12:00:00Z").unwrap();
        assert_eq!(rfc3339_ms(leap), "+010400-02-29T12:00:00.000Z");
        assert!(parse_rfc3339_ms("+010100-02-29T00:00:00Z").is_err());
        for ms in [
            year_10000,
            year_10000 + 86_400_123,
            1_704_067_200_000 + (1 << 62) - 1,
            1 << 61,
            u64::MAX / 1000,
        ] {
            let text = rfc3339_ms(ms);
            assert_eq!(parse_rfc3339_ms(&text), Ok(ms), "{text}");
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
    fn every_day_of_four_centuries_round_trips() {
        // One whole cycle from 1970 on, and the same days one cycle after 9999.
        for day in 0..146_097u64 {
            for ms in [
                day * 86_400_000 + 12_345,
                LAST_OF_9999_MS + 1 + day * 86_400_000,
            ] {
                assert_eq!(parse_rfc3339_ms(&rfc3339_ms(ms)), Ok(ms));
            }
        }
    }

    #[test]
    fn malformed_times_are_refused() {
        for bad in [
            "",
            "2024-01-01",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00+01:00",
            "2024-01-01t00:00:00z",
            "2024-01-01 00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2100-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-00-01T00:00:00Z",
            "2024-01-00T00:00:00Z",
            "2024-04-31T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "1969-12-31T23:59:59Z",
            "2024-1-01T00:00:00Z",
            "2024-01-01T00:00:00.1234Z",
            "２024-01-01T00:00:00Z",
            "2024-01-01T00:00:60Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:00.Z",
            "+2024-01-01T00:00:00Z",
        ] {
            assert!(parse_rfc3339_ms(bad).is_err(), "{bad:?}");
        }
    }
}
