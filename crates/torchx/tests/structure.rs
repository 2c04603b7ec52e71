//! The structure check over the workspace's three crates (the library, the CLI, the Python
//! extension): no source file needs itself through a chain of others (a file naming another's
//! items by path: `crate::a::b`, `super::c`, `self::d`), and none is over the size limit. Test
//! code is left out (`tests.rs` files, a file's `#[cfg(test)] mod tests`). The library's
//! top-level modules need one another without a cycle either. The Python package's import
//! graph is checked by `python/tests/test_structure.py`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lines of non-test code a source file may hold.
const MAX_LINES: usize = 700;

fn crates_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Every source file of the three crates (relative to `crates/`) with its non-test text.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(path);
            }
        }
    }
    let root = crates_dir();
    let mut files = Vec::new();
    for krate in ["torchx", "torchx-cli", "torchx-py"] {
        walk(&root.join(krate).join("src"), &mut files);
    }
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let code = match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_string(),
                None => text,
            };
            let rel = path.strip_prefix(&root).unwrap().display().to_string();
            (rel, code)
        })
        .collect()
}

/// A file's crate and module path: `torchx/src/a/b.rs` → (`torchx`, `a::b`); `a/mod.rs` →
/// `a`; `lib.rs`, `main.rs` → the root (``).
fn module_of(rel: &str) -> (String, String) {
    let (krate, path) = rel.split_once("/src/").unwrap();
    let path = path.trim_end_matches(".rs");
    let path = path.strip_suffix("/mod").unwrap_or(path);
    let module = match path {
        "lib" | "main" => String::new(),
        p => p.replace('/', "::"),
    };
    (krate.to_string(), module)
}

fn join(base: &str, rest: &str) -> String {
    match (base.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_string(),
        (_, true) => base.to_string(),
        _ => format!("{base}::{rest}"),
    }
}

fn parent(module: &str) -> String {
    module
        .rsplit_once("::")
        .map_or(String::new(), |(p, _)| p.to_string())
}

/// The paths a line names after `crate::`, `super::`, `self::` or a module brought in by name
/// (`aliases`: `use crate::commands;` then `commands::run::run`), a `{a, b::c}` group as each of
/// its paths, resolved from `module` to absolute module paths (items included).
fn named_paths(line: &str, module: &str, aliases: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in line.match_indices("::") {
        let head_start = line[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(0, |i| i + 1);
        let path_before = &line[head_start..at];
        // Only the first `::` of a path that starts with one of the three keywords.
        let (base, first) = match path_before {
            "crate" => (String::new(), true),
            "self" => (module.to_string(), true),
            _ if path_before.starts_with("super") => {
                let supers = path_before.split("::").filter(|s| *s == "super").count();
                if path_before.split("::").any(|s| s != "super") {
                    continue;
                }
                // In `a/b.rs` and in `a/b/mod.rs` (module a::b) `super` is `a`.
                let mut base = module.to_string();
                for _ in 0..supers {
                    base = parent(&base);
                }
                (base, true)
            }
            head => match aliases.get(head) {
                Some(full) => (full.clone(), true),
                None => (String::new(), false),
            },
        };
        if !first {
            continue;
        }
        let rest = &line[at + 2..];
        let mut paths: Vec<String> = Vec::new();
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            paths.extend(inner.split(',').map(|p| p.trim().to_string()));
        } else {
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(path);
        }
        for p in paths {
            let p = p.split_whitespace().next().unwrap_or_default();
            let p = p.trim_end_matches("::").to_string();
            if !p.is_empty() && !p.starts_with("super") {
                out.push(join(&base, &p));
            }
        }
    }
    out
}

/// Each file's module (`crate:path`) with the modules of the other files its code names,
/// leaving out the file's own ancestors (a child uses its parent's items; the parent holds it).
fn file_graph() -> BTreeMap<String, BTreeSet<String>> {
    let files = sources();
    let modules: BTreeSet<(String, String)> = files.iter().map(|(r, _)| module_of(r)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, code) in &files {
        let (krate, module) = module_of(rel);
        let node = format!("{krate}:{module}");
        let needs = graph.entry(node).or_default();
        // Modules this file brings in by their last name (`use crate::a::b;`).
        let mut aliases = BTreeMap::new();
        for line in code.lines().map(str::trim_start) {
            if let Some(used) = line.strip_prefix("use ").and_then(|u| u.strip_suffix(';')) {
                for path in named_paths(used, &module, &BTreeMap::new()) {
                    if modules.contains(&(krate.clone(), path.clone())) {
                        let name = path.rsplit("::").next().unwrap_or_default().to_string();
                        aliases.insert(name, path);
                    }
                }
            }
        }
        for line in code.lines().map(str::trim_start) {
            if line.starts_with("//") {
                continue;
            }
            for path in named_paths(line, &module, &aliases) {
                // The longest prefix of the path that is a file's module.
                let mut target = path.clone();
                while !target.is_empty() && !modules.contains(&(krate.clone(), target.clone())) {
                    target = parent(&target);
                }
                let ancestor = target.is_empty()
                    || module == target
                    || module.starts_with(&format!("{target}::"));
                if !ancestor {
                    needs.insert(format!("{krate}:{target}"));
                }
            }
        }
    }
    graph
}

/// A cycle of `graph` (its nodes in order, the first again at the end), if it has one.
fn a_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|start| visit(start, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_source_file_needs_itself_through_others() {
    let graph = file_graph();
    assert!(graph.len() > 100, "found the files: {}", graph.len());
    // The scanner sees what is there (so the check can fail).
    assert!(graph["torchx-cli:cli"].contains("torchx-cli:commands::run"));
    assert!(graph["torchx:schedulers::kubernetes::render"]
        .contains("torchx:schedulers::kubernetes::pod"));
    assert!(graph["torchx:runner"].contains("torchx:scheduler"));
    assert_eq!(a_cycle(&graph), None, "files that need one another");
}

/// The library's top-level modules (`lib.rs` aside), each with the others its non-test code
/// names as `crate::<module>` outside comments.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, code) in sources() {
        let Some(rel) = rel.strip_prefix("torchx/src/") else {
            continue;
        };
        let module = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if module == "lib" {
            continue;
        }
        let named = graph.entry(module.clone()).or_default();
        for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (_, rest) in line
                .match_indices("crate::")
                .map(|(at, _)| line.split_at(at + 7))
            {
                let other: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !other.is_empty() && other != module {
                    named.insert(other);
                }
            }
        }
    }
    graph
}

#[test]
fn top_level_modules_have_no_cycles() {
    let graph = module_graph();
    assert!(graph.len() > 10, "found the modules: {graph:?}");
    assert!(
        graph["runner"].contains("scheduler"),
        "found their references"
    );
    assert_eq!(a_cycle(&graph), None, "modules that need one another");
}

#[test]
fn no_source_file_is_over_the_size_limit() {
    let mut over = Vec::new();
    for (rel, code) in sources() {
        let lines = code.lines().count();
        if lines > MAX_LINES {
            over.push(format!("{rel}: {lines} lines"));
        }
    }
    assert!(over.is_empty(), "split these files: {over:#?}");
}

/// Significant lines in a run that may stand in two places (a trait method's signature, written
/// again by each implementation, takes up to 7): more is one piece of code to share.
const MAX_REPEATED_LINES: usize = 7;

/// A file's lines that say something, with their numbers: trimmed, neither blank, nor a
/// comment, nor punctuation alone (`}`, `});`), nor an import.
fn significant(code: &str) -> Vec<(usize, &str)> {
    code.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| {
            !l.is_empty()
                && !l.starts_with("//")
                && !l.starts_with("use ")
                && l.chars().any(char::is_alphanumeric)
        })
        .collect()
}

/// Every place where a run of more than [`MAX_REPEATED_LINES`] significant lines stands again,
/// as `a.rs:L ~ b.rs:M`, one per pair of files (the first run found).
fn repeated_runs(files: &[(String, String)]) -> Vec<String> {
    let window = MAX_REPEATED_LINES + 1;
    let mut first: BTreeMap<Vec<&str>, (&str, usize)> = BTreeMap::new();
    let mut pairs: BTreeMap<(&str, &str), String> = BTreeMap::new();
    for (rel, code) in files {
        let lines = significant(code);
        for run in lines.windows(window) {
            let key: Vec<&str> = run.iter().map(|(_, l)| *l).collect();
            let line = run[0].0;
            match first.get(&key) {
                None => {
                    first.insert(key, (rel, line));
                }
                // A run that overlaps itself (a repeated line) is not a second place.
                Some((f, l)) if *f == rel.as_str() && line - l < window => {}
                Some(&(f, l)) => {
                    pairs
                        .entry((f, rel))
                        .or_insert_with(|| format!("{f}:{l} ~ {rel}:{line}"));
                }
            }
        }
    }
    pairs.into_values().collect()
}

#[test]
fn no_code_is_written_twice() {
    let repeated = repeated_runs(&sources());
    assert!(
        repeated.is_empty(),
        "these places repeat more than {MAX_REPEATED_LINES} lines: make them one piece of code \
         {repeated:#?}"
    );
}

#[test]
fn the_repeat_finder_sees_a_copied_run_and_not_a_new_one() {
    let body: String = (0..=MAX_REPEATED_LINES)
        .map(|i| format!("let x{i} = f({i});\n"))
        .collect();
    let files = vec![
        ("a.rs".to_string(), format!("fn a() {{\n{body}}}\n")),
        (
            "b.rs".to_string(),
            format!("fn b() {{\n    // why\n{body}}}\n"),
        ),
        ("c.rs".to_string(), body.replace("f(3)", "g(3)")),
    ];
    assert_eq!(repeated_runs(&files), ["a.rs:2 ~ b.rs:3"]);
    assert!(repeated_runs(&files[2..]).is_empty());
}

/// The library's public modules (each `pub mod` inside a public one) and its root's
/// re-exports, one a line; with the CLI's and the Python extension's public items, which must
/// be their entry points alone.
fn pub_surface(files: &[(String, String)]) -> Vec<String> {
    let code: BTreeMap<&str, &str> = files
        .iter()
        .map(|(r, c)| (r.as_str(), c.as_str()))
        .collect();
    let mut surface = Vec::new();
    let mut open = vec![(String::new(), "torchx/src/lib.rs".to_string())];
    while let Some((module, rel)) = open.pop() {
        let Some(text) = code.get(rel.as_str()) else {
            continue;
        };
        let dir = rel.trim_end_matches("lib.rs").trim_end_matches("mod.rs");
        let dir = dir
            .strip_suffix(".rs")
            .map_or(dir.to_string(), |d| format!("{d}/"));
        for line in text.lines() {
            if let Some(name) = line
                .strip_prefix("pub mod ")
                .and_then(|l| l.strip_suffix(';'))
            {
                let path = join(&module, name);
                surface.push(format!("mod {}", path));
                let file = format!("{dir}{name}.rs");
                let file = if code.contains_key(file.as_str()) {
                    file
                } else {
                    format!("{dir}{name}/mod.rs")
                };
                open.push((path, file));
            } else if module.is_empty() && line.starts_with("pub use ") {
                surface.push(line.trim_end_matches(';').to_string());
            }
        }
    }
    for entry in ["torchx-cli/src/lib.rs", "torchx-py/src/lib.rs"] {
        let text = code.get(entry).copied().unwrap_or_default();
        surface.extend(
            text.lines()
                .filter(|l| l.starts_with("pub "))
                .map(|l| format!("{entry}: {}", l.trim_end_matches(" {"))),
        );
    }
    surface.sort();
    surface
}

/// The public surface is what `tests/pub_surface.txt` says: a module made public, or an entry
/// point added, is a decision seen in review (`TORCHX_BLESS=1` writes the file anew).
#[test]
fn the_public_surface_is_the_reviewed_one() {
    let surface = pub_surface(&sources()).join("\n") + "\n";
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/pub_surface.txt");
    if std::env::var_os("TORCHX_BLESS").is_some() {
        std::fs::write(&path, &surface).unwrap();
    }
    let reviewed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(surface.contains("mod schedulers::slurm\n"), "{surface}");
    assert_eq!(
        surface, reviewed,
        "the public surface changed: review it, then TORCHX_BLESS=1 cargo test --test structure"
    );
}

/// The scanner's resolution of paths and its cycle finder.
#[test]
fn the_scanner_resolves_paths() {
    assert_eq!(
        named_paths("use super::{names, opts::X};", "a::b", &BTreeMap::new()),
        ["a::names", "a::opts::X"]
    );
    assert_eq!(
        named_paths(
            "use crate::schedulers::aws::sdk_err;",
            "x",
            &BTreeMap::new()
        ),
        ["schedulers::aws::sdk_err"]
    );
    assert_eq!(
        named_paths("self::render::f()", "k", &BTreeMap::new()),
        ["k::render::f"]
    );
    assert_eq!(
        named_paths("super::super::z", "a::b::c", &BTreeMap::new()),
        ["a::z"]
    );
    assert!(named_paths("std::fs::read()", "a", &BTreeMap::new()).is_empty());
    let aliases = BTreeMap::from([("commands".to_string(), "commands".to_string())]);
    assert_eq!(
        named_paths(
            "Command::Run(a) => commands::run::run(*a),",
            "cli",
            &aliases
        ),
        ["commands::run::run"]
    );
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in edges {
            g.entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        g
    };
    assert_eq!(
        a_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "b")])),
        Some(vec!["b".to_string(), "c".to_string(), "b".to_string()])
    );
    assert_eq!(a_cycle(&graph(&[("a", "b"), ("a", "c"), ("c", "b")])), None);
}
