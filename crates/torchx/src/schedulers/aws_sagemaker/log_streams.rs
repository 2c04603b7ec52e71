//! Where a training job host's log is: CloudWatch streams `{job}/algo-{N}-{epoch}` in
//! [`LOG_GROUP`], one per (re)start of the host.

use async_trait::async_trait;
use serde_json::json;

use super::client::SageMaker;
use super::{is_not_found, job_state, service_err, LOG_GROUP, NAME};
use crate::error::Result;
use crate::schedulers::aws::cloudwatch::LogStreams;
use crate::schedulers::aws::sdk_err;

/// Host `algo-{host}` of training job `job`.
pub(super) struct HostStreams {
    pub(super) api: SageMaker,
    pub(super) job: String,
    pub(super) host: u32,
}

#[async_trait]
impl LogStreams for HostStreams {
    fn scheduler(&self) -> &'static str {
        NAME
    }

    /// The host's streams, oldest first.
    async fn streams(&self) -> Result<Vec<String>> {
        let prefix = format!("{}/algo-{}-", self.job, self.host);
        let mut found: Vec<(i64, String)> = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .api
                .logs()
                .describe_log_streams()
                .log_group_name(LOG_GROUP)
                .log_stream_name_prefix(&prefix)
                .set_next_token(token.clone())
                .send()
                .await;
            let page = match page {
                Ok(p) => p,
                // No training job of this account has written yet.
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    return Ok(Vec::new())
                }
                Err(e) => return Err(sdk_err(NAME, "listing the job's CloudWatch streams")(e)),
            };
            found.extend(page.log_streams().iter().filter_map(|s| {
                let name = s.log_stream_name()?;
                Some((s.creation_time().unwrap_or(0), name.to_string()))
            }));
            token = page.next_token().map(str::to_string);
            if token.is_none() || page.log_streams().is_empty() {
                break;
            }
        }
        found.sort();
        Ok(found.into_iter().map(|(_, name)| name).collect())
    }

    async fn ended(&self) -> Result<bool> {
        match self
            .api
            .call("DescribeTrainingJob", &json!({"TrainingJobName": self.job}))
            .await?
        {
            Ok(job) => Ok(job_state(job["TrainingJobStatus"].as_str().unwrap_or("")).is_terminal()),
            Err(e) if is_not_found(&e) => Ok(true),
            Err(e) => Err(service_err("describing the training job", e)),
        }
    }
}
