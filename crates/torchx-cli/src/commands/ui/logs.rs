//! `GET /api/logs/<handle>?role=R&replica=K&stream=S&regex=RE&lines=N&follow=true`: one replica's
//! log as `text/plain`, starting from its last `lines` lines and, with `follow`, going on as it
//! grows (across attempts, as `torchx log --tail` does) until the job ends or the page leaves.
//!
//! The backlog is read through at the scheduler's speed into a ring of the last lines (bounded
//! in lines and bytes), so a log of any size costs the server and the page only that much.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use torchx::scheduler::{LogLines, LogQuery};
use torchx::specs::Stream;
use torchx::Error;

use super::api::ApiError;
use super::Ui;

/// The most lines a page may ask to start with.
const MAX_LINES: usize = 100_000;
/// The most bytes the ring keeps (a page asking for many long lines gets the newest that fit).
const MAX_BYTES: usize = 16 << 20;
/// A read that waits this long found the end of the backlog (a backlog read returns at once,
/// a followed log waits for its writer): the ring goes out.
const CAUGHT_UP: Duration = Duration::from_millis(50);

#[derive(serde::Deserialize)]
pub struct LogParams {
    role: Option<String>,
    #[serde(default)]
    replica: u32,
    stream: Option<String>,
    regex: Option<String>,
    lines: Option<usize>,
    #[serde(default)]
    follow: bool,
}

/// The last lines of a log, bounded in count and bytes: whole chunks as the scheduler hands
/// them out (no allocation per line), the oldest dropped once the rest hold enough lines.
struct Ring {
    chunks: VecDeque<(Vec<u8>, usize)>,
    lines: usize,
    bytes: usize,
    max_lines: usize,
}

impl Ring {
    fn new(max_lines: usize) -> Ring {
        Ring {
            chunks: VecDeque::new(),
            lines: 0,
            bytes: 0,
            max_lines,
        }
    }

    fn push_chunk(&mut self, chunk: Vec<u8>) {
        let lines = memchr::memchr_iter(b'\n', &chunk).count();
        self.lines += lines;
        self.bytes += chunk.len();
        self.chunks.push_back((chunk, lines));
        while let Some((front, n)) = self.chunks.front() {
            let enough_lines = self.lines - n >= self.max_lines;
            let too_big = self.bytes > MAX_BYTES && self.chunks.len() > 1;
            if !(enough_lines || too_big) {
                break;
            }
            self.lines -= n;
            self.bytes -= front.len();
            self.chunks.pop_front();
        }
    }

    /// The last `max_lines` lines (of at most `MAX_BYTES`), emptying the ring.
    fn take(&mut self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes);
        for (chunk, _) in self.chunks.drain(..) {
            out.extend_from_slice(&chunk);
        }
        // Lines ended by `\n`, and perhaps a last one without: cut after the newline that
        // starts the last `max_lines`.
        let body_end = if out.ends_with(b"\n") {
            out.len() - 1
        } else {
            out.len()
        };
        let mut start = memchr::memrchr_iter(b'\n', &out[..body_end])
            .nth(self.max_lines - 1)
            .map_or(0, |i| i + 1);
        start = start.max(out.len().saturating_sub(MAX_BYTES));
        self.lines = 0;
        self.bytes = 0;
        out.split_off(start)
    }
}

type Next = (Box<dyn LogLines>, Vec<u8>, torchx::Result<bool>);

async fn next_chunk(mut lines: Box<dyn LogLines>) -> Next {
    let mut buf = Vec::new();
    let more = lines.next_lines(&mut buf).await;
    (lines, buf, more)
}

/// Reads `lines` into the channel: the backlog's tail first, then every chunk as it comes.
async fn pump(lines: Box<dyn LogLines>, tx: tokio::sync::mpsc::Sender<Bytes>, max_lines: usize) {
    let mut ring = Some(Ring::new(max_lines));
    let mut next = Box::pin(next_chunk(lines));
    loop {
        let caught_up = tokio::time::sleep(CAUGHT_UP);
        let (lines, chunk, more) = tokio::select! {
            done = &mut next => done,
            () = caught_up, if ring.is_some() => {
                if !flush(&mut ring, &tx).await {
                    return;
                }
                continue;
            }
            () = tx.closed() => return,
        };
        match &mut ring {
            Some(r) => r.push_chunk(chunk),
            None if chunk.is_empty() => {}
            None => {
                if tx.send(Bytes::from(chunk)).await.is_err() {
                    return;
                }
            }
        }
        match more {
            Ok(true) => next = Box::pin(next_chunk(lines)),
            Ok(false) => break,
            Err(e) => {
                if !flush(&mut ring, &tx).await {
                    return;
                }
                let _ = tx
                    .send(Bytes::from(format!(
                        "\n[torchx ui: the log broke off: {e}]\n"
                    )))
                    .await;
                return;
            }
        }
    }
    flush(&mut ring, &tx).await;
}

/// Sends what the ring holds and stops keeping one (lines go out as they come from now on);
/// false when the reader is gone.
async fn flush(ring: &mut Option<Ring>, tx: &tokio::sync::mpsc::Sender<Bytes>) -> bool {
    match ring.take().map(|mut r| r.take()).filter(|t| !t.is_empty()) {
        Some(tail) => tx.send(Bytes::from(tail)).await.is_ok(),
        None => true,
    }
}

/// The handler.
pub async fn stream(
    State(ui): State<Arc<Ui>>,
    Path(handle): Path<String>,
    Query(p): Query<LogParams>,
) -> Result<Response, ApiError> {
    let regex = p
        .regex
        .as_deref()
        .filter(|r| !r.is_empty())
        .map(regex::Regex::new)
        .transpose()
        .map_err(|e| Error::arg(format!("regex: {e}")))?;
    let streams = p.stream.as_deref().map(str::parse::<Stream>).transpose()?;
    let role = match p.role {
        Some(role) => role,
        None => {
            let app = ui.runner.describe(&handle).await?.ok_or_else(|| {
                Error::not_found("app", handle.as_str(), ": the scheduler does not know it")
            })?;
            app.roles
                .first()
                .map(|r| r.name.clone())
                .ok_or_else(|| Error::arg(format!("{handle} has no roles")))?
        }
    };
    let query = LogQuery {
        regex,
        since: None,
        until: None,
        should_tail: p.follow,
        streams,
    };
    let lines = ui
        .runner
        .log_lines(&handle, &role, p.replica, &query)
        .await?;
    let max_lines = p.lines.unwrap_or(1000).clamp(1, MAX_LINES);
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(8);
    tokio::spawn(pump(lines, tx, max_lines));
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            // Lines go out as they come (no proxy buffering).
            (header::HeaderName::from_static("x-accel-buffering"), "no"),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_the_last_lines_within_its_bounds() {
        let mut ring = Ring::new(3);
        ring.push_chunk(b"1\n2\n3\n4\n5".to_vec());
        assert_eq!(ring.take(), b"3\n4\n5");
        assert!(ring.take().is_empty());
        let mut ring = Ring::new(2);
        for chunk in ["a\nb\n", "c\n", "d\ne\n"] {
            ring.push_chunk(chunk.as_bytes().to_vec());
        }
        assert_eq!(ring.take(), b"d\ne\n");
        assert_eq!(ring.chunks.len(), 0);
        let mut ring = Ring::new(10);
        ring.push_chunk(b"a\n".to_vec());
        ring.push_chunk(vec![b'x'; MAX_BYTES + 10]);
        assert_eq!(ring.take().len(), MAX_BYTES);
    }
}
