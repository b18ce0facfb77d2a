//! How long a layout has left: the time from now to its last millisecond, after which no
//! Snowflake ID can be made. `serve` warns when it is under `--lifetime-warning` and refuses
//! to start under a day; `/metrics` exports it; `idgen layout` says it. Baidu's
//! uid-generator ran out of its 28 bits of seconds on 2024-11-20 and took its users down:
//! warnings had been filed for years, none reached the operators.

use std::time::Duration;

use idgen::Layout;

use crate::time;

/// Under this much time left, `serve` refuses to start.
pub const REFUSE_UNDER: Duration = Duration::from_secs(24 * 3_600);

/// What to do about a layout's time left at start.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// More than the warning threshold left.
    Ample,
    /// Under the threshold: start, warning with this text.
    Warn(String),
    /// Under a day (or none) left: refuse to start, with this text.
    Refuse(String),
}

/// Milliseconds from `now_unix_ms` until `layout` can make no more IDs (0 once it is past
/// its last millisecond).
pub fn left_ms(layout: &Layout, now_unix_ms: u64) -> u64 {
    (layout.last_unix_ms() + 1).saturating_sub(now_unix_ms)
}

/// The verdict on `layout` at `now_unix_ms`, warning under `warn_under`.
pub fn verdict(layout: &Layout, now_unix_ms: u64, warn_under: Duration) -> Verdict {
    let left = left_ms(layout, now_unix_ms);
    let ends = format!(
        "the layout's last millisecond is {}, {}",
        time::rfc3339_ms(layout.last_unix_ms()),
        relative(layout, now_unix_ms)
    );
    let fix = "choose a layout with more time bits or a later epoch, and move to it before \
               then (docs/leases.md, \"Moving a fleet to a new layout\", and `idgen leases move-check`)";
    if u128::from(left) < REFUSE_UNDER.as_millis() {
        Verdict::Refuse(format!(
            "{ends}: under a day left, after which no Snowflake ID can be made; {fix}"
        ))
    } else if u128::from(left) < warn_under.as_millis() {
        Verdict::Warn(format!(
            "{ends}: under --lifetime-warning {}; {fix}",
            readable(warn_under.as_millis() as u64)
        ))
    } else {
        Verdict::Ample
    }
}

/// `in 67.1 years`, or `ended 3.0 days ago`.
pub fn relative(layout: &Layout, now_unix_ms: u64) -> String {
    let last = layout.last_unix_ms();
    if now_unix_ms <= last {
        format!("in {}", readable(last + 1 - now_unix_ms))
    } else {
        format!("ended {} ago", readable(now_unix_ms - last - 1))
    }
}

/// A span of milliseconds in the largest unit that keeps it above 1: years (mean
/// Gregorian), days, hours, minutes, seconds, with one decimal; milliseconds below a second.
fn readable(ms: u64) -> String {
    const UNITS: [(&str, f64); 5] = [
        ("years", 365.2425 * 86_400_000.0),
        ("days", 86_400_000.0),
        ("hours", 3_600_000.0),
        ("minutes", 60_000.0),
        ("seconds", 1_000.0),
    ];
    for (name, size) in UNITS {
        if ms as f64 >= size {
            return format!("{:.1} {name}", ms as f64 / size);
        }
    }
    format!("{ms} ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY_MS: u64 = 86_400_000;

    /// A layout of 2^31 ms (24.8 days) that can make IDs for `left_ms` more milliseconds
    /// after `now`.
    fn ending_in(now: u64, left_ms: u64) -> Layout {
        let lifetime = 1u64 << 31;
        Layout::new(31, 5, 5, 22)
            .unwrap()
            .with_epoch_unix_ms((now + left_ms - lifetime) as i64)
            .unwrap()
    }

    #[test]
    fn under_a_day_refuses_under_the_threshold_warns_else_nothing() {
        let now = 1_800_000_000_000;
        let year = Duration::from_secs(365 * 86_400);
        assert!(matches!(
            verdict(&ending_in(now, DAY_MS - 2), now, year),
            Verdict::Refuse(_)
        ));
        assert!(matches!(
            verdict(&ending_in(now, DAY_MS), now, year),
            Verdict::Warn(_)
        ));
        let week = Duration::from_secs(7 * 86_400);
        assert_eq!(
            verdict(&ending_in(now, 8 * DAY_MS), now, week),
            Verdict::Ample
        );
        assert!(matches!(
            verdict(&ending_in(now, 6 * DAY_MS), now, week),
            Verdict::Warn(_)
        ));
        // Past its end: refused, saying it ended.
        let Verdict::Refuse(text) = verdict(&ending_in(now - 3 * DAY_MS, 0), now, year) else {
            panic!("a layout past its end must be refused");
        };
        assert!(text.contains("ended 3.0 days ago"), "{text}");
        assert_eq!(verdict(&Layout::default(), now, year), Verdict::Ample);
    }

    #[test]
    fn the_time_left_reads_in_the_largest_unit() {
        let now = Layout::default().epoch_unix_ms();
        assert_eq!(relative(&Layout::default(), now), "in 69.7 years");
        assert_eq!(readable(90 * 60_000), "1.5 hours");
        assert_eq!(readable(999), "999 ms");
        assert_eq!(left_ms(&ending_in(now, 5), now), 5);
    }
}
