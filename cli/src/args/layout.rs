//! The layout flags shared by every subcommand.

use clap::Args;
use idgen::{Layout, Preset};

use crate::failure::Failure;
use crate::time::parse_rfc3339_ms;

#[derive(Args, Clone)]
pub struct LayoutArgs {
    /// A well-known layout instead of the five flags below: twitter (made and read),
    /// discord, instagram, sonyflake, mastodon (read only: `idgen decode --preset NAME`).
    #[arg(
        long,
        env = "IDGEN_PRESET",
        value_name = "NAME",
        conflicts_with_all = ["time_bits", "datacenter_bits", "worker_bits", "sequence_bits", "epoch"]
    )]
    preset: Option<String>,
    /// Bits of milliseconds since the epoch.
    #[arg(long, default_value_t = 41, env = "IDGEN_TIME_BITS")]
    time_bits: u32,
    /// Bits of datacenter number.
    #[arg(long, default_value_t = 5, env = "IDGEN_DATACENTER_BITS")]
    datacenter_bits: u32,
    /// Bits of worker number.
    #[arg(long, default_value_t = 5, env = "IDGEN_WORKER_BITS")]
    worker_bits: u32,
    /// Bits of sequence number.
    #[arg(long, default_value_t = 12, env = "IDGEN_SEQUENCE_BITS")]
    sequence_bits: u32,
    /// The custom epoch: a UTC time (2024-01-01T00:00:00Z) or Unix milliseconds.
    #[arg(long, default_value = "2024-01-01T00:00:00Z", env = "IDGEN_EPOCH")]
    epoch: String,
}

impl LayoutArgs {
    /// The preset named by `--preset`, if any.
    pub fn preset(&self) -> Result<Option<Preset>, Failure> {
        // An empty IDGEN_PRESET is no preset, as an unset one is.
        self.preset
            .as_deref()
            .filter(|name| !name.is_empty())
            .map(|name| {
                name.parse::<Preset>()
                    .map_err(|error| Failure::input(format!("--preset: {error}")))
            })
            .transpose()
    }

    /// The layout the flags describe; a preset that fits none is refused, saying so.
    pub fn layout(&self) -> Result<Layout, Failure> {
        if let Some(preset) = self.preset()? {
            return preset.layout().ok_or_else(|| {
                Failure::input(format!(
                    "--preset {preset}: its IDs are not time | datacenter | worker | \
                     sequence in 63 bits of milliseconds, so idgen cannot make them; it reads \
                     them: idgen decode --preset {preset} ID..."
                ))
            });
        }
        let epoch_unix_ms: i64 = if !self.epoch.is_empty()
            && self.epoch.bytes().all(|b| b.is_ascii_digit() || b == b'-')
        {
            self.epoch.parse().map_err(|_| {
                Failure::input(format!(
                    "--epoch {:?} is not a number of Unix ms",
                    self.epoch
                ))
            })?
        } else {
            let ms = parse_rfc3339_ms(&self.epoch)
                .map_err(|reason| Failure::input(format!("--epoch {reason}")))?;
            i64::try_from(ms).map_err(|_| Failure::input("--epoch is too far in the future"))?
        };
        Layout::new(
            self.time_bits,
            self.datacenter_bits,
            self.worker_bits,
            self.sequence_bits,
        )
        .and_then(|layout| layout.with_epoch_unix_ms(epoch_unix_ms))
        .map_err(|error| Failure::input(error.to_string()))
    }
}
