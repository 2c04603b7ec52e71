//! `aws_sagemaker`: an app (one role) as a SageMaker training job. App handles are
//! `aws_sagemaker://{session}/{training job name}`.
//!
//! - `opts`: run options (TorchX's); `render`: the pure CreateTrainingJob request; the state
//!   table ([`job_state`]) lives here; `client`: the four signed calls; `log_streams`: where a
//!   host's CloudWatch lines are. Nothing AWS is loaded unless this scheduler is used.

pub(crate) mod client;
mod log_streams;
mod opts;
pub(crate) mod render;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::sync::OnceCell;

pub(crate) use opts::AwsSageMakerOpts;
pub(crate) use render::{render, TrainingJob};

use self::client::{AwsError, SageMaker};
use crate::error::{Error, Result};
use crate::scheduler::{
    Backend, Capabilities, DryRunContext, DryRunInfo, LogLines, LogQuery, Replica, Scheduler,
    WorkspaceSupport,
};
use crate::schedulers::aws::cloudwatch::CloudWatchLines;
use crate::schedulers::aws::SubmittingUser;
use crate::schedulers::hang_watch;
use crate::specs::{AppDef, AppState, DescribeAppResponse, ListAppResponse, ReplicaStatus, Stream};

/// The registry name.
pub(crate) const NAME: &str = "aws_sagemaker";
/// The CloudWatch log group of training jobs.
pub(crate) const LOG_GROUP: &str = "/aws/sagemaker/TrainingJobs";

/// The factory registered in [`crate::scheduler::Registry::builtin`].
pub(crate) fn create() -> Result<Arc<dyn Scheduler>> {
    Ok(Arc::new(AwsSageMakerScheduler::default()))
}

/// The SageMaker scheduler.
#[derive(Default)]
pub(crate) struct AwsSageMakerScheduler {
    api: OnceCell<SageMaker>,
}

impl std::fmt::Debug for AwsSageMakerScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsSageMakerScheduler")
            .field("connected", &self.api.initialized())
            .finish()
    }
}

/// A training job's status (TorchX's table; `Stopping`/`Stopped` are CANCELLED).
pub(crate) fn job_state(status: &str) -> AppState {
    match status {
        "InProgress" => AppState::Running,
        "Completed" => AppState::Succeeded,
        "Failed" => AppState::Failed,
        "Stopping" | "Stopped" => AppState::Cancelled,
        _ => AppState::Unknown,
    }
}

fn service_err(what: &str, e: AwsError) -> Error {
    let message = format!("{what}: {} ({})", e.message, e.code);
    Error::backend_caused_by(NAME, message, e.kind(), e)
}

/// SageMaker answers an unknown job with a ValidationException ("Requested resource not
/// found."; emulators: "Could not find training job ...").
fn is_not_found(e: &AwsError) -> bool {
    let msg = e.message.to_lowercase();
    e.code == "ResourceNotFound"
        || (e.code == "ValidationException"
            && (msg.contains("not found") || msg.contains("could not find")))
}

/// What `status` says of a failed job: a hang the watch reported (the failure reason SageMaker
/// read from `/opt/ml/output/failure`, or its exit code), else SageMaker's reason or status.
fn job_message(job: &Value, state: AppState) -> String {
    let reason = job["FailureReason"].as_str().unwrap_or_default();
    let watched = job["AlgorithmSpecification"]["ContainerEntrypoint"]
        .as_array()
        .is_some_and(|words| words.iter().any(|w| w == "torchx-watch"));
    if state == AppState::Failed && watched {
        if let Some((_, said)) = reason.split_once(hang_watch::HUNG_MESSAGE) {
            return format!("a replica hung: {said}; its stacks: `torchx log --stacks`");
        }
        let code = format!("exit code: {}", hang_watch::HUNG_EXIT_CODE);
        if reason.to_lowercase().contains(&code) {
            return format!(
                "a replica hung (no progress, output or heartbeat, for its hang timeout); its \
                 stacks: `torchx log --stacks` ({reason})"
            );
        }
    }
    if reason.is_empty() {
        job["SecondaryStatus"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    } else {
        reason.to_string()
    }
}

/// awsJson timestamps are epoch seconds.
fn seconds(v: &Value) -> Option<f64> {
    v.as_f64()
}

impl AwsSageMakerScheduler {
    async fn api(&self) -> Result<&SageMaker> {
        self.api.get_or_try_init(|| SageMaker::connect(NAME)).await
    }

    async fn describe_job(&self, name: &str) -> Result<Option<Value>> {
        match self
            .api()
            .await?
            .call("DescribeTrainingJob", &json!({"TrainingJobName": name}))
            .await?
        {
            Ok(v) => Ok(Some(v)),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(service_err("describing the training job", e)),
        }
    }
}

#[async_trait]
impl Backend for AwsSageMakerScheduler {
    const NAME: &'static str = NAME;
    const CAPABILITIES: Capabilities = Capabilities {
        describe_replicas: true,
        list: true,
        cancel: true,
        retries: true,
        recovery: true,
        logs: true,
        log_since_until: true,
        log_tail: true,
        hang_watch: true,
        workspace: WorkspaceSupport::PushedImage,
        ..Capabilities::NONE
    };
    type Opts = AwsSageMakerOpts;
    type Request = TrainingJob;
    type Facts = SubmittingUser;

    async fn dryrun_facts(&self, _opts: &Self::Opts) -> Result<Option<SubmittingUser>> {
        Ok(Some(crate::schedulers::aws::user_facts()))
    }

    fn render(
        &self,
        app: &AppDef,
        opts: &AwsSageMakerOpts,
        ctx: &DryRunContext,
        facts: Option<&SubmittingUser>,
    ) -> Result<TrainingJob> {
        let opts = AwsSageMakerOpts {
            user: crate::schedulers::aws::tagged_user(&opts.user, facts),
            ..opts.clone()
        };
        render(app, &opts, ctx)
    }

    async fn submit(&self, job: &TrainingJob, _info: &DryRunInfo) -> Result<String> {
        match self
            .api()
            .await?
            .call("CreateTrainingJob", &job.request)
            .await?
        {
            Ok(_) => Ok(job.name.clone()),
            Err(e) if e.code == "ResourceInUse" => Err(Error::backend(
                NAME,
                format!("training job `{}` already exists; resubmit", job.name),
            )),
            Err(e) => Err(service_err("creating the training job", e)),
        }
    }

    /// The training job as SageMaker describes it: every field of the CreateTrainingJob
    /// request (the dry run's) with SageMaker's status fields beside them.
    async fn describe_native(&self, app_id: &str) -> Result<Option<Value>> {
        self.describe_job(app_id).await
    }

    async fn describe(&self, app_id: &str) -> Result<Option<DescribeAppResponse>> {
        let Some(job) = self.describe_job(app_id).await? else {
            return Ok(None);
        };
        let state = job_state(job["TrainingJobStatus"].as_str().unwrap_or(""));
        let mut resp = DescribeAppResponse::new(app_id, state);
        resp.msg = job_message(&job, state);
        let region = self.api().await?.region().to_string();
        resp.ui_url = Some(format!(
            "https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#jobs/{app_id}"
        ));
        // One replica per instance; SageMaker reports the job, not its hosts.
        let count = job["ResourceConfig"]["InstanceCount"].as_u64().unwrap_or(1);
        let role = job["Environment"][render::ENV_ROLE_NAME]
            .as_str()
            .unwrap_or("sagemaker");
        for k in 0..count {
            resp.add_replica(ReplicaStatus::new(
                k as u32,
                state,
                role,
                format!("algo-{}", k + 1),
            ));
        }
        resp.roles_from_statuses();
        Ok(Some(resp))
    }

    async fn list(&self) -> Result<Vec<ListAppResponse>> {
        let api = self.api().await?;
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut body = json!({"MaxResults": 100});
            if let Some(t) = &token {
                body["NextToken"] = json!(t);
            }
            let page = api
                .call("ListTrainingJobs", &body)
                .await?
                .map_err(|e| service_err("listing training jobs", e))?;
            for j in page["TrainingJobSummaries"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let name = j["TrainingJobName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                out.push(ListAppResponse {
                    state: job_state(j["TrainingJobStatus"].as_str().unwrap_or("")),
                    name: name
                        .rsplit_once('-')
                        .map_or(name.clone(), |(n, _)| n.to_string()),
                    app_id: name,
                    app_handle: String::new(),
                    start_time: seconds(&j["CreationTime"]),
                    end_time: seconds(&j["TrainingEndTime"]),
                    other_state_dir: false,
                });
            }
            token = page["NextToken"].as_str().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        crate::specs::sort_newest_first(&mut out);
        Ok(out)
    }

    /// A host's CloudWatch stream (`{job}/algo-{k+1}-{epoch}`; a restart after an internal
    /// error writes a new one).
    async fn log_iter(&self, replica: Replica<'_>, query: &LogQuery) -> Result<Box<dyn LogLines>> {
        let Replica { app_id, role, k } = replica;
        if !matches!(query.streams, None | Some(Stream::Combined)) {
            return Err(Error::unsupported(
                NAME,
                "log streams other than combined (CloudWatch keeps one stream per host)",
            ));
        }
        let app = Backend::describe(self, app_id)
            .await?
            .ok_or_else(|| Error::app_not_found(format!("{NAME}://{app_id}"), ""))?;
        if !app
            .roles_statuses
            .iter()
            .any(|r| r.role == role && r.replicas.iter().any(|x| x.id == k))
        {
            return Err(Error::not_found(
                "replica",
                format!("{role}/{k}"),
                format!(" in app {app_id}"),
            ));
        }
        let api = self.api().await?;
        let host = log_streams::HostStreams {
            api: api.clone(),
            job: app_id.to_string(),
            host: k + 1,
        };
        Ok(Box::new(CloudWatchLines::new(
            api.logs().clone(),
            LOG_GROUP,
            Box::new(host),
            query,
        )))
    }

    async fn cancel(&self, app_id: &str) -> Result<()> {
        let job = self
            .describe_job(app_id)
            .await?
            .ok_or_else(|| Error::app_not_found(format!("{NAME}://{app_id}"), ""))?;
        if job["TrainingJobStatus"] != "InProgress" {
            return Ok(());
        }
        self.api()
            .await?
            .call("StopTrainingJob", &json!({"TrainingJobName": app_id}))
            .await?
            .map(|_| ())
            .map_err(|e| service_err("stopping the training job", e))
    }
}

#[cfg(test)]
mod tests;
