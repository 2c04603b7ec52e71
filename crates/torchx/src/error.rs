//! The library's error type. Every error carries a [`ErrorKind`] so that callers (the CLI maps kinds
//! to exit codes) can react to the class of failure without parsing messages.

use std::fmt;

/// What class of failure an [`Error`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A malformed argument: component arguments, app handles, mounts, `-j`, names.
    InvalidArgument,
    /// An invalid job spec (AppDef/Role) that no scheduler could run.
    InvalidSpec,
    /// Bad scheduler run options or configuration files.
    InvalidConfig,
    /// An app, component, scheduler, role or file that does not exist.
    NotFound,
    /// The scheduler cannot do what was asked.
    Unsupported,
    /// The scheduler backend (a process, a cluster, an API) failed.
    Backend,
    /// The backend already has what was to be created (a name clash).
    AlreadyExists,
    /// The backend refused the caller: no or wrong credentials, or no permission.
    PermissionDenied,
    /// The backend could not be reached or is not answering (worth retrying later); never
    /// reported as "not found".
    Unavailable,
    /// A wait ran out of time.
    Timeout,
}

impl ErrorKind {
    /// A short stable name of the kind, used in JSON output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid_argument",
            ErrorKind::InvalidSpec => "invalid_spec",
            ErrorKind::InvalidConfig => "invalid_config",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Backend => "backend",
            ErrorKind::AlreadyExists => "already_exists",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::Unavailable => "unavailable",
            ErrorKind::Timeout => "timeout",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of every fallible operation in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A malformed argument.
    #[error("{0}")]
    InvalidArgument(String),
    /// An invalid AppDef or Role.
    #[error("{0}")]
    InvalidSpec(String),
    /// Invalid scheduler run options or config file contents.
    #[error("{0}")]
    InvalidConfig(String),
    /// Something named does not exist.
    #[error("{what} `{name}` not found{hint}")]
    NotFound {
        /// What kind of thing ("app", "component", "scheduler", ...).
        what: &'static str,
        /// Its name as given.
        name: String,
        /// Extra guidance, starting with a separator (may be empty).
        hint: String,
    },
    /// The operation is not supported by the scheduler.
    #[error("scheduler `{scheduler}` does not support {operation}")]
    Unsupported {
        /// The scheduler name.
        scheduler: String,
        /// What was attempted.
        operation: String,
    },
    /// A backend failure.
    #[error("{scheduler}: {message}")]
    Backend {
        /// The scheduler name.
        scheduler: String,
        /// What went wrong.
        message: String,
        /// Its class: [`ErrorKind::Backend`], or one users act on ([`ErrorKind::AlreadyExists`],
        /// [`ErrorKind::PermissionDenied`], [`ErrorKind::Unavailable`]).
        kind: ErrorKind,
        /// The underlying error (a client library's, SQLite's, ...), shown with `-v`.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// A wait timed out.
    #[error("{0}")]
    Timeout(String),
    /// An I/O failure with the path or action it concerned.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::InvalidSpec(_) => ErrorKind::InvalidSpec,
            Error::InvalidConfig(_) => ErrorKind::InvalidConfig,
            Error::NotFound { .. } => ErrorKind::NotFound,
            Error::Unsupported { .. } => ErrorKind::Unsupported,
            Error::Backend { kind, .. } => *kind,
            Error::Io { .. } => ErrorKind::Backend,
            Error::Timeout(_) => ErrorKind::Timeout,
        }
    }

    /// Shorthand for [`Error::InvalidArgument`].
    pub fn arg(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// Shorthand for [`Error::InvalidSpec`].
    pub fn spec(msg: impl Into<String>) -> Self {
        Error::InvalidSpec(msg.into())
    }

    /// Shorthand for [`Error::InvalidConfig`].
    pub fn config(msg: impl Into<String>) -> Self {
        Error::InvalidConfig(msg.into())
    }

    /// Shorthand for [`Error::NotFound`].
    pub fn not_found(what: &'static str, name: impl Into<String>, hint: impl Into<String>) -> Self {
        Error::NotFound {
            what,
            name: name.into(),
            hint: hint.into(),
        }
    }

    /// Shorthand for [`Error::Backend`] of kind [`ErrorKind::Backend`], without a source.
    pub fn backend(scheduler: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Backend {
            scheduler: scheduler.into(),
            message: message.into(),
            kind: ErrorKind::Backend,
            source: None,
        }
    }

    /// A backend error of the given kind (one of the backend kinds) caused by `source`.
    pub fn backend_caused_by(
        scheduler: impl Into<String>,
        message: impl Into<String>,
        kind: ErrorKind,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Backend {
            scheduler: scheduler.into(),
            message: message.into(),
            kind,
            source: Some(Box::new(source)),
        }
    }

    /// This error with its kind set to `kind`, if it is a backend error.
    pub fn with_kind(mut self, new: ErrorKind) -> Self {
        if let Error::Backend { kind, .. } = &mut self {
            *kind = new;
        }
        self
    }

    /// Shorthand for [`Error::Unsupported`].
    pub fn unsupported(scheduler: impl Into<String>, operation: impl Into<String>) -> Self {
        Error::Unsupported {
            scheduler: scheduler.into(),
            operation: operation.into(),
        }
    }

    /// Wraps an I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Suggests the candidate nearest to `given` (edit distance), if it is close enough to be a typo.
pub fn nearest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given_lc = given.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::levenshtein(&given_lc, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `" Did you mean `x`?"` when a near candidate exists, else "".
pub fn did_you_mean<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    nearest(given, candidates)
        .map(|c| format!(" Did you mean `{c}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_typos_only() {
        assert_eq!(
            nearest("log_dri", ["log_dir", "prepend_cwd"]),
            Some("log_dir")
        );
        assert_eq!(nearest("zzzzzzz", ["log_dir", "prepend_cwd"]), None);
        assert_eq!(
            nearest("gpu.smal", ["gpu.small", "gpu.medium"]),
            Some("gpu.small")
        );
    }
}
