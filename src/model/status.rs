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

    /// What the failure means ([`StatusReason`]), from `reason`, else from `code`.
    pub fn reason(&self) -> StatusReason {
        StatusReason::from_reason_and_code(&self.reason, self.code)
    }

    /// The individual causes the server gave (each invalid field of a 422, each conflicting
    /// field of a server-side apply 409); empty when it gave none.
    pub fn causes(&self) -> &[StatusCause] {
        self.details.as_ref().map_or(&[], |d| d.causes.as_slice())
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

/// What a failed request's [`Status`] means, from its `reason` (and, when a server leaves the
/// reason out, its code), as client-go's `errors.ReasonForError` and `IsNotFound`/`IsConflict`/...
/// read it. A controller branches on this, never on the message text. `Gone` reads as
/// [`Expired`](StatusReason::Expired) and `ServerTimeout` as [`Timeout`](StatusReason::Timeout):
/// for a client each pair asks the same thing (relist; retry later).
///
/// ```
/// use informer::model::StatusReason;
/// use informer::Status;
/// let s = Status { code: 409, reason: "Conflict".into(), ..Default::default() };
/// assert_eq!(s.reason(), StatusReason::Conflict);
/// // A proxy's bare 404 with no reason still reads as NotFound.
/// assert_eq!(Status { code: 404, ..Default::default() }.reason(), StatusReason::NotFound);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StatusReason {
    /// 404: the object (or the resource type) does not exist.
    NotFound,
    /// 409 on create: an object of that name exists.
    AlreadyExists,
    /// 409 on update: the resourceVersion (or uid) precondition failed, or a server-side apply
    /// conflicted with another field manager (`details.causes` name the fields).
    Conflict,
    /// 422: the object fails validation; `details.causes` name each field.
    Invalid,
    /// 403: the user may not do this (RBAC), or the namespace is being deleted.
    Forbidden,
    /// 401: no valid credentials.
    Unauthorized,
    /// 400: the request is malformed.
    BadRequest,
    /// 405: the resource does not support this verb.
    MethodNotAllowed,
    /// 406: none of the accepted content types can be served.
    NotAcceptable,
    /// 413: the request body is too large.
    RequestEntityTooLarge,
    /// 415: the body's content type is not accepted (e.g. a strategic merge patch on a custom
    /// resource).
    UnsupportedMediaType,
    /// 410: the resourceVersion or continue token asked for is gone.
    Expired,
    /// 429: too many requests; retry after `details.retryAfterSeconds`.
    TooManyRequests,
    /// 504 with reason `Timeout`, or `ServerTimeout` (500): the server did not finish in time.
    Timeout,
    /// 500: the server failed.
    InternalError,
    /// 503: the server (or an aggregated API behind it) is unavailable.
    ServiceUnavailable,
    /// Any other reason or code.
    Unknown,
}

impl StatusReason {
    /// The reason a `Status` body carries for it (`"NotFound"`, `"Conflict"`, ...).
    ///
    /// ```
    /// assert_eq!(informer::model::StatusReason::AlreadyExists.as_str(), "AlreadyExists");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::NotFound => "NotFound",
            StatusReason::AlreadyExists => "AlreadyExists",
            StatusReason::Conflict => "Conflict",
            StatusReason::Invalid => "Invalid",
            StatusReason::Forbidden => "Forbidden",
            StatusReason::Unauthorized => "Unauthorized",
            StatusReason::BadRequest => "BadRequest",
            StatusReason::MethodNotAllowed => "MethodNotAllowed",
            StatusReason::NotAcceptable => "NotAcceptable",
            StatusReason::RequestEntityTooLarge => "RequestEntityTooLarge",
            StatusReason::UnsupportedMediaType => "UnsupportedMediaType",
            StatusReason::Expired => "Expired",
            StatusReason::TooManyRequests => "TooManyRequests",
            StatusReason::Timeout => "Timeout",
            StatusReason::InternalError => "InternalError",
            StatusReason::ServiceUnavailable => "ServiceUnavailable",
            StatusReason::Unknown => "",
        }
    }

    /// The reason for a `reason` text and HTTP `code`: the text when it is one the apiserver
    /// defines, else the code's (client-go's `reasonAndCodeForError` fallback).
    fn from_reason_and_code(reason: &str, code: u16) -> StatusReason {
        match reason {
            "NotFound" => StatusReason::NotFound,
            "AlreadyExists" => StatusReason::AlreadyExists,
            "Conflict" => StatusReason::Conflict,
            "Invalid" => StatusReason::Invalid,
            "Forbidden" => StatusReason::Forbidden,
            "Unauthorized" => StatusReason::Unauthorized,
            "BadRequest" => StatusReason::BadRequest,
            "MethodNotAllowed" => StatusReason::MethodNotAllowed,
            "NotAcceptable" => StatusReason::NotAcceptable,
            "RequestEntityTooLarge" => StatusReason::RequestEntityTooLarge,
            "UnsupportedMediaType" => StatusReason::UnsupportedMediaType,
            "Expired" | "Gone" => StatusReason::Expired,
            "TooManyRequests" => StatusReason::TooManyRequests,
            "Timeout" | "ServerTimeout" => StatusReason::Timeout,
            "InternalError" => StatusReason::InternalError,
            "ServiceUnavailable" => StatusReason::ServiceUnavailable,
            _ => match code {
                400 => StatusReason::BadRequest,
                401 => StatusReason::Unauthorized,
                403 => StatusReason::Forbidden,
                404 => StatusReason::NotFound,
                405 => StatusReason::MethodNotAllowed,
                406 => StatusReason::NotAcceptable,
                409 => StatusReason::Conflict,
                410 => StatusReason::Expired,
                413 => StatusReason::RequestEntityTooLarge,
                415 => StatusReason::UnsupportedMediaType,
                422 => StatusReason::Invalid,
                429 => StatusReason::TooManyRequests,
                500 => StatusReason::InternalError,
                503 => StatusReason::ServiceUnavailable,
                504 => StatusReason::Timeout,
                _ => StatusReason::Unknown,
            },
        }
    }
}

impl std::fmt::Display for StatusReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
