//! Turns a RESOURCE argument into an [`ApiResource`] through the server's discovery documents
//! (`/api/v1`, `/apis`, `/apis/{group}/{version}`), the way kubectl does.
//!
//! Accepted forms: a plural (`pods`), a singular (`pod`), a short name (`po`), a kind (`Pod`),
//! `plural.group` (`endpointslices.discovery.k8s.io`), and `group/version/plural`
//! (`example.com/v1/widgets`; `core/v1/pods` or `/v1/pods` for the core group). Names match
//! case-insensitively; the core group wins, then groups in the server's order, each at its
//! preferred version.

use hyper::Method;
use informer::{ApiResource, Client};
use serde::Deserialize;

use super::{CliError, CliResult};

/// One entry of an `APIResourceList`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ApiResourceEntry {
    name: String,
    singular_name: String,
    namespaced: bool,
    kind: String,
    short_names: Vec<String>,
    verbs: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ApiResourceList {
    resources: Vec<ApiResourceEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct GroupVersion {
    version: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct ApiGroup {
    name: String,
    versions: Vec<GroupVersion>,
    preferred_version: Option<GroupVersion>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ApiGroupList {
    groups: Vec<ApiGroup>,
}

impl ApiResourceEntry {
    fn matches(&self, wanted: &str) -> bool {
        !self.name.contains('/')
            && (self.name.eq_ignore_ascii_case(wanted)
                || self.singular_name.eq_ignore_ascii_case(wanted)
                || self.kind.eq_ignore_ascii_case(wanted)
                || self
                    .short_names
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(wanted)))
    }

    fn watchable(&self) -> bool {
        // Older servers omit verbs; assume the best then.
        self.verbs.is_empty()
            || (self.verbs.iter().any(|v| v == "list") && self.verbs.iter().any(|v| v == "watch"))
    }

    fn to_api_resource(&self, group: &str, version: &str) -> ApiResource {
        ApiResource::new(group, version, &self.kind, &self.name, self.namespaced)
    }
}

fn group_version_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    }
}

async fn resources_of(client: &Client, group: &str, version: &str) -> CliResult<ApiResourceList> {
    let path = group_version_path(group, version);
    client
        .request(Method::GET, &path, None)
        .await
        .map_err(|e| discovery_error(&path, e))
}

/// A failed discovery read: kubectl's words for 401 and 403, else the path and the error.
fn discovery_error(path: &str, e: informer::Error) -> CliError {
    match e.http_code() {
        Some(401 | 403) => CliError::Runtime(super::connect::describe(&e)),
        _ => CliError::Runtime(format!("discovery {path}: {e}")),
    }
}

/// Finds `wanted` among the resources of one group version.
async fn find_in(
    client: &Client,
    group: &str,
    version: &str,
    wanted: &str,
) -> CliResult<Option<ApiResource>> {
    let list = resources_of(client, group, version).await?;
    let found = list
        .resources
        .iter()
        .find(|r| r.name.eq_ignore_ascii_case(wanted))
        .or_else(|| list.resources.iter().find(|r| r.matches(wanted)));
    match found {
        Some(r) if !r.watchable() => Err(CliError::Runtime(format!(
            "{} ({}) cannot be listed and watched",
            r.name,
            group_version_path(group, version)
        ))),
        Some(r) => Ok(Some(r.to_api_resource(group, version))),
        None => Ok(None),
    }
}

/// Resolves a RESOURCE argument; see the [module docs](self).
pub async fn resolve(client: &Client, resource: &str) -> CliResult<ApiResource> {
    let not_found = || {
        CliError::Runtime(format!(
            "the server doesn't have a resource type {resource:?}"
        ))
    };
    let parts: Vec<&str> = resource.split('/').collect();
    if parts.len() == 3 {
        let group = match parts[0] {
            "core" => "",
            g => g,
        };
        let (version, plural) = (parts[1], parts[2]);
        if version.is_empty() || plural.is_empty() {
            return Err(CliError::Usage(format!(
                "{resource:?}: expected group/version/resource"
            )));
        }
        return find_in(client, group, version, plural)
            .await?
            .ok_or_else(not_found);
    }
    if parts.len() != 1 || resource.is_empty() {
        return Err(CliError::Usage(format!(
            "{resource:?}: expected a resource name or group/version/resource"
        )));
    }
    let (name, group_filter) = match resource.split_once('.') {
        Some((n, g)) => (n, Some(g)),
        None => (resource, None),
    };
    if group_filter.is_none_or(|g| g.is_empty() || g == "core") {
        if let Some(r) = find_in(client, "", "v1", name).await? {
            return Ok(r);
        }
    }
    let groups: ApiGroupList = client
        .request(Method::GET, "/apis", None)
        .await
        .map_err(|e| discovery_error("/apis", e))?;
    for group in &groups.groups {
        if group_filter.is_some_and(|g| !g.eq_ignore_ascii_case(&group.name)) {
            continue;
        }
        let version = group
            .preferred_version
            .as_ref()
            .or(group.versions.first())
            .map(|v| v.version.as_str());
        let Some(version) = version else { continue };
        if let Some(r) = find_in(client, &group.name, version, name).await? {
            return Ok(r);
        }
    }
    Err(not_found())
}
