//! Batch job states → [`AppState`] (TorchX's table, plus CANCELLED for jobs `torchx cancel`
//! terminated, recognised by their status reason).

use crate::specs::{AppState, EndReason};

/// The status reason `cancel` terminates jobs with (TorchX's).
pub(crate) const CANCEL_REASON: &str = "killed via torchx CLI";

/// Batch's status reason for a job whose `dependsOn` job failed.
const DEPENDENCY_FAILED: &str = "Dependent Job failed";

/// A job's state from its status and status reason.
pub(crate) fn job_state(status: &str, reason: Option<&str>) -> AppState {
    match status {
        "SUBMITTED" | "PENDING" | "RUNNABLE" | "STARTING" => AppState::Pending,
        "RUNNING" => AppState::Running,
        "SUCCEEDED" => AppState::Succeeded,
        "FAILED" if reason.is_some_and(|r| r.contains(CANCEL_REASON)) => AppState::Cancelled,
        // `dependsOn`: a job whose dependency failed never ran (as a job `--after` one
        // elsewhere, it is CANCELLED).
        "FAILED" if reason.is_some_and(|r| r.starts_with(DEPENDENCY_FAILED)) => AppState::Cancelled,
        "FAILED" => AppState::Failed,
        _ => AppState::Unknown,
    }
}

/// Why an attempt of a job under the recovery contract ended, from its exit code and status
/// reason: Batch's own timeout and a lost host are told by their reasons, a requeue by its code.
pub(crate) fn attempt_end(
    exit_code: Option<i32>,
    reason: Option<&str>,
    requeue_code: i32,
    watched: bool,
) -> EndReason {
    let reason = reason.unwrap_or_default();
    match exit_code {
        Some(crate::schedulers::hang_watch::HUNG_EXIT_CODE) if watched => EndReason::Hung,
        _ if reason.contains(CANCEL_REASON) => EndReason::Cancelled,
        _ if reason.starts_with("Host EC2") => EndReason::Preempted,
        _ if reason.contains("attempt duration exceeded timeout") => EndReason::Timeout,
        Some(0) => EndReason::Succeeded,
        Some(code) if code == requeue_code => EndReason::Requeued,
        _ => EndReason::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_ends() {
        for (code, reason, want) in [
            (Some(0), None, EndReason::Succeeded),
            (Some(75), None, EndReason::Requeued),
            (
                Some(3),
                Some("Essential container in task exited"),
                EndReason::Failed,
            ),
            (
                None,
                Some("Host EC2 (instance i-0abc) terminated."),
                EndReason::Preempted,
            ),
            (
                None,
                Some("Job attempt duration exceeded timeout"),
                EndReason::Timeout,
            ),
            (Some(137), Some(CANCEL_REASON), EndReason::Cancelled),
            (None, None, EndReason::Failed),
        ] {
            assert_eq!(
                attempt_end(code, reason, 75, false),
                want,
                "{code:?} {reason:?}"
            );
        }
        // Under the hang watch, its exit code is a hang; without, any other failure.
        for (watched, want) in [(true, EndReason::Hung), (false, EndReason::Failed)] {
            assert_eq!(attempt_end(Some(124), None, 75, watched), want);
        }
    }

    #[test]
    fn every_status_maps() {
        for (s, want) in [
            ("SUBMITTED", AppState::Pending),
            ("PENDING", AppState::Pending),
            ("RUNNABLE", AppState::Pending),
            ("STARTING", AppState::Pending),
            ("RUNNING", AppState::Running),
            ("SUCCEEDED", AppState::Succeeded),
            ("FAILED", AppState::Failed),
            ("WHATEVER", AppState::Unknown),
        ] {
            assert_eq!(job_state(s, None), want, "{s}");
        }
        assert_eq!(
            job_state("FAILED", Some(CANCEL_REASON)),
            AppState::Cancelled
        );
        assert_eq!(
            job_state("FAILED", Some("Dependent Job failed")),
            AppState::Cancelled
        );
        assert_eq!(
            job_state("FAILED", Some("Essential container exited")),
            AppState::Failed
        );
    }
}
