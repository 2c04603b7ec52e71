//! The `torchx` command line as a library: [`main`] runs the standard CLI over an
//! [`Extensions`] set, so a platform team can ship its own binary with extra schedulers,
//! components, named resources and trackers next to the builtins, without forking:
//!
//! ```no_run
//! let ext = torchx::Extensions::builtin()
//!     .named_resource("trn1.2xl", torchx::specs::Resource::new(8, 0, 32 * 1024));
//! torchx_cli::main(ext)
//! ```
//!
//! (examples/custom-torchx.rs is a complete one.)
//!
//! All logic lives in the `torchx` library; this crate parses arguments, renders output and
//! errors, and maps outcomes to exit codes.

use torchx::Extensions;

mod cli;
mod commands;
mod exit_codes;
mod output;
mod plugins;
mod progress;

/// Runs the `torchx` CLI over `ext` with this process's arguments and exits with its code.
pub fn main(ext: Extensions) -> ! {
    // `torchx __supervise` / `torchx __guard`: this binary supervises local_cwd apps.
    torchx::schedulers::local_cwd::embed_supervisor();
    restore_sigpipe();
    commands::set_extensions(ext);
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
