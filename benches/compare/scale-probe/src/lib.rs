//! What `scale.sh`'s two clients (`informer-scale`, `kube-rs-scale`) and its seeder share, std only:
//!
//! - measurements of the calling process from `/proc` ([`snap`]): CPU time, OS threads, `VmRSS`,
//!   `VmHWM`, socket fds and how many of them are ESTABLISHED TCP connections, and the network
//!   namespace's count of dropped connection attempts (`ListenDrops`; each one costs the client a
//!   SYN retransmit, 1 s on Linux);
//! - a minimal blocking HTTP/1.1 keep-alive client ([`Raw`]) that POSTs objects to the simulator, so
//!   seeding and the per-namespace update go through plain HTTP and not through either client under
//!   test;
//! - the timeline of one run ([`Timeline`]): every time is seconds since one `Instant` taken before
//!   the client is built; the poster records when it sent each update and the handlers when they
//!   saw it, so the lag depends neither on how often the main task polls nor on when the poster
//!   thread gets the CPU to read a response;
//! - the one JSON line each client prints ([`Report`]).
//!
//! Invariant: both clients call the same functions at the same points of a run (snapshot before the
//! client is built, at sync and after the fan-out), so their figures compare like for like.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// ConfigMaps per namespace that [`seed`] creates (and that a client checks it received).
pub const PER_NS: usize = 10;

/// Name of the ConfigMap [`create_extra`] adds to each namespace: the update a handler waits for.
pub const EXTRA: &str = "extra";

/// A `kB` field of /proc/self/status (`VmRSS:`, `VmHWM:`), in KiB; 0 if absent.
pub fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// OS threads of this process (entries in /proc/self/task).
pub fn threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// (socket fds of this process, of which ESTABLISHED TCP: state 01 in /proc/net/tcp{,6}).
pub fn sockets() -> (usize, usize) {
    let mut inodes = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        for e in dir.flatten() {
            if let Ok(link) = std::fs::read_link(e.path()) {
                let s = link.to_string_lossy().into_owned();
                if let Some(rest) = s.strip_prefix("socket:[") {
                    inodes.push(rest.trim_end_matches(']').to_string());
                }
            }
        }
    }
    let mut established = HashSet::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(f) {
            for line in text.lines().skip(1) {
                let cols: Vec<&str> = line.split_whitespace().collect();
                if cols.len() > 9 && cols[3] == "01" {
                    established.insert(cols[9].to_string());
                }
            }
        }
    }
    let est = inodes.iter().filter(|i| established.contains(*i)).count();
    (inodes.len(), est)
}

/// CPU seconds (user + system, all threads) of this process so far (/proc/self/stat, CLK_TCK 100).
pub fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, a)| a).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    // After the command: state is field 3; utime (14) and stime (15) are at indexes 11 and 12.
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (tick(11) + tick(12)) as f64 / 100.0
}

/// `TcpExt: ListenDrops` of this network namespace (/proc/net/netstat): connection attempts a
/// listener dropped, for instance because its accept queue was full. Counts every process in the
/// namespace, so a delta over one run is an upper bound for that run.
pub fn listen_drops() -> u64 {
    let text = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut lines = text.lines();
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if !names.starts_with("TcpExt:") {
            continue;
        }
        let names = names.split_whitespace();
        let values = values.split_whitespace();
        for (n, v) in names.zip(values) {
            if n == "ListenDrops" {
                return v.parse().unwrap_or(0);
            }
        }
    }
    0
}

/// One snapshot of this process.
pub struct Snap {
    pub cpu_s: f64,
    pub threads: usize,
    pub rss_kib: u64,
    pub hwm_kib: u64,
    pub socket_fds: usize,
    pub tcp_established: usize,
    pub listen_drops: u64,
}

/// Takes a [`Snap`] of this process now.
pub fn snap() -> Snap {
    let (socket_fds, tcp_established) = sockets();
    Snap {
        cpu_s: cpu_s(),
        threads: threads(),
        rss_kib: status_kib("VmRSS:"),
        hwm_kib: status_kib("VmHWM:"),
        socket_fds,
        tcp_established,
        listen_drops: listen_drops(),
    }
}

impl Snap {
    /// The snapshot as a JSON object.
    pub fn json(&self) -> String {
        format!(
            r#"{{"cpu_s":{:.2},"threads":{},"vmrss_kib":{},"vmhwm_kib":{},"socket_fds":{},"tcp_established":{},"listen_drops":{}}}"#,
            self.cpu_s,
            self.threads,
            self.rss_kib,
            self.hwm_kib,
            self.socket_fds,
            self.tcp_established,
            self.listen_drops
        )
    }
}

/// The clock of one run: seconds since `t0`, and when the handlers saw each namespace's [`EXTRA`].
///
/// Invariant: `seen_ns[i]` is the latest time (ns since `t0`) any handler saw namespace i's
/// [`EXTRA`], or 0 while none has.
pub struct Timeline {
    t0: Instant,
    seen_ns: Vec<AtomicU64>,
}

impl Timeline {
    /// Starts the clock for N namespaces.
    pub fn start(n: usize) -> Timeline {
        Timeline {
            t0: Instant::now(),
            seen_ns: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Seconds since the start.
    pub fn now_s(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    /// Seconds from the start to `t`.
    pub fn at_s(&self, t: Instant) -> f64 {
        t.duration_since(self.t0).as_secs_f64()
    }

    /// Called by a handler when it sees [`EXTRA`] in `namespace`: keeps the latest such time.
    pub fn saw_extra(&self, namespace: &str) {
        let ns = self.t0.elapsed().as_nanos() as u64;
        if let Some(slot) = ns_index(namespace).and_then(|i| self.seen_ns.get(i)) {
            slot.fetch_max(ns, Ordering::Relaxed);
        }
    }

    /// Seconds from the start to the last [`Timeline::saw_extra`] of any namespace.
    pub fn last_seen_s(&self) -> f64 {
        let max = self.seen_ns.iter().map(|s| s.load(Ordering::Relaxed));
        max.max().unwrap_or(0) as f64 / 1e9
    }

    /// For each namespace i, the time in seconds from sending its update (`sent[i]`) to the last
    /// handler that saw it.
    fn lags_s<'a>(&'a self, sent: &'a [Instant]) -> impl Iterator<Item = f64> + 'a {
        sent.iter()
            .zip(&self.seen_ns)
            .map(|(t, seen)| seen.load(Ordering::Relaxed) as f64 / 1e9 - self.at_s(*t))
    }

    /// The median over namespaces of the time, in seconds, from sending namespace i's update
    /// (`sent[i]`) to the last handler that saw it: what one update typically takes, where
    /// [`worst_lag_s`](Self::worst_lag_s) and the last update's lag are single samples from the
    /// tail (the server's and the machine's as much as the client's).
    pub fn median_lag_s(&self, sent: &[Instant]) -> f64 {
        let mut lags: Vec<f64> = self.lags_s(sent).collect();
        if lags.is_empty() {
            return 0.0;
        }
        lags.sort_by(|a, b| a.partial_cmp(b).unwrap());
        lags[lags.len() / 2]
    }

    /// The longest time, in seconds, from sending namespace i's update (`sent[i]`) to the last
    /// handler that saw it, and that i.
    pub fn worst_lag_s(&self, sent: &[Instant]) -> (f64, usize) {
        let lags = self.lags_s(sent);
        let worst = |w: (f64, usize), (i, lag): (usize, f64)| if lag > w.0 { (lag, i) } else { w };
        lags.enumerate().fold((0.0, 0), worst)
    }
}

/// p50/p90/p99/max of per-informer sync times, as a JSON object.
pub fn percentiles_json(mut per: Vec<f64>) -> String {
    if per.is_empty() {
        return "{}".to_string();
    }
    per.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| per[((per.len() - 1) as f64 * p).round() as usize];
    format!(
        r#"{{"p50":{:.4},"p90":{:.4},"p99":{:.4},"max":{:.4}}}"#,
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    )
}

/// The JSON line a client prints at the end of a run. Times are seconds since the timeline's start.
pub struct Report<'a> {
    /// `informer` or `kube-rs`.
    pub client: &'a str,
    pub n: usize,
    pub handlers: usize,
    /// All informers built and started (the start calls returned).
    pub setup_s: f64,
    /// Every handler (stream) synced.
    pub sync_s: f64,
    /// The poster sent its first update, sent its last one, and got the last response.
    pub post_start_s: f64,
    pub last_post_s: f64,
    pub post_end_s: f64,
    /// The last handler saw its namespace's update.
    pub last_seen_s: f64,
    /// The longest any one update took to reach the last of its namespace's handlers, and which
    /// namespace's update that was.
    pub worst_lag: (f64, usize),
    /// The median over namespaces of that time ([`Timeline::median_lag_s`]).
    pub median_lag_s: f64,
    /// Objects in the stores at the end.
    pub objects: usize,
    /// Handler callbacks (stream events) counted in total.
    pub events: u64,
    /// Errors the client reported (kube-rs: watcher errors; informer: `on_error` is not counted).
    pub errors: u64,
    /// Per-informer sync times.
    pub sync_pct: String,
    pub base: Snap,
    pub at_sync: Snap,
    pub end: Snap,
}

impl Report<'_> {
    /// The report as one JSON line; `lag_ms` is `last_seen_s - last_post_s`, `worst_lag_ms`
    /// `worst_lag.0`, `median_lag_ms` `median_lag_s`, in milliseconds.
    pub fn json(&self) -> String {
        format!(
            r#"{{"client":"{}","n":{},"handlers":{},"setup_s":{:.4},"sync_s":{:.4},"post_start_s":{:.4},"last_post_s":{:.4},"post_end_s":{:.4},"last_seen_s":{:.4},"lag_ms":{:.3},"median_lag_ms":{:.3},"worst_lag_ms":{:.3},"worst_lag_ns_index":{},"objects":{},"events":{},"errors":{},"sync_pct":{},"base":{},"at_sync":{},"end":{}}}"#,
            self.client,
            self.n,
            self.handlers,
            self.setup_s,
            self.sync_s,
            self.post_start_s,
            self.last_post_s,
            self.post_end_s,
            self.last_seen_s,
            (self.last_seen_s - self.last_post_s) * 1000.0,
            self.median_lag_s * 1000.0,
            self.worst_lag.0 * 1000.0,
            self.worst_lag.1,
            self.objects,
            self.events,
            self.errors,
            self.sync_pct,
            self.base.json(),
            self.at_sync.json(),
            self.end.json()
        )
    }
}

/// `http://host:port[/...]` -> `host:port`.
pub fn host_port(url: &str) -> String {
    let rest = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("only plain http:// URLs: {url}"));
    rest.split('/').next().unwrap().to_string()
}

/// A blocking HTTP/1.1 keep-alive connection to the simulator.
pub struct Raw {
    host: String,
    reader: BufReader<TcpStream>,
}

impl Raw {
    /// Connects to `http://host:port`.
    pub fn connect(url: &str) -> Raw {
        let host = host_port(url);
        let s = TcpStream::connect(&host).expect("connect to the simulator");
        s.set_nodelay(true).unwrap();
        Raw {
            host,
            reader: BufReader::new(s),
        }
    }

    /// POSTs `body` to `path` and reads the whole response; panics unless 2xx. Returns the status.
    pub fn post(&mut self, path: &str, body: &str) -> u16 {
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.host,
            body.len()
        );
        self.reader.get_mut().write_all(req.as_bytes()).unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let code: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut len: Option<usize> = None;
        let mut chunked = false;
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let lower = h.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().ok();
            } else if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            }
        }
        let mut body_bytes = Vec::new();
        if chunked {
            loop {
                let mut sz = String::new();
                self.reader.read_line(&mut sz).unwrap();
                let n = usize::from_str_radix(sz.trim().split(';').next().unwrap(), 16).unwrap();
                let mut chunk = vec![0u8; n + 2];
                self.reader.read_exact(&mut chunk).unwrap();
                if n == 0 {
                    break;
                }
                body_bytes.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(n) = len {
            body_bytes.resize(n, 0);
            self.reader.read_exact(&mut body_bytes).unwrap();
        }
        if !(200..300).contains(&code) {
            panic!(
                "POST {path}: {code}: {}",
                String::from_utf8_lossy(&body_bytes)
            );
        }
        code
    }
}

/// Name of the i-th namespace.
pub fn ns_name(i: usize) -> String {
    format!("ns-{i:05}")
}

/// i from the name of the i-th namespace.
pub fn ns_index(name: &str) -> Option<usize> {
    name.strip_prefix("ns-")?.parse().ok()
}

/// A ConfigMap of about 200 bytes.
pub fn configmap_body(name: &str, ns: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{ns}","labels":{{"app":"scale"}}}},"data":{{"key":"value-{name}","other":"some configuration text for {ns}/{name}"}}}}"#
    )
}

/// Creates the N namespaces with `per_ns` ConfigMaps each, on one connection.
pub fn seed(url: &str, n: usize, per_ns: usize) {
    let mut raw = Raw::connect(url);
    for i in 0..n {
        let ns = ns_name(i);
        raw.post(
            "/api/v1/namespaces",
            &format!(r#"{{"apiVersion":"v1","kind":"Namespace","metadata":{{"name":"{ns}"}}}}"#),
        );
        for j in 0..per_ns {
            let name = format!("cm-{j:02}");
            raw.post(
                &format!("/api/v1/namespaces/{ns}/configmaps"),
                &configmap_body(&name, &ns),
            );
        }
    }
}

/// Creates ConfigMap [`EXTRA`] in each of the N namespaces, in order, on one connection closed at
/// the end. Returns when each request began to be sent.
pub fn create_extra(url: &str, n: usize) -> Vec<Instant> {
    let mut raw = Raw::connect(url);
    let mut sent = Vec::with_capacity(n);
    for i in 0..n {
        let ns = ns_name(i);
        let (path, body) = (
            format!("/api/v1/namespaces/{ns}/configmaps"),
            configmap_body(EXTRA, &ns),
        );
        sent.push(Instant::now());
        raw.post(&path, &body);
    }
    sent
}

/// What [`post_extra_in_background`] reports: when each update began to be sent, and when the last
/// response had been read.
pub struct Posted {
    pub sent: Vec<Instant>,
    pub done: Instant,
}

/// Starts [`create_extra`] on a thread of its own (so it shares nothing with the client under
/// test).
pub fn post_extra_in_background(url: &str, n: usize) -> std::thread::JoinHandle<Posted> {
    let url = url.to_string();
    std::thread::spawn(move || {
        let sent = create_extra(&url, n);
        Posted {
            sent,
            done: Instant::now(),
        }
    })
}

/// The value after `--name` on the command line.
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}
