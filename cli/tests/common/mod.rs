//! Starts the real `idgen` binary and talks HTTP/1.1 to it over a plain TCP socket, so a
//! test controls every byte (bad content types, oversized bodies, malformed JSON).

#![allow(dead_code)] // each test binary uses a different part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_idgen");

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
    let output = command.args(args).output().unwrap();
    (
        output.status,
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

/// The ID `idgen next` with `args` prints, retried for at most 10 s while its range is full
/// (a number held for a moment by another process on the host: default-directory numbers
/// are host-wide); any other failure fails the test.
pub fn next_id_once_free(args: &[&str], env: &[(&str, &Path)]) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
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
    pub worker: u64,
    /// Everything the service writes to stderr, once it has exited.
    log: Option<std::thread::JoinHandle<String>>,
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

    /// Starts `command`, an `idgen serve` that listens on a port it prints.
    pub fn start_in(command: &mut Command) -> Service {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Drained all along (a full pipe would block the service), kept for a failed start.
        let stderr = child.stderr.take().unwrap();
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = BufReader::new(stderr).read_to_string(&mut text);
            text
        });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "idgen: listening on http://127.0.0.1:PORT as worker W of datacenter D"
        let Some(rest) = line.strip_prefix("idgen: listening on http://") else {
            let status = child.wait();
            let errors = errors.join().unwrap_or_default();
            panic!(
                "unexpected first line: {line:?}; the service ended ({status:?}) saying:\n{errors}"
            );
        };
        let mut words = rest.split_whitespace();
        let address = words.next().unwrap().parse().unwrap();
        let worker = words.nth(2).unwrap().parse().unwrap();
        Service {
            child,
            address,
            worker,
            log: Some(errors),
        }
    }

    pub fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], b"")
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
        let mut stream = TcpStream::connect(self.address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        for (name, value) in headers {
            head += &format!("{name}: {value}\r\n");
        }
        head += "\r\n";
        stream.write_all(head.as_bytes()).unwrap();
        // A server may answer (413) before reading all of a large body and close: a failed
        // write is fine as long as a whole response comes back.
        let _ = stream.write_all(body);
        let mut raw = Vec::new();
        let read = stream.read_to_end(&mut raw);
        let reply = Reply::parse(&raw);
        if let Err(error) = read {
            // A reset right after a complete response (unread request bytes) is the only
            // read error accepted.
            assert!(
                reply.is_complete(&raw),
                "reading the response failed ({error}) after {raw:?}"
            );
        }
        reply
    }

    /// Sends SIGTERM and waits for the exit.
    pub fn terminate(self) -> ExitStatus {
        signal(self.child.id(), "TERM");
        self.wait_for_exit()
    }

    /// Waits (at most 10 s) for the process to exit on its own.
    pub fn wait_for_exit(mut self) -> ExitStatus {
        self.exit_status()
    }

    /// Sends SIGTERM, waits for the exit, and returns it with all the service wrote to
    /// stderr.
    pub fn terminate_with_log(mut self) -> (ExitStatus, String) {
        signal(self.child.id(), "TERM");
        let status = self.exit_status();
        let log = self.log.take().unwrap().join().unwrap();
        (status, log)
    }

    fn exit_status(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "did not exit within 10 s");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
    fn parse(raw: &[u8]) -> Reply {
        let text = String::from_utf8_lossy(raw);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no response: {text:?}"));
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let content_type = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-type")
                    .then(|| value.trim().to_string())
            })
            .unwrap_or_default();
        Reply {
            status,
            content_type,
            body: body.to_string(),
            head: head.to_string(),
        }
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
