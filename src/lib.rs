//! Unique, time-sortable 64-bit IDs for high-concurrency Rust programs.
//!
//! A [`Generator`] hands out [`Id`]s from any number of threads without a lock: its whole
//! state is one `AtomicU64` advanced by compare-and-swap. IDs are positive `i64`s that sort
//! by creation time, and one generator never issues the same ID twice, under contention,
//! when its millisecond runs out, or when the clock steps back.
//!
//! ```
//! use idgen::Generator;
//!
//! let generator = Generator::builder().datacenter(2).worker(5).build()?;
//! let id = generator.next_id()?;
//! let parts = generator.decode(id);
//! assert_eq!((parts.datacenter, parts.worker), (2, 5));
//! println!("{id} was made at {} ms (Unix), sequence {}", parts.unix_ms, parts.sequence);
//! # Ok::<(), idgen::Error>(())
//! ```
//!
//! # Bit layout
//!
//! By default ([`Layout::DEFAULT`]), from the most significant bit down:
//!
//! | field | bits | range |
//! |---|---|---|
//! | sign | 1 | always 0: every ID is a positive `i64` |
//! | time | 41 | milliseconds since 2024-01-01T00:00:00Z: 2^41 ms = 69.7 years, until 2093-09-06 |
//! | datacenter | 5 | 2^5 = 32 |
//! | worker | 5 | 2^5 = 32 per datacenter, 2^10 = 1,024 nodes in all |
//! | sequence | 12 | 2^12 = 4,096 IDs per millisecond per node: 4,096,000 per second |
//!
//! Other splits adding up to 63 bits, and other epochs, are a [`Layout::new`] away.
//! Layouts that other systems' IDs follow are [`Preset`]s: Twitter's fits a [`Layout`]
//! (this crate makes its IDs); Discord's, Instagram's, Sonyflake's and Mastodon's do not
//! (64 bits, other fields, 10 ms ticks) and are read with [`Preset::decode`].
//!
//! For thread pools, [`ShardedGenerator`] holds one generator per core, each with its own
//! worker number, and pins every thread to one of them: threads on different cores then
//! never contend for a cache line.
//!
//! # Three kinds of ID, one core
//!
//! | kind | generator | size | needs |
//! |---|---|---|---|
//! | Snowflake [`Id`] | [`Generator`] | 8 bytes | a (datacenter, worker) number per live process: [`lease`] hands them out |
//! | RFC 9562 [`Uuid7`] | [`Uuid7Generator`] | 16 bytes | nothing: random bits keep generators apart |
//! | [`Ulid`] | [`UlidGenerator`] | 16 bytes, 26 characters | nothing, as UUIDv7 |
//!
//! All three run on the same state (one `AtomicU64` of packed millisecond and sequence), the
//! same pure transition and the same compare-and-swap loop. The 128-bit kinds start each
//! millisecond's 22-bit counter at random bits with the top bit clear and count up within
//! it (RFC 9562, section 6.2, method 1), and fill the rest with random bits drawn per ID
//! from a per-thread ChaCha8 generator, seeded from the operating system, reseeded every
//! 64 KiB and in a forked child before its first draw. Their limits: a clock from
//! 2024-01-01 ([`COUNTED_EPOCH_UNIX_MS`]) to 2163, and at least `2^21` IDs per millisecond
//! per generator. See [`CountedGenerator`].
//!
//! # Guarantees
//!
//! - **Unique per node.** One generator never issues an ID twice. Two generators never
//!   collide as long as their (datacenter, worker) pairs differ and share a layout.
//! - **UUIDv7 and ULID: unique per generator, apart by chance across generators.** One
//!   [`Uuid7Generator`] or [`UlidGenerator`] never issues an ID twice and issues them in
//!   strictly increasing order (the guarantees below apply to it as to a [`Generator`]).
//!   Two generators collide only if both issue the same counter value in the same
//!   millisecond and draw the same 52 (UUIDv7) or 58 (ULID) random bits for it.
//! - **Strictly increasing per generator**, in the order the compare-and-swaps succeed; so
//!   each thread sees its own IDs increase, and an ID obtained after another (in the
//!   happens-before sense, e.g. handed over through a channel) is greater.
//! - **Never a lower ID after a restart** when the generator is resumed after the last ID
//!   (or millisecond) of the previous holder ([`Builder::resume_after`]).
//! - **Lock-free, not wait-free.** Some thread always makes progress; one thread can lose
//!   the compare-and-swap race repeatedly under heavy contention (it backs off).
//! - **Stopping over duplicating.** Every failure is an [`Error`]. A failed `next_id`
//!   issues nothing and changes no state (on a leased generator, a call refused for an
//!   expired lease may leave one ID unused); a failed batch discards what it had reserved
//!   (those IDs are never issued: a gap, not a duplicate). No panics, no wrap-around, no
//!   negative IDs.
//! - **One live holder per worker number**, with [`lease::LeasedGenerator`]: it issues only
//!   while its lease is proven, stops before the lease could pass to another process, and
//!   starts after the mark its number's previous holder left. A lease store serves one
//!   layout (every width and the epoch): a process with another is refused
//!   ([`Error::LayoutMismatch`]). A holder that sees its store went back in time (an etcd
//!   snapshot restore; a PostgreSQL failover, restored table or base backup) stops
//!   ([`Error::LeaseStoreRestored`]); after a PostgreSQL server starts, no number is handed
//!   out until every live holder's renewal could reach it or its mark passed
//!   ([`Error::LeaseStoreStarting`]). A second live copy of a store's database is not
//!   detected: see [`design::leases`] for each kind of restore, and the restore step that
//!   keeps successors past every mark that may have been lost.
//!
//! # Clock behaviour
//!
//! - The default [`DefaultClock`] is a cached reading of a [`MonotonicClock`], kept current
//!   by one upkeep thread per process that every default clock shares: a call costs an
//!   atomic load instead of a clock read. The thread refreshes every 0.5 ms while IDs are
//!   asked for and parks after 100 ms without one (an idle process pays no wake-ups; the
//!   first call after that reads the precise clock and wakes it); it stops when the last
//!   default clock is dropped. The generator checks the precise reading before it ever waits
//!   or refuses, so the cache's lag (about a millisecond on a machine with a core to spare,
//!   more when the thread is starved) can only date an ID that much early. Where no thread
//!   may be started, pass a [`MonotonicClock`] (`.clock(MonotonicClock::new())`); a
//!   [`RecentClock`] is a cached clock with a thread of its own.
//! - [`MonotonicClock`] never goes backwards inside a process. It jumps forward to the wall
//!   clock when that is found ahead of it: at once for a step of up to a second (an NTP
//!   correction), and only once a larger step has lasted 2 s (a resumed VM), so a wall clock
//!   that is wrong for a moment never dates later IDs ahead (see its docs).
//!   [`SystemClock`] is the raw wall clock; [`ManualClock`] is set by hand, for tests.
//! - **Sequence used up** (more than 2^sequence IDs in one millisecond): the call waits for
//!   the next millisecond, spinning then yielding. It never wraps. Optionally
//!   ([`Builder::borrow_ahead_ms`]) a busy generator may run a bounded number of
//!   milliseconds ahead of the clock instead of waiting.
//! - **Clock behind the last issued millisecond** (a [`SystemClock`] stepped back, a resume
//!   mark from a machine whose clock was ahead): within the tolerance
//!   ([`Builder::clock_back_tolerance_ms`], default 10 ms, plus any borrow allowance) calls
//!   go on in the last issued millisecond while its sequence lasts, then wait for the clock;
//!   beyond it they fail with [`Error::ClockMovedBackwards`] `{ behind_ms }`, a transient
//!   error. A tolerance of 0 is exact for clocks whose readings pass through memory
//!   ([`ManualClock`]); with the TSC-read clocks, readings on two cores can differ by a
//!   fraction of a millisecond at a boundary, so keep it at 1 or more there.
//! - **Past the layout's last instant**: [`Error::TimeExhausted`], permanent.
//!
//! # Features
//!
//! On by default, each a part a user may leave out (`default-features = false` leaves the
//! core: [`Generator`], [`ShardedGenerator`], the clocks and the file-store leases, on
//! `crossbeam-utils`, `quanta`, `thiserror` and `log` alone):
//!
//! - `uuid7-ulid`: [`Uuid7`] and [`Ulid`] and their generators (per-thread random bits:
//!   `rand_chacha`, `getrandom`, `forkguard`).
//! - `opaque`: [`opaque`], Snowflake IDs encrypted into public IDs (`cipher`,
//!   `speck-cipher`).
//! - `blocks`: [`blocks`], dense sequence values (`forkguard`).
//!
//! Off by default:
//!
//! - `etcd`: [`lease::EtcdStore`], worker-number leases from an etcd cluster (pulls in
//!   `etcd-client` and Tokio; building needs `protoc` and the protobuf well-known `.proto`
//!   files: Debian's `protobuf-compiler` and `libprotobuf-dev`).
//! - `serde`: [`Id`] serializes as a JSON string of its decimal form (JavaScript numbers
//!   lose precision above 2^53) and deserializes only from such a string; [`Uuid7`] and
//!   [`Ulid`] as their canonical strings.
//! - `uuid`: [`Uuid7`] converts to and from `uuid::Uuid`.
//! - `ulid`: [`Ulid`] converts to and from `ulid::Ulid`.
//! - `postgres`: [`lease::PostgresStore`], worker-number leases from two PostgreSQL tables,
//!   for a fleet that runs PostgreSQL and not etcd; [`blocks::PostgresStore`], blocks of
//!   dense sequences from a PostgreSQL table, for a fleet (the pure-Rust `postgres` client;
//!   nothing to install); and [`Id`] and
//!   [`Uuid7`] as that client's `ToSql`/`FromSql`: a `BIGINT` of the same value (so
//!   `ORDER BY` is ID order) and a `UUID`. Reading a negative `BIGINT` as an [`Id`], or a
//!   UUID of another version as a [`Uuid7`], is an error.
//! - `sqlx`: the same two as sqlx's `Type`/`Encode`/`Decode` for PostgreSQL, arrays
//!   included (`WHERE id = ANY($1)` with a slice of IDs).
//! - `diesel`: [`Id`] and [`Uuid7`] as diesel's PostgreSQL `BIGINT` and `UUID`
//!   (`AsExpression`, `FromSqlRow`, `ToSql`, `FromSql`), usable as they are in `table!`
//!   columns, filters and `Queryable` structs, with the `postgres` feature's rules (a
//!   negative `BIGINT` or another UUID version is an error). diesel's backend links libpq
//!   (Debian's `libpq-dev` to build).
//! - `utoipa`: [`Id`], [`Uuid7`] and [`Ulid`] as utoipa schemas (`ToSchema`): strings
//!   whose patterns are exactly the text each parser reads, for OpenAPI documents of
//!   services built on these types (`idgen serve`'s own ID lists refer to them).
//! - `tokio`: `async` counterparts of the calls that can wait, sleeping on Tokio's timers
//!   instead of holding their thread: [`Generator::next_id_async`] and
//!   [`Generator::next_ids_async`] (a leased generator has them too, through `Deref`),
//!   [`LeasedBuilder::acquire_async`](lease::LeasedBuilder::acquire_async) on every store
//!   (each request to the store on Tokio's blocking pool, every wait on a timer) with
//!   [`LeasedGenerator::release_async`](lease::LeasedGenerator::release_async), and
//!   `BlockAllocator::next_async` / `next_n_async`. The sync calls are unchanged; both kinds
//!   share one generator.
//!
//! # IDs as time bounds
//!
//! Every kind sorts by the time embedded in it, so the IDs made in a span of time `[from,
//! to)` are a range: [`Layout::span`], [`Uuid7::span`] and [`Ulid::span`] give its bounds
//! ([`IdSpan`]), for `WHERE id >= start AND id < end` on a primary key's index, and
//! [`Layout::first_id_at`] and [`Layout::last_id_at`] (likewise for the 128-bit kinds) the
//! first and last ID of a millisecond. The time is the ID's, which a generator borrowing
//! ahead or a skewed clock may set apart from the wall clock: see [`bounds`].
//!
//! # Dense sequences
//!
//! Where numbers should be small and nearly gap-free (order and invoice numbers),
//! [`blocks::BlockAllocator`] hands out 1, 2, 3, ... of a named sequence from blocks that a
//! [`blocks::BlockStore`] grants. Every value is handed out at most once across all
//! processes sharing the store, whatever crashes; values increase within one allocator and
//! interleave block by block across processes; a clean close leaves no gap, a crash at
//! most two blocks. See [`design::blocks`], and [`design::choosing`] for which kind fits.
//!
//! # Opaque public IDs
//!
//! An ID shows when and where it was made and, through its sequence, roughly how many were
//! made. [`opaque::Codec`] encrypts it into an [`opaque::OpaqueId`] (Speck64/128 under a
//! secret 128-bit key, kept inside 63 bits, written `o1_` and 11 characters of base62) that
//! shows none of that and that only a key holder turns back into the ID. See
//! [`design::opaque`].
//!
//! # Logging
//!
//! The library logs through the [`log`](https://docs.rs/log) facade, so it adds no
//! subscriber of its own: a lease store outage beginning (warn) and ending (info), a number
//! lost (error) and the one taken instead (info), a renewal half an interval late (warn),
//! unusable lease records (error), and wall-clock steps the default clock refuses to follow
//! (warn). Any `log` logger shows them, and so does a `tracing` subscriber with its `log`
//! bridge (`tracing-log`), as the `idgen` service does. Nothing is logged on the ID paths.
//!
//! # Caveats
//!
//! - [`MonotonicClock`] only ever corrects forward. If its source runs fast against the
//!   wall clock (a calibration error of `quanta`'s TSC scaling), it drifts ahead and stays
//!   ahead for the life of the process: IDs are then dated slightly in the future, and a
//!   restarted process resumed after them waits (within tolerance) or refuses until the wall
//!   clock catches up.
//! - Uniqueness across processes rests on each live process holding a different node
//!   number, and on a restarted node resuming after its last ID when its clock might be
//!   behind. A [`lease::LeasedGenerator`] enforces both: it leases its worker number from a
//!   [`lease::LeaseStore`] (a directory on one host, etcd with the `etcd` feature, or
//!   PostgreSQL with `postgres`) and
//!   stops issuing before the lease could pass to another process; see
//!   [`design::leases`]. A plain [`Generator`] trusts the numbers it is given.
//! - After `fork()`, the child has no copy of the default clock's upkeep thread. Its first
//!   UUIDv7 or ULID draw, or any `DefaultClock` built in the child (every builder builds
//!   one), notices and sends readers to the precise clock; a child that does neither, or
//!   that reads a [`RecentClock`], would keep the reading of the moment of the fork. Build
//!   generators after forking, or use [`MonotonicClock`] in processes that fork.
//! - IDs carry millisecond time: IDs from different nodes in the same millisecond sort by
//!   node, not by the instant they were made. UUIDv7s and ULIDs from different generators
//!   in the same millisecond sort by their counters, which start at random: in no useful
//!   order between generators, strictly increasing within one.
//!
//! The design, and why no duplicate can be issued, is in [`design`].

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

#[cfg(all(not(idgen_loom), feature = "blocks"))]
pub mod blocks;
pub mod bounds;
mod clock;
mod engine;
mod error;
#[cfg(any(feature = "uuid7-ulid", feature = "blocks"))]
mod fork_check;
#[cfg(all(fuzzing, not(idgen_loom)))]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(not(idgen_loom))]
mod integrations;
#[cfg(not(idgen_loom))]
pub mod lease;
#[cfg(idgen_loom)]
#[doc(hidden)]
pub mod loom_hooks;
#[cfg(all(not(idgen_loom), feature = "opaque"))]
pub mod opaque;
#[cfg(all(not(idgen_loom), feature = "postgres"))]
mod postgres_session;
mod snowflake;
#[cfg(not(idgen_loom))]
mod store_files;
mod sync;
#[cfg(feature = "uuid7-ulid")]
mod uuid7_ulid;

pub use bounds::IdSpan;
pub use clock::{
    Clock, DefaultClock, ManualClock, MonotonicClock, SystemClock, WALL_CHECK_INTERVAL_MS,
    WALL_SMALL_STEP_MS, WALL_STEP_CONFIRM_MS,
};
#[cfg(not(idgen_loom))]
pub use clock::{DEFAULT_CLOCK_IDLE, RECENT_CLOCK_INTERVAL, RecentClock};
pub use engine::Stats;
pub use error::{Error, Field, ParseIdError};
#[cfg(not(idgen_loom))]
pub use lease::{LeasedGenerator, LeasedShardedGenerator};
#[cfg(all(not(idgen_loom), feature = "postgres"))]
pub use postgres_session::DEFAULT_POSTGRES_SCHEMA;
pub use snowflake::{
    Base32, Builder, DEFAULT_CLOCK_BACK_TOLERANCE_MS, DEFAULT_EPOCH_UNIX_MS, Generator, Id,
    IdParts, Layout, NotAPresetId, Preset, PresetField, PresetParts, UnknownPreset,
};
#[cfg(not(idgen_loom))]
pub use snowflake::{ShardedBuilder, ShardedGenerator};
#[cfg(feature = "uuid7-ulid")]
pub use uuid7_ulid::{
    COUNTED_EPOCH_UNIX_MS, COUNTED_TIME_BITS, COUNTER_BITS, CountedBuilder, CountedGenerator,
    CountedId, ParseUlidError, ParseUuid7Error, Ulid, UlidGenerator, Uuid7, Uuid7Generator,
};

#[doc = include_str!("../docs/design.md")]
pub mod design {
    #[doc = include_str!("../docs/leases.md")]
    pub mod leases {}
    // Their examples use the parts they describe: without those features the pages are
    // empty (and their examples are not compiled).
    #[cfg_attr(feature = "blocks", doc = include_str!("../docs/blocks.md"))]
    #[cfg_attr(not(feature = "blocks"), doc = "Blocks: with the `blocks` feature.")]
    pub mod blocks {}
    #[cfg_attr(
        all(feature = "uuid7-ulid", feature = "opaque", feature = "blocks"),
        doc = include_str!("../docs/choosing.md")
    )]
    #[cfg_attr(
        not(all(feature = "uuid7-ulid", feature = "opaque", feature = "blocks")),
        doc = "Which kind to choose: with the default features."
    )]
    pub mod choosing {}
    #[cfg_attr(feature = "opaque", doc = include_str!("../docs/opaque.md"))]
    #[cfg_attr(
        not(feature = "opaque"),
        doc = "Opaque IDs: with the `opaque` feature."
    )]
    pub mod opaque {}
}

/// The README's examples run as doc tests, so the README cannot drift from the code.
#[cfg(all(
    doctest,
    feature = "uuid7-ulid",
    feature = "opaque",
    feature = "blocks"
))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
