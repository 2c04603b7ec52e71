//! Building blocks for [`LogLines`](super::LogLines) implementations: splitting bytes into
//! lines, and following a log file that another process writes.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// Splits a byte stream into lines (without their `\n`); a last unterminated piece is a line
/// too, once the stream has ended.
#[derive(Debug, Default)]
pub struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    /// Appends bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// The next complete line, if any.
    pub fn next_line(&mut self) -> Option<String> {
        let pos = self.pending.iter().position(|b| *b == b'\n')?;
        let line: Vec<u8> = self.pending.drain(..=pos).collect();
        Some(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned())
    }

    /// What is left after the stream ended, if anything.
    pub fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let rest = std::mem::take(&mut self.pending);
        Some(String::from_utf8_lossy(&rest).into_owned())
    }
}

/// What [`FollowedFile::poll_line`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A line.
    Line(String),
    /// Nothing new yet: wait, then poll again.
    Wait,
    /// The writer finished and every line was returned.
    End,
}

/// A log file read as it grows.
#[derive(Debug)]
pub struct FollowedFile {
    path: PathBuf,
    file: Option<File>,
    lines: LineBuffer,
}

impl FollowedFile {
    /// Follows `path` (which may not exist yet).
    pub fn new(path: PathBuf) -> Self {
        FollowedFile {
            path,
            file: None,
            lines: LineBuffer::default(),
        }
    }

    /// The next line, or whether to wait or stop. `finished` says whether the writer is done;
    /// it is asked before each read, so nothing written before it finished is missed. A file
    /// still missing once the writer finished is an error.
    pub fn poll_line(&mut self, mut finished: impl FnMut() -> bool) -> Result<Step> {
        let err = |path: &PathBuf, e| Error::io(format!("reading log {}", path.display()), e);
        loop {
            if let Some(line) = self.lines.next_line() {
                return Ok(Step::Line(line));
            }
            let finished = finished();
            if self.file.is_none() {
                match File::open(&self.path) {
                    Ok(f) => self.file = Some(f),
                    Err(_) if !finished => return Ok(Step::Wait),
                    Err(e) => return Err(err(&self.path, e)),
                }
            }
            let mut buf = Vec::new();
            if let Some(f) = self.file.as_mut() {
                f.read_to_end(&mut buf).map_err(|e| err(&self.path, e))?;
            }
            if !buf.is_empty() {
                self.lines.push(&buf);
                continue;
            }
            if !finished {
                return Ok(Step::Wait);
            }
            return Ok(self.lines.finish().map_or(Step::End, Step::Line));
        }
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
}
