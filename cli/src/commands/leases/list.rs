//! `idgen leases` without a subcommand: every worker number of a range, free or held, its
//! holder and mark, and anything amiss.

use clap::Args;
use idgen::lease::NumberState;

use crate::args::layout::LayoutArgs;
use crate::args::lease::{RangeArgs, StoreArgs};
use crate::failure::Failure;

/// `idgen leases`: the fleet view.
#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    range: RangeArgs,
    /// One JSON array of objects instead of lines of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    layout: LayoutArgs,
}

impl ListArgs {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        let range = self.range.range(&layout)?;
        self.store.refuse_missing_dir()?;
        let store = self.store.open()?;
        let numbers = store
            .survey(&range)
            .map_err(|error| Failure::runtime(error.to_string()))?;
        let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
        // A mark further ahead than a horizon and a TTL was not written by a holder on a
        // clock that agrees with this one.
        let far_ms = (store.default_outage_horizon() + store.ttl()).as_millis() as u64;
        let rows: Vec<serde_json::Value> = numbers
            .iter()
            .map(|number| {
                let valid_for_ms = number.mark_unix_ms.map(|mark| mark as i64 - now as i64);
                let far = number.mark_unix_ms.is_some_and(|mark| mark > now + far_ms);
                let mut anomalies = Vec::new();
                if far {
                    anomalies.push(format!(
                        "mark more than {} s ahead of this clock",
                        far_ms / 1000
                    ));
                }
                if let Some(detail) = &number.detail {
                    anomalies.push(detail.clone());
                }
                serde_json::json!({
                    "datacenter": number.datacenter,
                    "worker": number.worker,
                    "state": number.state.as_str(),
                    "holder": number.holder,
                    "markMs": number.mark_unix_ms,
                    "validForMs": valid_for_ms,
                    "anomalies": anomalies,
                })
            })
            .collect();
        if self.json {
            println!("{}", serde_json::Value::Array(rows));
            return Ok(());
        }
        for (number, row) in numbers.iter().zip(&rows) {
            let mut line = format!(
                "dc {} worker {:>4}  {:<7}",
                number.datacenter,
                number.worker,
                number.state.as_str()
            );
            if let Some(holder) = &number.holder {
                line += &format!("  holder {holder:?}");
            }
            if let Some(mark) = number.mark_unix_ms {
                let left = mark as i64 - now as i64;
                let when = if left > 0 {
                    format!("{:.1} s from now", left as f64 / 1000.0)
                } else {
                    "passed".to_string()
                };
                line += &format!("  mark {} ({when})", crate::time::rfc3339_ms(mark));
            }
            for anomaly in row["anomalies"].as_array().into_iter().flatten() {
                line += &format!("  ! {}", anomaly.as_str().unwrap_or_default());
            }
            println!("{line}");
        }
        let count = |state: NumberState| numbers.iter().filter(|n| n.state == state).count();
        println!(
            "{} numbers: {} free, {} held, {} corrupt, {} missing",
            numbers.len(),
            count(NumberState::Free),
            count(NumberState::Held),
            count(NumberState::Corrupt),
            count(NumberState::Missing)
        );
        Ok(())
    }
}
