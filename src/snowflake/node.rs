//! The node a Snowflake generator issues as, and its lease ceiling: the [`Tenure`] word
//! packs both so the hot path reads them with one atomic load, and [`Node`] is the gate that
//! checks it (see `engine::Gate`). Pure bit maths and one atomic; no clock, no I/O.

use crate::engine::Gate;
use crate::error::Error;
use crate::sync::{AtomicU64, Ordering};

use super::id::Id;
use super::layout::Layout;

/// The tenure word: which node a generator issues as, and the first millisecond it may no
/// longer issue in, packed as `ceiling_ms << time_shift | node_bits` (the datacenter and
/// worker fields in the places they take in an ID), so both are read with one atomic load.
/// A leased generator's keeper moves the ceiling as its lease is renewed and swaps the node
/// when it takes another worker number; a generator without a lease has a ceiling past the
/// layout's last millisecond, which never binds.
///
/// Packed this way the ceiling check is one comparison of the finished ID with the word: an
/// ID's node bits equal the word's and its sequence bits are at least zero, so the ID is
/// below the word exactly when its millisecond is below the ceiling. The ceiling fits: at
/// most `2^time_bits`, shifted by `63 - time_bits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tenure(pub(crate) u64);

impl Tenure {
    pub(crate) const fn new(ceiling_ms: u64, node_bits: u64, time_shift: u32) -> Tenure {
        Tenure(ceiling_ms << time_shift | node_bits)
    }

    #[cfg_attr(idgen_loom, allow(dead_code))] // read by the lease keeper only
    pub(crate) const fn ceiling_ms(self, time_shift: u32) -> u64 {
        self.0 >> time_shift
    }

    pub(crate) const fn node_bits(self, node_mask: u64) -> u64 {
        self.0 & node_mask
    }

    /// Whether an ID composed on this tenure's node lies in a millisecond below the ceiling.
    #[inline]
    pub(crate) const fn allows(self, id: u64) -> bool {
        id < self.0
    }
}

/// The Snowflake generator's gate: the node it issues as, its lease ceiling, and how a slot
/// becomes an ID on that node.
pub(super) struct Node {
    /// The node and its ceiling, packed (see [`Tenure`]). Only a lease keeper writes it, and
    /// rarely.
    pub(super) tenure: AtomicU64,
    sequence_bits: u32,
    /// Where the time field starts in an ID.
    pub(super) time_shift: u32,
    /// The datacenter and worker fields of an ID, in place.
    node_mask: u64,
    sequence_mask: u64,
    pub(super) layout: Layout,
}

impl Gate for Node {
    type Pass = Tenure;

    #[inline]
    fn read(&self) -> Tenure {
        Tenure(self.tenure.load(Ordering::Acquire))
    }

    #[inline]
    fn admit(&self, tenure: Tenure, first_slot: u64) -> Result<(), Error> {
        if tenure.allows(self.compose(first_slot, tenure).as_u64()) {
            Ok(())
        } else {
            Err(self.lease_expired(tenure))
        }
    }
}

impl Node {
    /// The gate of a generator without a lease: a ceiling past the layout's last millisecond,
    /// which never binds.
    pub(super) fn unbounded(layout: Layout, node_bits: u64) -> Node {
        let tenure = Tenure::new(layout.max_elapsed_ms() + 1, node_bits, layout.time_shift());
        Node {
            tenure: AtomicU64::new(tenure.0),
            sequence_bits: layout.sequence_bits(),
            time_shift: layout.time_shift(),
            node_mask: ((1 << layout.time_shift()) - 1) & !layout.max_sequence(),
            sequence_mask: layout.max_sequence(),
            layout,
        }
    }

    /// The ID for a packed slot on the tenure's node.
    #[inline]
    pub(super) fn compose(&self, slot: u64, tenure: Tenure) -> Id {
        let elapsed_ms = slot >> self.sequence_bits;
        Id::from_raw(
            (elapsed_ms << self.time_shift)
                | tenure.node_bits(self.node_mask)
                | (slot & self.sequence_mask),
        )
    }

    pub(super) fn node_fields(&self, tenure: Tenure) -> (u64, u64) {
        let node = tenure.node_bits(self.node_mask) >> self.sequence_bits;
        (
            node >> self.layout.worker_bits(),
            node & self.layout.max_worker(),
        )
    }

    #[cold]
    pub(super) fn lease_expired(&self, tenure: Tenure) -> Error {
        let (datacenter, worker) = self.node_fields(tenure);
        Error::LeaseExpired { datacenter, worker }
    }
}

#[cfg(test)]
mod tests {
    use super::Tenure;

    #[test]
    fn the_ceiling_check_is_exact_at_the_boundary() {
        // Default layout: 12 sequence bits, 10 node bits, time shift 22.
        let node_bits = 0b10_1010_1010 << 12;
        let tenure = Tenure::new(1_000, node_bits, 22);
        assert_eq!(tenure.ceiling_ms(22), 1_000);
        assert_eq!(tenure.node_bits(0x3ff << 12), node_bits);
        let id = |ms: u64, seq: u64| ms << 22 | node_bits | seq;
        assert!(tenure.allows(id(999, 4_095)));
        assert!(!tenure.allows(id(1_000, 0)));
        assert!(!tenure.allows(id(1_001, 0)));
        // The unbounded ceiling, 2^41 ms, still fits and allows the last ID.
        let unbounded = Tenure::new(1 << 41, node_bits, 22);
        assert!(unbounded.allows(id((1 << 41) - 1, 4_095)));
        assert!(!Tenure::new(0, node_bits, 22).allows(id(0, 0)));
    }
}
