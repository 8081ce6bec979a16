//! Writing results: aligned tables, JSON lines, and kubectl-style ages.
//!
//! [`Out`] buffers stdout; callers flush after each batch so a reader of a pipe sees whole lines as
//! soon as they are complete, without a system call per line under load.
//!
//! Text from the server (names, messages, any field) may hold control characters: an escape
//! sequence in an object name would otherwise move the cursor, recolour or retitle the user's
//! terminal, or hide lines. [`Out::line`] and the JSON writers escape them (see
//! [`escape_control`]); only kwatch's own screen drawing uses [`Out::raw_line`].

use std::borrow::Cow;
use std::io::{BufWriter, Stdout, Write};
use std::time::SystemTime;

use informer::model::time::parse_rfc3339;

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

    /// One line of text that may hold server data: control characters are escaped.
    pub fn line(&mut self, s: &str) -> CliResult {
        self.raw_line(&escape_control(s))
    }

    /// One line of kwatch's own text, written as is (the demo's screen drawing sequences).
    pub fn raw_line(&mut self, s: &str) -> CliResult {
        self.w.write_all(s.as_bytes()).map_err(write_failed)?;
        self.w.write_all(b"\n").map_err(write_failed)
    }

    /// One compact JSON value and a newline; DEL and C1 controls are `\u` escapes too.
    pub fn json_line(&mut self, v: &impl Serialize) -> CliResult {
        let mut ser = serde_json::Serializer::with_formatter(&mut self.w, TerminalSafe(None));
        v.serialize(&mut ser)
            .map_err(|e| CliError::Runtime(format!("writing JSON: {e}")))?;
        self.w.write_all(b"\n").map_err(write_failed)
    }

    /// One indented JSON value and a newline; DEL and C1 controls are `\u` escapes too.
    pub fn json_pretty(&mut self, v: &impl Serialize) -> CliResult {
        let pretty = serde_json::ser::PrettyFormatter::new();
        let mut ser =
            serde_json::Serializer::with_formatter(&mut self.w, TerminalSafe(Some(pretty)));
        v.serialize(&mut ser)
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

/// Whether `c` would be acted on by a terminal rather than shown: C0 controls (ESC, BEL, CR,
/// backspace, newline, tab...), DEL, C1 controls (U+0080-U+009F: 8-bit CSI, OSC...), and the
/// bidirectional overrides and isolates that reorder what is displayed.
fn is_terminal_control(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// `s` with every character a terminal would act on written as a visible escape (`\x1b`,
/// `\u{9b}`); `s` itself when it has none (no allocation). Backslashes are left alone: a literal
/// `\x1b` in the text is harmless, and error messages keep their usual look.
///
/// ```text
/// "web-1<ESC>]0;owned<BEL>" -> r"web-1\x1b]0;owned\x07"
/// ```
pub fn escape_control(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_terminal_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if is_terminal_control(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if is_terminal_control(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// serde_json's formatter (compact, or pretty when it holds one) that also writes DEL, C1 controls
/// and bidirectional overrides as `\uXXXX`: serde_json escapes only U+0000-U+001F, which leaves an
/// 8-bit CSI (U+009B) in a string free to reach the terminal. The output is the same JSON value.
struct TerminalSafe(Option<serde_json::ser::PrettyFormatter<'static>>);

macro_rules! delegate {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {$(
        fn $name<W: ?Sized + Write>(&mut self, w: &mut W $(, $arg: $ty)*) -> std::io::Result<()> {
            match &mut self.0 {
                Some(p) => serde_json::ser::Formatter::$name(p, w $(, $arg)*),
                None => serde_json::ser::Formatter::$name(&mut serde_json::ser::CompactFormatter, w $(, $arg)*),
            }
        }
    )*};
}

impl serde_json::ser::Formatter for TerminalSafe {
    delegate! {
        begin_array();
        end_array();
        begin_array_value(first: bool);
        end_array_value();
        begin_object();
        end_object();
        begin_object_key(first: bool);
        end_object_key();
        begin_object_value();
        end_object_value();
    }

    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut rest = fragment;
        while let Some(i) = rest.find(is_terminal_control) {
            w.write_all(&rest.as_bytes()[..i])?;
            let c = rest[i..].chars().next().expect("found at i");
            write!(w, "\\u{:04x}", c as u32)?;
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }

    /// Raw JSON (a [`JsonObject`](informer::JsonObject)'s members, copied as received): valid
    /// JSON holds no raw C0 control inside a string, so any terminal control but whitespace
    /// between tokens is inside a string, where `\u` escapes it the same way.
    fn write_raw_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        // Printable ASCII (the common case, checked a byte at a time) has nothing to escape.
        if fragment.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return w.write_all(fragment.as_bytes());
        }
        let acted_on = |c: char| is_terminal_control(c) && !matches!(c, '\t' | '\n' | '\r');
        let mut rest = fragment;
        while let Some(i) = rest.find(acted_on) {
            w.write_all(&rest.as_bytes()[..i])?;
            let c = rest[i..].chars().next().expect("found at i");
            write!(w, "\\u{:04x}", c as u32)?;
            rest = &rest[i + c.len_utf8()..];
        }
        w.write_all(rest.as_bytes())
    }
}

/// The lines of an aligned table (three spaces between columns, no trailing spaces).
pub fn table_lines(headers: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    // Cells come from the server: escaped here, so callers that assemble a screen from these
    // lines (the demo's live view) may write it raw.
    let escaped: Vec<Vec<Cow<'_, str>>> = rows
        .iter()
        .map(|r| r.iter().map(|c| escape_control(c)).collect())
        .collect();
    let rows = &escaped;
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
            .map(|r| render(r.iter().map(|c| c.as_ref()).collect())),
    );
    lines
}

/// kubectl's short age: `45s`, `12m`, `3h`, `5d`; `<unknown>` without a timestamp.
pub fn age(creation_timestamp: Option<&str>) -> String {
    let Some(created) = creation_timestamp.and_then(parse_rfc3339) else {
        return "<unknown>".into();
    };
    let age = SystemTime::now()
        .duration_since(created)
        .unwrap_or_default();
    human_age(age.as_secs())
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

    /// Seconds since the Unix epoch, as kubectl's age reads them.
    fn parse_timestamp(s: &str) -> Option<i64> {
        let t = parse_rfc3339(s)?;
        Some(t.duration_since(SystemTime::UNIX_EPOCH).ok()?.as_secs() as i64)
    }

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
    fn control_characters_are_escaped() {
        assert!(matches!(escape_control("web-1"), Cow::Borrowed("web-1")));
        assert_eq!(
            escape_control("a\x1b[2Jb\x07\u{9b}31m\u{202e}\\x1b\t\r\n\x7f"),
            "a\\x1b[2Jb\\x07\\u{9b}31m\\u{202e}\\x1b\\x09\\x0d\\x0a\\x7f"
        );
        let value = serde_json::json!({"name": "a\x1b]0;t\x07\u{9b}\u{7f}\u{202e}é", "n": [1]});
        for pretty in [false, true] {
            let mut out = Vec::new();
            let f = TerminalSafe(pretty.then(serde_json::ser::PrettyFormatter::new));
            let mut ser = serde_json::Serializer::with_formatter(&mut out, f);
            value.serialize(&mut ser).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(
                !text
                    .chars()
                    .any(|c| is_terminal_control(c) && c != '\n' && c != ' '),
                "{text:?}"
            );
            assert!(
                text.contains(r"\u001b]0;t\u0007\u009b\u007f\u202eé"),
                "{text}"
            );
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back, value);
        }
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
