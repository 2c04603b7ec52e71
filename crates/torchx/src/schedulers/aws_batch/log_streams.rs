//! Where a Batch job node's log is: one CloudWatch stream per attempt, named on the node's
//! attempts (the job's, for a single-node job).

use async_trait::async_trait;

use super::{aws_err, status_of, NAME};
use crate::error::Result;
use crate::schedulers::aws::cloudwatch::LogStreams;

/// Node `node` of job `job_id`.
pub(super) struct NodeStreams {
    pub(super) batch: aws_sdk_batch::Client,
    pub(super) job_id: String,
    pub(super) node: i32,
}

#[async_trait]
impl LogStreams for NodeStreams {
    fn scheduler(&self) -> &'static str {
        NAME
    }

    async fn streams(&self) -> Result<Vec<String>> {
        let ids = [
            format!("{}#{}", self.job_id, self.node),
            self.job_id.clone(),
        ];
        for id in ids {
            let resp = self
                .batch
                .describe_jobs()
                .jobs(&id)
                .send()
                .await
                .map_err(aws_err("describing the job's node"))?;
            let Some(j) = resp.jobs().first() else {
                continue;
            };
            let mut streams: Vec<String> = Vec::new();
            let attempts = j
                .attempts()
                .iter()
                .filter_map(|a| a.container().and_then(|c| c.log_stream_name()));
            let current = j.container().and_then(|c| c.log_stream_name());
            for s in attempts.chain(current) {
                if !streams.iter().any(|seen| seen == s) {
                    streams.push(s.to_string());
                }
            }
            if !streams.is_empty() {
                return Ok(streams);
            }
        }
        Ok(Vec::new())
    }

    async fn ended(&self) -> Result<bool> {
        let resp = self
            .batch
            .describe_jobs()
            .jobs(&self.job_id)
            .send()
            .await
            .map_err(aws_err("describing the job"))?;
        Ok(resp
            .jobs()
            .first()
            .is_none_or(|j| status_of(j).is_terminal()))
    }
}
