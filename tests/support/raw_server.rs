//! Test support: real apiserver captures, and a tiny raw HTTP/1.1 server on 127.0.0.1 that replays
//! them byte for byte (or re-chunked), so the client is tested over real loopback HTTP.
#![allow(dead_code)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// `fixtures/NAME` at the repository's root (found from any crate of the workspace).
pub fn fixture(name: &str) -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .find(|dir| dir.join("fixtures").is_dir())
        .expect("a fixtures folder above the crate");
    let path = root.join("fixtures").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A captured HTTP response split into its parts.
#[derive(Clone, Debug)]
pub struct Capture {
    /// Status line and headers, without `Transfer-Encoding`/`Content-Length`, CRLF-separated.
    pub head: Vec<String>,
    pub status: u16,
    /// The body after de-chunking.
    pub body: Vec<u8>,
    /// The HTTP chunks as the server sent them (one element for a Content-Length body).
    pub chunks: Vec<Vec<u8>>,
}

pub fn capture(name: &str) -> Capture {
    let raw = fixture(name);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head_text = String::from_utf8(raw[..split].to_vec()).unwrap();
    let mut rest = &raw[split + 4..];
    let chunked = head_text
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let head: Vec<String> = head_text
        .split("\r\n")
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            !l.starts_with("transfer-encoding") && !l.starts_with("content-length")
        })
        .map(str::to_owned)
        .collect();
    let status = head[0].split(' ').nth(1).unwrap().parse().unwrap();
    let mut chunks = Vec::new();
    if chunked {
        loop {
            let eol = rest.windows(2).position(|w| w == b"\r\n").unwrap();
            let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap().trim(), 16)
                .unwrap();
            rest = &rest[eol + 2..];
            if size == 0 {
                break;
            }
            chunks.push(rest[..size].to_vec());
            rest = &rest[size + 2..];
        }
    } else {
        chunks.push(rest.to_vec());
    }
    let body = chunks.concat();
    Capture {
        head,
        status,
        body,
        chunks,
    }
}

/// How a reply's body is written.
#[derive(Clone, Debug)]
pub enum Body {
    /// Chunked, with exactly these chunks, then the terminating chunk.
    Chunks(Vec<Vec<u8>>),
    /// Chunked, these chunks, then the connection is closed with no terminating chunk.
    ChunksThenCut(Vec<Vec<u8>>),
    /// `Content-Length` body.
    Fixed(Vec<u8>),
    /// A `Content-Length` of `announced` bytes, only `sent` of them written, then silence on the
    /// open socket until the client goes away (a body that stalls).
    Stalled { announced: usize, sent: Vec<u8> },
    /// No answer at all: not even a status line, the socket held open until the client goes away.
    Silence,
    /// No answer at all: the connection closed as soon as the request is read (a load balancer
    /// or an apiserver going away).
    Closed,
    /// Chunked: each chunk written after its delay (on the tokio clock, so a paused clock runs
    /// it in virtual time), then no end: the connection stays open, silent, until the client
    /// closes it (a stuck stream, or one whose end never comes).
    Paced(Vec<(std::time::Duration, Vec<u8>)>),
}

#[derive(Clone, Debug)]
pub struct Reply {
    pub head: Vec<String>,
    pub body: Body,
}

impl Reply {
    pub fn from_capture(c: &Capture) -> Reply {
        Reply {
            head: c.head.clone(),
            body: Body::Chunks(c.chunks.clone()),
        }
    }

    /// The capture's body re-cut into chunks of `size` bytes.
    pub fn rechunked(c: &Capture, size: usize) -> Reply {
        Reply {
            head: c.head.clone(),
            body: Body::Chunks(c.body.chunks(size).map(<[u8]>::to_vec).collect()),
        }
    }

    pub fn json(status: u16, body: impl AsRef<[u8]>) -> Reply {
        Reply {
            head: vec![
                format!("HTTP/1.1 {status} {}", reason(status)),
                "Content-Type: application/json".into(),
            ],
            body: Body::Fixed(body.as_ref().to_vec()),
        }
    }

    pub fn with_header(mut self, h: &str) -> Reply {
        self.head.push(h.to_owned());
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        410 => "Gone",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        _ => "Whatever",
    }
}

/// A raw HTTP/1.1 server: for every request it calls `route(request_line)` and writes the reply,
/// then closes the connection. Records the request lines it saw.
pub struct RawServer {
    pub url: String,
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl RawServer {
    pub async fn start(route: impl Fn(&str) -> Reply + Send + Sync + 'static) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        let route = Arc::new(route);
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let route = route.clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut req = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => req.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&req).to_string();
                    let line = text.lines().next().unwrap_or("").to_owned();
                    seen.lock().unwrap().push(text.clone());
                    let reply = route(&line);
                    if matches!(reply.body, Body::Closed) {
                        return; // dropping the socket closes it
                    }
                    if matches!(reply.body, Body::Silence) {
                        let mut rest = [0u8; 1024];
                        while let Ok(n) = sock.read(&mut rest).await {
                            if n == 0 {
                                break;
                            }
                        }
                        return;
                    }
                    let mut out = reply.head.join("\r\n").into_bytes();
                    out.extend_from_slice(b"\r\nConnection: close\r\n");
                    let _ = match &reply.body {
                        Body::Fixed(b) => {
                            out.extend_from_slice(
                                format!("Content-Length: {}\r\n\r\n", b.len()).as_bytes(),
                            );
                            out.extend_from_slice(b);
                            sock.write_all(&out).await
                        }
                        Body::Stalled { announced, sent } => {
                            out.extend_from_slice(
                                format!("Content-Length: {announced}\r\n\r\n").as_bytes(),
                            );
                            out.extend_from_slice(sent);
                            if sock.write_all(&out).await.is_err() {
                                return;
                            }
                            // Silence until the client gives the connection up.
                            let mut rest = [0u8; 1024];
                            while let Ok(n) = sock.read(&mut rest).await {
                                if n == 0 {
                                    break;
                                }
                            }
                            Ok(())
                        }
                        Body::Silence | Body::Closed => Ok(()),
                        Body::Chunks(chunks) | Body::ChunksThenCut(chunks) => {
                            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                            if sock.write_all(&out).await.is_err() {
                                return;
                            }
                            for c in chunks {
                                let mut w = format!("{:x}\r\n", c.len()).into_bytes();
                                w.extend_from_slice(c);
                                w.extend_from_slice(b"\r\n");
                                if sock.write_all(&w).await.is_err() {
                                    return;
                                }
                                let _ = sock.flush().await;
                            }
                            if matches!(reply.body, Body::Chunks(_)) {
                                sock.write_all(b"0\r\n\r\n").await
                            } else {
                                Ok(())
                            }
                        }
                        Body::Paced(chunks) => {
                            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                            if sock.write_all(&out).await.is_err() {
                                return;
                            }
                            for (delay, c) in chunks {
                                tokio::time::sleep(*delay).await;
                                let mut w = format!("{:x}\r\n", c.len()).into_bytes();
                                w.extend_from_slice(c);
                                w.extend_from_slice(b"\r\n");
                                if sock.write_all(&w).await.is_err() {
                                    return;
                                }
                                let _ = sock.flush().await;
                            }
                            // Silent until the client goes away.
                            while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
                            Ok(())
                        }
                    };
                    let _ = sock.shutdown().await;
                });
            }
        });
        RawServer { url, requests }
    }

    pub fn client(&self) -> informer::Client {
        informer::Client::new(informer::Config::new(self.url.parse().unwrap())).unwrap()
    }

    pub fn request_lines(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.lines().next().unwrap_or("").to_owned())
            .collect()
    }
}
