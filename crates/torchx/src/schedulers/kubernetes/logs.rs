//! Pod logs as lines (`kubernetes` and `kubernetes_mcad`): the API server's timestamps stripped
//! and used for `since`/`until`, a followed log reconnected where it was cut.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use futures_util::{AsyncBufRead, AsyncBufReadExt};
use kube::api::LogParams;

use super::client::{Kube, POD};
use super::parse_time;
use crate::error::{Error, ErrorKind, Result};
use crate::scheduler::{LogLines, LogQuery, Scheduler};
use crate::specs::Stream;

/// A pod's log lines, shared by `kubernetes` and `kubernetes_mcad`: Kubernetes keeps one
/// combined stream per container; `since` (which the API server honours only to the second)
/// and `until` are applied to its timestamps. `None` while the pod has not started.
pub(crate) async fn pod_log_lines(
    kube: &Kube,
    scheduler: &str,
    ns: &str,
    pod: &str,
    query: &LogQuery,
) -> Result<Option<Box<dyn LogLines>>> {
    if !matches!(query.streams, None | Some(Stream::Combined)) {
        return Err(Error::unsupported(
            scheduler,
            "log streams other than combined (Kubernetes keeps one log per container)",
        ));
    }
    let since_seconds = query.since.map(|s| {
        let ago = SystemTime::now()
            .duration_since(s)
            .unwrap_or(Duration::ZERO);
        (ago.as_secs() as i64 + 1).max(1)
    });
    let params = LogParams {
        follow: query.should_tail,
        timestamps: true,
        since_seconds,
        ..Default::default()
    };
    let epoch_secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).ok().map(|d| d.as_secs_f64());
    let (since, until) = (
        query.since.and_then(epoch_secs),
        query.until.and_then(epoch_secs),
    );
    let Some(reader) = kube.pod_log(ns, pod, &params).await? else {
        return Ok(None);
    };
    Ok(Some(Box::new(PodLogLines {
        reader: Box::pin(reader),
        since,
        until,
        done: false,
        follow: query.should_tail.then(|| Follow {
            kube: kube.clone(),
            ns: ns.to_string(),
            pod: pod.to_string(),
            last: None,
        }),
    })))
}

/// How long a followed log keeps trying to reconnect to an API server that went away.
const LOG_RECONNECT_FOR: Duration = Duration::from_secs(180);

/// What a followed pod log needs to pick up where it was cut (an API server restarted, a
/// connection dropped): the pod, and the timestamp of the last line read.
struct Follow {
    kube: Kube,
    ns: String,
    pod: String,
    last: Option<(i64, u32)>,
}

impl Follow {
    /// Whether the pod's container may still write: the stream ended early if so.
    async fn still_running(&self) -> Result<bool> {
        let pod = self.kube.get(&self.ns, POD, &self.pod).await?;
        Ok(pod.is_some_and(|p| {
            matches!(p["status"]["phase"].as_str(), Some("Pending" | "Running"))
                && p["status"]["containerStatuses"][0]["state"]["terminated"].is_null()
        }))
    }

    /// The pod's log again, from the second of the last line read (lines up to it are
    /// skipped by their timestamps); `None` once the pod is gone. Retries while the API server
    /// is unavailable, for up to [`LOG_RECONNECT_FOR`].
    async fn reopen(&self) -> Result<Option<impl AsyncBufRead + Send + Unpin + use<>>> {
        let deadline = std::time::Instant::now() + LOG_RECONNECT_FOR;
        let mut pause = Duration::from_millis(250);
        loop {
            let since_seconds = self.last.map(|(secs, _)| {
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                (now - secs + 1).max(1)
            });
            let params = LogParams {
                follow: true,
                timestamps: true,
                since_seconds,
                ..Default::default()
            };
            match self.kube.pod_log(&self.ns, &self.pod, &params).await {
                Err(e)
                    if e.kind() == ErrorKind::Unavailable
                        && std::time::Instant::now() < deadline =>
                {
                    log::debug!("reconnecting to the log of pod {}: {e}", self.pod);
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }
}

/// A log timestamp (RFC 3339, nanoseconds) as (seconds, nanoseconds), to order lines exactly.
pub(super) fn stamp_order(stamp: &str) -> Option<(i64, u32)> {
    let stamp = stamp.strip_suffix('Z')?;
    let (whole, fraction) = stamp.split_once('.').unwrap_or((stamp, ""));
    let secs = parse_time(&format!("{whole}Z"))? as i64;
    let nanos = format!("{fraction:0<9}").get(..9)?.parse().ok()?;
    Some((secs, nanos))
}

/// Opens replica `k`'s log. `pod_of` finds its pod (None: not created yet). When tailing, waits
/// for the pod to start (a replica may be pending for long) unless the app has ended.
pub(crate) async fn replica_log<'a>(
    sched: &'a dyn Scheduler,
    kube: &'a Kube,
    app_id: &'a str,
    ns: &'a str,
    (role, k): (&'a str, u32),
    query: &'a LogQuery,
    pod_of: &'a (dyn Fn() -> BoxFuture<'a, Result<Option<String>>> + Send + Sync),
) -> Result<Box<dyn LogLines>> {
    let mut pause = Duration::from_millis(50);
    // A follower waits through an API server that does not answer for a while.
    let unavailable_until = std::time::Instant::now() + LOG_RECONNECT_FOR;
    loop {
        // The replica's log if its pod started, else whether the app has ended.
        let look = async {
            if let Some(pod) = pod_of().await? {
                // A pod not yet on a node answers its log with 204 and no body, which a
                // follower would read as a log that ended: only a started pod's log is read.
                let started = kube
                    .get(ns, POD, &pod)
                    .await?
                    .is_some_and(|p| p["status"]["phase"] != "Pending");
                if started {
                    if let Some(lines) = pod_log_lines(kube, sched.name(), ns, &pod, query).await? {
                        return Ok(Ok(lines));
                    }
                }
            }
            let ended = sched
                .describe(app_id)
                .await?
                .is_none_or(|d| d.state.is_terminal());
            Ok::<_, Error>(Err(ended))
        };
        let ended = match look.await {
            Ok(Ok(lines)) => return Ok(lines),
            Ok(Err(ended)) => ended,
            Err(e)
                if query.should_tail
                    && e.kind() == ErrorKind::Unavailable
                    && std::time::Instant::now() < unavailable_until =>
            {
                log::debug!("waiting for the log of {role}/{k} of {app_id}: {e}");
                false
            }
            Err(e) => return Err(e),
        };
        if !query.should_tail || ended {
            let why = if ended {
                "no pod of it is left: deleted, or removed by its controller"
            } else {
                "its pod has not started"
            };
            return Err(Error::not_found(
                "replica log",
                format!("{role}/{k}"),
                format!(" of app {app_id} ({why})"),
            ));
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// Lines of a pod log, each stripped of the API server's timestamp. A followed log whose
/// stream is cut while the container still runs is opened again where it was cut.
struct PodLogLines {
    reader: std::pin::Pin<Box<dyn AsyncBufRead + Send>>,
    since: Option<f64>,
    until: Option<f64>,
    done: bool,
    follow: Option<Follow>,
}

impl PodLogLines {
    /// After the stream ended (`cut`: with an error): whether a followed log was opened again.
    async fn resumed(&mut self, cut: Option<std::io::Error>) -> Result<bool> {
        let Some(follow) = &self.follow else {
            return cut.map_or(Ok(false), |e| Err(Error::io("reading a pod log", e)));
        };
        // A clean end while the container runs is the API server closing its streams.
        let running = match follow.still_running().await {
            Ok(running) => running,
            Err(e) if e.kind() == ErrorKind::Unavailable => true,
            Err(e) => return Err(e),
        };
        if cut.is_none() && !running {
            return Ok(false);
        }
        if cut.is_none() {
            // The kubelet may not have reported the container's end yet: not a busy loop.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        match follow.reopen().await? {
            Some(reader) => {
                self.reader = Box::pin(reader);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

#[async_trait]
impl LogLines for PodLogLines {
    async fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            if self.done {
                return Ok(None);
            }
            let mut buf = Vec::new();
            let read = self.reader.read_until(b'\n', &mut buf).await;
            if buf.is_empty() || read.is_err() {
                if self.resumed(read.err()).await? {
                    continue;
                }
                self.done = true;
                return Ok(None);
            }
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            let line = String::from_utf8_lossy(&buf).into_owned();
            let (stamp, text) = line.split_once(' ').unwrap_or(("", line.as_str()));
            let Some(t) = parse_time(stamp) else {
                return Ok(Some(line));
            };
            if let Some(follow) = &mut self.follow {
                let order = stamp_order(stamp);
                if order.is_some() && order <= follow.last {
                    // Read before the stream was cut.
                    continue;
                }
                follow.last = order.or(follow.last);
            }
            if self.until.is_some_and(|u| t >= u) {
                // Lines are in time order: nothing after this one is wanted either.
                self.done = true;
                return Ok(None);
            }
            if self.since.is_some_and(|s| t < s) {
                continue;
            }
            return Ok(Some(text.to_string()));
        }
    }
}
