//! Executables on PATH that extend torchx, found by name prefix as git and cargo find their
//! subcommands: `torchx-<cmd>` (CLI commands) and `torchx-scheduler-<name>` (schedulers).
//! Lookups are by name (a few `stat`s); only listings read whole PATH directories.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

mod listing;

pub use crate::python::{entry_point_components, run_subcommand};

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The exit code a plugin's status stands for: its own, or 128 + the signal that killed it
/// (as a shell reports it).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Plugin names are lowercase ASCII letters, digits, `-` and `_` (no path tricks).
pub fn is_plugin_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// The first executable `{prefix}{name}` on PATH.
pub fn find(prefix: &str, name: &str) -> Option<PathBuf> {
    if !is_plugin_name(name) {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(format!("{prefix}{name}")))
        .find(|p| is_executable(p))
}

/// Every executable `{prefix}<name>` on PATH whose name passes `accept` (the first of each name
/// wins, as in a PATH lookup), sorted by name. `prefix` starts with `torchx-`: the directories'
/// listings come from a cache in `state_dir` (`listing.rs`).
pub fn all(
    prefix: &str,
    accept: impl Fn(&str) -> bool,
    state_dir: &Path,
) -> Vec<(String, PathBuf)> {
    debug_assert!(prefix.starts_with(listing::CACHED_PREFIX));
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    let Some(path) = std::env::var_os("PATH") else {
        return found;
    };
    let mut listings = listing::Listings::load(state_dir.join("path-listings.tsv"));
    // Each directory once: PATH often names one twice (`/bin` is `/usr/bin` on merged-/usr
    // systems).
    let mut seen_dirs = Vec::new();
    for dir in std::env::split_paths(&path) {
        let Ok(meta) = std::fs::metadata(&dir) else {
            continue;
        };
        let id = (meta.dev(), meta.ino());
        if seen_dirs.contains(&id) {
            continue;
        }
        seen_dirs.push(id);
        for file in listings.names(&dir, &meta) {
            let Some(name) = file.strip_prefix(prefix) else {
                continue;
            };
            let program = dir.join(&file);
            if is_plugin_name(name)
                && accept(name)
                && !found.iter().any(|(n, _)| n == name)
                && is_executable(&program)
            {
                found.push((name.to_string(), program));
            }
        }
    }
    listings.save();
    found.sort();
    found
}
