//! [`PostgresStore`]: blocks from one PostgreSQL table, for every process of a fleet.

use std::fmt;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::{BlockStore, Grant, MAX_VALUE, SequenceName, has_values_to_give_back};
use crate::error::Error;
use crate::sync::{AtomicBool, Ordering};

/// The table, created if absent.
pub const TABLE: &str = "idgen_sequences";

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS idgen_sequences (
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

/// How long connecting, and each statement, may take before it is an error.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a caller waits for the connection thread's answer (a connect plus statements).
const ANSWER_WITHIN: Duration = Duration::from_secs(12);

/// Work for the connection thread, and whether its caller stopped waiting (then it is
/// skipped: a grant nobody waits for would only be a gap).
type Job = (Box<dyn FnOnce(&mut Connection) + Send>, Arc<AtomicBool>);

/// Blocks of named sequences from the PostgreSQL table `idgen_sequences` (created if
/// absent): one row per sequence, holding its last granted value (values start at 1; the
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
    jobs: Mutex<mpsc::Sender<Job>>,
}

/// The connection thread's side: the client, reconnected after any failure.
struct Connection {
    config: postgres::Config,
    client: Option<postgres::Client>,
}

impl PostgresStore {
    /// Connects to `url` (`postgresql://user@host:port/db`, or the key-value form) and
    /// creates the table if absent. Fails with [`Error::BlockStore`] when the URL is not
    /// valid or the server cannot be reached.
    pub fn connect(url: &str) -> Result<PostgresStore, Error> {
        let mut config: postgres::Config = url.parse().map_err(|error| Error::BlockStore {
            reason: format!("not a PostgreSQL connection URL: {error}"),
        })?;
        // Added to the URL's own options (a search_path, say), never in their place. A
        // grant must be durable when it is acknowledged: synchronous_commit on.
        let options = format!(
            "{} -c statement_timeout={} -c synchronous_commit=on",
            config.get_options().unwrap_or(""),
            STATEMENT_TIMEOUT.as_millis()
        );
        config
            .connect_timeout(STATEMENT_TIMEOUT)
            // A silent network (a half-open connection) is an error within seconds, not
            // after the kernel's quarter of an hour of retransmissions.
            .tcp_user_timeout(STATEMENT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(5))
            .keepalives_interval(Duration::from_secs(1))
            .keepalives_retries(3)
            .options(options.trim_start());
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("idgen-postgres".into())
            .spawn(move || {
                let mut connection = Connection {
                    config,
                    client: None,
                };
                // Ends when the store (the only sender) is dropped; the client goes with it.
                for (job, abandoned) in queue {
                    if abandoned.load(Ordering::SeqCst) {
                        continue;
                    }
                    // A panic must not take the store down for good: its caller sees no
                    // answer (an error), and the next job starts on a new connection.
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        job(&mut connection)
                    }));
                    if ran.is_err() {
                        connection.client = None;
                    }
                }
            })
            .map_err(|error| Error::BlockStore {
                reason: format!("could not start the PostgreSQL connection thread: {error}"),
            })?;
        let store = PostgresStore {
            jobs: Mutex::new(jobs),
        };
        store.call(|connection| connection.run(|_| Ok(())))?;
        Ok(store)
    }

    /// Runs `work` on the connection thread and waits for its answer.
    fn call<T: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (answer, answered) = mpsc::sync_channel(1);
        let abandoned = Arc::new(AtomicBool::new(false));
        let job: Job = (
            Box::new(move |connection| {
                let _ = answer.send(work(connection));
            }),
            Arc::clone(&abandoned),
        );
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .send(job)
            .map_err(|_| Error::BlockStore {
                reason: "the PostgreSQL connection thread has stopped".into(),
            })?;
        answered.recv_timeout(ANSWER_WITHIN).map_err(|_| {
            // Timed out, or the job panicked and dropped its answer.
            abandoned.store(true, Ordering::SeqCst);
            Error::BlockStore {
                reason: format!(
                    "PostgreSQL did not answer within {} s (a grant under way may still \
                     commit: a gap, never a duplicate)",
                    ANSWER_WITHIN.as_secs()
                ),
            }
        })?
    }
}

impl Connection {
    /// Runs `statements` on a live client, connecting (and creating the table) first if
    /// needed; any failure drops the client, so the next call connects afresh.
    fn run<T>(
        &mut self,
        statements: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error>,
    ) -> Result<T, Error> {
        if self.client.as_ref().is_none_or(postgres::Client::is_closed) {
            self.client = None;
            let mut client = self.config.connect(postgres::NoTls).map_err(pg_error)?;
            create_table(&mut client).map_err(pg_error)?;
            self.client = Some(client);
        }
        let client = self.client.as_mut().expect("connected above");
        statements(client)
            .inspect_err(|_| self.client = None)
            .map_err(pg_error)
    }
}

/// Creates the table only if the name resolves to nothing on the session's search path.
/// (`CREATE TABLE IF NOT EXISTS` looks only in the first schema of the path, while the
/// grant's `UPDATE` takes the first table found along it: with a table in `public` and a
/// schema named after the role, it would make a second, empty table there, and every
/// sequence would start again at 1.) Two sessions creating it at once: the loser finds it
/// on a second look.
fn create_table(client: &mut postgres::Client) -> Result<(), postgres::Error> {
    let exists = |client: &mut postgres::Client| -> Result<bool, postgres::Error> {
        let row = client.query_one("SELECT to_regclass('idgen_sequences') IS NOT NULL", &[])?;
        row.try_get(0)
    };
    if exists(client)? {
        return Ok(());
    }
    match client.batch_execute(CREATE_TABLE) {
        Err(_) if exists(client)? => Ok(()),
        done => done,
    }
}

impl BlockStore for PostgresStore {
    fn grant(&self, sequence: &SequenceName, size: u64) -> Result<Grant, Error> {
        let name = sequence.to_string();
        let size = size.clamp(1, MAX_VALUE) as i64;
        let row = self.call(move |connection| {
            connection.run(|client| {
                if let Some(row) = client.query_opt(GRANT, &[&name, &size])? {
                    return Ok(Some(row));
                }
                client.execute(ENROL, &[&name])?;
                client.query_opt(GRANT, &[&name, &size])
            })
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
        let changed = self.call(move |connection| {
            connection.run(|client| client.execute(GIVE_BACK, &[&name, &last, &new_last, &serial]))
        })?;
        Ok(changed == 1)
    }
}

fn pg_error(error: postgres::Error) -> Error {
    // The client's own text is terse ("db error"); the server's message is in its source.
    let reason = match std::error::Error::source(&error) {
        Some(source) => format!("PostgreSQL: {error}: {source}"),
        None => format!("PostgreSQL: {error}"),
    };
    Error::BlockStore { reason }
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: not shown.
        f.debug_struct("PostgresStore").finish_non_exhaustive()
    }
}
