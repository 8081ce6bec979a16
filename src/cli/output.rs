//! Writing results: aligned tables, JSON lines, and kubectl-style ages.
//!
//! [`Out`] buffers stdout; callers flush after each batch so a reader of a pipe sees whole lines as
//! soon as they are complete, without a system call per line under load.

use std::io::{BufWriter, Stdout, Write};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::{CliError, CliResult};

/// Buffered standard output.
pub struct Out {
    w: BufWriter<Stdout>,
}

fn write_failed(e: std::io::Error) -> CliError {
    CliError::Runtime(format!("writing to stdout: {e}"))
}

impl Out {
    pub fn stdout() -> Out {
        Out {
            w: BufWriter::with_capacity(64 * 1024, std::io::stdout()),
        }
    }

    pub fn line(&mut self, s: &str) -> CliResult {
        self.w.write_all(s.as_bytes()).map_err(write_failed)?;
        self.w.write_all(b"\n").map_err(write_failed)
    }

    pub fn json_line(&mut self, v: &impl Serialize) -> CliResult {
        serde_json::to_writer(&mut self.w, v)
            .map_err(|e| CliError::Runtime(format!("writing JSON: {e}")))?;
        self.w.write_all(b"\n").map_err(write_failed)
    }

    pub fn json_pretty(&mut self, v: &impl Serialize) -> CliResult {
        serde_json::to_writer_pretty(&mut self.w, v)
            .map_err(|e| CliError::Runtime(format!("writing JSON: {e}")))?;
        self.w.write_all(b"\n").map_err(write_failed)
    }

    /// A table with columns padded to their widest cell, as kubectl prints them.
    pub fn table(&mut self, headers: &[&str], rows: &[Vec<String>]) -> CliResult {
        for line in table_lines(headers, rows) {
            self.line(&line)?;
        }
        Ok(())
    }

    pub fn flush(&mut self) -> CliResult {
        self.w.flush().map_err(write_failed)
    }
}

/// The lines of an aligned table (three spaces between columns, no trailing spaces).
pub fn table_lines(headers: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let render = |cells: Vec<&str>| {
        let mut line = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}   "));
            }
        }
        line.trim_end().to_owned()
    };
    let mut lines = vec![render(headers.to_vec())];
    lines.extend(
        rows.iter()
            .map(|r| render(r.iter().map(String::as_str).collect())),
    );
    lines
}

/// Seconds since the Unix epoch of an RFC 3339 UTC timestamp (`2024-01-02T03:04:05Z`, fractions
/// and offsets accepted).
pub fn parse_timestamp(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        rest = frac.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    let offset = match rest {
        "Z" | "z" | "" => 0,
        _ => {
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (mo + if mo > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec - offset)
}

/// kubectl's short age: `45s`, `12m`, `3h`, `5d`; `<unknown>` without a timestamp.
pub fn age(creation_timestamp: Option<&str>) -> String {
    let Some(created) = creation_timestamp.and_then(parse_timestamp) else {
        return "<unknown>".into();
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    human_age((now - created).max(0) as u64)
}

fn human_age(secs: u64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3600 * 2 => format!("{}m", s / 60),
        s if s < 86_400 * 2 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp("2000-03-01T00:00:00Z"), Some(951_868_800));
        assert_eq!(
            parse_timestamp("2024-01-02T03:04:05.123Z"),
            Some(1_704_164_645)
        );
        assert_eq!(
            parse_timestamp("2024-01-02T04:04:05+01:00"),
            Some(1_704_164_645)
        );
        assert_eq!(parse_timestamp("yesterday"), None);
    }

    #[test]
    fn ages_and_tables() {
        assert_eq!(human_age(5), "5s");
        assert_eq!(human_age(600), "10m");
        assert_eq!(human_age(3 * 86_400), "3d");
        let lines = table_lines(&["NAME", "AGE"], &[vec!["web-1".into(), "5s".into()]]);
        assert_eq!(lines, ["NAME    AGE", "web-1   5s"]);
    }
}
