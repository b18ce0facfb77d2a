//! Where a resumed generator starts, so that it never issues an ID at or below what an
//! earlier holder of its node issued: pure bit maths over the layout.

use crate::error::Error;

use super::id::Id;
use super::layout::Layout;

/// Where a resumed generator starts: everything up to this was issued by an earlier holder.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    Id(Id),
    UnixMs(u64),
}

/// The lowest packed slot whose ID, on this node, is above everything the mark covers.
pub(super) fn first_slot_after(layout: &Layout, node_bits: u64, mark: Mark) -> Result<u64, Error> {
    let bits = layout.sequence_bits();
    let exhausted = Error::TimeExhausted {
        last_unix_ms: layout.last_unix_ms(),
    };
    let slot = match mark {
        Mark::UnixMs(unix_ms) => match unix_ms.checked_sub(layout.epoch_unix_ms()) {
            // Nothing can have been issued before the epoch.
            None => 0,
            Some(elapsed) if elapsed >= layout.max_elapsed_ms() => return Err(exhausted),
            Some(elapsed) => (elapsed + 1) << bits,
        },
        Mark::Id(last) => {
            let raw = last.as_u64();
            let elapsed = raw >> layout.time_shift();
            let their_node = raw & !layout.max_sequence() & ((1 << layout.time_shift()) - 1);
            let sequence = raw & layout.max_sequence();
            if node_bits == their_node {
                ((elapsed << bits) | sequence) + 1
            } else if node_bits > their_node {
                // Our IDs in the same millisecond already sort above theirs.
                elapsed << bits
            } else {
                (elapsed + 1) << bits
            }
        }
    };
    if slot > (layout.max_elapsed_ms() << bits | layout.max_sequence()) {
        return Err(exhausted);
    }
    Ok(slot)
}
