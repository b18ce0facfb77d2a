//! A private etcd server on loopback for tests that stop, kill or restore it; shared by
//! the library's lease tests and the command's restore tests.

use std::fs::{self, File};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on loopback (free when asked; good enough for a test server).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A private etcd server with a temporary data dir. Killed on drop.
pub struct EtcdServer {
    pub child: Child,
    pub endpoint: String,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
    /// Data dirs made so far (a restore makes a new one).
    generation: u32,
}

impl EtcdServer {
    pub fn start(name: &str) -> EtcdServer {
        let dir = std::env::temp_dir().join(format!("idgen-etcd-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        // A port free when asked may be taken by a neighbour before etcd binds it: then
        // etcd exits, and another pair is tried.
        for attempt in 0.. {
            let (client_port, peer_port) = (free_port(), free_port());
            let data = dir.join(format!("data-0-{attempt}"));
            let mut server = EtcdServer {
                child: spawn(&dir, &data, client_port, peer_port),
                endpoint: format!("http://127.0.0.1:{client_port}"),
                dir: dir.clone(),
                client_port,
                peer_port,
                generation: 0,
            };
            if server.wait_until_serving() {
                return server;
            }
            assert!(
                attempt < 5,
                "etcd exited at every start; see {}",
                dir.display()
            );
            let _ = fs::remove_dir_all(&data);
            // Not dropped: that would remove the directory with the log.
            let _ = server.child.wait();
            std::mem::forget(server);
        }
        unreachable!()
    }

    /// Sends a signal (`STOP`, `CONT`, ...) to the server.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// `etcdctl snapshot save`: etcd's backup, into a file of the server's directory.
    pub fn snapshot(&self, name: &str) -> PathBuf {
        let path = self.dir.join(name);
        let status = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint))
            .args(["snapshot", "save"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("etcdctl (Debian's etcd-client) is needed");
        assert!(status.success(), "snapshot save failed");
        path
    }

    /// etcd's documented disaster recovery: the server is stopped (killed), the snapshot
    /// restored into a new data dir with `etcdctl snapshot restore`, and the server started
    /// on it at the same address.
    pub fn restore(&mut self, snapshot: &Path) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.generation += 1;
        let data = self.dir.join(format!("data-{}", self.generation));
        let peer_url = format!("http://127.0.0.1:{}", self.peer_port);
        let status = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "restore"])
            .arg(snapshot)
            .arg(format!("--data-dir={}", data.display()))
            .arg("--name=idgen-test")
            .arg(format!("--initial-cluster=idgen-test={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("etcdctl (Debian's etcd-client) is needed");
        assert!(status.success(), "snapshot restore failed");
        self.child = spawn(&self.dir, &data, self.client_port, self.peer_port);
        assert!(self.wait_until_serving(), "etcd exited after the restore");
    }

    /// Waits (bounded) until etcd answers; `false` if it exited first (a port taken).
    fn wait_until_serving(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let healthy = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .arg(format!("--endpoints={}", self.endpoint))
                .args(["endpoint", "health", "--command-timeout=1s"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if healthy {
                return true;
            }
            if self.child.try_wait().ok().flatten().is_some() {
                return false;
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not start on {}",
                self.endpoint
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn spawn(dir: &Path, data: &Path, client_port: u16, peer_port: u16) -> Child {
    let endpoint = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let log = File::options()
        .create(true)
        .append(true)
        .open(dir.join("etcd.log"))
        .unwrap();
    Command::new("etcd")
        .arg("--name=idgen-test")
        .arg(format!("--data-dir={}", data.display()))
        .arg(format!("--listen-client-urls={endpoint}"))
        .arg(format!("--advertise-client-urls={endpoint}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster=idgen-test={peer_url}"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start etcd (is etcd-server installed?): {error}"))
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.signal("CONT");
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
