//! The roster's format: which numbers the store ever handed out. Pure text; the roster
//! file is read by `open.rs` and appended to by `acquire.rs`.

use std::collections::BTreeSet;

/// Which numbers were ever handed out: `idgen-lease-store v1`, then one line per number
/// (`dc<D>-worker<W>`), or the line `every-number` after `idgen leases init` found a
/// directory without a roster. A line that does not parse (a torn append) counts as
/// `every-number`: the safe reading.
// Not the block store's roster (bare sequence names): each store's is read by its own older
// versions, and a torn line is read the safe way for each (here: every number).
pub(super) struct Roster {
    every_number: bool,
    numbers: BTreeSet<(u64, u64)>,
}

impl Roster {
    pub(super) const HEADER: &'static str = "idgen-lease-store v1\n";
    pub(super) const EVERY_NUMBER: &'static str = "idgen-lease-store v1\nevery-number\n";

    pub(super) fn parse(text: &str) -> Option<Roster> {
        let rest = text.strip_prefix(Roster::HEADER)?;
        let mut roster = Roster {
            every_number: false,
            numbers: BTreeSet::new(),
        };
        for line in rest.split_inclusive('\n') {
            let number = line
                .strip_suffix('\n')
                .and_then(|line| line.strip_prefix("dc"))
                .and_then(|line| line.split_once("-worker"))
                .and_then(|(dc, worker)| Some((canonical(dc)?, canonical(worker)?)));
            match number {
                Some(number) => {
                    roster.numbers.insert(number);
                }
                None => roster.every_number = true,
            }
        }
        Some(roster)
    }

    pub(super) fn handed_out(&self, datacenter: u64, worker: u64) -> bool {
        self.every_number || self.numbers.contains(&(datacenter, worker))
    }

    pub(super) fn line(datacenter: u64, worker: u64) -> String {
        format!("dc{datacenter}-worker{worker}\n")
    }
}

/// A number as idgen writes it: decimal digits, no sign, no leading zero.
pub(super) fn canonical(text: &str) -> Option<u64> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    (digits && (text == "0" || !text.starts_with('0')))
        .then(|| text.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_roster_reads_torn_lines_as_every_number() {
        let roster = Roster::parse("idgen-lease-store v1\ndc0-worker3\ndc1-worker0\n").unwrap();
        assert!(roster.handed_out(0, 3) && roster.handed_out(1, 0));
        assert!(!roster.handed_out(0, 0));
        let torn = Roster::parse("idgen-lease-store v1\ndc0-worker3\ndc1-wor").unwrap();
        assert!(torn.handed_out(0, 0));
        assert!(Roster::parse("something else\n").is_none());
        assert!(
            Roster::parse(Roster::EVERY_NUMBER)
                .unwrap()
                .handed_out(5, 9)
        );
    }
}
