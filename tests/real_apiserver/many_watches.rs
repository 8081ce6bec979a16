//! Many watches, one connection (issue #14 item 9): 300 informers on one client share HTTP/2
//! connections as client-go's do, each connection carrying at most the server's
//! SETTINGS_MAX_CONCURRENT_STREAMS, and the watches past that limit open on another connection
//! instead of queueing behind watches that will not end for minutes. Prints sockets, threads and
//! RSS for the report.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use informer::reflector::ReflectorOptions;
use informer::{Api, ConfigMap, Informer};
use serde_json::json;
use tokio::task::JoinSet;

use crate::support::real_apiserver::*;

const INFORMERS: usize = 300;

/// Established TCP sockets of this process to `port` (from /proc/self/fd and /proc/net/tcp*).
fn sockets_to(port: u16) -> usize {
    let inodes: BTreeSet<String> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let l = l.to_string_lossy().into_owned();
                    Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
                })
                .collect()
        })
        .unwrap_or_default();
    let mut n = 0;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(table)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(remote), Some(state), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else {
                continue;
            };
            let remote_port = remote
                .rsplit(':')
                .next()
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            // State 01 is ESTABLISHED.
            if remote_port == Some(port) && *state == "01" && inodes.contains(*inode) {
                n += 1;
            }
        }
    }
    n
}

/// `Threads` and `VmRSS` (KiB) of this process.
fn threads_and_rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("Threads:"), field("VmRSS:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_informers_share_http2_connections_past_the_stream_limit() {
    let real =
        real_or_skip!("three_hundred_informers_share_http2_connections_past_the_stream_limit");
    bounded(240, async {
        let port: u16 = real.url.rsplit(':').next().unwrap().parse().unwrap();
        let setup = real.client();
        // 300 namespaces with one ConfigMap each, 16 writers at a time.
        let mut namespaces = Vec::new();
        let mut jobs = JoinSet::new();
        for i in 0..INFORMERS {
            let client = setup.clone();
            jobs.spawn(async move {
                let ns = namespace(&client, &format!("many{i}")).await;
                post(
                    &client,
                    &cm_path(&ns, None),
                    configmap("first", json!({}), json!({"n": "0"})),
                )
                .await;
                ns
            });
            if jobs.len() >= 16 {
                namespaces.push(jobs.join_next().await.unwrap().unwrap());
            }
        }
        while let Some(ns) = jobs.join_next().await {
            namespaces.push(ns.unwrap());
        }

        // One client for all the informers, as a controller would have.
        let client = real.client();
        let (threads_before, rss_before) = threads_and_rss_kib();
        let started = Instant::now();
        let options = ReflectorOptions {
            streaming_list: false,
            ..Default::default()
        };
        let informers: Vec<Informer<ConfigMap>> = namespaces
            .iter()
            .map(|ns| {
                let inf = Informer::new(Api::namespaced(client.clone(), ns), options.clone());
                inf.start();
                inf
            })
            .collect();
        for inf in &informers {
            inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
        }
        let synced_after = started.elapsed();
        assert!(informers.iter().all(|i| i.store().len() == 1));

        // Every informer holds a watch open: 300 streams, spread so that no connection carries
        // more than the server allows.
        let open = eventually(30, || {
            client
                .pool_stats()
                .http2
                .iter()
                .map(|c| c.active_streams)
                .sum::<usize>()
                == INFORMERS
        })
        .await;
        let stats = client.pool_stats();
        assert!(open, "not every watch is open: {stats:?}");
        let limit = stats.http2[0].max_concurrent_streams;
        assert!(
            stats
                .http2
                .iter()
                .all(|c| c.active_streams <= c.max_concurrent_streams),
            "{stats:?}"
        );
        let needed = INFORMERS.div_ceil(limit);
        // Before a new connection's SETTINGS arrive it is assumed to take 100 streams (the RFC
        // 9113 floor), so the first burst may open one connection more than needed; it carries
        // nothing and is closed when idle.
        let carrying = stats.http2.iter().filter(|c| c.active_streams > 0).count();
        assert_eq!(carrying, needed, "{stats:?}");
        assert!(stats.http2.len() <= needed + 1, "{stats:?}");

        // Past the limit the watches are live, not queued: a write in every namespace reaches
        // every informer.
        let mut jobs = JoinSet::new();
        for ns in &namespaces {
            let (client, ns) = (setup.clone(), ns.clone());
            jobs.spawn(async move {
                post(
                    &client,
                    &cm_path(&ns, None),
                    configmap("second", json!({}), json!({"n": "1"})),
                )
                .await;
            });
            if jobs.len() >= 16 {
                jobs.join_next().await.unwrap().unwrap();
            }
        }
        while let Some(j) = jobs.join_next().await {
            j.unwrap();
        }
        assert!(
            eventually(60, || informers.iter().all(|i| i.store().len() == 2)).await,
            "{} informers missed the second write",
            informers.iter().filter(|i| i.store().len() != 2).count()
        );

        let (threads, rss) = threads_and_rss_kib();
        let sockets = sockets_to(port);
        println!(
            "many_watches: {INFORMERS} informers synced in {synced_after:?}; server \
             SETTINGS_MAX_CONCURRENT_STREAMS={limit}; HTTP/2 connections of the informers' \
             client: {} (streams per connection {:?}); established sockets of this process to \
             the apiserver: {sockets} (includes the setup client's and other tests'); threads \
             {threads_before} -> {threads}; RSS {} MiB -> {} MiB; connections opened {}",
            stats.http2.len(),
            stats
                .http2
                .iter()
                .map(|c| c.active_streams)
                .collect::<Vec<_>>(),
            rss_before / 1024,
            rss / 1024,
            stats.connections_opened,
        );
        assert!(sockets >= needed, "{sockets} sockets");
        for inf in &informers {
            inf.stop();
        }
    })
    .await;
}
