//! What the apiserver checks on `coordination.k8s.io/v1` Leases beyond the generic object rules,
//! so that an elector tested against the simulator meets the same answers as against a cluster
//! (each checked against kube-apiserver 1.20):
//!
//! * An update (PUT) must carry `metadata.resourceVersion`: the Lease strategy does not allow
//!   unconditional updates, so a PUT without one is `422 Invalid` (`must be specified for an
//!   update`); with a stale one it is the generic `409 Conflict`.
//! * `spec.acquireTime` and `spec.renewTime` are `MicroTime`s: RFC 3339 with exactly six
//!   fractional digits. Anything else does not decode, `400 BadRequest`.
//! * A Lease has no `metadata.generation` (its strategy does not track one).

use serde_json::Value;

use super::errors::ApiError;
use super::resources::ResourceInfo;

/// The Lease's group, as the registry and URLs name it.
pub(crate) const GROUP: &str = "coordination.k8s.io";

/// True for `coordination.k8s.io` Leases.
pub(crate) fn is_lease(info: &ResourceInfo) -> bool {
    info.api.group == GROUP && info.api.plural == "leases"
}

/// The `422` a PUT without `metadata.resourceVersion` gets.
pub(crate) fn resource_version_required(name: &str) -> ApiError {
    ApiError::invalid(
        "leases",
        name,
        "metadata.resourceVersion",
        "FieldValueInvalid",
        "Invalid value: 0x0: must be specified for an update",
    )
    .with_group(GROUP)
}

/// Checks the `MicroTime` fields of a Lease body.
pub(crate) fn validate_times(value: &Value) -> Result<(), ApiError> {
    let Some(spec) = value.get("spec") else {
        return Ok(());
    };
    for (field, go_name) in [("acquireTime", "AcquireTime"), ("renewTime", "RenewTime")] {
        match spec.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) if is_micro_time(text) => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "Lease in version \"v1\" cannot be handled as a Lease: v1.Lease.Spec: \
                     v1.LeaseSpec.{go_name}: unmarshalerDecoder: parsing time {other} as \
                     \"2006-01-02T15:04:05.000000Z07:00\""
                )));
            }
        }
    }
    Ok(())
}

/// `YYYY-MM-DDTHH:MM:SS.ffffff` then `Z` or `±HH:MM`: Go's `RFC3339Micro` layout, which wants
/// exactly six fractional digits.
fn is_micro_time(text: &str) -> bool {
    let b = text.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let head = digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19)
        && at(19, b'.')
        && digits(20..26);
    let zone = &b.get(26..).unwrap_or_default();
    head && (*zone == b"Z"
        || (zone.len() == 6
            && (zone[0] == b'+' || zone[0] == b'-')
            && zone[1..3].iter().all(u8::is_ascii_digit)
            && zone[3] == b':'
            && zone[4..6].iter().all(u8::is_ascii_digit)))
}

#[cfg(test)]
mod tests {
    use super::is_micro_time;

    #[test]
    fn micro_time_wants_six_fractional_digits() {
        assert!(is_micro_time("2026-12-04T21:00:00.123456Z"));
        assert!(is_micro_time("2026-12-04T21:00:00.123456+02:00"));
        assert!(!is_micro_time("2026-12-04T21:00:00Z"));
        assert!(!is_micro_time("2026-12-04T21:00:00.123Z"));
        assert!(!is_micro_time("2026-12-04T21:00:00.1234567Z"));
        assert!(!is_micro_time(""));
    }
}
