//! Container states → [`AppState`] (TorchX's mapping), and an app's state from its containers.

use crate::specs::AppState;

/// A container's state: `exited` is SUCCEEDED with exit code 0, else FAILED.
pub fn container_state(status: &str, exit_code: Option<i64>) -> AppState {
    match status {
        "exited" => {
            if exit_code == Some(0) {
                AppState::Succeeded
            } else {
                AppState::Failed
            }
        }
        "created" => AppState::Submitted,
        "restarting" | "paused" | "removing" => AppState::Pending,
        "running" => AppState::Running,
        "dead" => AppState::Failed,
        _ => AppState::Unknown,
    }
}

/// The app's state: when every container is terminal, SUCCEEDED iff all succeeded (else
/// FAILED); otherwise the first non-terminal state.
pub fn app_state(states: impl IntoIterator<Item = AppState>) -> AppState {
    let states: Vec<AppState> = states.into_iter().collect();
    match states.iter().find(|s| !s.is_terminal()) {
        Some(s) => *s,
        None if states.iter().all(|s| *s == AppState::Succeeded) => AppState::Succeeded,
        None => AppState::Failed,
    }
}

/// The engine's `FinishedAt` (RFC 3339) as seconds since the epoch; `None` for the zero time it
/// gives a container that has not exited.
pub(super) fn finished_at(text: &str) -> Option<f64> {
    let ts: jiff::Timestamp = text.parse().ok()?;
    let secs = ts.as_second() as f64 + f64::from(ts.subsec_nanosecond()) / 1e9;
    (secs > 0.0).then_some(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torchx_mapping() {
        assert_eq!(container_state("exited", Some(0)), AppState::Succeeded);
        assert_eq!(container_state("exited", Some(3)), AppState::Failed);
        assert_eq!(container_state("created", None), AppState::Submitted);
        assert_eq!(container_state("restarting", None), AppState::Pending);
        assert_eq!(container_state("running", None), AppState::Running);
        assert_eq!(container_state("dead", None), AppState::Failed);
        assert_eq!(
            app_state([AppState::Succeeded, AppState::Running]),
            AppState::Running
        );
        assert_eq!(
            app_state([AppState::Succeeded, AppState::Failed]),
            AppState::Failed
        );
        assert_eq!(app_state([AppState::Succeeded; 2]), AppState::Succeeded);
    }
}
