//! No name or namespace reaches another path or subresource (issue #15 item 12): names are
//! checked as client-go checks them and percent-encoded, namespaces checked as DNS-1123 labels,
//! and what is refused is never sent. Checked against a raw server that records request lines.

use crate::support::raw_server::{RawServer, Reply};
use informer::{Api, ConfigMap, Error, ListParams, WatchParams};

fn configmap_reply(_line: &str) -> Reply {
    Reply::json(
        200,
        br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"a"}}"#,
    )
}

#[tokio::test]
async fn names_that_would_leave_their_path_segment_are_refused_and_never_sent() {
    let server = RawServer::start(configmap_reply).await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "a");
    for bad in [
        "../secrets",
        "a/b",
        "%2e%2e",
        "..",
        ".",
        "",
        "a%2Fb",
        "x/../../secrets",
    ] {
        let e = api.get(bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidName(_)), "{bad:?}: {e:?}");
        assert!(e.to_string().contains("invalid name"), "{e}");
    }
    assert!(
        server.request_lines().is_empty(),
        "{:?}",
        server.request_lines()
    );
}

#[tokio::test]
async fn other_characters_in_names_are_percent_encoded() {
    let server = RawServer::start(configmap_reply).await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "a");
    for name in ["a?x=1", "a#frag", "a b", "system:controller:job", "é"] {
        api.get(name).await.unwrap();
    }
    assert_eq!(
        server.request_lines(),
        [
            "GET /api/v1/namespaces/a/configmaps/a%3Fx%3D1 HTTP/1.1",
            "GET /api/v1/namespaces/a/configmaps/a%23frag HTTP/1.1",
            "GET /api/v1/namespaces/a/configmaps/a%20b HTTP/1.1",
            "GET /api/v1/namespaces/a/configmaps/system:controller:job HTTP/1.1",
            "GET /api/v1/namespaces/a/configmaps/%C3%A9 HTTP/1.1",
        ]
    );
}

#[tokio::test]
async fn namespaces_must_be_dns_1123_labels() {
    let server = RawServer::start(configmap_reply).await;
    let long = "a".repeat(64);
    for bad in [
        "../kube-system",
        "a/b",
        "a?x=1",
        "%2e%2e",
        "A",
        "-a",
        "a-",
        "",
        "a.b",
        &long,
    ] {
        let api: Api<ConfigMap> = Api::namespaced(server.client(), bad);
        let e = api.get("x").await.unwrap_err();
        assert!(matches!(e, Error::InvalidName(_)), "{bad:?}: {e:?}");
        let e = api.list(&ListParams::default()).await.unwrap_err();
        assert!(matches!(e, Error::InvalidName(_)), "{bad:?}: {e:?}");
        let e = api.watch(&WatchParams::default()).await.unwrap_err();
        assert!(matches!(e, Error::InvalidName(_)), "{bad:?}: {e:?}");
    }
    assert!(
        server.request_lines().is_empty(),
        "{:?}",
        server.request_lines()
    );
    let api: Api<ConfigMap> = Api::namespaced(server.client(), &"a".repeat(63));
    api.get("x").await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "kube-system-2");
    api.get("x").await.unwrap();
    assert_eq!(server.request_lines().len(), 2);
}
