//! IDs as time bounds: the first and last ID any generator can issue in a millisecond, and
//! for a span of creation times `[from, to)` the two IDs a range query or a cursor needs
//! ([`IdSpan`]), for every kind: [`Layout::first_id_at`] and [`Layout::span`] for Snowflake
//! IDs (the layout fixes where the time lies), [`Uuid7::span`](crate::Uuid7::span) and
//! [`Ulid::span`](crate::Ulid::span) for the 128-bit kinds.
//!
//! "Made in `[from, to)`" means the time embedded in the ID. A generator that borrows
//! milliseconds ahead under load, or whose clock is skewed, sets that time apart from the
//! wall clock at the moment of the call, by at most its tolerance: a cursor that must not
//! miss a row written late should overlap its pages by that much. Opaque IDs are encrypted:
//! their order says nothing of time, so they have no bounds.
//!
//! It may use `crate::error` and `crate::snowflake`.

use crate::error::{Error, Field};
use crate::snowflake::{Id, Layout};

/// The IDs whose embedded time lies in a span of milliseconds `[from, to)`: every ID at or
/// above `start` and, when there is an `end`, below it. No `end` means the span reaches past
/// the last millisecond the kind can hold: every later ID is inside. A span that holds no
/// ID (`to` not after `from`, or `from` past the last millisecond) has an `end` at or
/// below its `start`: [`IdSpan::is_empty`].
///
/// ```
/// use idgen::{IdParts, Layout};
/// let layout = Layout::default();
/// let from = layout.epoch_unix_ms() + 1_000;
/// let span = layout.span(from, from + 60_000);
/// let made = |unix_ms| layout.compose(IdParts { unix_ms, datacenter: 31, worker: 31, sequence: 4095 });
/// assert!(span.contains(&made(from)?));
/// assert!(span.contains(&made(from + 59_999)?));
/// assert!(!span.contains(&made(from + 60_000)?));
/// assert!(!span.contains(&made(from - 1)?));
/// # Ok::<(), idgen::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdSpan<T> {
    /// The first ID of the span's first millisecond: inclusive.
    pub start: T,
    /// The first ID of the millisecond after the span: exclusive.
    pub end: Option<T>,
}

impl<T: Ord> IdSpan<T> {
    /// Whether `id` lies in the span: at or above `start` and below `end`.
    pub fn contains(&self, id: &T) -> bool {
        *id >= self.start && self.end.as_ref().is_none_or(|end| id < end)
    }

    /// Whether the span holds no ID at all.
    pub fn is_empty(&self) -> bool {
        self.end.as_ref().is_some_and(|end| *end <= self.start)
    }
}

/// The span `[from_unix_ms, to_unix_ms)` of a kind whose IDs can carry the milliseconds
/// `first_unix_ms..=last_unix_ms`, `first_at` giving the first ID of one of them and `last`
/// being the kind's largest ID. A span reaching before the first millisecond is cut there
/// (no ID was made before it); one reaching past the last has no end. One that holds no
/// millisecond of the kind is empty: `[last, last)`.
pub(crate) fn span_of<T: Copy>(
    from_unix_ms: u64,
    to_unix_ms: u64,
    first_unix_ms: u64,
    last_unix_ms: u64,
    first_at: impl Fn(u64) -> T,
    last: T,
) -> IdSpan<T> {
    if from_unix_ms >= to_unix_ms || from_unix_ms > last_unix_ms || to_unix_ms <= first_unix_ms {
        return IdSpan {
            start: last,
            end: Some(last),
        };
    }
    IdSpan {
        start: first_at(from_unix_ms.max(first_unix_ms)),
        end: (to_unix_ms <= last_unix_ms).then(|| first_at(to_unix_ms)),
    }
}

impl Layout {
    /// The smallest ID any node of this layout can issue in the millisecond `unix_ms`:
    /// every field below the time zero.
    ///
    /// ```
    /// use idgen::Layout;
    /// let layout = Layout::default();
    /// assert_eq!(layout.first_id_at(layout.epoch_unix_ms() + 1)?.as_u64(), 1 << 22);
    /// assert!(layout.first_id_at(layout.epoch_unix_ms() - 1).is_err());
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn first_id_at(&self, unix_ms: u64) -> Result<Id, Error> {
        let elapsed = self.time_field(unix_ms)?;
        Ok(Id::from_raw(elapsed << self.time_shift()))
    }

    /// The largest ID any node of this layout can issue in the millisecond `unix_ms`: every
    /// field below the time at its largest.
    ///
    /// ```
    /// use idgen::Layout;
    /// let layout = Layout::default();
    /// assert_eq!(layout.last_id_at(layout.epoch_unix_ms())?.as_u64(), (1 << 22) - 1);
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn last_id_at(&self, unix_ms: u64) -> Result<Id, Error> {
        let elapsed = self.time_field(unix_ms)?;
        Ok(Id::from_raw(
            elapsed << self.time_shift() | ((1 << self.time_shift()) - 1),
        ))
    }

    /// The IDs of this layout made in `[from_unix_ms, to_unix_ms)` by their embedded time
    /// (see the [module docs](crate::bounds)): for `WHERE id >= start AND id < end`. A span
    /// starting before the epoch starts at it; one ending past the layout's last
    /// millisecond has no end; one that holds none of the layout's milliseconds (`to` not
    /// after `from`, or wholly before the epoch or after the end) is empty.
    pub fn span(&self, from_unix_ms: u64, to_unix_ms: u64) -> IdSpan<Id> {
        span_of(
            from_unix_ms,
            to_unix_ms,
            self.epoch_unix_ms(),
            self.last_unix_ms(),
            |unix_ms| Id::from_raw((unix_ms - self.epoch_unix_ms()) << self.time_shift()),
            self.last_id_until(self.last_unix_ms()),
        )
    }

    /// The time field of the millisecond `unix_ms`, checked against the layout.
    fn time_field(&self, unix_ms: u64) -> Result<u64, Error> {
        if unix_ms < self.epoch_unix_ms() {
            return Err(Error::BeforeEpoch {
                unix_ms,
                epoch_unix_ms: self.epoch_unix_ms(),
            });
        }
        if unix_ms > self.last_unix_ms() {
            return Err(Error::FieldOutOfRange {
                field: Field::Time,
                value: unix_ms,
                max: self.last_unix_ms(),
            });
        }
        Ok(unix_ms - self.epoch_unix_ms())
    }
}
