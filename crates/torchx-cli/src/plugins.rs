//! Executable plugins: `torchx-<cmd>` on PATH becomes `torchx <cmd>`, as git and cargo do.
//! Builtin commands always win (clap matches them first), and `torchx-scheduler-*` programs are
//! not commands. PATH is scanned only for `--help`, so start-up stays fast.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::exit_codes;

const PREFIX: &str = "torchx-";

fn is_command_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with("scheduler-")
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The plugin program for `cmd`, if one is on PATH.
pub fn find(cmd: &str) -> Option<PathBuf> {
    if !is_command_name(cmd) {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(format!("{PREFIX}{cmd}")))
        .find(|p| is_executable(p))
}

/// Every plugin command on PATH (first one of each name wins), sorted.
pub fn all() -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    let Some(path) = std::env::var_os("PATH") else {
        return found;
    };
    for dir in std::env::split_paths(&path) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(cmd) = name.strip_prefix(PREFIX) else {
                continue;
            };
            if is_command_name(cmd)
                && !found.iter().any(|(c, _)| c == cmd)
                && is_executable(&e.path())
            {
                found.push((cmd.to_string(), e.path()));
            }
        }
    }
    found.sort();
    found
}

/// The `--help` section listing plugin commands (empty when there are none).
pub fn help_section() -> String {
    let all = all();
    if all.is_empty() {
        return String::new();
    }
    let mut s = String::from("Plugin commands (torchx-<command> on PATH):\n");
    for (cmd, path) in all {
        s.push_str(&format!("  {cmd:<12} {}\n", path.display()));
    }
    s
}

/// Runs plugin `cmd` with `args`, its stdio inherited; returns its exit code. The plugin gets
/// `TORCHX_BIN`, this program, to call back into the CLI.
pub fn run(cmd: &str, args: &[String], builtins: &[String]) -> i32 {
    let Some(program) = find(cmd) else {
        let hint = torchx::error::did_you_mean(cmd, builtins.iter().map(String::as_str));
        eprintln!(
            "torchx: error: unrecognized subcommand `{cmd}` (no builtin command and no \
             `{PREFIX}{cmd}` on PATH).{hint} See `torchx --help`."
        );
        return exit_codes::USAGE;
    };
    let mut c = Command::new(&program);
    c.args(args);
    if let Ok(me) = std::env::current_exe() {
        c.env("TORCHX_BIN", me);
    }
    match c.status() {
        Ok(s) => s.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + s.signal().unwrap_or(0)
        }),
        Err(e) => {
            eprintln!(
                "torchx: error: cannot run plugin {}: {e}",
                program.display()
            );
            exit_codes::BACKEND
        }
    }
}
