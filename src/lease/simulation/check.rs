//! The checkers of a run: every ID issued once (by raw value, so two layouts on one store
//! count too), each holder's IDs increasing, none dated after the mark its holder last saw
//! confirmed, and the proof's own claim: every ID a holder issues as a number is smaller
//! than every ID of the number's later holders; and the trace a failure prints.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::holder::Issued;

/// Who issued an ID: a holder, its incarnation, and which of its tenures (a number made
/// usable) it issued in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Issuer {
    pub(super) holder: u32,
    pub(super) incarnation: u32,
    pub(super) tenure: u32,
}

/// One tenure of a number: who, when the store granted its claim, and the smallest and
/// largest ID issued in it so far.
#[derive(Debug, Clone, Copy)]
struct Span {
    issuer: Issuer,
    granted: (u64, u64),
    min: u64,
    max: u64,
}

/// The safety checker.
#[derive(Debug, Default)]
pub(super) struct Safety {
    /// Runs of consecutive raw IDs by one issuer: first -> (last, issuer).
    runs: BTreeMap<u64, (u64, Issuer)>,
    /// Each number's tenures, in the order the store granted their claims.
    tenures: BTreeMap<u64, Vec<Span>>,
    pub(super) ids: u64,
    pub(super) violations: Vec<String>,
}

impl Safety {
    /// Checks and records one ID; `last` is the issuer's previous ID, if it remembers one.
    pub(super) fn record(&mut self, true_ms: u64, issuer: Issuer, id: &Issued, last: Option<u64>) {
        self.ids += 1;
        let raw = id.raw;
        if let Some(last) = last
            && raw <= last
        {
            self.violation(format!(
                "t={true_ms}: holder {} issued {raw} after {last}: not increasing",
                issuer.holder
            ));
        }
        match id.confirmed_mark {
            Some(mark) if id.unix_ms <= mark => {}
            mark => self.violation(format!(
                "t={true_ms}: holder {} issued {raw} (worker {}, dated {}) past its confirmed \
                 mark {mark:?}",
                issuer.holder, id.worker, id.unix_ms
            )),
        }
        self.check_tenures(true_ms, issuer, id);
        let before = self
            .runs
            .range(..=raw)
            .next_back()
            .map(|(&first, &run)| (first, run));
        if let Some((first, (end, other))) = before {
            if end >= raw {
                self.violation(format!(
                    "t={true_ms}: ID {raw} (worker {}, dated {}) issued by holder {}#{} and by \
                     holder {}#{}",
                    id.worker,
                    id.unix_ms,
                    issuer.holder,
                    issuer.incarnation,
                    other.holder,
                    other.incarnation
                ));
                return;
            }
            if end + 1 == raw && other == issuer {
                self.runs.insert(first, (raw, issuer));
                return;
            }
        }
        self.runs.insert(raw, (raw, issuer));
    }

    /// Every ID of a tenure lies above every ID of the number's earlier tenures (in the
    /// order the store granted their claims), including the ones an earlier holder issues
    /// late (cut off, paused, or simply slow to stop).
    fn check_tenures(&mut self, true_ms: u64, issuer: Issuer, id: &Issued) {
        let raw = id.raw;
        let spans = self.tenures.entry(id.worker).or_default();
        let index = match spans.iter().rposition(|span| span.issuer == issuer) {
            Some(index) => index,
            None => {
                let at = spans.partition_point(|span| span.granted <= id.granted);
                spans.insert(
                    at,
                    Span {
                        issuer,
                        granted: id.granted,
                        min: raw,
                        max: raw,
                    },
                );
                at
            }
        };
        let span = &mut spans[index];
        span.min = span.min.min(raw);
        span.max = span.max.max(raw);
        let name = |span: &Span| {
            format!(
                "holder {}#{} tenure {}",
                span.issuer.holder, span.issuer.incarnation, span.issuer.tenure
            )
        };
        let earlier = spans[..index].iter().max_by_key(|span| span.max);
        let later = spans[index + 1..].iter().min_by_key(|span| span.min);
        let problem = if let Some(other) = earlier.filter(|span| span.max >= raw) {
            Some(format!(
                "issued {raw}, not above the ID {} of an earlier tenure ({})",
                other.max,
                name(other)
            ))
        } else {
            later.filter(|span| raw >= span.min).map(|other| {
                format!(
                    "issued {raw}, not below the ID {} of a later tenure ({})",
                    other.min,
                    name(other)
                )
            })
        };
        if let Some(problem) = problem {
            self.violation(format!(
                "t={true_ms}: holder {}#{} tenure {} on worker {} (ID dated {}) {problem}",
                issuer.holder, issuer.incarnation, issuer.tenure, id.worker, id.unix_ms
            ));
        }
    }

    pub(super) fn violation(&mut self, what: String) {
        // The first few say what happened; the rest only count.
        if self.violations.len() < 10 {
            self.violations.push(what);
        } else if self.violations.len() == 10 {
            self.violations.push("(more)".to_string());
        }
    }
}

/// The last events of a run, and a hash of all of them: the same seed gives the same hash.
#[derive(Debug)]
pub(super) struct Trace {
    hash: u64,
    pub(super) events: u64,
    last: Vec<(u64, u32, &'static str, u64, u64)>,
    next: usize,
    /// `IDGEN_SIM_TRACE=all` (or a holder's number) prints every event as it happens.
    print: Option<Option<u32>>,
}

/// How many events a failure prints.
const TRACE_KEPT: usize = 48;

impl Trace {
    pub(super) fn new() -> Trace {
        Trace {
            hash: 0xcbf2_9ce4_8422_2325,
            events: 0,
            last: Vec::with_capacity(TRACE_KEPT),
            next: 0,
            print: std::env::var("IDGEN_SIM_TRACE")
                .ok()
                .map(|which| which.parse().ok()),
        }
    }

    /// One event: when, which holder, what kind, and two numbers that tell it apart.
    pub(super) fn event(&mut self, true_ms: u64, holder: u32, kind: &'static str, a: u64, b: u64) {
        self.events += 1;
        for word in [true_ms, u64::from(holder), kind.len() as u64, a, b] {
            for byte in word.to_le_bytes() {
                self.hash ^= u64::from(byte);
                self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        for byte in kind.bytes() {
            self.hash ^= u64::from(byte);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
        }
        if let Some(which) = self.print
            && which.is_none_or(|which| which == holder)
        {
            println!("  t={true_ms:>9} holder {holder:>5} {kind} {a} {b}");
        }
        let entry = (true_ms, holder, kind, a, b);
        if self.last.len() < TRACE_KEPT {
            self.last.push(entry);
        } else {
            self.last[self.next] = entry;
        }
        self.next = (self.next + 1) % TRACE_KEPT;
    }

    /// What a request and its answer were, printed with the events when asked for.
    pub(super) fn detail(&self, holder: u32, what: impl FnOnce() -> String) {
        if let Some(which) = self.print
            && which.is_none_or(|which| which == holder)
        {
            println!("      {}", what());
        }
    }

    /// A path a holder's machine took: printed with the events when asked for.
    pub(super) fn note(&self, true_ms: u64, holder: u32, note: &impl std::fmt::Debug) {
        if let Some(which) = self.print
            && which.is_none_or(|which| which == holder)
        {
            println!("  t={true_ms:>9} holder {holder:>5} {note:?}");
        }
    }

    pub(super) fn hash(&self) -> u64 {
        self.hash
    }

    /// The last events, oldest first.
    pub(super) fn tail(&self) -> String {
        let mut out = String::new();
        let (newer, older) = self.last.split_at(self.next.min(self.last.len()));
        for (true_ms, holder, kind, a, b) in older.iter().chain(newer) {
            let _ = writeln!(out, "  t={true_ms:>9} holder {holder:>5} {kind} {a} {b}");
        }
        out
    }
}
