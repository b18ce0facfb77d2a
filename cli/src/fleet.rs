//! The fleet view: every worker number of a range as a store's survey reports it, with its
//! holder, its mark and anything amiss. `idgen leases` prints it; the status page shows it
//! (cached, see `http::status`).

use idgen::lease::{LeaseStore, NumberRecord, NumberState};
use serde::Serialize;
use utoipa::ToSchema;

/// One worker number of a range, as the fleet views show it.
#[derive(Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetNumber {
    pub datacenter: u64,
    pub worker: u64,
    /// `free`, `held`, `corrupt` (a record that cannot be read) or `missing` (a record
    /// gone, or not the one its holder wrote).
    #[schema(value_type = String, example = "held")]
    pub state: &'static str,
    /// The name its holder gave (null if none, or if not shown).
    #[schema(required = true)]
    pub holder: Option<String>,
    /// The last mark written, in Unix milliseconds: no later holder issues an ID dated at
    /// or before it.
    #[schema(required = true)]
    pub mark_ms: Option<u64>,
    /// Milliseconds from now (the answer's, not the survey's) until the mark (negative
    /// once it passed).
    #[schema(required = true)]
    pub valid_for_ms: Option<i64>,
    /// What is amiss, in words.
    pub anomalies: Vec<String>,
}

/// How much of a record the viewer may read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// Everything: holder names and the store's own words on an anomaly (paths, keys).
    All,
    /// No holder names, and anomalies named by their kind only: what a store says of a bad
    /// record can quote the record.
    WithoutHolders,
}

/// A mark further ahead than this (a horizon and a TTL) was not written by a holder on a
/// clock that agrees with this one.
pub fn far_ahead_ms(store: &dyn LeaseStore) -> u64 {
    u64::try_from((store.default_outage_horizon() + store.ttl()).as_millis()).unwrap_or(u64::MAX)
}

/// The survey's `records` as the fleet views show them, at `now_unix_ms`.
pub fn fleet_numbers(
    records: &[NumberRecord],
    now_unix_ms: u64,
    far_ahead_ms: u64,
    shown: Shown,
) -> Vec<FleetNumber> {
    records
        .iter()
        .map(|record| {
            let mut anomalies = Vec::new();
            if record
                .mark_unix_ms
                .is_some_and(|mark| mark > now_unix_ms.saturating_add(far_ahead_ms))
            {
                anomalies.push(format!(
                    "mark more than {} s ahead of this clock",
                    far_ahead_ms / 1000
                ));
            }
            match (&record.detail, shown) {
                (Some(detail), Shown::All) => anomalies.push(detail.clone()),
                (Some(_), Shown::WithoutHolders) => anomalies.push(match record.state {
                    NumberState::Corrupt => "its record cannot be read".into(),
                    NumberState::Missing => "its record is missing or not its holder's".into(),
                    _ => "the store reports a problem".into(),
                }),
                (None, _) => {}
            }
            FleetNumber {
                datacenter: record.datacenter,
                worker: record.worker,
                state: record.state.as_str(),
                holder: record.holder.clone().filter(|_| shown == Shown::All),
                mark_ms: record.mark_unix_ms,
                valid_for_ms: record
                    .mark_unix_ms
                    .map(|mark| signed(mark).saturating_sub(signed(now_unix_ms))),
                anomalies,
            }
        })
        .collect()
}

fn signed(unix_ms: u64) -> i64 {
    i64::try_from(unix_ms).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: NumberState, holder: &str, mark: u64, detail: Option<&str>) -> NumberRecord {
        let mut record = NumberRecord::new(0, 7);
        record.state = state;
        record.holder = Some(holder.into());
        record.mark_unix_ms = Some(mark);
        record.detail = detail.map(str::to_string);
        record
    }

    #[test]
    fn without_holders_hides_names_and_the_stores_words_but_keeps_the_anomaly() {
        let records = [record(
            NumberState::Corrupt,
            "secret host",
            1_000,
            Some("/var/lib/idgen/secret host/0-7: bad line"),
        )];
        let hidden = fleet_numbers(&records, 1_000, 60_000, Shown::WithoutHolders);
        assert_eq!(hidden[0].holder, None);
        assert_eq!(hidden[0].anomalies, ["its record cannot be read"]);
        let all = fleet_numbers(&records, 1_000, 60_000, Shown::All);
        assert_eq!(all[0].holder.as_deref(), Some("secret host"));
        assert_eq!(
            all[0].anomalies,
            ["/var/lib/idgen/secret host/0-7: bad line"]
        );
    }

    #[test]
    fn a_mark_beyond_a_horizon_and_a_ttl_is_an_anomaly_and_time_left_is_signed() {
        let now = 10_000_000;
        let records = [
            record(NumberState::Held, "a", now + 60_001, None),
            record(NumberState::Held, "b", now + 60_000, None),
            record(NumberState::Free, "c", now - 5, None),
        ];
        let numbers = fleet_numbers(&records, now, 60_000, Shown::All);
        assert_eq!(
            numbers[0].anomalies,
            ["mark more than 60 s ahead of this clock"]
        );
        assert!(numbers[1].anomalies.is_empty());
        assert_eq!(numbers[2].valid_for_ms, Some(-5));
    }
}
