//! The client, the reflector and the informer against a real kube-apiserver 1.20 (plus etcd), and a
//! differential check of the simulator against it.
//!
//! Run with `eval "$(../shared/real-apiserver/start)" && cargo test --test real_apiserver`; without
//! `REAL_APISERVER_URL` every test prints that line and passes. Each test works in a namespace of its
//! own, so they run in parallel. Tests that disturb the whole server (etcd compaction, an apiserver
//! restart) live in `tests/real_apiserver_disruptive.rs`, which cargo runs after this binary.

mod differential;
#[macro_use]
#[path = "../support/mod.rs"]
mod support;
mod discovery;
mod leases;
mod many_watches;
mod operator;
mod protobuf;
mod writes;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::Method;
use informer::client::VersionMatch;
use informer::client::WatchEvent;
use informer::reflector::Phase;
use informer::{
    Api, ApiResource, Client, ConfigMap, DeletedObject, DynamicObject, EndpointSlice, Endpoints,
    Error, EventHandler, Informer, ListParams, Object, WatchParams,
};
use serde_json::{Value, json};
use support::real_apiserver::*;

// ----- TLS and authentication ------------------------------------------------------------------

#[tokio::test]
async fn tls_is_verified_with_the_servers_ca() {
    let real = real_or_skip!("tls_is_verified_with_the_servers_ca");
    bounded(30, async {
        let version = get(&real.client(), "/version").await;
        assert_eq!(version["gitVersion"], "v1.20.2");

        // Another CA (made with rcgen) did not sign the serving certificate: a typed TLS error.
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let other_ca = params.self_signed(&key).unwrap().pem();
        let mut config = real.config();
        config.tls.root_certs = informer::config::parse_certificates(other_ca.as_bytes()).unwrap();
        let err = Client::new(config)
            .unwrap()
            .request::<Value>(Method::GET, "/version", None)
            .await;
        assert!(matches!(err, Err(Error::Tls(_))), "{err:?}");

        // The right CA but a name the certificate does not hold.
        let mut config = real.config();
        config.tls.server_name = Some("not-the-apiserver.example".into());
        let err = Client::new(config)
            .unwrap()
            .request::<Value>(Method::GET, "/version", None)
            .await;
        assert!(matches!(err, Err(Error::Tls(_))), "{err:?}");
    })
    .await;
}

#[tokio::test]
async fn bearer_token_authenticates_and_a_wrong_one_is_401() {
    let real = real_or_skip!("bearer_token_authenticates_and_a_wrong_one_is_401");
    bounded(30, async {
        let list = get(&real.client(), "/api/v1/namespaces?limit=1").await;
        assert_eq!(list["kind"], "NamespaceList");

        let mut config = real.config();
        config.auth = informer::config::Auth::Bearer(informer::config::Secret::new("wrong-token"));
        let err = Client::new(config)
            .unwrap()
            .request::<Value>(Method::GET, "/api/v1/namespaces", None)
            .await
            .unwrap_err();
        assert_eq!(err.http_code(), Some(401), "{err}");
        assert_eq!(err.status().unwrap().reason, "Unauthorized");

        // No credentials at all: 1.20 turns anonymous auth off under AlwaysAllow.
        let err = Client::new(real.config_without_auth())
            .unwrap()
            .request::<Value>(Method::GET, "/api/v1/namespaces", None)
            .await
            .unwrap_err();
        assert_eq!(err.http_code(), Some(401), "{err}");
    })
    .await;
}

#[tokio::test]
async fn client_certificate_authenticates() {
    let real = real_or_skip!("client_certificate_authenticates");
    bounded(30, async {
        let client = Client::new(real.cert_config()).unwrap();
        let ns = namespace(&client, "cert").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        post(
            &client,
            &cm_path(&ns, None),
            configmap("by-cert", json!({}), json!({"k": "v"})),
        )
        .await;
        assert_eq!(&cms.get("by-cert").await.unwrap().data["k"], "v");
    })
    .await;
}

// ----- LIST ------------------------------------------------------------------------------------

#[tokio::test]
async fn list_pages_are_one_snapshot_and_follow_the_resource_version_rules() {
    let real = real_or_skip!("list_pages_are_one_snapshot_and_follow_the_resource_version_rules");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "list").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        for i in 0..7 {
            post(
                &client,
                &cm_path(&ns, None),
                configmap(&format!("c{i}"), json!({}), json!({})),
            )
            .await;
        }

        // limit/continue: pages of 3, 3, 1, all at the first page's resourceVersion, and a write
        // between pages does not show up (the pages are one snapshot).
        let mut pager = cms.pager(ListParams::default().limit(3));
        let first = pager.next_page().await.unwrap().unwrap();
        assert_eq!(first.items.len(), 3);
        assert!(!first.metadata.continue_token.is_empty());
        assert_eq!(first.metadata.remaining_item_count, Some(4));
        let snapshot_rv = first.metadata.resource_version.to_string();
        let late = post(
            &client,
            &cm_path(&ns, None),
            configmap("c7-late", json!({}), json!({})),
        )
        .await;
        let mut names: Vec<String> = first
            .items
            .iter()
            .map(|c| c.metadata.name.clone())
            .collect();
        let mut sizes = vec![3];
        while let Some(page) = pager.next_page().await {
            let page = page.unwrap();
            assert_eq!(
                page.metadata.resource_version, snapshot_rv,
                "pages share the snapshot RV"
            );
            sizes.push(page.items.len());
            names.extend(page.items.iter().map(|c| c.metadata.name.clone()));
        }
        assert_eq!(sizes, [3, 3, 1]);
        assert_eq!(names, ["c0", "c1", "c2", "c3", "c4", "c5", "c6"]);

        // RV "" (consistent read) sees the late write; RV "0" ignores the limit (watch cache).
        let now = cms.list(&ListParams::default()).await.unwrap();
        assert_eq!(now.items.len(), 8);
        assert!(rv_num(&now.metadata.resource_version) >= rv_of(&late));
        let any = cms
            .list(&ListParams::default().limit(2).resource_version("0"))
            .await
            .unwrap();
        assert_eq!(any.items.len(), 8, "the watch cache ignores limit for RV=0");
        assert!(any.metadata.continue_token.is_empty());

        // Exact, and the legacy exact read (limit + RV): the state at the snapshot, without c7-late.
        let exact = cms
            .list(
                &ListParams::default()
                    .resource_version(&snapshot_rv)
                    .version_match(VersionMatch::Exact),
            )
            .await
            .unwrap();
        assert_eq!(exact.items.len(), 7);
        assert_eq!(exact.metadata.resource_version, snapshot_rv);
        let legacy = cms
            .list(
                &ListParams::default()
                    .limit(100)
                    .resource_version(&snapshot_rv),
            )
            .await
            .unwrap();
        assert_eq!(legacy.items.len(), 7);
        // NotOlderThan an old version: served from the cache, at least that new (so c7-late is in).
        let not_older = cms
            .list(
                &ListParams::default()
                    .resource_version(&snapshot_rv)
                    .version_match(VersionMatch::NotOlderThan),
            )
            .await
            .unwrap();
        assert_eq!(not_older.items.len(), 8);

        // A version from the future: the watch cache waits ~3 s, then 504 "Too large resource version".
        let future = (rv_num(&now.metadata.resource_version) + 1_000_000).to_string();
        let err = cms
            .list(
                &ListParams::default()
                    .resource_version(&future)
                    .version_match(VersionMatch::NotOlderThan),
            )
            .await
            .unwrap_err();
        assert_eq!(err.http_code(), Some(504), "{err}");
        assert!(
            err.status().unwrap().is_too_large_resource_version(),
            "{err}"
        );
        // resourceVersionMatch without a resourceVersion is invalid.
        let err = cms
            .list(&ListParams::default().version_match(VersionMatch::Exact))
            .await
            .unwrap_err();
        assert_eq!(err.http_code(), Some(422), "{err}");
    })
    .await;
}

fn rv_num(rv: &str) -> u64 {
    rv.parse()
        .unwrap_or_else(|_| panic!("resourceVersion {rv:?} is not a number"))
}

// ----- WATCH -----------------------------------------------------------------------------------

/// Reads events until `n` non-bookmark events arrived (bookmarks are returned too).
async fn next_events<T: Object>(
    stream: &mut informer::client::WatchStream<T, informer::client::ResponseBody>,
    n: usize,
) -> Vec<WatchEvent<T>> {
    let mut out = Vec::new();
    let mut seen = 0;
    while seen < n {
        let ev = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("no watch event within 20 s")
            .expect("watch ended early")
            .unwrap();
        if !matches!(ev, WatchEvent::Bookmark(_)) {
            seen += 1;
        }
        out.push(ev);
    }
    out
}

fn summary<T: Object<Meta = informer::ObjectMeta>>(events: &[WatchEvent<T>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            WatchEvent::Added(o) => Some(format!("ADDED {}", o.meta().name)),
            WatchEvent::Modified(o) => Some(format!("MODIFIED {}", o.meta().name)),
            WatchEvent::Deleted(o) => Some(format!("DELETED {}", o.meta().name)),
            WatchEvent::Bookmark(_) => None,
            WatchEvent::Error(s) => Some(format!("ERROR {}", s.code)),
        })
        .collect()
}

#[tokio::test]
async fn watch_resumes_exactly_after_a_resource_version() {
    let real = real_or_skip!("watch_resumes_exactly_after_a_resource_version");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "resume").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let a = post(
            &client,
            &cm_path(&ns, None),
            configmap("a", json!({}), json!({"v": "0"})),
        )
        .await;
        let from = a["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
        merge_patch(
            &client,
            &cm_path(&ns, Some("a")),
            json!({"data": {"v": "1"}}),
        )
        .await;
        merge_patch(
            &client,
            &cm_path(&ns, Some("a")),
            json!({"data": {"v": "2"}}),
        )
        .await;
        post(
            &client,
            &cm_path(&ns, None),
            configmap("b", json!({}), json!({})),
        )
        .await;
        delete(&client, &cm_path(&ns, Some("a"))).await;

        let mut stream = cms
            .watch(&WatchParams::default().resource_version(&from))
            .await
            .unwrap();
        let events = next_events(&mut stream, 4).await;
        assert_eq!(
            summary(&events),
            ["MODIFIED a", "MODIFIED a", "ADDED b", "DELETED a"]
        );
        let rvs: Vec<u64> = events
            .iter()
            .map(|e| rv_num(e.resource_version().unwrap()))
            .collect();
        assert!(rvs.windows(2).all(|w| w[0] < w[1]), "RVs increase: {rvs:?}");
        assert!(rvs[0] > rv_num(&from));
        // The DELETED event carries the last state, stamped with the deletion's version.
        let WatchEvent::Deleted(gone) = &events[3] else {
            unreachable!()
        };
        assert_eq!(&gone.data["v"], "2");

        // Resuming from the middle replays only what came after.
        let mid = events[1].resource_version().unwrap().to_owned();
        let mut stream = cms
            .watch(&WatchParams::default().resource_version(&mid))
            .await
            .unwrap();
        assert_eq!(
            summary(&next_events(&mut stream, 2).await),
            ["ADDED b", "DELETED a"]
        );

        // RV "0": synthetic ADDED for what exists now, then live events.
        let mut stream = cms
            .watch(&WatchParams::default().resource_version("0"))
            .await
            .unwrap();
        assert_eq!(summary(&next_events(&mut stream, 1).await), ["ADDED b"]);
        post(
            &client,
            &cm_path(&ns, None),
            configmap("c", json!({}), json!({})),
        )
        .await;
        assert_eq!(summary(&next_events(&mut stream, 1).await), ["ADDED c"]);
    })
    .await;
}

#[tokio::test]
async fn bookmark_arrives_before_timeout_seconds_and_the_stream_ends_cleanly() {
    let real = real_or_skip!("bookmark_arrives_before_timeout_seconds_and_the_stream_ends_cleanly");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "bookmark").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let a = post(
            &client,
            &cm_path(&ns, None),
            configmap("a", json!({}), json!({})),
        )
        .await;
        let params = WatchParams::default()
            .resource_version(a["metadata"]["resourceVersion"].as_str().unwrap())
            .bookmarks(true)
            .timeout(5);
        let started = Instant::now();
        let mut stream = cms.watch(&params).await.unwrap();
        // 1.20 sends a watcher a bookmark only at a version newer than the watch's, the last one
        // its resource's cache processed: without a write elsewhere (other tests, when they run
        // at the same time) there is none. One write in another namespace, not seen by this watch.
        let elsewhere = namespace(&client, "bookmark-other").await;
        post(
            &client,
            &cm_path(&elsewhere, None),
            configmap("b", json!({}), json!({})),
        )
        .await;
        let mut bookmarks = Vec::new();
        while let Some(ev) = stream.next().await {
            match ev.unwrap() {
                WatchEvent::Bookmark(b) => bookmarks.push((started.elapsed(), b.resource_version)),
                other => panic!("unexpected event {:?}", summary(&[other])),
            }
        }
        let ended = started.elapsed();
        // 1.20: bookmarks only shortly (~2 s) before the deadline, none periodic; then a clean EOF.
        assert!(!bookmarks.is_empty(), "no BOOKMARK before timeoutSeconds");
        assert!(
            bookmarks.iter().all(|(t, _)| *t >= Duration::from_secs(1)),
            "{bookmarks:?}"
        );
        assert!(
            bookmarks.iter().all(|(_, rv)| rv_num(rv) >= rv_of(&a)),
            "bookmark RVs not older than the watch's: {bookmarks:?}"
        );
        assert!(
            ended >= Duration::from_secs(4) && ended < Duration::from_secs(10),
            "{ended:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn too_old_watch_is_http_200_then_an_error_event_410() {
    let real = real_or_skip!("too_old_watch_is_http_200_then_an_error_event_410");
    bounded(30, async {
        let client = real.client();
        let ns = namespace(&client, "tooold").await;
        // RV 1 predates the window of a custom resource's watch cache on every server; a built-in
        // resource's cache starts with the server and may still accept it (see
        // `differential::probe_resource`).
        differential::serve_probes_on_real(&client).await;
        let probe = differential::probe_resource();
        let path = format!(
            "/apis/{}/{}/namespaces/{ns}/{}?resourceVersion=1&watch=true",
            probe.group, probe.version, probe.plural
        );
        let resp = client.send(Method::GET, &path, None).await.unwrap();
        assert_eq!(resp.status(), 200);
        let probes: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, probe);
        let mut stream = probes
            .watch(&WatchParams::default().resource_version("1"))
            .await
            .unwrap();
        match stream.next().await {
            Some(Ok(WatchEvent::Error(status))) => {
                assert_eq!(status.code, 410);
                assert_eq!(status.reason, "Expired");
                assert!(
                    status.message.starts_with("too old resource version: 1 ("),
                    "{}",
                    status.message
                );
            }
            other => panic!("expected ERROR 410, got {other:?}"),
        }
        assert!(
            stream.next().await.is_none(),
            "the stream closes after the ERROR event"
        );
    })
    .await;
}

#[tokio::test]
async fn selectors_on_list_and_watch_and_the_selector_exit_is_deleted() {
    let real = real_or_skip!("selectors_on_list_and_watch_and_the_selector_exit_is_deleted");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "selector").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let a = post(
            &client,
            &cm_path(&ns, None),
            configmap("a", json!({"tier": "web"}), json!({})),
        )
        .await;
        post(
            &client,
            &cm_path(&ns, None),
            configmap("b", json!({"tier": "db"}), json!({})),
        )
        .await;
        let from = a["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_owned();
        let listed = cms
            .list(&ListParams::default().labels("tier=web"))
            .await
            .unwrap();
        assert_eq!(listed.items.len(), 1);
        let listed = cms
            .list(&ListParams::default().fields("metadata.name=b"))
            .await
            .unwrap();
        assert_eq!(listed.items[0].metadata.name, "b");
        let listed = cms
            .list(&ListParams::default().labels("tier in (web,db),tier!=db"))
            .await
            .unwrap();
        assert_eq!(listed.items.len(), 1);

        let mut web = cms
            .watch(
                &WatchParams::default()
                    .labels("tier=web")
                    .resource_version(&from),
            )
            .await
            .unwrap();
        let mut by_name = cms
            .watch(
                &WatchParams::default()
                    .fields("metadata.name=b")
                    .resource_version(&from),
            )
            .await
            .unwrap();
        let out = merge_patch(
            &client,
            &cm_path(&ns, Some("a")),
            json!({"metadata": {"labels": {"tier": "db"}}}),
        )
        .await;
        merge_patch(
            &client,
            &cm_path(&ns, Some("b")),
            json!({"metadata": {"labels": {"tier": "web"}}}),
        )
        .await;
        delete(&client, &cm_path(&ns, Some("b"))).await;

        let events = next_events(&mut web, 3).await;
        assert_eq!(summary(&events), ["DELETED a", "ADDED b", "DELETED b"]);
        // The exit carries the object as it was (still matching), stamped with the change's RV.
        let WatchEvent::Deleted(left) = &events[0] else {
            unreachable!()
        };
        assert_eq!(&left.metadata.labels["tier"], "web");
        assert_eq!(
            left.metadata.resource_version,
            out["metadata"]["resourceVersion"].as_str().unwrap()
        );
        let events = next_events(&mut by_name, 3).await;
        assert_eq!(summary(&events), ["ADDED b", "MODIFIED b", "DELETED b"]);
    })
    .await;
}

// ----- Reflector and informer -------------------------------------------------------------------

/// A handler that checks each notification against what it was told before, and mirrors it.
#[derive(Clone, Default)]
struct Mirror(Arc<MirrorState>);

#[derive(Default)]
struct MirrorState {
    objects: Mutex<BTreeMap<String, String>>,
    violations: Mutex<Vec<String>>,
}

impl EventHandler<ConfigMap> for Mirror {
    fn on_add(&self, obj: &Arc<ConfigMap>, _initial: bool) {
        let key = obj.meta().key();
        if let Some(old) = self
            .0
            .objects
            .lock()
            .unwrap()
            .insert(key.clone(), obj.meta().resource_version.to_string())
        {
            self.0
                .violations
                .lock()
                .unwrap()
                .push(format!("add of {key} already held at {old}"));
        }
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let key = new.meta().key();
        let mut objects = self.0.objects.lock().unwrap();
        if objects.get(&key).map(String::as_str) != Some(old.meta().resource_version.as_str()) {
            self.0
                .violations
                .lock()
                .unwrap()
                .push(format!("update of {key} from an unknown state"));
        }
        objects.insert(key, new.meta().resource_version.to_string());
    }
    fn on_delete(&self, obj: &DeletedObject<ConfigMap>) {
        if self.0.objects.lock().unwrap().remove(&obj.key()).is_none() {
            self.0
                .violations
                .lock()
                .unwrap()
                .push(format!("delete of unknown {}", obj.key()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_converges_while_objects_are_written_concurrently() {
    let real = real_or_skip!("informer_converges_while_objects_are_written_concurrently");
    bounded(90, async {
        let client = real.client();
        let ns = namespace(&client, "informer").await;
        for i in 0..10 {
            post(
                &client,
                &cm_path(&ns, None),
                configmap(&format!("pre{i}"), json!({}), json!({"n": "0"})),
            )
            .await;
        }
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        let inf = Informer::new(cms.clone(), fast_options());
        let mirror = Mirror::default();
        inf.add_handler(mirror.clone());
        inf.start();

        // Writers start at once, racing the informer's initial list and first watch.
        let mut writers = Vec::new();
        for w in 0..3 {
            let (client, ns) = (client.clone(), ns.clone());
            writers.push(tokio::spawn(async move {
                for i in 0..15 {
                    let name = format!("w{w}-{i}");
                    post(
                        &client,
                        &cm_path(&ns, None),
                        configmap(&name, json!({}), json!({"n": "0"})),
                    )
                    .await;
                    let mut obj = get(&client, &cm_path(&ns, Some(&name))).await;
                    obj["data"]["n"] = json!("1");
                    put(&client, &cm_path(&ns, Some(&name)), obj).await;
                    merge_patch(
                        &client,
                        &cm_path(&ns, Some(&name)),
                        json!({"data": {"n": "2"}}),
                    )
                    .await;
                    if i % 3 == 0 {
                        delete(&client, &cm_path(&ns, Some(&name))).await;
                    }
                    if i % 6 == 0 {
                        post(
                            &client,
                            &cm_path(&ns, None),
                            configmap(&name, json!({}), json!({"n": "again"})),
                        )
                        .await;
                    }
                }
                delete(&client, &cm_path(&ns, Some(&format!("pre{w}")))).await;
            }));
        }
        inf.wait_for_sync(Duration::from_secs(20)).await.unwrap();
        for w in writers {
            w.await.unwrap();
        }
        let want = server_state(&cms).await;
        assert_eq!(want.len(), 10 - 3 + 3 * (15 - 5 + 3));
        assert!(
            eventually(20, || store_state(&inf) == want).await,
            "store never matched the server"
        );
        assert!(
            eventually(10, || *mirror.0.objects.lock().unwrap() == want).await,
            "handler never matched"
        );
        assert!(
            mirror.0.violations.lock().unwrap().is_empty(),
            "{:?}",
            mirror.0.violations.lock().unwrap()
        );
        let re = inf.store().get(&ns, "w0-0").unwrap();
        assert_eq!(&re.data["n"], "again");
        inf.stop();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_is_refused_with_422_and_the_reflector_falls_back_to_list() {
    let real =
        real_or_skip!("streaming_list_is_refused_with_422_and_the_reflector_falls_back_to_list");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "watchlist").await;
        for i in 0..5 {
            post(
                &client,
                &cm_path(&ns, None),
                configmap(&format!("c{i}"), json!({}), json!({})),
            )
            .await;
        }
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        // What the reflector asks first: a WatchList request. 1.20 refuses it before streaming.
        let err = cms
            .watch(
                &WatchParams {
                    send_initial_events: Some(true),
                    version_match: Some(VersionMatch::NotOlderThan),
                    allow_bookmarks: true,
                    ..Default::default()
                }
                .resource_version(""),
            )
            .await
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.http_code(), Some(422), "{err}");
        assert_eq!(err.status().unwrap().reason, "Invalid");

        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        let mut options = fast_options();
        assert!(options.streaming_list);
        options.on_error = Some(Arc::new(move |e: &Error| {
            seen.lock().unwrap().push(e.to_string())
        }));
        let inf = Informer::new(cms.clone(), options);
        inf.start();
        inf.wait_for_sync(Duration::from_secs(20)).await.unwrap();
        // The fallback's first list asks for resourceVersion "0" (client-go's R5): the watch
        // cache answers, and may trail the last create by a moment on a loaded machine (seen:
        // c4 missing at the sync, 1 run in many); its watch then brings the rest.
        let server = server_state(&cms).await;
        assert!(
            eventually(10, || store_state(&inf) == server).await,
            "{:?} != {server:?}",
            store_state(&inf)
        );
        post(
            &client,
            &cm_path(&ns, None),
            configmap("live", json!({}), json!({})),
        )
        .await;
        assert!(eventually(10, || inf.store().get(&ns, "live").is_some()).await);

        let m = inf.metrics();
        assert_eq!(m.reflector.lists, 1, "one paginated LIST after the refusal");
        assert_eq!(m.reflector.phase, Phase::Watching);
        assert_eq!(m.reflector.consecutive_failures, 0);
        // The 422 is routine (every relist against 1.20 meets it): no failure reported.
        let errors = errors.lock().unwrap().clone();
        assert!(errors.is_empty(), "{errors:?}");
        inf.stop();
    })
    .await;
}

/// A watch of a quiet resource over HTTP/1.1 (a proxy without HTTP/2 in front of the server)
/// hears nothing: 1.20 sends a watch no bookmark but ~2 s before its deadline (newer servers,
/// every minute but only at a version newer than the watch's). The reflector re-opens it at
/// each silence limit, and that is routine (issue #46): no error callback, no failure count, no
/// relist, and the watch open then still delivers. The limit is 2 s here so that the suite stays
/// short (the test takes about 7 s); `REAL_APISERVER_LONG=1` runs it with the default limit
/// (75 s) for two of them, about 2.5 minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_watch_over_http1_is_reopened_at_each_silence_limit_without_a_failure() {
    let real = real_or_skip!(
        "a_quiet_watch_over_http1_is_reopened_at_each_silence_limit_without_a_failure"
    );
    let long = std::env::var_os("REAL_APISERVER_LONG").is_some();
    let (silence, limits) = if long {
        (informer::reflector::BOOKMARK_SILENCE, 2)
    } else {
        (Duration::from_secs(2), 3)
    };
    let within = (silence * limits).as_secs() + 60;
    bounded(within + 60, async {
        let client = real.client();
        let ns = namespace(&client, "quiet").await;
        post(
            &client,
            &cm_path(&ns, None),
            configmap("c1", json!({}), json!({})),
        )
        .await;
        let front = Client::new(real.http1_front_config().await).unwrap();
        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        let options = informer::reflector::ReflectorOptions {
            bookmark_silence: silence,
            on_error: Some(Arc::new(move |e: &Error| {
                seen.lock().unwrap().push(e.to_string())
            })),
            ..Default::default()
        };
        let cms: Api<ConfigMap> = Api::namespaced(front.clone(), &ns);
        let inf = Informer::new(cms, options);
        inf.start();
        inf.wait_for_sync(Duration::from_secs(20)).await.unwrap();
        assert!(
            front.pool_stats().http2.is_empty(),
            "{:?}",
            front.pool_stats()
        );

        // The first watch, then one more at each silence limit.
        let reopened = eventually(within, || inf.health().watches > u64::from(limits)).await;
        let h = inf.health();
        assert!(reopened, "{h:?}");
        assert_eq!(
            h.lists, 1,
            "watched again from the same version, no relist: {h:?}"
        );
        assert_eq!(h.consecutive_failures, 0, "{h:?}");
        assert_eq!(h.last_error, None);
        assert!(
            errors.lock().unwrap().is_empty(),
            "{:?}",
            errors.lock().unwrap()
        );

        post(
            &client,
            &cm_path(&ns, None),
            configmap("c2", json!({}), json!({})),
        )
        .await;
        assert!(eventually(10, || inf.store().get(&ns, "c2").is_some()).await);
        assert!(
            errors.lock().unwrap().is_empty(),
            "{:?}",
            errors.lock().unwrap()
        );
        inf.stop();
    })
    .await;
}

// ----- Discovery objects --------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_and_v1beta1_endpointslices_decode_and_inform() {
    let real = real_or_skip!("endpoints_and_v1beta1_endpointslices_decode_and_inform");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "disc").await;
        // 1.20 serves EndpointSlice only as v1beta1.
        let err = client.request::<Value>(Method::GET, "/apis/discovery.k8s.io/v1", None).await.unwrap_err();
        assert_eq!(err.http_code(), Some(404));
        let beta = ApiResource::new("discovery.k8s.io", "v1beta1", "EndpointSlice", "endpointslices", true);
        let slices: Api<EndpointSlice> = Api::namespaced_with(client.clone(), &ns, beta.clone());
        let inf = Informer::new(slices.clone(), fast_options());
        inf.start();
        inf.wait_for_sync(Duration::from_secs(20)).await.unwrap();

        post(
            &client,
            &format!("/api/v1/namespaces/{ns}/endpoints"),
            json!({"metadata": {"name": "web"}, "subsets": [{
                "addresses": [{"ip": "10.0.0.1", "nodeName": "n1"}],
                "notReadyAddresses": [{"ip": "10.0.0.2"}],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]}),
        )
        .await;
        post(
            &client,
            &format!("/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices"),
            json!({"metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true},
                               "topology": {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z1"}}],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}),
        )
        .await;

        let eps: Api<Endpoints> = Api::namespaced(client.clone(), &ns);
        let web = eps.get("web").await.unwrap();
        assert_eq!(web.subsets[0].addresses[0].ip, "10.0.0.1");
        assert_eq!(web.subsets[0].not_ready_addresses[0].ip, "10.0.0.2");
        assert_eq!(web.subsets[0].ports[0].port, Some(8080));

        let slice = slices.get("web-abc").await.unwrap();
        assert_eq!(&slice.endpoints[0].topology["topology.kubernetes.io/zone"], "z1");
        assert_eq!(slice.endpoints[0].conditions.ready, Some(true));
        assert!(eventually(10, || inf.store().get(&ns, "web-abc").is_some()).await);
        let cached = inf.store().get(&ns, "web-abc").unwrap();
        assert_eq!(&cached.endpoints[0].topology["kubernetes.io/hostname"], "n1");

        // The same objects through the dynamic view keep every field.
        let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, beta);
        let d = dynamic.get("web-abc").await.unwrap();
        assert_eq!(d.types.api_version, "discovery.k8s.io/v1beta1");
        assert_eq!(d.data["endpoints"][0]["topology"]["kubernetes.io/hostname"], "n1");
        inf.stop();
    })
    .await;
}

// ----- Simulator vs real server ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_matches_the_real_server_for_a_scripted_sequence() {
    let real = real_or_skip!("simulator_matches_the_real_server_for_a_scripted_sequence");
    bounded(60, async {
        let sim = informer_sim::Simulator::start().await.unwrap();
        let sim_client = Client::new(informer::Config::new(sim.url().parse().unwrap())).unwrap();
        let on_real = differential::run_script(&real.client()).await;
        let on_sim = differential::run_script(&sim_client).await;
        differential::assert_same(&on_real, &on_sim);
        sim.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_refuses_requests_like_the_real_server() {
    let real = real_or_skip!("simulator_refuses_requests_like_the_real_server");
    bounded(60, async {
        let sim = informer_sim::Simulator::start().await.unwrap();
        let sim_client = Client::new(informer::Config::new(sim.url().parse().unwrap())).unwrap();
        let real_client = real.client();
        differential::serve_probes_on_sim(&sim);
        differential::serve_probes_on_real(&real_client).await;
        let (on_real, on_sim) = tokio::join!(
            differential::error_answers(&real_client),
            differential::error_answers(&sim_client)
        );
        let diffs: Vec<String> = on_real
            .iter()
            .zip(&on_sim)
            .filter(|(r, s)| r != s)
            .map(|(r, s)| format!("{}:\n  real: {} {}\n  sim:  {} {}", r.0, r.1, r.2, s.1, s.2))
            .collect();
        assert!(
            diffs.is_empty(),
            "the simulator answers differently:\n{}",
            diffs.join("\n")
        );
        sim.shutdown().await;
    })
    .await;
}
