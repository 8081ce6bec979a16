//! Every write of `Api` against the simulator: the scenario the real apiserver suite runs too
//! (`tests/support/writes.rs`).

use informer::{Client, Config};
use informer_sim::Simulator;

use crate::support::writes;

#[tokio::test]
async fn every_write_on_a_lean_kind() {
    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    writes::lean_kind_writes(&client, "default").await;
}

#[tokio::test]
async fn a_finalizer_holds_an_object_until_cleanup() {
    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    writes::finalizer_flow(&client, "default").await;
}

/// A reconcile that wrote reads its own write from the informer: `wait_for_version` completes
/// once the store holds the written version (or newer), `wait_for_absence` once a delete has
/// arrived, and a version the server never wrote times out with what the store holds.
#[tokio::test]
async fn an_informer_waits_for_its_own_writes() {
    use informer::client::{DeleteParams, Patch, PatchParams, PostParams};
    use informer::{Api, ConfigMap, Informer};
    use std::time::Duration;

    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let informer = Informer::new(api.clone(), Default::default());
    informer.start();
    informer
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();

    let mut cm = ConfigMap::default();
    cm.metadata.name = "mine".into();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    informer
        .wait_for_version(
            "default",
            "mine",
            &created.metadata.resource_version,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    for round in 0..20 {
        let value = round.to_string();
        let patch = serde_json::json!({"data": {"round": value}});
        let written = api
            .patch("mine", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        informer
            .wait_for_version(
                "default",
                "mine",
                &written.metadata.resource_version,
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        // Read from memory right after: the write is there, never the version before it.
        let seen = informer.store().get("default", "mine").unwrap();
        assert_eq!(seen.data.get("round"), Some(value.as_str()));
        drop(seen);
    }

    // A version the server has not reached: a timeout that says what the store holds.
    let e = informer
        .wait_for_version("default", "mine", "999999999", Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(matches!(e, informer::Error::Timeout(_)), "{e}");
    assert!(e.to_string().contains("resourceVersion"), "{e}");

    api.delete("mine", &DeleteParams::default()).await.unwrap();
    informer
        .wait_for_absence("default", "mine", Duration::from_secs(60))
        .await
        .unwrap();
    assert!(informer.store().get("default", "mine").is_none());
}

#[tokio::test]
async fn every_write_on_a_custom_resource() {
    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    writes::custom_resource_writes(&client, "default").await;
}

#[tokio::test]
async fn every_write_on_a_k8s_openapi_kind() {
    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    writes::k8s_openapi_writes(&client, "default").await;
}

#[tokio::test]
async fn a_custom_resource_typed_on_k8s_openapi_metadata() {
    let sim = Simulator::start().await.unwrap();
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    writes::typed_custom_resource(&client, "default").await;
}
