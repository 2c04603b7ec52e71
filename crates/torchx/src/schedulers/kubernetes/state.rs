//! Native states → [`AppState`]: Volcano job and task phases (TorchX's tables), native Job
//! conditions, pod phases, AppWrapper states. An unknown phase maps to UNKNOWN, never an error.

use serde_json::Value;

use crate::specs::{AppState, Attempt, EndReason};

/// A Volcano Job's `status.state.phase` (TorchX's JOB_STATE).
pub(crate) fn volcano_job_state(phase: &str) -> AppState {
    match phase {
        "Pending" => AppState::Pending,
        "Aborting" | "Running" | "Restarting" | "Terminating" | "Completing" => AppState::Running,
        "Aborted" => AppState::Cancelled,
        "Completed" => AppState::Succeeded,
        "Terminated" | "Failed" => AppState::Failed,
        _ => AppState::Unknown,
    }
}

/// A Volcano task's phase in `status.taskStatusCount` (TorchX's TASK_STATE).
pub(crate) fn volcano_task_state(phase: &str) -> AppState {
    match phase {
        "Pending" | "Allocated" | "Pipelined" | "Binding" | "Bound" => AppState::Pending,
        "Running" | "Releasing" => AppState::Running,
        "Succeeded" => AppState::Succeeded,
        "Failed" => AppState::Failed,
        _ => AppState::Unknown,
    }
}

/// A pod's `status.phase`.
pub(crate) fn pod_state(phase: &str) -> AppState {
    match phase {
        "Pending" => AppState::Pending,
        "Running" => AppState::Running,
        "Succeeded" => AppState::Succeeded,
        "Failed" => AppState::Failed,
        _ => AppState::Unknown,
    }
}

/// A `batch/v1` Job's state from its status: a `Complete`/`Failed` condition, else running
/// once a pod runs (`ready`: `active` counts pods still waiting for a node or their image) or
/// ended, else pending; suspended by `cancel` → CANCELLED. A server without `ready` (before
/// Kubernetes 1.24) is read by `active`.
pub(crate) fn native_job_state(job: &Value) -> AppState {
    let status = &job["status"];
    let condition = |t: &str| {
        status["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    };
    if condition("Complete") || condition("SuccessCriteriaMet") {
        AppState::Succeeded
    } else if condition("Failed") || condition("FailureTarget") {
        AppState::Failed
    } else if job["spec"]["suspend"] == true {
        AppState::Cancelled
    } else if status
        .get("ready")
        .unwrap_or(&status["active"])
        .as_i64()
        .unwrap_or(0)
        > 0
        || status["succeeded"].as_i64().unwrap_or(0) > 0
        || status["failed"].as_i64().unwrap_or(0) > 0
    {
        AppState::Running
    } else {
        AppState::Pending
    }
}

/// Why a `batch/v1` Job failed: its `Failed` condition's message, or, until the Job controller
/// has finished the pods and set it, its `FailureTarget`'s (which already makes it FAILED).
pub(crate) fn native_job_failure(job: &Value) -> Option<&str> {
    let conditions = job["status"]["conditions"].as_array()?;
    ["Failed", "FailureTarget"].into_iter().find_map(|t| {
        conditions
            .iter()
            .find(|c| c["type"] == t && c["status"] == "True")
            .and_then(|c| c["message"].as_str())
    })
}

/// The app's state from its role Jobs: any failed → FAILED, any cancelled → CANCELLED, all
/// succeeded → SUCCEEDED, any running → RUNNING, else PENDING (or UNKNOWN).
pub(crate) fn combine(states: &[AppState]) -> AppState {
    let any = |s: AppState| states.contains(&s);
    if states.is_empty() {
        AppState::Unknown
    } else if any(AppState::Failed) {
        AppState::Failed
    } else if any(AppState::Cancelled) {
        AppState::Cancelled
    } else if states.iter().all(|s| *s == AppState::Succeeded) {
        AppState::Succeeded
    } else if any(AppState::Running) || any(AppState::Succeeded) {
        AppState::Running
    } else if any(AppState::Unknown) {
        AppState::Unknown
    } else {
        AppState::Pending
    }
}

/// An AppWrapper's `status.state` (TorchX's table, plus the `Completed` state TorchX forgot).
pub(crate) fn appwrapper_state(state: &str) -> AppState {
    match state {
        "Pending" | "" => AppState::Pending,
        "Running" => AppState::Running,
        "Completed" => AppState::Succeeded,
        "Deleted" => AppState::Cancelled,
        "Failed" => AppState::Failed,
        _ => AppState::Unknown,
    }
}

/// An AppWrapper's state with its pods': MCAD v1 marks an AppWrapper `Completed` only through
/// a wrapped item's `completionstatus`, which pods cannot carry (they have no such condition),
/// so a dispatched AppWrapper of pods stays `Running` after every pod has ended. Once each of
/// its `pods` has ended, they decide (TorchX's table alone would report RUNNING forever) —
/// unless a pod failed and MCAD still has `requeues_left`: it will dispatch the pods again.
pub(crate) fn appwrapper_with_pods(
    wrapper: AppState,
    pods: &[AppState],
    requeues_left: bool,
) -> AppState {
    let ended = !pods.is_empty() && pods.iter().all(|s| s.is_terminal());
    let to_requeue = requeues_left && pods.contains(&AppState::Failed);
    if wrapper == AppState::Running && ended && !to_requeue {
        combine(pods)
    } else {
        wrapper
    }
}

/// How long after its dispatch an AppWrapper's pods must exist: MCAD creates them in the
/// dispatch itself and never again unless it requeues.
pub(crate) const WRAPPED_POD_GRACE_SECS: f64 = 60.0;

/// The state of a wrapped pod that does not exist (`now` and `dispatched_at` in Unix seconds):
/// what the AppWrapper says while it is pending or has ended, PENDING while MCAD may still make
/// it (or requeue the AppWrapper), and FAILED once a dispatch without requeues left is
/// [`WRAPPED_POD_GRACE_SECS`] old: the pod was deleted (or could not be created), and MCAD,
/// which never recreates it, would leave the AppWrapper RUNNING forever.
pub(crate) fn missing_pod_state(
    wrapper: AppState,
    dispatched_at: Option<f64>,
    now: f64,
    requeues_left: bool,
) -> AppState {
    let gone = dispatched_at.is_some_and(|t| now - t > WRAPPED_POD_GRACE_SECS);
    match wrapper {
        AppState::Running if gone && !requeues_left => AppState::Failed,
        s if s.is_terminal() => s,
        _ => AppState::Pending,
    }
}

/// When MCAD dispatched this AppWrapper (its `Dispatched` condition), in Unix seconds.
pub(crate) fn appwrapper_dispatched_at(aw: &Value) -> Option<f64> {
    aw["status"]["conditions"]
        .as_array()?
        .iter()
        .filter(|c| c["type"] == "Dispatched" && c["status"] == "True")
        .filter_map(|c| c["lastTransitionMicroTime"].as_str())
        .filter_map(super::parse_time)
        .reduce(f64::max)
}

/// Whether MCAD may still requeue this AppWrapper (`schedulingSpec.requeuing`).
pub(crate) fn appwrapper_requeues_left(aw: &Value) -> bool {
    let most = aw["spec"]["schedulingSpec"]["requeuing"]["maxNumRequeuings"]
        .as_i64()
        .unwrap_or(0);
    let done = aw["status"]["numberOfRequeueings"].as_i64().unwrap_or(0);
    done < most
}

/// The exit codes a Job's `podFailurePolicy` ignores (our requeue code): a pod that exits with
/// one was requeued.
pub(crate) fn ignored_exit_codes(job: &Value) -> Vec<i64> {
    job["spec"]["podFailurePolicy"]["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["action"] == "Ignore")
        .flat_map(|r| {
            r["onExitCodes"]["values"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|v| v.as_i64())
        .collect()
}

/// One pod of a replica as an attempt (`attempt` its place among the replica's pods): how it
/// ended, from the pod alone. A `DisruptionTarget` condition (eviction, preemption, a drain)
/// is a preemption, the kubelet's `OOMKilled` an `oom`, an exit code in `requeue_codes` a
/// requeue; a pod still pending or running has no reason yet.
pub(crate) fn pod_attempt(pod: &Value, attempt: u32, requeue_codes: &[i64]) -> Attempt {
    let status = &pod["status"];
    let term = &status["containerStatuses"][0]["state"]["terminated"];
    let exit_code = term["exitCode"].as_i64();
    let disrupted = status["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "DisruptionTarget" && c["status"] == "True")
    });
    let hung = term["message"]
        .as_str()
        .is_some_and(|m| m.starts_with(crate::schedulers::hang_watch::HUNG_MESSAGE));
    let reason = match pod_state(status["phase"].as_str().unwrap_or("")) {
        AppState::Succeeded => Some(EndReason::Succeeded),
        AppState::Failed if hung => Some(EndReason::Hung),
        AppState::Failed if disrupted || status["reason"] == "Evicted" => {
            Some(EndReason::Preempted)
        }
        AppState::Failed if term["reason"] == "OOMKilled" => Some(EndReason::Oom),
        AppState::Failed if exit_code.is_some_and(|c| requeue_codes.contains(&c)) => {
            Some(EndReason::Requeued)
        }
        AppState::Failed => Some(EndReason::Failed),
        _ => None,
    };
    let time = |v: &Value| v.as_str().and_then(super::parse_time);
    Attempt {
        attempt,
        started: time(&status["startTime"]),
        ended: time(&term["finishedAt"]),
        exit_code: exit_code.and_then(|c| i32::try_from(c).ok()),
        signal: None,
        reason,
    }
}

/// The attempt of an ended pod the hang watch stopped (its termination message says so), for
/// the ways whose status lists no attempts otherwise (Volcano, MCAD).
pub(crate) fn hung_attempt(pod: &Value) -> Option<Attempt> {
    Some(pod_attempt(pod, 0, &[])).filter(|a| a.reason == Some(EndReason::Hung))
}

/// Expands a Kubernetes index list such as `0-2,5` (Job `status.completedIndexes`).
pub(crate) fn parse_indexes(s: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    out.extend(a..=b.min(a.saturating_add(100_000)));
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

/// How a pod's first container ended, where it did: `exited with code N (REASON)`.
pub(super) fn container_exit(pod: &Value) -> Option<String> {
    let term = pod["status"]["containerStatuses"]
        .as_array()?
        .first()?
        .get("state")?
        .get("terminated")?;
    let code = term["exitCode"].as_i64()?;
    // The hang watch's termination message says more than the kubelet's reason.
    if let Some(hung) = term["message"]
        .as_str()
        .and_then(|m| m.strip_prefix(crate::schedulers::hang_watch::HUNG_MESSAGE))
    {
        return Some(format!(
            "exited with code {code} (hung: {}; its stacks: `torchx log --stacks`)",
            hung.trim_end()
        ));
    }
    Some(match term["reason"].as_str() {
        Some(reason) if !reason.is_empty() => format!("exited with code {code} ({reason})"),
        _ => format!("exited with code {code}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_volcano_phase_maps_and_unknown_is_unknown() {
        for (phase, want) in [
            ("Pending", AppState::Pending),
            ("Aborting", AppState::Running),
            ("Aborted", AppState::Cancelled),
            ("Running", AppState::Running),
            ("Restarting", AppState::Running),
            ("Completing", AppState::Running),
            ("Completed", AppState::Succeeded),
            ("Terminating", AppState::Running),
            ("Terminated", AppState::Failed),
            ("Failed", AppState::Failed),
            ("Martian", AppState::Unknown),
        ] {
            assert_eq!(volcano_job_state(phase), want, "{phase}");
        }
        for (phase, want) in [
            ("Pending", AppState::Pending),
            ("Allocated", AppState::Pending),
            ("Pipelined", AppState::Pending),
            ("Binding", AppState::Pending),
            ("Bound", AppState::Pending),
            ("Running", AppState::Running),
            ("Releasing", AppState::Running),
            ("Succeeded", AppState::Succeeded),
            ("Failed", AppState::Failed),
            ("Unknown", AppState::Unknown),
            ("", AppState::Unknown),
        ] {
            assert_eq!(volcano_task_state(phase), want, "{phase}");
        }
    }

    #[test]
    fn appwrapper_states_include_completed() {
        assert_eq!(appwrapper_state("Completed"), AppState::Succeeded);
        assert_eq!(appwrapper_state("Deleted"), AppState::Cancelled);
        assert_eq!(appwrapper_state("Failed"), AppState::Failed);
        assert_eq!(appwrapper_state("Running"), AppState::Running);
        assert_eq!(appwrapper_state("Pending"), AppState::Pending);
        assert_eq!(appwrapper_state("Whatever"), AppState::Unknown);
    }

    #[test]
    fn a_wrapped_pod_missing_a_minute_after_dispatch_failed() {
        use AppState::*;
        let at = Some(1000.0);
        for (wrapper, dispatched, now, requeues_left, want) in [
            (Pending, None, 2000.0, false, Pending),
            (Running, at, 1030.0, false, Pending),
            (Running, at, 1061.0, false, Failed),
            // MCAD requeues the AppWrapper itself once its pods are missing for its requeuing time.
            (Running, at, 1061.0, true, Pending),
            (Running, None, 5000.0, false, Pending),
            (Succeeded, at, 5000.0, false, Succeeded),
            (Cancelled, at, 5000.0, false, Cancelled),
        ] {
            assert_eq!(
                missing_pod_state(wrapper, dispatched, now, requeues_left),
                want,
                "{wrapper:?} {dispatched:?} {now} {requeues_left}"
            );
        }
        let aw = json!({"status": {"conditions": [
            {"type": "Init", "status": "True", "lastTransitionMicroTime": "2026-11-28T21:24:44.611477Z"},
            {"type": "Dispatched", "status": "True", "lastTransitionMicroTime": "2026-11-28T21:24:44.758028Z"},
        ]}});
        let at = appwrapper_dispatched_at(&aw).unwrap();
        assert!(
            (at - super::super::parse_time("2026-11-28T21:24:44.758028Z").unwrap()).abs() < 1e-6
        );
        assert_eq!(appwrapper_dispatched_at(&json!({"status": {}})), None);
    }

    #[test]
    fn an_appwrapper_whose_pods_all_ended_takes_their_state() {
        use AppState::*;
        for (wrapper, pods, want) in [
            (Running, vec![Succeeded, Succeeded], Succeeded),
            (Running, vec![Succeeded, Failed], Failed),
            (Running, vec![Succeeded, Running], Running),
            (Running, vec![Pending], Running),
            (Running, vec![], Running),
            // MCAD's own verdicts stand.
            (Pending, vec![Succeeded], Pending),
            (Failed, vec![Succeeded], Failed),
            (Succeeded, vec![Failed], Succeeded),
        ] {
            assert_eq!(
                appwrapper_with_pods(wrapper, &pods, false),
                want,
                "{wrapper:?} {pods:?}"
            );
        }
        // A failed pod that MCAD will requeue does not end the app; a success does.
        assert_eq!(appwrapper_with_pods(Running, &[Failed], true), Running);
        assert_eq!(appwrapper_with_pods(Running, &[Succeeded], true), Succeeded);
        let aw = |most: i64, done: i64| {
            json!({"spec": {"schedulingSpec": {"requeuing": {"maxNumRequeuings": most}}},
                   "status": {"numberOfRequeueings": done}})
        };
        assert!(appwrapper_requeues_left(&aw(2, 1)));
        assert!(!appwrapper_requeues_left(&aw(2, 2)));
        assert!(!appwrapper_requeues_left(&json!({"status": {}})));
    }

    #[test]
    fn a_pod_says_how_its_attempt_ended() {
        let pod = |phase: &str, code: i64, reason: &str, disrupted: bool| {
            json!({"status": {
                "phase": phase,
                "startTime": "2026-11-28T10:00:00Z",
                "conditions": if disrupted {
                    json!([{"type": "DisruptionTarget", "status": "True"}])
                } else {
                    json!([])
                },
                "containerStatuses": [{"state": {"terminated": {
                    "exitCode": code, "reason": reason, "finishedAt": "2026-11-28T10:00:05Z"}}}]}})
        };
        let reason = |p: &Value| pod_attempt(p, 0, &[75]).reason;
        assert_eq!(
            reason(&pod("Succeeded", 0, "Completed", false)),
            Some(EndReason::Succeeded)
        );
        assert_eq!(
            reason(&pod("Failed", 137, "OOMKilled", false)),
            Some(EndReason::Oom)
        );
        assert_eq!(
            reason(&pod("Failed", 143, "Error", true)),
            Some(EndReason::Preempted)
        );
        assert_eq!(
            reason(&pod("Failed", 75, "Error", false)),
            Some(EndReason::Requeued)
        );
        assert_eq!(
            reason(&pod("Failed", 3, "Error", false)),
            Some(EndReason::Failed)
        );
        assert_eq!(reason(&json!({"status": {"phase": "Running"}})), None);
        let a = pod_attempt(&pod("Failed", 3, "Error", false), 2, &[]);
        assert_eq!((a.attempt, a.exit_code), (2, Some(3)));
        assert_eq!(a.ended.zip(a.started).map(|(e, s)| e - s), Some(5.0));
        let job = json!({"spec": {"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Ignore", "onExitCodes": {"operator": "In", "values": [75]}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]}}});
        assert_eq!(ignored_exit_codes(&job), vec![75]);
    }

    #[test]
    fn a_failed_jobs_message_is_there_as_soon_as_it_reads_failed() {
        let job = |conds: Value| json!({"status": {"conditions": conds}});
        let target = json!({"type": "FailureTarget", "status": "True", "message": "backoff"});
        let failed = json!({"type": "Failed", "status": "True", "message": "final"});
        assert_eq!(native_job_failure(&job(json!([target]))), Some("backoff"));
        assert_eq!(native_job_state(&job(json!([target]))), AppState::Failed);
        assert_eq!(
            native_job_failure(&job(json!([target, failed]))),
            Some("final")
        );
        assert_eq!(native_job_failure(&job(json!([]))), None);
    }

    #[test]
    fn native_job_conditions() {
        let cond = |t: &str| json!({"status": {"conditions": [{"type": t, "status": "True"}]}});
        assert_eq!(native_job_state(&cond("Complete")), AppState::Succeeded);
        assert_eq!(native_job_state(&cond("Failed")), AppState::Failed);
        assert_eq!(
            native_job_state(&json!({"status": {"active": 2}})),
            AppState::Running
        );
        assert_eq!(native_job_state(&json!({"status": {}})), AppState::Pending);
        // What a real API server says of a Job whose pod waits for a node: active, not ready.
        assert_eq!(
            native_job_state(&json!({"status": {"active": 1, "ready": 0}})),
            AppState::Pending
        );
        assert_eq!(
            native_job_state(&json!({"status": {"active": 1, "ready": 1}})),
            AppState::Running
        );
        assert_eq!(
            native_job_state(&json!({"spec": {"suspend": true}, "status": {}})),
            AppState::Cancelled
        );
        assert_eq!(
            combine(&[AppState::Succeeded, AppState::Running]),
            AppState::Running
        );
        assert_eq!(
            combine(&[AppState::Succeeded, AppState::Failed]),
            AppState::Failed
        );
        assert_eq!(combine(&[AppState::Succeeded; 2]), AppState::Succeeded);
        assert_eq!(combine(&[AppState::Pending; 2]), AppState::Pending);
    }

    #[test]
    fn index_lists() {
        assert_eq!(parse_indexes("0-2,5"), vec![0, 1, 2, 5]);
        assert_eq!(parse_indexes(""), Vec::<u32>::new());
        assert_eq!(parse_indexes("x,3"), vec![3]);
    }

    /// A pod the hang watch stopped says so in its termination message: the attempt is `hung`
    /// and the exit says what the watch said.
    #[test]
    fn a_hung_pod_is_told_by_its_termination_message() {
        let pod = json!({"status": {"phase": "Failed", "containerStatuses": [{"state": {
            "terminated": {"exitCode": 143, "reason": "Error",
                "message": "torchx: hung: sh/0 made no progress (output or heartbeat) for 4s\n",
                "finishedAt": "2026-11-28T10:00:05Z"}}}]}});
        assert_eq!(pod_attempt(&pod, 0, &[143]).reason, Some(EndReason::Hung));
        assert_eq!(hung_attempt(&pod).map(|a| a.exit_code), Some(Some(143)));
        assert_eq!(
            container_exit(&pod).unwrap(),
            "exited with code 143 (hung: sh/0 made no progress (output or heartbeat) for 4s; \
             its stacks: `torchx log --stacks`)"
        );
        let plain = json!({"status": {"phase": "Failed", "containerStatuses": [{"state": {
            "terminated": {"exitCode": 3, "reason": "Error"}}}]}});
        assert_eq!(hung_attempt(&plain), None);
    }
}
