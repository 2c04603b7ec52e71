//! `bjobs` output → states (TorchX's table: EXIT with code 130 is CANCELLED).

use crate::specs::AppState;

/// One `bjobs -noheader -a -o "proj name stat exit_code"` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JobLine {
    /// The LSF project (our app id).
    pub proj: String,
    /// The job name (`{app_id}-{role}-{i}`).
    pub name: String,
    /// PEND, RUN, DONE, EXIT, ...
    pub stat: String,
    /// The exit code (`-` when none).
    pub exit_code: Option<i32>,
}

/// Parses `bjobs` lines of `proj name stat exit_code` (any spacing; short lines skipped).
pub(super) fn parse_bjobs(out: &str) -> Vec<JobLine> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let [proj, name, stat, rest @ ..] = f.as_slice() else {
                return None;
            };
            // Status words are upper case (PEND, RUN, DONE, ...); anything else is a message.
            if !stat.chars().all(|c| c.is_ascii_uppercase()) {
                return None;
            }
            Some(JobLine {
                proj: proj.to_string(),
                name: name.to_string(),
                stat: stat.to_string(),
                exit_code: rest.first().and_then(|c| c.parse().ok()),
            })
        })
        .collect()
}

/// A job's state.
pub(super) fn job_state(stat: &str, exit_code: Option<i32>) -> AppState {
    match stat {
        "DONE" => AppState::Succeeded,
        "EXIT" if exit_code == Some(130) => AppState::Cancelled,
        "EXIT" => AppState::Failed,
        "PEND" | "PSUSP" | "USUSP" | "SSUSP" => AppState::Pending,
        "RUN" => AppState::Running,
        _ => AppState::Unknown,
    }
}

/// The app's state from its jobs (TorchX: the last failed/cancelled/pending/unknown one seen,
/// SUCCEEDED when all succeeded, else RUNNING).
pub(super) fn app_state(states: &[AppState]) -> AppState {
    if !states.is_empty() && states.iter().all(|s| *s == AppState::Succeeded) {
        return AppState::Succeeded;
    }
    states
        .iter()
        .rev()
        .find(|s| {
            matches!(
                s,
                AppState::Failed | AppState::Cancelled | AppState::Pending | AppState::Unknown
            )
        })
        .copied()
        .unwrap_or(AppState::Running)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_odd_spacing_and_empty_output() {
        let out =
            "app-1  app-1-trainer-0   RUN   -\napp-1\tapp-1-trainer-1 EXIT 130\n\n  \nshort line\n";
        let jobs = parse_bjobs(out);
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].exit_code, None);
        assert_eq!(jobs[1].name, "app-1-trainer-1");
        assert_eq!(jobs[1].exit_code, Some(130));
        assert!(parse_bjobs("").is_empty());
        assert!(parse_bjobs("No matching job found\n").is_empty());
    }

    #[test]
    fn states() {
        assert_eq!(job_state("DONE", Some(0)), AppState::Succeeded);
        assert_eq!(job_state("EXIT", Some(1)), AppState::Failed);
        assert_eq!(job_state("EXIT", Some(130)), AppState::Cancelled);
        for s in ["PEND", "PSUSP", "USUSP", "SSUSP"] {
            assert_eq!(job_state(s, None), AppState::Pending);
        }
        assert_eq!(job_state("RUN", None), AppState::Running);
        assert_eq!(job_state("ZOMBI", None), AppState::Unknown);
        assert_eq!(app_state(&[AppState::Succeeded; 2]), AppState::Succeeded);
        assert_eq!(
            app_state(&[AppState::Running, AppState::Succeeded]),
            AppState::Running
        );
        assert_eq!(
            app_state(&[AppState::Failed, AppState::Running]),
            AppState::Failed
        );
        assert_eq!(
            app_state(&[AppState::Running, AppState::Pending]),
            AppState::Pending
        );
    }
}
