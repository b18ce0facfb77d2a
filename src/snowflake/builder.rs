//! Configuring a Snowflake [`Generator`]: the [`Builder`].

use std::fmt;

use crate::DefaultClock;
use crate::clock::Clock;
use crate::engine::{ClockSource, Core, Rules};
use crate::error::{Error, Field};

use super::generator::Generator;
use super::id::Id;
use super::layout::Layout;
use super::node::Node;
use super::resume::{Mark, first_slot_after};

/// Default of [`Builder::clock_back_tolerance_ms`].
pub const DEFAULT_CLOCK_BACK_TOLERANCE_MS: u64 = 10;

/// Configures and builds a [`Generator`]; start from [`Generator::builder`].
#[derive(Clone)]
pub struct Builder<C> {
    layout: Layout,
    datacenter: u64,
    worker: u64,
    clock: ClockSource<C>,
    tolerance_ms: u64,
    borrow_ms: u64,
    mark: Option<Mark>,
}

impl Generator<DefaultClock> {
    /// A builder with the default layout, node 0/0, the [`DefaultClock`], a clock
    /// step-back tolerance of [`DEFAULT_CLOCK_BACK_TOLERANCE_MS`] and no borrowing.
    pub fn builder() -> Builder<DefaultClock> {
        Builder {
            layout: Layout::DEFAULT,
            datacenter: 0,
            worker: 0,
            clock: ClockSource::Default(DefaultClock::new),
            tolerance_ms: DEFAULT_CLOCK_BACK_TOLERANCE_MS,
            borrow_ms: 0,
            mark: None,
        }
    }
}

impl<C: Clock> Builder<C> {
    /// The bit layout (default: [`Layout::DEFAULT`]).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// The datacenter number; checked against the layout by [`Builder::build`].
    pub fn datacenter(mut self, datacenter: u64) -> Self {
        self.datacenter = datacenter;
        self
    }

    /// The worker number; checked against the layout by [`Builder::build`].
    pub fn worker(mut self, worker: u64) -> Self {
        self.worker = worker;
        self
    }

    /// The clock to read (default: the process's [`DefaultClock`]; pass a
    /// [`MonotonicClock`](crate::MonotonicClock) where no thread may be started).
    pub fn clock<D: Clock>(self, clock: D) -> Builder<D> {
        Builder {
            layout: self.layout,
            datacenter: self.datacenter,
            worker: self.worker,
            clock: ClockSource::Given(clock),
            tolerance_ms: self.tolerance_ms,
            borrow_ms: self.borrow_ms,
            mark: self.mark,
        }
    }

    /// How far the clock may be behind the last issued millisecond before calls are
    /// refused with [`Error::ClockMovedBackwards`]. Within it, calls go on in the last
    /// millisecond while its sequence lasts, then wait for the clock. Default:
    /// [`DEFAULT_CLOCK_BACK_TOLERANCE_MS`]; 0 refuses at once.
    pub fn clock_back_tolerance_ms(mut self, ms: u64) -> Self {
        self.tolerance_ms = ms;
        self
    }

    /// Lets a generator whose millisecond is used up go on in up to `ms` milliseconds ahead
    /// of the clock instead of waiting. Bursts then run above the per-millisecond ceiling;
    /// IDs may carry a time up to `ms` in the future. Default 0: never ahead of the clock.
    /// The clock-back check allows for it: a call is refused once the clock is behind the
    /// last issued millisecond by more than tolerance + borrow.
    pub fn borrow_ahead_ms(mut self, ms: u64) -> Self {
        self.borrow_ms = ms;
        self
    }

    /// Resumes after an ID issued by an earlier holder of this node: every ID the new
    /// generator issues is greater than `last`.
    pub fn resume_after(mut self, last: Id) -> Self {
        self.mark = Some(Mark::Id(last));
        self
    }

    /// Resumes after a millisecond (Unix) in which an earlier holder of this node may have
    /// issued IDs: the new generator starts in the millisecond after it.
    pub fn resume_after_unix_ms(mut self, unix_ms: u64) -> Self {
        self.mark = Some(Mark::UnixMs(unix_ms));
        self
    }

    /// Builds the clock now (if none was given), so that clones of this builder share it.
    #[cfg(not(idgen_loom))]
    pub(crate) fn resolve_clock(self) -> Self {
        match self.clock {
            ClockSource::Default(make) => Builder {
                clock: ClockSource::Given(make()),
                ..self
            },
            ClockSource::Given(_) => self,
        }
    }

    /// The clock, built now if none was given, and the layout.
    #[cfg(not(idgen_loom))]
    pub(crate) fn resolved_parts(self) -> (Self, C, Layout)
    where
        C: Clone,
    {
        let resolved = self.resolve_clock();
        let clock = match &resolved.clock {
            ClockSource::Given(clock) => clock.clone(),
            ClockSource::Default(make) => make(),
        };
        let layout = resolved.layout;
        (resolved, clock, layout)
    }

    /// Checks the configuration and builds the generator.
    ///
    /// Fails with [`Error::FieldOutOfRange`] for a datacenter or worker number the layout
    /// cannot hold, [`Error::EpochInFuture`] when the layout's epoch is after the clock, and
    /// [`Error::TimeExhausted`] when the resume mark leaves no millisecond to issue in.
    pub fn build(self) -> Result<Generator<C>, Error> {
        let layout = self.layout;
        for (field, value, max) in [
            (Field::Datacenter, self.datacenter, layout.max_datacenter()),
            (Field::Worker, self.worker, layout.max_worker()),
        ] {
            if value > max {
                return Err(Error::FieldOutOfRange { field, value, max });
            }
        }
        let clock = self.clock.into_clock();
        let now_unix_ms = clock.now_unix_ms();
        layout.check_epoch(now_unix_ms)?;
        if now_unix_ms > layout.last_unix_ms() {
            return Err(Error::TimeExhausted {
                last_unix_ms: layout.last_unix_ms(),
            });
        }
        let node_bits = layout.node_bits(self.datacenter, self.worker);
        let next_free = match self.mark {
            None => 0,
            Some(mark) => first_slot_after(&layout, node_bits, mark)?,
        };
        let rules = Rules {
            sequence_bits: layout.sequence_bits(),
            max_elapsed_ms: layout.max_elapsed_ms(),
            tolerance_ms: self.tolerance_ms,
            borrow_ms: self.borrow_ms,
        };
        let node = Node::unbounded(layout, node_bits);
        Ok(Generator {
            core: Core::new(rules, layout.epoch_unix_ms(), clock, node, next_free),
            resumed_after: match self.mark {
                Some(Mark::Id(id)) => Some(id),
                _ => None,
            },
        })
    }
}

impl<C: fmt::Debug> fmt::Debug for Builder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("layout", &self.layout)
            .field("datacenter", &self.datacenter)
            .field("worker", &self.worker)
            .field("clock", &self.clock)
            .field("clock_back_tolerance_ms", &self.tolerance_ms)
            .field("borrow_ahead_ms", &self.borrow_ms)
            .field("resume_after", &self.mark)
            .finish()
    }
}
