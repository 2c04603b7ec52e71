//! `aws_batch`: an app as one AWS Batch multi-node parallel job (a node group per role), through
//! the official AWS SDK (aws-config's credential chain, region, retries; `AWS_ENDPOINT_URL`
//! honoured). App handles are `aws_batch://{session}/{queue}:{job name}`.
//!
//! - `opts`: run options; `render`: the pure job definition; `state`: state mapping; `plan`:
//!   the queue and its capacity before submitting; `log_streams`: where a node's
//!   CloudWatch lines are; this module: the SDK calls. Clients are built on first use only.

mod client;
mod log_streams;
mod opts;
mod plan;
pub(crate) mod render;
mod request;
pub(crate) mod state;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_batch::types as bt;
use aws_sdk_cloudwatchlogs::error::{ProvideErrorMetadata, SdkError};
use tokio::sync::OnceCell;

pub(crate) use opts::AwsBatchOpts;
pub(crate) use render::render;
pub(crate) use request::BatchJob;

use self::client::container_properties;
use self::log_streams::NodeStreams;
use self::render::{ENV_ROLE_NAME, TAG_HANG_TIMEOUT, TAG_REQUEUE_EXIT_CODE};
use self::state::{attempt_end, job_state, CANCEL_REASON};
use crate::error::{Error, Result};
use crate::scheduler::{
    ArrayRequest, ArrayTask, Backend, Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery,
    PlanReport, Replica, Scheduler, WorkspaceSupport,
};
use crate::schedulers::aws::cloudwatch::CloudWatchLines;
use crate::schedulers::aws::{SubmittingUser, TAG_APP_NAME, TAG_VERSION};
use crate::specs::{
    AppDef, AppState, Attempt, DescribeAppResponse, ListAppResponse, ReplicaStatus, Stream,
};

/// The registry name.
pub(crate) const NAME: &str = "aws_batch";
/// The CloudWatch log group of Batch jobs.
pub(crate) const LOG_GROUP: &str = "/aws/batch/job";

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub(crate) fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(AwsBatchScheduler::default()))
}

/// The AWS Batch scheduler.
#[derive(Default)]
pub(crate) struct AwsBatchScheduler {
    clients: OnceCell<(
        aws_sdk_batch::Client,
        aws_sdk_cloudwatchlogs::Client,
        String,
    )>,
}

impl std::fmt::Debug for AwsBatchScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsBatchScheduler")
            .field("connected", &self.clients.initialized())
            .finish()
    }
}

/// An AWS SDK error of this scheduler ([`sdk_err`](crate::schedulers::aws::sdk_err)).
fn aws_err<E, R>(what: &str) -> impl FnOnce(SdkError<E, R>) -> Error + '_
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    crate::schedulers::aws::sdk_err(NAME, what)
}

fn split_app_id(app_id: &str) -> Option<(&str, &str)> {
    app_id
        .split_once(':')
        .filter(|(q, n)| !q.is_empty() && !n.is_empty())
}

/// An app id as its job's and, for an array job's child, the child's position:
/// `<queue>:<name>:<position>` (Batch names hold no `:`).
fn split_child(app_id: &str) -> (&str, Option<u32>) {
    match app_id.rsplit_once(':') {
        Some((parent, pos)) if parent.contains(':') => match pos.parse() {
            Ok(pos) => (parent, Some(pos)),
            Err(_) => (app_id, None),
        },
        _ => (app_id, None),
    }
}

fn unknown_app(app_id: &str) -> Error {
    Error::app_not_found(
        format!("{NAME}://{app_id}"),
        " (AWS Batch app ids look like `queue:job-name`)",
    )
}

/// `start:end` (end may be empty: the last node) → (start, end).
fn node_range(target: &str, num_nodes: i32) -> (i32, i32) {
    let (a, b) = target.split_once(':').unwrap_or((target, target));
    let start = a.parse().unwrap_or(0);
    let end = b.parse().unwrap_or(num_nodes - 1);
    (start, end)
}

/// A job's node groups: (role name, first node, last node); a single-container job (an
/// array's child) is one node of its role.
fn node_groups(job: &bt::JobDetail) -> Vec<(String, i32, i32)> {
    let Some(np) = job.node_properties() else {
        let role = job
            .container()
            .map(|c| c.environment())
            .unwrap_or_default()
            .iter()
            .find(|kv| kv.name() == Some(ENV_ROLE_NAME))
            .and_then(|kv| kv.value());
        return match (role, job.array_properties()) {
            // An array's parent runs nothing itself: its children are the tasks.
            (Some(role), None) => vec![(role.to_string(), 0, 0)],
            _ => Vec::new(),
        };
    };
    let num = np.num_nodes().unwrap_or(0);
    np.node_range_properties()
        .iter()
        .map(|g| {
            let role = g
                .container()
                .map(|c| c.environment())
                .unwrap_or_default()
                .iter()
                .find(|kv| kv.name() == Some(ENV_ROLE_NAME))
                .and_then(|kv| kv.value())
                .unwrap_or("node")
                .to_string();
            let (s, e) = node_range(g.target_nodes().unwrap_or("0:"), num);
            (role, s, e)
        })
        .collect()
}

/// Set by `delete`: the job is gone as far as torchx is concerned.
const TAG_DELETED: &str = "torchx.pytorch.org/deleted";

fn is_deleted(job: &bt::JobDetail) -> bool {
    job.tags().is_some_and(|t| t.contains_key(TAG_DELETED))
}

/// The job's attempts, for a job submitted under the recovery contract (its tag names the
/// requeue exit code); Batch restarts the whole job, so every replica shares them.
fn attempts_of(job: &bt::JobDetail) -> Vec<Attempt> {
    let tag = |key: &str| job.tags().and_then(|t| t.get(key));
    let watched = tag(TAG_HANG_TIMEOUT).is_some();
    let requeue_code = match tag(TAG_REQUEUE_EXIT_CODE).and_then(|c| c.parse().ok()) {
        Some(code) => code,
        // A watched job without recovery: its attempts still say which hung.
        None if watched => i32::MIN,
        None => return Vec::new(),
    };
    let secs = |ms: Option<i64>| ms.map(|ms| ms as f64 / 1000.0);
    job.attempts()
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let exit_code = a.container().and_then(|c| c.exit_code());
            let ended = secs(a.stopped_at());
            Attempt {
                attempt: i as u32,
                started: secs(a.started_at()),
                ended,
                exit_code,
                signal: None,
                reason: ended
                    .map(|_| attempt_end(exit_code, a.status_reason(), requeue_code, watched)),
            }
        })
        .collect()
}

fn status_of(job: &bt::JobDetail) -> AppState {
    job_state(
        job.status().map(|s| s.as_str()).unwrap_or(""),
        job.status_reason(),
    )
}

/// `opts` with the user the job is tagged with.
fn with_user(opts: &AwsBatchOpts, facts: Option<&SubmittingUser>) -> AwsBatchOpts {
    AwsBatchOpts {
        user: crate::schedulers::aws::tagged_user(&opts.user, facts),
        ..opts.clone()
    }
}

#[async_trait]
impl Backend for AwsBatchScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        log_streams: false,
        workspace: WorkspaceSupport::PushedImage,
        dependencies: true,
        hang_watch: true,
        ..Capabilities::ALL
    };
    type Opts = AwsBatchOpts;
    type Request = BatchJob;
    type Facts = SubmittingUser;

    async fn dryrun_facts(&self, _opts: &Self::Opts) -> Result<Option<SubmittingUser>> {
        Ok(Some(crate::schedulers::aws::user_facts()))
    }

    fn render(
        &self,
        app: &AppDef,
        opts: &AwsBatchOpts,
        ctx: &DryRunContext,
        facts: Option<&SubmittingUser>,
    ) -> Result<BatchJob> {
        render(app, &with_user(opts, facts), ctx)
    }

    fn render_array(
        &self,
        tasks: &[ArrayTask<'_>],
        max_concurrent: Option<u32>,
        opts: &AwsBatchOpts,
        ctx: &DryRunContext,
        facts: Option<&SubmittingUser>,
    ) -> Result<ArrayRequest<BatchJob>> {
        render::render_array(tasks, max_concurrent, &with_user(opts, facts), ctx)
    }

    /// An array's children are `<queue>:<name>:<position>` (Batch's `<job id>:<position>`).
    fn array_task_ids(&self, array_id: &str, indexes: &[u32]) -> Vec<String> {
        (0..indexes.len())
            .map(|i| format!("{array_id}:{i}"))
            .collect()
    }

    /// The job queue exists and is enabled (Batch accepts a job for a queue it does not have,
    /// and fails it later).
    async fn plan(&self, job: &BatchJob, info: &DryRunInfo) -> Result<PlanReport> {
        plan::plan(self, job, info).await
    }

    async fn submit(&self, job: &BatchJob, _info: &DryRunInfo) -> Result<String> {
        let def = &job.job_def;
        let mut depends_on = Vec::with_capacity(job.depends_on.len());
        for app_id in &job.depends_on {
            let id = self
                .find_summary(app_id)
                .await?
                .and_then(|j| j.job_id().map(String::from))
                .ok_or_else(|| {
                    Error::app_not_found(
                        format!("{NAME}://{app_id}"),
                        ": --after names a Batch job its queue does not list",
                    )
                })?;
            depends_on.push(bt::JobDependency::builder().job_id(id).build());
        }
        let batch = self.batch().await?;
        let nodes = def.node_properties.as_ref().map(|np| {
            bt::NodeProperties::builder()
                .num_nodes(np.num_nodes as i32)
                .main_node(np.main_node as i32)
                .set_node_range_properties(Some(
                    np.node_range_properties
                        .iter()
                        .map(|n| {
                            bt::NodeRangeProperty::builder()
                                .target_nodes(&n.target_nodes)
                                .container(container_properties(&n.container))
                                .build()
                        })
                        .collect(),
                ))
                .build()
        });
        let kind = if nodes.is_some() {
            bt::JobDefinitionType::Multinode
        } else {
            bt::JobDefinitionType::Container
        };
        let retry = bt::RetryStrategy::builder()
            .attempts(def.retry_strategy.attempts as i32)
            .set_evaluate_on_exit(Some(
                def.retry_strategy
                    .evaluate_on_exit
                    .iter()
                    .map(|e| {
                        bt::EvaluateOnExit::builder()
                            .set_on_exit_code(e.on_exit_code.clone())
                            .set_on_status_reason(e.on_status_reason.clone())
                            .action(bt::RetryAction::from(e.action.as_str()))
                            .build()
                    })
                    .collect(),
            ))
            .build();
        batch
            .register_job_definition()
            .job_definition_name(&def.job_definition_name)
            .r#type(kind)
            .set_node_properties(nodes)
            .set_container_properties(def.container_properties.as_ref().map(container_properties))
            .retry_strategy(retry)
            .set_timeout(def.timeout.as_ref().map(|t| {
                bt::JobTimeout::builder()
                    .attempt_duration_seconds(t.attempt_duration_seconds as i32)
                    .build()
            }))
            .set_tags(Some(def.tags.clone().into_iter().collect()))
            .set_scheduling_priority(def.scheduling_priority.map(|p| p as i32))
            .send()
            .await
            .map_err(aws_err("registering the job definition"))?;
        batch
            .submit_job()
            .job_name(&job.name)
            .job_queue(&job.queue)
            .job_definition(&def.job_definition_name)
            .set_tags(Some(def.tags.clone().into_iter().collect()))
            .set_share_identifier(job.share_id.clone())
            .set_array_properties(
                job.array_size
                    .map(|n| bt::ArrayProperties::builder().size(n as i32).build()),
            )
            .set_depends_on((!depends_on.is_empty()).then_some(depends_on))
            .send()
            .await
            .map_err(aws_err("submitting the job"))?;
        Ok(format!("{}:{}", job.queue, job.name))
    }

    /// The job and its job definition as Batch holds them (as long as Batch lists the job).
    async fn describe_native(&self, app_id: &str) -> Result<Option<serde_json::Value>> {
        let Some(job) = self.find_job(app_id).await? else {
            return Ok(None);
        };
        let def = match job.job_definition() {
            Some(arn) => self.job_definition(arn).await?,
            None => None,
        };
        Ok(Some(client::native_json(&job, def.as_ref())))
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let Some(job) = self.find_job(app_id).await? else {
            return Ok(None);
        };
        let state = status_of(&job);
        let mut resp = DescribeAppResponse::new(app_id, state);
        resp.msg = job.status_reason().unwrap_or_default().to_string();
        resp.num_restarts = job.attempts().len().saturating_sub(1) as i64;
        let region = &self.clients().await?.2;
        if let Some(id) = job.job_id() {
            resp.ui_url = Some(format!(
                "https://{region}.console.aws.amazon.com/batch/home?region={region}#jobs/mnp-job/{id}"
            ));
        }
        let attempts = attempts_of(&job);
        if let (AppState::Failed, Some(timeout), Some(crate::specs::EndReason::Hung)) = (
            state,
            job.tags().and_then(|t| t.get(TAG_HANG_TIMEOUT)),
            attempts.last().and_then(|a| a.reason),
        ) {
            resp.msg = format!(
                "a replica hung: no progress (output or heartbeat) for {timeout}s; its stacks: \
                 `torchx log --stacks`"
            );
        }
        let groups = node_groups(&job);
        let indexes: Vec<i32> = groups.iter().flat_map(|(_, s, e)| *s..=*e).collect();
        let nodes = match job.job_id() {
            Some(id) if job.node_properties().is_some() => self.nodes(id, &indexes).await?,
            _ => BTreeMap::new(),
        };
        for (role, start, end) in &groups {
            for idx in *start..=*end {
                // Per node where Batch reports it, else the job's own state.
                let node = nodes.get(&idx);
                let st = node.map_or(state, status_of);
                let host = node
                    .or(Some(&job).filter(|j| j.node_properties().is_none()))
                    .and_then(|n| n.container())
                    .and_then(|c| c.network_interfaces().first())
                    .and_then(|n| n.private_ipv4_address())
                    .unwrap_or_default();
                let mut replica = ReplicaStatus::new((idx - start) as u32, st, role, host);
                replica.attempts.clone_from(&attempts);
                resp.add_replica(replica);
            }
        }
        resp.roles_from_statuses();
        Ok(Some(resp))
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        let batch = self.batch().await?;
        let mut queues = Vec::new();
        let mut pages = batch.describe_job_queues().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(aws_err("listing job queues"))?;
            queues.extend(
                page.job_queues()
                    .iter()
                    .filter_map(|q| q.job_queue_name().map(str::to_string)),
            );
        }
        let mut out = Vec::new();
        for queue in queues {
            let mut ids = Vec::new();
            // A created-after filter returns every status (TorchX's trick).
            let mut pages = batch
                .list_jobs()
                .job_queue(&queue)
                .filters(
                    bt::KeyValuesPair::builder()
                        .name("AFTER_CREATED_AT")
                        .values("1")
                        .build(),
                )
                .into_paginator()
                .send();
            while let Some(page) = pages.next().await {
                let page = page.map_err(aws_err("listing jobs"))?;
                ids.extend(
                    page.job_summary_list()
                        .iter()
                        .filter_map(|j| j.job_id().map(str::to_string)),
                );
            }
            for chunk in ids.chunks(100) {
                let resp = batch
                    .describe_jobs()
                    .set_jobs(Some(chunk.to_vec()))
                    .send()
                    .await
                    .map_err(aws_err("describing jobs"))?;
                for j in resp.jobs() {
                    let tags = j.tags().cloned().unwrap_or_default();
                    // TorchX's jobs are multi-node, ours may be array jobs (their children
                    // are not listed: they are the group's tasks).
                    let ours = j.node_properties().is_some() || j.array_properties().is_some();
                    if !tags.contains_key(TAG_VERSION)
                        || !ours
                        || j.job_id().is_some_and(|id| id.contains(':'))
                        || is_deleted(j)
                    {
                        continue;
                    }
                    let name = j.job_name().unwrap_or_default();
                    out.push(ListAppResponse {
                        app_id: format!("{queue}:{name}"),
                        state: status_of(j),
                        app_handle: String::new(),
                        name: tags
                            .get(TAG_APP_NAME)
                            .cloned()
                            .unwrap_or_else(|| name.to_string()),
                        start_time: j.created_at().map(|ms| ms as f64 / 1000.0),
                        end_time: j.stopped_at().map(|ms| ms as f64 / 1000.0),
                        other_state_dir: false,
                    });
                }
            }
        }
        crate::specs::sort_newest_first(&mut out);
        Ok(out)
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        let job = self
            .find_job(app_id)
            .await?
            .ok_or_else(|| unknown_app(app_id))?;
        if status_of(&job).is_terminal() {
            return Ok(());
        }
        // By id: Batch accepts an ARN too, but emulators may not. An array's children are
        // ended with it (Batch does so itself; saying so costs nothing).
        let id = job.job_id().unwrap_or_default();
        let size = job.array_properties().and_then(|a| a.size()).unwrap_or(0);
        let children = (0..size).map(|i| format!("{id}:{i}"));
        for id in std::iter::once(id.to_string()).chain(children) {
            self.batch()
                .await?
                .terminate_job()
                .job_id(id)
                .reason(CANCEL_REASON)
                .send()
                .await
                .map_err(aws_err("terminating the job"))?;
        }
        Ok(())
    }

    /// Deregisters the job's definition and tags the job deleted, so torchx no longer shows it
    /// (Batch keeps job records and ages them out by itself).
    async fn delete(&self, app_id: &str) -> Result<()> {
        if split_child(app_id).1.is_some() {
            return Err(Error::unsupported(
                NAME,
                "deleting one child of an array job (Batch keeps them with their array): \
                 delete the group",
            ));
        }
        let summary = self
            .find_summary(app_id)
            .await?
            .ok_or_else(|| unknown_app(app_id))?;
        let job = self
            .describe_listed(&summary)
            .await?
            .ok_or_else(|| unknown_app(app_id))?;
        let batch = self.batch().await?;
        batch
            .deregister_job_definition()
            .job_definition(job.job_definition().unwrap_or_default())
            .send()
            .await
            .map_err(aws_err("deregistering the job definition"))?;
        // The listing always carries the ARN (some emulators omit it from DescribeJobs).
        let arn = job
            .job_arn()
            .or(summary.job_arn())
            .ok_or_else(|| Error::backend(NAME, format!("no ARN for job {app_id}")))?;
        batch
            .tag_resource()
            .resource_arn(arn)
            .tags(TAG_DELETED, "true")
            .send()
            .await
            .map_err(aws_err("tagging the job deleted"))?;
        Ok(())
    }

    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        let Replica { app_id, role, k } = replica;
        if !matches!(query.streams, None | Some(Stream::Combined)) {
            return Err(Error::unsupported(
                NAME,
                "log streams other than combined (CloudWatch keeps one stream per node)",
            ));
        }
        let job = self
            .find_job(app_id)
            .await?
            .ok_or_else(|| unknown_app(app_id))?;
        let (_, start, end) = node_groups(&job)
            .into_iter()
            .find(|(r, _, _)| r == role)
            .ok_or_else(|| {
                Error::not_found("role", role.to_string(), format!(" in app {app_id}"))
            })?;
        let idx = start + k as i32;
        if idx > end {
            return Err(Error::not_found(
                "replica",
                format!("{role}/{k}"),
                format!(" in app {app_id}"),
            ));
        }
        let (batch, logs, _) = self.clients().await?.clone();
        let node = NodeStreams {
            batch,
            job_id: job.job_id().unwrap_or_default().to_string(),
            node: idx,
        };
        Ok(Box::new(CloudWatchLines::new(
            logs,
            LOG_GROUP,
            Box::new(node),
            query,
        )))
    }
}

#[cfg(test)]
mod tests;
