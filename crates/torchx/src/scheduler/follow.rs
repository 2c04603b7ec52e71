//! Building blocks for [`LogLines`](super::LogLines) implementations: splitting bytes into
//! lines, and following a log file that another process writes.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use async_trait::async_trait;

use crate::error::{Error, Result};

/// Splits a byte stream into lines (without their `\n`); a last unterminated piece is a line
/// too, once the stream has ended. Lines are cut from a read position, not drained from the
/// front, so taking every line of a chunk is linear in its size.
#[derive(Debug, Default)]
pub(crate) struct LineBuffer {
    pending: Vec<u8>,
    /// Where the next line starts in `pending`.
    start: usize,
}

impl LineBuffer {
    /// Appends bytes (from a stream that is not a file: a container's log stream).
    #[cfg(any(test, feature = "docker"))]
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.compact();
        self.pending.extend_from_slice(bytes);
    }

    /// Appends up to `max` bytes read from `src` (one read), straight into the buffer; the
    /// number of bytes read, 0 at its end.
    pub(crate) fn read_from(&mut self, src: &mut impl Read, max: usize) -> std::io::Result<usize> {
        self.compact();
        self.pending.reserve(max);
        // `take(..).read_to_end` reads into the spare capacity without zeroing it first.
        let before = self.pending.len();
        src.take(max as u64).read_to_end(&mut self.pending)?;
        Ok(self.pending.len() - before)
    }

    /// Drops what was already returned (everything before `start`).
    fn compact(&mut self) {
        if self.start > 0 {
            self.pending.drain(..self.start);
            self.start = 0;
        }
    }

    /// The next complete line, if any.
    pub(crate) fn next_line(&mut self) -> Option<String> {
        let rest = &self.pending[self.start..];
        let len = memchr::memchr(b'\n', rest)?;
        let line = String::from_utf8_lossy(&rest[..len]).into_owned();
        self.start += len + 1;
        Some(line)
    }

    /// Appends every complete line (with its `\n`) to `out`; false if there was none.
    pub(crate) fn take_lines(&mut self, out: &mut Vec<u8>) -> bool {
        let rest = &self.pending[self.start..];
        let Some(last) = memchr::memrchr(b'\n', rest) else {
            return false;
        };
        if out.is_empty() && self.start == 0 {
            // Hand the buffer over whole and keep only the unterminated tail: the lines are not
            // copied (the caller's empty buffer, with its capacity, becomes ours).
            let tail = self.pending.split_off(last + 1);
            std::mem::swap(out, &mut self.pending);
            self.pending.extend_from_slice(&tail);
            return true;
        }
        out.extend_from_slice(&rest[..=last]);
        self.start += last + 1;
        true
    }

    /// What is left after the stream ended, if anything.
    pub(crate) fn finish(&mut self) -> Option<String> {
        let rest = &self.pending[self.start..];
        let line = (!rest.is_empty()).then(|| String::from_utf8_lossy(rest).into_owned());
        self.pending.clear();
        self.start = 0;
        line
    }
}

/// How [`FollowedFile::poll`] hands out what it read.
#[derive(Debug)]
pub enum Take<'a> {
    /// One line, as [`Step::Line`].
    Line,
    /// Every complete line read so far, appended with their `\n` to the buffer: [`Step::Lines`].
    Lines(&'a mut Vec<u8>),
}

impl Take<'_> {
    /// The same request again, for another poll.
    pub fn reborrow(&mut self) -> Take<'_> {
        match self {
            Take::Line => Take::Line,
            Take::Lines(out) => Take::Lines(out),
        }
    }

    /// What a follower returns for `step` (not `Wait`): the line of [`LogLines::next_line`], or
    /// whether [`LogLines::next_lines`] appended any.
    ///
    /// [`LogLines::next_line`]: super::LogLines::next_line
    /// [`LogLines::next_lines`]: super::LogLines::next_lines
    pub fn line(step: Step) -> Option<String> {
        match step {
            Step::Line(line) => Some(line),
            _ => None,
        }
    }
}

/// What [`FollowedFile::poll`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A line.
    Line(String),
    /// Lines were appended to the caller's buffer.
    Lines,
    /// Nothing new yet: wait, then poll again.
    Wait,
    /// The writer finished and every line was returned.
    End,
}

/// How much of a log file is read at a time: memory stays bounded whatever the file's size.
const CHUNK: usize = 64 * 1024;

/// A log file read as it grows.
#[derive(Debug)]
pub(crate) struct FollowedFile {
    path: PathBuf,
    file: Option<File>,
    lines: LineBuffer,
}

/// Polls `file` until it has what `take` asks for; when following (`tail`), until `ended`
/// says the job is over, asking it every `interval` the file has nothing more. After the end
/// the file is read once more, so nothing written before it is missed.
pub(crate) async fn follow_file<F, Fut>(
    file: &mut FollowedFile,
    mut take: Take<'_>,
    tail: bool,
    interval: std::time::Duration,
    mut ended: F,
) -> Result<Step>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    loop {
        match file.poll(take.reborrow(), || !tail)? {
            Step::Wait => {}
            step => return Ok(step),
        }
        if ended().await? {
            return file.poll(take, || true);
        }
        tokio::time::sleep(interval).await;
    }
}

impl FollowedFile {
    /// Follows `path` (which may not exist yet).
    pub(crate) fn new(path: PathBuf) -> Self {
        FollowedFile {
            path,
            file: None,
            lines: LineBuffer::default(),
        }
    }

    /// The next line, or whether to wait or stop; see [`FollowedFile::poll`].
    #[cfg(test)]
    pub(crate) fn poll_line(&mut self, finished: impl FnMut() -> bool) -> Result<Step> {
        self.poll(Take::Line, finished)
    }

    /// The next line or lines (`take`), or whether to wait or stop. `finished` says whether the
    /// writer is done; it is asked only when the file has nothing more, and the file is read
    /// once more after it said yes, so nothing written before the writer finished is missed. A
    /// last unterminated line is handed out (with a `\n` in a batch) once the writer finished.
    /// A file still missing then is an error.
    pub(crate) fn poll(
        &mut self,
        mut take: Take<'_>,
        mut finished: impl FnMut() -> bool,
    ) -> Result<Step> {
        let mut writer_done = false;
        loop {
            match &mut take {
                Take::Line => {
                    if let Some(line) = self.lines.next_line() {
                        return Ok(Step::Line(line));
                    }
                }
                Take::Lines(out) => {
                    if self.lines.take_lines(out) {
                        return Ok(Step::Lines);
                    }
                }
            }
            if self.read_chunk(writer_done)? {
                continue;
            }
            if writer_done {
                return Ok(match (self.lines.finish(), take) {
                    (None, _) => Step::End,
                    (Some(line), Take::Line) => Step::Line(line),
                    (Some(line), Take::Lines(out)) => {
                        out.extend_from_slice(line.as_bytes());
                        out.push(b'\n');
                        Step::Lines
                    }
                });
            }
            if !finished() {
                return Ok(Step::Wait);
            }
            writer_done = true;
        }
    }

    /// Reads the next chunk into the line buffer; false when there was nothing to read (the
    /// file does not exist yet, or has no more bytes for now).
    fn read_chunk(&mut self, writer_done: bool) -> Result<bool> {
        let err = |path: &PathBuf, e| Error::io(format!("reading log {}", path.display()), e);
        let file = match &mut self.file {
            Some(f) => f,
            None => match File::open(&self.path) {
                Ok(f) => self.file.insert(f),
                Err(_) if !writer_done => return Ok(false),
                Err(e) => return Err(err(&self.path, e)),
            },
        };
        match self.lines.read_from(file, CHUNK) {
            Ok(n) => Ok(n > 0),
            Err(e) => Err(err(&self.path, e)),
        }
    }
}

/// A log read by following a file: `follow` hands out what `take` asks for, waiting while the
/// writer may still write. Every `Follow` is a [`LogLines`](super::LogLines).
#[async_trait]
pub trait Follow: Send {
    /// The next line or lines, or the end.
    async fn follow(&mut self, take: Take<'_>) -> Result<Step>;
}

#[async_trait]
impl<T: Follow> super::LogLines for T {
    async fn next_line(&mut self) -> Result<Option<String>> {
        Ok(Take::line(self.follow(Take::Line).await?))
    }

    async fn next_lines(&mut self, out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.follow(Take::Lines(out)).await? == Step::Lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_the_unterminated_rest() {
        let mut b = LineBuffer::default();
        b.push(b"a\nb");
        assert_eq!(b.next_line().as_deref(), Some("a"));
        assert_eq!(b.next_line(), None);
        b.push(b"c\nd");
        assert_eq!(b.next_line().as_deref(), Some("bc"));
        assert_eq!(b.finish().as_deref(), Some("d"));
        assert_eq!(b.finish(), None);
    }

    #[test]
    fn follows_a_growing_file_until_the_writer_finishes() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("log");
        let mut f = FollowedFile::new(path.clone());
        assert_eq!(
            f.poll_line(|| false).unwrap(),
            Step::Wait,
            "missing file, writer running"
        );
        std::fs::write(&path, "one\ntw").unwrap();
        assert_eq!(f.poll_line(|| false).unwrap(), Step::Line("one".into()));
        assert_eq!(
            f.poll_line(|| false).unwrap(),
            Step::Wait,
            "partial line held back"
        );
        assert_eq!(f.poll_line(|| true).unwrap(), Step::Line("tw".into()));
        assert_eq!(f.poll_line(|| true).unwrap(), Step::End);
        let mut gone = FollowedFile::new(tmp.path().join("never"));
        assert!(gone.poll_line(|| true).is_err());
    }

    #[test]
    fn batches_hand_out_whole_lines_and_keep_the_tail() {
        let mut b = LineBuffer::default();
        b.push(b"a\nb\nc");
        let mut out = Vec::new();
        assert!(b.take_lines(&mut out));
        assert_eq!(out, b"a\nb\n");
        assert!(!b.take_lines(&mut out), "only an unterminated tail is left");
        b.push(b"d\ne\n");
        assert!(b.take_lines(&mut out), "appends to a non-empty batch");
        assert_eq!(out, b"a\nb\ncd\ne\n");
        assert_eq!(b.finish(), None);
    }

    #[test]
    fn lines_across_chunk_boundaries_come_out_whole_and_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("log");
        // Line lengths chosen to straddle the 64 KiB reads, including empty lines and lines
        // longer than a chunk.
        let lines: Vec<String> = (0..400)
            .map(|i| "x".repeat((i * 7919) % (3 * CHUNK / 2)) + &i.to_string())
            .chain([String::new(), String::new(), "last".to_string()])
            .collect();
        let mut text = lines.join("\n");
        text.push_str("\nunterminated");
        std::fs::write(&path, &text).unwrap();
        let mut f = FollowedFile::new(path);
        let mut got = Vec::new();
        loop {
            match f.poll_line(|| true).unwrap() {
                Step::Line(l) => got.push(l),
                Step::End => break,
                Step::Wait | Step::Lines => panic!("a finished writer never makes us wait"),
            }
        }
        let mut want = lines;
        want.push("unterminated".into());
        assert_eq!(got.len(), want.len());
        assert!(got == want, "lines differ");
    }
}
