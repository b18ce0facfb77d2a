//! Telling a forked child from its parent: what a child copied (a random generator's
//! state, a block allocator's blocks) must not be used as its own. `forkguard`'s
//! `pthread_atfork` handler bumps a counter, so a check is one load; where the handler
//! cannot be registered, the process ID is compared on every check.

/// Whether this process is a fork of the one that made the check.
#[derive(Clone)]
pub(crate) enum ForkCheck {
    #[cfg(unix)]
    Handler(forkguard::atfork::Guard),
    #[cfg(unix)]
    ProcessId(forkguard::pid::Guard),
    /// No `fork()` where there is no Unix.
    #[cfg(not(unix))]
    Never,
    /// Unit tests: reports a fork once.
    #[cfg(test)]
    Simulated(bool),
}

impl ForkCheck {
    #[cfg(unix)]
    pub(crate) fn new() -> ForkCheck {
        match forkguard::atfork::Guard::try_new() {
            Ok(guard) => ForkCheck::Handler(guard),
            Err(_) => ForkCheck::ProcessId(forkguard::pid::Guard::default()),
        }
    }

    #[cfg(not(unix))]
    pub(crate) fn new() -> ForkCheck {
        ForkCheck::Never
    }

    /// Whether a fork happened since the last call (each fork is reported once).
    #[inline]
    pub(crate) fn forked(&mut self) -> bool {
        match self {
            #[cfg(unix)]
            ForkCheck::Handler(guard) => guard.detected_fork(),
            #[cfg(unix)]
            ForkCheck::ProcessId(guard) => guard.detected_fork(),
            #[cfg(not(unix))]
            ForkCheck::Never => false,
            #[cfg(test)]
            ForkCheck::Simulated(forked) => std::mem::take(forked),
        }
    }
}

/// A mark of the process that made it, shared by all its threads: a block allocator carries
/// one, so that a forked child refuses to serve the parent's blocks.
#[derive(Clone)]
#[cfg(feature = "blocks")]
#[cfg_attr(idgen_loom, allow(dead_code))]
pub(crate) struct BirthMark(ForkCheck);

#[cfg(feature = "blocks")]
#[cfg_attr(idgen_loom, allow(dead_code))]
impl BirthMark {
    pub(crate) fn new() -> BirthMark {
        BirthMark(ForkCheck::new())
    }

    /// Whether this process is a fork of the one that made the mark: one relaxed load (a
    /// `getpid` where `pthread_atfork` could not be registered).
    #[inline]
    pub(crate) fn in_forked_child(&self) -> bool {
        self.0.clone().forked()
    }
}
