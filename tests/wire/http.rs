//! The client over real loopback HTTP against a raw server that replays real apiserver bytes.

use crate::support::raw_server::{Body, RawServer, Reply, capture};
use informer::client::PostParams;
use informer::client::WatchEvent;
use informer::{Api, ConfigMap, DynamicObject, Endpoints, Error, ListParams, WatchParams};
use std::time::Duration;

const WATCH: &str = "wire/real-1.20-watch-endpoints-from-list-rv.http";

async fn collect(api: &Api<Endpoints>) -> (Vec<WatchEvent<Endpoints>>, Option<Error>) {
    let mut stream = api
        .watch(&WatchParams::default().resource_version("79"))
        .await
        .unwrap();
    let mut events = Vec::new();
    let fut = async {
        while let Some(e) = stream.next().await {
            match e {
                Ok(e) => events.push(e),
                Err(e) => return Some(e),
            }
        }
        None
    };
    let err = tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("watch hung");
    (events, err)
}

fn rvs(events: &[WatchEvent<Endpoints>]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e.resource_version().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn watch_replays_real_bytes_in_any_chunking() {
    let cap = capture(WATCH);
    for size in [0usize, 1, 2, 3, 7, 64, 100_000] {
        let reply = if size == 0 {
            Reply::from_capture(&cap)
        } else {
            Reply::rechunked(&cap, size)
        };
        let server = RawServer::start(move |_| reply.clone()).await;
        let api: Api<Endpoints> = Api::namespaced(server.client(), "default");
        let (events, err) = collect(&api).await;
        assert!(err.is_none(), "chunk size {size}: {err:?}");
        assert_eq!(
            rvs(&events),
            ["80", "81", "82", "83", "84", "84"],
            "chunk size {size}"
        );
        let line = &server.request_lines()[0];
        assert!(
            line.starts_with(
                "GET /api/v1/namespaces/default/endpoints?resourceVersion=79&watch=true "
            ),
            "{line}"
        );
        let request = server.requests.lock().unwrap()[0].to_ascii_lowercase();
        assert!(
            !request.contains("accept-encoding"),
            "a watch must not ask for gzip"
        );
    }
}

#[tokio::test]
async fn watch_error_410_is_an_event_and_future_rv_is_a_clean_empty_end() {
    let cap = capture("wire/real-1.20-watch-endpoints-rv-too-old-410.http");
    let server = RawServer::start(move |_| Reply::from_capture(&cap)).await;
    let (events, err) = collect(&Api::namespaced(server.client(), "default")).await;
    assert!(err.is_none());
    match &events[..] {
        [WatchEvent::Error(s)] => {
            assert!(s.is_expired() && s.message.starts_with("too old resource version"))
        }
        other => panic!("{other:?}"),
    }

    let cap = capture("wire/real-1.20-watch-endpoints-rv-in-future-empty.http");
    let server = RawServer::start(move |_| Reply::from_capture(&cap)).await;
    let (events, err) = collect(&Api::namespaced(server.client(), "default")).await;
    assert!(events.is_empty() && err.is_none());
}

#[tokio::test]
async fn watch_cut_mid_frame_is_unexpected_eof_and_a_dropped_connection_is_transport() {
    let body = capture(WATCH).body;
    let cut = body.len() / 2;
    // The chunked body ends properly, but inside a JSON value.
    let head = capture(WATCH).head;
    let clean_cut = Reply {
        head: head.clone(),
        body: Body::Chunks(vec![body[..cut].to_vec()]),
    };
    let server = RawServer::start(move |_| clean_cut.clone()).await;
    let (events, err) = collect(&Api::namespaced(server.client(), "default")).await;
    assert!(!events.is_empty());
    assert!(
        matches!(err, Some(Error::UnexpectedEof { buffered }) if buffered > 0),
        "{err:?}"
    );

    // The connection closes with no terminating chunk.
    let dropped = Reply {
        head,
        body: Body::ChunksThenCut(vec![body[..cut].to_vec()]),
    };
    let server = RawServer::start(move |_| dropped.clone()).await;
    let (_, err) = collect(&Api::namespaced(server.client(), "default")).await;
    let err = err.expect("an error");
    assert!(matches!(err, Error::Transport { .. }), "{err:?}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn garbage_and_oversized_frames_over_http() {
    let mut body = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n".to_vec();
    body.extend_from_slice(
        b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"big\"},\"x\":\"",
    );
    body.extend(std::iter::repeat_n(b'x', 5000));
    body.extend_from_slice(b"\"}}\nnot json\n");
    body.extend_from_slice(b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n");
    let reply = Reply {
        head: vec![
            "HTTP/1.1 200 OK".into(),
            "Content-Type: application/json".into(),
        ],
        body: Body::Chunks(body.chunks(333).map(<[u8]>::to_vec).collect()),
    };
    let server = RawServer::start(move |_| reply.clone()).await;
    let mut config = informer::Config::new(server.url.parse().unwrap());
    config.max_frame_bytes = 1024;
    let api: Api<Endpoints> = Api::all(informer::Client::new(config).unwrap());
    let mut stream = api.watch(&WatchParams::default()).await.unwrap();
    let mut seen = Vec::new();
    while let Some(r) = stream.next().await {
        seen.push(match r {
            Ok(e) => format!("event {:?}", e.resource_version()),
            Err(Error::FrameTooLarge { limit }) => format!("too large {limit}"),
            Err(Error::Decode { offset, .. }) => format!("decode at {offset}"),
            Err(e) => panic!("{e}"),
        });
    }
    // `not json` is two scalar frames (values are delimited by whitespace), each a decode error.
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert_eq!(seen[..2], ["event Some(\"1\")", "too large 1024"]);
    for s in &seen[2..4] {
        let offset: u64 = s.strip_prefix("decode at ").unwrap().parse().unwrap();
        assert!((5130..5145).contains(&offset), "{s}");
    }
    assert_eq!(seen[4], "event Some(\"2\")");
}

#[tokio::test]
async fn list_pages_follow_the_continue_token() {
    let page1 = capture("wire/real-1.20-list-endpoints-limit2-page1.http");
    let page2 = capture("wire/real-1.20-list-endpoints-limit2-page2.http");
    let token1 =
        serde_json::from_slice::<serde_json::Value>(&page1.body).unwrap()["metadata"]["continue"]
            .as_str()
            .unwrap()
            .to_owned();
    let server = RawServer::start(move |line| {
        let query = line.split(' ').nth(1).unwrap();
        if query.contains(&format!("continue={token1}")) {
            Reply::from_capture(&page2)
        } else if query.contains("continue=") {
            // the last page (not captured): no continue token
            Reply::json(200, br#"{"kind":"EndpointsList","apiVersion":"v1","metadata":{"resourceVersion":"79"},"items":[]}"#)
        } else {
            Reply::from_capture(&page1)
        }
    })
    .await;
    let api: Api<Endpoints> = Api::namespaced(server.client(), "default");
    let mut pager = api.pager(ListParams::default().limit(2).resource_version("0"));
    let mut names = Vec::new();
    let mut list_rvs = Vec::new();
    while let Some(page) = pager.next_page().await {
        let page = page.unwrap();
        list_rvs.push(page.metadata.resource_version.to_string());
        names.extend(page.items.into_iter().map(|e| e.metadata.name));
    }
    assert_eq!(names.len(), 4);
    assert_eq!(list_rvs, ["79", "79", "79"]);
    let lines = server.request_lines();
    assert!(
        lines[0].contains("?limit=2&resourceVersion=0 "),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("?continue=") && !lines[1].contains("resourceVersion"),
        "{}",
        lines[1]
    );
}

#[tokio::test]
async fn error_responses_become_typed_errors() {
    let not_found = capture("wire/real-1.20-get-missing-404.http");
    let gone = capture("wire/real-1.20-list-continue-token-compacted-410.http");
    let exact_gone = capture("wire/real-1.20-list-rv-exact-compacted-410.http");
    let status = |code: u16, reason: &str| {
        format!(
            r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"m{code}","reason":"{reason}","code":{code}}}"#
        )
    };
    let s401 = status(401, "Unauthorized");
    let s403 = status(403, "Forbidden");
    let s429 = status(429, "TooManyRequests");
    let s500 = status(500, "InternalError");
    let server = RawServer::start(move |line| {
        let path = line.split(' ').nth(1).unwrap();
        match path.trim_start_matches("/api/v1/namespaces/default/endpoints/") {
            "missing" => Reply::from_capture(&not_found),
            "gone" => Reply::from_capture(&gone),
            "exact" => Reply::from_capture(&exact_gone),
            "401" => Reply::json(401, s401.as_bytes()),
            "403" => Reply::json(403, s403.as_bytes()),
            "429" => Reply::json(429, s429.as_bytes()).with_header("Retry-After: 3"),
            "500" => Reply::json(500, s500.as_bytes()),
            "pretty" => Reply::json(
                500,
                b"{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"status\": \"Failure\",\n  \"message\": \"etcdserver: request timed out\",\n  \"code\": 500\n}\n",
            ),
            "html" => Reply {
                head: vec!["HTTP/1.1 502 Bad Gateway".into(), "Content-Type: text/html".into()],
                body: Body::Fixed(b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body></html>".to_vec()),
            },
            "not-json" => Reply::json(200, b"{\"kind\":\"Endpoints\",\"metadata\":"),
            _ => Reply::json(404, b"{}"),
        }
    })
    .await;
    let api: Api<Endpoints> = Api::namespaced(server.client(), "default");

    let e = api.get("missing").await.unwrap_err();
    assert_eq!(e.http_code(), Some(404));
    assert_eq!(e.status().unwrap().reason, "NotFound");

    let e = api.get("gone").await.unwrap_err();
    assert!(e.is_expired(), "{e}");
    assert!(
        !e.status().unwrap().metadata.continue_token.is_empty(),
        "the inconsistent-continue token"
    );
    assert!(api.get("exact").await.unwrap_err().is_expired());

    for (name, code) in [("401", 401), ("403", 403), ("500", 500)] {
        let e = api.get(name).await.unwrap_err();
        assert!(matches!(e, Error::Api(_)), "{e:?}");
        assert_eq!(e.http_code(), Some(code));
        assert_eq!(e.status().unwrap().message, format!("m{code}"));
    }
    let e = api.get("429").await.unwrap_err();
    assert!(e.is_retryable());
    assert_eq!(
        e.retry_after_seconds(),
        Some(3),
        "Retry-After header reaches the Status"
    );

    let e = api.get("pretty").await.unwrap_err();
    assert_eq!(e.status().unwrap().message, "etcdserver: request timed out");

    let e = api.get("html").await.unwrap_err();
    match &e {
        Error::Http {
            code: 502, excerpt, ..
        } => {
            assert!(excerpt.contains("502 Bad Gateway"), "{excerpt}")
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("not a Kubernetes Status"));

    let e = api.get("not-json").await.unwrap_err();
    assert!(matches!(e, Error::Decode { offset: 30, .. }), "{e:?}");
}

#[tokio::test]
async fn dynamic_objects_and_cluster_scoped_paths() {
    let server = RawServer::start(|_| {
        Reply::json(200, br#"{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"w"},"spec":{"size":3}}]}"#)
    })
    .await;
    let ar = informer::ApiResource::new("example.com", "v1", "Widget", "widgets", false);
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "ignored", ar);
    let list = api
        .list(
            &ListParams::default()
                .labels("tier=web,env!=prod")
                .fields("metadata.name=w"),
        )
        .await
        .unwrap();
    assert_eq!(list.items[0].data["spec"]["size"], 3);
    let line = &server.request_lines()[0];
    assert_eq!(
        line,
        "GET /apis/example.com/v1/widgets?fieldSelector=metadata.name%3Dw&labelSelector=tier%3Dweb%2Cenv%21%3Dprod HTTP/1.1"
    );
}

#[tokio::test]
async fn connection_refused_is_a_retryable_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let api: Api<Endpoints> =
        Api::all(informer::Client::new(informer::Config::new(url.parse().unwrap())).unwrap());
    let e = api.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(e, Error::Transport { .. }) && e.is_retryable(),
        "{e:?}"
    );
    assert!(e.to_string().to_lowercase().contains("refused"), "{e}");
}

const CM: &str = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c1","namespace":"a","resourceVersion":"5"}}"#;

fn redirect(code: u16, location: &str) -> Reply {
    Reply::json(code, "").with_header(&format!("Location: {location}"))
}

#[tokio::test]
async fn redirects_under_the_server_url_are_followed_and_the_others_are_errors() {
    let server = RawServer::start(|line| {
        let path = line.split(' ').nth(1).unwrap_or("");
        let cms = "/api/v1/namespaces/a/configmaps";
        match (line.split(' ').next().unwrap_or(""), path.strip_prefix(cms)) {
            ("GET", Some("/moved")) => redirect(302, "/api/v1/namespaces/a/configmaps/c1"),
            ("GET", Some("/absolute")) => redirect(301, "/api/v1/namespaces/a/configmaps/moved"),
            ("GET", Some("/away")) => redirect(302, "http://elsewhere.invalid/api/v1/namespaces/a/configmaps/c1"),
            ("GET", Some("/dots")) => redirect(302, "/api/v1/namespaces/a/configmaps/../../../secrets"),
            ("GET", Some("/loop")) => redirect(307, "/api/v1/namespaces/a/configmaps/loop"),
            ("GET", Some("/c1")) => Reply::json(200, CM),
            ("POST", Some("?fieldManager=m")) => redirect(302, "/api/v1/namespaces/a/configmaps?fieldManager=m&x=1"),
            ("POST", Some("?fieldManager=temporary")) => redirect(307, "/api/v1/namespaces/a/configmaps?fieldManager=m&moved=1"),
            ("POST", Some("?fieldManager=m&moved=1")) => Reply::json(201, CM),
            _ => Reply::json(404, r#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}"#),
        }
    })
    .await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "a");

    // Followed: a 302 of a GET, and two in a row (301, then 302).
    assert_eq!(api.get("moved").await.unwrap().metadata.name, "c1");
    assert_eq!(api.get("absolute").await.unwrap().metadata.name, "c1");
    let lines = server.request_lines();
    assert!(
        lines[1].starts_with("GET /api/v1/namespaces/a/configmaps/c1 "),
        "{lines:?}"
    );

    // Not followed: another origin, a dot segment, a loop past 10, a 302 of a write.
    let away = api.get("away").await.unwrap_err();
    assert!(matches!(away, Error::Http { code: 302, .. }), "{away}");
    assert!(
        away.to_string().contains("outside the server URL"),
        "{away}"
    );
    let dots = api.get("dots").await.unwrap_err();
    assert!(dots.to_string().contains("dot segment"), "{dots}");
    let before = server.request_lines().len();
    let looping = api.get("loop").await.unwrap_err();
    assert!(
        looping.to_string().contains("stopped after 10 redirects"),
        "{looping}"
    );
    assert_eq!(
        server.request_lines().len() - before,
        10,
        "the first request and 9 redirects followed, as Go does"
    );
    let mut cm = ConfigMap::default();
    cm.metadata.name = "c1".into();
    let post = |manager: &str| PostParams {
        field_manager: Some(manager.into()),
        ..Default::default()
    };
    let write = api.create(&post("m"), &cm).await.unwrap_err();
    assert!(
        write.to_string().contains("would turn the POST into a GET"),
        "{write}"
    );

    // A 307 keeps the method and the body.
    let before = server.request_lines().len();
    assert_eq!(
        api.create(&post("temporary"), &cm)
            .await
            .unwrap()
            .metadata
            .name,
        "c1"
    );
    let requests = server.requests.lock().unwrap()[before + 1..].to_vec();
    assert!(
        requests[0].starts_with("POST /api/v1/namespaces/a/configmaps?fieldManager=m&moved=1 "),
        "{requests:?}"
    );
}
