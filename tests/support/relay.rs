//! A TCP relay per replica in front of the simulator, for tests on a paused clock: it can delay
//! every chunk (a request may then reach the server after its sender gave up on it), hold
//! everything until it heals (a silent partition) or refuse (a partition that resets).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::sleep;

/// What a relay does with the bytes it carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Link {
    Up,
    /// Every chunk, either way, waits this long.
    Delay(Duration),
    /// Nothing gets through; connections stay open and what was sent is delivered after the
    /// partition heals, as TCP retransmits it (bytes are never lost inside a connection).
    Blackhole,
    /// New connections are closed at once, open ones at their next chunk.
    Refuse,
}

/// A TCP relay in front of the simulator, one per elector.
pub struct Relay {
    pub addr: SocketAddr,
    link: Arc<Mutex<Link>>,
}

impl Relay {
    pub async fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let link = Arc::new(Mutex::new(Link::Up));
        let shared = link.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = listener.accept().await {
                if *shared.lock().unwrap() == Link::Refuse {
                    continue;
                }
                let Ok(up) = TcpStream::connect(upstream).await else {
                    continue;
                };
                // No Nagle: a write held for a delayed ACK (real time) would let virtual time run
                // ahead of the bytes.
                let _ = (down.set_nodelay(true), up.set_nodelay(true));
                let (down_r, down_w) = down.into_split();
                let (up_r, up_w) = up.into_split();
                tokio::spawn(pump(down_r, up_w, shared.clone()));
                tokio::spawn(pump(up_r, down_w, shared.clone()));
            }
        });
        Relay { addr, link }
    }

    pub fn set(&self, link: Link) {
        *self.link.lock().unwrap() = link;
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    link: Arc<Mutex<Link>>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut now = *link.lock().unwrap();
        while now == Link::Blackhole {
            sleep(Duration::from_millis(100)).await;
            now = *link.lock().unwrap();
        }
        match now {
            Link::Up | Link::Blackhole => {}
            Link::Delay(d) => sleep(d).await,
            Link::Refuse => return,
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
