//! The bit layout of an ID: field widths, the custom epoch, packing and unpacking, and the
//! arithmetic that follows from them. Pure maths: no atomics and no clock here.

use std::fmt;

use crate::error::{Error, Field};

use super::id::Id;

/// 2024-01-01T00:00:00Z in Unix milliseconds, the default epoch.
pub const DEFAULT_EPOCH_UNIX_MS: u64 = 1_704_067_200_000;

/// Bits of an ID below the sign bit.
const PAYLOAD_BITS: u32 = 63;

/// Milliseconds in a mean Gregorian year (365.2425 days).
const MS_PER_YEAR: f64 = 365.2425 * 86_400_000.0;

/// How the 63 payload bits of an ID are split, and where time starts.
///
/// From the most significant bit down: the sign bit (always 0), milliseconds since the
/// epoch, datacenter, worker, sequence. Because time sits on top, IDs compare in creation
/// order (to the millisecond); inside a millisecond they compare by node, then sequence.
///
/// | field | default bits | range |
/// |---|---|---|
/// | sign | 1 | always 0 |
/// | time | 41 | 2^41 ms = 69.7 years from 2024-01-01T00:00:00Z |
/// | datacenter | 5 | 32 datacenters |
/// | worker | 5 | 32 workers each, 1,024 nodes in all |
/// | sequence | 12 | 4,096 IDs per millisecond per node |
///
/// ```
/// use idgen::Layout;
///
/// let layout = Layout::default();
/// assert_eq!(layout.nodes(), 1024);
/// assert_eq!(layout.ids_per_second_per_node(), 4_096_000);
/// assert_eq!(layout.lifetime_years().floor(), 69.0);
///
/// // 39 bits of time, no datacenter, 12 bits of worker, 12 of sequence:
/// let wide = Layout::new(39, 0, 12, 12)?;
/// assert_eq!(wide.nodes(), 4096);
///
/// // Widths must add up to 63.
/// assert!(Layout::new(41, 5, 5, 13).is_err());
/// # Ok::<(), idgen::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    time_bits: u32,
    datacenter_bits: u32,
    worker_bits: u32,
    sequence_bits: u32,
    epoch_unix_ms: u64,
}

/// The fields of a decoded ID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdParts {
    /// Creation time, in Unix milliseconds (the epoch already added back).
    pub unix_ms: u64,
    /// Datacenter number.
    pub datacenter: u64,
    /// Worker number inside the datacenter.
    pub worker: u64,
    /// Sequence number inside the millisecond.
    pub sequence: u64,
}

impl Default for Layout {
    /// 41 bits of time from 2024-01-01T00:00:00Z, 5 of datacenter, 5 of worker, 12 of
    /// sequence.
    fn default() -> Self {
        Layout::DEFAULT
    }
}

const fn mask(bits: u32) -> u64 {
    // `bits` is at most 62, so the shift cannot overflow.
    (1u64 << bits) - 1
}

impl Layout {
    /// The default layout: 41 / 5 / 5 / 12 from 2024-01-01T00:00:00Z.
    pub const DEFAULT: Layout = Layout {
        time_bits: 41,
        datacenter_bits: 5,
        worker_bits: 5,
        sequence_bits: 12,
        epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
    };

    /// A layout with these widths and the default epoch (2024-01-01T00:00:00Z).
    ///
    /// The widths must add up to 63, and time and sequence need at least one bit each;
    /// datacenter and worker may be 0 bits wide.
    pub const fn new(
        time_bits: u32,
        datacenter_bits: u32,
        worker_bits: u32,
        sequence_bits: u32,
    ) -> Result<Layout, Error> {
        // Widths are summed in u64 so that absurd inputs cannot overflow the check.
        let total =
            time_bits as u64 + datacenter_bits as u64 + worker_bits as u64 + sequence_bits as u64;
        if total != PAYLOAD_BITS as u64 {
            let total = if total > u32::MAX as u64 {
                u32::MAX
            } else {
                total as u32
            };
            return Err(Error::LayoutWidthSum { total });
        }
        if time_bits == 0 {
            return Err(Error::LayoutZeroWidth { field: Field::Time });
        }
        if sequence_bits == 0 {
            return Err(Error::LayoutZeroWidth {
                field: Field::Sequence,
            });
        }
        Ok(Layout {
            time_bits,
            datacenter_bits,
            worker_bits,
            sequence_bits,
            epoch_unix_ms: DEFAULT_EPOCH_UNIX_MS,
        })
    }

    /// The same widths with another epoch, in Unix milliseconds.
    ///
    /// An epoch before 1970 is rejected here. An epoch in the future is rejected when a
    /// generator is built, against that generator's clock (see [`Layout::check_epoch`]).
    ///
    /// ```
    /// use idgen::Layout;
    /// let layout = Layout::default().with_epoch_unix_ms(1_288_834_974_657)?; // Twitter's
    /// assert_eq!(layout.epoch_unix_ms(), 1_288_834_974_657);
    /// assert!(Layout::default().with_epoch_unix_ms(-1).is_err());
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub const fn with_epoch_unix_ms(self, epoch_unix_ms: i64) -> Result<Layout, Error> {
        if epoch_unix_ms < 0 {
            return Err(Error::EpochBefore1970 { epoch_unix_ms });
        }
        Ok(Layout {
            epoch_unix_ms: epoch_unix_ms as u64,
            ..self
        })
    }

    /// Checks that the epoch is not after `now_unix_ms`: an epoch in the future would make
    /// every ID fail until that day, which is always a configuration mistake.
    pub const fn check_epoch(&self, now_unix_ms: u64) -> Result<(), Error> {
        if self.epoch_unix_ms > now_unix_ms {
            return Err(Error::EpochInFuture {
                epoch_unix_ms: self.epoch_unix_ms,
                now_unix_ms,
            });
        }
        Ok(())
    }

    /// Bits of milliseconds since the epoch.
    pub const fn time_bits(&self) -> u32 {
        self.time_bits
    }
    /// Bits of datacenter number.
    pub const fn datacenter_bits(&self) -> u32 {
        self.datacenter_bits
    }
    /// Bits of worker number.
    pub const fn worker_bits(&self) -> u32 {
        self.worker_bits
    }
    /// Bits of sequence number.
    pub const fn sequence_bits(&self) -> u32 {
        self.sequence_bits
    }
    /// The custom epoch, in Unix milliseconds.
    pub const fn epoch_unix_ms(&self) -> u64 {
        self.epoch_unix_ms
    }

    pub(crate) const fn worker_shift(&self) -> u32 {
        self.sequence_bits
    }
    pub(crate) const fn datacenter_shift(&self) -> u32 {
        self.sequence_bits + self.worker_bits
    }
    pub(crate) const fn time_shift(&self) -> u32 {
        self.sequence_bits + self.worker_bits + self.datacenter_bits
    }

    /// The largest time field: milliseconds from the epoch to the last representable instant.
    pub const fn max_elapsed_ms(&self) -> u64 {
        mask(self.time_bits)
    }

    /// The last representable instant, in Unix milliseconds. The clock passing it makes
    /// generators fail with [`Error::TimeExhausted`].
    ///
    /// ```
    /// // The default layout lasts until 2093-09-06T15:47:35.551Z.
    /// assert_eq!(idgen::Layout::default().last_unix_ms(), 3_903_090_455_551);
    /// ```
    pub const fn last_unix_ms(&self) -> u64 {
        // Cannot overflow: the epoch is below 2^63 and the time field below 2^62.
        self.epoch_unix_ms + self.max_elapsed_ms()
    }

    /// How long the layout lasts from its epoch, in mean Gregorian years.
    pub fn lifetime_years(&self) -> f64 {
        (self.max_elapsed_ms() as f64 + 1.0) / MS_PER_YEAR
    }

    /// Number of datacenters: `2^datacenter_bits`.
    pub const fn datacenters(&self) -> u64 {
        1 << self.datacenter_bits
    }
    /// Number of workers per datacenter: `2^worker_bits`.
    pub const fn workers_per_datacenter(&self) -> u64 {
        1 << self.worker_bits
    }
    /// Number of nodes (datacenter, worker pairs) that can issue IDs at once.
    pub const fn nodes(&self) -> u64 {
        1 << (self.datacenter_bits + self.worker_bits)
    }
    /// IDs one node can issue in one millisecond: `2^sequence_bits`.
    pub const fn ids_per_ms_per_node(&self) -> u64 {
        1 << self.sequence_bits
    }
    /// IDs one node can issue per second: the throughput ceiling of one generator. (A
    /// `u128`, because 1,000 times `2^sequence_bits` outgrows `u64` past 54 sequence bits.)
    pub const fn ids_per_second_per_node(&self) -> u128 {
        self.ids_per_ms_per_node() as u128 * 1000
    }
    /// IDs the whole cluster (every node at full speed) can issue per second.
    pub const fn cluster_ids_per_second(&self) -> u128 {
        self.nodes() as u128 * self.ids_per_second_per_node()
    }
    /// The largest sequence number.
    pub const fn max_sequence(&self) -> u64 {
        mask(self.sequence_bits)
    }
    /// The largest datacenter number.
    pub const fn max_datacenter(&self) -> u64 {
        mask(self.datacenter_bits)
    }
    /// The largest worker number.
    pub const fn max_worker(&self) -> u64 {
        mask(self.worker_bits)
    }

    /// Splits an ID into its fields.
    ///
    /// ```
    /// use idgen::{IdParts, Layout};
    /// let layout = Layout::default();
    /// let parts = IdParts { unix_ms: 1_750_000_000_000, datacenter: 3, worker: 17, sequence: 42 };
    /// let id = layout.compose(parts)?;
    /// assert_eq!(layout.decode(id), parts);
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub const fn decode(&self, id: Id) -> IdParts {
        let raw = id.as_u64();
        IdParts {
            unix_ms: self.epoch_unix_ms + (raw >> self.time_shift()),
            datacenter: (raw >> self.datacenter_shift()) & mask(self.datacenter_bits),
            worker: (raw >> self.worker_shift()) & mask(self.worker_bits),
            sequence: raw & mask(self.sequence_bits),
        }
    }

    /// Builds an ID from its fields, checking each against the layout.
    pub const fn compose(&self, parts: IdParts) -> Result<Id, Error> {
        if parts.unix_ms < self.epoch_unix_ms {
            return Err(Error::BeforeEpoch {
                unix_ms: parts.unix_ms,
                epoch_unix_ms: self.epoch_unix_ms,
            });
        }
        let checks = [
            (Field::Time, parts.unix_ms, self.last_unix_ms()),
            (Field::Datacenter, parts.datacenter, self.max_datacenter()),
            (Field::Worker, parts.worker, self.max_worker()),
            (Field::Sequence, parts.sequence, self.max_sequence()),
        ];
        let mut i = 0;
        while i < checks.len() {
            let (field, value, max) = checks[i];
            if value > max {
                return Err(Error::FieldOutOfRange { field, value, max });
            }
            i += 1;
        }
        let elapsed = parts.unix_ms - self.epoch_unix_ms;
        Ok(Id::from_raw(
            (elapsed << self.time_shift())
                | self.node_bits(parts.datacenter, parts.worker)
                | parts.sequence,
        ))
    }

    /// The datacenter and worker fields in place, for numbers already checked.
    pub(crate) const fn node_bits(&self, datacenter: u64, worker: u64) -> u64 {
        (datacenter << self.datacenter_shift()) | (worker << self.worker_shift())
    }

    /// The largest ID any node of this layout can issue in or before the millisecond
    /// `unix_ms` (clamped to the layout's lifetime): where a fleet that stopped at that
    /// mark leaves the ID space. 0 before the epoch, where nothing was issued.
    ///
    /// ```
    /// use idgen::Layout;
    /// let layout = Layout::default();
    /// let epoch = layout.epoch_unix_ms();
    /// assert_eq!(layout.last_id_until(epoch).as_u64(), (1 << 22) - 1);
    /// assert_eq!(layout.last_id_until(epoch - 1).as_u64(), 0);
    /// ```
    pub const fn last_id_until(&self, unix_ms: u64) -> Id {
        if unix_ms < self.epoch_unix_ms {
            return Id::from_raw(0);
        }
        let elapsed = unix_ms - self.epoch_unix_ms;
        let elapsed = if elapsed > self.max_elapsed_ms() {
            self.max_elapsed_ms()
        } else {
            elapsed
        };
        Id::from_raw((elapsed << self.time_shift()) | mask(self.time_shift()))
    }

    /// The first Unix millisecond whose every ID lies above `id`: when a fleet moving to
    /// this layout may start after the old one left the ID space at `id` (see
    /// [`Layout::last_id_until`]). `None` when the layout ends before that.
    ///
    /// ```
    /// use idgen::Layout;
    /// let old = Layout::default();
    /// // The same widths on a later epoch start below the old IDs: they must wait.
    /// let later = old.with_epoch_unix_ms(old.epoch_unix_ms() as i64 + 1_000)?;
    /// let left_at = old.last_id_until(old.epoch_unix_ms() + 5_000);
    /// assert_eq!(later.first_unix_ms_above(left_at), Some(old.epoch_unix_ms() + 6_001));
    /// # Ok::<(), idgen::Error>(())
    /// ```
    pub const fn first_unix_ms_above(&self, id: Id) -> Option<u64> {
        let elapsed = (id.as_u64() >> self.time_shift()) + 1;
        if elapsed > self.max_elapsed_ms() {
            return None;
        }
        Some(self.epoch_unix_ms + elapsed)
    }

    /// The layout as a lease store records it (see `docs/leases.md`, "One layout per
    /// store"): one line naming every width and the epoch.
    ///
    /// ```
    /// use idgen::Layout;
    /// let text = Layout::default().record();
    /// assert_eq!(
    ///     text,
    ///     "idgen-layout v1 time=41 datacenter=5 worker=5 sequence=12 epoch=1704067200000"
    /// );
    /// assert_eq!(Layout::from_record(&text), Some(Layout::default()));
    /// assert_eq!(Layout::from_record("idgen-layout v1 time=41"), None);
    /// ```
    pub fn record(&self) -> String {
        format!(
            "{LAYOUT_RECORD}time={} datacenter={} worker={} sequence={} epoch={}",
            self.time_bits,
            self.datacenter_bits,
            self.worker_bits,
            self.sequence_bits,
            self.epoch_unix_ms
        )
    }

    /// Reads what [`Layout::record`] writes, exactly (a trailing newline aside); `None`
    /// for anything else, or for widths and an epoch that make no layout.
    pub fn from_record(text: &str) -> Option<Layout> {
        let text = text.strip_suffix('\n').unwrap_or(text);
        let mut fields = text.strip_prefix(LAYOUT_RECORD)?.split(' ');
        let mut field = |name: &str| -> Option<u64> {
            let digits = fields.next()?.strip_prefix(name)?.strip_prefix('=')?;
            let canonical = !digits.is_empty()
                && digits.bytes().all(|b| b.is_ascii_digit())
                && (digits == "0" || !digits.starts_with('0'));
            canonical.then(|| digits.parse().ok())?
        };
        let widths = [
            field("time")?,
            field("datacenter")?,
            field("worker")?,
            field("sequence")?,
        ];
        let epoch = i64::try_from(field("epoch")?).ok()?;
        if fields.next().is_some() || widths.iter().any(|&w| w > 63) {
            return None;
        }
        let [time, datacenter, worker, sequence] = widths.map(|w| w as u32);
        Layout::new(time, datacenter, worker, sequence)
            .and_then(|layout| layout.with_epoch_unix_ms(epoch))
            .ok()
    }
}

/// The first words of [`Layout::record`]'s text.
const LAYOUT_RECORD: &str = "idgen-layout v1 ";

impl fmt::Display for Layout {
    /// The widths and the epoch, as [`Layout::record`] names them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let record = self.record();
        f.write_str(record.strip_prefix(LAYOUT_RECORD).unwrap_or(&record))
    }
}
