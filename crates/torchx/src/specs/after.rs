//! `--after HANDLE[:ok|:notok|:any]`: a job that starts only once other jobs (or groups) have
//! ended as it requires. Pure: the spelling, and what a dependency's state means for the job
//! that waits on it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::AppState;
use crate::error::{Error, Result};

/// How a dependency must end for its dependent to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Condition {
    /// SUCCEEDED (the default).
    Ok,
    /// FAILED or CANCELLED.
    NotOk,
    /// Any end.
    Any,
}

impl Condition {
    /// Its spelling after the handle: `ok`, `notok`, `any`.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Ok => "ok",
            Condition::NotOk => "notok",
            Condition::Any => "any",
        }
    }

    /// What a dependency in `state` means for the job waiting on it.
    pub fn verdict(self, state: AppState) -> Verdict {
        if !state.is_terminal() {
            return Verdict::Waiting;
        }
        let ok = state == AppState::Succeeded;
        match self {
            Condition::Any => Verdict::Satisfied,
            Condition::Ok if ok => Verdict::Satisfied,
            Condition::NotOk if !ok => Verdict::Satisfied,
            _ => Verdict::Impossible,
        }
    }

    /// How the dependency must end, for messages.
    pub fn wanted(self) -> &'static str {
        match self {
            Condition::Ok => "SUCCEEDED",
            Condition::NotOk => "FAILED or CANCELLED",
            Condition::Any => "over",
        }
    }
}

/// What a dependency's state means for its dependent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It has not ended yet.
    Waiting,
    /// It ended as required.
    Satisfied,
    /// It ended otherwise: the dependent can never start.
    Impossible,
}

/// One `--after`: a job (or group) handle and how it must end.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dependency {
    /// The job's (or group's) handle, `scheduler://session/app_id`.
    pub handle: String,
    /// How it must end.
    pub condition: Condition,
}

impl FromStr for Dependency {
    type Err = Error;

    /// `HANDLE`, `HANDLE:ok`, `HANDLE:notok` or `HANDLE:any`.
    fn from_str(s: &str) -> Result<Dependency> {
        let (handle, condition) = match s.rsplit_once(':') {
            Some((h, "ok")) => (h, Condition::Ok),
            Some((h, "notok")) => (h, Condition::NotOk),
            Some((h, "any")) => (h, Condition::Any),
            _ => (s, Condition::Ok),
        };
        super::parse_app_handle(handle).map_err(|e| {
            Error::arg(format!(
                "--after `{s}`: give a job's handle (scheduler://session/app_id), optionally \
                 followed by :ok (the default), :notok or :any ({e})"
            ))
        })?;
        Ok(Dependency {
            handle: handle.to_string(),
            condition,
        })
    }
}

impl fmt::Display for Dependency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.handle, self.condition.as_str())
    }
}

impl Serialize for Dependency {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dependency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings() {
        let d: Dependency = "slurm://torchx/12".parse().unwrap();
        assert_eq!(
            (d.handle.as_str(), d.condition),
            ("slurm://torchx/12", Condition::Ok)
        );
        let d: Dependency = "local_cwd://s/a-1:notok".parse().unwrap();
        assert_eq!(d.condition, Condition::NotOk);
        assert_eq!(d.to_string(), "local_cwd://s/a-1:notok");
        let d: Dependency = "aws_batch://s/q:name:any".parse().unwrap();
        assert_eq!(d.handle, "aws_batch://s/q:name");
        let d: Dependency = "local_cwd://s/~sh-1:ok".parse().unwrap();
        assert_eq!(d.handle, "local_cwd://s/~sh-1");
        for bad in ["", "12", "slurm:12", ":ok"] {
            let e = bad.parse::<Dependency>().unwrap_err();
            assert!(e.to_string().contains("--after"), "{bad}: {e}");
        }
        let json = serde_json::to_string(&vec![d.clone()]).unwrap();
        assert_eq!(serde_json::from_str::<Vec<Dependency>>(&json).unwrap(), [d]);
    }

    #[test]
    fn verdicts() {
        use AppState::*;
        use Verdict::*;
        for (condition, state, verdict) in [
            (Condition::Ok, Running, Waiting),
            (Condition::Ok, Pending, Waiting),
            (Condition::Ok, Succeeded, Satisfied),
            (Condition::Ok, Failed, Impossible),
            (Condition::Ok, Cancelled, Impossible),
            (Condition::NotOk, Succeeded, Impossible),
            (Condition::NotOk, Failed, Satisfied),
            (Condition::NotOk, Cancelled, Satisfied),
            (Condition::Any, Failed, Satisfied),
            (Condition::Any, Succeeded, Satisfied),
            (Condition::Any, Running, Waiting),
        ] {
            assert_eq!(condition.verdict(state), verdict, "{condition:?} {state:?}");
        }
    }
}
