//! The factory builds its informers the way `Informer::new` does: the factory's and the request's
//! selectors reach the apiserver, a transform shapes every stored object, dynamic objects are
//! stamped with `apiVersion`/`kind`, and only equal requests share an informer.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::support::convergence::{client, cm, options};
use informer::fifo::Transform;
use informer::informer::InformerRequest;
use informer::reflector::ReflectorOptions;
use informer::{ConfigMap, DynamicObject, Informer, InformerFactory, Object, Resource};
use informer_sim::Simulator;

/// The stored objects' names.
fn names<T: Object + Clone>(inf: &Informer<T>) -> BTreeSet<String> {
    inf.store()
        .list()
        .iter()
        .map(|o| informer::model::Metadata::name(o.meta()).to_owned())
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factory_informers_honour_selectors_and_transforms_and_stamp_dynamic_objects() {
    let sim = Simulator::start().await.unwrap();
    for (name, v) in [("c0", 0), ("c1", 1), ("c2", 1), ("c3", 2)] {
        sim.create("configmaps", Some("a"), cm("a", name, v))
            .unwrap();
    }
    sim.create("configmaps", Some("b"), cm("b", "other", 1))
        .unwrap();
    // The factory's own selector (client-go's WithTweakListOptions) applies to every informer
    // whose request sets none. Paged lists, not streaming ones: list items come without `kind`
    // and `apiVersion` (as the apiserver sends them), so the stamping has something to do.
    let factory = InformerFactory::with_options(
        client(&sim),
        ReflectorOptions {
            label_selector: Some("v=1".into()),
            streaming_list: false,
            ..options()
        },
    );
    let typed = factory.informer::<ConfigMap>(Some("a"));
    let drop_data: Transform<ConfigMap> = Arc::new(|mut c: ConfigMap| {
        c.data.clear();
        c.metadata
            .annotations
            .insert("transformed".into(), "yes".into());
        c
    });
    let request = || {
        InformerRequest::<ConfigMap>::new(ConfigMap::api_resource())
            .namespace(Some("a"))
            .label_selector("v in (1,2)")
            .field_selector("metadata.name!=c1")
            .transform(drop_data.clone())
    };
    let shaped = factory.informer_with(request());
    // The same request shares the informer; another transform, or none, does not.
    assert!(Arc::ptr_eq(
        shaped.store(),
        factory.informer_with(request()).store()
    ));
    let other_transform = factory.informer_with(
        InformerRequest::<ConfigMap>::new(ConfigMap::api_resource())
            .namespace(Some("a"))
            .label_selector("v in (1,2)")
            .field_selector("metadata.name!=c1")
            .transform(Arc::new(|c: ConfigMap| c)),
    );
    assert!(!Arc::ptr_eq(shaped.store(), other_transform.store()));
    assert!(!Arc::ptr_eq(shaped.store(), typed.store()));
    // Dynamic objects: stamped whether asked with `dynamic` or with a request and a transform
    // (which sees the stamped kind).
    let dynamic = factory.dynamic(&ConfigMap::api_resource(), Some("a"));
    let kinds_seen_by_transform: Transform<DynamicObject> = Arc::new(|mut o: DynamicObject| {
        let seen = format!("{}/{}", o.types.api_version, o.types.kind);
        o.metadata.annotations.insert("seen".into(), seen);
        o
    });
    let dynamic_selected = factory.informer_with(
        InformerRequest::<DynamicObject>::new(ConfigMap::api_resource())
            .label_selector("v=2")
            .transform(kinds_seen_by_transform),
    );
    factory.start();
    for synced in [
        typed.wait_for_sync(Duration::from_secs(60)).await,
        shaped.wait_for_sync(Duration::from_secs(60)).await,
        other_transform.wait_for_sync(Duration::from_secs(60)).await,
        dynamic.wait_for_sync(Duration::from_secs(60)).await,
        dynamic_selected
            .wait_for_sync(Duration::from_secs(60))
            .await,
    ] {
        synced.unwrap();
    }

    assert_eq!(names(&typed), set(&["c1", "c2"]));
    assert_eq!(names(&shaped), set(&["c2", "c3"]));
    for c in shaped.store().list() {
        assert!(c.data.is_empty(), "{c:?}");
        assert_eq!(c.metadata.annotations.get("transformed").unwrap(), "yes");
    }
    assert_eq!(names(&other_transform), set(&["c2", "c3"]));
    assert!(
        other_transform
            .store()
            .list()
            .iter()
            .all(|c| !c.data.is_empty())
    );
    assert_eq!(names(&dynamic), set(&["c1", "c2"]));
    for o in dynamic.store().list() {
        assert_eq!(
            (o.types.api_version.as_str(), o.types.kind.as_str()),
            ("v1", "ConfigMap")
        );
    }
    // Every namespace, the request's selector in place of the factory's.
    assert_eq!(names(&dynamic_selected), set(&["c3"]));
    let o = dynamic_selected.store().get("a", "c3").unwrap();
    assert_eq!(o.types.kind, "ConfigMap");
    assert_eq!(o.metadata.annotations.get("seen").unwrap(), "v1/ConfigMap");

    // Watch events go through the same path as the list.
    sim.create("configmaps", Some("a"), cm("a", "c4", 2))
        .unwrap();
    sim.create("configmaps", Some("b"), cm("b", "c5", 2))
        .unwrap();
    assert!(
        crate::support::convergence::eventually(60, || names(&dynamic_selected)
            == set(&["c3", "c4", "c5"])
            && names(&shaped) == set(&["c2", "c3", "c4"]))
        .await
    );
    assert_eq!(
        dynamic_selected
            .store()
            .get("b", "c5")
            .unwrap()
            .types
            .api_version,
        "v1"
    );
    assert!(shaped.store().get("a", "c4").unwrap().data.is_empty());
    for inf in [&typed, &shaped, &other_transform] {
        inf.stop().await;
    }
    dynamic.stop().await;
    dynamic_selected.stop().await;
}
