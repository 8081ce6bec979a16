//! Never hang (issue #15 item 1): a server that accepts and never answers, a watch whose
//! connection goes silent after its headers, and a pooled connection that died while idle. Each
//! runs over real loopback TCP (a silent listener, or a relay in front of the simulator that can
//! freeze its connections like a network partition) on a paused tokio clock, so the 45 s and 60 s
//! limits pass in virtual time and nothing depends on the machine's speed.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informer::fifo::DeltaFifo;
use informer::reflector::{BOOKMARK_SILENCE, Reflector, ReflectorOptions};
use informer::store::Writer;
use informer::{Api, Client, Config, ConfigMap, Error, ListParams, WatchParams};
use informer_sim::Simulator;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

/// Accepts connections and reads requests, never writes a byte. Counts connections.
async fn silent_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            // A test counter read after the fact: `SeqCst`, nothing to optimise here.
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
            });
        }
    });
    (addr, accepted)
}

/// A TCP relay in front of `upstream`. `freeze()` stops every connection accepted so far from
/// carrying bytes in either direction while keeping both sockets open: to the client it is a
/// peer that went silent (a partition, a dead NAT entry), not a closed connection. Connections
/// accepted later work normally.
struct Relay {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    epoch: watch::Sender<u64>,
}

impl Relay {
    async fn start(upstream: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let (epoch, epochs) = watch::channel(0u64);
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                // A test counter: `SeqCst`.
                count.fetch_add(1, Ordering::SeqCst);
                let mut epochs = epochs.clone();
                let born = *epochs.borrow_and_update();
                tokio::spawn(async move {
                    let Ok(mut up) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    // No Nagle: a small write held for the peer's delayed ACK (40 ms of real
                    // time, which a paused clock does not see) would let virtual time run ahead.
                    let _ = (down.set_nodelay(true), up.set_nodelay(true));
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        _ = async { drop(epochs.wait_for(|e| *e > born).await) } => {
                            // Frozen: hold both sockets open, carry nothing, for ever.
                            std::future::pending::<()>().await;
                        }
                    }
                });
            }
        });
        Relay {
            addr,
            accepted,
            epoch,
        }
    }

    fn freeze(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

fn client_for(url: &str, ca_pem: Option<&str>) -> Client {
    let mut config = Config::new(url.parse().unwrap());
    if let Some(pem) = ca_pem {
        config.tls.root_certs = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    }
    Client::new(config).unwrap()
}

fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a"}})
}

#[tokio::test(start_paused = true)]
async fn a_server_that_accepts_and_never_answers_times_out_every_open() {
    let (addr, accepted) = silent_server().await;
    let client = client_for(&format!("http://{addr}"), None);
    let open_timeout = client.config().open_timeout;
    assert_eq!(open_timeout, Duration::from_secs(60));
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "a");

    let t0 = Instant::now();
    let e = api.list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
    assert!(e.is_retryable(), "{e}");
    assert_eq!(t0.elapsed().as_secs(), open_timeout.as_secs(), "{e}");

    // A watch (and so a streaming list) is held to the same limit.
    let t1 = Instant::now();
    let e = api.watch(&WatchParams::default()).await.unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
    assert_eq!(t1.elapsed().as_secs(), open_timeout.as_secs(), "{e}");

    // The connection that did not answer was given up: the second request had a new one.
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(client.pool_stats().connections_opened, 2);
}

#[tokio::test(start_paused = true)]
async fn a_reflector_against_a_silent_server_reports_the_timeout_and_retries() {
    let (addr, accepted) = silent_server().await;
    let client = client_for(&format!("http://{addr}"), None);
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let (reported_tx, mut reported) = tokio::sync::mpsc::unbounded_channel();
    let seen = errors.clone();
    let options = ReflectorOptions {
        on_error: Some(Arc::new(move |e: &Error| {
            seen.lock().unwrap().push(e.to_string());
            let _ = reported_tx.send(matches!(e, Error::Timeout(_)));
        })),
        ..Default::default()
    };
    let store: Arc<Writer<ConfigMap>> = Arc::new(Writer::new());
    let (fifo, _consumer) = DeltaFifo::new(store.clone());
    let reflector = Reflector::new(Api::namespaced(client, "a"), fifo, options);
    let health = reflector.health_handle();
    let t0 = Instant::now();
    let task = tokio::spawn(reflector.run());

    // The listing phase fails with a timeout instead of waiting for ever...
    assert_eq!(reported.recv().await, Some(true), "{:?}", errors);
    assert_eq!(t0.elapsed().as_secs(), 60);
    assert!(
        health
            .lock()
            .unwrap()
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("timed out"),
        "{:?}",
        health.lock().unwrap()
    );
    // ... and tries again (after its backoff) on a new connection, failing the same way.
    assert_eq!(reported.recv().await, Some(true), "{:?}", errors);
    assert!(accepted.load(Ordering::SeqCst) >= 2);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_stopped_reflector_reports_nothing_more() {
    // The fifo is closed (the informer stopped) while a request is in flight; the request then
    // fails, as one does when the runtime tears its connection down at exit. That is no failure
    // to report: `kwatch get` once printed one after its result.
    let (addr, accepted) = silent_server().await;
    let client = client_for(&format!("http://{addr}"), None);
    let reported = Arc::new(AtomicUsize::new(0));
    let count = reported.clone();
    let options = ReflectorOptions {
        on_error: Some(Arc::new(move |_: &Error| {
            count.fetch_add(1, Ordering::SeqCst);
        })),
        ..Default::default()
    };
    let store: Arc<Writer<ConfigMap>> = Arc::new(Writer::new());
    let (fifo, _consumer) = DeltaFifo::new(store.clone());
    let reflector = Reflector::new(Api::namespaced(client, "a"), fifo.clone(), options);
    let health = reflector.health_handle();
    let task = tokio::spawn(reflector.run());
    while accepted.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    fifo.close();
    // Past the open timeout (60 s), and a few backoff steps after it.
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(
        reported.load(Ordering::SeqCst),
        0,
        "{:?}",
        health.lock().unwrap()
    );
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn an_http2_watch_that_goes_silent_after_its_headers_fails_within_45_seconds() {
    let sim = Simulator::builder().tls(true).start().await.unwrap();
    sim.create("configmaps", Some("a"), configmap("one"))
        .unwrap();
    let relay = Relay::start(sim.addr()).await;
    let client = client_for(&format!("https://{}", relay.addr), sim.ca_pem());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "a");

    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.to_string();
    let mut stream = api
        .watch(&WatchParams::default().resource_version(&rv).timeout(3600))
        .await
        .unwrap();
    let stats = client.pool_stats();
    assert_eq!(stats.http2.len(), 1, "ALPN chose HTTP/2: {stats:?}");
    assert_eq!(stats.http2[0].active_streams, 1, "{stats:?}");

    relay.freeze();
    let frozen_at = Instant::now();
    let e = match stream.next().await {
        Some(Err(e)) => e,
        other => panic!("expected a transport error, got {other:?}"),
    };
    let silent = frozen_at.elapsed();
    assert!(matches!(e, Error::Transport { .. }), "{e:?}");
    // Pinged after 30 s of silence, given up 15 s later (client-go's HTTP/2 health check).
    assert!(
        silent >= Duration::from_secs(30) && silent <= Duration::from_secs(46),
        "caught after {silent:?}: {e}"
    );
    drop(stream);

    // The watch resumes on a new connection, never on the dead one, and sees what changed.
    sim.create("configmaps", Some("a"), configmap("two"))
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().resource_version(&rv).timeout(3600))
        .await
        .unwrap();
    match stream.next().await {
        Some(Ok(informer::client::WatchEvent::Added(cm))) => assert_eq!(cm.metadata.name, "two"),
        other => panic!("{other:?}"),
    }
    assert_eq!(relay.accepted(), 2);
    let stats = client.pool_stats();
    assert_eq!(stats.connections_opened, 2, "{stats:?}");
    assert_eq!(
        stats.http2.len(),
        1,
        "the dead connection left the pool: {stats:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_dead_idle_http2_connection_is_found_by_ping_and_never_reused() {
    let sim = Simulator::builder().tls(true).start().await.unwrap();
    let relay = Relay::start(sim.addr()).await;
    let client = client_for(&format!("https://{}", relay.addr), sim.ca_pem());
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "a");
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(client.pool_stats().http2.len(), 1);

    relay.freeze();
    // Idle connections are pinged too: 30 s of silence, then 15 s for the answer.
    tokio::time::sleep(Duration::from_secs(46)).await;
    assert!(
        client
            .pool_stats()
            .http2
            .iter()
            .all(|c| c.active_streams == 0)
    );

    let t0 = Instant::now();
    api.list(&ListParams::default()).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(relay.accepted(), 2);
    let stats = client.pool_stats();
    assert_eq!(stats.connections_opened, 2, "{stats:?}");
    assert_eq!(stats.http2.len(), 1, "{stats:?}");
}

#[tokio::test(start_paused = true)]
async fn a_dead_pooled_http1_connection_costs_one_timeout_then_a_fresh_connection() {
    let sim = Simulator::start().await.unwrap();
    let relay = Relay::start(sim.addr()).await;
    let client = client_for(&format!("http://{}", relay.addr), None);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "a");
    api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        client.pool_stats().idle_http1,
        1,
        "{:?}",
        client.pool_stats()
    );

    relay.freeze();
    // HTTP/1.1 has no ping: the request on the dead pooled connection waits for the open timeout.
    let e = api.list(&ListParams::default()).await.unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e:?}");
    assert_eq!(
        client.pool_stats().idle_http1,
        0,
        "{:?}",
        client.pool_stats()
    );

    // The next request opens a new connection instead of waiting on the dead one again.
    let t0 = Instant::now();
    sim.create("configmaps", Some("a"), configmap("fresh"))
        .unwrap();
    let list = api.list(&ListParams::default()).await.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    assert_eq!(list.items.len(), 1);
    assert_eq!(relay.accepted(), 2);
    assert_eq!(client.pool_stats().connections_opened, 2);
}

/// An HTTP/1.1 server that answers LISTs (keeping the connection) and answers WATCHes with their
/// headers only, then nothing while keeping the socket open: alive to TCP, silent to HTTP. Each
/// request is reported as (connection number, request line).
async fn headers_then_silent_server() -> (
    SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<(usize, String)>,
) {
    use tokio::io::AsyncWriteExt;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut connections = 0;
        while let Ok((mut sock, _)) = listener.accept().await {
            connections += 1;
            let (tx, conn) = (tx.clone(), connections);
            let _ = sock.set_nodelay(true);
            tokio::spawn(async move {
                let mut pending = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => pending.extend_from_slice(&buf[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&pending[..end]).to_string();
                    pending.drain(..end + 4);
                    let line = head.lines().next().unwrap_or("").to_owned();
                    let _ = tx.send((conn, line.clone()));
                    if line.contains("watch=true") {
                        let _ = sock
                            .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
                            .await;
                        // Silent for ever, socket open.
                        while matches!(sock.read(&mut buf).await, Ok(n) if n > 0) {}
                        return;
                    }
                    let body = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[]}"#;
                    let mut out = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    out.extend_from_slice(body);
                    if sock.write_all(&out).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx)
}

#[tokio::test(start_paused = true)]
async fn an_http1_watch_that_goes_silent_is_dropped_at_the_idle_limit_and_resumed_on_a_new_connection()
 {
    let (addr, mut requests) = headers_then_silent_server().await;
    let client = client_for(&format!("http://{addr}"), None);
    let (errors_tx, mut errors) = tokio::sync::mpsc::unbounded_channel();
    let options = ReflectorOptions {
        streaming_list: false,
        on_error: Some(Arc::new(move |e: &Error| {
            let _ = errors_tx.send(e.to_string());
        })),
        ..Default::default()
    };
    let store: Arc<Writer<ConfigMap>> = Arc::new(Writer::new());
    let (fifo, _consumer) = DeltaFifo::new(store.clone());
    let task = tokio::spawn(Reflector::new(Api::namespaced(client, "a"), fifo, options).run());

    let (list_conn, list) = requests.recv().await.unwrap();
    assert!(
        list.starts_with("GET /api/v1/namespaces/a/configmaps?"),
        "{list}"
    );
    let (watch_conn, watch) = requests.recv().await.unwrap();
    assert!(
        watch.contains("watch=true") && watch.contains("resourceVersion=7"),
        "{watch}"
    );
    assert_eq!(
        watch_conn, list_conn,
        "the LIST's connection went back to the pool"
    );
    let opened = Instant::now();
    let timeout_seconds: u64 = watch
        .split(['?', '&', ' '])
        .find_map(|p| p.strip_prefix("timeoutSeconds="))
        .and_then(|v| v.parse().ok())
        .expect("the watch asks for a timeout");
    // The server ends a watch at its timeout, and sends a watch with bookmarks one about every
    // minute: silence 30 s past the timeout, or for 75 s, means the stream is hung.
    let idle_limit = Duration::from_secs(timeout_seconds + 30).min(BOOKMARK_SILENCE);

    // HTTP/1.1 has no ping, and a live TCP peer answers keepalive probes: the reflector's idle
    // limit is what ends such a watch. The watch resumes from the same version on a new
    // connection: the silent one was closed.
    let (again_conn, again) = requests.recv().await.unwrap();
    let silent = opened.elapsed();
    assert!(
        silent >= idle_limit && silent < idle_limit + Duration::from_secs(1),
        "{silent:?}"
    );
    assert!(
        again.contains("watch=true") && again.contains("resourceVersion=7"),
        "{again}"
    );
    assert_ne!(again_conn, watch_conn);
    // A quiet but healthy watch looks the same (no bookmark comes before its resource changes):
    // the re-watch is routine, not a failure (R24).
    assert!(errors.try_recv().is_err(), "reported as a failure");
    task.abort();
}
