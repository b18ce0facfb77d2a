//! One PostgreSQL connection on a thread of its own, shared by the stores that talk to
//! PostgreSQL (blocks and leases, feature `postgres`): connecting with the project's
//! timeouts, reconnecting after any failure, and a caller that stops waiting.

use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::error::Error;
use crate::sync::{AtomicBool, Ordering};

/// How long connecting, and each statement, may take before it is an error.
pub(crate) const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a caller waits for the connection thread's answer (a connect plus statements).
const ANSWER_WITHIN: Duration = Duration::from_secs(12);

/// Work for the connection thread, and whether its caller stopped waiting (then it is
/// skipped: a write nobody waits for would only be a surprise).
type Job = (Box<dyn FnOnce(&mut Connection) + Send>, Arc<AtomicBool>);

/// What a store does on every new connection before its first statement: finds or makes
/// its tables in their schema (see [`resolve_schema`]).
pub(crate) type Setup =
    Box<dyn Fn(&mut postgres::Client) -> Result<(), SetupFailure> + Send + 'static>;

/// Why a new connection's setup failed: the server's error, or a refusal of the store's own
/// (two copies of its tables, a role that may not create them), in words for the operator.
#[derive(Debug)]
pub(crate) enum SetupFailure {
    Server(postgres::Error),
    Refused(String),
}

impl From<postgres::Error> for SetupFailure {
    fn from(error: postgres::Error) -> SetupFailure {
        SetupFailure::Server(error)
    }
}

/// A store's error for a failure with this text.
pub(crate) type Failed = fn(String) -> Error;

/// One connection, on a thread of its own, which holds the client (and the runtime inside
/// it): a session can be created, used and dropped from async code without dropping a
/// runtime there. Calls run one at a time, in order, so a process has one connection per
/// session whatever it asks of it.
pub(crate) struct Session {
    jobs: Mutex<mpsc::Sender<Job>>,
    failed: Failed,
}

/// The connection thread's side: the client, reconnected after any failure.
struct Connection {
    config: postgres::Config,
    client: Option<postgres::Client>,
    /// Statements prepared on `client` (dropped with it).
    prepared: Prepared,
    setup: Setup,
    failed: Failed,
}

impl Session {
    /// Connects to `url` (`postgresql://user@host:port/db`, or the key-value form) and runs
    /// `setup`. Fails with `failed`'s error when the URL is not valid or the server cannot
    /// be reached.
    pub(crate) fn connect(
        url: &str,
        thread_name: &str,
        setup: Setup,
        failed: Failed,
    ) -> Result<Session, Error> {
        let mut config: postgres::Config = url
            .parse()
            .map_err(|error| failed(format!("not a PostgreSQL connection URL: {error}")))?;
        // Added to the URL's own options (a search_path, say), never in their place. A
        // write must be durable when it is acknowledged: synchronous_commit on.
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
            .name(thread_name.into())
            .spawn(move || {
                let mut connection = Connection {
                    config,
                    client: None,
                    prepared: Vec::new(),
                    setup,
                    failed,
                };
                // Ends when the session (the only sender) is dropped; the client goes too.
                for (job, abandoned) in queue {
                    if abandoned.load(Ordering::SeqCst) {
                        continue;
                    }
                    // A panic must not take the session down for good: its caller sees no
                    // answer (an error), and the next job starts on a new connection.
                    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        job(&mut connection)
                    }));
                    if ran.is_err() {
                        connection.client = None;
                        connection.prepared.clear();
                    }
                }
            })
            .map_err(|error| {
                failed(format!(
                    "could not start the PostgreSQL connection thread: {error}"
                ))
            })?;
        let session = Session {
            jobs: Mutex::new(jobs),
            failed,
        };
        session.run(|_| Ok(()))?;
        Ok(session)
    }

    /// Runs `statements` on a live client (connecting first if needed) on the connection
    /// thread, and waits for the answer. Any failure drops the client, so the next call
    /// connects afresh.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        statements: impl Fn(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> Result<T, Error> {
        self.call(move |connection| connection.run(|client, _| statements(client)))
    }

    /// As [`Session::run`], with `sql` prepared once per connection: a statement sent often
    /// (a renewal) then costs one round trip, not two.
    pub(crate) fn run_prepared<T: Send + 'static>(
        &self,
        sql: Arc<str>,
        statements: impl Fn(&mut postgres::Client, &postgres::Statement) -> Result<T, postgres::Error>
        + Send
        + 'static,
    ) -> Result<T, Error> {
        self.call(move |connection| {
            connection.run(|client, prepared| {
                let cached = prepared.iter().find(|(text, _)| **text == *sql);
                let statement = match cached {
                    Some((_, statement)) => statement.clone(),
                    None => {
                        let statement = client.prepare(&sql)?;
                        prepared.push((Arc::clone(&sql), statement.clone()));
                        statement
                    }
                };
                statements(client, &statement)
            })
        })
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
            .map_err(|_| (self.failed)("the PostgreSQL connection thread has stopped".into()))?;
        answered.recv_timeout(ANSWER_WITHIN).map_err(|_| {
            // Timed out, or the job panicked and dropped its answer.
            abandoned.store(true, Ordering::SeqCst);
            (self.failed)(format!(
                "PostgreSQL did not answer within {} s (a write under way may still commit)",
                ANSWER_WITHIN.as_secs()
            ))
        })?
    }
}

/// The statements a connection has prepared (dropped with it).
type Prepared = Vec<(Arc<str>, postgres::Statement)>;

impl Connection {
    /// Runs `statements` on a live client, connecting first if needed. A connection the
    /// server closed while it sat idle (a restart, an idle timeout) fails its first
    /// statement: `statements` then runs once more on a new connection. Every statement
    /// sent twice this way is guarded as a retry after a lost answer is (a token, a
    /// version, a row that must be free), so at worst it finds its own first write.
    fn run<T>(
        &mut self,
        statements: impl Fn(&mut postgres::Client, &mut Prepared) -> Result<T, postgres::Error>,
    ) -> Result<T, Error> {
        let reused = self
            .client
            .as_ref()
            .is_some_and(|client| !client.is_closed());
        match self.run_once(&statements) {
            Err(Failure::Statement(error)) if reused && error.is_closed() => {
                self.run_once(&statements)
            }
            other => other,
        }
        .map_err(|failure| (self.failed)(failure.describe()))
    }

    fn run_once<T>(
        &mut self,
        statements: &impl Fn(&mut postgres::Client, &mut Prepared) -> Result<T, postgres::Error>,
    ) -> Result<T, Failure> {
        if self.client.as_ref().is_none_or(postgres::Client::is_closed) {
            self.client = None;
            self.prepared.clear();
            let mut client = self
                .config
                .connect(postgres::NoTls)
                .map_err(Failure::Connect)?;
            (self.setup)(&mut client).map_err(|failure| match failure {
                SetupFailure::Server(error) => Failure::Connect(error),
                SetupFailure::Refused(why) => Failure::Refused(why),
            })?;
            self.client = Some(client);
        }
        let client = self.client.as_mut().expect("connected above");
        statements(client, &mut self.prepared).map_err(|error| {
            self.client = None;
            self.prepared.clear();
            Failure::Statement(error)
        })
    }
}

/// Where a call failed: connecting (and setting up), in its statements, or refused by the
/// store's setup.
enum Failure {
    Connect(postgres::Error),
    Statement(postgres::Error),
    Refused(String),
}

impl Failure {
    fn describe(&self) -> String {
        match self {
            Failure::Connect(error) | Failure::Statement(error) => describe(error),
            Failure::Refused(why) => why.clone(),
        }
    }
}

/// The client's own text is terse ("db error"); the server's message is in its source.
pub(crate) fn describe(error: &postgres::Error) -> String {
    match std::error::Error::source(error) {
        Some(source) => format!("PostgreSQL: {error}: {source}"),
        None => format!("PostgreSQL: {error}"),
    }
}

/// The schema idgen's tables live in when none is named and none exists yet.
pub const DEFAULT_POSTGRES_SCHEMA: &str = "public";

/// Checks a schema name given by the operator: an unquoted PostgreSQL identifier in lower
/// case (what `CREATE SCHEMA name` makes), at most 63 bytes.
pub(crate) fn check_schema_name(name: &str) -> Result<(), String> {
    let bytes = name.as_bytes();
    let sensible = !bytes.is_empty()
        && bytes.len() <= 63
        && (bytes[0].is_ascii_lowercase() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if sensible {
        Ok(())
    } else {
        Err(format!(
            "the PostgreSQL schema {name:?} is not a lower-case name such as public or idgen \
             (letters a-z, digits, '_'; not starting with a digit; at most 63 bytes)"
        ))
    }
}

/// `name` as a quoted identifier, for statements.
pub(crate) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Which schema the store's tables are in, for a connection: `named` if the operator named
/// one, else the one schema of the database that holds `table` already (so an upgrade from
/// a version that created its tables along the `search_path`, in `public` or in a schema of
/// the role's name, keeps using them), else [`DEFAULT_POSTGRES_SCHEMA`]. The
/// `search_path` plays no part: every statement names the schema, so two roles with two
/// search paths share one set of tables. Copies of `table` in two schemas are two stores
/// that could each hand out the same number or value: refused, naming both, whichever was
/// named. (`pg_class` is readable by every role, so the copies are seen even where this
/// role may not read them.)
pub(crate) fn resolve_schema(
    client: &mut postgres::Client,
    named: Option<&str>,
    table: &str,
    keep_one: &str,
) -> Result<String, SetupFailure> {
    let found: Vec<String> = client
        .query(
            "SELECT n.nspname::text FROM pg_catalog.pg_class c \
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname = $1 AND c.relkind IN ('r', 'p') \
             AND n.nspname NOT LIKE 'pg\\_temp\\_%' AND n.nspname NOT LIKE 'pg\\_toast%' \
             ORDER BY 1",
            &[&table],
        )?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;
    let elsewhere: Vec<&String> = found
        .iter()
        .filter(|schema| named.is_none_or(|named| named != schema.as_str()))
        .collect();
    let copies = match named {
        Some(_) => !elsewhere.is_empty(),
        None => found.len() > 1,
    };
    if copies {
        let mut all: Vec<String> = found
            .iter()
            .map(|schema| format!("{schema}.{table}"))
            .collect();
        if let Some(named) = named
            && !found.iter().any(|schema| schema == named)
        {
            all.push(format!(
                "{named}.{table} (named by --postgres-schema, not created)"
            ));
        }
        return Err(SetupFailure::Refused(format!(
            "PostgreSQL: this database has idgen's table {table} in more than one schema ({}): \
             each copy is a store of its own, and two stores hand out the same values. \
             Keep one: stop the processes using the others, {keep_one}, drop the other \
             copies, and name the one kept with --postgres-schema (IDGEN_POSTGRES_SCHEMA) \
             everywhere",
            all.join(", ")
        )));
    }
    // Found names go into statements, some of them inside string literals: a quote in one
    // is refused rather than escaped two ways.
    if let Some(odd) = found.iter().find(|schema| schema.contains(['\'', '"'])) {
        return Err(SetupFailure::Refused(format!(
            "PostgreSQL: idgen's table {table} is in a schema whose name has a quote \
             ({odd:?}); rename the schema, or move the table to one named like public"
        )));
    }
    Ok(match (named, found.first()) {
        (Some(named), _) => named.to_string(),
        (None, Some(found)) => found.clone(),
        (None, None) => DEFAULT_POSTGRES_SCHEMA.to_string(),
    })
}

/// Makes each of `objects` (its name, and the statement that creates it in `schema`) that
/// the schema does not have, turning a refusal for want of privileges into the `GRANT` this
/// role needs. Only what is absent is created: `CREATE ... IF NOT EXISTS` checks the
/// privilege to create first, and a role sharing tables another role made may not. Two
/// sessions creating at once: the loser finds it made on a second look.
pub(crate) fn create_in_schema(
    client: &mut postgres::Client,
    schema: &str,
    objects: &[(&str, &str)],
) -> Result<(), SetupFailure> {
    for (name, create) in objects {
        let exists = |client: &mut postgres::Client| -> Result<bool, postgres::Error> {
            client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c \
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = $1 AND c.relname = $2)",
                    &[&schema, name],
                )?
                .try_get(0)
        };
        if exists(client)? {
            continue;
        }
        match client.batch_execute(create) {
            Ok(()) => {}
            Err(_) if exists(client)? => {}
            Err(error)
                if error.code() == Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE) =>
            {
                return Err(not_permitted(client, schema, &error));
            }
            Err(error) if error.code() == Some(&postgres::error::SqlState::INVALID_SCHEMA_NAME) => {
                return Err(SetupFailure::Refused(format!(
                    "{}: the schema named for idgen's tables does not exist; create it (CREATE \
                     SCHEMA {} AUTHORIZATION the role the fleet connects as), or name another \
                     with --postgres-schema",
                    describe(&error),
                    quoted(schema)
                )));
            }
            Err(error) => return Err(SetupFailure::Server(error)),
        }
    }
    Ok(())
}

/// Checks that this role may use `tables` (read, add and change rows) and `sequences` of
/// `schema`, which another role may have made: refused, naming the `GRANT`s the owner of
/// the tables runs, rather than failing at the first renewal or grant.
pub(crate) fn check_privileges(
    client: &mut postgres::Client,
    schema: &str,
    tables: &[&str],
    sequences: &[&str],
) -> Result<(), SetupFailure> {
    let name = |object: &str| format!("{}.{object}", quoted(schema));
    let mut missing = Vec::new();
    let usable: bool = client
        .query_one("SELECT has_schema_privilege($1, 'USAGE')", &[&schema])?
        .try_get(0)?;
    if !usable {
        missing.push(format!("GRANT USAGE ON SCHEMA {} TO", quoted(schema)));
    }
    for table in tables {
        let allowed: bool = client
            .query_one(
                "SELECT has_table_privilege($1, 'SELECT, INSERT, UPDATE')",
                &[&name(table)],
            )?
            .try_get(0)?;
        if !allowed {
            missing.push(format!(
                "GRANT SELECT, INSERT, UPDATE ON {} TO",
                name(table)
            ));
        }
    }
    for sequence in sequences {
        let allowed: bool = client
            .query_one(
                "SELECT has_sequence_privilege($1, 'SELECT') AND has_sequence_privilege($1, 'UPDATE')",
                &[&name(sequence)],
            )?
            .try_get(0)?;
        if !allowed {
            missing.push(format!(
                "GRANT SELECT, UPDATE ON SEQUENCE {} TO",
                name(sequence)
            ));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let role: String = client
        .query_one("SELECT current_user::text", &[])?
        .try_get(0)?;
    let grants: Vec<String> = missing
        .iter()
        .map(|grant| format!("{grant} {};", quoted(&role)))
        .collect();
    Err(SetupFailure::Refused(format!(
        "PostgreSQL: role {role} may not use idgen's tables in schema {schema}, which another \
         role made: as their owner, run: {}",
        grants.join(" ")
    )))
}

/// A refusal for want of privileges in `schema`, naming the `GRANT` that lifts it.
pub(crate) fn not_permitted(
    client: &mut postgres::Client,
    schema: &str,
    error: &postgres::Error,
) -> SetupFailure {
    let role: String = client
        .query_one("SELECT current_user::text", &[])
        .and_then(|row| row.try_get(0))
        .unwrap_or_else(|_| "this role".to_string());
    SetupFailure::Refused(format!(
        "{}; idgen's tables live in schema {schema}, and role {role} may not create (or use) \
         them there. As the schema's owner or a superuser, run: GRANT USAGE, CREATE ON SCHEMA \
         {} TO {}; (PostgreSQL 15 no longer lets every role create in public), or name a \
         schema this role owns with --postgres-schema, the same for every process of the fleet",
        describe(error),
        quoted(schema),
        quoted(&role)
    ))
}
