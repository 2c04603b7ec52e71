//! `kubernetes_mcad`: an app as TorchX's MCAD AppWrapper (`workload.codeflare.dev/v1beta1`):
//! one Pod per replica and a headless Service wrapped for the Multi-Cluster App Dispatcher.
//! App handles are `kubernetes_mcad://{session}/{namespace}:{name}`.
//!
//! - `opts`: run options; `render`: the pure AppWrapper; states live in
//!   `kubernetes::state`, the client in `kubernetes::client` (shared).

mod opts;
pub(crate) mod render;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures_util::FutureExt;
use serde_json::Value;

pub(crate) use opts::KubernetesMcadOpts;
pub(crate) use render::{render, AppWrapperJob};

use crate::error::{Error, Result};
use crate::scheduler::{
    ArrayRequest, ArrayTask, Backend, Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery,
    PlanReport, Replica, Scheduler, WorkspaceSupport,
};
use crate::schedulers::kubernetes::client::{Kube, APPWRAPPER, POD};
use crate::schedulers::kubernetes::names::{
    LABEL_APP_NAME, LABEL_ORGANIZATION, LABEL_REPLICA_ID, LABEL_ROLE_INDEX, LABEL_ROLE_NAME,
    LABEL_UNIQUE_NAME,
};
use crate::schedulers::kubernetes::{
    create_all, failed_exits, parse_time, plan_namespace, plan_nodes, replica_log, split_app_id,
    state, with_exits,
};
use crate::specs::{AppDef, AppState, DescribeAppResponse, ListAppResponse, ReplicaStatus};

/// The registry name.
pub(crate) const NAME: &str = "kubernetes_mcad";

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub(crate) fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(KubernetesMcadScheduler {
        kube: Kube::new(NAME),
    }))
}

/// The MCAD scheduler.
#[derive(Debug)]
pub(crate) struct KubernetesMcadScheduler {
    kube: Kube,
}

/// The wrapped pods' (role, role index, replica id), in order.
fn wrapped_pods(aw: &Value) -> Vec<(String, usize, u32, String)> {
    let items = aw["spec"]["resources"]["GenericItems"].as_array();
    items
        .into_iter()
        .flatten()
        .map(|i| &i["generictemplate"])
        .filter(|t| t["kind"] == "Pod")
        .map(|t| {
            let labels = &t["metadata"]["labels"];
            let num = |k: &str| labels[k].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
            (
                labels[LABEL_ROLE_NAME]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                num(LABEL_ROLE_INDEX) as usize,
                num(LABEL_REPLICA_ID),
                t["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

fn app_state(aw: &Value) -> Option<AppState> {
    aw["status"]["state"].as_str().map(state::appwrapper_state)
}

/// The state of the wrapped pod `name` among `pods` (None: MCAD has not made it, or it is gone).
fn pod_state(pods: &[Value], name: &str) -> Option<AppState> {
    pods.iter()
        .find(|p| p["metadata"]["name"] == name)
        .map(|p| state::pod_state(p["status"]["phase"].as_str().unwrap_or("")))
}

/// The state of a wrapped pod of `aw` that does not exist, now ([`state::missing_pod_state`]).
fn missing_pod_state(aw: &Value, wrapper: AppState, requeues_left: bool) -> AppState {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    state::missing_pod_state(
        wrapper,
        state::appwrapper_dispatched_at(aw),
        now,
        requeues_left,
    )
}

#[async_trait]
impl Backend for KubernetesMcadScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        log_streams: false,
        workspace: WorkspaceSupport::PushedImage,
        hang_watch: true,
        ..Capabilities::ALL
    };
    type Opts = KubernetesMcadOpts;
    type Request = AppWrapperJob;
    type Facts = ();

    fn render(
        &self,
        app: &AppDef,
        opts: &KubernetesMcadOpts,
        ctx: &DryRunContext,
        _facts: Option<&()>,
    ) -> Result<AppWrapperJob> {
        render(app, opts, ctx)
    }

    fn render_array(
        &self,
        _tasks: &[ArrayTask<'_>],
        _max_concurrent: Option<u32>,
        _opts: &KubernetesMcadOpts,
        _ctx: &DryRunContext,
        _facts: Option<&()>,
    ) -> Result<ArrayRequest<AppWrapperJob>> {
        Ok(ArrayRequest::PerTask(
            "MCAD queues and dispatches whole AppWrappers: each task is an AppWrapper of its own \
             (torchx submits them, at most max_concurrent unfinished at once)"
                .into(),
        ))
    }

    async fn plan(&self, job: &AppWrapperJob, info: &DryRunInfo) -> Result<PlanReport> {
        let mut report = plan_namespace(&self.kube, &job.namespace).await?;
        report.checks.push(plan_nodes(&self.kube, &info.app).await);
        Ok(report)
    }

    async fn submit(&self, job: &AppWrapperJob, _info: &DryRunInfo) -> Result<String> {
        create_all(
            &self.kube,
            &job.namespace,
            std::slice::from_ref(&job.resource),
        )
        .await?;
        Ok(format!("{}:{}", job.namespace, job.name))
    }

    /// The live AppWrapper.
    async fn describe_native(&self, app_id: &str) -> Result<Option<Value>> {
        let Ok((ns, name)) = split_app_id(NAME, app_id) else {
            return Ok(None);
        };
        self.kube.get(ns, APPWRAPPER, name).await
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let Ok((ns, name)) = split_app_id(NAME, app_id) else {
            return Ok(None);
        };
        let Some(aw) = self.kube.get(ns, APPWRAPPER, name).await? else {
            return Ok(None);
        };
        let wrapper_state = app_state(&aw).unwrap_or(AppState::Unknown);
        let mut resp = DescribeAppResponse::new(app_id, wrapper_state);
        resp.msg = aw["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        resp.num_restarts = aw["status"]["numberOfRequeueings"].as_i64().unwrap_or(0);
        // Per replica from its pod (MCAD's status only has counts, which TorchX spread over
        // replicas in order).
        let selector = format!("{LABEL_UNIQUE_NAME}={name}");
        let pods = self.kube.list(ns, POD, Some(&selector)).await?;
        let requeues_left = state::appwrapper_requeues_left(&aw);
        let missing = missing_pod_state(&aw, wrapper_state, requeues_left);
        let mut pod_states = Vec::new();
        let mut gone = Vec::new();
        for (role, _, k, pod_name) in wrapped_pods(&aw) {
            let st = pod_state(&pods, &pod_name).unwrap_or_else(|| {
                if missing == AppState::Failed {
                    gone.push(format!("pod {pod_name} of {role}/{k} is gone"));
                }
                missing
            });
            pod_states.push(st);
            let mut replica = ReplicaStatus::new(k, st, &role, &pod_name);
            replica.attempts = pods
                .iter()
                .find(|p| p["metadata"]["name"] == pod_name.as_str())
                .and_then(state::hung_attempt)
                .into_iter()
                .collect();
            resp.add_replica(replica);
        }
        resp.state = state::appwrapper_with_pods(wrapper_state, &pod_states, requeues_left);
        if resp.state == AppState::Failed {
            let mut exits = failed_exits(&pods);
            if !gone.is_empty() {
                exits.push(format!(
                    "{} (deleted, or never created: MCAD does not make it again)",
                    gone.join(", ")
                ));
            }
            resp.msg = with_exits(&resp.msg, &exits);
        }
        resp.roles_from_statuses();
        Ok(Some(resp))
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        let ns = self.kube.default_namespace().await?;
        let wrappers = self.kube.list(&ns, APPWRAPPER, None).await?;
        // One list of our pods for every AppWrapper that MCAD still calls running.
        let selector = format!("{LABEL_ORGANIZATION}=torchx.pytorch.org");
        let pods = if wrappers
            .iter()
            .any(|aw| app_state(aw) == Some(AppState::Running))
        {
            self.kube.list(&ns, POD, Some(&selector)).await?
        } else {
            Vec::new()
        };
        let mut out: Vec<ListAppResponse> = wrappers
            .into_iter()
            .map(|aw| {
                let name = aw["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let app_name = wrapped_app_name(&aw).unwrap_or_else(|| name.clone());
                let wrapper_state = app_state(&aw).unwrap_or(AppState::Pending);
                let requeues_left = state::appwrapper_requeues_left(&aw);
                let missing = missing_pod_state(&aw, wrapper_state, requeues_left);
                let pod_states: Vec<AppState> = wrapped_pods(&aw)
                    .iter()
                    .map(|(_, _, _, pod_name)| pod_state(&pods, pod_name).unwrap_or(missing))
                    .collect();
                ListAppResponse {
                    app_id: format!("{ns}:{name}"),
                    state: state::appwrapper_with_pods(wrapper_state, &pod_states, requeues_left),
                    app_handle: String::new(),
                    name: app_name,
                    start_time: aw["metadata"]["creationTimestamp"]
                        .as_str()
                        .and_then(parse_time),
                    end_time: None,
                    other_state_dir: false,
                }
            })
            .collect();
        crate::specs::sort_newest_first(&mut out);
        Ok(out)
    }

    /// As TorchX: the AppWrapper is deleted (MCAD removes what it wrapped).
    async fn cancel(&self, app_id: &str) -> Result<()> {
        Backend::delete(self, app_id).await
    }

    async fn delete(&self, app_id: &str) -> Result<()> {
        let (ns, name) = split_app_id(NAME, app_id)?;
        if self.kube.delete(ns, APPWRAPPER, name).await? {
            Ok(())
        } else {
            Err(Error::app_not_found(format!("{NAME}://{app_id}"), ""))
        }
    }

    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        let Replica { app_id, role, k } = replica;
        let (ns, name) = split_app_id(NAME, app_id)?;
        let aw = self
            .kube
            .get(ns, APPWRAPPER, name)
            .await?
            .ok_or_else(|| Error::app_not_found(format!("{NAME}://{app_id}"), ""))?;
        let pod = wrapped_pods(&aw)
            .into_iter()
            .find(|(r, _, i, _)| r == role && *i == k)
            .map(|(_, _, _, pod)| pod)
            .ok_or_else(|| {
                Error::not_found(
                    "replica",
                    format!("{role}/{k}"),
                    format!(" in app {app_id}"),
                )
            })?;
        let pod_of = || futures_util::future::ready(Ok(Some(pod.clone()))).boxed();
        replica_log(self, &self.kube, app_id, ns, (role, k), query, &pod_of).await
    }
}

fn wrapped_app_name(aw: &Value) -> Option<String> {
    aw["spec"]["resources"]["GenericItems"]
        .as_array()?
        .iter()
        .find_map(|i| i["generictemplate"]["metadata"]["labels"][LABEL_APP_NAME].as_str())
        .map(str::to_string)
}
