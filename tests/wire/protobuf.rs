//! The protobuf wire (feature `protobuf`): real kube-apiserver 1.20 protobuf answers replayed over
//! loopback HTTP, cut into chunks of every size, decoded by `Api` into the typed kinds; hostile
//! protobuf bodies give typed errors.

use crate::support::raw_server::{Body, RawServer, Reply, capture};
use informer::client::WatchEvent;
use informer::{Api, Config, Endpoints, Error, ListParams, Resource, WatchParams};
use std::time::Duration;

const LIST: &str = "wire/real-1.20-list-endpoints-protobuf.http";
const WATCH: &str = "wire/real-1.20-watch-endpoints-protobuf.http";

/// A server answering LISTs with the list capture and WATCHes with the watch capture (its body
/// cut into `chunk`-byte chunks; 0: as captured).
async fn server(chunk: usize) -> RawServer {
    let (list, watch) = (capture(LIST), capture(WATCH));
    RawServer::start(move |line| {
        let cap = if line.contains("watch=true") {
            &watch
        } else {
            &list
        };
        if chunk == 0 {
            Reply::from_capture(cap)
        } else {
            Reply::rechunked(cap, chunk)
        }
    })
    .await
}

/// Every request the server received, lowercased.
fn requests(server: &RawServer) -> String {
    server
        .requests
        .lock()
        .unwrap()
        .join("")
        .to_ascii_lowercase()
}

async fn watch_all(api: &Api<Endpoints>) -> Result<Vec<WatchEvent<Endpoints>>, Error> {
    let mut stream = api.watch(&WatchParams::default()).await?;
    let mut events = Vec::new();
    let all = async {
        while let Some(e) = stream.next().await {
            events.push(e?);
        }
        Ok::<_, Error>(())
    };
    tokio::time::timeout(Duration::from_secs(20), all)
        .await
        .expect("watch hung")?;
    Ok(events)
}

/// What each event says: its type, key and resourceVersion.
fn summary(events: &[WatchEvent<Endpoints>]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(o) => {
                format!("ADDED {} {}", o.metadata.key(), o.metadata.resource_version)
            }
            WatchEvent::Modified(o) => {
                format!(
                    "MODIFIED {} {}",
                    o.metadata.key(),
                    o.metadata.resource_version
                )
            }
            WatchEvent::Deleted(o) => {
                format!(
                    "DELETED {} {}",
                    o.metadata.key(),
                    o.metadata.resource_version
                )
            }
            WatchEvent::Bookmark(b) => format!("BOOKMARK {}", b.resource_version),
            WatchEvent::Error(s) => format!("ERROR {}", s.code),
        })
        .collect()
}

/// `pb-1` after its label change, as kube-apiserver 1.20 writes it in JSON (the same object the
/// protobuf watch carries in its MODIFIED event, member for member).
const PB_1_JSON: &str = r#"{"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"pb-1","namespace":"default","uid":"e704c0b4-492c-4eb1-be35-c5cf1dc0d7f5","resourceVersion":"87","creationTimestamp":"2026-12-04T17:47:20Z","labels":{"app":"pb","v":"2"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"apiVersion\":\"v1\",\"kind\":\"Endpoints\",\"metadata\":{\"annotations\":{},\"labels\":{\"app\":\"pb\"},\"name\":\"pb-1\",\"namespace\":\"default\"},\"subsets\":[{\"addresses\":[{\"ip\":\"10.1.0.1\"}],\"ports\":[{\"name\":\"http\",\"port\":8080}]}]}\n"},"managedFields":[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"v1","time":"2026-12-04T17:47:20Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app":{}}},"f:subsets":{}}},{"manager":"kubectl-patch","operation":"Update","apiVersion":"v1","time":"2026-12-04T17:47:22Z","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{"f:v":{}}}}}]},"subsets":[{"addresses":[{"ip":"10.1.0.1"}],"ports":[{"name":"http","port":8080,"protocol":"TCP"}]}]}"#;

#[tokio::test]
async fn real_protobuf_lists_and_watches_decode_in_any_chunking() {
    for chunk in [0usize, 1, 2, 3, 7, 64, 100_000] {
        let server = server(chunk).await;
        let api: Api<Endpoints> = Api::namespaced(server.client(), "default");
        let list = api.list(&ListParams::default()).await.unwrap();
        let names: Vec<_> = list
            .items
            .iter()
            .map(|e| e.metadata.name.as_str())
            .collect();
        assert_eq!(names, ["pb-1", "pb-2", "pb-3"], "chunk {chunk}");
        assert!(!list.metadata.resource_version.is_empty());
        let events = watch_all(&api).await.unwrap();
        assert_eq!(
            summary(&events),
            [
                "ADDED default/pb-2 85",
                "ADDED default/pb-3 86",
                "ADDED default/pb-1 84",
                "MODIFIED default/pb-1 87",
                "DELETED default/pb-2 88",
                "BOOKMARK 88",
                "BOOKMARK 88",
            ],
            "chunk {chunk}"
        );
        let WatchEvent::Modified(pb_1) = &events[3] else {
            unreachable!()
        };
        let from_json: Endpoints = serde_json::from_str(PB_1_JSON).unwrap();
        assert_eq!(
            *pb_1, from_json,
            "protobuf and JSON decode to equal objects"
        );
        let requests = requests(&server);
        assert!(
            requests.contains("accept: application/vnd.kubernetes.protobuf, application/json\r\n")
                && requests.contains(
                    "accept: application/vnd.kubernetes.protobuf;stream=watch, application/json\r\n"
                ),
            "{requests}"
        );
    }
}

#[tokio::test]
async fn a_typed_kind_read_as_another_resource_refuses_protobuf_it_did_not_ask_for() {
    let server = server(0).await;
    // A view built `*_with` reads JSON (its field numbers could be another version's): a
    // protobuf answer is an error, never a silent misreading.
    let api: Api<Endpoints> =
        Api::namespaced_with(server.client(), "default", Endpoints::api_resource());
    match api.list(&ListParams::default()).await {
        Err(Error::Protocol(message)) => assert!(message.contains("protobuf"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert!(!requests(&server).contains("protobuf"));
    assert!(matches!(
        api.watch(&WatchParams::default()).await,
        Err(Error::Protocol(_))
    ));
}

#[tokio::test]
async fn config_protobuf_off_asks_for_json_alone() {
    let server = server(0).await;
    let mut config = Config::new(server.url.parse().unwrap());
    config.protobuf = false;
    let api: Api<Endpoints> = Api::namespaced(informer::Client::new(config).unwrap(), "default");
    // The server answers protobuf anyway (this one does not listen): the answer is still read.
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    let requests = requests(&server);
    assert!(
        requests.contains("accept: application/json\r\n"),
        "{requests}"
    );
    assert!(!requests.contains("protobuf"), "{requests}");
}

/// A protobuf watch body of the capture's frames with one frame replaced by `bad`.
fn watch_with(bad: Vec<u8>) -> Reply {
    let cap = capture(WATCH);
    let mut body =
        cap.body[..4 + u32::from_be_bytes(cap.body[..4].try_into().unwrap()) as usize].to_vec();
    body.extend_from_slice(&(bad.len() as u32).to_be_bytes());
    body.extend_from_slice(&bad);
    Reply {
        head: cap.head.clone(),
        body: Body::Chunks(vec![body]),
    }
}

#[tokio::test]
async fn hostile_protobuf_watch_frames_are_typed_errors() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "garbage",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff".to_vec(),
        ),
        // type "ADDED", object with a body that is not k8s\0 + envelope
        (
            "no magic",
            [b"\x0a\x05ADDED\x12\x05\x0a\x03abc".as_slice()].concat(),
        ),
        // type "NOPE"
        ("unknown type", b"\x0a\x04NOPE".to_vec()),
        // a field length past the end
        ("truncated", b"\x0a\x05ADDED\x12\x7f\x0a".to_vec()),
    ];
    for (what, bad) in cases {
        let reply = watch_with(bad);
        let server = RawServer::start(move |_| reply.clone()).await;
        let api: Api<Endpoints> = Api::namespaced(server.client(), "default");
        let mut stream = api.watch(&WatchParams::default()).await.unwrap();
        let first = stream.next().await.unwrap();
        assert!(
            matches!(first, Ok(WatchEvent::Added(_))),
            "{what}: {first:?}"
        );
        match stream.next().await {
            Some(Err(Error::Decode { message, .. })) => assert!(!message.is_empty(), "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_oversized_protobuf_frame_is_refused_and_the_stream_goes_on() {
    let cap = capture(WATCH);
    let server = RawServer::start(move |_| Reply::from_capture(&cap)).await;
    let mut config = Config::new(server.url.parse().unwrap());
    config.max_frame_bytes = 700; // the first event's frame is 641 bytes, pb-1's MODIFIED more
    let api: Api<Endpoints> = Api::namespaced(informer::Client::new(config).unwrap(), "default");
    let mut stream = api.watch(&WatchParams::default()).await.unwrap();
    let mut seen = Vec::new();
    while let Some(e) = stream.next().await {
        seen.push(match e {
            Ok(e) => summary(&[e]).remove(0),
            Err(Error::FrameTooLarge { limit }) => format!("too large {limit}"),
            Err(e) => panic!("{e}"),
        });
    }
    assert!(seen.contains(&"too large 700".to_owned()), "{seen:?}");
    assert_eq!(seen.last().unwrap(), "BOOKMARK 88", "{seen:?}");
}

/// The simulator answers protobuf as kube-apiserver does (ConfigMaps, to a client that asks for it
/// first), so every test and convergence scenario on a typed ConfigMap informer runs on it. A
/// ConfigMap with every field the translation writes (labels, annotations, owner references,
/// finalizers, managedFields from a write, data, binaryData) reads the same by GET, LIST and WATCH
/// on both wires, an ERROR event and a paged LIST's token read as on JSON, and the bodies are
/// protobuf where asked (GET, LIST, WATCH), JSON where not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_answers_protobuf_that_reads_as_its_json() {
    use crate::support::raw_client::Conn;
    use informer::client::PostParams;
    use informer::{Client, ConfigMap};
    use informer_sim::Simulator;

    let sim = Simulator::start().await.unwrap();
    let api = |protobuf: bool| {
        let mut config = Config::new(sim.url().parse().unwrap());
        config.protobuf = protobuf;
        Api::<ConfigMap>::namespaced(Client::new(config).unwrap(), "a")
    };
    let (pb, json) = (api(true), api(false));
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "x",
            "namespace": "a",
            "labels": {"app": "web", "tier": "é"},
            "annotations": {"note": "a \"quoted\" <value>"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "u-1", "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["example.com/keep"]
        },
        "data": {"k": "v", "empty": ""},
        "binaryData": {"bin": "AAEC/w=="},
        "immutable": false
    }))
    .unwrap();
    let params = PostParams {
        field_manager: Some("tester".into()),
        ..Default::default()
    };
    let created = json.create(&params, &cm).await.unwrap();
    assert!(created.metadata.managed_fields.is_some());

    // Compared as JSON values: managedFields are kept as raw JSON text, which the protobuf reader
    // writes in Go's field order, as kube-apiserver's JSON has it, and the simulator's JSON in
    // key order.
    let same = |a: &ConfigMap, b: &ConfigMap| {
        assert_eq!(
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap()
        );
    };
    same(&pb.get("x").await.unwrap(), &json.get("x").await.unwrap());
    let (pb_list, json_list) = (
        pb.list(&ListParams::default()).await.unwrap(),
        json.list(&ListParams::default()).await.unwrap(),
    );
    assert_eq!((pb_list.items.len(), json_list.items.len()), (1, 1));
    same(&pb_list.items[0], &json_list.items[0]);
    same(&pb_list.items[0], &created);
    assert_eq!(
        pb_list.metadata.resource_version,
        json_list.metadata.resource_version
    );

    // The same change on both watches.
    let from = WatchParams {
        resource_version: Some(json_list.metadata.resource_version.to_string()),
        ..Default::default()
    };
    let (mut pb_watch, mut json_watch) = (
        pb.watch(&from).await.unwrap(),
        json.watch(&from).await.unwrap(),
    );
    sim.patch(
        "configmaps",
        Some("a"),
        "x",
        &serde_json::json!({"data": {"k": "w"}}),
    )
    .unwrap();
    let next = |e: Option<Result<WatchEvent<ConfigMap>, Error>>| match e {
        Some(Ok(WatchEvent::Modified(cm))) => cm,
        other => panic!("not a MODIFIED event: {other:?}"),
    };
    let t = Duration::from_secs(20);
    let pb_event = next(tokio::time::timeout(t, pb_watch.next()).await.unwrap());
    let json_event = next(tokio::time::timeout(t, json_watch.next()).await.unwrap());
    same(&pb_event, &json_event);
    assert_eq!(&pb_event.data["k"], "w");
    // An ERROR event: a protobuf Status in the frame.
    sim.faults().inject_410();
    for stream in [&mut pb_watch, &mut json_watch] {
        match tokio::time::timeout(t, stream.next()).await.unwrap() {
            Some(Ok(WatchEvent::Error(status))) => assert_eq!(status.code, 410),
            other => panic!("not a 410 ERROR event: {other:?}"),
        }
    }

    // A list in pages: the continue token and the remaining count come through protobuf too.
    let mut second = cm.clone();
    second.metadata.name = "y".into();
    json.create(&params, &second).await.unwrap();
    let first_page = pb.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(first_page.items.len(), 1);
    assert_eq!(first_page.metadata.remaining_item_count, Some(1));
    let token = first_page.metadata.continue_token.clone();
    assert!(!token.is_empty());
    let rest = pb
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items[0].metadata.name, "y");
    assert!(rest.metadata.continue_token.is_empty());

    // What came over the wire: protobuf where the client asked first, JSON otherwise.
    let addr = sim.url().trim_start_matches("http://").parse().unwrap();
    for (accept, content_type, magic) in [
        (
            "application/vnd.kubernetes.protobuf, application/json",
            "application/vnd.kubernetes.protobuf",
            true,
        ),
        ("application/json", "application/json", false),
    ] {
        for path in [
            "/api/v1/namespaces/a/configmaps",
            "/api/v1/namespaces/a/configmaps/x",
        ] {
            let mut conn = Conn::open(addr, "GET", path, &[("Accept", accept)], None).await;
            assert_eq!(conn.header("content-type"), Some(content_type));
            assert_eq!(conn.body().await.starts_with(b"k8s\0"), magic);
        }
    }
    let path = "/api/v1/namespaces/a/configmaps?watch=1&resourceVersion=0";
    let accept = "application/vnd.kubernetes.protobuf;stream=watch, application/json";
    let conn = Conn::open(addr, "GET", path, &[("Accept", accept)], None).await;
    assert_eq!(
        conn.header("content-type"),
        Some("application/vnd.kubernetes.protobuf;stream=watch")
    );
    // Other kinds answer JSON whatever is asked.
    let path = "/api/v1/namespaces/a/pods";
    let accept = "application/vnd.kubernetes.protobuf, application/json";
    let conn = Conn::open(addr, "GET", path, &[("Accept", accept)], None).await;
    assert_eq!(conn.header("content-type"), Some("application/json"));
}

/// A metadata-only view against the simulator: Pods (which it translates to protobuf only in
/// this form) come as `PartialObjectMetadata` by LIST, GET and WATCH, in protobuf when asked and
/// in JSON otherwise, equal both ways and equal to the whole Pod's metadata.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_answers_metadata_only_reads_on_both_wires() {
    use crate::support::raw_client::Conn;
    use informer::client::PostParams;
    use informer::{Client, PartialObjectMetadata, Pod};
    use informer_sim::Simulator;

    let sim = Simulator::start().await.unwrap();
    let client = |protobuf: bool| {
        let mut config = Config::new(sim.url().parse().unwrap());
        config.protobuf = protobuf;
        Client::new(config).unwrap()
    };
    let view = |protobuf: bool| {
        Api::<PartialObjectMetadata>::namespaced_with(client(protobuf), "a", Pod::api_resource())
    };
    let (pb, json) = (view(true), view(false));
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-0", "namespace": "a", "labels": {"app": "web"},
                     "annotations": {"note": "n"}, "finalizers": ["example.com/keep"],
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                          "uid": "u-1", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "n1"}
    }))
    .unwrap();
    let params = PostParams {
        field_manager: Some("tester".into()),
        ..Default::default()
    };
    let created = Api::<Pod>::namespaced(client(false), "a")
        .create(&params, &pod)
        .await
        .unwrap();
    // As JSON values: managedFields are raw JSON text, in Go's field order from protobuf.
    let value = |o: &PartialObjectMetadata| serde_json::to_value(o).unwrap();
    let (pb_list, json_list) = (
        pb.list(&ListParams::default()).await.unwrap(),
        json.list(&ListParams::default()).await.unwrap(),
    );
    assert_eq!((pb_list.items.len(), json_list.items.len()), (1, 1));
    assert_eq!(value(&pb_list.items[0]), value(&json_list.items[0]));
    let partial = &pb_list.items[0];
    assert_eq!(
        (partial.api_version.as_str(), partial.kind.as_str()),
        ("meta.k8s.io/v1", "PartialObjectMetadata")
    );
    assert_eq!(
        serde_json::to_value(&partial.metadata).unwrap(),
        serde_json::to_value(&created.metadata).unwrap()
    );
    assert_eq!(value(&pb.get("web-0").await.unwrap()), value(partial));
    assert_eq!(value(&json.get("web-0").await.unwrap()), value(partial));
    let from = WatchParams {
        resource_version: Some("0".into()),
        ..Default::default()
    };
    let t = Duration::from_secs(20);
    for api in [&pb, &json] {
        let mut events = api.watch(&from).await.unwrap();
        match tokio::time::timeout(t, events.next()).await.unwrap() {
            Some(Ok(WatchEvent::Added(o))) => assert_eq!(value(&o), value(partial)),
            other => panic!("not an ADDED event: {other:?}"),
        }
    }

    // What came over the wire: protobuf only where asked, and only metadata either way.
    let addr = sim.url().trim_start_matches("http://").parse().unwrap();
    let meta = |kind: &str, protobuf: bool| {
        let json = format!("application/json;as={kind};g=meta.k8s.io;v=v1");
        match protobuf {
            true => {
                format!("application/vnd.kubernetes.protobuf;as={kind};g=meta.k8s.io;v=v1, {json}")
            }
            false => json,
        }
    };
    for protobuf in [true, false] {
        for (path, kind) in [
            ("/api/v1/namespaces/a/pods", "PartialObjectMetadataList"),
            ("/api/v1/namespaces/a/pods/web-0", "PartialObjectMetadata"),
            (
                "/api/v1/namespaces/a/pods?watch=1&resourceVersion=0&timeoutSeconds=1",
                "PartialObjectMetadata",
            ),
        ] {
            let accept = meta(kind, protobuf);
            let mut conn = Conn::open(addr, "GET", path, &[("Accept", &accept)], None).await;
            let content_type = conn.header("content-type").unwrap_or("").to_owned();
            assert_eq!(
                content_type.starts_with("application/vnd.kubernetes.protobuf"),
                protobuf,
                "{path}"
            );
            let body = conn.body().await;
            assert!(body.windows(12).any(|w| w == b"PartialObjec"), "{path}");
            assert!(
                !body.windows(5).any(|w| w == b"nginx"),
                "{path}: the spec came too"
            );
        }
    }
}
