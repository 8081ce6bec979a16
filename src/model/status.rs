//! The apiserver's `Status` object: the body of every error response and of `ERROR` watch events.

use serde::{Deserialize, Serialize};

use super::meta::exact_vec;

/// A `Status` (kind `Status`, apiVersion `v1`), as the apiserver returns for failures.
///
/// ```
/// let s: informer::Status = serde_json::from_str(
///     r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
///         "message":"too old resource version: 1 (90)","reason":"Expired","code":410}"#,
/// ).unwrap();
/// assert!(s.is_expired());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `"Success"` or `"Failure"`.
    #[serde(default)]
    pub status: String,
    /// A human-readable description.
    #[serde(default)]
    pub message: String,
    /// Machine-readable reason: `NotFound`, `Expired`, `Conflict`, `TooManyRequests`, ...
    #[serde(default)]
    pub reason: String,
    /// What the status is about, when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code this Status stands for; 0 when absent (etcd2-era servers omitted it).
    #[serde(default)]
    pub code: u16,
    /// For a 410 on a stale `continue` token, the apiserver puts a fresh (inconsistent) token here.
    #[serde(default)]
    pub metadata: super::ListMeta,
}

impl Status {
    /// True for "the resourceVersion you asked for is gone": code 410 with any reason, or reason
    /// `Expired`/`Gone` (client-go's `IsResourceExpired` / `IsGone`).
    pub fn is_expired(&self) -> bool {
        self.code == 410 || self.reason == "Expired" || self.reason == "Gone"
    }

    /// True when the server asks for a later retry (429, or `details.retryAfterSeconds` set).
    pub fn retry_after_seconds(&self) -> Option<u32> {
        self.details.as_ref().and_then(|d| d.retry_after_seconds)
    }

    /// True for the "Too large resource version" timeout (client-go's `isTooLargeResourceVersionError`).
    pub fn is_too_large_resource_version(&self) -> bool {
        let cause = self.details.as_ref().is_some_and(|d| {
            d.causes.iter().any(|c| {
                c.reason == "ResourceVersionTooLarge"
                    || c.message.contains("Too large resource version")
            })
        });
        cause || (self.code == 504 && self.message.contains("Too large resource version"))
    }
}

/// `Status.details`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The name of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The API group of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The kind of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The uid of the object concerned.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// The individual causes (e.g. each invalid field).
    pub causes: Vec<StatusCause>,
    /// How long to wait before retrying, when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// One entry of `Status.details.causes`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusCause {
    /// A machine-readable reason.
    #[serde(default)]
    pub reason: String,
    /// A human-readable description.
    #[serde(default)]
    pub message: String,
    /// The field concerned (`spec.ports[0].port`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}
