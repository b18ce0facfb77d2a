//! [`PostgresStore`]: blocks from one PostgreSQL table, for every process of a fleet.

use std::fmt;

use std::sync::{Arc, OnceLock};

use super::{BlockStore, Grant, MAX_VALUE, SequenceName, has_values_to_give_back};
use crate::error::Error;
use crate::postgres_session::{
    Session, SetupFailure, check_privileges, check_schema_name, create_in_schema, quoted,
    resolve_schema,
};

/// The table, created if absent.
pub const TABLE: &str = "idgen_sequences";

const CREATE_TABLE: &str = "CREATE TABLE idgen_sequences (
    name text PRIMARY KEY,
    last_value bigint NOT NULL CHECK (last_value >= 0),
    serial bigint NOT NULL,
    block_size bigint NOT NULL
)";

/// One statement: the row moves past the block and says where it ended. Two grants of the
/// same row serialise on its row lock, so no read-then-write race exists.
const GRANT: &str = "UPDATE idgen_sequences
    SET last_value = last_value + LEAST($2::bigint, 9223372036854775807 - last_value),
        serial = serial + 1,
        block_size = LEAST($2::bigint, 9223372036854775807 - last_value)
    WHERE name = $1 AND last_value < 9223372036854775807
    RETURNING last_value, serial, block_size";

const ENROL: &str = "INSERT INTO idgen_sequences (name, last_value, serial, block_size)
    VALUES ($1, 0, 0, 0) ON CONFLICT (name) DO NOTHING";

/// Taken back only while the grant is the row's latest change.
const GIVE_BACK: &str = "UPDATE idgen_sequences SET last_value = $3, serial = serial + 1
    WHERE name = $1 AND last_value = $2 AND serial = $4";

/// Blocks of named sequences from the PostgreSQL table `idgen_sequences` (created if
/// absent, in the one schema of the database that has it, else in
/// [`DEFAULT_POSTGRES_SCHEMA`](crate::DEFAULT_POSTGRES_SCHEMA), or in the schema named with
/// [`PostgresStore::connect_in`]; every statement names the schema, so the `search_path`
/// plays no part, and copies of the table in two schemas are refused): one row per sequence, holding its last granted value (values start at 1; the
/// row keeps the *last* value rather than the next, because the next after `i64::MAX` does
/// not fit a `BIGINT`).
///
/// A grant is one atomic `UPDATE ... SET last_value = last_value + n ... RETURNING`, so
/// any number of processes on any number of hosts share a sequence. The connection lives on
/// a thread of its own, which holds the client (and the runtime inside it): the store can
/// be created, used and dropped from async code without dropping a runtime there, and a
/// lost connection is an [`Error::BlockStore`] for the call that saw it and a new
/// connection for the next call. Calls block their thread; from async code run them with
/// `spawn_blocking`.
pub struct PostgresStore {
    session: Session,
    /// The schema of the table, found or named at the first connection.
    schema: String,
    /// The statements, naming the table in its schema.
    grant: String,
    enrol: String,
    give_back: String,
}

impl PostgresStore {
    /// Connects to `url` (`postgresql://user@host:port/db`, or the key-value form) and
    /// creates the table if absent. Fails with [`Error::BlockStore`] when the URL is not
    /// valid, the server cannot be reached, or the database has the table in two schemas.
    pub fn connect(url: &str) -> Result<PostgresStore, Error> {
        PostgresStore::open(url, None)
    }

    /// As [`PostgresStore::connect`], with the table in `schema` (a lower-case name such as
    /// `idgen`), whatever the `search_path`. Refused when the table also exists in another
    /// schema of the database, and, naming the `GRANT` it needs, when the role may not
    /// create it there.
    pub fn connect_in(url: &str, schema: &str) -> Result<PostgresStore, Error> {
        check_schema_name(schema).map_err(|reason| Error::BlockStore { reason })?;
        PostgresStore::open(url, Some(schema))
    }

    fn open(url: &str, named: Option<&str>) -> Result<PostgresStore, Error> {
        let resolved = Arc::new(OnceLock::<String>::new());
        let (found, named) = (Arc::clone(&resolved), named.map(str::to_string));
        let setup = Box::new(move |client: &mut postgres::Client| {
            let schema = resolve_schema(client, named.as_deref(), TABLE, KEEP_ONE)?;
            if let Some(first) = found.get()
                && *first != schema
            {
                return Err(SetupFailure::Refused(format!(
                    "PostgreSQL: {TABLE} is now found in schema {schema}, not in {first} where \
                     this process began; name one with --postgres-schema"
                )));
            }
            create_in_schema(client, &schema, &[(TABLE, &qualify(CREATE_TABLE, &schema))])?;
            check_privileges(client, &schema, &[TABLE], &[])?;
            let _ = found.set(schema);
            Ok(())
        });
        let session = Session::connect(url, "idgen-postgres", setup, |reason| Error::BlockStore {
            reason,
        })?;
        let schema = resolved.get().cloned().unwrap_or_default();
        Ok(PostgresStore {
            session,
            grant: qualify(GRANT, &schema),
            enrol: qualify(ENROL, &schema),
            give_back: qualify(GIVE_BACK, &schema),
            schema,
        })
    }

    /// The schema of the table.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

/// What to do before dropping copies of the table: values up to each copy's last were
/// handed out, so the kept copy must go on past the largest of them.
const KEEP_ONE: &str = "first merge into the one kept, for every sequence name, the largest \
     last_value of all copies (UPDATE it to GREATEST of them) and the names only another copy \
     has (values up to each copy's last_value were handed out: a copy left behind hands them \
     out again)";

/// `sql` with the table named in `schema`.
fn qualify(sql: &str, schema: &str) -> String {
    sql.replace(TABLE, &format!("{}.{TABLE}", quoted(schema)))
}

impl BlockStore for PostgresStore {
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error> {
        let name = sequence.to_string();
        let size = size.clamp(1, MAX_VALUE) as i64;
        let (grant, enrol) = (self.grant.clone(), self.enrol.clone());
        let row = self.session.run(move |client| {
            if let Some(row) = client.query_opt(&grant, &[&name, &size])? {
                return Ok(Some(row));
            }
            client.execute(&enrol, &[&name])?;
            client.query_opt(&grant, &[&name, &size])
        })?;
        let Some(row) = row else {
            return Err(Error::SequenceExhausted {
                sequence: sequence.to_string(),
            });
        };
        let columns = (row.try_get(0), row.try_get(1), row.try_get(2));
        let (Ok(last), Ok(serial), Ok(granted)) = columns else {
            return Err(Error::BlockStore {
                reason: format!("{TABLE} does not have the columns idgen made (bigint each)"),
            });
        };
        let (last, serial, granted): (i64, i64, i64) = (last, serial, granted);
        if granted < 1 || last < granted || serial < 1 {
            return Err(Error::BlockStore {
                reason: format!(
                    "the row of sequence {sequence} in {TABLE} holds values idgen did not \
                     write (last_value {last}, block_size {granted}, serial {serial})"
                ),
            });
        }
        Ok(Grant {
            first: (last - granted) as u64 + 1,
            end: last as u64 + 1,
            serial: serial as u64,
        })
    }

    fn give_back(
        &self,
        sequence: &SequenceName,
        grant: &Grant,
        unused_from: u64,
    ) -> Result<bool, Error> {
        if !has_values_to_give_back(grant, unused_from)? {
            return Ok(false);
        }
        let name = sequence.to_string();
        let (last, new_last) = ((grant.end - 1) as i64, (unused_from - 1) as i64);
        let Ok(serial) = i64::try_from(grant.serial) else {
            return Ok(false); // no row holds such a serial
        };
        let give_back = self.give_back.clone();
        let changed = self
            .session
            .run(move |client| client.execute(&give_back, &[&name, &last, &new_last, &serial]))?;
        Ok(changed == 1)
    }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: not shown.
        f.debug_struct("PostgresStore")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}
