//! What a scheduler can tell about a job before it is queued (`torchx plan`, `run -s auto`):
//! checks that are certain to fail, checks it could not make and why, and when the job would
//! start where the scheduler can tell.

use serde::Serialize;

use crate::Remedy;

/// How one check came out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CheckOutcome {
    /// Passed.
    Ok,
    /// Certain to fail: what to change.
    Fails {
        /// What to change.
        fix: String,
    },
    /// Could not be made: why.
    Unknown {
        /// Why.
        why: String,
    },
}

/// One check of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanCheck {
    /// What was checked (`partition`, `image busybox:1`, `resources`, ...).
    pub check: String,
    /// What was found.
    pub detail: String,
    /// How it came out.
    #[serde(flatten)]
    pub outcome: CheckOutcome,
    /// A way around a failed check, beyond its fix, that the caller presents in its terms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<Remedy>,
}

impl PlanCheck {
    /// A check that passed.
    pub fn ok(check: impl Into<String>, detail: impl Into<String>) -> PlanCheck {
        PlanCheck {
            check: check.into(),
            detail: detail.into(),
            outcome: CheckOutcome::Ok,
            remedy: None,
        }
    }

    /// A check certain to fail, with what to change.
    pub fn fails(
        check: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> PlanCheck {
        PlanCheck {
            check: check.into(),
            detail: detail.into(),
            outcome: CheckOutcome::Fails { fix: fix.into() },
            remedy: None,
        }
    }

    /// This check with a way around it.
    pub fn with_remedy(mut self, remedy: Remedy) -> PlanCheck {
        self.remedy = Some(remedy);
        self
    }

    /// A check that could not be made, and why.
    pub fn unknown(check: impl Into<String>, why: impl Into<String>) -> PlanCheck {
        let why = why.into();
        PlanCheck {
            check: check.into(),
            detail: String::new(),
            outcome: CheckOutcome::Unknown { why },
            remedy: None,
        }
    }
}

/// What a scheduler found about a dry-run job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PlanReport {
    /// Its checks.
    pub checks: Vec<PlanCheck>,
    /// When the job would start, where the scheduler can tell (`now`, a time).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
}

/// A scheduler's verdict on a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every check that could be made passed.
    Ok,
    /// A check is certain to fail.
    Fails,
    /// Nothing failed, but a check that matters could not be made.
    Unknown,
}

impl PlanReport {
    /// The verdict: `fails` if any check fails, else `unknown` if any could not be made, else
    /// `ok`.
    pub fn verdict(&self) -> Verdict {
        let any = |f: fn(&CheckOutcome) -> bool| self.checks.iter().any(|c| f(&c.outcome));
        if any(|o| matches!(o, CheckOutcome::Fails { .. })) {
            Verdict::Fails
        } else if any(|o| matches!(o, CheckOutcome::Unknown { .. })) {
            Verdict::Unknown
        } else {
            Verdict::Ok
        }
    }
}

impl Verdict {
    /// `ok`, `fails` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Fails => "fails",
            Verdict::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_check_decides() {
        let mut r = PlanReport::default();
        assert_eq!(r.verdict(), Verdict::Ok);
        r.checks.push(PlanCheck::ok("a", "fine"));
        assert_eq!(r.verdict(), Verdict::Ok);
        r.checks.push(PlanCheck::unknown("b", "no answer"));
        assert_eq!(r.verdict(), Verdict::Unknown);
        r.checks.push(PlanCheck::fails("c", "bad", "change it"));
        assert_eq!(r.verdict(), Verdict::Fails);
        let json = serde_json::to_value(&r.checks[2]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"check": "c", "detail": "bad", "outcome": "fails", "fix": "change it"})
        );
    }
}
