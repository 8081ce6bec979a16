//! Service discovery against the real kube-apiserver 1.20 (issue #46): EndpointSlices served only
//! as `discovery.k8s.io/v1beta1` (the default source falls back to it), and RBAC granting
//! EndpointSlices only (Services refused with 403: discovery serves from the slices alone).

use std::time::Duration;

use informer::discovery::{DiscoveryOptions, ServiceDiscovery, ServiceState, Snapshot};
use informer::{Client, Error};
use serde_json::{Value, json};

use crate::support::real_apiserver::*;

fn options() -> DiscoveryOptions {
    DiscoveryOptions {
        reflector: fast_options(),
        ..Default::default()
    }
}

fn addrs(s: &Snapshot) -> Vec<String> {
    s.instances
        .iter()
        .map(|i| i.socket_addr().to_string())
        .collect()
}

/// The snapshot of `ns/web` port `http` once it is ready. A sync does not promise it at once:
/// the informers' first lists read the watch cache (resourceVersion `"0"`, as client-go's
/// reflector does), which may not hold yet a slice written a moment before; the watch brings it.
async fn ready_web(d: &ServiceDiscovery, ns: &str) -> std::sync::Arc<Snapshot> {
    let mut sub = d.subscribe(ns, "web", "http");
    let ready = async {
        loop {
            let s = d.instances(ns, "web", "http");
            if s.state == ServiceState::Ready {
                return s;
            }
            sub.changed().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(20), ready)
        .await
        .unwrap_or_else(|_| panic!("not ready: {:?}", d.instances(ns, "web", "http")))
}

/// Service `web` (port `http`) and one v1beta1 EndpointSlice of it, written by hand (no
/// controllers run on this server).
async fn web_with_v1beta1_slice(client: &Client, ns: &str) {
    post(
        client,
        &format!("/api/v1/namespaces/{ns}/services"),
        json!({"metadata": {"name": "web"},
               "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}),
    )
    .await;
    post(
        client,
        &format!("/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices"),
        json!({"metadata": {"name": "web-abc", "labels": {"kubernetes.io/service-name": "web"}},
               "addressType": "IPv4",
               "endpoints": [
                   {"addresses": ["10.0.0.1"], "conditions": {"ready": true},
                    "topology": {"kubernetes.io/hostname": "n1", "topology.kubernetes.io/zone": "z1"}},
                   {"addresses": ["10.0.0.2"], "conditions": {"ready": false}}
               ],
               "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_reads_v1beta1_endpoint_slices_where_v1_is_not_served() {
    let real = real_or_skip!("discovery_reads_v1beta1_endpoint_slices_where_v1_is_not_served");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "disc-beta").await;
        web_with_v1beta1_slice(&client, &ns).await;

        let d = ServiceDiscovery::new(client.clone(), options());
        assert!(
            d.wait_for_sync(&ns, Duration::from_secs(30)).await,
            "not synced: {:?}",
            d.metrics()
        );
        let s = ready_web(&d, &ns).await;
        assert_eq!(addrs(&s), ["10.0.0.1:8080"]);
        assert_eq!(s.instances[0].zone.as_deref(), Some("z1"));
        assert_eq!(s.instances[0].node.as_deref(), Some("n1"));
        assert!(d.metrics().services_forbidden.is_empty());

        // Followed: the second endpoint turns ready.
        let mut sub = d.subscribe(&ns, "web", "http");
        sub.changed().await.unwrap();
        let path = format!("/apis/discovery.k8s.io/v1beta1/namespaces/{ns}/endpointslices/web-abc");
        let mut slice = get(&client, &path).await;
        slice["endpoints"][1]["conditions"]["ready"] = json!(true);
        put(&client, &path, slice).await;
        let change = tokio::time::timeout(Duration::from_secs(20), sub.changed())
            .await
            .expect("the update is seen")
            .unwrap();
        assert_eq!(addrs(&change.snapshot), ["10.0.0.1:8080", "10.0.0.2:8080"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_rbac_on_endpoint_slices_only_discovery_serves_from_the_slices() {
    let real = real_or_skip!("with_rbac_on_endpoint_slices_only_discovery_serves_from_the_slices");
    bounded(60, async {
        let Ok(limited_token) = std::env::var("REAL_APISERVER_LIMITED_TOKEN") else {
            println!("skipped: REAL_APISERVER_LIMITED_TOKEN is not set; run: {HOW_TO_RUN}");
            return;
        };
        let admin = real.client();
        let ns = namespace(&admin, "disc-rbac").await;
        web_with_v1beta1_slice(&admin, &ns).await;
        post(
            &admin,
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
            json!({"metadata": {"name": "slices-reader"},
                   "rules": [{"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                              "verbs": ["get", "list", "watch"]}]}),
        )
        .await;
        post(
            &admin,
            &format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
            json!({"metadata": {"name": "limited-slices"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "slices-reader"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "limited"}]}),
        )
        .await;
        let mut config = real.config();
        config.auth = informer::config::Auth::Bearer(informer::config::Secret::new(limited_token));
        let limited = Client::new(config).unwrap();
        // The role holds only once RBAC decides; with `--authorization-mode=AlwaysAllow` (the
        // start script's default) every user may read Services.
        let services = limited
            .request::<Value>(
                hyper::Method::GET,
                &format!("/api/v1/namespaces/{ns}/services"),
                None,
            )
            .await;
        match services {
            Ok(_) => {
                println!(
                    "with_rbac_on_endpoint_slices_only_discovery_serves_from_the_slices: skipped, \
                     the real apiserver does not authorize with RBAC (user \"limited\" may list \
                     Services); start it with REAL_APISERVER_AUTHORIZATION_MODE=RBAC"
                );
                return;
            }
            Err(Error::Api(s)) if s.code == 403 => {}
            Err(e) => panic!("listing Services as \"limited\": {e}"),
        }

        let d = ServiceDiscovery::new(limited, options());
        assert!(
            d.wait_for_sync(&ns, Duration::from_secs(30)).await,
            "not synced: {:?}",
            d.metrics()
        );
        let s = ready_web(&d, &ns).await;
        assert_eq!(addrs(&s), ["10.0.0.1:8080"]);
        // As with `watch_services: false`: no slice, no Service.
        assert_eq!(
            d.instances(&ns, "other", "http").state,
            ServiceState::ServiceAbsent
        );
        let m = d.metrics();
        let message = m.services_forbidden.get(&ns).expect("degraded");
        assert!(
            message.contains("services is forbidden: User \"limited\" cannot")
                && message.contains(&format!("resource \"services\" in API group \"\" in the namespace \"{ns}\"")),
            "{message}"
        );
    })
    .await;
}
