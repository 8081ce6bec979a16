//! API errors as the apiserver reports them: a `Status` object (kind `Status`, apiVersion `v1`)
//! with `code`, `reason`, `message` and optional `details`.
//!
//! Every constructor here reproduces a message the real kube-apiserver sends (see
//! `/work/shared/wire/real-1.20-*` and spec §2.5), so clients that match on text keep working.

use std::fmt;

use serde_json::{Value, json};

/// An apiserver failure: what the HTTP API returns as a non-2xx `Status` body and what the
/// programmatic API of [`Simulator`](super::Simulator) returns as `Err`.
///
/// ```
/// use informer_sim::ApiError;
/// let e = ApiError::not_found("endpoints", "nope");
/// assert_eq!(e.code, 404);
/// assert_eq!(e.reason, "NotFound");
/// assert_eq!(e.message, "endpoints \"nope\" not found");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// HTTP status code (`Status.code`).
    pub code: u16,
    /// Machine-readable reason (`Status.reason`), e.g. `NotFound`, `Expired`, `Conflict`.
    pub reason: &'static str,
    /// Human-readable message (`Status.message`).
    pub message: String,
    /// `Status.details`, when the apiserver sends one.
    pub details: Option<Value>,
    /// `Status.metadata.continue` (only for the 410 on a stale continue token).
    pub continue_token: Option<String>,
    /// Value of the HTTP `Retry-After` header, if any.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A failure with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            continue_token: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// Names the resource's API group, as the apiserver does for every resource outside the core
    /// group: `leases.coordination.k8s.io "x" not found` and `details.group`.
    pub(crate) fn with_group(mut self, group: &str) -> Self {
        if group.is_empty() {
            return self;
        }
        if let Some(details) = self.details.as_mut().and_then(Value::as_object_mut) {
            if let Some(kind) = details.get("kind").and_then(Value::as_str) {
                let plural = kind.to_string();
                if let Some(rest) = self.message.strip_prefix(&format!("{plural} ")) {
                    self.message = format!("{plural}.{group} {rest}");
                } else {
                    self.message = self.message.replacen(
                        &format!(" {plural} \""),
                        &format!(" {plural}.{group} \""),
                        1,
                    );
                }
            }
            details.insert("group".into(), Value::String(group.to_string()));
        }
        self
    }

    /// 404 `endpoints "nope" not found` (resource is the plural, as the real server reports it).
    pub fn not_found(resource: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
            .with_details(json!({"name": name, "kind": resource}))
    }

    /// 404 for a path that names no resource; body like the apiserver's generic 404.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409 AlreadyExists on a duplicate create.
    pub fn already_exists(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{resource} \"{name}\" already exists"),
        )
        .with_details(json!({"name": name, "kind": resource}))
    }

    /// 409 Conflict on a stale `metadata.resourceVersion` in an update.
    pub fn conflict(resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again"
            ),
        )
        .with_details(json!({"name": name, "kind": resource}))
    }

    /// The 409 Conflict of a write whose body names the uid of an object that is gone (the
    /// storage's uid precondition), as kube-apiserver 1.20 words it.
    pub fn uid_precondition_failed(plural: &str, group: &str, name: &str, uid: &str) -> Self {
        let resource = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {resource} \"{name}\": Precondition failed: \
                 UID in precondition: {uid}, UID in object meta: "
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 422 Invalid: one field's problem, shaped like the apiserver's `field.Error` (the cause
    /// carries `field` and the detail without the field's name; the message joins them).
    pub fn invalid(
        kind: &str,
        name: &str,
        field: &str,
        reason: &str,
        detail: impl Into<String>,
    ) -> Self {
        let detail = detail.into();
        Self::new(422, "Invalid", format!("{kind} \"{name}\" is invalid: {field}: {detail}"))
            .with_details(json!({"name": name, "kind": kind,
                                 "causes": [{"reason": reason, "message": detail, "field": field}]}))
    }

    /// 422 Invalid for a bad combination of list/watch options (`ListOptions.meta.k8s.io`).
    pub fn invalid_list_options(field: &str, message: &str) -> Self {
        Self::new(422, "Invalid", format!("ListOptions.meta.k8s.io \"\" is invalid: {field}: {message}")).with_details(
            json!({"group": "meta.k8s.io", "kind": "ListOptions",
                   "causes": [{"reason": "FieldValueForbidden", "message": message, "field": field}]}),
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 410 for a watch from a resourceVersion older than the retained history (1.18+ watch cache text).
    pub fn watch_too_old(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            "Expired",
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    /// 410 for an exact list at a compacted resourceVersion.
    pub fn list_too_old() -> Self {
        Self::new(
            410,
            "Expired",
            "The resourceVersion for the provided list is too old.",
        )
    }

    /// 410 for a continue token whose snapshot was compacted, carrying a fresh inconsistent token.
    pub fn continue_too_old(fresh_token: String) -> Self {
        let mut e = Self::new(
            410,
            "Expired",
            "The provided continue parameter is too old to display a consistent list result. You can start a new \
             list without the continue parameter, or use the continue token in this response to retrieve the \
             remainder of the results. Continuing with the provided token results in an inconsistent list - objects \
             that were created, modified, or deleted between the time the first chunk was returned and now may show \
             up in the list.",
        );
        e.continue_token = Some(fresh_token);
        e
    }

    /// 504 when a requested resourceVersion is still ahead of the store after the wait.
    pub fn too_large_rv(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1
        }));
        e.retry_after = Some(1);
        e
    }

    /// 500 for a watch-list request on a server without etcd RequestWatchProgress (X2).
    pub fn watch_list_unsupported() -> Self {
        let msg = "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled";
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {msg}"),
        )
        .with_details(json!({"causes": [{"message": msg}]}))
    }

    /// 401 Unauthorized, byte-identical to the apiserver's.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden for `verb` on `resource`.
    pub fn forbidden(
        user: &str,
        verb: &str,
        resource: &str,
        group: &str,
        namespace: Option<&str>,
    ) -> Self {
        let scope = match namespace {
            Some(ns) => format!(" in the namespace \"{ns}\""),
            None => " at the cluster scope".to_string(),
        };
        Self::new(
            403,
            "Forbidden",
            format!(
                "{resource} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\"{scope}"
            ),
        )
        .with_details(json!({"kind": resource}))
    }

    /// Not an answer: the connection is closed instead (the fault
    /// [`reset_next`](crate::faults::Faults::reset_next)). Code 0, which no HTTP status has.
    pub fn connection_reset() -> Self {
        ApiError {
            code: 0,
            reason: "ConnectionReset",
            message: "injected fault: the connection is closed without an answer".into(),
            details: None,
            continue_token: None,
            retry_after: None,
        }
    }

    /// True for [`connection_reset`](Self::connection_reset).
    pub fn is_connection_reset(&self) -> bool {
        self.code == 0
    }

    /// An injected failure (429, 500, 503, ...) with `Retry-After: 1`.
    pub fn injected(code: u16) -> Self {
        let (reason, message) = match code {
            429 => (
                "TooManyRequests",
                "Too many requests, please try again later.",
            ),
            500 => ("InternalError", "Internal error occurred: injected fault"),
            503 => (
                "ServiceUnavailable",
                "The server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "Timeout: request did not complete within the allotted timeout",
            ),
            // As the apiserver answers them: no Retry-After (nothing to wait for).
            401 => return Self::unauthorized(),
            403 => return Self::new(403, "Forbidden", "forbidden: injected fault"),
            _ => ("InternalError", "injected fault"),
        };
        let mut e = Self::new(code, reason, message).with_details(json!({"retryAfterSeconds": 1}));
        e.retry_after = Some(1);
        e
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut meta = serde_json::Map::new();
        if let Some(c) = &self.continue_token {
            meta.insert("continue".into(), Value::String(c.clone()));
        }
        // Field order follows the apiserver's: kind, apiVersion, metadata, status, message, reason, details, code.
        let mut m = serde_json::Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert("metadata".into(), Value::Object(meta));
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), json!(self.message));
        m.insert("reason".into(), json!(self.reason));
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
    }

    /// The `Status` body, compact JSON, in the apiserver's field order.
    pub fn to_body(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(b"{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{");
        if let Some(c) = &self.continue_token {
            out.extend_from_slice(b"\"continue\":");
            out.extend_from_slice(&serde_json::to_vec(c).unwrap_or_default());
        }
        out.extend_from_slice(b"},\"status\":\"Failure\",\"message\":");
        out.extend_from_slice(&serde_json::to_vec(&self.message).unwrap_or_default());
        out.extend_from_slice(b",\"reason\":");
        out.extend_from_slice(&serde_json::to_vec(self.reason).unwrap_or_default());
        if let Some(d) = &self.details {
            out.extend_from_slice(b",\"details\":");
            write_details(&mut out, d);
        }
        out.extend_from_slice(format!(",\"code\":{}}}", self.code).as_bytes());
        out
    }
}

/// `details` in the apiserver's order: name, group, kind, uid, causes, retryAfterSeconds.
fn write_details(out: &mut Vec<u8>, d: &Value) {
    out.push(b'{');
    let mut first = true;
    for key in [
        "name",
        "group",
        "kind",
        "uid",
        "causes",
        "retryAfterSeconds",
    ] {
        if let Some(v) = d.get(key) {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(format!("\"{key}\":").as_bytes());
            out.extend_from_slice(&serde_json::to_vec(v).unwrap_or_default());
        }
    }
    out.push(b'}');
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_match_real_captures() {
        let b = ApiError::not_found("endpoints", "nope").to_body();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"endpoints \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"endpoints"},"code":404}"#
        );
        let b = ApiError::conflict("endpoints", "svc-3").to_body();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on endpoints \"svc-3\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"svc-3","kind":"endpoints"},"code":409}"#
        );
        let b = ApiError::unauthorized().to_body();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        let b = ApiError::list_too_old().to_body();
        assert_eq!(
            String::from_utf8(b).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The resourceVersion for the provided list is too old.","reason":"Expired","code":410}"#
        );
    }
}
