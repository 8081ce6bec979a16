//! The resource registry (which kinds the simulator serves) and the discovery documents built
//! from it: `/api`, `/apis`, `/api/v1`, `/apis/{group}/{version}` and `/version`.
//!
//! Invariant: a resource is identified by its index in [`Registry::list`]; indices never change
//! (resources are only ever appended), so events and watchers can refer to a resource by index.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Value, json};

use informer::model::ApiResource;

/// A served resource: its [`ApiResource`] plus discovery extras and pre-serialized JSON prefixes.
#[derive(Debug)]
pub struct ResourceInfo {
    /// Group, version, kind, plural, scope.
    pub api: ApiResource,
    /// kubectl short names (`po`, `svc`, ...).
    pub short_names: Vec<String>,
    /// Typed builtin (list items carry no kind/apiVersion) or dynamic (CRD: items carry them).
    pub builtin: bool,
    /// Serves `{name}/status`: writes to the resource keep `.status`, writes to `/status` change
    /// only `.status` (see `strategy.rs`).
    pub status_subresource: bool,
    /// Serves `{name}/scale` (an `autoscaling/v1` Scale) over these fields.
    pub scale: Option<ScaleInfo>,
    /// `{"kind":"Pod","apiVersion":"v1",` — the start of every full object.
    pub(crate) object_prefix: Bytes,
}

/// Where a resource with a scale subresource keeps its replicas and selector: a CRD's
/// `subresources.scale` (JSON paths as `.spec.replicas`), or a Deployment's fixed fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleInfo {
    /// `specReplicasPath`, e.g. `.spec.replicas`.
    pub spec_replicas_path: String,
    /// `statusReplicasPath`, e.g. `.status.replicas`.
    pub status_replicas_path: String,
    /// `labelSelectorPath` (a string selector, e.g. `.status.selector`); `None`: no selector.
    pub label_selector_path: Option<String>,
}

impl ResourceInfo {
    /// Builds the info for `api`.
    pub fn new(api: ApiResource, short_names: &[&str], builtin: bool) -> Self {
        let object_prefix = Bytes::from(format!(
            "{{\"kind\":{},\"apiVersion\":{},",
            Value::String(api.kind.to_string()),
            Value::String(api.api_version())
        ));
        ResourceInfo {
            api,
            short_names: short_names.iter().map(|s| s.to_string()).collect(),
            builtin,
            status_subresource: false,
            scale: None,
            object_prefix,
        }
    }

    /// Declares a status subresource (`{name}/status`).
    pub fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// Declares a scale subresource (`{name}/scale`).
    pub fn with_scale(mut self, scale: ScaleInfo) -> Self {
        self.scale = Some(scale);
        self
    }

    /// The lowercase singular name (kind lowercased), as discovery reports it.
    pub fn singular(&self) -> String {
        self.api.kind.to_ascii_lowercase()
    }
}

/// The set of served resources.
#[derive(Debug, Default)]
pub struct Registry {
    list: Vec<Arc<ResourceInfo>>,
    /// Per index: served now (a deleted CRD's resources keep their index but are not served).
    served: Vec<bool>,
}

impl Registry {
    /// The builtin resources: pods, services, endpoints, configmaps, secrets, events, namespaces,
    /// nodes (core/v1), endpointslices (discovery.k8s.io/v1) and leases (coordination.k8s.io/v1).
    pub fn builtin() -> Self {
        let mut r = Registry::default();
        let core = |k: &'static str, p: &'static str, ns: bool| {
            ApiResource::from_static("", "v1", k, p, ns)
        };
        r.add(ResourceInfo::new(core("Pod", "pods", true), &["po"], true).with_status());
        r.add(ResourceInfo::new(core("Service", "services", true), &["svc"], true).with_status());
        r.add(ResourceInfo::new(
            core("Endpoints", "endpoints", true),
            &["ep"],
            true,
        ));
        r.add(ResourceInfo::new(
            core("ConfigMap", "configmaps", true),
            &["cm"],
            true,
        ));
        r.add(ResourceInfo::new(
            core("Secret", "secrets", true),
            &[],
            true,
        ));
        r.add(ResourceInfo::new(
            core("Event", "events", true),
            &["ev"],
            true,
        ));
        r.add(
            ResourceInfo::new(core("Namespace", "namespaces", false), &["ns"], true).with_status(),
        );
        r.add(ResourceInfo::new(core("Node", "nodes", false), &["no"], true).with_status());
        r.add(ResourceInfo::new(
            ApiResource::from_static(
                "discovery.k8s.io",
                "v1",
                "EndpointSlice",
                "endpointslices",
                true,
            ),
            &[],
            true,
        ));
        r.add(ResourceInfo::new(
            ApiResource::from_static("coordination.k8s.io", "v1", "Lease", "leases", true),
            &[],
            true,
        ));
        // Appended after the original ten, so their indices do not move.
        r.add(
            ResourceInfo::new(
                ApiResource::from_static("apps", "v1", "Deployment", "deployments", true),
                &["deploy"],
                true,
            )
            .with_status()
            .with_scale(ScaleInfo {
                spec_replicas_path: ".spec.replicas".into(),
                status_replicas_path: ".status.replicas".into(),
                label_selector_path: None,
            }),
        );
        r.add(
            ResourceInfo::new(
                ApiResource::from_static(
                    // crd.rs's GROUP; written out, as crd.rs builds on this module.
                    "apiextensions.k8s.io",
                    "v1",
                    "CustomResourceDefinition",
                    "customresourcedefinitions",
                    false,
                ),
                &["crd", "crds"],
                true,
            )
            .with_status(),
        );
        r
    }

    /// Appends a resource and returns its index; an existing group/version/plural is replaced in place.
    pub fn add(&mut self, info: ResourceInfo) -> usize {
        let same = |r: &Arc<ResourceInfo>| {
            r.api.group == info.api.group
                && r.api.version == info.api.version
                && r.api.plural == info.api.plural
        };
        if let Some(i) = self.list.iter().position(same) {
            self.list[i] = Arc::new(info);
            self.served[i] = true;
            return i;
        }
        self.list.push(Arc::new(info));
        self.served.push(true);
        self.list.len() - 1
    }

    /// Stops serving the resource at `idx` (its index stays taken).
    pub fn withdraw(&mut self, idx: usize) {
        if let Some(s) = self.served.get_mut(idx) {
            *s = false;
        }
    }

    fn is_served(&self, idx: usize) -> bool {
        self.served.get(idx).copied().unwrap_or(false)
    }

    /// The served resources with their indices.
    fn served(&self) -> impl Iterator<Item = &Arc<ResourceInfo>> {
        self.list
            .iter()
            .enumerate()
            .filter(|(i, _)| self.is_served(*i))
            .map(|(_, r)| r)
    }

    /// All resources, by index.
    pub fn list(&self) -> &[Arc<ResourceInfo>] {
        &self.list
    }

    /// Resolves a URL's group/version/plural to an index.
    pub fn find_path(&self, group: &str, version: &str, plural: &str) -> Option<usize> {
        self.list.iter().enumerate().position(|(i, r)| {
            self.is_served(i)
                && r.api.group == group
                && r.api.version == version
                && r.api.plural == plural
        })
    }

    /// Resolves a user-facing name: plural, `plural.group`, singular, kind or short name
    /// (case-insensitive), like kubectl does.
    pub fn find_name(&self, name: &str) -> Option<usize> {
        let n = name.to_ascii_lowercase();
        self.list.iter().enumerate().position(|(i, r)| {
            let full = format!("{}.{}", r.api.plural, r.api.group);
            self.is_served(i)
                && (r.api.plural == n
                    || full == n
                    || r.singular() == n
                    || r.short_names.contains(&n))
        })
    }

    /// `/api`: the APIVersions document.
    pub fn api_versions(&self, server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
        })
    }

    /// `/apis`: the APIGroupList document (every non-core group).
    pub fn api_group_list(&self) -> Value {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for r in self.served() {
            if r.api.group.is_empty() {
                continue;
            }
            match groups.iter_mut().find(|(g, _)| *g == r.api.group) {
                Some((_, vs)) if !vs.contains(&r.api.version.to_string()) => {
                    vs.push(r.api.version.to_string())
                }
                Some(_) => {}
                None => groups.push((r.api.group.to_string(), vec![r.api.version.to_string()])),
            }
        }
        let groups: Vec<Value> = groups
            .into_iter()
            .map(|(g, vs)| {
                let versions: Vec<Value> = vs
                    .iter()
                    .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
                    .collect();
                let preferred = versions[0].clone();
                json!({"name": g, "versions": versions, "preferredVersion": preferred})
            })
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `/api/v1` or `/apis/{group}/{version}`: the APIResourceList, or `None` if nothing is served there.
    pub fn api_resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let mut resources: Vec<Value> = Vec::new();
        for r in self
            .served()
            .filter(|r| r.api.group == group && r.api.version == version)
        {
            let mut v = json!({
                "name": r.api.plural,
                "singularName": r.singular(),
                "namespaced": r.api.namespaced,
                "kind": r.api.kind,
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            });
            if !r.short_names.is_empty() {
                v["shortNames"] = json!(r.short_names);
            }
            resources.push(v);
            if r.status_subresource {
                resources.push(json!({
                    "name": format!("{}/status", r.api.plural),
                    "singularName": "",
                    "namespaced": r.api.namespaced,
                    "kind": r.api.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
            if r.scale.is_some() {
                resources.push(json!({
                    "name": format!("{}/scale", r.api.plural),
                    "singularName": "",
                    "namespaced": r.api.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }));
            }
        }
        if resources.is_empty() {
            return None;
        }
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
        )
    }
}

impl Registry {
    /// `/openapi/v3`: the index of per-group-version documents.
    ///
    /// The simulator publishes no schemas; the documents only declare that PATCH supports the
    /// `fieldValidation` query parameter, which is what kubectl checks before it lets the server
    /// validate (`kubectl create -f` works without `--validate=false`).
    pub fn openapi_v3_root(&self) -> Value {
        let mut paths = serde_json::Map::new();
        for r in self.served() {
            let gv = gv_path(&r.api.group, &r.api.version);
            paths.insert(
                gv.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash=0")}),
            );
        }
        json!({"paths": paths})
    }

    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/{group}/{version}`.
    pub fn openapi_v3_gv(&self, group: &str, version: &str) -> Option<Value> {
        let mut paths = serde_json::Map::new();
        for r in self
            .served()
            .filter(|r| r.api.group == group && r.api.version == version)
        {
            let base = format!("/{}", gv_path(group, version));
            let path = if r.api.namespaced {
                format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.api.plural)
            } else {
                format!("{base}/{}/{{name}}", r.api.plural)
            };
            let gvk = json!({"group": group, "version": version, "kind": r.api.kind});
            paths.insert(
                path,
                json!({"patch": {
                    "x-kubernetes-group-version-kind": gvk,
                    "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
                    "responses": {"200": {"description": "OK"}}
                }}),
            );
        }
        if paths.is_empty() {
            return None;
        }
        Some(json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.30.0-informer-sim"},
            "paths": paths,
            "components": {"schemas": {}}
        }))
    }
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/version`.
pub fn version_doc() -> Value {
    json!({
        "major": "1",
        "minor": "30",
        "gitVersion": "v1.30.0-informer-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.22.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}
