//! A container's log, from the engine's stream, as lines.

use async_trait::async_trait;
use futures_util::StreamExt;

use crate::error::Result;
use crate::scheduler::{LineBuffer, LogLines};

pub(super) type ByteStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Vec<u8>>> + Send>>;

/// Lines of a container's log stream.
pub(super) struct DockerLogLines {
    pub(super) stream: ByteStream,
    pub(super) lines: LineBuffer,
    pub(super) done: bool,
}

#[async_trait]
impl LogLines for DockerLogLines {
    async fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            if let Some(line) = self.lines.next_line() {
                return Ok(Some(line));
            }
            if self.done {
                return Ok(self.lines.finish());
            }
            match self.stream.next().await {
                Some(chunk) => self.lines.push(&chunk?),
                None => self.done = true,
            }
        }
    }
}
