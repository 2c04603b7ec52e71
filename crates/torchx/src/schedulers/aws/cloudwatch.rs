//! A replica's CloudWatch log events as lines (`torchx log`), following them until its job ends
//! when tailing. Where the streams are and whether the job is over is the scheduler's
//! ([`LogStreams`]): AWS Batch names one stream per node and attempt, SageMaker one per host
//! and (re)start.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use super::sdk_err;
use crate::error::Result;
use crate::scheduler::{LogLines, LogQuery};

/// Where a replica's log is, as its scheduler knows it.
#[async_trait]
pub(crate) trait LogStreams: Send + Sync {
    /// The scheduler's name (for errors).
    fn scheduler(&self) -> &'static str;
    /// The replica's streams, oldest first (the running attempt's last).
    async fn streams(&self) -> Result<Vec<String>>;
    /// Whether the job is over: nothing more will be written.
    async fn ended(&self) -> Result<bool>;
}

/// A replica's CloudWatch log events as lines.
pub(crate) struct CloudWatchLines {
    logs: aws_sdk_cloudwatchlogs::Client,
    group: &'static str,
    source: Box<dyn LogStreams>,
    /// Which of the replica's streams is being read.
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
    /// The lines of `source`'s streams in log group `group` that `query` asks for.
    pub(crate) fn new(
        logs: aws_sdk_cloudwatchlogs::Client,
        group: &'static str,
        source: Box<dyn LogStreams>,
        query: &LogQuery,
    ) -> CloudWatchLines {
        let ms = |t: Option<SystemTime>| {
            t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_millis() as i64)
        };
        CloudWatchLines {
            logs,
            group,
            source,
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

    /// Moves on to the next stream, if the replica has one: this one is read to its end.
    async fn next_stream(&mut self) -> Result<bool> {
        if self.source.streams().await?.len() <= self.read + 1 {
            return Ok(false);
        }
        self.read += 1;
        self.stream = None;
        self.token = None;
        Ok(true)
    }

    /// Waits a poll interval if the job may still write; false if it is over.
    async fn wait_for_more(&mut self) -> Result<bool> {
        if !self.tail || self.source.ended().await? {
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
                self.stream = self.source.streams().await?.get(self.read).cloned();
                if self.stream.is_none() {
                    self.wait_for_more().await?;
                    continue;
                }
            }
            let resp = self
                .logs
                .get_log_events()
                .log_group_name(self.group)
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
                    // The stream appears when the replica starts writing (an attempt that
                    // never wrote has none: go on to the next).
                    if !self.next_stream().await? {
                        self.wait_for_more().await?;
                    }
                    continue;
                }
                Err(e) => {
                    return Err(sdk_err(self.source.scheduler(), "reading CloudWatch logs")(
                        e,
                    ))
                }
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
