//! A 3-member etcd cluster for the fault harness, each member in a network namespace of
//! its own (`ip netns`, so the harness runs as root). Members reach each other over a
//! veth pair per pair of members, and a member advertises one peer URL, its own address;
//! a link is cut, in one direction or both, by routing a member's packets for another into
//! a sink (a veth whose other end takes no frame addressed elsewhere), so the sender's
//! bytes vanish as they do in a partition, without iptables or tc. Clients reach a member
//! through a [`Proxy`] on loopback in front of its client port (a veth to the host). The
//! members themselves can be killed, restarted on their data, paused and resumed.

use std::fs::{self, File};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::proxy::Proxy;

pub struct Member {
    pub name: String,
    child: Option<Child>,
    data: PathBuf,
    log: PathBuf,
    namespace: String,
    client_address: String,
    peer_address: String,
    pub client: Proxy,
    initial_cluster: String,
}

pub struct Cluster {
    pub members: Vec<Member>,
    network: Network,
    dir: PathBuf,
}

/// Runs `ip` with `args`; a failure fails the harness with what `ip` said.
fn ip(args: &[&str]) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("cannot run ip (iproute2): {error}"));
    assert!(
        output.status.success(),
        "ip {}: {} (the fault harness makes network namespaces: it runs as root)",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

/// The namespaces, links and routes between the members.
///
/// Addresses, with `N` picked from the process id so that two runs side by side differ:
/// member `i` is `10.N.10.(i+1)` (on its loopback) towards the other members, and
/// `10.N.i.2` towards the host, which is `10.N.i.1`. In member `i`'s namespace, `p{j}` is
/// the link to member `j`, `host` the link to the host, and `sink` the veth that takes
/// what a cut drops.
struct Network {
    net: u32,
    namespaces: Vec<String>,
}

/// The MAC address every member's sink sends to: nobody's, so the frame is dropped.
const NOBODY: &str = "02:00:00:00:00:01";

impl Network {
    fn create(count: usize) -> Network {
        // Clusters of one process (tests run side by side) differ by their number.
        static CLUSTERS: AtomicU32 = AtomicU32::new(0);
        let cluster = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let net = 100 + (pid * 7 + cluster) % 150;
        let namespaces: Vec<String> = (0..count)
            .map(|i| format!("idgen-faults-{pid}-c{cluster}-m{i}"))
            .collect();
        let network = Network { net, namespaces };
        for (i, namespace) in network.namespaces.iter().enumerate() {
            let _ = Command::new("ip")
                .args(["netns", "del", namespace])
                .stderr(Stdio::null())
                .status();
            ip(&["netns", "add", namespace]);
            ip(&["-n", namespace, "link", "set", "lo", "up"]);
            let peer = format!("{}/32", network.peer_address(i));
            ip(&["-n", namespace, "addr", "add", &peer, "dev", "lo"]);
            let host_side = format!("idgf{}c{cluster}h{i}", pid % 100_000);
            ip(&[
                "link", "add", &host_side, "type", "veth", "peer", "name", "host", "netns",
                namespace,
            ]);
            let host_address = format!("10.{net}.{i}.1/30");
            ip(&["addr", "add", &host_address, "dev", &host_side]);
            ip(&["link", "set", &host_side, "up"]);
            let member_address = format!("{}/30", network.client_address(i));
            ip(&[
                "-n",
                namespace,
                "addr",
                "add",
                &member_address,
                "dev",
                "host",
            ]);
            ip(&["-n", namespace, "link", "set", "host", "up"]);
            ip(&[
                "-n", namespace, "link", "add", "sink", "type", "veth", "peer", "name", "sink-end",
            ]);
            ip(&["-n", namespace, "link", "set", "sink", "up"]);
            ip(&["-n", namespace, "link", "set", "sink-end", "up"]);
        }
        for i in 0..count {
            for j in i + 1..count {
                let (a, b) = (&network.namespaces[i], &network.namespaces[j]);
                let (to_b, to_a) = (format!("p{j}"), format!("p{i}"));
                ip(&[
                    "-n", a, "link", "add", &to_b, "type", "veth", "peer", "name", &to_a, "netns",
                    b,
                ]);
                ip(&["-n", a, "link", "set", &to_b, "up"]);
                ip(&["-n", b, "link", "set", &to_a, "up"]);
            }
        }
        for i in 0..count {
            for j in 0..count {
                if i != j {
                    let (namespace, to) = (&network.namespaces[i], network.peer_address(j));
                    ip(&[
                        "-n",
                        namespace,
                        "neigh",
                        "replace",
                        &to,
                        "lladdr",
                        NOBODY,
                        "dev",
                        "sink",
                        "nud",
                        "permanent",
                    ]);
                    network.restore(i, j);
                }
            }
        }
        network
    }

    fn peer_address(&self, i: usize) -> String {
        format!("10.{}.10.{}", self.net, i + 1)
    }

    fn client_address(&self, i: usize) -> String {
        format!("10.{}.{i}.2", self.net)
    }

    /// Whether a TCP connection from member `from`'s namespace to member `to`'s peer port
    /// opens within a second.
    fn reaches(&self, from: usize, to: usize) -> bool {
        let open = format!("exec 3<>/dev/tcp/{}/2380", self.peer_address(to));
        Command::new("ip")
            .args(["netns", "exec", &self.namespaces[from]])
            .args(["timeout", "1", "bash", "-c", &open])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Member `from`'s packets for member `to` go into the sink.
    fn drop(&self, from: usize, to: usize) {
        self.route(from, to, "sink");
    }

    /// Member `from`'s packets for member `to` go over their link again.
    fn restore(&self, from: usize, to: usize) {
        self.route(from, to, &format!("p{to}"));
    }

    fn route(&self, from: usize, to: usize, device: &str) {
        let (destination, source) = (
            format!("{}/32", self.peer_address(to)),
            self.peer_address(from),
        );
        ip(&[
            "-n",
            &self.namespaces[from],
            "route",
            "replace",
            &destination,
            "dev",
            device,
            "src",
            &source,
        ]);
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        // Deleting a namespace deletes its veths, and with them their other ends.
        for namespace in &self.namespaces {
            let _ = Command::new("ip")
                .args(["netns", "del", namespace])
                .status();
        }
    }
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
        format!("http://{}:2379", self.client_address)
    }

    fn spawn(&mut self) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.namespace, "etcd"])
            .arg(format!("--name={}", self.name))
            .arg(format!("--data-dir={}", self.data.display()))
            .arg(format!("--listen-client-urls={}", self.direct_endpoint()))
            .arg(format!("--advertise-client-urls={}", self.client.url()))
            .arg(format!(
                "--listen-peer-urls=http://{}:2380",
                self.peer_address
            ))
            .arg(format!(
                "--initial-advertise-peer-urls=http://{}:2380",
                self.peer_address
            ))
            .arg(format!("--initial-cluster={}", self.initial_cluster))
            .arg("--initial-cluster-token=idgen-faults")
            .arg("--initial-cluster-state=new")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start etcd (etcd-server): {error}"));
        // `ip netns exec` execs etcd in its own process, so this is etcd's pid.
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
        let network = Network::create(3);
        let mut members: Vec<Member> = (0..3)
            .map(|i| {
                let client_address = network.client_address(i);
                let client: SocketAddr = format!("{client_address}:2379").parse().unwrap();
                Member {
                    name: format!("m{i}"),
                    child: None,
                    data: dir.join(format!("m{i}")),
                    log: dir.join(format!("m{i}.log")),
                    namespace: network.namespaces[i].clone(),
                    client_address,
                    peer_address: network.peer_address(i),
                    client: Proxy::to(client),
                    initial_cluster: String::new(),
                }
            })
            .collect();
        let initial = members
            .iter()
            .map(|m| format!("{}=http://{}:2380", m.name, m.peer_address))
            .collect::<Vec<_>>()
            .join(",");
        for member in &mut members {
            member.initial_cluster = initial.clone();
            member.spawn();
        }
        let mut cluster = Cluster {
            members,
            network,
            dir,
        };
        assert!(
            cluster.wait_until_healthy(Duration::from_secs(60)),
            "the etcd cluster did not start; see {}",
            cluster.dir.display()
        );
        cluster
    }

    /// Cuts member `i` off from every other member, both ways.
    pub fn isolate(&self, i: usize) {
        for j in 0..self.members.len() {
            if j != i {
                self.cut_link(i, j);
            }
        }
    }

    /// Cuts the link between members `a` and `b`, both ways; each still reaches the third.
    pub fn cut_link(&self, a: usize, b: usize) {
        self.network.drop(a, b);
        self.network.drop(b, a);
    }

    /// Drops what member `from` sends to member `to`; what `to` sends still arrives.
    pub fn drop_one_way(&self, from: usize, to: usize) {
        self.network.drop(from, to);
    }

    /// Whether member `from` can open a connection to member `to`'s peer port.
    pub fn reaches(&self, from: usize, to: usize) -> bool {
        self.network.reaches(from, to)
    }

    /// Every link carries both ways again; waits (bounded) until every member is healthy.
    pub fn heal(&mut self) {
        let count = self.members.len();
        for i in 0..count {
            for j in 0..count {
                if i != j {
                    self.network.restore(i, j);
                }
            }
        }
        assert!(
            self.wait_until_healthy(Duration::from_secs(60)),
            "the cluster did not heal within 60 s; see {}",
            self.dir.display()
        );
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
