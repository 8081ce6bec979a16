//! Every write of `Api`, as one scenario that runs against any server: the simulator
//! (`tests/informer/writes.rs`) and the real kube-apiserver (`tests/real_apiserver/writes.rs`)
//! run the same code, so the simulator is held to the real server's answers.

use informer::client::{
    DeleteOutcome, DeleteParams, Patch, PatchParams, PostParams, Preconditions,
};
use informer::model::StatusReason;
use informer::{Api, Client, ConfigMap, Error, ListParams};
use serde_json::{Value, json};

fn configmap(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = name.into();
    for (k, v) in data {
        cm.data.insert((*k).into(), (*v).into());
    }
    cm
}

/// The `(manager, operation)` pairs of an object's `managedFields`.
fn managers(cm: &ConfigMap) -> Vec<(String, String)> {
    let Some(raw) = &cm.metadata.managed_fields else {
        return Vec::new();
    };
    let entries: Vec<Value> = raw.parse().unwrap();
    entries
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap_or("").to_owned(),
                e["operation"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn reason(e: &Error) -> Option<StatusReason> {
    e.reason()
}

/// Create, replace with its precondition, the four patch types, server-side apply with a
/// conflict and `force`, dry runs, deletes with preconditions, a collection delete, and the
/// typed error of each refusal, on a lean built-in kind (ConfigMap) in namespace `ns`.
pub async fn lean_kind_writes(client: &Client, ns: &str) {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let post = PostParams::default();

    // Create, then the same name again.
    let created = cms
        .create(&post, &configmap("w1", &[("a", "1")]))
        .await
        .unwrap();
    assert!(!created.metadata.uid.is_empty());
    assert!(!created.metadata.resource_version.is_empty());
    assert_eq!(created.data.get("a"), Some("1"));
    let e = cms.create(&post, &configmap("w1", &[])).await.unwrap_err();
    assert_eq!(reason(&e), Some(StatusReason::AlreadyExists), "{e}");
    assert!(e.is_already_exists() && e.http_code() == Some(409), "{e}");
    assert!(e.to_string().contains("already exists"), "{e}");

    // A name the server refuses: 422 Invalid, with the field in its causes.
    let e = cms
        .create(&post, &configmap("Not_A_Name", &[]))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(StatusReason::Invalid), "{e}");
    let causes = e.status().unwrap().causes();
    assert!(
        causes.iter().any(|c| c.field == "metadata.name"),
        "{causes:?}"
    );
    // A name that could leave its path segment is never sent.
    let e = cms.get("../secrets").await.unwrap_err();
    assert!(matches!(e, Error::InvalidName(_)), "{e}");
    let e = cms
        .replace("a/b", &post, &configmap("a", &[]))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidName(_)), "{e}");

    // A dry-run create answers the object and stores nothing.
    let dry = cms
        .create(
            &PostParams::default().dry_run(),
            &configmap("w-dry", &[("x", "y")]),
        )
        .await
        .unwrap();
    assert_eq!(dry.metadata.name, "w-dry");
    assert!(cms.get("w-dry").await.unwrap_err().is_not_found());

    // Replace with the resourceVersion read: accepted; with the stale one again: Conflict.
    let mut next = created.clone();
    next.data.insert("b".into(), "2".into());
    let replaced = cms.replace("w1", &post, &next).await.unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(replaced.data.get("b"), Some("2"));
    let e = cms.replace("w1", &post, &next).await.unwrap_err();
    assert_eq!(reason(&e), Some(StatusReason::Conflict), "{e}");
    assert!(e.is_conflict(), "{e}");
    // A dry-run replace changes nothing.
    let mut dry = replaced.clone();
    dry.data.insert("dry".into(), "run".into());
    let answered = cms
        .replace("w1", &PostParams::default().dry_run(), &dry)
        .await
        .unwrap();
    assert_eq!(answered.data.get("dry"), Some("run"));
    let stored = cms.get("w1").await.unwrap();
    assert_eq!(stored.data.get("dry"), None);
    assert_eq!(
        stored.metadata.resource_version,
        replaced.metadata.resource_version
    );

    // The patch types. Merge: null removes a key.
    let patched = cms
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.get("a"), None);
    assert_eq!(patched.data.get("b"), Some("2"));
    // JSON patch: operations, and a failed `test` refuses the whole patch.
    let patched = cms
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Json(json!([{"op": "add", "path": "/data/c", "value": "3"}])),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.get("c"), Some("3"));
    let e = cms
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Json(json!([
                {"op": "test", "path": "/data/c", "value": "not 3"},
                {"op": "remove", "path": "/data/c"},
            ])),
        )
        .await
        .unwrap_err();
    assert!(e.status().is_some(), "{e}");
    assert_eq!(
        cms.get("w1").await.unwrap().data.get("c"),
        Some("3"),
        "a failed test changed the object"
    );
    // Strategic merge on a built-in kind.
    let patched = cms
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"tier": "gold"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.labels.get("tier"), Some("gold"));
    // A patch of an object that does not exist: NotFound.
    let e = cms
        .patch(
            "missing",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "1"}})),
        )
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");

    // Server-side apply: creates, records the manager, conflicts with another, yields to force.
    let apply = |data: Value| Patch::Apply(json!({"metadata": {"name": "w2"}, "data": data}));
    let applied = cms
        .patch(
            "w2",
            &PatchParams::apply("alpha"),
            &apply(json!({"k": "v1"})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data.get("k"), Some("v1"));
    assert!(
        managers(&applied).contains(&("alpha".into(), "Apply".into())),
        "{:?}",
        managers(&applied)
    );
    let e = cms
        .patch(
            "w2",
            &PatchParams::apply("beta"),
            &apply(json!({"k": "v2"})),
        )
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(StatusReason::Conflict), "{e}");
    assert!(!e.status().unwrap().causes().is_empty(), "{e:?}");
    assert!(e.to_string().contains("alpha"), "{e}");
    let forced = cms
        .patch(
            "w2",
            &PatchParams::apply("beta").force(),
            &apply(json!({"k": "v2"})),
        )
        .await
        .unwrap();
    assert_eq!(forced.data.get("k"), Some("v2"));
    // A field alpha applied and applies no more is removed (alpha owns `other` alone).
    cms.patch(
        "w2",
        &PatchParams::apply("alpha"),
        &apply(json!({"other": "o"})),
    )
    .await
    .unwrap();
    let dropped = cms
        .patch("w2", &PatchParams::apply("alpha"), &apply(json!({})))
        .await
        .unwrap();
    assert_eq!(dropped.data.get("other"), None);
    assert_eq!(dropped.data.get("k"), Some("v2"), "beta's field stays");
    // The client refuses what the server could only refuse.
    let e = cms
        .patch("w2", &PatchParams::default(), &apply(json!({})))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidRequest(_)), "{e}");
    let e = cms
        .patch(
            "w2",
            &PatchParams::default().force(),
            &Patch::Merge(json!({})),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidRequest(_)), "{e}");

    // Deletes: a failed precondition deletes nothing; a dry run neither.
    let current = cms.get("w2").await.unwrap();
    let e = cms
        .delete(
            "w2",
            &DeleteParams::default().preconditions(Preconditions::uid("not-its-uid")),
        )
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");
    cms.delete("w2", &DeleteParams::default().dry_run())
        .await
        .unwrap();
    assert!(cms.get("w2").await.is_ok(), "a dry-run delete deleted");
    let gone = cms
        .delete(
            "w2",
            &DeleteParams::default().preconditions(Preconditions::uid(&current.metadata.uid)),
        )
        .await
        .unwrap();
    // ConfigMaps answer a Success Status once gone.
    match gone {
        DeleteOutcome::Status(s) => assert_eq!(s.status, "Success"),
        DeleteOutcome::Object(o) => panic!("expected a Status, got {o:?}"),
    }
    let e = cms
        .delete("w2", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");

    // No collection delete across namespaces (the apiserver answers 405): refused unsent.
    let everywhere: Api<ConfigMap> = Api::all(client.clone());
    let e = everywhere
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("tmp=true"),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, Error::InvalidRequest(_)), "{e}");
    // A collection delete takes what its selector matches, and only that.
    for (name, tmp) in [("t1", "true"), ("t2", "true"), ("keep", "false")] {
        let mut cm = configmap(name, &[]);
        cm.metadata.labels.insert("tmp".into(), tmp.into());
        cms.create(&post, &cm).await.unwrap();
    }
    let deleted = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("tmp=true"),
        )
        .await
        .unwrap();
    if let DeleteOutcome::Object(list) = &deleted {
        let mut names: Vec<_> = list.items.iter().map(|c| c.metadata.name.clone()).collect();
        names.sort();
        assert_eq!(names, ["t1", "t2"]);
    }
    let left: Vec<_> = cms
        .list(&ListParams::default().labels("tmp"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name)
        .collect();
    assert_eq!(left, ["keep"]);
}

/// A finalizer's life on a ConfigMap: added on the first reconcile, `Apply` while live,
/// `Cleanup` once deleted, then removed so the apiserver finishes the deletion; a decision made
/// on a stale version is refused with 409 instead of overwriting the newer one.
pub async fn finalizer_flow(client: &Client, ns: &str) {
    use informer::workqueue::{Action, FinalizerError, FinalizerEvent, finalizer};
    use std::sync::Arc;

    const NAME: &str = "example.com/cleanup";
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let all: Api<ConfigMap> = Api::all(client.clone());
    let created = cms
        .create(&PostParams::default(), &configmap("f1", &[]))
        .await
        .unwrap();
    // Which event each call saw.
    let run = |cm: ConfigMap| {
        let all = all.clone();
        async move {
            let mut seen = None;
            let result = finalizer(&all, NAME, Arc::new(cm), |event| {
                seen = Some(match &event {
                    FinalizerEvent::Apply(_) => "apply",
                    FinalizerEvent::Cleanup(_) => "cleanup",
                });
                async { Ok::<_, std::io::Error>(Action::Done) }
            })
            .await;
            (result, seen)
        }
    };

    // First reconcile: the finalizer is added, the reconcile does not run.
    let (result, seen) = run(created.clone()).await;
    assert_eq!(result.unwrap(), Action::Done);
    assert_eq!(seen, None);
    let live = cms.get("f1").await.unwrap();
    assert_eq!(live.metadata.finalizers, [NAME]);
    // A decision on a stale list is refused (its JSON patch's test fails: 422), never written
    // over the newer list.
    let (result, _) = run(created.clone()).await;
    match result {
        Err(FinalizerError::AddFinalizer(e)) => {
            assert_eq!(e.reason(), Some(StatusReason::Invalid), "{e}")
        }
        other => panic!("expected a refused patch, got {other:?}"),
    }
    assert_eq!(cms.get("f1").await.unwrap().metadata.finalizers, [NAME]);
    // Live and holding it: Apply.
    let (result, seen) = run(live.clone()).await;
    assert_eq!((result.unwrap(), seen), (Action::Done, Some("apply")));

    // Deleted: the finalizer holds it, with deletionTimestamp set.
    let outcome = cms.delete("f1", &DeleteParams::default()).await.unwrap();
    let held = match outcome {
        DeleteOutcome::Object(cm) => cm,
        DeleteOutcome::Status(s) => panic!("deleted at once despite its finalizer: {s:?}"),
    };
    assert!(held.metadata.deletion_timestamp.is_some());
    let deleting = cms.get("f1").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    // A write to another field while the cleanup runs does not undo it: the removal tests the
    // finalizer, not the whole version.
    cms.patch(
        "f1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"cleaning": "yes"}}})),
    )
    .await
    .unwrap();
    // Cleanup, then the finalizer goes and the object with it.
    let (result, seen) = run(deleting).await;
    assert_eq!((result.unwrap(), seen), (Action::Done, Some("cleanup")));
    let e = cms.get("f1").await.unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

/// The CRD every run shares (a group of its own, so the example operator's Widget CRD is left
/// alone); created if absent, then waited for until it is Established.
pub async fn install_gadget_crd(client: &Client) -> informer::ApiResource {
    use informer::{ApiResource, DynamicObject};
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        ApiResource::new(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        ),
    );
    let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let crd: DynamicObject = serde_json::from_value(json!({
        "metadata": {"name": "gadgets.writes.example.com"},
        "spec": {
            "group": "writes.example.com",
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": open, "status": open}}},
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"},
                },
            }],
        },
    }))
    .unwrap();
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(e) if e.is_already_exists() => {}
        Err(e) => panic!("creating the CRD: {e}"),
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let crd = crds.get("gadgets.writes.example.com").await.unwrap();
        let established = crd.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
        if established {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the CRD was never Established"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    ApiResource::new("writes.example.com", "v1", "Gadget", "gadgets", true)
}

/// The writes on a custom resource: create, the status subresource (what each endpoint may
/// change, and `generation`), a status apply, the scale subresource, the 415 of a strategic
/// merge, and a delete that answers the object.
pub async fn custom_resource_writes(client: &Client, ns: &str) {
    use informer::DynamicObject;
    let resource = install_gadget_crd(client).await;
    let gadgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
    let post = PostParams::default();
    let g: DynamicObject = serde_json::from_value(
        json!({"metadata": {"name": "g1"}, "spec": {"size": 1, "replicas": 1}, "status": {"ready": false}}),
    )
    .unwrap();
    let created = gadgets.create(&post, &g).await.unwrap();
    assert_eq!(created.types.kind, "Gadget");
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none(),
        "a create sets no status under a status subresource: {:?}",
        created.data
    );

    // The status endpoint changes the status only, and not the generation.
    let mut with_status = created.clone();
    with_status
        .data
        .insert("status".into(), json!({"ready": true, "replicas": 1}));
    with_status
        .data
        .insert("spec".into(), json!({"size": 99, "replicas": 1}));
    let after = gadgets
        .replace_status("g1", &post, &with_status)
        .await
        .unwrap();
    assert_eq!(after.data["status"]["ready"], true);
    assert_eq!(
        after.data["spec"]["size"], 1,
        "a status write changed the spec"
    );
    assert_eq!(after.metadata.generation, Some(1));
    // The main endpoint changes the spec only, and bumps the generation.
    let mut with_spec = after.clone();
    with_spec
        .data
        .insert("spec".into(), json!({"size": 2, "replicas": 1}));
    with_spec
        .data
        .insert("status".into(), json!({"ready": false}));
    let after = gadgets.replace("g1", &post, &with_spec).await.unwrap();
    assert_eq!(after.data["spec"]["size"], 2);
    assert_eq!(
        after.data["status"]["ready"], true,
        "a main write changed the status"
    );
    assert_eq!(after.metadata.generation, Some(2));

    // A server-side apply of the status, and the status read back through its endpoint.
    let applied = gadgets
        .patch_status(
            "g1",
            &PatchParams::apply("gadget-operator").force(),
            &Patch::Apply(json!({"metadata": {"name": "g1"}, "status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["status"]["phase"], "Ready");
    let read = gadgets.get_status("g1").await.unwrap();
    assert_eq!(read.data["status"]["phase"], "Ready");

    // Custom resources take no strategic merge patch.
    let e = gadgets
        .patch(
            "g1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 3}})),
        )
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(StatusReason::UnsupportedMediaType), "{e}");

    // The scale subresource reads and writes spec.replicas.
    let scale = gadgets.get_scale("g1").await.unwrap();
    assert_eq!(scale.spec.replicas, Some(1));
    let scaled = gadgets
        .patch_scale(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.replicas, Some(3));
    assert_eq!(gadgets.get("g1").await.unwrap().data["spec"]["replicas"], 3);
    let mut rescale = scaled.clone();
    rescale.spec.replicas = Some(4);
    let rescaled = gadgets.replace_scale("g1", &post, &rescale).await.unwrap();
    assert_eq!(rescaled.spec.replicas, Some(4));
    // The Scale's resourceVersion is a precondition.
    let e = gadgets
        .replace_scale("g1", &post, &rescale)
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");

    // A custom resource without finalizers answers its delete with a Status (1.20).
    let outcome = gadgets
        .delete("g1", &DeleteParams::default())
        .await
        .unwrap();
    match outcome {
        DeleteOutcome::Status(s) => assert_eq!(s.details.unwrap().name, "g1"),
        DeleteOutcome::Object(o) => panic!("expected a Status, got {o:?}"),
    }
    assert!(gadgets.get("g1").await.unwrap_err().is_not_found());
}

/// A valid `k8s-openapi` Deployment (one container, selector matching its template).
fn deployment(name: &str) -> k8s_openapi::api::apps::v1::Deployment {
    use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    let labels = std::collections::BTreeMap::from([("app".to_owned(), name.to_owned())]);
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some("registry.example/app:1".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Every write on a `k8s-openapi` kind (`apps/v1` Deployment, which has the status and scale
/// subresources): create, replace with its precondition, the four patch types, server-side
/// apply with a conflict and `force`, status and scale, dry runs, deletes with preconditions,
/// and the typed error of each refusal, in namespace `ns`.
pub async fn k8s_openapi_writes(client: &Client, ns: &str) {
    use informer::Object;
    use informer::model::Metadata;
    use k8s_openapi::api::apps::v1::Deployment;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    let post = PostParams::default();
    let replicas = |d: &Deployment| d.spec.replicas;
    let labels = |d: &Deployment| d.metadata.labels.clone().unwrap_or_default();

    // Create; the same name again; a name the server refuses; a dry run.
    let created = deployments.create(&post, &deployment("d1")).await.unwrap();
    assert!(!created.meta().uid().is_empty());
    assert!(!created.meta().resource_version().is_empty());
    assert_eq!(replicas(&created), Some(1));
    let e = deployments
        .create(&post, &deployment("d1"))
        .await
        .unwrap_err();
    assert!(e.is_already_exists(), "{e}");
    let e = deployments
        .create(&post, &deployment("Not_A_Name"))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(StatusReason::Invalid), "{e}");
    let causes = e.status().unwrap().causes();
    assert!(
        causes.iter().any(|c| c.field == "metadata.name"),
        "{causes:?}"
    );
    deployments
        .create(&PostParams::default().dry_run(), &deployment("d-dry"))
        .await
        .unwrap();
    assert!(deployments.get("d-dry").await.unwrap_err().is_not_found());

    // Replace with the version read; again with the stale one: Conflict.
    let mut next = created.clone();
    next.spec.replicas = Some(2);
    let replaced = deployments.replace("d1", &post, &next).await.unwrap();
    assert_eq!(replicas(&replaced), Some(2));
    let e = deployments.replace("d1", &post, &next).await.unwrap_err();
    assert!(e.is_conflict(), "{e}");

    // The four patch types.
    let patched = deployments
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "gold"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labels(&patched).get("tier").map(String::as_str),
        Some("gold")
    );
    let patched = deployments
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Json(json!([{"op": "replace", "path": "/spec/replicas", "value": 4}])),
        )
        .await
        .unwrap();
    assert_eq!(replicas(&patched), Some(4));
    let e = deployments
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Json(json!([{"op": "test", "path": "/spec/replicas", "value": 9}])),
        )
        .await
        .unwrap_err();
    assert!(e.status().is_some(), "{e}");
    let patched = deployments
        .patch(
            "d1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"annotations": {"note": "strategic"}}})),
        )
        .await
        .unwrap();
    let annotations = patched.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("note").map(String::as_str),
        Some("strategic")
    );
    let apply = |replicas: i32| {
        let mut d = deployment("d1");
        d.spec.replicas = Some(replicas);
        Patch::Apply(d)
    };
    let applied = deployments
        .patch("d1", &PatchParams::apply("alpha").force(), &apply(5))
        .await
        .unwrap();
    assert_eq!(replicas(&applied), Some(5));
    let managed = applied.metadata.managed_fields.clone().unwrap_or_default();
    assert!(
        managed
            .iter()
            .any(|m| m.manager.as_deref() == Some("alpha")
                && m.operation.as_deref() == Some("Apply")),
        "{managed:?}"
    );
    let e = deployments
        .patch("d1", &PatchParams::apply("beta"), &apply(6))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), Some(StatusReason::Conflict), "{e}");
    let forced = deployments
        .patch("d1", &PatchParams::apply("beta").force(), &apply(6))
        .await
        .unwrap();
    assert_eq!(replicas(&forced), Some(6));

    // Status: written through its subresource, which leaves the spec alone.
    let status = json!({
        "spec": {"replicas": 9},
        "status": {"observedGeneration": 3, "replicas": 6, "readyReplicas": 6},
    });
    let with_status = deployments
        .patch_status("d1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let got = with_status.status.clone().unwrap_or_default();
    assert_eq!((got.replicas, got.ready_replicas), (Some(6), Some(6)));
    assert_eq!(
        replicas(&with_status),
        Some(6),
        "a status write changed the spec"
    );
    let mut read = deployments.get_status("d1").await.unwrap();
    read.status.as_mut().unwrap().ready_replicas = Some(5);
    let replaced = deployments
        .replace_status("d1", &post, &read)
        .await
        .unwrap();
    assert_eq!(replaced.status.unwrap().ready_replicas, Some(5));

    // Scale: the replicas through the scale subresource.
    let scale = deployments.get_scale("d1").await.unwrap();
    assert_eq!(scale.spec.replicas, Some(6));
    let scaled = deployments
        .patch_scale(
            "d1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.replicas, Some(2));
    assert_eq!(replicas(&deployments.get("d1").await.unwrap()), Some(2));

    // Deletes: a failed precondition deletes nothing, a dry run neither; then gone.
    let current = deployments.get("d1").await.unwrap();
    let e = deployments
        .delete(
            "d1",
            &DeleteParams::default().preconditions(Preconditions::uid("not-its-uid")),
        )
        .await
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");
    deployments
        .delete("d1", &DeleteParams::default().dry_run())
        .await
        .unwrap();
    assert!(
        deployments.get("d1").await.is_ok(),
        "a dry-run delete deleted"
    );
    deployments
        .delete(
            "d1",
            &DeleteParams::default().preconditions(Preconditions::uid(current.meta().uid())),
        )
        .await
        .unwrap();
    assert!(deployments.get("d1").await.unwrap_err().is_not_found());
    let e = deployments
        .delete("d1", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e}");
}

/// A custom resource typed as users of `k8s-openapi` write one: `k8s-openapi`'s `ObjectMeta`,
/// with this crate's `Object` and `Resource` implemented for it (the documented way).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Gadget {
    #[serde(default)]
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    #[serde(default)]
    pub spec: GadgetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<GadgetStatus>,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct GadgetSpec {
    pub size: i64,
}

#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct GadgetStatus {
    pub ready: bool,
}

impl informer::Object for Gadget {
    type Meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    fn meta(&self) -> &Self::Meta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut Self::Meta {
        &mut self.metadata
    }
}

impl informer::Resource for Gadget {
    fn api_resource() -> informer::ApiResource {
        informer::ApiResource::from_static("writes.example.com", "v1", "Gadget", "gadgets", true)
    }
}

/// The typed custom resource in `Api` (create, status, apply, delete) and an `Informer`.
pub async fn typed_custom_resource(client: &Client, ns: &str) {
    use informer::model::Metadata;
    use informer::{Informer, Object};
    install_gadget_crd(client).await;
    let gadgets: Api<Gadget> = Api::namespaced(client.clone(), ns);
    let mut g = Gadget::default();
    g.metadata.name = Some("typed".into());
    g.spec.size = 3;
    let created = gadgets.create(&PostParams::default(), &g).await.unwrap();
    assert_eq!(
        (created.meta().generation(), created.spec.size),
        (Some(1), 3)
    );
    let with_status = gadgets
        .patch_status(
            "typed",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert!(with_status.status.unwrap().ready);

    let informer = Informer::new(gadgets.clone(), Default::default());
    informer.start();
    informer
        .wait_for_sync(std::time::Duration::from_secs(60))
        .await
        .unwrap();
    let applied = gadgets
        .patch(
            "typed",
            &PatchParams::apply("typed-test").force(),
            &Patch::Apply(json!({
                "apiVersion": "writes.example.com/v1", "kind": "Gadget",
                "metadata": {"name": "typed"}, "spec": {"size": 4},
            })),
        )
        .await
        .unwrap();
    assert_eq!(applied.meta().generation(), Some(2));
    informer
        .wait_for_version(
            ns,
            "typed",
            applied.meta().resource_version(),
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap();
    let cached = informer.store().get(ns, "typed").unwrap();
    assert_eq!(cached.spec.size, 4);
    assert!(cached.status.as_ref().unwrap().ready);
    drop(cached);
    gadgets
        .delete("typed", &DeleteParams::default())
        .await
        .unwrap();
    informer
        .wait_for_absence(ns, "typed", std::time::Duration::from_secs(60))
        .await
        .unwrap();
}
