//! Starts the real `idgen` binary and talks HTTP/1.1 to it over a plain TCP socket, so a
//! test controls every byte (bad content types, oversized bodies, malformed JSON).
//!
//! Every wait here is for the event itself (a line printed, a request read, a process
//! ended), with a bound far above what it takes on a loaded machine: the bound only keeps a
//! broken test from hanging, and its panic says what never happened.

#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_idgen");

/// The bound of a wait for something the other side does in a moment (a line logged, a
/// request read, a state reached).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// The bound of a whole `idgen` run, and of a service's start (which may wait for marks).
pub const PROCESS_PATIENCE: Duration = Duration::from_secs(60);

/// Sets each of its flags when dropped. Threads of a scope that run until a flag is set stop
/// even when the code that was to set it panics, instead of the scope waiting for them for
/// ever.
pub struct SetOnDrop<'a>(pub &'a [&'a AtomicBool]);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        for flag in self.0 {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

/// Whether `done` holds within `limit` (checked every 10 ms), for a test that acts again
/// when it does not.
pub fn within(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `done` (checked every 10 ms) and returns how long that took; after `limit`,
/// fails the test naming `what`.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        thread::sleep(Duration::from_millis(10));
    }
    started.elapsed()
}

/// The etcd the test command started (`IDGEN_ETCD_ENDPOINTS`).
pub fn etcd_endpoints() -> String {
    std::env::var("IDGEN_ETCD_ENDPOINTS").expect(
        "IDGEN_ETCD_ENDPOINTS is not set: run the tests through .ci/test, which starts etcd",
    )
}

/// The wall clock, in Unix milliseconds.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The layout flags of a store with two worker numbers (no datacenter bits): `init`
/// writes two marks, not 1,024.
pub const TWO_NUMBERS: [&str; 6] = [
    "--datacenter-bits",
    "0",
    "--worker-bits",
    "1",
    "--sequence-bits",
    "21",
];

/// A fresh, empty directory under the system temp dir.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idgen-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A path for a new lease directory (inside a fresh [`temp_dir`]): the first `idgen`
/// that uses it creates it, and so initialises it.
pub fn new_lease_dir(name: &str) -> PathBuf {
    temp_dir(name).join("leases")
}

/// `idgen`, without the caller's `IDGEN_*` variables: each sets a flag (`IDGEN_LEASE_DIR` is
/// `--lease-dir`, and so on), and a test's `idgen` must run on the store and settings the
/// test names, whatever the shell around it exports (`.ci/test` exports
/// `IDGEN_ETCD_ENDPOINTS` and `IDGEN_POSTGRES_URL` for the tests themselves).
pub fn idgen_command() -> Command {
    let mut command = Command::new(BIN);
    // RUST_LOG too: the tests of the log set it themselves.
    command.env_remove("RUST_LOG");
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("IDGEN_") {
            command.env_remove(name);
        }
    }
    command
}

/// `idgen` with `args`, run to completion: (exit status, stdout, stderr).
pub fn idgen(args: &[&str]) -> (ExitStatus, String, String) {
    idgen_with_env(args, &[])
}

/// As [`idgen`], with environment variables set.
pub fn idgen_with_env(args: &[&str], env: &[(&str, &Path)]) -> (ExitStatus, String, String) {
    let mut command = idgen_command();
    for (name, value) in env {
        command.env(name, value);
    }
    let (status, stdout, stderr) = run(command.args(args), &format!("idgen {args:?}"));
    (
        status,
        String::from_utf8(stdout).unwrap(),
        String::from_utf8(stderr).unwrap(),
    )
}

/// Runs `command` (`what`, for messages) to completion, stdin closed: its exit status,
/// stdout and stderr. Killed, and the test failed with what it wrote, if it has not ended
/// within [`PROCESS_PATIENCE`].
pub fn run(command: &mut Command, what: &str) -> (ExitStatus, Vec<u8>, Vec<u8>) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start {what}: {error}"));
    let (sender, outputs) = mpsc::channel();
    let pipes: [(usize, Box<dyn Read + Send>); 2] = [
        (0, Box::new(child.stdout.take().unwrap())),
        (1, Box::new(child.stderr.take().unwrap())),
    ];
    for (which, mut pipe) in pipes {
        let sender = sender.clone();
        thread::spawn(move || {
            let mut bytes = Vec::new();
            let read = pipe.read_to_end(&mut bytes).map(|_| bytes);
            let _ = sender.send((which, read));
        });
    }
    drop(sender);
    // Both pipes reach their end when the process ends (nothing it starts inherits them).
    let deadline = Instant::now() + PROCESS_PATIENCE;
    let mut written = [Vec::new(), Vec::new()];
    let mut open = 2;
    while open > 0 {
        match outputs.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok((which, read)) => {
                written[which] =
                    read.unwrap_or_else(|error| panic!("reading what {what} wrote: {error}"));
                open -= 1;
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                for (which, read) in outputs.iter().take(open) {
                    written[which] = read.unwrap_or_else(|error| error.to_string().into());
                }
                panic!(
                    "{what} did not end within {PROCESS_PATIENCE:?}; it wrote:\n{}{}",
                    String::from_utf8_lossy(&written[0]),
                    String::from_utf8_lossy(&written[1])
                );
            }
        }
    }
    let status = exit_status(&mut child, what);
    let [stdout, stderr] = written;
    (status, stdout, stderr)
}

/// Waits (at most [`PATIENCE`]) for `child` to exit.
fn exit_status(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {PATIENCE:?}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// The ID `idgen next` with `args` prints, retried (at most [`PATIENCE`]) while its range
/// is full (a number held for a moment by another process on the host: default-directory
/// numbers are host-wide); any other failure fails the test.
pub fn next_id_once_free(args: &[&str], env: &[(&str, &Path)]) -> u64 {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, stdout, stderr) = idgen_with_env(args, env);
        if status.success() {
            return stdout.trim().parse().unwrap();
        }
        assert!(stderr.contains("no free worker number"), "{stderr}");
        assert!(Instant::now() < deadline, "{stderr}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A running `idgen serve` on a free loopback port; killed on drop if still running.
pub struct Service {
    pub child: Child,
    pub address: SocketAddr,
    /// The service's own worker number, once [`Service::wait_until_serving`] has seen it
    /// taken ([`Service::start_in`] waits for that).
    pub worker: u64,
    /// The lines the service prints on stdout after the first, as they come.
    lines: Mutex<mpsc::Receiver<String>>,
    /// Everything the service has written to stderr so far (its log), read as it comes.
    log: Arc<Mutex<String>>,
    /// The thread reading it: it ends when the service's stderr closes.
    log_reader: Option<thread::JoinHandle<()>>,
}

impl Service {
    /// `idgen serve` with the lease directory, and a blocks directory beside it (no test
    /// writes to the default one).
    pub fn start(lease_dir: &Path, extra: &[&str]) -> Service {
        let blocks_dir = lease_dir.with_file_name("blocks");
        let mut args = vec![
            "--lease-dir",
            lease_dir.to_str().unwrap(),
            "--blocks-dir",
            blocks_dir.to_str().unwrap(),
        ];
        args.extend(extra);
        Service::start_with(&args)
    }

    /// `idgen serve --listen 127.0.0.1:0` with `args`.
    pub fn start_with(args: &[&str]) -> Service {
        Service::start_in(
            idgen_command()
                .args(["serve", "--listen", "127.0.0.1:0"])
                .args(args),
        )
    }

    /// Starts `command`, an `idgen serve` that listens on a port it prints, and waits (at
    /// most [`PROCESS_PATIENCE`] each: a start may wait for marks) for that first line, then
    /// for the line saying its worker number is taken.
    pub fn start_in(command: &mut Command) -> Service {
        let mut service = Service::start_listening_in(command);
        service.wait_until_serving();
        service
    }

    /// Starts `command`, an `idgen serve`, and waits (at most [`PROCESS_PATIENCE`]) until it
    /// listens: its worker number may still be being taken.
    pub fn start_listening_in(command: &mut Command) -> Service {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Both pipes drained all along (a full pipe would block the service).
        let log = Arc::new(Mutex::new(String::new()));
        let log_reader = {
            let (log, stderr) = (Arc::clone(&log), child.stderr.take().unwrap());
            thread::spawn(move || {
                let mut stderr = BufReader::new(stderr);
                let mut line = Vec::new();
                loop {
                    let text = match stderr.read_until(b'\n', &mut line) {
                        Ok(0) => break,
                        Ok(_) => String::from_utf8_lossy(&line).into_owned(),
                        Err(error) => format!("(the test could read no more of it: {error})\n"),
                    };
                    log.lock().unwrap().push_str(&text);
                    line.clear();
                }
            })
        };
        let (sender, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                // The first two are awaited; the rest are read and dropped.
                let (line, failed) = match line {
                    Ok(line) => (String::from_utf8_lossy(&line).into_owned(), false),
                    Err(error) => (format!("(the test could read no more: {error})"), true),
                };
                let _ = sender.send(line);
                if failed {
                    break;
                }
            }
        });
        let mut service = Service {
            child,
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            worker: u64::MAX,
            lines: Mutex::new(lines),
            log,
            log_reader: Some(log_reader),
        };
        let line = service.next_line("listening");
        // "idgen: listening on http://127.0.0.1:PORT (taking a worker number)"
        let Some(rest) = line.strip_prefix("idgen: listening on http://") else {
            let _ = service.child.kill();
            let status = service.child.wait();
            panic!(
                "unexpected first line: {line:?}; the service ended ({status:?}) saying:\n{}",
                service.full_log()
            );
        };
        service.address = rest.split_whitespace().next().unwrap().parse().unwrap();
        service
    }

    /// Waits (at most [`PROCESS_PATIENCE`]: a start may wait for marks, or for a number to
    /// come free) for the line saying the service's worker number is taken, and notes it.
    pub fn wait_until_serving(&mut self) {
        let line = self.next_line("serving");
        // "idgen: serving as worker W of datacenter D"
        let Some(rest) = line.strip_prefix("idgen: serving as worker ") else {
            let _ = self.child.kill();
            let status = self.child.wait();
            panic!(
                "unexpected line: {line:?}; the service ended ({status:?}) saying:\n{}",
                self.full_log()
            );
        };
        self.worker = rest.split_whitespace().next().unwrap().parse().unwrap();
    }

    /// The next line the service prints on stdout (at most [`PROCESS_PATIENCE`]); `what`
    /// names it for the message.
    fn next_line(&mut self, what: &str) -> String {
        let line = self.lines.lock().unwrap().recv_timeout(PROCESS_PATIENCE);
        match line {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let status = self.child.wait();
                panic!(
                    "the service printed no {what} line within {PROCESS_PATIENCE:?} (killed: \
                     {status:?}); it logged:\n{}",
                    self.full_log()
                );
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = exit_status(&mut self.child, "the service");
                panic!(
                    "the service ended ({status}) before its {what} line; it logged:\n{}",
                    self.full_log()
                );
            }
        }
    }

    /// What the service has logged (written to stderr) so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// Waits (at most [`PATIENCE`]) until the service has logged a line containing `text`,
    /// and returns that line.
    pub fn wait_for_log(&self, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(line) = self.log().lines().find(|line| line.contains(text)) {
                return line.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "the service logged no {text:?} within {PATIENCE:?}:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// The whole log, once the service has ended (its stderr closed).
    fn full_log(&mut self) -> String {
        if let Some(reader) = self.log_reader.take() {
            reader.join().unwrap();
        }
        self.log()
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], b"")
    }

    /// A handle for other threads to ask this service with.
    pub fn client(&self) -> Client {
        Client {
            address: self.address,
            log: Arc::clone(&self.log),
        }
    }

    pub fn post_json(&self, path: &str, body: &str) -> Reply {
        self.request(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
    }

    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Reply {
        self.send(method, path, headers, body).reply()
    }

    /// Sends a request on a connection of its own, and leaves the reply to be read.
    pub fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Sent {
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        for (name, value) in headers {
            head += &format!("{name}: {value}\r\n");
        }
        head += "\r\n";
        let sent = self.send_raw(head.as_bytes());
        // A server may answer (413) before reading all of a large body and close: a failed
        // write is fine as long as a whole response comes back.
        let _ = (&sent.stream).write_all(body);
        sent
    }

    /// Opens a connection and sends `bytes` on it, whether or not they make a whole request.
    pub fn send_raw(&self, bytes: &[u8]) -> Sent {
        let mut stream = TcpStream::connect(self.address).unwrap();
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        stream.set_write_timeout(Some(PATIENCE)).unwrap();
        stream.write_all(bytes).unwrap();
        Sent {
            stream,
            log: Arc::clone(&self.log),
        }
    }

    /// Whether the service has read every byte sent so far on the connection `client` (the
    /// client's end, [`Sent::local_addr`]): the service's kernel has acknowledged them all,
    /// and none is left unread in the service's socket, so the service itself has taken
    /// the connection from its listen queue and read them. From `/proc/net/tcp` (Linux).
    pub fn has_read(&self, client: SocketAddr) -> bool {
        // The client's end first: once its bytes are acknowledged, a socket without unread
        // bytes, read after, is one whose bytes were read.
        let acknowledged = tcp_sockets()
            .iter()
            .any(|s| s.local == client && s.remote == self.address && s.tx_queue == 0);
        acknowledged
            && tcp_sockets().iter().any(|s| {
                s.local == self.address
                    && s.remote == client
                    && s.rx_queue == 0
                    && [ESTABLISHED, CLOSE_WAIT].contains(&s.state)
            })
    }

    /// Waits (at most [`PATIENCE`]) until the service has read everything sent on each of
    /// `clients` ([`Service::has_read`]); `what` names them for the message.
    pub fn wait_until_read(&self, what: &str, clients: &[SocketAddr]) {
        wait_until(&format!("the service to read {what}"), PATIENCE, || {
            clients.iter().all(|client| self.has_read(*client))
        });
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(self) -> ExitStatus {
        signal(self.child.id(), "TERM");
        self.wait_for_exit()
    }

    /// Waits (at most [`PATIENCE`]) for the process to exit on its own.
    pub fn wait_for_exit(self) -> ExitStatus {
        self.wait_for_exit_with_log().0
    }

    /// Sends SIGTERM, waits for the exit, and returns it with all the service wrote to
    /// stderr.
    pub fn terminate_with_log(self) -> (ExitStatus, String) {
        signal(self.child.id(), "TERM");
        self.wait_for_exit_with_log()
    }

    /// Waits (at most [`PATIENCE`]) for the process to exit on its own; the exit status and
    /// all the service wrote to stderr.
    pub fn wait_for_exit_with_log(mut self) -> (ExitStatus, String) {
        let deadline = Instant::now() + PATIENCE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "the service did not exit within {PATIENCE:?}; it logged:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(10));
        };
        let log = self.full_log();
        (status, log)
    }

    /// The exit status, if the process has exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A handle to ask a [`Service`] from another thread: its address and log only.
#[derive(Clone)]
pub struct Client {
    address: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Client {
    /// `GET path` on a connection of its own.
    pub fn get(&self, path: &str) -> Reply {
        self.try_get(path).unwrap()
    }

    /// `GET path`, or why no connection could be made (the service has exited).
    pub fn try_get(&self, path: &str) -> std::io::Result<Reply> {
        let mut stream = TcpStream::connect(self.address)?;
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        stream.set_write_timeout(Some(PATIENCE)).unwrap();
        let head = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            self.address
        );
        stream.write_all(head.as_bytes()).unwrap();
        Ok(Sent {
            stream,
            log: Arc::clone(&self.log),
        }
        .reply())
    }
}

/// A request sent by [`Service::send`], its reply still to be read.
#[derive(Debug)]
pub struct Sent {
    stream: TcpStream,
    /// The service's log, for a reply that never comes.
    log: Arc<Mutex<String>>,
}

impl Sent {
    /// The client's end of the connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.stream.local_addr().unwrap()
    }

    /// Reads the reply (at most [`PATIENCE`]); fails the test if none comes whole, with
    /// what the service logged.
    pub fn reply(mut self) -> Reply {
        let mut raw = Vec::new();
        let read = self.stream.read_to_end(&mut raw);
        let reply = Reply::parse(&raw);
        match (read, reply) {
            (Ok(_), Some(reply)) => reply,
            // A reset right after a complete response (unread request bytes) is the only
            // read error accepted.
            (Err(_), Some(reply)) if reply.is_complete(&raw) => reply,
            (read, _) => panic!(
                "no whole response ({}) after {:?}; the service logged:\n{}",
                read.err()
                    .map_or("the connection was closed".into(), |e| e.to_string()),
                String::from_utf8_lossy(&raw),
                self.log.lock().unwrap()
            ),
        }
    }
}

const ESTABLISHED: u8 = 0x01;
const CLOSE_WAIT: u8 = 0x08;

/// An IPv4 TCP socket of this host, as `/proc/net/tcp` lists it.
struct TcpSocket {
    local: SocketAddr,
    remote: SocketAddr,
    state: u8,
    /// Bytes sent and not yet acknowledged (an established socket).
    tx_queue: u64,
    /// Bytes received and not yet read.
    rx_queue: u64,
}

fn tcp_sockets() -> Vec<TcpSocket> {
    let table = std::fs::read_to_string("/proc/net/tcp")
        .expect("/proc/net/tcp (Linux) tells whether the service has read a request");
    // "0100007F:1F90" is 127.0.0.1:8080: the address as the kernel holds it (network
    // order, printed as a host-order number), the port as a number.
    let address = |text: &str| -> SocketAddr {
        let (ip, port) = text.split_once(':').unwrap();
        let ip = u32::from_str_radix(ip, 16).unwrap().to_ne_bytes();
        let port = u16::from_str_radix(port, 16).unwrap();
        SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port))
    };
    table
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (tx, rx) = fields[4].split_once(':').unwrap();
            TcpSocket {
                local: address(fields[1]),
                remote: address(fields[2]),
                state: u8::from_str_radix(fields[3], 16).unwrap(),
                tx_queue: u64::from_str_radix(tx, 16).unwrap(),
                rx_queue: u64::from_str_radix(rx, 16).unwrap(),
            }
        })
        .collect()
}

/// Debian's libfaketime, to preload into a child (in the child itself, so that killing the
/// child kills the process that was faked; the `faketime` wrapper would leave it behind).
pub fn libfaketime() -> PathBuf {
    ["x86_64-linux-gnu", "aarch64-linux-gnu", "."]
        .iter()
        .map(|arch| PathBuf::from(format!("/usr/lib/{arch}/faketime/libfaketime.so.1")))
        .find(|path| path.exists())
        .expect("libfaketime (Debian's faketime) is needed")
}

pub fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// A parsed HTTP response (bodies are small, and never chunked with Connection: close
/// except by axum's JSON, which sets Content-Length).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: String,
    /// The status line and headers.
    head: String,
}

impl Reply {
    /// The response in `raw`, if it holds a status line and headers.
    fn parse(raw: &[u8]) -> Option<Reply> {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text.split_once("\r\n\r\n")?;
        let status = head.split(' ').nth(1)?.parse().ok()?;
        let content_type = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-type")
                    .then(|| value.trim().to_string())
            })
            .unwrap_or_default();
        Some(Reply {
            status,
            content_type,
            body: body.to_string(),
            head: head.to_string(),
        })
    }

    /// The value of the header `name`, if the response has it.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }

    /// Whether `raw` holds the whole response: as many body bytes as Content-Length says.
    fn is_complete(&self, raw: &[u8]) -> bool {
        let text = String::from_utf8_lossy(raw);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return false;
        };
        head.lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .is_some_and(|length| body.len() >= length)
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {:?}", self.body))
    }

    /// The `error` message of a 4xx/5xx reply.
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_else(|| panic!("no error message: {:?}", self.body))
            .to_string()
    }

    /// The IDs of a 200 reply, checked to be strings holding canonical decimals.
    pub fn ids(&self) -> Vec<u64> {
        assert_eq!(self.status, 200, "{:?}", self.body);
        self.json()["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|id| {
                let text = id.as_str().expect("IDs travel as strings");
                text.parse().unwrap()
            })
            .collect()
    }
}
