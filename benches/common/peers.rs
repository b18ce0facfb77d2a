//! Adapters that give every peer crate the same shape for the benches: build one shared
//! instance at its default configuration, take one ID.
//!
//! Every peer type is named by its full path (`::crate::Type`) so the adapter structs below
//! (`Sonyflake`, `Ulid`, ...) never shadow the crates' own types. Versions read:
//! ferroid 2.0.0, snowflake_me 2.2.0, snowflaked 1.0.4, rs-snowflake 0.6.0 (lib `snowflake`),
//! sonyflake 0.5.1, idgenerator 2.0.0, uuid 1.29.3, ulid 3.0.0, scru128 4.2.0.

#![allow(dead_code)] // each bench uses a different part

use std::sync::{Mutex, MutexGuard, PoisonError};

pub trait Peer: Sync {
    /// Short name for tables, e.g. "ferroid".
    const NAME: &'static str;
    fn new() -> Self
    where
        Self: Sized;
    /// One ID as u128 (u64 IDs widened), so duplicates can be counted across peers. Must not
    /// panic on the hot path except where the crate itself panics (documented per peer).
    fn next(&self) -> u128;
    /// Makes `n` IDs through the peer's own batch API, in the crate's own ID type, and
    /// returns how many it made, or `None` when the crate has no batch API. `Batch::Fresh`
    /// returns a newly allocated `Vec` (dropped here after `black_box`); `Batch::Reused`
    /// writes into a buffer the adapter keeps between calls, so no allocation is timed. IDs
    /// are not widened to u128: the batch scenario times the generator, not a copy.
    ///
    /// Of the peers, only snowflake_me has one (`Snowflake::next_ids` and
    /// `next_ids_into`). Checked and found without: ferroid 2.0.0 (`next_id` / `poll_id` /
    /// `try_*` / async variants and the thread-local `Ulid`, all one ID per call), snowflaked
    /// (`generate`), rs-snowflake (`SnowflakeIdBucket` refills 4,091 IDs in a private
    /// `generate_ids`, but its only public getter is `get_id(&mut self) -> i64`, one per
    /// call), sonyflake (`next_id`), idgenerator (`IdInstance::next_id`; `IdVecInstance` is
    /// several generators, not a batch), uuid (`now_v7` / `new_v7`), ulid
    /// (`Generator::generate*`).
    fn next_batch(&self, _n: usize, _batch: Batch) -> Option<usize> {
        None
    }
}

/// How a batch is delivered, see [`Peer::next_batch`].
#[derive(Clone, Copy, Debug)]
pub enum Batch {
    /// A new `Vec` per call (`next_ids`).
    Fresh,
    /// Into a buffer kept between calls (idgen's `fill_ids`, snowflake_me's `next_ids_into`).
    Reused,
}

impl Batch {
    pub const ALL: [Batch; 2] = [Batch::Fresh, Batch::Reused];

    pub fn name(self) -> &'static str {
        match self {
            Batch::Fresh => "fresh",
            Batch::Reused => "reused",
        }
    }
}

/// Locks one of our own wrapping mutexes; a poisoned lock (a thread already panicked) is
/// taken over rather than turned into a second panic.
#[inline]
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// ferroid
// ---------------------------------------------------------------------------------------

type FerroidGenerator = ::ferroid::generator::AtomicSnowflakeGenerator<
    ::ferroid::id::SnowflakeTwitterId,
    ::ferroid::time::MonotonicClock<1>,
>;

/// `ferroid::generator::AtomicSnowflakeGenerator<SnowflakeTwitterId, MonotonicClock<1>>`:
/// lock-free (one CAS on an `AtomicU64`), Sync as is. Twitter layout (41 bits ms, 10 machine,
/// 12 sequence = 4,096 IDs/ms), machine 0, `TWITTER_EPOCH` as in the README. Its
/// `MonotonicClock` is read from a process-wide background thread that stores the elapsed
/// milliseconds every 1 ms, so a clock read is one atomic load.
pub struct Ferroid(FerroidGenerator);

impl Peer for Ferroid {
    const NAME: &'static str = "ferroid";

    fn new() -> Self {
        Ferroid(FerroidGenerator::new(
            0,
            ::ferroid::time::MonotonicClock::<1>::with_epoch(::ferroid::time::TWITTER_EPOCH),
        ))
    }

    #[inline]
    fn next(&self) -> u128 {
        // Inherent `next_id(&self, f: impl FnMut(u64)) -> ID` loops on `poll_id()` and calls
        // `f(yield_for)` on every `Poll::Pending`: `yield_for == 0` means the CAS lost a race
        // (retry at once), `>= 1` means the millisecond's 4,096 are used up or the clock is
        // behind. Then yield rather than spin, so the ticker thread that advances ferroid's
        // clock gets a core (this machine has 2). Never panics, never errors.
        let id = self.0.next_id(|yield_for| {
            if yield_for == 0 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        });
        u128::from(id.to_raw())
    }
}

// ---------------------------------------------------------------------------------------
// snowflake_me
// ---------------------------------------------------------------------------------------

/// `snowflake_me::Snowflake` (`Snowflake::default()`): lock-free CAS loop on an `AtomicU64`
/// behind an `Arc`, Sync as is. Defaults: 41 bits time / 5 data center / 5 machine / 12
/// sequence, both node IDs 0, epoch 2022-01-01, `ClockDriftStrategy::Wait`, no wait timeout;
/// wall clock (`jiff::Timestamp::now()`) read per call. (`Snowflake::new()` would fail here:
/// it needs the `ip-fallback` feature to find node IDs.)
pub struct SnowflakeMe {
    generator: ::snowflake_me::Snowflake,
    /// `next_ids_into`'s buffer, kept between calls.
    reused: Mutex<Vec<::snowflake_me::SnowflakeId>>,
}

impl Peer for SnowflakeMe {
    const NAME: &'static str = "snowflake_me";

    fn new() -> Self {
        SnowflakeMe {
            generator: ::snowflake_me::Snowflake::default(),
            reused: Mutex::new(Vec::new()),
        }
    }

    #[inline]
    fn next(&self) -> u128 {
        // `next_id(&self) -> Result<SnowflakeId, Error>`. On a used-up millisecond or a clock
        // step back it waits inside (64 spins, then `yield_now`); at the defaults the only
        // error left is `OverTimeLimit` (41 bits of ms past 2022 run out in 2091).
        let id = self
            .generator
            .next_id()
            .expect("snowflake_me: next_id (OverTimeLimit only at the defaults)");
        u128::from(id.as_u64())
    }

    fn next_batch(&self, n: usize, batch: Batch) -> Option<usize> {
        // `snowflake_me::Snowflake::next_ids(&self, count: usize) -> Result<Vec<SnowflakeId>,
        // Error>` (src/snowflake.rs) is `Vec::with_capacity(count)` + `next_ids_into(count,
        // &mut Vec<SnowflakeId>)`, which loops on a private `reserve(remaining, ..)` that
        // claims up to the rest of the current millisecond's 4,096 sequences with ONE CAS and
        // pushes them. It always delivers exactly `count` IDs or an error: when a millisecond
        // is used up it waits inside (64 spins, then `yield_now`), so no retry loop here. Same
        // errors as `next_id` (only `OverTimeLimit` at the defaults).
        const DEFAULTS: &str = "snowflake_me: next_ids (OverTimeLimit only at the defaults)";
        Some(match batch {
            Batch::Fresh => std::hint::black_box(self.generator.next_ids(n).expect(DEFAULTS)).len(),
            Batch::Reused => {
                let mut out = lock(&self.reused);
                out.clear();
                self.generator.next_ids_into(n, &mut out).expect(DEFAULTS);
                std::hint::black_box(&*out).len()
            }
        })
    }
}

// ---------------------------------------------------------------------------------------
// snowflaked
// ---------------------------------------------------------------------------------------

/// `snowflaked::sync::Generator` (feature `sync`), `Generator::new(0)`: lock-free
/// (`AtomicU64::fetch_update`), Sync as is (the README keeps one in a `static`). Layout 41
/// bits ms / 10 instance / 12 sequence, epoch `UNIX_EPOCH`; wall clock (`SystemTime`) read
/// per call; on a used-up millisecond it spins (`spin_loop`) inside the update closure.
pub struct Snowflaked(::snowflaked::sync::Generator);

impl Peer for Snowflaked {
    const NAME: &'static str = "snowflaked";

    fn new() -> Self {
        Snowflaked(::snowflaked::sync::Generator::new(0))
    }

    #[inline]
    fn next(&self) -> u128 {
        // `generate::<T: Snowflake>(&self) -> T`, infallible. The crate itself panics if the
        // wall clock moves backwards ("Clock has moved backwards! This is not supported").
        u128::from(self.0.generate::<u64>())
    }
}

// ---------------------------------------------------------------------------------------
// rs-snowflake (lib name `snowflake`)
// ---------------------------------------------------------------------------------------

/// `snowflake::SnowflakeIdGenerator` (crate `rs-snowflake`, `[lib] name = "snowflake"`),
/// `SnowflakeIdGenerator::new(1, 1)` as in its README: every method takes `&mut self`, so it
/// is WRAPPED BY US in a `std::sync::Mutex`. `real_time_generate()` is the real-time
/// Snowflake (reads the wall clock per call, busy-waits for the next ms after 4,096);
/// `generate()` reads the clock once per 4,096 IDs and `lazy_generate()` never does.
/// Layout: ms since `UNIX_EPOCH` << 22 | machine << 17 | node << 12 | 12-bit index.
pub struct RsSnowflake(Mutex<::snowflake::SnowflakeIdGenerator>);

impl Peer for RsSnowflake {
    const NAME: &'static str = "rs-snowflake";

    fn new() -> Self {
        RsSnowflake(Mutex::new(::snowflake::SnowflakeIdGenerator::new(1, 1)))
    }

    #[inline]
    fn next(&self) -> u128 {
        // `real_time_generate(&mut self) -> i64`, non-negative until 2039. The crate panics
        // only if the wall clock reads before 1970 ("Time went mackward"); a step back is not
        // detected (it just reuses earlier milliseconds).
        let id = lock(&self.0).real_time_generate();
        u128::from(id as u64)
    }
}

// ---------------------------------------------------------------------------------------
// sonyflake
// ---------------------------------------------------------------------------------------

/// `sonyflake::Sonyflake`: an `Arc` around a `std::sync::Mutex` (locked INSIDE the crate),
/// Sync as is. Defaults: 39 bits of 10 ms ticks since 2014-09-01, 8-bit sequence (256 IDs per
/// 10 ms tick = 25,600 IDs/s per generator), 16-bit machine ID taken from the lower 16 bits
/// of a private IPv4 address (`pnet` default feature). When the sequence is used up it
/// `thread::sleep`s to the next tick while HOLDING its lock. Wall clock (`chrono::Utc::now`).
pub struct Sonyflake(::sonyflake::Sonyflake);

impl Peer for Sonyflake {
    const NAME: &'static str = "sonyflake";

    fn new() -> Self {
        // `Sonyflake::new()` is the default; it fails with `NoPrivateIPv4` on hosts without a
        // 10/8, 172.16/12 or 192.168/16 address (this one has 192.0.2.2), so fall back to the
        // same defaults with machine ID 0. The machine ID only fills the low 16 bits.
        let generator = ::sonyflake::Sonyflake::new()
            .or_else(|_| {
                ::sonyflake::Sonyflake::builder()
                    .machine_id(&|| Ok(0))
                    .finalize()
            })
            .expect("sonyflake: build at the default configuration");
        Sonyflake(generator)
    }

    #[inline]
    fn next(&self) -> u128 {
        // `next_id(&self) -> Result<Id, Error>`: errors are `MutexPoisoned`,
        // `FailedToGetCurrentTime` (chrono out of range), `InvalidSleepTime` (cannot occur:
        // the sleep is >= 10 ms minus < 10 ms) and `OverTimeLimit` (year 2188). None has a
        // sane retry.
        let id = self.0.next_id().expect("sonyflake: next_id");
        u128::from(id.to_u64())
    }
}

// ---------------------------------------------------------------------------------------
// idgenerator
// ---------------------------------------------------------------------------------------

/// `idgenerator::IdInstance`: a process-global singleton (a `parking_lot::Mutex` around a
/// `CoreIdGenerator`, locked INSIDE the crate); this unit struct only initializes it once.
/// Every `IdGenerator` in the process therefore shares ONE generator. Defaults
/// (`IdGeneratorOptions::new()`): method 1 ("snowflake drift"), base time 2020-02-19
/// 18:20:02 UTC, worker 0 in 8 bits, 8-bit sequence with 5..=255 usable (251 IDs/ms).
/// Past that it does not wait: it borrows future milliseconds, up to 2,000 in a row
/// (`top_over_cost_count`), then busy-waits under its lock until the wall clock passes the
/// borrowed time. Each (re)init
/// sleeps 500 ms (the lazy default and the `init` call: about 1 s, once per process).
pub struct IdGenerator;

impl Peer for IdGenerator {
    const NAME: &'static str = "idgenerator";

    fn new() -> Self {
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| {
            ::idgenerator::IdInstance::init(::idgenerator::IdGeneratorOptions::new())
                .expect("idgenerator: IdInstance::init with default options");
        });
        IdGenerator
    }

    #[inline]
    fn next(&self) -> u128 {
        // `IdInstance::next_id() -> i64`, infallible, non-negative (time << 16 | worker << 8
        // | sequence). No panics in the crate's path.
        let id = ::idgenerator::IdInstance::next_id();
        u128::from(id as u64)
    }
}

// ---------------------------------------------------------------------------------------
// uuid v7
// ---------------------------------------------------------------------------------------

/// `uuid::Uuid::now_v7()` (feature `v7`, default `std`): a free function, so a unit struct.
/// It locks a process-global `std::sync::Mutex<ContextV7>` (the 42-bit monotonic counter,
/// reseeded each ms) INSIDE the crate, reads the wall clock, and fills the rest with random
/// bits from `getrandom` per call (unless something in the graph turns on `fast-rng`).
pub struct UuidV7;

impl Peer for UuidV7 {
    const NAME: &'static str = "uuid_v7";

    fn new() -> Self {
        UuidV7
    }

    #[inline]
    fn next(&self) -> u128 {
        // Infallible; the crate panics only if `getrandom` fails.
        ::uuid::Uuid::now_v7().as_u128()
    }
}

/// `uuid::ContextV7` (`ContextV7::new()`) with `Uuid::new_v7(Timestamp::now(&context))`:
/// the context is not `Sync` (a `Cell`), so it is WRAPPED BY US in a `std::sync::Mutex`.
/// Same counter as `now_v7`, random bits from `getrandom` per call, wall clock per call.
pub struct UuidContextV7(Mutex<::uuid::ContextV7>);

impl Peer for UuidContextV7 {
    const NAME: &'static str = "uuid_context_v7";

    fn new() -> Self {
        UuidContextV7(Mutex::new(::uuid::ContextV7::new()))
    }

    #[inline]
    fn next(&self) -> u128 {
        let context = lock(&self.0);
        ::uuid::Uuid::new_v7(::uuid::Timestamp::now(&*context)).as_u128()
    }
}

// ---------------------------------------------------------------------------------------
// scru128
// ---------------------------------------------------------------------------------------

/// `scru128::new()`: the crate's process-global generator (default feature `global_gen`):
/// a `Mutex` inside the crate around a generator with a reseeding ChaCha RNG, reseeded on
/// fork. 48 bits ms, 24-bit counter_hi, 24-bit counter_lo, 32 random bits. Infallible.
pub struct Scru128;

impl Peer for Scru128 {
    const NAME: &'static str = "scru128";

    fn new() -> Self {
        Scru128
    }

    #[inline]
    fn next(&self) -> u128 {
        ::scru128::new().to_u128()
    }
}

// ---------------------------------------------------------------------------------------
// ulid
// ---------------------------------------------------------------------------------------

/// `ulid::Generator` (monotonic; `Generator::new()`): `generate(&mut self)`, so it is
/// WRAPPED BY US in a `std::sync::Mutex`. 48 bits ms since 1970 + 80 bits random: a new
/// millisecond draws fresh random bits (`rand::rng()`, thread-local), the same millisecond
/// increments the previous ULID; no per-ms cap. Wall clock read per call.
pub struct Ulid(Mutex<::ulid::Generator>);

impl Peer for Ulid {
    const NAME: &'static str = "ulid";

    fn new() -> Self {
        Ulid(Mutex::new(::ulid::Generator::new()))
    }

    #[inline]
    fn next(&self) -> u128 {
        // `generate() -> Result<Ulid, Overflow>`: `Err(Overflow)` only when the 80 random bits
        // would overflow within one ms. A retry would fail again until the clock moves, so
        // commit the overflow as the crate's docs show (`commit_overflow_increment`: steps into
        // the next ms with random 0). No panics.
        let mut generator = lock(&self.0);
        let ulid = match generator.generate() {
            Ok(ulid) => ulid,
            Err(overflow) => overflow.commit_overflow_increment(),
        };
        u128::from(ulid)
    }
}
