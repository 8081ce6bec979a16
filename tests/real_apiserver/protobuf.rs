//! The protobuf wire against kube-apiserver 1.20: every typed kind that decodes protobuf, written
//! with the fields its struct keeps set (and the server's defaults), then read back through `Api`
//! in protobuf and in JSON (`Config::protobuf = false`): LIST, GET and the watch's events must
//! decode to equal objects, and the watch must really have come in protobuf.

use std::fmt::Debug;

use informer::client::WatchEvent;
use informer::internals::watch::RawEvent;
use informer::{
    Api, Client, ConfigMap, Endpoints, ListParams, Namespace, Node, Object, PartialObjectMetadata,
    Pod, Resource, Service, WatchParams,
};
use serde_json::json;

use crate::support::real_apiserver::*;

/// Reads `name` of `T` (in `ns`, or cluster-wide) both ways and compares every form.
async fn same_both_ways<T>(pb: &Client, json: &Client, ns: Option<&str>, name: &str)
where
    T: Resource + PartialEq + Debug + Clone,
{
    let api = |c: &Client| -> Api<T> {
        match ns {
            Some(ns) => Api::namespaced(c.clone(), ns),
            None => Api::all(c.clone()),
        }
    };
    let (api_pb, api_json) = (api(pb), api(json));
    let kind = T::api_resource().kind;
    let params = ListParams::default().fields(&format!("metadata.name={name}"));
    let (from_pb, from_json) = (
        api_pb.list(&params).await.unwrap(),
        api_json.list(&params).await.unwrap(),
    );
    assert_eq!(from_pb.items.len(), 1, "{kind} {name}");
    assert_eq!(from_pb.items, from_json.items, "{kind} {name}: LIST");
    assert_eq!(
        from_pb.metadata.resource_version.is_empty(),
        from_json.metadata.resource_version.is_empty()
    );
    assert_eq!(
        api_pb.get(name).await.unwrap(),
        api_json.get(name).await.unwrap(),
        "{kind} {name}: GET"
    );
    // The watch from the list's version 0 starts with the object's ADDED.
    let watch = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .resource_version("0")
        .timeout(5);
    let mut events_pb = api_pb.watch(&watch).await.unwrap();
    let Some(Ok(RawEvent::Added(raw))) = events_pb.next_raw().await else {
        panic!("{kind} {name}: no ADDED first");
    };
    assert!(raw.is_protobuf(), "{kind}: the watch came in JSON");
    let mut events_json = api_json.watch(&watch).await.unwrap();
    let Some(Ok(WatchEvent::Added(added))) = events_json.next().await else {
        panic!("{kind} {name}: no ADDED first");
    };
    assert_eq!(
        raw.decode_object::<T>().unwrap(),
        added,
        "{kind} {name}: WATCH"
    );
    assert_eq!(added, from_pb.items[0]);
}

#[tokio::test]
async fn every_protobuf_kind_decodes_as_its_json_does() {
    let real = real_or_skip!("every_protobuf_kind_decodes_as_its_json_does");
    bounded(60, async {
        let pb = real.client();
        let mut config = real.config();
        config.protobuf = false;
        let json_client = Client::new(config).unwrap();
        let ns = namespace(&pb, "pb").await;
        let base = format!("/api/v1/namespaces/{ns}");
        // No controller manager here: the service account Pods default to must be made by hand.
        post(&pb, &format!("{base}/serviceaccounts"), json!({"metadata": {"name": "default"}, "automountServiceAccountToken": false})).await;
        post(&pb, &format!("{base}/pods"), json!({
            "metadata": {"name": "web-0", "labels": {"app": "web"}, "annotations": {"a": "b"},
                         "finalizers": ["example.com/keep"], "generateName": "web-",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                              "uid": "6e0f0c2a-0000-4000-8000-000000000001", "controller": true,
                                              "blockOwnerDeletion": true}]},
            "spec": {"automountServiceAccountToken": false, "hostname": "web-0", "subdomain": "web", "serviceAccountName": "default",
                     "nodeName": "node-a", "nodeSelector": {"disk": "ssd"},
                     "containers": [{"name": "c", "image": "nginx:1",
                                     "ports": [{"name": "http", "containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]},
                                    {"name": "side", "image": "busybox"}]}
        })).await;
        post(&pb, &format!("{base}/pods"), json!({
            "metadata": {"name": "bare"}, "spec": {"automountServiceAccountToken": false, "containers": [{"name": "c", "image": "x"}]}
        })).await;
        post(&pb, &format!("{base}/services"), json!({
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [
                {"name": "http", "port": 80, "targetPort": "http", "appProtocol": "http"},
                {"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"}]}
        })).await;
        post(&pb, &format!("{base}/services"), json!({
            "metadata": {"name": "ext"}, "spec": {"type": "ExternalName", "externalName": "example.com"}
        })).await;
        post(&pb, &format!("{base}/endpoints"), json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "subsets": [{
                "addresses": [{"ip": "10.0.0.1", "hostname": "web-0", "nodeName": "node-a",
                               "targetRef": {"kind": "Pod", "namespace": ns, "name": "web-0",
                                             "uid": "6e0f0c2a-0000-4000-8000-000000000002"}},
                              {"ip": "10.0.0.2"}],
                "notReadyAddresses": [{"ip": "10.0.0.3"}],
                "ports": [{"name": "http", "port": 8080, "appProtocol": "http"}, {"name": "dns", "port": 53, "protocol": "UDP"}]
            }, {
                "addresses": [{"ip": "10.0.0.4"}],
                "ports": [{"port": 9090}]
            }]
        })).await;
        post(&pb, &format!("{base}/configmaps"), json!({
            "metadata": {"name": "conf"},
            "data": {"a": "1", "b": "two\nlines", "empty": ""},
            "binaryData": {"bin": "AAECA/8=", "none": ""}
        })).await;
        let node = format!("{ns}-node");
        post(&pb, "/api/v1/nodes", json!({
            "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
            "spec": {"podCIDR": "10.244.1.0/24", "unschedulable": true},
            "status": {"addresses": [{"type": "InternalIP", "address": "192.0.2.1"}],
                       "conditions": [{"type": "Ready", "status": "False", "reason": "Off", "message": "no kubelet"}]}
        })).await;
        let plain = format!("{ns}-plain");
        post(&pb, "/api/v1/nodes", json!({"metadata": {"name": plain}})).await;

        same_both_ways::<Pod>(&pb, &json_client, Some(&ns), "web-0").await;
        same_both_ways::<Pod>(&pb, &json_client, Some(&ns), "bare").await;
        same_both_ways::<Service>(&pb, &json_client, Some(&ns), "web").await;
        same_both_ways::<Service>(&pb, &json_client, Some(&ns), "ext").await;
        same_both_ways::<Endpoints>(&pb, &json_client, Some(&ns), "web").await;
        same_both_ways::<ConfigMap>(&pb, &json_client, Some(&ns), "conf").await;
        same_both_ways::<Namespace>(&pb, &json_client, None, &ns).await;
        same_both_ways::<Node>(&pb, &json_client, None, &node).await;
        same_both_ways::<Node>(&pb, &json_client, None, &plain).await;

        // A deleted Pod's last state (with its deletionTimestamp, held by its finalizer) too.
        let pods: Api<Pod> = Api::namespaced(pb.clone(), &ns);
        pods.delete("web-0", &Default::default()).await.unwrap();
        same_both_ways::<Pod>(&pb, &json_client, Some(&ns), "web-0").await;
        let pod = pods.get("web-0").await.unwrap();
        assert!(pod.meta().deletion_timestamp.is_some() && pod.meta().managed_fields.is_some());
    })
    .await;
}

/// A metadata-only view (`Api<PartialObjectMetadata>`) asks for `as=PartialObjectMetadata`: the
/// server leaves `spec` and `status` out, in protobuf (and in JSON with `Config::protobuf` off).
/// LIST, GET and WATCH decode to equal objects both ways, whose metadata is the whole object's.
#[tokio::test]
async fn metadata_only_views_read_partial_objects_both_ways() {
    let real = real_or_skip!("metadata_only_views_read_partial_objects_both_ways");
    bounded(60, async {
        let pb = real.client();
        let mut config = real.config();
        config.protobuf = false;
        let json_client = Client::new(config).unwrap();
        let ns = namespace(&pb, "meta").await;
        post(&pb, &format!("/api/v1/namespaces/{ns}/serviceaccounts"), json!({"metadata": {"name": "default"}, "automountServiceAccountToken": false})).await;
        post(&pb, &format!("/api/v1/namespaces/{ns}/pods"), json!({
            "metadata": {"name": "web-0", "labels": {"app": "web"}, "annotations": {"a": "b"},
                         "finalizers": ["example.com/keep"], "generateName": "web-",
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                              "uid": "6e0f0c2a-0000-4000-8000-000000000001", "controller": true}]},
            "spec": {"automountServiceAccountToken": false, "serviceAccountName": "default",
                     "containers": [{"name": "c", "image": "nginx:1"}]}
        })).await;
        let view = |c: &Client| -> Api<PartialObjectMetadata> {
            Api::namespaced_with(c.clone(), &ns, Pod::api_resource())
        };
        let (api_pb, api_json) = (view(&pb), view(&json_client));
        let pod = Api::<Pod>::namespaced(json_client.clone(), &ns)
            .get("web-0")
            .await
            .unwrap();
        let params = ListParams::default().fields("metadata.name=web-0");
        let (from_pb, from_json) = (
            api_pb.list(&params).await.unwrap(),
            api_json.list(&params).await.unwrap(),
        );
        assert_eq!(from_pb.items, from_json.items, "LIST");
        assert_eq!(from_pb.items.len(), 1);
        let partial = &from_pb.items[0];
        assert_eq!(
            (partial.api_version.as_str(), partial.kind.as_str()),
            ("meta.k8s.io/v1", "PartialObjectMetadata"),
            "the server sent whole Pods, not their metadata"
        );
        assert_eq!(partial.metadata, pod.metadata);
        assert_eq!(
            api_pb.get("web-0").await.unwrap(),
            api_json.get("web-0").await.unwrap(),
            "GET"
        );
        assert_eq!(&api_pb.get("web-0").await.unwrap(), partial);
        let watch = WatchParams::default()
            .fields("metadata.name=web-0")
            .resource_version("0")
            .timeout(5);
        let mut events_pb = api_pb.watch(&watch).await.unwrap();
        let Some(Ok(RawEvent::Added(raw))) = events_pb.next_raw().await else {
            panic!("no ADDED first");
        };
        assert!(raw.is_protobuf(), "the metadata watch came in JSON");
        let mut events_json = api_json.watch(&watch).await.unwrap();
        let Some(Ok(WatchEvent::Added(added))) = events_json.next().await else {
            panic!("no ADDED first");
        };
        assert_eq!(raw.decode_object::<PartialObjectMetadata>().unwrap(), added, "WATCH");
        assert_eq!(&added, partial);
    })
    .await;
}
