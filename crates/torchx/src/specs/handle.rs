//! App handles: `{scheduler}://{session_name}/{app_id}`.

use std::fmt;
use std::sync::OnceLock;

use regex::Regex;

use crate::error::{Error, Result};

/// A parsed app handle.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AppHandle {
    /// The scheduler name.
    pub scheduler: String,
    /// The session name (ignored when routing).
    pub session_name: String,
    /// The scheduler's app id.
    pub app_id: String,
}

impl fmt::Display for AppHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}/{}",
            self.scheduler, self.session_name, self.app_id
        )
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
    format!("{scheduler}://{session_name}/{app_id}")
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
        scheduler: caps["scheduler"].to_string(),
        session_name: caps["session"].to_string(),
        app_id: caps["app_id"].to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(h: &str) -> (String, String, String) {
        let p = parse_app_handle(h).unwrap();
        assert_eq!(p.to_string(), h, "round trip");
        (p.scheduler, p.session_name, p.app_id)
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
