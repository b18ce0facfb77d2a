//! Flag groups that several commands flatten into theirs, each with what it resolves to:
//! the layout, the lease store and range, the block store, the declared sequences.

pub mod blocks;
pub mod layout;
pub mod lease;
pub mod sequences;
