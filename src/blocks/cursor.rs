//! The allocator's hot path: a cursor inside the current block, advanced by compare-and-swap.
//!
//! Two words: `next`, the next value to hand out, and `end`, one past the current block.
//! A taker reads `end`, then `next`, and moves `next` forward by compare-and-swap while it is
//! below `end`. A block is installed only when the current one is used up, by storing `next`
//! (the new first value) *before* `end`, and blocks only ever go up (a new block starts at
//! or above the old end). So `next` never decreases: a compare-and-swap from `v` succeeds
//! only if `next` stayed `v` since it was read, and a taker that read the old `end` then
//! sees either the old block's `next` (still valid) or the new block's, which is at or
//! above the old `end` and makes it retry on the slow path. A taker that read the new `end`
//! (Acquire, paired with the installer's Release) also sees the new `next`. No value is
//! taken twice, and each taker's values increase.

use crate::sync::{AtomicU64, Ordering};

/// The cursor over the current block (see the module docs for why it is sound).
#[derive(Debug)]
pub struct BlockCursor {
    next: AtomicU64,
    end: AtomicU64,
}

impl Default for BlockCursor {
    fn default() -> Self {
        BlockCursor::new()
    }
}

impl BlockCursor {
    /// A cursor with no block.
    pub fn new() -> BlockCursor {
        BlockCursor {
            next: AtomicU64::new(0),
            end: AtomicU64::new(0),
        }
    }

    /// Takes up to `want` (at least 1) values of the current block: `first..upto`, or
    /// `None` when the block is used up (or the cursor closed).
    #[inline]
    pub fn take(&self, want: u64) -> Option<(u64, u64)> {
        let end = self.end.load(Ordering::Acquire);
        let mut next = self.next.load(Ordering::Acquire);
        loop {
            if next >= end {
                return None;
            }
            let upto = next + want.clamp(1, end - next);
            match self
                .next
                .compare_exchange_weak(next, upto, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some((next, upto)),
                Err(current) => next = current,
            }
        }
    }

    /// Whether the current block is used up (or the cursor closed).
    pub fn is_used_up(&self) -> bool {
        let end = self.end.load(Ordering::Acquire);
        self.next.load(Ordering::Acquire) >= end
    }

    /// Makes `first..end` the current block. Only for one installer at a time (the
    /// allocator holds its lock), only once the current block is used up, and only with
    /// `first` at or above the current `end`.
    pub fn install(&self, first: u64, end: u64) {
        debug_assert!(self.is_used_up() && first >= self.end.load(Ordering::Acquire));
        self.next.store(first, Ordering::Release);
        self.end.store(end, Ordering::Release);
    }

    /// Stops all taking, and says where the current block's unused values begin (its end,
    /// when it is used up).
    pub fn close(&self) -> u64 {
        let next = self.next.swap(u64::MAX, Ordering::AcqRel);
        next.min(self.end.load(Ordering::Acquire))
    }
}
