//! The library's error type: one struct whose [`ErrorKind`] is the only axis callers act on
//! (the CLI maps kinds to exit codes, the Python extension to exception classes), with every
//! cause kept as its source. How an error is shown beyond its message (the way around it, the
//! cause chain) is the caller's: the CLI and the Python extension present it, both through
//! [`Error::explained`].

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
    const ALL: [ErrorKind; 10] = [
        ErrorKind::InvalidArgument,
        ErrorKind::InvalidSpec,
        ErrorKind::InvalidConfig,
        ErrorKind::NotFound,
        ErrorKind::Unsupported,
        ErrorKind::Backend,
        ErrorKind::AlreadyExists,
        ErrorKind::PermissionDenied,
        ErrorKind::Unavailable,
        ErrorKind::Timeout,
    ];

    /// The kind [`as_str`](Self::as_str) names (what another process reported).
    pub fn from_name(name: &str) -> Option<ErrorKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

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

/// What a [`ErrorKind::NotFound`] error was about, for callers that act on it (an unknown app
/// is `Ok(None)` to `describe`). Other things not found carry only their noun, for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Subject {
    /// An app (a job) the scheduler does not know.
    App,
    /// A scheduler no registry or plugin provides.
    Scheduler,
}

/// A way around an error that the caller offers in its own terms: the CLI names its flag, the
/// Python package its argument. The library's messages say what is wrong, never which flag
/// to give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Remedy {
    /// Submit anyway, without the pre-flight checks.
    SkipPreflight,
    /// Run the role's image as it is, without building a workspace into it.
    NoWorkspace,
}

/// The error of every fallible operation in this crate: one [`ErrorKind`] (what callers act
/// on: the CLI's exit code, the Python exception class), the message, the scheduler it came
/// from and the underlying error as its [`source`](std::error::Error::source). A near
/// candidate for a misspelt name ([`Error::suggestion`]) and the way around the error
/// ([`Error::remedy`]) are kept apart: [`Error::explained`] joins them as its caller words them.
pub struct Error {
    kind: ErrorKind,
    message: String,
    scheduler: Option<String>,
    subject: Option<Subject>,
    suggestion: Option<String>,
    remedy: Option<Remedy>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind).field("message", &self.message);
        if let Some(s) = &self.scheduler {
            d.field("scheduler", s);
        }
        if let Some(s) = &self.suggestion {
            d.field("suggestion", s);
        }
        if let Some(r) = &self.remedy {
            d.field("remedy", r);
        }
        if let Some(s) = &self.source {
            d.field("source", s);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scheduler {
            Some(s) if self.kind.is_backend() => write!(f, "{s}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl ErrorKind {
    /// A failure of a backend (shown as `<scheduler>: <message>`).
    fn is_backend(self) -> bool {
        matches!(
            self,
            ErrorKind::Backend
                | ErrorKind::AlreadyExists
                | ErrorKind::PermissionDenied
                | ErrorKind::Unavailable
        )
    }

    /// The kind of an HTTP error status from a backend's API (Docker's, Kubernetes',
    /// SageMaker's, ...): 401/403 permission, 404 not found, 409 a name clash, 408/429/5xx
    /// unavailable (worth retrying later), anything else the backend's failure.
    pub fn from_http_status(status: u16) -> ErrorKind {
        match status {
            401 | 403 => ErrorKind::PermissionDenied,
            404 => ErrorKind::NotFound,
            409 => ErrorKind::AlreadyExists,
            408 | 429 | 500.. => ErrorKind::Unavailable,
            _ => ErrorKind::Backend,
        }
    }
}

impl Error {
    fn new(kind: ErrorKind, message: String) -> Self {
        Error {
            kind,
            message,
            scheduler: None,
            subject: None,
            suggestion: None,
            remedy: None,
            source: None,
        }
    }

    /// The class of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message, without the scheduler's name.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The scheduler the error came from, if it was a backend's.
    pub fn scheduler(&self) -> Option<&str> {
        self.scheduler.as_deref()
    }

    /// What a not-found error was about, where callers act on it.
    pub fn subject(&self) -> Option<Subject> {
        self.subject
    }

    /// The known name nearest to a misspelt one, if any is close.
    pub fn suggestion(&self) -> Option<&str> {
        self.suggestion.as_deref()
    }

    /// The way around this error the caller can offer, if there is one.
    pub fn remedy(&self) -> Option<Remedy> {
        self.remedy
    }

    /// The message, then "Did you mean `x`?" for a suggested name and `remedy` (the caller's
    /// wording of [`Error::remedy`]), each a sentence of its own: what the edges show.
    pub fn explained(&self, remedy: Option<&str>) -> String {
        let mut text = self.to_string();
        if let Some(near) = &self.suggestion {
            push_sentence(&mut text, &format!("Did you mean `{near}`?"));
        }
        if let Some(remedy) = remedy {
            push_sentence(&mut text, remedy);
        }
        text
    }

    /// The I/O error underneath, if this is one.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        self.source.as_deref()?.downcast_ref()
    }

    /// A malformed argument: component arguments, app handles, mounts, `-j`, names.
    pub fn arg(msg: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidArgument, msg.into())
    }

    /// An invalid AppDef or Role.
    pub fn spec(msg: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidSpec, msg.into())
    }

    /// Invalid scheduler run options or config file contents.
    pub fn config(msg: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidConfig, msg.into())
    }

    /// `{what} `{name}` not found{hint}`: something named does not exist. `hint` starts with
    /// its separator (` in the job ledger`, `; run ...`).
    pub fn not_found(what: &'static str, name: impl Into<String>, hint: impl Into<String>) -> Self {
        let (name, hint) = (name.into(), hint.into());
        Error::new(
            ErrorKind::NotFound,
            format!("{what} `{name}` not found{hint}"),
        )
    }

    /// An app the scheduler does not know ([`Subject::App`]).
    pub fn app_not_found(app_id: impl Into<String>, hint: impl Into<String>) -> Self {
        Error::not_found("app", app_id, hint).about(Subject::App)
    }

    /// This (not found) error, about `subject`.
    pub fn about(mut self, subject: Subject) -> Self {
        self.subject = Some(subject);
        self
    }

    /// Whether this is a not-found error about `subject`.
    pub fn is_not_found(&self, subject: Subject) -> bool {
        self.kind == ErrorKind::NotFound && self.subject == Some(subject)
    }

    /// A backend failure (a process, a cluster, an API) of kind [`ErrorKind::Backend`].
    pub fn backend(scheduler: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            scheduler: Some(scheduler.into()),
            ..Error::new(ErrorKind::Backend, message.into())
        }
    }

    /// A backend error of the given kind caused by `source`.
    pub fn backend_caused_by(
        scheduler: impl Into<String>,
        message: impl Into<String>,
        kind: ErrorKind,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::backend(scheduler, message)
            .with_kind(kind)
            .with_source(source)
    }

    /// The backend already has what was to be created (a name clash).
    pub fn already_exists(scheduler: impl Into<String>, message: impl Into<String>) -> Self {
        Error::backend(scheduler, message).with_kind(ErrorKind::AlreadyExists)
    }

    /// The scheduler cannot do `operation`.
    pub fn unsupported(scheduler: impl Into<String>, operation: impl Into<String>) -> Self {
        let (scheduler, operation) = (scheduler.into(), operation.into());
        Error {
            scheduler: Some(scheduler.clone()),
            ..Error::new(
                ErrorKind::Unsupported,
                format!("scheduler `{scheduler}` does not support {operation}"),
            )
        }
    }

    /// A wait (or a command) ran out of time.
    pub fn timeout(msg: impl Into<String>) -> Self {
        Error::new(ErrorKind::Timeout, msg.into())
    }

    /// An I/O failure, with what was being done (`context: <the io error>`).
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        use std::io::ErrorKind as Io;
        // A file the library expects and does not find is its own state gone wrong (a
        // Backend fault); files a user names are reported by their readers as NotFound.
        let kind = match source.kind() {
            Io::PermissionDenied | Io::ReadOnlyFilesystem => ErrorKind::PermissionDenied,
            Io::TimedOut => ErrorKind::Timeout,
            Io::ConnectionRefused
            | Io::ConnectionReset
            | Io::ConnectionAborted
            | Io::NotConnected
            | Io::AddrNotAvailable
            | Io::HostUnreachable
            | Io::NetworkUnreachable => ErrorKind::Unavailable,
            _ => ErrorKind::Backend,
        };
        Error::new(kind, format!("{}: {source}", context.into())).with_source(source)
    }

    /// This error with another kind (its message and cause kept).
    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }

    /// This error caused by `source`.
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// This error with the scheduler it came from.
    pub fn with_scheduler(mut self, scheduler: impl Into<String>) -> Self {
        self.scheduler = Some(scheduler.into());
        self
    }

    /// This error with a way around it (presented by the caller).
    pub fn with_remedy(mut self, remedy: Remedy) -> Self {
        self.remedy = Some(remedy);
        self
    }

    /// This error with the nearest of `candidates` to the misspelt `given`, if one is close.
    pub fn suggesting<'a>(
        mut self,
        given: &str,
        candidates: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        self.suggestion = nearest(given, candidates).map(str::to_string);
        self
    }
}

/// `sentence` after `text`, with a full stop between them if `text` has none.
fn push_sentence(text: &mut String, sentence: &str) {
    if !text.ends_with(['.', '?', '!']) {
        text.push('.');
    }
    text.push(' ');
    text.push_str(sentence);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_found_by_its_name() {
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(ErrorKind::from_name("no_such_kind"), None);
    }

    #[test]
    fn io_errors_keep_their_cause_and_a_kind_to_act_on() {
        let kind_of = |k| Error::io("doing", std::io::Error::from(k)).kind();
        use std::io::ErrorKind as Io;
        assert_eq!(kind_of(Io::PermissionDenied), ErrorKind::PermissionDenied);
        assert_eq!(kind_of(Io::TimedOut), ErrorKind::Timeout);
        assert_eq!(kind_of(Io::ConnectionRefused), ErrorKind::Unavailable);
        assert_eq!(kind_of(Io::NotFound), ErrorKind::Backend);
        let e = Error::io("reading x", std::io::Error::from(Io::PermissionDenied));
        assert_eq!(
            e.io_error().map(std::io::Error::kind),
            Some(Io::PermissionDenied)
        );
        assert!(e.to_string().starts_with("reading x: "), "{e}");
    }

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

    #[test]
    fn explained_adds_the_suggestion_and_remedy_as_sentences() {
        let misspelt =
            Error::arg("no component `utils.ecoh`").suggesting("utils.ecoh", ["utils.echo"]);
        assert_eq!(
            misspelt.explained(Some("Or try harder.")),
            "no component `utils.ecoh`. Did you mean `utils.echo`? Or try harder."
        );
        assert_eq!(Error::arg("done.").explained(Some("Next.")), "done. Next.");
        assert_eq!(Error::arg("plain").explained(None), "plain");
    }
}
