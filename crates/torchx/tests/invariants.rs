//! ARCHITECTURE.md's invariants, checked over the library's source (test code left out: a
//! file's `#[cfg(test)]` module and `tests.rs` files), so that they stay true.

use std::path::{Path, PathBuf};

/// Every library source file with its non-test text.
fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                let code = match text.find("#[cfg(test)]\nmod tests") {
                    Some(at) => text[..at].to_string(),
                    None => text,
                };
                out.push((path, code));
            }
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&root, &mut out);
    assert!(out.len() > 50, "found the sources");
    out
}

fn relative(path: &Path) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    path.strip_prefix(&root).unwrap().display().to_string()
}

/// The lines of non-test library code (path:line) that contain any of `needles`, outside
/// `allowed` files, and not in comments.
fn offending(needles: &[&str], allowed: &[&str], under: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, code) in sources() {
        let rel = relative(&path);
        if allowed.contains(&rel.as_str()) {
            continue;
        }
        if !under.is_empty() && !under.iter().any(|u| rel.starts_with(u)) {
            continue;
        }
        for (i, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            if needles.iter().any(|n| line.contains(n)) {
                found.push(format!("{rel}:{}: {line}", i + 1));
            }
        }
    }
    found
}

#[test]
fn only_the_cli_touches_the_terminal() {
    // python.rs passes on what a Python component itself printed while it was built.
    let found = offending(
        &["println!(", "print!(", "eprintln!(", "eprint!("],
        &["python.rs"],
        &[],
    );
    assert!(found.is_empty(), "the library printing: {found:#?}");
}

#[test]
fn specs_opts_and_components_do_no_io() {
    // The documented exceptions: a component file and a pod overlay file the user names.
    let found = offending(
        &[
            "std::fs",
            "fs::read",
            "File::open",
            "std::process",
            "Command::new",
            "std::net",
        ],
        &["components/file.rs", "specs/overlay.rs"],
        &["specs/", "opts/", "components/"],
    );
    assert!(found.is_empty(), "I/O in pure layers: {found:#?}");
}

#[test]
fn python_rs_is_the_only_place_that_starts_an_interpreter() {
    let found = offending(
        &[
            "Command::new(python",
            "Command::new(&python",
            "Command::new(interpreter",
        ],
        &["python.rs"],
        &[],
    );
    assert!(
        found.is_empty(),
        "an interpreter started outside python.rs: {found:#?}"
    );
}

#[test]
fn unsafe_is_plain_ffi_in_sys_rs_with_a_safety_note() {
    let found = offending(&["unsafe {", "unsafe fn", "unsafe impl"], &["sys.rs"], &[]);
    assert!(found.is_empty(), "unsafe outside sys.rs: {found:#?}");
    let (_, sys) = sources()
        .into_iter()
        .find(|(p, _)| p.ends_with("sys.rs"))
        .unwrap();
    let lines: Vec<&str> = sys.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.contains("unsafe {") {
            let before = &lines[i.saturating_sub(6)..i];
            assert!(
                before.iter().any(|l| l.contains("SAFETY")),
                "sys.rs:{}: an unsafe block without a SAFETY note",
                i + 1
            );
        }
    }
}

#[test]
fn callers_branch_on_kinds_not_on_message_text() {
    let found = offending(&["message().contains(", "to_string().contains("], &[], &[]);
    assert!(found.is_empty(), "branching on error text: {found:#?}");
}

#[test]
fn library_messages_name_no_cli_flags() {
    // A message says what is wrong; the way around it is an `error::Remedy` that each edge
    // presents in its own terms (the CLI's flag, Python's argument). Run options are named as
    // such: `-cfg` is the CLI's spelling of them.
    let found = offending(&["give --", "use --", "-cfg "], &[], &[]);
    assert!(found.is_empty(), "CLI prose in library text: {found:#?}");
}

/// The `map_err(|e| ...)` closures in `code` that make an `Error::backend` from the error they
/// map (its text in the message) without keeping it as the source (`with_source`,
/// `backend_caused_by`), as `rel:line`.
fn backend_errors_dropping_their_cause(rel: &str, code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("map_err(|") {
        let rest = &code[at + "map_err(|".len()..];
        let Some((var, _)) = rest.split_once('|') else {
            continue;
        };
        // The closure: up to the parenthesis that closes `map_err(`.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '(' => 1,
                    ')' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(rest.len(), |(i, _)| i);
        let body = &rest[..end];
        let uses_it =
            body.contains(&format!("{{{var}}}")) || body.contains(&format!("{var}.to_string()"));
        let keeps_it = body.contains("with_source") || body.contains("caused_by");
        if body.contains("Error::backend(") && uses_it && !keeps_it {
            found.push(format!("{rel}:{}", code[..at].matches('\n').count() + 1));
        }
    }
    found
}

#[test]
fn backend_errors_keep_their_source() {
    let found: Vec<String> = sources()
        .iter()
        .flat_map(|(path, code)| backend_errors_dropping_their_cause(&relative(path), code))
        .collect();
    assert!(
        found.is_empty(),
        "a backend error that quotes its cause without keeping it (`.with_source(e)`): {found:#?}"
    );
}

/// The scanner itself: it sees code that is there (so the checks above can fail).
#[test]
fn the_scanner_sees_what_is_there() {
    assert!(!offending(&["Command::new("], &[], &[]).is_empty());
    assert!(
        !offending(&["eprint!("], &[], &[]).is_empty(),
        "python.rs's passthrough"
    );
    assert!(
        !offending(&["std::fs"], &[], &["components/"]).is_empty(),
        "components/file.rs"
    );
    let dropped = ".map_err(|e| Error::backend(NAME, format!(\"cannot: {e}\")))?;";
    let kept = ".map_err(|e| Error::backend(NAME, format!(\"cannot: {e}\")).with_source(e))?;";
    assert_eq!(
        backend_errors_dropping_their_cause("x.rs", &format!("a\n{dropped}\n{kept}")),
        ["x.rs:2"]
    );
}
