//! RFC 3339 timestamps, the form of Kubernetes' `metav1.Time` (`creationTimestamp`,
//! `deletionTimestamp`, an exec credential's `expirationTimestamp`): the crate's one parser and
//! one formatter.
//!
//! [`parse_rfc3339`] accepts `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` (the `T` may be `t` or a
//! space, `Z` may be `z`), which is what Go's `time.RFC3339` marshalling produces. Leap seconds
//! (`:60`) are clamped to `:59`. Anything else is `None`; a date crate would be a dependency for a
//! few fields. [`format_rfc3339`] writes what the apiserver writes: UTC, whole seconds.
//!
//! ```
//! use informer::model::time::{format_rfc3339, parse_rfc3339};
//! let t = parse_rfc3339("2024-02-29T14:34:56+02:00").unwrap();
//! assert_eq!(format_rfc3339(t), "2024-02-29T12:34:56Z");
//! ```

use std::time::{Duration, SystemTime};

/// The instant `text` names, or `None` if it is not an RFC 3339 timestamp (or is before 1970).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use informer::model::time::parse_rfc3339;
/// let t = parse_rfc3339("1970-01-01T00:01:00.5Z").unwrap();
/// assert_eq!(t, SystemTime::UNIX_EPOCH + Duration::from_millis(60_500));
/// assert_eq!(parse_rfc3339("yesterday"), None);
/// ```
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?.min(59));
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || minute > 59 {
        return None;
    }
    let mut i = 19;
    let mut nanos: u32 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        nanos *= 10u32.pow(9u32.saturating_sub(digits as u32));
    }
    let offset_seconds = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return None;
            }
            let s = h * 3600 + m * 60;
            if *sign == b'+' { s } else { -s }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset_seconds;
    let seconds = u64::try_from(seconds).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(seconds, nanos))
}

/// `time` as RFC 3339 in UTC, whole seconds (`2026-11-30T01:02:59Z`), the apiserver's form; an
/// instant before 1970 is written as the epoch.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use informer::model::time::format_rfc3339;
/// let t = SystemTime::UNIX_EPOCH + Duration::from_secs(951_868_800);
/// assert_eq!(format_rfc3339(t), "2000-03-01T00:00:00Z");
/// ```
pub fn format_rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (y, m, d, h, mi, s) = civil(secs);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// The text of `secs` seconds after the epoch (before it, for a negative count) as
/// [`format_rfc3339`] writes it, without an allocation for years 0 to 9999 (20 bytes: a `SmolStr`
/// holds them inline). The protobuf decoder's timestamps.
#[cfg(feature = "protobuf")]
pub(crate) fn rfc3339_of_seconds(secs: i64) -> smol_str::SmolStr {
    let (y, m, d, h, mi, s) = civil(secs);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z").into();
    }
    let mut text = *b"0000-00-00T00:00:00Z";
    let mut put = |at: usize, value: i64, digits: usize| {
        let mut v = value;
        for i in (0..digits).rev() {
            text[at + i] = b'0' + (v % 10) as u8;
            v /= 10;
        }
    };
    put(0, y, 4);
    put(5, m, 2);
    put(8, d, 2);
    put(11, h, 2);
    put(14, mi, 2);
    put(17, s, 2);
    // ASCII digits and separators only.
    smol_str::SmolStr::new(std::str::from_utf8(&text).unwrap_or_default())
}

/// Year, month, day, hour, minute and second of `secs` seconds after the epoch (UTC).
fn civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Option<SystemTime> {
        parse_rfc3339(text)
    }

    fn secs(text: &str) -> Option<u64> {
        parse(text).map(|t| t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs())
    }

    #[cfg(feature = "protobuf")]
    #[test]
    fn seconds_format_as_the_text_formatter_writes_them() {
        for secs in [
            0i64,
            1,
            59,
            86_399,
            951_868_800,
            1_709_210_096,
            4_102_444_799,
            253_402_300_799,
        ] {
            let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64);
            assert_eq!(rfc3339_of_seconds(secs), format_rfc3339(at), "{secs}");
        }
        assert_eq!(rfc3339_of_seconds(-1), "1969-12-31T23:59:59Z");
        assert_eq!(rfc3339_of_seconds(253_402_300_800), "10000-01-01T00:00:00Z");
    }

    #[test]
    fn known_instants() {
        assert_eq!(secs("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(secs("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(secs("2024-02-29T12:34:56Z"), Some(1_709_210_096));
        assert_eq!(secs("2024-02-29T14:34:56+02:00"), Some(1_709_210_096));
        assert_eq!(secs("2024-02-29T12:04:56-00:30"), Some(1_709_210_096));
        assert_eq!(secs("2024-02-29t12:34:56.999999999z"), Some(1_709_210_096));
        let t = parse("2024-02-29T12:34:56.25Z").unwrap();
        assert_eq!(
            t.duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .subsec_millis(),
            250
        );
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+0100",
            "2024-01-01T00:00:00Zjunk",
            "1969-12-31T23:59:59Z",
            "２024-01-01T00:00:00Z",
            "+024-01-01T00:00:00Z",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_what_it_parses() {
        for text in [
            "1970-01-01T00:00:00Z",
            "2000-02-29T23:59:59Z",
            "2024-12-31T00:00:01Z",
        ] {
            assert_eq!(format_rfc3339(parse(text).unwrap()), text);
        }
    }
}
