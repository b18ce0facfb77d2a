//! A TCP proxy on loopback that the fault harness controls: it forwards, or blackholes
//! every connection (held open, every byte dropped: what a partition looks like to the
//! sender).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

const FORWARD: u8 = 0;
const BLACKHOLE: u8 = 2;
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
        let (accept_mode, accept_open) = (Arc::clone(&mode), Arc::clone(&open));
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if accept_mode.load(Ordering::SeqCst) == GONE {
                    return;
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
        Proxy { port, mode, open }
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
