//! The worker numbers a process may lease.

use std::fmt;
use std::ops::RangeInclusive;

use crate::error::{Error, Field};
use crate::snowflake::Layout;

/// The worker numbers a process may lease: one datacenter and an inclusive range of worker
/// numbers in it (for example production `0-799`, staging `800-1023`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkerRange {
    datacenter: u64,
    first: u64,
    last: u64,
}

impl WorkerRange {
    /// Workers `workers` of `datacenter`. Fails when the range is empty (`5..=4`).
    pub fn new(datacenter: u64, workers: RangeInclusive<u64>) -> Result<WorkerRange, Error> {
        let (first, last) = workers.into_inner();
        if first > last {
            return Err(Error::LeaseConfig {
                reason: format!("the worker range {first}-{last} is empty"),
            });
        }
        Ok(WorkerRange {
            datacenter,
            first,
            last,
        })
    }

    /// Parses `"A-B"` (inclusive) or a single `"A"`, in canonical decimal.
    ///
    /// ```
    /// use idgen::lease::WorkerRange;
    /// let range = WorkerRange::parse(2, "800-1023")?;
    /// assert_eq!((range.first(), range.last()), (800, 1023));
    /// assert!(WorkerRange::parse(2, "10-3").is_err());
    /// assert!(WorkerRange::parse(2, "-3").is_err());
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub fn parse(datacenter: u64, text: &str) -> Result<WorkerRange, Error> {
        let number = |part: &str| -> Result<u64, Error> {
            let canonical = !part.is_empty()
                && part.bytes().all(|b| b.is_ascii_digit())
                && (part == "0" || !part.starts_with('0'));
            match part.parse::<u64>() {
                Ok(value) if canonical => Ok(value),
                _ => Err(Error::LeaseConfig {
                    reason: format!(
                        "the worker range {text:?} is not A-B or A with decimal numbers \
                         (the part {part:?} is not one)"
                    ),
                }),
            }
        };
        let (first, last) = match text.split_once('-') {
            Some((first, last)) => (number(first)?, number(last)?),
            None => {
                let only = number(text)?;
                (only, only)
            }
        };
        WorkerRange::new(datacenter, first..=last)
    }

    /// Every worker number of a layout, in `datacenter`.
    pub fn all(layout: &Layout, datacenter: u64) -> WorkerRange {
        WorkerRange {
            datacenter,
            first: 0,
            last: layout.max_worker(),
        }
    }

    /// The datacenter.
    pub fn datacenter(&self) -> u64 {
        self.datacenter
    }

    /// The lowest worker number of the range.
    pub fn first(&self) -> u64 {
        self.first
    }

    /// The highest worker number of the range.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The worker numbers, lowest first.
    pub fn workers(&self) -> RangeInclusive<u64> {
        self.first..=self.last
    }

    /// Fails unless the datacenter and every worker number fit `layout`.
    pub fn check(&self, layout: &Layout) -> Result<(), Error> {
        for (field, value, max) in [
            (Field::Datacenter, self.datacenter, layout.max_datacenter()),
            (Field::Worker, self.last, layout.max_worker()),
        ] {
            if value > max {
                return Err(Error::FieldOutOfRange { field, value, max });
            }
        }
        Ok(())
    }
}

impl fmt::Display for WorkerRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "datacenter {} workers {}-{}",
            self.datacenter, self.first, self.last
        )
    }
}
