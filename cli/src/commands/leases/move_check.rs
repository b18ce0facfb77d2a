//! `idgen leases move-check`: whether a fleet may move from its store's layout to another.

use clap::Args;
use idgen::lease::{NumberState, WorkerRange};

use crate::args::layout::LayoutArgs;
use crate::args::lease::StoreArgs;
use crate::failure::Failure;
use crate::time::rfc3339_ms;

/// `idgen leases move-check`: whether a fleet may leave this store's layout for the one
/// the layout flags give.
#[derive(Args)]
pub struct MoveCheckArgs {
    /// The store the fleet leaves (its recorded layout and marks are read, nothing taken).
    #[command(flatten)]
    store: StoreArgs,
    /// The layout the fleet moves to.
    #[command(flatten)]
    layout: LayoutArgs,
}

impl MoveCheckArgs {
    pub fn run(self) -> Result<(), Failure> {
        let new = self.layout.layout()?;
        self.store.refuse_missing_dir()?;
        let store = self.store.open()?;
        let runtime = |error: idgen::Error| Failure::runtime(error.to_string());
        let old = store.recorded_layout().map_err(runtime)?.ok_or_else(|| {
            Failure::input(
                "the store records no layout (it was last used by an idgen older than the \
                 layout record): start one process of the fleet's layout on it, or run \
                 `idgen leases init` with the fleet's layout flags, then check again",
            )
        })?;
        // Every mark of every number: no holder issued past the highest, and none of
        // those still running will.
        let mut last_mark = None::<u64>;
        for datacenter in 0..=old.max_datacenter() {
            let numbers = store
                .survey(&WorkerRange::all(&old, datacenter))
                .map_err(runtime)?;
            for number in numbers {
                if number.state == NumberState::Held {
                    return Err(Failure::runtime(format!(
                        "worker {} of datacenter {datacenter} is held{}: the old fleet is still \
                         issuing and its marks still move; stop it, then check again",
                        number.worker,
                        number
                            .holder
                            .as_ref()
                            .map(|holder| format!(" by {holder:?}"))
                            .unwrap_or_default()
                    )));
                }
                if number.state == NumberState::Corrupt || number.state == NumberState::Missing {
                    return Err(Failure::runtime(format!(
                        "worker {} of datacenter {datacenter} is {}: its last mark is not \
                         known, so neither is where the old layout left the ID space ({})",
                        number.worker,
                        number.state.as_str(),
                        number.detail.unwrap_or_default()
                    )));
                }
                last_mark = last_mark.max(number.mark_unix_ms);
            }
        }
        let now = idgen::Clock::now_unix_ms(&idgen::SystemClock);
        // No holder issued an ID dated after its number's last mark; a store with no mark
        // at all never had an ID issued on it.
        let until = last_mark.unwrap_or(0);
        let left_at = old.last_id_until(until);
        let new_first = new.first_unix_ms_above(left_at);
        println!("old layout: {old}");
        println!("new layout: {new}");
        println!(
            "the old layout's IDs, up to its last mark ({}): at most {}",
            rfc3339_ms(until),
            left_at
        );
        match new_first {
            Some(from) if from <= now => {
                println!(
                    "ok: every ID of the new layout from now on lies above them (its first ID \
                     now is {})",
                    new.last_id_until(now.saturating_sub(1)).as_u64() + 1
                );
                Ok(())
            }
            Some(from) => Err(Failure::runtime(format!(
                "refused: the new layout's IDs lie below the old layout's until {} ({} ms from \
                 now); start the new fleet after that, or choose an epoch or widths whose IDs \
                 lie above",
                rfc3339_ms(from),
                from - now
            ))),
            None => Err(Failure::runtime(
                "refused: the new layout never issues an ID above the old layout's last one \
                 (its time runs out first); choose an earlier epoch or more time bits",
            )),
        }
    }
}
