//! `idgen layout`: the arithmetic of a layout (lifetime, last instant, workers, rates), as
//! lines or JSON.

use clap::Args;
use idgen::{Clock, SystemClock};

use crate::api::LayoutInfo;
use crate::args::layout::LayoutArgs;
use crate::failure::Failure;
use crate::lifetime;
use crate::output::json_text;
use crate::time;

#[derive(Args)]
pub struct LayoutCommand {
    /// As a JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    layout: LayoutArgs,
}

impl LayoutCommand {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        if self.json {
            println!("{}", json_text(&LayoutInfo::of(&layout)));
            return Ok(());
        }
        println!(
            "bits: time {}, datacenter {}, worker {}, sequence {}",
            layout.time_bits(),
            layout.datacenter_bits(),
            layout.worker_bits(),
            layout.sequence_bits()
        );
        println!("epoch: {}", time::rfc3339_ms(layout.epoch_unix_ms()));
        println!(
            "lifetime: {:.1} years, until {}",
            layout.lifetime_years(),
            time::rfc3339_ms(layout.last_unix_ms())
        );
        println!(
            "ends: {}",
            lifetime::relative(&layout, SystemClock.now_unix_ms())
        );
        println!(
            "nodes: {} ({} datacenters x {} workers)",
            layout.nodes(),
            layout.datacenters(),
            layout.workers_per_datacenter()
        );
        println!(
            "IDs per second per worker: {}",
            layout.ids_per_second_per_node()
        );
        println!(
            "cluster maximum: {} IDs per second",
            layout.cluster_ids_per_second()
        );
        Ok(())
    }
}
