//! The service's log: one line per event on stderr, as text or JSON, filtered by `RUST_LOG`
//! (default `info`). The library logs through the `log` facade (the lease keeper's
//! outages, losses and late renewals); its records join these lines, with their module as
//! the target.

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

use crate::failure::Failure;

/// The target of the service's own lines, whichever module writes them: `RUST_LOG`
/// directives name targets (`idgen::serve=debug` adds a line per request), so these stay
/// put when the code moves.
pub const SERVICE_TARGET: &str = "idgen::serve";

/// The target of the lease API's lines, for the same reason.
pub const LEASE_API_TARGET: &str = "idgen::generators";

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `2026-11-30T19:30:00.123456Z  INFO idgen::serve: listening address=...`
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message` and the event's
    /// fields.
    Json,
}

/// Installs the log for this process. A `RUST_LOG` that does not parse is bad input.
pub fn init(format: LogFormat) -> Result<(), Failure> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::try_new(&spec)
            .map_err(|error| Failure::input(format!("RUST_LOG={spec:?}: {error}")))?,
        _ => EnvFilter::new("info"),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    installed.map_err(|error| Failure::runtime(format!("cannot start the log: {error}")))
}
