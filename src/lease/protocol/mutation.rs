//! Deliberate defects of the machine, compiled only into the crate's own tests (`cfg(test)`,
//! never a cargo feature that `--all-features` would turn on): each must be caught by the
//! fleet simulator, or the simulator has lost its teeth. `docs/leases.md` has the table.

/// One defect, switched on through [`Settings`](super::Settings) by a simulator test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mutation {
    /// A release is sent before the ceiling drops to 0 (the stop follows its answer).
    ReleaseBeforeStop,
    /// A number is used without waiting for its previous holder's mark to pass.
    IssueBeforePreviousMark,
    /// The ceiling is raised to a renewal's mark when it is sent, not once confirmed.
    CeilingBeforeConfirmed,
    /// A lost mark is inferred with the holder's own horizon, not the largest recorded.
    InferWithOwnHorizon,
    /// A renewal's mark is `now + horizon` even when that is below the last mark written.
    MarkBelowWritten,
    /// A number found lost keeps its ceiling.
    KeepCeilingWhenLost,
    /// A number taken whose mark is still ahead is given back without its mark (0).
    GiveBackWithoutMark,
    /// The store's layout is not checked before a number is taken.
    SkipLayoutCheck,
}
