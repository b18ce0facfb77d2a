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

/// What a store does on every new connection before its first statement (its tables).
pub(crate) type Setup = fn(&mut postgres::Client) -> Result<(), postgres::Error>;

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
    prepared: Vec<(&'static str, postgres::Statement)>,
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
        sql: &'static str,
        statements: impl Fn(&mut postgres::Client, &postgres::Statement) -> Result<T, postgres::Error>
        + Send
        + 'static,
    ) -> Result<T, Error> {
        self.call(move |connection| {
            connection.run(|client, prepared| {
                let cached = prepared.iter().find(|(text, _)| *text == sql);
                let statement = match cached {
                    Some((_, statement)) => statement.clone(),
                    None => {
                        let statement = client.prepare(sql)?;
                        prepared.push((sql, statement.clone()));
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
type Prepared = Vec<(&'static str, postgres::Statement)>;

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
            (self.setup)(&mut client).map_err(Failure::Connect)?;
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

/// Where a call failed: connecting (and setting up), or in its statements.
enum Failure {
    Connect(postgres::Error),
    Statement(postgres::Error),
}

impl Failure {
    fn describe(&self) -> String {
        match self {
            Failure::Connect(error) | Failure::Statement(error) => describe(error),
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

/// Creates `table` with `create` only if the name resolves to nothing on the session's
/// search path. (`CREATE TABLE IF NOT EXISTS` looks only in the first schema of the path,
/// while the statements take the first table found along it: with a table in `public` and
/// a schema named after the role, it would make a second, empty table there.) Two
/// sessions creating it at once: the loser finds it on a second look.
pub(crate) fn create_table_if_absent(
    client: &mut postgres::Client,
    table: &str,
    create: &str,
) -> Result<(), postgres::Error> {
    let exists = |client: &mut postgres::Client| -> Result<bool, postgres::Error> {
        let row = client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table])?;
        row.try_get(0)
    };
    if exists(client)? {
        return Ok(());
    }
    match client.batch_execute(create) {
        Err(_) if exists(client)? => Ok(()),
        done => done,
    }
}
