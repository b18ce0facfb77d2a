//! Reads back what every holder recorded and checks it: no ID issued twice across all
//! holders, each issuing loop's IDs increasing, and on each worker number two holders never
//! share a millisecond (in ID order, whenever the holder changes, the millisecond moves
//! on: a successor starts after the mark of the holder before). Per fault window, the share
//! of requests answered and the longest gap of a holder that was serving when it began.

use std::collections::HashMap;

/// What one issuing loop recorded.
pub struct Log {
    /// `holder` or `holder/thread`: the part before `/` is the holder, which may hold a
    /// number from several threads.
    pub name: String,
    /// Every ID, in the order the loop got them.
    pub ids: Vec<u64>,
    /// `(sent, answered, IDs)`, Unix ms on the test's clock.
    pub answers: Vec<(u64, u64, usize)>,
    /// `(sent, answered, reason)`.
    pub refusals: Vec<(u64, u64, String)>,
}

impl Log {
    pub fn new(name: String) -> Log {
        Log {
            name,
            ids: Vec::new(),
            answers: Vec::new(),
            refusals: Vec::new(),
        }
    }

    pub fn answered(&mut self, sent: u64, at: u64, ids: &[u64]) {
        self.ids.extend_from_slice(ids);
        self.answers.push((sent, at, ids.len()));
    }

    pub fn refused(&mut self, sent: u64, at: u64, reason: String) {
        self.refusals.push((sent, at, reason));
    }

    pub fn holder(&self) -> &str {
        self.name.split('/').next().unwrap()
    }
}

/// How an ID splits, for the per-number rule.
#[derive(Clone, Copy)]
pub struct Fields {
    pub sequence_bits: u32,
    pub worker_bits: u32,
}

impl Fields {
    fn worker(self, id: u64) -> u64 {
        (id >> self.sequence_bits) & ((1 << self.worker_bits) - 1)
    }

    fn millisecond(self, id: u64) -> u64 {
        id >> (self.sequence_bits + self.worker_bits)
    }
}

/// Every rule over every log; the first broken one, said plainly.
pub fn check(logs: &[Log], fields: Fields) -> Result<(), String> {
    for log in logs {
        if let Some(pair) = log.ids.windows(2).find(|pair| pair[0] >= pair[1]) {
            return Err(format!(
                "{} issued {} after {}: not increasing",
                log.name, pair[1], pair[0]
            ));
        }
    }
    // (worker, id, log) sorted: a number's IDs together in ID order, and a duplicate next
    // to its twin (the same ID has the same worker).
    let mut by_worker: Vec<(u64, u64, u32)> =
        Vec::with_capacity(logs.iter().map(|log| log.ids.len()).sum());
    for (index, log) in logs.iter().enumerate() {
        by_worker.extend(
            log.ids
                .iter()
                .map(|&id| (fields.worker(id), id, index as u32)),
        );
    }
    by_worker.sort_unstable();
    if let Some(pair) = by_worker.windows(2).find(|pair| pair[0].1 == pair[1].1) {
        return Err(format!(
            "ID {} issued twice: by {} and by {}",
            pair[0].1, logs[pair[0].2 as usize].name, logs[pair[1].2 as usize].name
        ));
    }
    for pair in by_worker.windows(2) {
        let ((worker, a, la), (next_worker, b, lb)) = (pair[0], pair[1]);
        let (holder_a, holder_b) = (logs[la as usize].holder(), logs[lb as usize].holder());
        if worker == next_worker
            && holder_a != holder_b
            && fields.millisecond(a) >= fields.millisecond(b)
        {
            return Err(format!(
                "worker {worker}: {holder_a} issued {a} and {holder_b} issued {b} in the same \
                 millisecond ({}): two holders of one number at once",
                fields.millisecond(b)
            ));
        }
    }
    Ok(())
}

/// A fault's window, `[start, end)` in Unix ms on the test's clock.
#[derive(Clone, Debug)]
pub struct Window {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

/// What the holders saw in one window.
#[derive(Debug)]
pub struct WindowStats {
    pub requests: usize,
    pub answered: usize,
    /// The longest time a holder that was serving when the window began went without an
    /// answer inside it, and which holder.
    pub longest_gap_ms: u64,
    pub longest_gap_of: String,
    /// Refusals in the window per holder, with a reason of each.
    pub refusals: HashMap<String, (usize, String)>,
}

impl WindowStats {
    pub fn share_answered(&self) -> f64 {
        if self.requests == 0 {
            return 1.0;
        }
        self.answered as f64 / self.requests as f64
    }
}

/// Whether `log` had an answer in the two seconds before `at`.
pub fn was_serving(log: &Log, at: u64) -> bool {
    log.answers
        .iter()
        .any(|&(_, answered, _)| answered < at && answered + 2_000 >= at)
}

pub fn window_stats(logs: &[Log], window: &Window) -> WindowStats {
    let inside = |at: u64| at >= window.start && at < window.end;
    let mut stats = WindowStats {
        requests: 0,
        answered: 0,
        longest_gap_ms: 0,
        longest_gap_of: String::new(),
        refusals: HashMap::new(),
    };
    for log in logs {
        let answers: Vec<u64> = log
            .answers
            .iter()
            .map(|&(_, at, _)| at)
            .filter(|&at| inside(at))
            .collect();
        let refused = log.refusals.iter().filter(|r| inside(r.1)).count();
        stats.requests += answers.len() + refused;
        stats.answered += answers.len();
        if let Some(first) = log.refusals.iter().find(|r| inside(r.1)) {
            stats
                .refusals
                .insert(log.name.clone(), (refused, first.2.clone()));
        }
        if was_serving(log, window.start) {
            let mut last = window.start;
            let mut gap = 0;
            for &at in answers.iter().chain(std::iter::once(&window.end)) {
                gap = gap.max(at - last);
                last = at;
            }
            if gap > stats.longest_gap_ms {
                stats.longest_gap_ms = gap;
                stats.longest_gap_of = log.name.clone();
            }
        }
    }
    stats
}

/// An SVG plot of IDs per second per holder over the run, the fault windows shaded and
/// named: what `docs/reliability.md` shows.
pub fn plot(logs: &[Log], windows: &[Window]) -> String {
    use std::fmt::Write as _;
    let origin = logs
        .iter()
        .flat_map(|log| log.answers.first().map(|a| a.1))
        .min()
        .unwrap_or(0);
    let end = logs
        .iter()
        .flat_map(|log| log.answers.last().map(|a| a.1))
        .max()
        .unwrap_or(origin + 1);
    let seconds = ((end - origin) / 1000 + 1) as usize;
    let mut rates: Vec<(String, Vec<u64>)> = Vec::new();
    for log in logs {
        let holder = log.holder().to_string();
        let index = match rates.iter().position(|(name, _)| *name == holder) {
            Some(index) => index,
            None => {
                rates.push((holder, vec![0; seconds]));
                rates.len() - 1
            }
        };
        for &(_, at, count) in &log.answers {
            rates[index].1[((at - origin) / 1000) as usize] += count as u64;
        }
    }
    let top = rates
        .iter()
        .flat_map(|(_, r)| r.iter().copied())
        .max()
        .unwrap_or(1)
        .max(1);
    let (width, height, left, bottom) = (960.0, 420.0, 60.0, 40.0);
    let x = |s: f64| left + s / seconds as f64 * (width - left - 20.0);
    let y = |v: f64| height - bottom - v / top as f64 * (height - bottom - 30.0);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for window in windows {
        let (from, to) = (
            (window.start.saturating_sub(origin)) as f64 / 1000.0,
            (window.end.saturating_sub(origin)) as f64 / 1000.0,
        );
        let _ = writeln!(
            svg,
            r##"<rect x="{:.1}" y="20" width="{:.1}" height="{:.1}" fill="#f4d9d9"/><text x="{:.1}" y="16" font-size="9">{}</text>"##,
            x(from),
            (x(to) - x(from)).max(1.0),
            height - bottom - 20.0,
            x(from),
            window.name
        );
    }
    let colours = [
        "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
    ];
    for (i, (name, rate)) in rates.iter().enumerate() {
        let points: Vec<String> = rate
            .iter()
            .enumerate()
            .map(|(s, &v)| format!("{:.1},{:.1}", x(s as f64 + 0.5), y(v as f64)))
            .collect();
        let colour = colours[i % colours.len()];
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.2" points="{}"/>"#,
            points.join(" ")
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" fill="{colour}">{name}</text>"#,
            width - 150.0,
            40.0 + 14.0 * i as f64
        );
    }
    let _ = writeln!(
        svg,
        r#"<line x1="{left}" y1="{0}" x2="{1}" y2="{0}" stroke="black"/><line x1="{left}" y1="20" x2="{left}" y2="{0}" stroke="black"/>"#,
        height - bottom,
        width - 20.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="{:.1}">0 s</text><text x="{:.1}" y="{:.1}">{seconds} s</text><text x="4" y="{:.1}">{top}/s</text><text x="4" y="{:.1}">0</text>"#,
        height - bottom + 14.0,
        width - 60.0,
        height - bottom + 14.0,
        y(top as f64) + 4.0,
        height - bottom
    );
    let _ = writeln!(
        svg,
        r#"<text x="{:.1}" y="{:.1}">IDs per second per holder; shaded: fault windows</text>"#,
        left + 200.0,
        height - 8.0
    );
    svg.push_str("</svg>\n");
    svg
}
