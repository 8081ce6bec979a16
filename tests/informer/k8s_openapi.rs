//! `k8s-openapi` types where the lean kinds go: an informer from the factory with its store,
//! an index, handlers and read-your-writes; and a controller whose primary and owned kinds are
//! both `k8s-openapi` types, writing through server-side apply. Against the simulator over real
//! loopback HTTP. (Every write on a `k8s-openapi` kind: `writes.rs`, on both servers.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use informer::client::{DeleteParams, Patch, PatchParams, PostParams};
use informer::model::Metadata;
use informer::workqueue::{Action, Controller};
use informer::{Api, DeletedObject, HandlerFns, InformerFactory, Object};
use informer_sim::Simulator;

use crate::controller::{PATIENCE, client, eventually};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::json;
use tokio::sync::oneshot;

/// A Pod with a CPU limit: a field the lean `informer::Pod` leaves out.
fn pod(name: &str, app: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([("app".into(), app.into())])),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("registry.example/app:1".into()),
                resources: Some(ResourceRequirements {
                    limits: Some(BTreeMap::from([("cpu".into(), Quantity("500m".into()))])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_k8s_openapi_informer_has_a_store_indexes_handlers_and_reads_its_writes() {
    let sim = Simulator::start().await.unwrap();
    let client = client(&sim);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, app) in [("web-0", "web"), ("web-1", "web"), ("db-0", "db")] {
        pods.create(&PostParams::default(), &pod(name, app))
            .await
            .unwrap();
    }

    let factory = InformerFactory::new(client);
    let informer = factory.informer::<Pod>(Some("default"));
    informer
        .store()
        .add_index(
            "app",
            Arc::new(|p: &Pod| {
                p.meta()
                    .label("app")
                    .map(str::to_owned)
                    .into_iter()
                    .collect()
            }),
        )
        .unwrap();
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let (on_add, on_update, on_delete) = (events.clone(), events.clone(), events.clone());
    informer.add_handler(
        HandlerFns::new()
            .on_add(move |p: &Arc<Pod>, _| {
                on_add
                    .lock()
                    .unwrap()
                    .push(format!("add {}", p.meta().key()))
            })
            .on_update(move |_, p: &Arc<Pod>| {
                on_update
                    .lock()
                    .unwrap()
                    .push(format!("update {}", p.meta().key()))
            })
            .on_delete(move |d: &DeletedObject<Pod>| {
                on_delete
                    .lock()
                    .unwrap()
                    .push(format!("delete {}", d.object().meta().key()))
            }),
    );
    factory.start();
    informer.wait_for_sync(PATIENCE).await.unwrap();

    // The whole object, as k8s-openapi types it.
    let web0 = informer.store().get("default", "web-0").unwrap();
    let limits = web0.spec.as_ref().unwrap().containers[0]
        .resources
        .as_ref()
        .unwrap()
        .limits
        .clone()
        .unwrap();
    assert_eq!(limits["cpu"], Quantity("500m".into()));
    drop(web0);
    let mut web: Vec<_> = informer
        .store()
        .by_index("app", "web")
        .unwrap()
        .iter()
        .map(|p| p.meta().name().to_owned())
        .collect();
    web.sort();
    assert_eq!(web, ["web-0", "web-1"]);

    // A write, then its version in the store; the handler saw it.
    let written = pods
        .patch(
            "db-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
        )
        .await
        .unwrap();
    informer
        .wait_for_version(
            "default",
            "db-0",
            written.meta().resource_version(),
            PATIENCE,
        )
        .await
        .unwrap();
    assert_eq!(informer.store().by_index("app", "web").unwrap().len(), 3);
    pods.delete("web-1", &DeleteParams::default())
        .await
        .unwrap();
    informer
        .wait_for_absence("default", "web-1", PATIENCE)
        .await
        .unwrap();
    eventually("the handler's delete", || {
        events
            .lock()
            .unwrap()
            .contains(&"delete default/web-1".to_owned())
    })
    .await;
    let seen = events.lock().unwrap().clone();
    for expected in [
        "add default/web-0",
        "add default/db-0",
        "update default/db-0",
    ] {
        assert!(
            seen.contains(&expected.to_owned()),
            "{expected} not in {seen:?}"
        );
    }
}

/// The ConfigMap a Deployment owns: server-side applied, with a controller owner reference.
fn owned_config(deployment: &Deployment) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{}-config", deployment.meta().name())),
            namespace: Some(deployment.meta().namespace().to_owned()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name: deployment.meta().name().to_owned(),
                uid: deployment.meta().uid().to_owned(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "replicas".into(),
            deployment.spec.replicas.unwrap_or(1).to_string(),
        )])),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_of_k8s_openapi_kinds_recreates_what_it_owns() {
    let sim = Simulator::start().await.unwrap();
    let client = client(&sim);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let configs: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut d = Deployment::default();
    d.metadata.name = Some("web".into());
    d.spec.replicas = Some(3);
    deployments
        .create(&PostParams::default(), &d)
        .await
        .unwrap();

    let factory = InformerFactory::new(client.clone());
    let primary = factory.informer::<Deployment>(Some("default"));
    let owned = factory.informer::<ConfigMap>(Some("default"));
    let controller = Controller::new(&primary, 2).owns(&owned);
    factory.start();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(controller.run(
        |d: Arc<Deployment>, configs: Arc<Api<ConfigMap>>| async move {
            let cm = owned_config(&d);
            let name = cm.meta().name().to_owned();
            configs
                .patch(
                    &name,
                    &PatchParams::apply("k8s-openapi-test").force(),
                    &Patch::Apply(cm),
                )
                .await?;
            Ok::<_, informer::Error>(Action::Done)
        },
        Arc::new(configs.clone()),
        async {
            stopped.await.ok();
        },
    ));

    let store = owned.store().clone();
    let replicas = |store: &informer::Store<ConfigMap>| {
        store
            .get("default", "web-config")
            .and_then(|cm| cm.data.as_ref()?.get("replicas").cloned())
    };
    eventually("the owned ConfigMap", || {
        replicas(&store).as_deref() == Some("3")
    })
    .await;
    let first_uid = store
        .get("default", "web-config")
        .unwrap()
        .meta()
        .uid()
        .to_owned();

    // Deleting what it owns brings the owner back to reconcile, which applies it again.
    configs
        .delete("web-config", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the recreated ConfigMap", || {
        store
            .get("default", "web-config")
            .is_some_and(|cm| cm.meta().uid() != first_uid)
    })
    .await;
    // A change of the primary is followed.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    eventually("the followed spec", || {
        replicas(&store).as_deref() == Some("5")
    })
    .await;

    stop.send(()).unwrap();
    let summary = run.await.unwrap();
    assert!(summary.done >= 3, "{summary:?}");
}
