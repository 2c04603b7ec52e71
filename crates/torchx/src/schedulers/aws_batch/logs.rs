//! A Batch job node's CloudWatch log events as lines (`torchx log`), following them until the
//! job ends when tailing.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::{aws_err, status_of, LOG_GROUP};
use crate::error::Result;
use crate::scheduler::{LogLines, LogQuery};

/// A node's CloudWatch log events as lines, following them until the job ends when tailing.
pub(super) struct CloudWatchLines {
    batch: aws_sdk_batch::Client,
    logs: aws_sdk_cloudwatchlogs::Client,
    job_id: String,
    node: i32,
    /// Which of the node's streams (one per attempt, oldest first) is being read.
    read: usize,
    stream: Option<String>,
    token: Option<String>,
    since: Option<i64>,
    until: Option<i64>,
    tail: bool,
    pending: VecDeque<String>,
    done: bool,
}

/// How long to wait between polls of a job that is still running.
const LOG_POLL: Duration = Duration::from_secs(1);

impl CloudWatchLines {
    /// The lines of node `node` of job `job_id` that `query` asks for.
    pub(super) fn new(
        (batch, logs): (aws_sdk_batch::Client, aws_sdk_cloudwatchlogs::Client),
        job_id: String,
        node: i32,
        query: &LogQuery,
    ) -> CloudWatchLines {
        let ms = |t: Option<SystemTime>| {
            t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64)
        };
        CloudWatchLines {
            batch,
            logs,
            job_id,
            node,
            read: 0,
            stream: None,
            token: None,
            since: ms(query.since),
            until: ms(query.until),
            tail: query.should_tail,
            pending: VecDeque::new(),
            done: false,
        }
    }

    async fn job_ended(&self) -> Result<bool> {
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

    /// The node's log streams, one per attempt, oldest first (the running attempt's last).
    async fn find_streams(&self) -> Result<Vec<String>> {
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

    /// Moves on to the next attempt's stream, if the node has one: this one is read to its end.
    async fn next_stream(&mut self) -> Result<bool> {
        if self.find_streams().await?.len() <= self.read + 1 {
            return Ok(false);
        }
        self.read += 1;
        self.stream = None;
        self.token = None;
        Ok(true)
    }

    /// Waits a poll interval if the job may still write; false if it is over.
    async fn wait_for_more(&mut self) -> Result<bool> {
        if !self.tail || self.job_ended().await? {
            self.done = true;
            return Ok(false);
        }
        tokio::time::sleep(LOG_POLL).await;
        Ok(true)
    }
}

#[async_trait]
impl LogLines for CloudWatchLines {
    async fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return Ok(Some(line));
            }
            if self.done {
                return Ok(None);
            }
            if self.stream.is_none() {
                self.stream = self.find_streams().await?.get(self.read).cloned();
                if self.stream.is_none() {
                    self.wait_for_more().await?;
                    continue;
                }
            }
            let resp = self
                .logs
                .get_log_events()
                .log_group_name(LOG_GROUP)
                .log_stream_name(self.stream.clone().unwrap_or_default())
                .start_from_head(true)
                .limit(10_000)
                .set_start_time(self.since)
                .set_end_time(self.until)
                .set_next_token(self.token.clone())
                .send()
                .await;
            let resp = match resp {
                Ok(r) => r,
                Err(e)
                    if e.as_service_error()
                        .is_some_and(|s| s.is_resource_not_found_exception()) =>
                {
                    // The stream appears when the node starts writing (an attempt that never
                    // wrote has none: go on to the next).
                    if !self.next_stream().await? {
                        self.wait_for_more().await?;
                    }
                    continue;
                }
                Err(e) => return Err(aws_err("reading CloudWatch logs")(e)),
            };
            for ev in resp.events() {
                // `until` is exclusive (some emulators treat endTime as inclusive).
                if self.until.is_some_and(|u| ev.timestamp().unwrap_or(0) >= u) {
                    continue;
                }
                let msg = ev.message().unwrap_or_default();
                self.pending.extend(
                    msg.strip_suffix('\n')
                        .unwrap_or(msg)
                        .split('\n')
                        .map(str::to_string),
                );
            }
            let next = resp.next_forward_token().map(str::to_string);
            let stalled = next.is_none() || next == self.token;
            self.token = next;
            if stalled && self.pending.is_empty() && !self.next_stream().await? {
                self.wait_for_more().await?;
            }
        }
    }
}
