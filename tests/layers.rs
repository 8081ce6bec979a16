//! The library's modules import only downwards, and no two files of one module import each other in a
//! circle (ARCHITECTURE.md, "Layers").
//!
//! The order is written once, in [`LAYERS`] (lowest first). A module may import any module of a
//! lower layer, and a module of its own layer as long as no circle forms between the two (error and
//! model share the bottom layer; so do fifo and store). The check reads `src/**/*.rs` as text (no
//! compiler involved) and collects every path that starts with `crate::`, `$crate::`, `super::` or
//! `self::`, in `use` items (groups such as `use crate::{a, b::c}` included) and in expressions and
//! types alike. Comments (doc comments and their intra-doc links too) and string literals are not
//! code and are skipped; so is code under `#[cfg(test)]`, which, like a dev-dependency, may use any
//! layer (a unit test of the informer runs the simulator). A path through a re-export (`crate::Client`,
//! or `super::Snapshot` from a file of `discovery`) counts as an import of the module the re-exported
//! item comes from.
//!
//! Between the files of one module (say `discovery/fallback.rs` and `discovery/persist.rs`, or the
//! folder `discovery/cache/` as one of them) the check builds the graph of which file imports
//! which (through `super::file::`, `crate::module::file::` or a name the module's `mod.rs`
//! re-exports from a file) and fails on any circle in it; likewise inside every folder. The
//! `mod.rs` itself is the module's face and is left out of that graph: it declares and re-exports
//! its files, and its files may use what it defines.
//!
//! Modules the order lists but `src/` does not hold (the simulator and the CLI once they live in
//! crates of their own) are simply absent; a module `src/` holds that the order does not list is a
//! failure, so a new module gets its place in the order.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;

/// The layer order, lowest first: a module may import modules of lower layers, and of its own layer
/// without a circle. `blocking`, `key_hash`, `keyed_queue`, `private_file`, `rng` and `thread_pool`
/// are crate-private helpers that import nothing of the crate but each other.
const LAYERS: &[&[&str]] = &[
    &[
        "error",
        "model",
        "metrics",
        "blocking",
        "key_hash",
        "keyed_queue",
        "private_file",
        "rng",
        "thread_pool",
    ],
    &["frame"],
    // `internals` declares frame and watch (their public path, for benches and fuzz targets) and
    // imports nothing.
    &["watch", "internals"],
    &["config"],
    &["client"],
    &["fifo", "store"],
    &["reflector"],
    &["informer"],
    &["workqueue", "discovery"],
    &["leaderelection"],
    &["sharding"],
    // On top: the simulator and the command-line tool, while they still live in src/.
    &["sim", "cli"],
];

/// Modules of `src/` on their way to crates of their own (the simulator, the CLI): the layer order
/// applies to them, the check between their files does not here; once they are crates, the test
/// [`the_other_crates_of_the_workspace_import_without_cycles`] checks their files.
const LEAVING_SRC: &[&str] = &["sim", "cli"];

#[test]
fn imports_point_down_the_layer_order_and_sibling_files_import_without_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = BTreeMap::new();
    read_sources(root, &root.join("src"), &mut files);
    let report = check(&files, "src/", Some(LAYERS));
    assert!(
        report.files >= 20 && report.edges >= 40,
        "the check read too little to mean anything ({} files, {} imports between modules or files): \
         has the layout of src/ changed?",
        report.files,
        report.edges
    );
    assert!(
        report.problems.is_empty(),
        "{} import problem(s) against the layer order in tests/layers.rs:\n{}",
        report.problems.len(),
        report.problems.join("\n")
    );
}

/// The workspace's other crates (any directory beside `src/` with a `Cargo.toml` and a `src/`, such as
/// the simulator's and kwatch's) have no layer order, but no circle either: neither between their
/// modules nor between the files of one module.
#[test]
fn the_other_crates_of_the_workspace_import_without_cycles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    let mut problems = Vec::new();
    for dir in dirs {
        if !dir.join("Cargo.toml").is_file() || !dir.join("src").is_dir() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files = BTreeMap::new();
        read_sources(root, &dir.join("src"), &mut files);
        problems.extend(check(&files, &format!("{name}/src/"), None).problems);
    }
    assert!(
        problems.is_empty(),
        "{} import problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Every `.rs` file under `dir`, keyed by its path relative to the crate root with `/` separators.
fn read_sources(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            read_sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap();
            let rel = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>();
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(rel.join("/"), text);
        }
    }
}

/// What [`check`] found.
struct Report {
    files: usize,
    /// Imports that cross a module or file boundary (the ones the rules are about).
    edges: usize,
    problems: Vec<String>,
}

/// One file of the library, as a module path: `src/discovery/fallback.rs` is
/// `["discovery", "fallback"]`, `src/fifo/mod.rs` is `["fifo"]`, `src/lib.rs` is `[]`.
struct Source<'a> {
    rel: &'a str,
    module: Vec<String>,
    tokens: Vec<Tok>,
}

/// A path the file uses, made absolute (crate-relative segments), with where it was written.
struct Use {
    line: usize,
    written: String,
    absolute: Vec<String>,
}

/// Where an import edge was seen first, for the failure message.
#[derive(Clone)]
struct Seen {
    rel: String,
    line: usize,
    written: String,
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: `{}`", self.rel, self.line, self.written)
    }
}

/// Checks `files` (path relative to the workspace root -> text) of the crate whose sources are
/// under `src_dir`: against the layer order `order` if given, for circles in any case.
fn check(files: &BTreeMap<String, String>, src_dir: &str, order: Option<&[&[&str]]>) -> Report {
    // The crate root is lib.rs, or main.rs in a crate without a library.
    let has_lib = files.contains_key(&format!("{src_dir}lib.rs"));
    let mut sources = Vec::new();
    for (rel, text) in files {
        let Some(module) = rel
            .strip_prefix(src_dir)
            .and_then(|r| module_path(r, has_lib))
        else {
            continue;
        };
        sources.push(Source {
            rel,
            module,
            tokens: tokenize(text),
        });
    }
    let layer_of: HashMap<&str, usize> = order
        .unwrap_or_default()
        .iter()
        .enumerate()
        .flat_map(|(i, layer)| layer.iter().map(move |m| (*m, i)))
        .collect();
    // Top-level modules, and the files of each module directory.
    let modules: BTreeSet<String> = sources
        .iter()
        .filter_map(|s| s.module.first().cloned())
        .collect();
    // The child modules of every module that has some (`[]` is the crate root).
    let mut children: HashMap<Vec<String>, BTreeSet<String>> = HashMap::new();
    for s in &sources {
        for k in 0..s.module.len() {
            children
                .entry(s.module[..k].to_vec())
                .or_default()
                .insert(s.module[k].clone());
        }
    }
    // Names a module's root file re-exports from its children: at the crate root
    // (`pub use client::Client`) and in a `mod.rs` (`pub use snapshot::Snapshot`).
    let mut reexports: HashMap<Vec<String>, HashMap<String, String>> = HashMap::new();
    for s in &sources {
        if let Some(kids) = children.get(&s.module) {
            reexports.insert(s.module.clone(), reexported_names(s, kids));
        }
    }

    let mut problems = Vec::new();
    for m in &modules {
        if order.is_some() && !layer_of.contains_key(m.as_str()) {
            problems.push(format!(
                "src/ has a module `{m}` that the layer order (LAYERS in tests/layers.rs) does not list"
            ));
        }
    }
    let mut module_edges: BTreeMap<(String, String), Seen> = BTreeMap::new();
    let mut file_edges: BTreeMap<String, BTreeMap<(String, String), Seen>> = BTreeMap::new();
    for s in &sources {
        if s.module.is_empty() {
            continue; // lib.rs: declares modules and re-exports; it is above every layer.
        }
        let from = &s.module[0];
        for u in uses(s) {
            let seen = Seen {
                rel: s.rel.to_string(),
                line: u.line,
                written: u.written.clone(),
            };
            let Some(first) = u.absolute.first() else {
                problems.push(format!("{seen}: a path to the crate root itself"));
                continue;
            };
            let target = if modules.contains(first) {
                first.clone()
            } else if let Some(m) = reexports.get(&Vec::new()).and_then(|r| r.get(first)) {
                m.clone()
            } else if order.is_none() {
                continue; // an item of the crate root; only the library's root must not have any
            } else {
                problems.push(format!(
                    "{seen}: `{first}` is neither a module of src/ nor a name lib.rs re-exports from one"
                ));
                continue;
            };
            if &target != from {
                module_edges.entry((from.clone(), target)).or_insert(seen);
                continue;
            }
            // Within one module: where the two paths part, the file (or folder) of the importing
            // file and the one the path reaches are siblings, children of one module.
            if order.is_some() && LEAVING_SRC.contains(&from.as_str()) {
                continue;
            }
            let (m, t) = (&s.module, &u.absolute);
            let k = m.iter().zip(t).take_while(|(a, b)| a == b).count();
            if k == m.len() || k == t.len() {
                continue; // into the file itself or its own children, or a module above it
            }
            let parent = &m[..k];
            let to = if children.get(parent).is_some_and(|c| c.contains(&t[k])) {
                t[k].clone()
            } else if let Some(child) = reexports.get(parent).and_then(|r| r.get(&t[k])) {
                child.clone()
            } else {
                continue; // an item of the parent's own file: the parent is the face of its files
            };
            if to != m[k] {
                file_edges
                    .entry(parent.join("::"))
                    .or_default()
                    .entry((m[k].clone(), to))
                    .or_insert(seen);
            }
        }
    }

    for ((from, to), seen) in &module_edges {
        let (Some(&lf), Some(&lt)) = (layer_of.get(from.as_str()), layer_of.get(to.as_str()))
        else {
            continue; // reported above
        };
        if lt > lf {
            problems.push(format!(
                "{seen}: `{from}` (layer {lf}) imports `{to}` (layer {lt}), which is above it; \
                 move what it needs down to the layer that owns it"
            ));
        }
    }
    let same_layer: BTreeMap<(String, String), Seen> = module_edges
        .iter()
        .filter(|((f, t), _)| {
            order.is_none() || layer_of.get(f.as_str()) == layer_of.get(t.as_str())
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for cycle in cycles(&same_layer) {
        problems.push(format!("modules import each other in a circle:\n{cycle}"));
    }
    for (module, edges) in &file_edges {
        for cycle in cycles(edges) {
            problems.push(format!(
                "files of `{module}` import each other in a circle:\n{cycle}"
            ));
        }
    }
    let edges = module_edges.len() + file_edges.values().map(BTreeMap::len).sum::<usize>();
    Report {
        files: sources.len(),
        edges,
        problems,
    }
}

/// `a/b.rs` -> `["a", "b"]`, `a/mod.rs` -> `["a"]`, `lib.rs` -> `[]` (paths under `src/`); `None`
/// for the files of binaries (`main.rs` beside a `lib.rs`, `bin/`).
fn module_path(rel: &str, has_lib: bool) -> Option<Vec<String>> {
    let rest = rel.strip_suffix(".rs")?;
    if rest == "lib" || (rest == "main" && !has_lib) {
        return Some(Vec::new());
    }
    if rest == "main" || rest.starts_with("bin/") {
        return None;
    }
    let mut parts: Vec<String> = rest.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// One circle per strongly connected component of more than one node, each edge with where it was
/// seen.
fn cycles(edges: &BTreeMap<(String, String), Seen>) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (f, t) in edges.keys() {
        next.entry(f).or_default().push(t);
        next.entry(t).or_default();
    }
    let reaches = |from: &str, to: &str| -> Option<Vec<String>> {
        // Breadth-first, so the circle reported is a shortest one.
        let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from]);
        while let Some(n) = queue.pop_front() {
            for &m in &next[n] {
                if m == to {
                    let mut path = vec![to.to_string(), n.to_string()];
                    let mut at = n;
                    while at != from {
                        at = parent[at];
                        path.push(at.to_string());
                    }
                    path.reverse();
                    return Some(path);
                }
                if m != from && !parent.contains_key(m) {
                    parent.insert(m, n);
                    queue.push_back(m);
                }
            }
        }
        None
    };
    let mut reported: BTreeSet<BTreeSet<String>> = BTreeSet::new();
    let mut out = Vec::new();
    for &start in next.keys() {
        let Some(path) = reaches(start, start) else {
            continue;
        };
        let members: BTreeSet<String> = path.iter().cloned().collect();
        if !reported.insert(members) {
            continue;
        }
        let mut text = String::new();
        for pair in path.windows(2) {
            let seen = &edges[&(pair[0].clone(), pair[1].clone())];
            let _ = writeln!(text, "    {} -> {}: {seen}", pair[0], pair[1]);
        }
        out.push(text.trim_end().to_string());
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Reading Rust text: just enough of a lexer and of `use`-tree and path syntax.

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Ident(String),
    /// `::`
    PathSep,
    Punct(char),
}

#[derive(Debug, Clone)]
struct Tok {
    kind: Kind,
    line: usize,
}

impl Tok {
    fn ident(&self) -> Option<&str> {
        match &self.kind {
            Kind::Ident(s) => Some(s),
            _ => None,
        }
    }
    fn is(&self, c: char) -> bool {
        self.kind == Kind::Punct(c)
    }
}

/// Identifiers, `::` and single punctuation characters, with their lines; comments, string, char
/// and number literals dropped.
fn tokenize(text: &str) -> Vec<Tok> {
    let b: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let count_lines =
        |from: usize, to: usize, b: &[char]| b[from..to].iter().filter(|&&c| c == '\n').count();
    while i < b.len() {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && b.get(i + 1) == Some(&'*') {
            // Block comments nest.
            let (start, mut depth) = (i, 0);
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            line += count_lines(start, i, &b);
        } else if c == '"' || ((c == 'b' || c == 'c') && b.get(i + 1) == Some(&'"')) {
            let start = i;
            i += if c == '"' { 1 } else { 2 };
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            line += count_lines(start, i.min(b.len()), &b);
        } else if (c == 'r' || ((c == 'b' || c == 'c') && b.get(i + 1) == Some(&'r'))) && {
            let j = if c == 'r' { i + 1 } else { i + 2 };
            let mut k = j;
            while b.get(k) == Some(&'#') {
                k += 1;
            }
            b.get(k) == Some(&'"')
        } {
            // Raw string: r"..", r#".."#, br"..".
            let start = i;
            i += if c == 'r' { 1 } else { 2 };
            let mut hashes = 0;
            while b[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            loop {
                if i >= b.len() {
                    break;
                }
                if b[i] == '"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            line += count_lines(start, i.min(b.len()), &b);
        } else if c == '\'' || (c == 'b' && b.get(i + 1) == Some(&'\'')) {
            // A char literal ('x', '\n', b'{') or a lifetime ('a, which has no closing quote).
            let q = if c == '\'' { i } else { i + 1 };
            if b.get(q + 1) == Some(&'\\') {
                i = q + 3; // past the backslash and the escaped character
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(q + 2) == Some(&'\'') {
                i = q + 3;
            } else {
                i = q + 1; // lifetime: its name follows as an identifier
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            let word: String = b[start..i].iter().collect();
            if !c.is_ascii_digit() {
                out.push(Tok {
                    kind: Kind::Ident(word),
                    line,
                });
            }
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push(Tok {
                kind: Kind::PathSep,
                line,
            });
            i += 2;
        } else {
            out.push(Tok {
                kind: Kind::Punct(c),
                line,
            });
            i += 1;
        }
    }
    out
}

/// A leaf of a use tree or a path: its segments as written, its alias, the line of its last segment.
struct Leaf {
    segments: Vec<String>,
    alias: Option<String>,
    line: usize,
}

/// Parses a path or use tree starting at `toks[i]` (an identifier or `{`), below `prefix`. Returns
/// its leaves and the index after it. Generic arguments (`::<T>`, `<T>`) end a path.
fn parse_tree(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Leaf>) -> usize {
    let mut segments = prefix.to_vec();
    let mut line = toks.get(i).map_or(0, |t| t.line);
    while let Some(t) = toks.get(i) {
        if let Some(word) = t.ident() {
            if word == "self"
                && !segments.is_empty()
                && segments.len() == prefix.len()
                && !prefix.is_empty()
            {
                // `{self, ..}` names the prefix itself
            } else {
                segments.push(word.to_string());
            }
            line = t.line;
            i += 1;
            if toks.get(i).is_some_and(|t| t.kind == Kind::PathSep) {
                i += 1;
                continue;
            }
            let mut alias = None;
            if toks.get(i).and_then(Tok::ident) == Some("as") {
                alias = toks.get(i + 1).and_then(Tok::ident).map(str::to_string);
                i += 2;
            }
            out.push(Leaf {
                segments,
                alias,
                line,
            });
            return i;
        } else if t.is('{') {
            i += 1;
            loop {
                match toks.get(i) {
                    None => return i,
                    Some(t) if t.is('}') => return i + 1,
                    Some(t) if t.is(',') => i += 1,
                    Some(_) => {
                        let before = i;
                        i = parse_tree(toks, i, &segments, out);
                        if i == before {
                            i += 1; // not a tree: skip the token
                        }
                    }
                }
            }
        } else if t.is('*') {
            out.push(Leaf {
                segments,
                alias: None,
                line: t.line,
            });
            return i + 1;
        } else {
            // `::<`, or anything else: the path ends here.
            if segments.len() > prefix.len() {
                out.push(Leaf {
                    segments,
                    alias: None,
                    line,
                });
            }
            return i;
        }
    }
    if segments.len() > prefix.len() {
        out.push(Leaf {
            segments,
            alias: None,
            line,
        });
    }
    i
}

/// Makes `segments` (starting with `crate`, `$crate`, `super` or `self`) absolute, from inside
/// module `current`.
fn absolute(current: &[String], segments: &[String]) -> Option<Vec<String>> {
    let mut at: Vec<String>;
    let mut rest = segments;
    match segments.first().map(String::as_str) {
        Some("crate") => {
            at = Vec::new();
            rest = &segments[1..];
        }
        Some("self") => {
            at = current.to_vec();
            rest = &segments[1..];
        }
        Some("super") => at = current.to_vec(),
        _ => return None,
    }
    while rest.first().is_some_and(|s| s == "super") {
        at.pop()?;
        rest = &rest[1..];
    }
    at.extend(rest.iter().cloned());
    Some(at)
}

/// Walks a file's tokens, calling `visit(inline module stack, token index)` for every token outside
/// `#[cfg(test)]` items; inline `mod name { .. }` blocks push their name on the stack.
fn walk(toks: &[Tok], mut visit: impl FnMut(&[String], usize) -> usize) {
    let mut stack: Vec<(String, usize)> = Vec::new(); // (name, depth inside its braces)
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        if is_cfg_test(toks, i) {
            i = skip_item(toks, i);
            continue;
        }
        let t = &toks[i];
        if t.ident() == Some("mod")
            && toks.get(i + 1).and_then(Tok::ident).is_some()
            && toks.get(i + 2).is_some_and(|t| t.is('{'))
        {
            depth += 1;
            stack.push((toks[i + 1].ident().unwrap().to_string(), depth));
            i += 3;
            continue;
        }
        if t.is('{') {
            depth += 1;
        } else if t.is('}') {
            if stack.last().is_some_and(|(_, d)| *d == depth) {
                stack.pop();
            }
            depth = depth.saturating_sub(1);
        }
        let names: Vec<String> = stack.iter().map(|(n, _)| n.clone()).collect();
        let next = visit(&names, i);
        // A visitor that consumed a path returns past it; brace tokens inside a `use` group are
        // balanced, so depth stays right.
        i = next.max(i + 1);
    }
}

/// `#[cfg(test)]`, or `#[cfg(all(.., test, ..))]`, at `toks[i]`: code only tests compile.
fn is_cfg_test(toks: &[Tok], i: usize) -> bool {
    let at = |k: usize| toks.get(i + k);
    if !(at(0).is_some_and(|t| t.is('#'))
        && at(1).is_some_and(|t| t.is('['))
        && at(2).and_then(Tok::ident) == Some("cfg")
        && at(3).is_some_and(|t| t.is('(')))
    {
        return false;
    }
    if at(4).and_then(Tok::ident) == Some("test") && at(5).is_some_and(|t| t.is(')')) {
        return true;
    }
    if at(4).and_then(Tok::ident) != Some("all") || !at(5).is_some_and(|t| t.is('(')) {
        return false;
    }
    // An argument `test` of the `all(..)`, at its top level.
    let mut depth = 1;
    let mut k = 6;
    while let Some(t) = at(k) {
        if t.is('(') {
            depth += 1;
        } else if t.is(')') {
            depth -= 1;
            if depth == 0 {
                return false;
            }
        } else if depth == 1 && t.ident() == Some("test") {
            return true;
        }
        k += 1;
    }
    false
}

/// The index after the item an attribute at `toks[i]` applies to (further attributes included).
fn skip_item(toks: &[Tok], mut i: usize) -> usize {
    // Attributes: `#` `[` .. `]`.
    while toks.get(i).is_some_and(|t| t.is('#')) && toks.get(i + 1).is_some_and(|t| t.is('[')) {
        let mut d = 0;
        i += 1;
        while let Some(t) = toks.get(i) {
            if t.is('[') {
                d += 1;
            } else if t.is(']') {
                d -= 1;
                if d == 0 {
                    i += 1;
                    break;
                }
            }
            i += 1;
        }
    }
    let is_use = toks[i..]
        .iter()
        .take(6)
        .take_while(|t| !t.is('{') && !t.is(';'))
        .any(|t| t.ident() == Some("use"));
    let mut d = 0;
    while let Some(t) = toks.get(i) {
        i += 1;
        if t.is('{') {
            d += 1;
        } else if t.is('}') {
            d -= 1;
            if d == 0 && !is_use {
                return i;
            }
        } else if t.is(';') && d == 0 {
            return i;
        }
    }
    i
}

/// Every path the file uses that starts at `crate`, `$crate`, `super` or `self` (outside
/// `#[cfg(test)]`), made absolute.
fn uses(s: &Source) -> Vec<Use> {
    let toks = &s.tokens;
    let mut out = Vec::new();
    walk(toks, |stack, i| {
        let t = &toks[i];
        let Some(word) = t.ident() else { return i + 1 };
        if !matches!(word, "crate" | "super" | "self") {
            return i + 1;
        }
        if !toks.get(i + 1).is_some_and(|t| t.kind == Kind::PathSep) {
            return i + 1; // `pub(crate)`, `&self`, `Self`
        }
        if i > 0 && toks[i - 1].kind == Kind::PathSep {
            return i + 1; // inside a path already read
        }
        let mut leaves = Vec::new();
        let end = parse_tree(toks, i, &[], &mut leaves);
        let mut current = s.module.clone();
        current.extend(stack.iter().cloned());
        for leaf in leaves {
            let Some(abs) = absolute(&current, &leaf.segments) else {
                continue;
            };
            let dollar = i > 0 && toks[i - 1].is('$');
            let written = format!(
                "{}{}",
                if dollar { "$" } else { "" },
                leaf.segments.join("::")
            );
            out.push(Use {
                line: leaf.line,
                written,
                absolute: abs,
            });
        }
        end
    });
    out
}

/// Names a module's root file (`lib.rs` or a `mod.rs`) brings in from its child modules with `use`
/// (re-exports): name (or alias) -> child.
fn reexported_names(s: &Source, kids: &BTreeSet<String>) -> HashMap<String, String> {
    let toks = &s.tokens;
    let mut out = HashMap::new();
    walk(toks, |stack, i| {
        if !stack.is_empty() || toks[i].ident() != Some("use") {
            return i + 1;
        }
        let mut leaves = Vec::new();
        let end = parse_tree(toks, i + 1, &[], &mut leaves);
        for leaf in leaves {
            let segs = &leaf.segments;
            let path: Vec<String> = match segs.first().map(String::as_str) {
                Some("crate" | "super" | "self") => match absolute(&s.module, segs) {
                    Some(abs) if abs.starts_with(&s.module) => abs[s.module.len()..].to_vec(),
                    _ => continue,
                },
                _ => segs.clone(),
            };
            if path.len() >= 2 && kids.contains(&path[0]) {
                let name = leaf
                    .alias
                    .clone()
                    .unwrap_or_else(|| path.last().unwrap().clone());
                out.insert(name, path[0].clone());
            }
        }
        end
    });
    out
}

// ---------------------------------------------------------------------------------------------
// The checker checked: each rule fails where it should, with the file, line and import.

fn crate_of(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut all: BTreeMap<String, String> = files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    all.entry("src/lib.rs".into())
        .or_insert_with(|| "pub mod watch;\n".into());
    all
}

fn problems(files: &[(&str, &str)]) -> Vec<String> {
    check(&crate_of(files), "src/", Some(LAYERS)).problems
}

#[test]
fn an_import_up_fails_with_its_file_line_and_path() {
    let p = problems(&[
        ("src/lib.rs", "pub mod client;\npub mod watch;\n"),
        ("src/client/mod.rs", "use crate::watch::WatchStream;\n"),
        (
            "src/watch.rs",
            "//! Docs.\n\npub struct WatchStream<B = crate::client::Body>(B);\n",
        ),
    ]);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with(
            "src/watch.rs:3: `crate::client::Body`: `watch` (layer 2) imports `client` (layer 4)"
        ),
        "{}",
        p[0]
    );
}

#[test]
fn use_groups_super_and_reexports_count_as_imports() {
    let p = problems(&[
        (
            "src/lib.rs",
            "pub mod config;\npub mod fifo;\npub mod store;\npub mod reflector;\npub use reflector::Opts;\n",
        ),
        ("src/config/mod.rs", "mod a;\n"),
        (
            "src/config/a.rs",
            "use crate::{error::Error,\n    reflector::Transform};\n",
        ),
        ("src/fifo/mod.rs", "fn f() -> super::Opts { todo!() }\n"),
        ("src/store/mod.rs", "fn g() { $crate::reflector::x(); }\n"),
        ("src/reflector.rs", "pub struct Opts;\n"),
        ("src/error.rs", ""),
    ]);
    let text = p.join("\n");
    assert!(
        text.contains("src/config/a.rs:2: `crate::reflector::Transform`"),
        "{text}"
    );
    assert!(text.contains("src/fifo/mod.rs:1: `super::Opts`"), "{text}");
    assert!(
        text.contains("src/store/mod.rs:1: `$crate::reflector::x`"),
        "{text}"
    );
    assert_eq!(p.len(), 3, "{text}");
}

#[test]
fn comments_strings_and_test_code_are_not_imports() {
    let p = problems(&[
        (
            "src/lib.rs",
            "pub mod watch;\npub mod sim;\npub mod client;\n",
        ),
        (
            "src/watch.rs",
            "/// See [`Client`](crate::client::Client).\n\
             // crate::client::x\n\
             /* crate::client::y /* nested */ crate::sim::z */\n\
             const S: &str = \"crate::client::Body\";\n\
             const R: &str = r#\"crate::sim::S\"#;\n\
             fn f<'a>(c: char) -> bool { c == '{' || c == '\\'' }\n\
             #[cfg(test)]\n\
             mod tests { use crate::sim::Simulator; fn t() { crate::client::Client::new(); } }\n\
             #[cfg(test)]\n\
             use crate::sim::Other;\n\
             #[cfg(test)]\n\
             #[allow(dead_code)]\n\
             fn helper() { crate::sim::x(); }\n",
        ),
        ("src/sim/mod.rs", "use crate::watch::WatchEvent;\n"),
        ("src/client/mod.rs", ""),
    ]);
    assert!(p.is_empty(), "{p:#?}");
}

#[test]
fn super_inside_an_inline_module_is_relative_to_it() {
    // In `store`'s inline `mod inner`, `super::` is `store`, not the crate root.
    let p = problems(&[
        ("src/lib.rs", "pub mod store;\npub mod informer;\n"),
        (
            "src/store/mod.rs",
            "mod inner { use super::Store; }\npub struct Store;\n",
        ),
        (
            "src/informer/mod.rs",
            "mod a { mod b { use super::super::super::store::Store; } }\n",
        ),
    ]);
    assert!(p.is_empty(), "{p:#?}");
}

#[test]
fn a_cycle_between_sibling_files_fails_with_each_edge() {
    let p = problems(&[
        ("src/lib.rs", "pub mod discovery;\n"),
        (
            "src/discovery/mod.rs",
            "mod cache;\nmod fallback;\nmod persist;\npub use persist::Saved;\n",
        ),
        ("src/discovery/cache.rs", "use super::fallback::Fetches;\n"),
        (
            "src/discovery/fallback.rs",
            "use crate::discovery::Saved;\n",
        ),
        (
            "src/discovery/persist.rs",
            "pub struct Saved;\nfn f(c: &super::cache::Cache) {}\n",
        ),
    ]);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with("files of `discovery` import each other in a circle"),
        "{}",
        p[0]
    );
    for edge in [
        "cache -> fallback: src/discovery/cache.rs:1: `super::fallback::Fetches`",
        "fallback -> persist: src/discovery/fallback.rs:1: `crate::discovery::Saved`",
        "persist -> cache: src/discovery/persist.rs:2: `super::cache::Cache`",
    ] {
        assert!(p[0].contains(edge), "{edge} missing from\n{}", p[0]);
    }
}

#[test]
fn a_cycle_through_a_folder_of_files_fails_and_children_of_a_mod_rs_may_use_it() {
    let p = problems(&[
        ("src/lib.rs", "pub mod discovery;\n"),
        (
            "src/discovery/mod.rs",
            "mod cache;\nmod informers;\npub struct Options;\n",
        ),
        (
            "src/discovery/cache/mod.rs",
            "mod recompute;\npub struct Cache;\nuse super::Options;\n",
        ),
        (
            "src/discovery/cache/recompute.rs",
            "use super::Cache;\nuse crate::discovery::informers::Watch;\n",
        ),
        (
            "src/discovery/informers.rs",
            "pub struct Watch;\nfn f(_: &super::cache::Cache) {}\n",
        ),
    ]);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with("files of `discovery` import each other in a circle"),
        "{}",
        p[0]
    );
    assert!(p[0].contains("cache -> informers: src/discovery/cache/recompute.rs:2: `crate::discovery::informers::Watch`"), "{}", p[0]);
    assert!(
        p[0].contains("informers -> cache: src/discovery/informers.rs:2: `super::cache::Cache`"),
        "{}",
        p[0]
    );
}

#[test]
fn peers_of_one_layer_may_not_import_each_other_both_ways() {
    let one_way = problems(&[
        ("src/lib.rs", "pub mod fifo;\npub mod store;\n"),
        ("src/fifo/mod.rs", ""),
        ("src/store/mod.rs", "use crate::fifo::Delta;\n"),
    ]);
    assert!(one_way.is_empty(), "{one_way:#?}");
    let both = problems(&[
        ("src/lib.rs", "pub mod fifo;\npub mod store;\n"),
        ("src/fifo/mod.rs", "mod pending;\n"),
        ("src/fifo/pending.rs", "use crate::store::KeyHasher;\n"),
        ("src/store/mod.rs", "use crate::fifo::Delta;\n"),
    ]);
    assert_eq!(both.len(), 1, "{both:#?}");
    assert!(
        both[0].contains("fifo -> store: src/fifo/pending.rs:1: `crate::store::KeyHasher`"),
        "{}",
        both[0]
    );
    assert!(
        both[0].contains("store -> fifo: src/store/mod.rs:1: `crate::fifo::Delta`"),
        "{}",
        both[0]
    );
}

#[test]
fn a_module_missing_from_the_order_fails_and_an_absent_one_does_not() {
    // No `sim` or `cli` here: absent modules are fine.
    let p = problems(&[("src/lib.rs", "pub mod gadget;\n"), ("src/gadget.rs", "")]);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(p[0].contains("module `gadget`"), "{}", p[0]);
}

#[test]
fn an_unknown_name_at_the_crate_root_fails() {
    let p = problems(&[
        ("src/lib.rs", "pub mod watch;\n"),
        ("src/watch.rs", "fn f() { crate::mystery(); }\n"),
    ]);
    assert_eq!(p.len(), 1, "{p:#?}");
    assert!(
        p[0].starts_with("src/watch.rs:1: `crate::mystery`"),
        "{}",
        p[0]
    );
}

/// Every path of this repository that the docs cite exists (item 9 of #45: docs had cited
/// `tests/sim/`, `src/watch.rs` and others long gone). Read: the README, ARCHITECTURE.md, the
/// READMEs of `benches/compare` and `fuzz`, and `docs/` except the specifications copied from
/// elsewhere (which cite other projects' files) and the history (which cites what was). A path
/// is a word starting with one of the repository's top folders; paths with wildcards or braces,
/// generated folders (a fuzz corpus, `target/`) and lines that say the path is in another
/// repository are left out.
#[test]
fn every_path_the_docs_cite_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut docs = vec![
        "README.md".to_string(),
        "ARCHITECTURE.md".into(),
        "benches/compare/README.md".into(),
        "fuzz/README.md".into(),
    ];
    let copied = [
        "client-go.md",
        "kube-rs.md",
        "discovery.md",
        "informer-design.md",
        "history.md",
    ];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if name.ends_with(".md") && !copied.contains(&name.as_str()) {
            docs.push(format!("docs/{name}"));
        }
    }
    let tops = [
        "src/",
        "tests/",
        "sim/",
        "kwatch/",
        "examples/",
        "benches/",
        "docs/",
        "fuzz/",
        "fixtures/",
    ];
    let generated = ["fuzz/corpus", "fuzz/artifacts", "fuzz/seeds", "target/"];
    let mut missing = Vec::new();
    let mut cited = 0;
    for doc in &docs {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains(" repository") && line.contains("kube-rs") {
                continue; // "`benches/memory.rs` in the kube-rs repository"
            }
            let words = line.split(|c: char| {
                !(c.is_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '{' | '}' | '*'))
            });
            for word in words {
                let word = word.trim_end_matches(['.', ',']);
                let starts = |w: &str| tops.iter().any(|t| w.starts_with(t));
                // `../x` links from inside docs/ and benches/compare/ are relative to the doc.
                // `../x.md` links from a doc in a folder are relative to the doc (and stay in the
                // repository; the shared kit beside it, `../shared/`, is cited from the root, and
                // `../informer` in a Cargo.toml snippet is a crate's folder, not a file here).
                let dir = Path::new(doc).parent().unwrap_or(Path::new(""));
                let path = if starts(word) {
                    root.join(word)
                } else if word.starts_with("../")
                    && !word.contains("shared/")
                    && word
                        .rsplit('/')
                        .next()
                        .is_some_and(|file| file.contains('.'))
                    && dir != Path::new("")
                {
                    root.join(dir).join(word)
                } else {
                    continue;
                };
                if word.contains(['*', '{', '}']) || generated.iter().any(|g| word.contains(g)) {
                    continue;
                }
                cited += 1;
                if !path.exists() {
                    missing.push(format!("{doc}:{}: {word}", n + 1));
                }
            }
        }
    }
    assert!(cited > 100, "read too few paths ({cited}) to mean anything");
    assert!(
        missing.is_empty(),
        "cited but not there:\n{}",
        missing.join("\n")
    );
}
