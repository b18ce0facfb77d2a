//! A 3-member etcd cluster on loopback for the fault harness. Each member's client port
//! and peer port sit behind a [`Proxy`]: clients reach a member through its client proxy,
//! and peers through the peer URL it advertises, its peer proxy. Cutting a member's peer
//! proxy silences it towards the others (raft streams are dialled by the receiver), which
//! is how the harness partitions a leader from the majority without root; the members
//! themselves can be killed, restarted on their data, paused and resumed.

use std::fs::{self, File};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::proxy::Proxy;

pub struct Member {
    pub name: String,
    child: Option<Child>,
    data: PathBuf,
    log: PathBuf,
    client_port: u16,
    peer_port: u16,
    pub client: Proxy,
    pub peer: Proxy,
    initial_cluster: String,
}

pub struct Cluster {
    pub members: Vec<Member>,
    dir: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn etcdctl() -> Command {
    let mut command = Command::new("etcdctl");
    command
        .env("ETCDCTL_API", "3")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    command
}

impl Member {
    /// The member's own client URL, past its proxy.
    pub fn direct_endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn spawn(&mut self) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new("etcd")
            .arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.data.display()))
            .arg(format!(
                "--listen-client-urls=http://127.0.0.1:{}",
                self.client_port
            ))
            .arg(format!("--advertise-client-urls={}", self.client.url()))
            .arg(format!(
                "--listen-peer-urls=http://127.0.0.1:{}",
                self.peer_port
            ))
            .arg(format!("--initial-advertise-peer-urls={}", self.peer.url()))
            .arg(format!("--initial-cluster={}", self.initial_cluster))
            .arg("--initial-cluster-token=idgen-faults")
            .arg("--initial-cluster-state=new")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start etcd (etcd-server): {error}"));
        self.child = Some(child);
    }

    /// Whether this member answers its health check (it is part of a quorum).
    pub fn healthy(&self) -> bool {
        etcdctl()
            .arg(format!("--endpoints={}", self.direct_endpoint()))
            .args(["endpoint", "health", "--command-timeout=1s"])
            .status()
            .is_ok_and(|status| status.success())
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| child.try_wait().ok().flatten().is_none())
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("member running").id()
    }
}

impl Cluster {
    /// Starts three members and waits (bounded) until each answers its health check.
    pub fn start(name: &str) -> Cluster {
        let dir = std::env::temp_dir().join(format!("idgen-faults-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for attempt in 0..5 {
            let mut members: Vec<Member> = (0..3)
                .map(|i| {
                    let (client_port, peer_port) = (free_port(), free_port());
                    Member {
                        name: format!("m{i}"),
                        child: None,
                        data: dir.join(format!("m{i}-{attempt}")),
                        log: dir.join(format!("m{i}.log")),
                        client_port,
                        peer_port,
                        client: Proxy::start(client_port),
                        peer: Proxy::start(peer_port),
                        initial_cluster: String::new(),
                    }
                })
                .collect();
            let initial = members
                .iter()
                .map(|m| format!("{}={}", m.name, m.peer.url()))
                .collect::<Vec<_>>()
                .join(",");
            for member in &mut members {
                member.initial_cluster = initial.clone();
                member.spawn();
            }
            let mut cluster = Cluster {
                members,
                dir: dir.clone(),
            };
            if cluster.wait_until_healthy(Duration::from_secs(60)) {
                return cluster;
            }
            // A port taken by a neighbour between asking and binding: try new ones.
            for member in &mut cluster.members {
                if let Some(mut child) = member.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            std::mem::forget(cluster);
        }
        panic!("the etcd cluster did not start; see {}", dir.display());
    }

    /// Waits until every running member is healthy; `false` if a member exited or the
    /// bound passed.
    pub fn wait_until_healthy(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let mut all = true;
            for member in &mut self.members {
                if member.child.is_none() {
                    continue;
                }
                if !member.is_running() {
                    return false;
                }
                all &= member.healthy();
            }
            if all {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The client URLs holders use: the three client proxies.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client.url()).collect()
    }

    /// The client ports of the proxies, for a holder's own proxies in front of them.
    pub fn client_proxy_ports(&self) -> Vec<u16> {
        self.members.iter().map(|m| m.client.port()).collect()
    }

    /// The index of the member the running members agree leads, waiting (bounded) for one.
    pub fn leader(&mut self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(leader) = self.current_leader() {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "no leader within 30 s; see {}",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn current_leader(&mut self) -> Option<usize> {
        let mut ids = Vec::new();
        let mut leaders = Vec::new();
        for (i, member) in self.members.iter_mut().enumerate() {
            if !member.is_running() {
                continue;
            }
            let output = etcdctl()
                .arg(format!("--endpoints={}", member.direct_endpoint()))
                .args(["endpoint", "status", "-w", "json", "--command-timeout=1s"])
                .output()
                .ok()?;
            if !output.status.success() {
                continue;
            }
            let status: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
            let status = &status[0]["Status"];
            ids.push((i, status["header"]["member_id"].as_u64()?));
            leaders.push(status["leader"].as_u64()?);
        }
        let leader = *leaders.first()?;
        if leader == 0 || leaders.iter().any(|&l| l != leader) {
            return None;
        }
        ids.iter().find(|(_, id)| *id == leader).map(|(i, _)| *i)
    }

    /// A member that does not lead.
    pub fn follower(&mut self) -> usize {
        let leader = self.leader();
        (leader + 1) % self.members.len()
    }

    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts a killed member again on its data, and waits until the cluster is healthy.
    pub fn restart(&mut self, i: usize) {
        self.members[i].spawn();
        assert!(
            self.wait_until_healthy(Duration::from_secs(60)),
            "member {i} did not rejoin; see {}",
            self.dir.display()
        );
    }

    pub fn signal(&self, i: usize, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.members[i].pid().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            if let Some(mut child) = member.child.take() {
                let _ = Command::new("kill")
                    .arg("-CONT")
                    .arg(child.id().to_string())
                    .status();
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        // IDGEN_FAULT_KEEP keeps the members' logs and data for a look after a run.
        if std::env::var_os("IDGEN_FAULT_KEEP").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("the cluster's logs and data: {}", self.dir.display());
        }
    }
}
