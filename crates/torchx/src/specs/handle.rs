//! App handles: `{scheduler}://{session_name}/{app_id}`.

use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

use crate::error::{Error, Result};

/// What starts the app id of a group's handle (`slurm://torchx/~name-id`); no scheduler's own
/// app ids start with it.
pub const GROUP_MARK: char = '~';

/// An app handle, `{scheduler}://{session_name}/{app_id}`: its text and its parts. Handles
/// compare, hash and order as their text.
#[derive(Debug, Clone)]
pub struct AppHandle {
    text: String,
    /// Where `://` starts (the scheduler's end).
    scheduler_end: usize,
    /// Where the app id starts (after the session's `/`).
    app_id_start: usize,
}

impl AppHandle {
    /// The handle of `app_id` of `scheduler` in session `session_name`.
    pub fn new(scheduler: &str, session_name: &str, app_id: &str) -> Self {
        Self {
            text: format!("{scheduler}://{session_name}/{app_id}"),
            scheduler_end: scheduler.len(),
            app_id_start: scheduler.len() + 3 + session_name.len() + 1,
        }
    }

    /// The scheduler name.
    pub fn scheduler(&self) -> &str {
        &self.text[..self.scheduler_end]
    }

    /// Whether the handle names a group of jobs (its app id starts with [`GROUP_MARK`]).
    pub fn names_group(&self) -> bool {
        self.app_id().starts_with(GROUP_MARK)
    }

    /// The session name (ignored when routing).
    pub fn session_name(&self) -> &str {
        &self.text[self.scheduler_end + 3..self.app_id_start - 1]
    }

    /// The scheduler's app id.
    pub fn app_id(&self) -> &str {
        &self.text[self.app_id_start..]
    }

    /// The handle's text.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// A handle is its text wherever one is asked for (`runner.status(&handle)`).
impl std::ops::Deref for AppHandle {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl PartialEq for AppHandle {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for AppHandle {}

impl std::hash::Hash for AppHandle {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl PartialOrd for AppHandle {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for AppHandle {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl PartialEq<str> for AppHandle {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<String> for AppHandle {
    fn eq(&self, other: &String) -> bool {
        &self.text == other
    }
}

impl PartialEq<AppHandle> for String {
    fn eq(&self, other: &AppHandle) -> bool {
        *self == other.text
    }
}

impl AsRef<str> for AppHandle {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

/// As its text, as in TorchX's JSON.
impl serde::Serialize for AppHandle {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl From<AppHandle> for String {
    fn from(h: AppHandle) -> String {
        h.text
    }
}

impl fmt::Display for AppHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for AppHandle {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        parse_app_handle(s)
    }
}

/// Formats a handle.
pub fn make_app_handle(scheduler: &str, session_name: &str, app_id: &str) -> String {
    AppHandle::new(scheduler, session_name, app_id).into()
}

/// Parses a handle with TorchX's greedy, start-anchored pattern, so `a://b/c/d` is
/// (`a`, `b/c`, `d`) and `a://b://c/d` is (`a://b`, `c`, `d`).
pub fn parse_app_handle(handle: &str) -> Result<AppHandle> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^(?P<scheduler>.+)://(?P<session>.*)/(?P<app_id>.+)$").expect("valid regex")
    });
    let malformed = || {
        Error::arg(format!(
            "{handle} is not of the form: <scheduler_backend>://<session_name>/<app_id>"
        ))
    };
    if handle.chars().any(char::is_control) {
        return Err(malformed());
    }
    let caps = re.captures(handle).ok_or_else(malformed)?;
    Ok(AppHandle {
        text: handle.to_string(),
        scheduler_end: caps.name("scheduler").map_or(0, |m| m.end()),
        app_id_start: caps.name("app_id").map_or(0, |m| m.start()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(h: &str) -> (String, String, String) {
        let p = parse_app_handle(h).unwrap();
        assert_eq!(p.to_string(), h, "round trip");
        let built = AppHandle::new(p.scheduler(), p.session_name(), p.app_id());
        assert_eq!(built, p, "built from its parts");
        (
            p.scheduler().into(),
            p.session_name().into(),
            p.app_id().into(),
        )
    }

    #[test]
    fn torchx_edge_cases() {
        let t = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        assert_eq!(
            parts("local_cwd://torchx/echo-abc"),
            t("local_cwd", "torchx", "echo-abc")
        );
        assert_eq!(parts("k8s:///foo"), t("k8s", "", "foo"));
        assert_eq!(parts("a://b/c/d"), t("a", "b/c", "d"));
        assert_eq!(parts("a://b://c/d"), t("a://b", "c", "d"));
        assert_eq!(
            parts("kubernetes://session/default:app-1"),
            t("kubernetes", "session", "default:app-1")
        );
        for bad in ["x://y/", "foo", "://a/b", "a:/b/c", "", "a://b/c\nd"] {
            let e = parse_app_handle(bad).unwrap_err().to_string();
            assert!(
                e.ends_with("is not of the form: <scheduler_backend>://<session_name>/<app_id>"),
                "{bad}: {e}"
            );
        }
    }
}
