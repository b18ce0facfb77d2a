//! A PostgreSQL server for tests: the shared one `.ci/test` starts, and private ones on
//! loopback for tests that restart, stop, dump, restore or fail them over.

#![allow(dead_code)] // each test binary uses some of these

use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The shared PostgreSQL server `.ci/test` starts.
pub fn postgres_url() -> String {
    std::env::var("IDGEN_POSTGRES_URL").expect(
        "IDGEN_POSTGRES_URL is not set: run the tests through .ci/test, which starts PostgreSQL",
    )
}

/// A private PostgreSQL server on loopback in a temporary directory, for tests that
/// restart it; stopped and removed on drop. As root it runs as the `postgres` user (the
/// server refuses root).
pub struct PostgresServer {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    env: Vec<(String, String)>,
}

impl PostgresServer {
    pub fn start(name: &str) -> PostgresServer {
        PostgresServer::start_with(name, &[])
    }

    /// [`PostgresServer::start`] with `env` set for the server's processes (libfaketime's,
    /// say).
    pub fn start_with(name: &str, env: &[(&str, &str)]) -> PostgresServer {
        let server = PostgresServer::prepare(name, env);
        server.run(
            "initdb",
            &["-D", &server.data(), "-A", "trust", "-U", "postgres"],
        );
        server.pg_ctl("start");
        server
    }

    /// A server's directory and port, nothing started: `dir` is `dir/data`'s parent.
    fn prepare(name: &str, env: &[(&str, &str)]) -> PostgresServer {
        let bin = postgres_bin();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir =
            std::env::temp_dir().join(format!("idgen-pg-{name}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let env = env
            .iter()
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .collect();
        let server = PostgresServer {
            dir,
            bin,
            port,
            env,
        };
        if is_root() {
            let status = Command::new("chown")
                .arg("postgres:")
                .arg(&server.dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
        server
    }

    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// `pg_ctl restart -m fast`: clients are disconnected, the server is back when it returns.
    pub fn restart_fast(&self) {
        self.pg_ctl("restart");
    }

    /// `pg_ctl restart -m immediate`: the server crashes (no checkpoint, clients cut off)
    /// and recovers from its WAL.
    pub fn restart_immediate(&self) {
        self.pg_ctl_mode("restart", "immediate");
    }

    /// Sends `signal` (`STOP`, `CONT`) to every process of the server: the postmaster and
    /// its backends, so that no connection is answered.
    pub fn signal_all(&self, signal: &str) {
        let pid_file = fs::read_to_string(self.dir.join("data/postmaster.pid")).unwrap();
        let postmaster = pid_file.lines().next().unwrap().trim().to_string();
        let children = Command::new("pgrep")
            .args(["-P", &postmaster])
            .output()
            .unwrap();
        let mut pids = vec![postmaster];
        pids.extend(
            String::from_utf8_lossy(&children.stdout)
                .split_whitespace()
                .map(str::to_string),
        );
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .args(&pids)
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {pids:?}");
    }

    /// A hot standby of `primary`: a base backup taken through `via` (a port that leads to
    /// the primary: a proxy the test can cut), streaming from it asynchronously.
    pub fn standby_of(via: u16, name: &str) -> PostgresServer {
        let standby = PostgresServer::prepare(name, &[]);
        let port = via.to_string();
        standby.run(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                &standby.data(),
                "-R",
                "-X",
                "stream",
            ],
        );
        standby.pg_ctl("start");
        standby
    }

    /// `pg_basebackup -X stream -c fast` of this server into a directory of its own, kept
    /// for [`PostgresServer::restore_base_backup`].
    pub fn base_backup(&self, name: &str) -> PathBuf {
        let backup = self.dir.join(name);
        let port = self.port.to_string();
        let path = backup.display().to_string();
        self.run(
            "pg_basebackup",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-D",
                &path,
                "-X",
                "stream",
                "-c",
                "fast",
            ],
        );
        backup
    }

    /// The server stopped at once (`-m immediate`), its data directory replaced by a copy
    /// of `backup`, and started as it is: no `recovery.signal`, so PostgreSQL runs crash
    /// recovery and stays on the same timeline, with the same system identifier (what an
    /// operator restoring a base backup, or a disk snapshot, by hand does).
    pub fn restore_base_backup(&self, backup: &Path) {
        self.stop_immediate();
        let data = self.dir.join("data");
        fs::remove_dir_all(&data).unwrap();
        let status = Command::new("cp")
            .args(["-a"])
            .arg(backup)
            .arg(&data)
            .status()
            .unwrap();
        assert!(status.success(), "cp -a {}", backup.display());
        self.pg_ctl("start");
    }

    /// `pg_ctl promote`: the standby ends recovery and takes writes, on a new timeline.
    pub fn promote(&self) {
        self.pg_ctl("promote");
    }

    /// `pg_ctl stop -m immediate`: the server is gone at once, as a machine lost.
    pub fn stop_immediate(&self) {
        self.pg_ctl_mode("stop", "immediate");
    }

    /// `pg_dump` of `tables` as SQL that drops and creates them again (`--clean`), as a
    /// table is restored from a backup.
    pub fn dump(&self, tables: &[&str], name: &str) -> PathBuf {
        let path = self.dir.join(name);
        let mut args = vec![
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "--clean",
            "--if-exists",
        ];
        let port = self.port.to_string();
        args.extend(["-p", port.as_str()]);
        for table in tables {
            args.extend(["-t", table]);
        }
        let path_text = path.display().to_string();
        args.extend(["-f", path_text.as_str(), "postgres"]);
        self.run("pg_dump", &args);
        path
    }

    /// Runs the SQL file `path` with `psql`, stopping at the first error.
    pub fn run_sql_file(&self, path: &Path) {
        let port = self.port.to_string();
        let path = path.display().to_string();
        self.run(
            "psql",
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-v",
                "ON_ERROR_STOP=1",
                "-q",
                "-f",
                &path,
                "postgres",
            ],
        );
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn pg_ctl(&self, action: &str) {
        self.pg_ctl_mode(action, "fast");
    }

    fn pg_ctl_mode(&self, action: &str, mode: &str) {
        let options = format!("-k {} -p {} -h 127.0.0.1", self.dir.display(), self.port);
        let log = self.dir.join("log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data(),
                "-o",
                &options,
                "-l",
                &log,
                "-m",
                mode,
                "-w",
                // pg_ctl waits 60 s by default: crash recovery on a machine starved of the
                // CPU took longer once. A bound on a hang, not a speed the tests expect.
                "-t",
                "300",
                action,
            ],
        );
    }

    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let mut command = if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&program);
            command
        } else {
            Command::new(&program)
        };
        // runuser keeps the environment: the server started by pg_ctl inherits it.
        let output = command
            .args(args)
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
        assert!(
            output.status.success(),
            "{} {args:?} failed: {}{}",
            program.display(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let _ = Command::new(if is_root() { "runuser" } else { "env" })
            .args(if is_root() {
                vec!["-u", "postgres", "--"]
            } else {
                vec![]
            })
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` with an `initdb` (Debian's layout).
fn postgres_bin() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir(root)
        .unwrap_or_else(|error| panic!("no PostgreSQL under {}: {error}", root.display()))
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .unwrap_or_else(|| panic!("no initdb under {}", root.display()))
        .1
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0")
}

/// A TCP proxy on loopback to `target` that the test can cut: every connection through it
/// is closed, with whatever it carried, and new ones are refused.
pub struct CuttableProxy {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    streams: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl CuttableProxy {
    pub fn start(target: u16) -> CuttableProxy {
        use std::sync::atomic::Ordering;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = CuttableProxy {
            port,
            cut: Default::default(),
            streams: Default::default(),
        };
        let (cut, streams) = (proxy.cut.clone(), proxy.streams.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                if cut.load(Ordering::SeqCst) {
                    continue; // dropped: refused
                }
                let Ok(server) = std::net::TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let mut kept = streams.lock().unwrap();
                kept.push(client.try_clone().unwrap());
                kept.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        proxy
    }

    /// Closes every connection through the proxy, and refuses new ones from now on.
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}
