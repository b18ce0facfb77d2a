//! A TCP proxy on loopback that the fault harness controls: it forwards, or blackholes
//! every connection (held open, every byte dropped: what a partition looks like to the
//! sender), or answers every HTTP request itself with a 503 (an overloaded service, or a
//! load balancer with no backend).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

const FORWARD: u8 = 0;
const BLACKHOLE: u8 = 2;
const ANSWER_503: u8 = 4;
/// The proxy was dropped: the listener ends at its next connection.
const GONE: u8 = 3;

/// A proxy from a port of its own to `target`, until dropped (its threads then end with
/// their connections; the listener thread ends at the next connection attempt).
pub struct Proxy {
    port: u16,
    mode: Arc<AtomicU8>,
    /// Both ends of every open connection, by connection: a pump removes its own when the
    /// connection ends, so a long run holds no closed sockets.
    open: Arc<Mutex<HashMap<u64, [TcpStream; 2]>>>,
    /// Requests answered with a 503.
    answered_503: Arc<AtomicU64>,
}

impl Proxy {
    /// A proxy to `127.0.0.1:target_port`.
    pub fn start(target_port: u16) -> Proxy {
        Proxy::to(SocketAddr::from(([127, 0, 0, 1], target_port)))
    }

    /// A proxy on loopback to `target`.
    pub fn to(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mode = Arc::new(AtomicU8::new(FORWARD));
        let open = Arc::new(Mutex::new(HashMap::new()));
        let next_connection = AtomicU64::new(0);
        let answered_503 = Arc::new(AtomicU64::new(0));
        let (accept_mode, accept_open) = (Arc::clone(&mode), Arc::clone(&open));
        let accept_answered = Arc::clone(&answered_503);
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                match accept_mode.load(Ordering::SeqCst) {
                    GONE => return,
                    ANSWER_503 => {
                        let answered = Arc::clone(&accept_answered);
                        let mode = Arc::clone(&accept_mode);
                        thread::spawn(move || answer_503(client, &answered, &mode));
                        continue;
                    }
                    _ => {}
                }
                let Ok(server) = TcpStream::connect(target) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let connection = next_connection.fetch_add(1, Ordering::Relaxed);
                accept_open.lock().unwrap().insert(
                    connection,
                    [client.try_clone().unwrap(), server.try_clone().unwrap()],
                );
                for (from, to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let (mode, open) = (Arc::clone(&accept_mode), Arc::clone(&accept_open));
                    thread::spawn(move || {
                        pump(from, to, &mode);
                        open.lock().unwrap().remove(&connection);
                    });
                }
            }
        });
        Proxy {
            port,
            mode,
            open,
            answered_503,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Keeps connections open but drops every byte, both ways.
    pub fn blackhole(&self) {
        self.mode.store(BLACKHOLE, Ordering::SeqCst);
    }

    /// Answers every HTTP request on a new connection with a 503 and `Retry-After: 1`, and
    /// closes the connections open now (a kept-alive one would reach the target).
    pub fn answer_503(&self) {
        self.mode.store(ANSWER_503, Ordering::SeqCst);
        self.close_all();
    }

    /// How many requests the proxy has answered with a 503.
    pub fn answered_503(&self) -> u64 {
        self.answered_503.load(Ordering::SeqCst)
    }

    /// Forwards again. Connections that lived through a blackhole lost bytes mid-stream,
    /// so they are closed: the peers reconnect on clean ones.
    pub fn restore(&self) {
        if self.mode.swap(FORWARD, Ordering::SeqCst) == BLACKHOLE {
            self.close_all();
        }
    }

    fn close_all(&self) {
        for (_, ends) in self.open.lock().unwrap().drain() {
            for stream in ends {
                let _ = stream.shutdown(Shutdown::Both);
            }
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.mode.store(GONE, Ordering::SeqCst);
        self.close_all();
        // Wakes the listener so that it sees it is the last owner and ends.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, mode: &AtomicU8) {
    let mut buffer = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buffer) {
        if n == 0 {
            break;
        }
        match mode.load(Ordering::SeqCst) {
            FORWARD => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
            BLACKHOLE => {}
            _ => break,
        }
    }
    let _ = to.shutdown(Shutdown::Both);
    let _ = from.shutdown(Shutdown::Both);
}

/// Reads HTTP requests on `client` and answers each with a 503, until the client closes
/// the connection, sends something that is not a request with a known length, or the
/// proxy is told to do something else (the connection is then closed unanswered: the
/// client's next one is forwarded).
fn answer_503(mut client: TcpStream, answered: &AtomicU64, mode: &AtomicU8) {
    const BODY: &str = r#"{"error":"the test's proxy answers 503"}"#;
    // Short reads, so that a connection kept alive between requests is closed soon after
    // the proxy is told to forward again (the client then opens a forwarded one).
    let _ = client.set_read_timeout(Some(Duration::from_millis(20)));
    let mut received = Vec::new();
    loop {
        let Some(head_end) = received.windows(4).position(|w| w == b"\r\n\r\n") else {
            if !read_more(&mut client, &mut received, mode) {
                return;
            }
            continue;
        };
        let head = String::from_utf8_lossy(&received[..head_end]).to_ascii_lowercase();
        if head.contains("transfer-encoding:") {
            return;
        }
        let body_length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .and_then(|length| length.trim().parse().ok())
            .unwrap_or(0);
        while received.len() < head_end + 4 + body_length {
            if !read_more(&mut client, &mut received, mode) {
                return;
            }
        }
        received.drain(..head_end + 4 + body_length);
        if mode.load(Ordering::SeqCst) != ANSWER_503 {
            return;
        }
        let response = format!(
            "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{BODY}",
            BODY.len()
        );
        if client.write_all(response.as_bytes()).is_err() {
            return;
        }
        answered.fetch_add(1, Ordering::SeqCst);
    }
}

/// Reads what `client` sends next onto `received`; false once it has closed, failed, or
/// the proxy no longer answers 503s.
fn read_more(client: &mut TcpStream, received: &mut Vec<u8>, mode: &AtomicU8) -> bool {
    let mut buffer = [0u8; 4096];
    loop {
        match client.read(&mut buffer) {
            Ok(0) => return false,
            Ok(n) => {
                received.extend_from_slice(&buffer[..n]);
                return true;
            }
            Err(error)
                if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
                    && mode.load(Ordering::SeqCst) == ANSWER_503 => {}
            Err(_) => return false,
        }
    }
}
