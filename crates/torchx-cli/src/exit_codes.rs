//! The exit codes of `torchx`, one per class of outcome. Documented in README.md.

use torchx::ErrorKind;

/// Success.
pub const OK: i32 = 0;
/// The job ran and did not succeed (FAILED, CANCELLED, or unknown at the end of a wait).
pub const JOB_FAILED: i32 = 1;
/// Bad command line, component arguments, handle or job spec.
pub const USAGE: i32 = 2;
/// Bad run options or configuration files.
pub const CONFIG: i32 = 3;
/// The app, component, scheduler, role or file does not exist.
pub const NOT_FOUND: i32 = 4;
/// The scheduler backend failed.
pub const BACKEND: i32 = 5;
/// The scheduler does not support the operation.
pub const UNSUPPORTED: i32 = 6;
/// `--timeout` expired while waiting.
pub const TIMEOUT: i32 = 7;
/// Interrupted (Ctrl-C / SIGTERM); the app was cancelled.
pub const INTERRUPTED: i32 = 130;

/// The exit code for a library error.
pub fn for_error(kind: ErrorKind) -> i32 {
    match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidSpec => USAGE,
        ErrorKind::InvalidConfig => CONFIG,
        ErrorKind::NotFound => NOT_FOUND,
        ErrorKind::Unsupported => UNSUPPORTED,
        ErrorKind::Timeout => TIMEOUT,
        _ => BACKEND,
    }
}
