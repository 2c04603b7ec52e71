//! The `torchx` command line. All logic lives in the `torchx` library; this crate parses
//! arguments, renders output and errors, and maps outcomes to exit codes.

mod cli;
mod commands;
mod exit_codes;
mod output;
mod plugins;

fn main() {
    // `torchx __supervise` / `torchx __guard`: this binary supervises local_cwd apps.
    torchx::schedulers::local_cwd::embed_supervisor();
    restore_sigpipe();
    std::process::exit(cli::main());
}

/// Rust ignores SIGPIPE, which turns `torchx list | head` into a panic on a closed stdout;
/// restore the default so a closed pipe ends the process quietly, as with any Unix tool.
#[allow(unsafe_code)]
fn restore_sigpipe() {
    // SAFETY: called before any thread exists; only sets a signal disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
