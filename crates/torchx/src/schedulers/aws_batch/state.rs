//! Batch job states → [`AppState`] (TorchX's table, plus CANCELLED for jobs `torchx cancel`
//! terminated, recognised by their status reason).

use crate::specs::AppState;

/// The status reason `cancel` terminates jobs with (TorchX's).
pub const CANCEL_REASON: &str = "killed via torchx CLI";

/// A job's state from its status and status reason.
pub fn job_state(status: &str, reason: Option<&str>) -> AppState {
    match status {
        "SUBMITTED" | "PENDING" | "RUNNABLE" | "STARTING" => AppState::Pending,
        "RUNNING" => AppState::Running,
        "SUCCEEDED" => AppState::Succeeded,
        "FAILED" if reason.is_some_and(|r| r.contains(CANCEL_REASON)) => AppState::Cancelled,
        "FAILED" => AppState::Failed,
        _ => AppState::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            job_state("FAILED", Some("Essential container exited")),
            AppState::Failed
        );
    }
}
