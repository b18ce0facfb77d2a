//! `idgen sql`: PostgreSQL functions that read a layout's IDs in the database (creation
//! time, datacenter, worker, sequence) and give the first ID of a time, as plain SQL: no
//! extension, nothing to install but the functions.

use clap::Args;
use idgen::Layout;

use crate::args::layout::LayoutArgs;
use crate::failure::Failure;
use crate::time;

#[derive(Args)]
pub struct SqlArgs {
    /// What every function's name starts with: 1 to 40 of a-z, 0-9 and _, starting with a
    /// letter or _. One prefix per layout, when a database holds IDs of several.
    #[arg(long, default_value = "idgen_")]
    prefix: String,
    #[command(flatten)]
    layout: LayoutArgs,
}

impl SqlArgs {
    pub fn run(self) -> Result<(), Failure> {
        let layout = self.layout.layout()?;
        check_prefix(&self.prefix).map_err(Failure::input)?;
        print!("{}", functions(&layout, &self.prefix));
        Ok(())
    }
}

/// A prefix that makes every function name a plain SQL identifier (nothing to quote,
/// nothing to inject).
fn check_prefix(prefix: &str) -> Result<(), String> {
    let mut bytes = prefix.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|byte| byte.is_ascii_lowercase() || byte == b'_');
    let rest_ok =
        bytes.all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_');
    if first_ok && rest_ok && prefix.len() <= 40 {
        Ok(())
    } else {
        Err(format!(
            "--prefix {prefix:?}: 1 to 40 of a-z, 0-9 and _, starting with a letter or _"
        ))
    }
}

/// The functions for `layout`, each name starting with `prefix`.
fn functions(layout: &Layout, prefix: &str) -> String {
    let epoch = layout.epoch_unix_ms();
    let last = layout.last_unix_ms();
    let time_shift = 63 - layout.time_bits();
    let worker_shift = layout.sequence_bits();
    let datacenter_shift = layout.sequence_bits() + layout.worker_bits();
    let field = |name: &str, what: &str, shift: u32, mask: u64| {
        format!(
            "-- The {what} of an ID.\n\
             CREATE OR REPLACE FUNCTION {prefix}{name}(id bigint) RETURNS bigint\n    \
             LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE\n    \
             AS $$ SELECT (id >> {shift}) & {mask} $$;\n\n"
        )
    };
    let mut sql = format!(
        "-- idgen: functions for the layout {record}\n\
         -- (epoch {epoch_text}, last millisecond {last_text}). Made by `idgen sql`; plain SQL.\n\
         -- IDs are bigint. Times are on the ID, as its generator set them.\n\n\
         -- When an ID was made, in Unix milliseconds.\n\
         CREATE OR REPLACE FUNCTION {prefix}unix_ms(id bigint) RETURNS bigint\n    \
         LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE\n    \
         AS $$ SELECT (id >> {time_shift}) + {epoch} $$;\n\n\
         -- When an ID was made (PostgreSQL's timestamps end in the year 294276).\n\
         CREATE OR REPLACE FUNCTION {prefix}created_at(id bigint) RETURNS timestamptz\n    \
         LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE\n    \
         AS $$ SELECT timestamptz 'epoch' + ((id >> {time_shift}) + {epoch}) * interval '1 millisecond' $$;\n\n",
        record = layout.record(),
        epoch_text = time::rfc3339_ms(epoch),
        last_text = time::rfc3339_ms(last),
    );
    sql.push_str(&field(
        "datacenter",
        "datacenter number",
        datacenter_shift,
        layout.max_datacenter(),
    ));
    sql.push_str(&field(
        "worker",
        "worker number",
        worker_shift,
        layout.max_worker(),
    ));
    sql.push_str(&field(
        "sequence",
        "sequence number",
        0,
        layout.max_sequence(),
    ));
    // The millisecond of `at`, exact on every version (extract() is a double before
    // PostgreSQL 14, so the time is cut to its millisecond first and then rounded), from
    // immutable functions only: in UTC, as a timestamp without time zone.
    let ms = "round(extract(epoch FROM date_trunc('milliseconds', at AT TIME ZONE 'UTC')) * 1000)";
    sql.push_str(&format!(
        "-- The first ID that can be made in the millisecond of a time: for\n\
         -- `WHERE id >= {prefix}first_id_at(t1) AND id < {prefix}first_id_at(t2)`, the IDs made in\n\
         -- [t1, t2). 0 before the epoch (no ID was made before it); NULL after the layout's\n\
         -- last millisecond (no ID can be made then: as an upper bound, leave it out, as\n\
         -- made_in below does).\n\
         CREATE OR REPLACE FUNCTION {prefix}first_id_at(at timestamptz) RETURNS bigint\n    \
         LANGUAGE sql IMMUTABLE PARALLEL SAFE\n    \
         AS $$ SELECT CASE\n        \
         WHEN {ms} < {epoch} THEN 0\n        \
         WHEN {ms} > {last} THEN NULL\n        \
         ELSE ({ms}::bigint - {epoch}) << {time_shift}\n    \
         END $$;\n\n\
         -- Whether an ID was made in [t1, t2): the first_id_at bounds, with no upper bound\n\
         -- when t2 lies past the layout's last millisecond. Not STRICT, like first_id_at, so\n\
         -- that the planner inlines both: `WHERE made_in(id, t1, t2)` then reads an index on id.\n\
         CREATE OR REPLACE FUNCTION {prefix}made_in(id bigint, t1 timestamptz, t2 timestamptz)\n    \
         RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE\n    \
         AS $$ SELECT id >= {prefix}first_id_at(t1)\n        \
         AND ({prefix}first_id_at(t2) IS NULL OR id < {prefix}first_id_at(t2)) $$;\n"
    ));
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_plain_identifiers() {
        for good in ["idgen_", "_", "orders_v2_", "a"] {
            assert_eq!(check_prefix(good), Ok(()), "{good}");
        }
        for bad in ["", "1x", "Idgen_", "a-b", "a;drop", "é", &"a".repeat(41)] {
            assert!(check_prefix(bad).is_err(), "{bad}");
        }
    }
}
