//! `idgen leases` without a subcommand: every worker number of a range, free or held, its
//! holder and mark, and anything amiss.

use clap::Args;
use idgen::lease::NumberState;

use crate::args::layout::LayoutArgs;
use crate::args::lease::{RangeArgs, StoreArgs};
use crate::failure::Failure;
use crate::fleet::{Shown, far_ahead_ms, fleet_numbers};

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
        let rows = fleet_numbers(&numbers, now, far_ahead_ms(store.as_ref()), Shown::All);
        if self.json {
            let text = serde_json::to_string(&rows)
                .map_err(|error| Failure::runtime(error.to_string()))?;
            println!("{text}");
            return Ok(());
        }
        for row in &rows {
            let mut line = format!(
                "dc {} worker {:>4}  {:<7}",
                row.datacenter, row.worker, row.state
            );
            if let Some(holder) = &row.holder {
                line += &format!("  holder {holder:?}");
            }
            if let (Some(mark), Some(left)) = (row.mark_ms, row.valid_for_ms) {
                let when = if left > 0 {
                    format!("{:.1} s from now", left as f64 / 1000.0)
                } else {
                    "passed".to_string()
                };
                line += &format!("  mark {} ({when})", crate::time::rfc3339_ms(mark));
            }
            for anomaly in &row.anomalies {
                line += &format!("  ! {anomaly}");
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
