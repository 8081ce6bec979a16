//! Writes as the apiserver answers them, over real loopback HTTP: the status and scale
//! subresources, the four patch types, dryRun, server-side apply and managedFields, finalizers
//! and DeleteOptions, deletecollection, and CRDs served once created.

use crate::support::raw_client::{Conn, T, send_json};
use informer_sim::Simulator;
use serde_json::{Value, json};
use tokio::time::timeout;

const CM: &str = "/api/v1/namespaces/default/configmaps";
const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn widget_crd() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas"}}}]}})
}

async fn with_crd() -> Simulator {
    let sim = Simulator::start().await.unwrap();
    let (s, crd) = send_json(sim.addr(), "POST", CRDS, JSON, &widget_crd()).await;
    assert_eq!(s, 201, "{crd}");
    sim
}

#[tokio::test]
async fn crd_is_served_once_created_and_stops_when_deleted() {
    timeout(T * 3, async {
        let sim = with_crd().await;
        let addr = sim.addr();
        let (_, crd) = send_json(
            addr,
            "GET",
            &format!("{CRDS}/widgets.example.com"),
            JSON,
            &json!(null),
        )
        .await;
        let types: Vec<&str> = crd["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["NamesAccepted", "Established"]);
        assert_eq!(crd["status"]["acceptedNames"]["kind"], "Widget");
        let (s, st) = send_json(addr, "POST", CRDS, JSON, &widget_crd()).await;
        assert_eq!((s, st["reason"].as_str()), (409, Some("AlreadyExists")));
        let (_, disc) = send_json(addr, "GET", "/apis/example.com/v1", JSON, &json!(null)).await;
        let names: Vec<&str> = disc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["widgets", "widgets/status", "widgets/scale"]);
        let (s, _) = send_json(
            addr,
            "POST",
            WIDGETS,
            JSON,
            &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}),
        )
        .await;
        assert_eq!(s, 201);
        let (s, _) = send_json(
            addr,
            "DELETE",
            &format!("{CRDS}/widgets.example.com"),
            JSON,
            &json!({}),
        )
        .await;
        assert_eq!(s, 200);
        let (s, _) = send_json(addr, "GET", WIDGETS, JSON, &json!(null)).await;
        assert_eq!(s, 404);
        let (s, _) = send_json(addr, "GET", "/apis/example.com/v1", JSON, &json!(null)).await;
        assert_eq!(s, 404);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn status_subresource_splits_spec_and_status() {
    timeout(T * 3, async {
        let sim = with_crd().await;
        let addr = sim.addr();
        let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                       "spec": {"size": 1}, "status": {"ready": true}});
        let (_, created) = send_json(addr, "POST", WIDGETS, JSON, &w).await;
        assert!(created.get("status").is_none(), "create drops status: {created}");
        assert_eq!(created["metadata"]["generation"], 1);
        let url = format!("{WIDGETS}/w/status");
        let (s, st) = send_json(addr, "PATCH", &url, MERGE, &json!({"status": {"ready": true}, "spec": {"size": 9}, "metadata": {"labels": {"a": "b"}}})).await;
        assert_eq!(s, 200);
        assert_eq!(st["status"]["ready"], true);
        assert_eq!(st["spec"]["size"], 1, "status writes keep spec");
        assert!(st["metadata"].get("labels").is_none(), "CR status writes keep metadata");
        assert_eq!(st["metadata"]["generation"], 1);
        let (_, main) = send_json(addr, "PATCH", &format!("{WIDGETS}/w"), MERGE, &json!({"spec": {"size": 2}, "status": {"ready": false}})).await;
        assert_eq!(main["status"]["ready"], true, "main writes keep status");
        assert_eq!(main["metadata"]["generation"], 2);
        // A resource without a status subresource: 404.
        sim.create("configmaps", Some("default"), json!({"metadata": {"name": "c"}})).unwrap();
        let (s, _) = send_json(addr, "GET", &format!("{CM}/c/status"), JSON, &json!(null)).await;
        assert_eq!(s, 404);
        // Scale of the CR.
        let (s, scale) = send_json(addr, "PUT", &format!("{WIDGETS}/w/scale"), JSON, &json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "w"}, "spec": {"replicas": 3}})).await;
        assert_eq!(s, 200, "{scale}");
        assert_eq!(scale["spec"]["replicas"], 3);
        let w = sim.get("widgets", Some("default"), "w").unwrap();
        assert_eq!(w["spec"]["replicas"], 3);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn deployment_scale() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        let d = json!({"metadata": {"name": "web"}, "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
        let (s, _) = send_json(addr, "POST", "/apis/apps/v1/namespaces/default/deployments", JSON, &d).await;
        assert_eq!(s, 201);
        let url = "/apis/apps/v1/namespaces/default/deployments/web/scale";
        let (_, scale) = send_json(addr, "GET", url, JSON, &json!(null)).await;
        assert_eq!(scale["kind"], "Scale");
        assert_eq!(scale["status"]["selector"], "app=web");
        let mut stale = scale.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        stale["spec"]["replicas"] = json!(5);
        let (s, _) = send_json(addr, "PUT", url, JSON, &stale).await;
        assert_eq!(s, 409);
        let (s, p) = send_json(addr, "PATCH", url, MERGE, &json!({"spec": {"replicas": 4}})).await;
        assert_eq!((s, p["spec"]["replicas"].as_i64()), (200, Some(4)));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn patch_types() {
    timeout(T * 3, async {
        let sim = with_crd().await;
        let addr = sim.addr();
        sim.create("configmaps", Some("default"), json!({"metadata": {"name": "c"}, "data": {"a": "1"}})).unwrap();
        let url = format!("{CM}/c");
        let (s, p) = send_json(addr, "PATCH", &url, "application/json-patch+json", &json!([{"op": "add", "path": "/data/b", "value": "2"}])).await;
        assert_eq!((s, p["data"]["b"].as_str()), (200, Some("2")));
        let (s, st) = send_json(addr, "PATCH", &url, "application/json-patch+json", &json!([{"op": "test", "path": "/data/a", "value": "9"}])).await;
        assert_eq!((s, st["reason"].as_str()), (422, Some("Invalid")));
        // No causes: the 1.20 server drops the patch library's error (the real-apiserver refusals test).
        assert!(st["details"]["causes"].is_null(), "{st}");
        let (s, _) = send_json(addr, "PATCH", &format!("{CM}/missing"), MERGE, &json!({})).await;
        assert_eq!(s, 404);
        // Strategic merge on a pod merges containers by name.
        sim.create("pods", Some("default"), json!({"metadata": {"name": "p", "finalizers": ["a"]}, "spec": {"containers": [{"name": "c", "image": "x"}]}})).unwrap();
        let (s, p) = send_json(addr, "PATCH", "/api/v1/namespaces/default/pods/p", "application/strategic-merge-patch+json",
            &json!({"metadata": {"finalizers": ["b"]}, "spec": {"containers": [{"name": "d", "image": "y"}]}})).await;
        assert_eq!(s, 200);
        assert_eq!(p["spec"]["containers"].as_array().unwrap().len(), 2);
        assert_eq!(p["metadata"]["finalizers"], json!(["a", "b"]));
        // ...and is refused for custom resources.
        send_json(addr, "POST", WIDGETS, JSON, &json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})).await;
        let (s, st) = send_json(addr, "PATCH", &format!("{WIDGETS}/w"), "application/strategic-merge-patch+json", &json!({})).await;
        assert_eq!((s, st["reason"].as_str()), (415, Some("UnsupportedMediaType")));
        assert_eq!(st["message"], "415: Unsupported Media Type");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn dry_run_and_field_validation() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        let rv = sim.resource_version();
        let (s, c) = send_json(addr, "POST", &format!("{CM}?dryRun=All"), JSON, &json!({"metadata": {"name": "c"}})).await;
        assert_eq!(s, 201);
        assert_eq!(c["metadata"]["uid"].as_str().unwrap().len(), 36);
        assert!(c["metadata"].get("resourceVersion").is_none());
        assert_eq!(sim.resource_version(), rv);
        assert_eq!(sim.get("configmaps", Some("default"), "c").unwrap_err().code, 404);
        let (s, st) = send_json(addr, "POST", &format!("{CM}?dryRun=Bogus"), JSON, &json!({"metadata": {"name": "c"}})).await;
        assert_eq!(s, 422);
        assert_eq!(st["message"], "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Bogus\"}: supported values: \"All\"");
        let (s, _) = send_json(addr, "POST", &format!("{CM}?fieldValidation=Strict"), JSON, &json!({"metadata": {"name": "c"}})).await;
        assert_eq!(s, 201);
        let (s, _) = send_json(addr, "POST", &format!("{CM}?fieldValidation=Loose"), JSON, &json!({"metadata": {"name": "d"}})).await;
        assert_eq!(s, 422);
        let rv = sim.resource_version();
        let (s, _) = send_json(addr, "DELETE", &format!("{CM}/c?dryRun=All"), JSON, &json!({})).await;
        assert_eq!(s, 200);
        let (s, _) = send_json(addr, "PATCH", &format!("{CM}/c?dryRun=All"), MERGE, &json!({"data": {"x": "y"}})).await;
        assert_eq!(s, 200);
        assert_eq!(sim.resource_version(), rv);
        assert!(sim.get("configmaps", Some("default"), "c").unwrap().get("data").is_none());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn server_side_apply() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        let cfg = |v: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"key": v, "size": "1"}});
        let url = format!("{CM}/c");
        let (s, st) = send_json(addr, "PATCH", &url, APPLY, &cfg("a")).await;
        assert_eq!(s, 422);
        assert_eq!(st["message"], "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch");
        let (s, c) = send_json(addr, "PATCH", &format!("{url}?fieldManager=op"), APPLY, &cfg("a")).await;
        assert_eq!(s, 201, "apply creates: {c}");
        let mf = &c["metadata"]["managedFields"][0];
        assert_eq!((mf["manager"].as_str(), mf["operation"].as_str()), (Some("op"), Some("Apply")));
        assert_eq!(mf["fieldsV1"], json!({"f:data": {".": {}, "f:key": {}, "f:size": {}}}));
        // Another writer (an Update by "sim-test", the User-Agent's prefix) takes data.key.
        let (s, u) = send_json(addr, "PATCH", &url, MERGE, &json!({"data": {"key": "b"}})).await;
        assert_eq!(s, 200);
        let managers: Vec<&str> = u["metadata"]["managedFields"].as_array().unwrap().iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(managers, ["op", "sim-test"]);
        let (s, st) = send_json(addr, "PATCH", &format!("{url}?fieldManager=op"), APPLY, &cfg("a")).await;
        assert_eq!((s, st["reason"].as_str()), (409, Some("Conflict")));
        assert_eq!(st["message"], "Apply failed with 1 conflict: conflict with \"sim-test\" using v1: .data.key");
        assert_eq!(st["details"]["causes"][0], json!({"reason": "FieldManagerConflict", "message": "conflict with \"sim-test\" using v1", "field": ".data.key"}));
        let (s, f) = send_json(addr, "PATCH", &format!("{url}?fieldManager=op&force=true"), APPLY, &cfg("a")).await;
        assert_eq!((s, f["data"]["key"].as_str()), (200, Some("a")));
        let rv = sim.resource_version();
        let (s, _) = send_json(addr, "PATCH", &format!("{url}?fieldManager=op"), APPLY, &cfg("a")).await;
        assert_eq!((s, sim.resource_version()), (200, rv), "a repeated apply is a no-op");
        // Dropping a field from the applied configuration removes it.
        let (_, d) = send_json(addr, "PATCH", &format!("{url}?fieldManager=op"), APPLY, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"key": "a"}})).await;
        assert_eq!(d["data"], json!({"key": "a"}));
        // force only with apply; YAML that is not JSON is refused.
        let (s, _) = send_json(addr, "PATCH", &format!("{url}?force=true"), MERGE, &json!({})).await;
        assert_eq!(s, 422);
        let mut c = Conn::open(addr, "PATCH", &format!("{url}?fieldManager=op"), &[("Content-Type", APPLY)], Some(b"apiVersion: v1\nkind: ConfigMap\n")).await;
        assert_eq!(c.status, 415);
        let _ = c.body().await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn finalizers_and_delete_options() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": "c", "finalizers": ["example.com/hold"]}}),
        )
        .unwrap();
        let url = format!("{CM}/c");
        let (s, d) = send_json(addr, "DELETE", &url, JSON, &json!({})).await;
        assert_eq!(s, 200);
        assert!(d["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(d["metadata"]["deletionGracePeriodSeconds"], 0);
        let rv = sim.resource_version();
        let (s, _) = send_json(addr, "DELETE", &url, JSON, &json!({})).await;
        assert_eq!(s, 200);
        assert_eq!(
            sim.resource_version(),
            rv,
            "a second delete changes nothing"
        );
        let (s, st) = send_json(
            addr,
            "PATCH",
            &url,
            MERGE,
            &json!({"metadata": {"finalizers": ["example.com/hold", "x"]}}),
        )
        .await;
        assert_eq!(s, 422);
        assert!(
            st["message"].as_str().unwrap().contains(
                "Forbidden: no new finalizers can be added if the object is being deleted"
            ),
            "{st}"
        );
        let (s, _) = send_json(
            addr,
            "PATCH",
            &url,
            MERGE,
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
        assert_eq!(s, 200);
        assert_eq!(
            sim.get("configmaps", Some("default"), "c")
                .unwrap_err()
                .code,
            404
        );
        // Orphan propagation adds the orphan finalizer (no garbage collector removes it).
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": "o"}}),
        )
        .unwrap();
        let (_, o) = send_json(
            addr,
            "DELETE",
            &format!("{CM}/o"),
            JSON,
            &json!({"propagationPolicy": "Orphan"}),
        )
        .await;
        assert_eq!(o["metadata"]["finalizers"], json!(["orphan"]));
        let (s, _) = send_json(
            addr,
            "DELETE",
            &format!("{CM}/o"),
            JSON,
            &json!({"propagationPolicy": "Sideways"}),
        )
        .await;
        assert_eq!(s, 422);
        // deletecollection by label.
        for (n, l) in [("a", "x"), ("b", "x"), ("k", "y")] {
            sim.create(
                "configmaps",
                Some("default"),
                json!({"metadata": {"name": n, "labels": {"app": l}}}),
            )
            .unwrap();
        }
        let (s, list) = send_json(
            addr,
            "DELETE",
            &format!("{CM}?labelSelector=app%3Dx"),
            JSON,
            &json!({}),
        )
        .await;
        assert_eq!((s, list["kind"].as_str()), (200, Some("ConfigMapList")));
        assert_eq!(list["items"].as_array().unwrap().len(), 2);
        assert!(sim.get("configmaps", Some("default"), "k").is_ok());
        assert!(sim.get("configmaps", Some("default"), "a").is_err());
    })
    .await
    .unwrap();
}
