//! `kubernetes`: an app as native `batch/v1` Indexed Jobs (one per role) plus a headless
//! Service (`mode=job`, the default: any cluster, no CRD), or as TorchX's Volcano Job
//! (`mode=volcano`). App handles are `kubernetes://{session}/{namespace}:{name}`.
//!
//! - `opts`: run options; `render`: the pure manifests (and the pod template that
//!   `kubernetes_mcad` shares); `state`: state mapping; `client`: the kube-rs client, built
//!   on first use only.

pub(crate) mod client;
mod logs;
pub(crate) mod names;
mod opts;
pub(crate) mod pod;
pub(crate) mod render;
pub(crate) mod state;

use std::sync::Arc;

use async_trait::async_trait;
use futures_util::FutureExt;
use serde_json::{json, Value};

pub(crate) use logs::replica_log;
pub(crate) use opts::KubernetesOpts;
pub(crate) use render::{render, KubernetesJob};

use self::client::{Kind, Kube, JOB, POD, SERVICE, VOLCANO_COMMAND, VOLCANO_JOB};
use self::names::{
    normalize_str, LABEL_APP_NAME, LABEL_COMPLETION_INDEX, LABEL_ORGANIZATION, LABEL_REPLICA_ID,
    LABEL_ROLE_NAME, LABEL_UNIQUE_NAME,
};
use crate::error::{Error, Result};
use crate::scheduler::{
    ArrayRequest, ArrayTask, Backend, Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery,
    PlanCheck, PlanReport, Replica, Scheduler, WorkspaceSupport,
};
use crate::specs::{AppDef, AppState, DescribeAppResponse, ListAppResponse, ReplicaStatus};

/// The registry name.
pub(crate) const NAME: &str = "kubernetes";

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub(crate) fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(KubernetesScheduler {
        kube: Kube::new(NAME),
    }))
}

/// The Kubernetes scheduler.
#[derive(Debug)]
pub(crate) struct KubernetesScheduler {
    kube: Kube,
}

/// `namespace:name` → (namespace, name).
pub(crate) fn split_app_id<'a>(scheduler: &str, app_id: &'a str) -> Result<(&'a str, &'a str)> {
    app_id
        .split_once(':')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .ok_or_else(|| {
            Error::app_not_found(
                format!("{scheduler}://{app_id}"),
                " (Kubernetes app ids look like `namespace:name`)",
            )
        })
}

/// A name as its app's and, for an Indexed Job array's task, the task's completion index:
/// `<name>:<index>` (names hold no `:`).
fn split_task(name: &str) -> (&str, Option<u32>) {
    match name.rsplit_once(':').map(|(n, i)| (n, i.parse())) {
        Some((name, Ok(index))) => (name, Some(index)),
        _ => (name, None),
    }
}

/// Task `index` of an array's status: its replica, as the one replica of an app of its own.
fn task_of(app_id: &str, array: DescribeAppResponse, index: u32) -> Option<DescribeAppResponse> {
    let (role, replica) = array.roles_statuses.iter().find_map(|r| {
        let replica = r.replicas.iter().find(|x| x.id == index)?;
        Some((r.role.clone(), replica.clone()))
    })?;
    let mut resp = DescribeAppResponse::new(app_id, replica.state);
    resp.add_replica(ReplicaStatus::new(
        0,
        replica.state,
        &role,
        &replica.hostname,
    ));
    resp.roles_from_statuses();
    Some(resp)
}

/// One index of an Indexed Job cannot be stopped or removed on its own (the Job would run it
/// again): that is done to the group.
fn refuse_one_task(app_id: &str, name: &str, what: &str) -> Result<()> {
    match split_task(name).1 {
        Some(_) => Err(Error::unsupported(
            NAME,
            format!("{what} {app_id}, one task of an Indexed Job array: {what} its group"),
        )),
        None => Ok(()),
    }
}

fn unknown_app(app_id: &str) -> Error {
    Error::app_not_found(format!("{NAME}://{app_id}"), "")
}

/// Seconds since the epoch of an RFC 3339 UTC time such as `2026-11-21T10:00:00.5Z`.
pub(crate) fn parse_time(s: &str) -> Option<f64> {
    let (date, time) = s.trim().split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>());
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let time = time.strip_suffix('Z')?;
    let mut t = time.splitn(3, ':');
    let (hh, mm) = (
        t.next()?.parse::<i64>().ok()?,
        t.next()?.parse::<i64>().ok()?,
    );
    let ss: f64 = t.next()?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60) as f64 + ss)
}

fn created(obj: &Value) -> Option<f64> {
    obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(parse_time)
}

/// Objects in creation order.
fn by_creation(a: &&Value, b: &&Value) -> std::cmp::Ordering {
    created(a)
        .partial_cmp(&created(b))
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// The most recently created object (a replica's latest pod).
fn newest<'a>(objs: impl IntoIterator<Item = &'a Value>) -> Option<&'a Value> {
    objs.into_iter().max_by(by_creation)
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj["metadata"]["labels"][key].as_str()
}

/// `role/k exited with code N (REASON)` for each failed pod of ours that says how it ended,
/// in replica order.
pub(crate) fn failed_exits(pods: &[Value]) -> Vec<String> {
    let mut exits: Vec<(String, u32, String)> = pods
        .iter()
        .filter(|p| p["status"]["phase"] == "Failed")
        .filter_map(|p| {
            let role = label(p, LABEL_ROLE_NAME)?.to_string();
            let k = label(p, LABEL_REPLICA_ID)?.parse().ok()?;
            Some((role, k, state::container_exit(p)?))
        })
        .collect();
    exits.sort();
    exits.dedup();
    exits
        .into_iter()
        .map(|(role, k, exit)| format!("{role}/{k} {exit}"))
        .collect()
}

/// A scheduler's message with how the pods ended: `msg (exits)`, or the exits alone.
pub(crate) fn with_exits(msg: &str, exits: &[String]) -> String {
    match (msg.is_empty(), exits.is_empty()) {
        (_, true) => msg.to_string(),
        (true, false) => exits.join(", "),
        (false, false) => format!("{msg} ({})", exits.join(", ")),
    }
}

impl KubernetesScheduler {
    async fn native_jobs(&self, ns: &str, name: &str) -> Result<Vec<Value>> {
        let selector = format!("{LABEL_UNIQUE_NAME}={name}");
        self.kube.list(ns, JOB, Some(&selector)).await
    }

    async fn describe_indexed_jobs(
        &self,
        app_id: &str,
        ns: &str,
        name: &str,
        jobs: &[Value],
    ) -> Result<DescribeAppResponse> {
        let states: Vec<AppState> = jobs.iter().map(state::native_job_state).collect();
        let mut resp = DescribeAppResponse::new(app_id, state::combine(&states));
        let selector = format!("{LABEL_UNIQUE_NAME}={name}");
        let pods = self.kube.list(ns, POD, Some(&selector)).await?;
        for (job, job_state) in jobs.iter().zip(&states) {
            let role = label(job, LABEL_ROLE_NAME).unwrap_or_default();
            let status = &job["status"];
            let succeeded = state::parse_indexes(status["completedIndexes"].as_str().unwrap_or(""));
            let failed = state::parse_indexes(status["failedIndexes"].as_str().unwrap_or(""));
            let failed_pods = status["failed"].as_i64().unwrap_or(0);
            let mut ended_failed = 0;
            let mut exits: Vec<String> = Vec::new();
            let replicas = job["spec"]["completions"].as_u64().unwrap_or(0) as u32;
            let requeue_codes = state::ignored_exit_codes(job);
            for k in 0..replicas {
                // Each pod of the index is an attempt; the newest says where the replica is now.
                let index = k.to_string();
                let mut tries: Vec<&Value> = pods
                    .iter()
                    .filter(|p| {
                        label(p, LABEL_ROLE_NAME) == Some(role)
                            && label(p, LABEL_COMPLETION_INDEX) == Some(index.as_str())
                    })
                    .collect();
                tries.sort_by(by_creation);
                let pod = tries.last().copied();
                let replica_state = if succeeded.contains(&k) {
                    AppState::Succeeded
                } else if failed.contains(&k) {
                    AppState::Failed
                } else if let Some(p) = pod {
                    state::pod_state(p["status"]["phase"].as_str().unwrap_or(""))
                } else if job_state.is_terminal() {
                    *job_state
                } else {
                    AppState::Pending
                };
                if replica_state == AppState::Failed {
                    ended_failed += 1;
                    if let Some(exit) = pod.and_then(state::container_exit) {
                        exits.push(format!("{role}/{k} {exit}"));
                    }
                }
                let host = pod
                    .and_then(|p| p["metadata"]["name"].as_str())
                    .unwrap_or_default();
                let mut replica = ReplicaStatus::new(k, replica_state, role, host);
                replica.attempts = tries
                    .iter()
                    .enumerate()
                    .map(|(i, p)| state::pod_attempt(p, i as u32, &requeue_codes))
                    .collect();
                resp.add_replica(replica);
            }
            // A failed pod was restarted unless it is the last of a replica that failed.
            resp.num_restarts += if *job_state == AppState::Failed {
                (failed_pods - ended_failed).max(0)
            } else {
                failed_pods
            };
            if let Some(msg) = state::native_job_failure(job) {
                resp.msg = format!("{role}: {msg}");
                if !exits.is_empty() {
                    resp.msg.push_str(&format!(" ({})", exits.join(", ")));
                }
            }
        }
        // A failed role's replica restarts do not count twice when it is retried no more.
        resp.roles_from_statuses();
        Ok(resp)
    }

    fn describe_volcano(app_id: &str, job: &Value) -> DescribeAppResponse {
        let status = &job["status"];
        let app_state = match status["state"]["phase"].as_str() {
            Some(phase) => state::volcano_job_state(phase),
            None => AppState::Unknown,
        };
        let mut resp = DescribeAppResponse::new(app_id, app_state);
        resp.num_restarts = status["retryCount"].as_i64().unwrap_or(0);
        resp.msg = status["state"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // The tasks the Job asks for (one per replica, `{role}-{k}`), so that its replicas are
        // known before Volcano counts them; each task's state from its count, if any.
        let counted = status["taskStatusCount"].as_object();
        let mut tasks: Vec<&str> = job["spec"]["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        for task in counted.into_iter().flat_map(|c| c.keys()) {
            if !tasks.contains(&task.as_str()) {
                tasks.push(task);
            }
        }
        for task in tasks {
            let (role, idx) = task.rsplit_once('-').unwrap_or((task, "0"));
            let phase = counted
                .and_then(|c| c[task]["phase"].as_object())
                .and_then(|p| p.keys().next())
                .map(String::as_str);
            let replica_state = match phase {
                Some(phase) => state::volcano_task_state(phase),
                None if app_state.is_terminal() => app_state,
                None => AppState::Pending,
            };
            resp.add_replica(ReplicaStatus::new(
                idx.parse().unwrap_or(0),
                replica_state,
                role,
                "",
            ));
        }
        resp.roles_from_statuses();
        resp
    }

    /// The pod whose log is replica `k` of `role` (None: not created yet).
    async fn log_pod(&self, ns: &str, name: &str, role: &str, k: u32) -> Result<Option<String>> {
        if self.native_jobs(ns, name).await?.is_empty() {
            if self.kube.get(ns, VOLCANO_JOB, name).await?.is_none() {
                return Err(unknown_app(&format!("{ns}:{name}")));
            }
            return Ok(Some(normalize_str(&format!("{name}-{role}-{k}-0"))));
        }
        let selector = format!(
            "{LABEL_UNIQUE_NAME}={name},{LABEL_ROLE_NAME}={role},{LABEL_COMPLETION_INDEX}={k}"
        );
        let pods = self.kube.list(ns, POD, Some(&selector)).await?;
        Ok(newest(&pods)
            .and_then(|p| p["metadata"]["name"].as_str())
            .map(str::to_string))
    }
}

#[async_trait]
impl Backend for KubernetesScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        log_streams: false,
        workspace: WorkspaceSupport::PushedImage,
        hang_watch: true,
        ..Capabilities::ALL
    };
    type Opts = KubernetesOpts;
    type Request = KubernetesJob;
    type Facts = ();

    fn render(
        &self,
        app: &AppDef,
        opts: &KubernetesOpts,
        ctx: &DryRunContext,
        _facts: Option<&()>,
    ) -> Result<KubernetesJob> {
        render(app, opts, ctx)
    }

    fn render_array(
        &self,
        tasks: &[ArrayTask<'_>],
        max_concurrent: Option<u32>,
        opts: &KubernetesOpts,
        ctx: &DryRunContext,
        _facts: Option<&()>,
    ) -> Result<ArrayRequest<KubernetesJob>> {
        render::render_array(tasks, max_concurrent, opts, ctx)
    }

    /// An Indexed Job's tasks are `<namespace>:<name>:<completion index>`.
    fn array_task_ids(&self, array_id: &str, indexes: &[u32]) -> Vec<String> {
        (0..indexes.len())
            .map(|i| format!("{array_id}:{i}"))
            .collect()
    }

    async fn plan(&self, job: &KubernetesJob, info: &DryRunInfo) -> Result<PlanReport> {
        let mut report = plan_namespace(&self.kube, &job.namespace).await?;
        if let Some(queue) = volcano_queue(job) {
            report.checks.push(plan_queue(&self.kube, queue).await);
        }
        report.checks.push(plan_nodes(&self.kube, &info.app).await);
        Ok(report)
    }

    async fn submit(&self, job: &KubernetesJob, _info: &DryRunInfo) -> Result<String> {
        create_all(&self.kube, &job.namespace, &job.objects).await?;
        Ok(format!("{}:{}", job.namespace, job.name))
    }

    /// The live objects: the Volcano Job, or the Indexed Jobs and their Service.
    async fn describe_native(&self, app_id: &str) -> Result<Option<Value>> {
        let Ok((ns, name)) = split_app_id(NAME, app_id) else {
            return Ok(None);
        };
        let (name, _) = split_task(name);
        let jobs = self.native_jobs(ns, name).await?;
        let (mode, objects) = if jobs.is_empty() {
            match self.kube.get(ns, VOLCANO_JOB, name).await? {
                Some(job) => ("volcano", vec![job]),
                None => return Ok(None),
            }
        } else {
            let service = self.kube.get(ns, SERVICE, name).await?;
            ("job", jobs.into_iter().chain(service).collect())
        };
        Ok(Some(
            json!({"namespace": ns, "name": name, "mode": mode, "objects": objects}),
        ))
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let Ok((ns, name)) = split_app_id(NAME, app_id) else {
            return Ok(None);
        };
        let (name, task) = split_task(name);
        let jobs = self.native_jobs(ns, name).await?;
        if let (Some(task), false) = (task, jobs.is_empty()) {
            let array = self.describe_indexed_jobs(app_id, ns, name, &jobs).await?;
            return Ok(task_of(app_id, array, task));
        }
        if !jobs.is_empty() {
            return Ok(Some(
                self.describe_indexed_jobs(app_id, ns, name, &jobs).await?,
            ));
        }
        if task.is_some() {
            return Ok(None);
        }
        let Some(job) = self.kube.get(ns, VOLCANO_JOB, name).await? else {
            return Ok(None);
        };
        let mut resp = Self::describe_volcano(app_id, &job);
        if resp.state == AppState::Failed {
            // Volcano's status has counts only: how each failed pod ended is on the pod.
            let selector = format!("{LABEL_UNIQUE_NAME}={name}");
            let pods = self.kube.list(ns, POD, Some(&selector)).await?;
            resp.msg = with_exits(&resp.msg, &failed_exits(&pods));
            for pod in &pods {
                let Some(hung) = state::hung_attempt(pod) else {
                    continue;
                };
                let (role, k) = (label(pod, LABEL_ROLE_NAME), label(pod, LABEL_REPLICA_ID));
                if let Some(replica) = resp
                    .roles_statuses
                    .iter_mut()
                    .filter(|r| Some(r.role.as_str()) == role)
                    .flat_map(|r| r.replicas.iter_mut())
                    .find(|r| Some(r.id.to_string().as_str()) == k)
                {
                    replica.attempts = vec![hung];
                }
            }
        }
        Ok(Some(resp))
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        let ns = self.kube.default_namespace().await?;
        let selector = format!("{LABEL_ORGANIZATION}=torchx.pytorch.org");
        let mut apps: std::collections::BTreeMap<String, (String, Vec<AppState>, Option<f64>)> =
            Default::default();
        for job in self.kube.list(&ns, JOB, Some(&selector)).await? {
            let Some(id) = label(&job, LABEL_UNIQUE_NAME) else {
                continue;
            };
            let e = apps.entry(id.to_string()).or_default();
            e.0 = label(&job, LABEL_APP_NAME).unwrap_or(id).to_string();
            e.1.push(state::native_job_state(&job));
            e.2 = created(&job).or(e.2);
        }
        let mut out: Vec<ListAppResponse> = apps
            .into_iter()
            .map(|(id, (name, states, start))| ListAppResponse {
                app_id: format!("{ns}:{id}"),
                state: state::combine(&states),
                app_handle: String::new(),
                name,
                start_time: start,
                end_time: None,
                other_state_dir: false,
            })
            .collect();
        // Volcano Jobs too, where Volcano is installed.
        if let Ok(jobs) = self.kube.list(&ns, VOLCANO_JOB, None).await {
            for job in jobs {
                let name = job["metadata"]["name"].as_str().unwrap_or_default();
                out.push(ListAppResponse {
                    app_id: format!("{ns}:{name}"),
                    state: job["status"]["state"]["phase"]
                        .as_str()
                        .map_or(AppState::Pending, state::volcano_job_state),
                    app_handle: String::new(),
                    // TorchX labels a Volcano Job's pods, not the Job.
                    name: job["spec"]["tasks"][0]["template"]["metadata"]["labels"][LABEL_APP_NAME]
                        .as_str()
                        .or(label(&job, LABEL_APP_NAME))
                        .unwrap_or(name)
                        .to_string(),
                    start_time: created(&job),
                    end_time: None,
                    other_state_dir: false,
                });
            }
        }
        crate::specs::sort_newest_first(&mut out);
        Ok(out)
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        let (ns, name) = split_app_id(NAME, app_id)?;
        refuse_one_task(app_id, name, "cancelling")?;
        let jobs = self.native_jobs(ns, name).await?;
        if !jobs.is_empty() {
            // Suspending stops the pods and keeps the Jobs, so the app reads CANCELLED.
            for job in &jobs {
                if state::native_job_state(job).is_terminal() {
                    continue;
                }
                let job_name = job["metadata"]["name"].as_str().unwrap_or_default();
                self.kube
                    .merge_patch(ns, JOB, job_name, &json!({"spec": {"suspend": true}}))
                    .await?;
            }
            return Ok(());
        }
        let job = self
            .kube
            .get(ns, VOLCANO_JOB, name)
            .await?
            .ok_or_else(|| unknown_app(app_id))?;
        if state::volcano_job_state(job["status"]["state"]["phase"].as_str().unwrap_or(""))
            .is_terminal()
        {
            return Ok(());
        }
        // What `vcctl job suspend` does: an AbortJob command owned by the job.
        let owner = json!({
            "apiVersion": VOLCANO_JOB.api_version(), "kind": "Job", "name": name,
            "uid": job["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true,
        });
        let command = json!({
            "apiVersion": VOLCANO_COMMAND.api_version(),
            "kind": VOLCANO_COMMAND.kind,
            "metadata": {"name": format!("{name}-abortjob"), "ownerReferences": [owner]},
            "action": "AbortJob",
            "target": owner,
        });
        self.kube.create(ns, &command).await.map(|_| ())
    }

    async fn delete(&self, app_id: &str) -> Result<()> {
        let (ns, name) = split_app_id(NAME, app_id)?;
        refuse_one_task(app_id, name, "deleting")?;
        let jobs = self.native_jobs(ns, name).await?;
        if jobs.is_empty() {
            return if self.kube.delete(ns, VOLCANO_JOB, name).await? {
                Ok(())
            } else {
                Err(unknown_app(app_id))
            };
        }
        for job in &jobs {
            let job_name = job["metadata"]["name"].as_str().unwrap_or_default();
            self.kube.delete(ns, JOB, job_name).await?;
        }
        self.kube.delete(ns, SERVICE, name).await?;
        Ok(())
    }

    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        let Replica { app_id, role, k } = replica;
        let (ns, name) = split_app_id(NAME, app_id)?;
        // An array's task is one index of its Indexed Job (its only replica is 0).
        let (name, k) = match split_task(name) {
            (name, Some(task)) if k == 0 => (name, task),
            (_, Some(_)) => {
                return Err(Error::not_found(
                    "replica",
                    format!("{role}/{k}"),
                    format!(" in app {app_id} (an array's task has replica 0 only)"),
                ))
            }
            (name, None) => (name, k),
        };
        // (log_pod's first answer already fails an unknown app, before any wait.)
        let pod_of = || self.log_pod(ns, name, role, k).boxed();
        replica_log(self, &self.kube, app_id, ns, (role, k), query, &pod_of).await
    }
}

/// Creates the objects in order; if one fails, deletes those already created (nothing is left
/// half-submitted) and returns the error.
pub(crate) async fn create_all(kube: &Kube, ns: &str, objects: &[Value]) -> Result<()> {
    let mut created: Vec<(Kind, String)> = Vec::new();
    for obj in objects {
        match kube.create(ns, obj).await {
            Ok(_) => {
                if let Some(kind) = Kind::of(obj) {
                    let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                    created.push((kind, name.to_string()));
                }
            }
            Err(e) => {
                for (kind, name) in created.iter().rev() {
                    let _ = kube.delete(ns, *kind, name).await;
                }
                return Err(e);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

/// A number with at most three decimals, without trailing zeros (`3.8`, `4`).
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Each role's replica fits on some node (its allocatable CPUs, memory and GPUs): a pod no node
/// can hold stays pending forever.
/// The Volcano queue a Volcano Job request names.
fn volcano_queue(job: &KubernetesJob) -> Option<&str> {
    job.objects
        .iter()
        .find(|o| Kind::of(o) == Some(VOLCANO_JOB))
        .and_then(|o| o["spec"]["queue"].as_str())
}

/// Whether Volcano has `queue` (its admission webhook refuses a job for a missing one).
async fn plan_queue(kube: &Kube, queue: &str) -> PlanCheck {
    let check = format!("queue {queue}");
    match kube.volcano_queues().await {
        Ok(Some(queues)) if queues.iter().any(|q| q == queue) => PlanCheck::ok(check, "exists"),
        Ok(Some(queues)) => PlanCheck::fails(
            check,
            "Volcano has no such queue",
            format!(
                "give one of its queues (run option `queue=...`): {}",
                if queues.is_empty() {
                    "it has none".to_string()
                } else {
                    queues.join(", ")
                }
            ),
        ),
        Ok(None) => PlanCheck::fails(
            check,
            "the cluster serves no Volcano queues (is Volcano installed?)",
            "install Volcano, or submit native Indexed Jobs with run option `mode=job`",
        ),
        Err(e) => PlanCheck::unknown(check, e.to_string()),
    }
}

pub(crate) async fn plan_nodes(kube: &Kube, app: &AppDef) -> PlanCheck {
    let nodes = match kube.node_allocatables().await {
        Ok(n) if n.is_empty() => return PlanCheck::unknown("nodes", "the cluster lists no node"),
        Ok(n) => n,
        Err(e) => return PlanCheck::unknown("nodes", e.to_string()),
    };
    for role in &app.roles {
        let r = &role.resource;
        let (cpu, mem, gpu) = (r.cpu as f64, r.mem_mb as f64, r.gpu as f64);
        let fits = nodes
            .iter()
            .any(|(_, c, m, g)| *c >= cpu && *m >= mem && *g >= gpu);
        if !fits {
            let largest = nodes
                .iter()
                .map(|(n, c, m, g)| format!("{n}: {} CPU, {m:.0} MiB, {g} GPU", trim(*c)))
                .collect::<Vec<_>>()
                .join("; ");
            return PlanCheck::fails(
                "nodes",
                format!(
                    "role `{}` asks {cpu} CPU, {mem} MiB, {gpu} GPU per replica; no node has \
                     that much allocatable ({largest})",
                    role.name
                ),
                "ask for less per replica, or run where bigger nodes are",
            );
        }
    }
    PlanCheck::ok(
        "nodes",
        format!("each replica fits on one of {} nodes", nodes.len()),
    )
}

/// `namespace` exists (a job created in one that does not is refused by the API server).
pub(crate) async fn plan_namespace(kube: &Kube, namespace: &str) -> Result<PlanReport> {
    let check = format!("namespace {namespace}");
    let mut report = PlanReport::default();
    report
        .checks
        .push(match kube.namespace_exists(namespace).await {
            Ok(true) => PlanCheck::ok(check, "exists"),
            Ok(false) => PlanCheck::fails(
                check,
                "the cluster has no such namespace",
                "give an existing namespace (run option `namespace=...`; `kubectl get namespaces`)",
            ),
            Err(e) => PlanCheck::unknown(check, e.to_string()),
        });
    Ok(report)
}
