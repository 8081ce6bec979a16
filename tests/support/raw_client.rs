//! Shared helpers for the simulator tests: a raw HTTP/1.1 client over `TcpStream`, so status
//! lines, headers and chunk framing are visible byte for byte.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Generous per-operation bound: the machine is loaded, tests must not be timing-flaky.
pub const T: Duration = Duration::from_secs(20);

/// A response head plus a reader positioned at the body.
pub struct Conn {
    reader: BufReader<TcpStream>,
    pub status: u16,
    pub headers: Vec<(String, String)>,
    chunked: bool,
    content_length: Option<usize>,
    decoded: Vec<u8>,
    /// Sizes of the chunks received so far (chunked bodies).
    pub chunk_sizes: Vec<usize>,
    /// True once the terminating `0` chunk (or the full Content-Length) was read.
    pub ended: bool,
}

impl Conn {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Opens a connection and sends one request.
    pub async fn open(
        addr: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Conn {
        let mut s = timeout(T, TcpStream::connect(addr))
            .await
            .expect("connect timeout")
            .expect("connect");
        let mut req =
            format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: sim-test\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(b) = body {
            req.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        req.push_str("Connection: close\r\n\r\n");
        let mut bytes = req.into_bytes();
        if let Some(b) = body {
            bytes.extend_from_slice(b);
        }
        s.write_all(&bytes).await.unwrap();
        let mut reader = BufReader::new(s);
        let mut line = String::new();
        timeout(T, reader.read_line(&mut line))
            .await
            .expect("status line timeout")
            .unwrap();
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            timeout(T, reader.read_line(&mut l))
                .await
                .expect("header timeout")
                .unwrap();
            let l = l.trim_end();
            if l.is_empty() {
                break;
            }
            let (k, v) = l.split_once(':').expect("header line");
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
        let mut c = Conn {
            reader,
            status,
            headers,
            chunked: false,
            content_length: None,
            decoded: Vec::new(),
            chunk_sizes: Vec::new(),
            ended: false,
        };
        c.chunked = c
            .header("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        c.content_length = c.header("content-length").and_then(|v| v.parse().ok());
        if c.content_length == Some(0) {
            c.ended = true;
        }
        c
    }

    /// Reads one more piece of body. Ok(false) at a clean end; Err on an unclean end (EOF/reset
    /// before the terminating chunk).
    async fn fill(&mut self) -> Result<bool, String> {
        if self.ended {
            return Ok(false);
        }
        if !self.chunked {
            let mut buf = vec![0u8; 65536];
            let n = self
                .reader
                .read(&mut buf)
                .await
                .map_err(|e| e.to_string())?;
            if n == 0 {
                self.ended = true;
                return match self.content_length {
                    Some(l) if self.decoded.len() < l => Err("eof before content-length".into()),
                    _ => Ok(false),
                };
            }
            self.decoded.extend_from_slice(&buf[..n]);
            if self.content_length.is_some_and(|l| self.decoded.len() >= l) {
                self.ended = true;
            }
            return Ok(true);
        }
        let mut size_line = String::new();
        let n = self
            .reader
            .read_line(&mut size_line)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 || !size_line.ends_with("\r\n") {
            return Err(format!("unexpected EOF in chunk header {size_line:?}"));
        }
        let size = usize::from_str_radix(size_line.trim(), 16)
            .map_err(|_| format!("bad chunk size {size_line:?}"))?;
        if size == 0 {
            let mut crlf = String::new();
            self.reader
                .read_line(&mut crlf)
                .await
                .map_err(|e| e.to_string())?;
            self.ended = true;
            return Ok(false);
        }
        let mut data = vec![0u8; size + 2];
        self.reader
            .read_exact(&mut data)
            .await
            .map_err(|e| format!("unexpected EOF in chunk: {e}"))?;
        if &data[size..] != b"\r\n" {
            return Err("chunk not followed by CRLF".into());
        }
        data.truncate(size);
        self.chunk_sizes.push(size);
        self.decoded.extend_from_slice(&data);
        Ok(true)
    }

    /// The whole body; panics on an unclean end.
    pub async fn body(&mut self) -> Vec<u8> {
        loop {
            match timeout(T, self.fill()).await.expect("body timeout") {
                Ok(true) => {}
                Ok(false) => return std::mem::take(&mut self.decoded),
                Err(e) => panic!("body ended uncleanly: {e}"),
            }
        }
    }

    /// The whole body as JSON.
    pub async fn json(&mut self) -> Value {
        let b = self.body().await;
        serde_json::from_slice(&b)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&b)))
    }

    /// Reads until the stream ends. Returns (bytes, clean end).
    pub async fn drain(&mut self) -> (Vec<u8>, bool) {
        loop {
            match timeout(T, self.fill()).await.expect("drain timeout") {
                Ok(true) => {}
                Ok(false) => return (std::mem::take(&mut self.decoded), true),
                Err(_) => return (std::mem::take(&mut self.decoded), false),
            }
        }
    }

    /// The next newline-terminated watch event; None at a clean end. Panics on timeout or an
    /// unclean end.
    pub async fn event(&mut self) -> Option<Value> {
        self.event_within(T).await.expect("event timeout")
    }

    /// Like [`event`](Self::event) but returns Err(()) on timeout.
    pub async fn event_within(&mut self, d: Duration) -> Result<Option<Value>, ()> {
        let deadline = tokio::time::Instant::now() + d;
        loop {
            if let Some(pos) = self.decoded.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.decoded.drain(..=pos).collect();
                let v = serde_json::from_slice(&line[..line.len() - 1]).unwrap_or_else(|e| {
                    panic!("bad frame ({e}): {}", String::from_utf8_lossy(&line))
                });
                return Ok(Some(v));
            }
            match tokio::time::timeout_at(deadline, self.fill()).await {
                Err(_) => return Err(()),
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => {
                    assert!(
                        self.decoded.is_empty(),
                        "trailing bytes: {:?}",
                        String::from_utf8_lossy(&self.decoded)
                    );
                    return Ok(None);
                }
                Ok(Err(e)) => panic!("stream ended uncleanly: {e}"),
            }
        }
    }
}

/// GET `path` and return (status, JSON body).
pub async fn get_json(addr: SocketAddr, path: &str) -> (u16, Value) {
    let mut c = Conn::open(addr, "GET", path, &[], None).await;
    let v = c.json().await;
    (c.status, v)
}

/// A request with a JSON body; returns (status, JSON body).
pub async fn send_json(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Value) {
    let b = serde_json::to_vec(body).unwrap();
    let mut c = Conn::open(
        addr,
        method,
        path,
        &[("Content-Type", content_type)],
        Some(&b),
    )
    .await;
    let v = c.json().await;
    (c.status, v)
}

/// `(type, name, resourceVersion)` of a watch event.
pub fn ev(v: &Value) -> (String, String, String) {
    (
        v["type"].as_str().unwrap_or("").to_string(),
        v["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        v["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

/// A minimal pod.
pub fn pod(name: &str, labels: Value) -> Value {
    serde_json::json!({"metadata": {"name": name, "labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}
