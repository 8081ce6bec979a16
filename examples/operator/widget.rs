//! The `Widget` kind: its Rust type, its CustomResourceDefinition, and installing that CRD.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use informer::client::PostParams;
use informer::{Api, ApiResource, Client, DynamicObject, Object, ObjectMeta, Resource};
use serde::{Deserialize, Serialize};
use serde_json::json;

pub const GROUP: &str = "example.com";
pub const VERSION: &str = "v1";
pub const API_VERSION: &str = "example.com/v1";
pub const KIND: &str = "Widget";
pub const CRD_NAME: &str = "widgets.example.com";

/// A Widget as the informer stores it. A typed kind of your own is a serde struct with
/// `metadata` that implements [`Object`] (and [`Resource`], which says where it lives).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Widget {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: WidgetSpec,
    #[serde(default)]
    pub status: Option<WidgetStatus>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct WidgetSpec {
    #[serde(default)]
    pub size: i64,
    #[serde(default)]
    pub data: BTreeMap<String, String>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WidgetStatus {
    #[serde(default)]
    pub config_map: String,
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default)]
    pub ready: bool,
}

impl Object for Widget {
    type Meta = ObjectMeta;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Resource for Widget {
    fn api_resource() -> ApiResource {
        ApiResource::from_static(GROUP, VERSION, KIND, "widgets", true)
    }
}

/// The CRD: namespaced, one served and stored version, a status subresource, and the structural
/// schema `apiextensions.k8s.io/v1` requires.
fn definition() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": KIND, "listKind": "WidgetList"},
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "data": {"type": "object", "additionalProperties": {"type": "string"}},
                        }},
                        "status": {"type": "object", "properties": {
                            "configMap": {"type": "string"},
                            "observedGeneration": {"type": "integer", "format": "int64"},
                            "ready": {"type": "boolean"},
                        }},
                    },
                }},
            }],
        },
    })
}

fn crds(client: &Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        ApiResource::from_static(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        ),
    )
}

/// Creates the CRD unless it exists, then waits until the apiserver serves it (`Established`).
/// Replicas starting together race here: the loser's 409 AlreadyExists is as good as a success.
pub async fn install(client: &Client, timeout: Duration) -> Result<(), String> {
    let crds = crds(client);
    let crd: DynamicObject = serde_json::from_value(definition()).map_err(|e| e.to_string())?;
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => eprintln!("operator: created CRD {CRD_NAME}"),
        Err(e) if e.is_already_exists() => eprintln!("operator: CRD {CRD_NAME} already exists"),
        Err(e) => return Err(format!("creating CRD {CRD_NAME}: {e}")),
    }
    let deadline = Instant::now() + timeout;
    loop {
        match crds.get(CRD_NAME).await {
            Ok(crd) if established(&crd) => return Ok(()),
            Ok(_) => {}
            Err(e) if !e.is_not_found() => eprintln!("operator: reading CRD {CRD_NAME}: {e}"),
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(format!("CRD {CRD_NAME} not Established within {timeout:?}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// True when the CRD's `Established` condition is `True`.
fn established(crd: &DynamicObject) -> bool {
    let conditions = crd
        .data
        .get("status")
        .and_then(|s| s["conditions"].as_array());
    conditions
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}
