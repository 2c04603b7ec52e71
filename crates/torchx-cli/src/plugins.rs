//! Executable plugins: `torchx-<cmd>` on PATH becomes `torchx <cmd>`, as git and cargo do.
//! Builtin commands always win (clap matches them first), and `torchx-scheduler-*` programs are
//! not commands. PATH is scanned only for `--help`, so start-up stays fast.

use std::path::PathBuf;
use std::process::Command;

use crate::exit_codes;

const PREFIX: &str = "torchx-";

/// `torchx-scheduler-*` programs are schedulers, not commands.
fn is_command(name: &str) -> bool {
    !name.starts_with("scheduler-")
}

/// The plugin program for `cmd`, if one is on PATH.
pub fn find(cmd: &str) -> Option<PathBuf> {
    is_command(cmd)
        .then(|| torchx::plugins::find(PREFIX, cmd))
        .flatten()
}

/// Every plugin command on PATH, sorted.
pub fn all() -> Vec<(String, PathBuf)> {
    torchx::plugins::all(PREFIX, is_command, &torchx::schedulers::default_state_dir())
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
        // A `SubCommand` of the Python `torchx.cli.cmds` entry points, if any are declared.
        if let Some(result) = torchx::plugins::run_subcommand(cmd, args) {
            return result.map(torchx::plugins::exit_code).unwrap_or_else(|e| {
                eprintln!("torchx: error: {e}");
                exit_codes::BACKEND
            });
        }
        let err = torchx::Error::arg(format!(
            "unrecognized subcommand `{cmd}` (no builtin command and no `{PREFIX}{cmd}` on PATH)"
        ))
        .suggesting(cmd, builtins.iter().map(String::as_str));
        let message = err.explained(Some("See `torchx --help`."));
        eprintln!("torchx: error: {message}");
        return exit_codes::USAGE;
    };
    let mut c = Command::new(&program);
    c.args(args);
    if let Ok(me) = std::env::current_exe() {
        c.env("TORCHX_BIN", me);
    }
    match c.status() {
        Ok(s) => torchx::plugins::exit_code(s),
        Err(e) => {
            eprintln!(
                "torchx: error: cannot run plugin {}: {e}",
                program.display()
            );
            exit_codes::BACKEND
        }
    }
}
