//! API resource discovery: a resource's name (`pods`, `po`, `Pod`, `endpointslices.discovery.k8s.io`,
//! `example.com/v1/widgets`) to its group, version, kind and scope, through the server's discovery
//! documents (`/api/v1`, `/apis`, `/apis/{group}/{version}`), the way kubectl does.

use hyper::Method;
use serde::Deserialize;

use super::Client;
use crate::error::{Error, Result};
use crate::model::ApiResource;

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

impl Client {
    /// Finds a resource type the server serves and that can be listed and watched, by any name
    /// kubectl accepts: a plural (`pods`), a singular (`pod`), a short name (`po`), a kind (`Pod`),
    /// `plural.group` (`endpointslices.discovery.k8s.io`), or `group/version/plural`
    /// (`example.com/v1/widgets`; `core/v1/pods` or `/v1/pods` for the core group). Names match
    /// case-insensitively; the core group wins, then groups in the server's order, each at its
    /// preferred version.
    ///
    /// Errors: [`Error::InvalidName`] for a malformed `name` (nothing is sent),
    /// [`Error::UnknownResource`] when no served type matches or the match cannot be listed and
    /// watched, and the errors of reading the discovery documents (a 403 among them).
    ///
    /// Use the result with [`Api::all_with`](crate::Api::all_with) or
    /// [`Informer::dynamic`](crate::Informer::dynamic).
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// let slices = client.resolve_resource("endpointslices").await?;
    /// assert_eq!(slices.api_version(), "discovery.k8s.io/v1");
    /// assert_eq!(slices.kind, "EndpointSlice");
    /// # Ok(()) }
    /// ```
    pub async fn resolve_resource(&self, name: &str) -> Result<ApiResource> {
        let unknown =
            || Error::UnknownResource(format!("the server doesn't have a resource type {name:?}"));
        let parts: Vec<&str> = name.split('/').collect();
        if parts.len() == 3 {
            let group = match parts[0] {
                "core" => "",
                g => g,
            };
            let (version, plural) = (parts[1], parts[2]);
            if version.is_empty() || plural.is_empty() {
                return Err(Error::InvalidName(format!(
                    "{name:?}: expected group/version/resource"
                )));
            }
            return self
                .find_resource_in(group, version, plural)
                .await?
                .ok_or_else(unknown);
        }
        if parts.len() != 1 || name.is_empty() {
            return Err(Error::InvalidName(format!(
                "{name:?}: expected a resource name or group/version/resource"
            )));
        }
        let (plural, group_filter) = match name.split_once('.') {
            Some((n, g)) => (n, Some(g)),
            None => (name, None),
        };
        if group_filter.is_none_or(|g| g.is_empty() || g == "core") {
            if let Some(r) = self.find_resource_in("", "v1", plural).await? {
                return Ok(r);
            }
        }
        let groups: ApiGroupList = self.request(Method::GET, "/apis", None).await?;
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
            if let Some(r) = self.find_resource_in(&group.name, version, plural).await? {
                return Ok(r);
            }
        }
        Err(unknown())
    }

    /// Finds `wanted` among the resources of one group version.
    async fn find_resource_in(
        &self,
        group: &str,
        version: &str,
        wanted: &str,
    ) -> Result<Option<ApiResource>> {
        let path = group_version_path(group, version);
        let list: ApiResourceList = self.request(Method::GET, &path, None).await?;
        let found = list
            .resources
            .iter()
            .find(|r| r.name.eq_ignore_ascii_case(wanted))
            .or_else(|| list.resources.iter().find(|r| r.matches(wanted)));
        match found {
            Some(r) if !r.watchable() => Err(Error::UnknownResource(format!(
                "{} ({path}) cannot be listed and watched",
                r.name
            ))),
            Some(r) => Ok(Some(r.to_api_resource(group, version))),
            None => Ok(None),
        }
    }
}
