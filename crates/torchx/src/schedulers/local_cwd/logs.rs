//! A replica's log file, read to its end or followed until the app ends.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::Shared;
use crate::error::Result;
use crate::scheduler::{Follow, FollowedFile, Step, Take};

/// Lines of a log file, optionally following it until the app ends.
pub(super) struct FileLines {
    file: FollowedFile,
    tail: bool,
    app_id: String,
    shared: Arc<Shared>,
    exited: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Whether the app ended: its supervisor (started by this process) exited, or the ledger says so.
fn app_finished(
    exited: Option<&tokio::sync::watch::Receiver<bool>>,
    shared: &Shared,
    app_id: &str,
) -> bool {
    if exited.is_some_and(|e| *e.borrow()) {
        return true;
    }
    match shared.current_state(app_id) {
        Ok(Some(state)) => state.is_terminal(),
        _ => true,
    }
}

impl FileLines {
    pub(super) fn new(
        path: PathBuf,
        tail: bool,
        app_id: &str,
        shared: Arc<Shared>,
        exited: Option<tokio::sync::watch::Receiver<bool>>,
    ) -> FileLines {
        FileLines {
            file: FollowedFile::new(path),
            tail,
            app_id: app_id.to_string(),
            shared,
            exited,
        }
    }

    /// Sleeps `pause` (then doubles it, up to 50 ms), or less if the supervisor exits.
    async fn pause(&mut self, pause: &mut Duration) {
        let sleep = tokio::time::sleep(*pause);
        match self.exited.as_mut() {
            Some(exited) => {
                tokio::select! {
                    _ = sleep => {}
                    _ = exited.changed() => {}
                }
            }
            None => sleep.await,
        }
        *pause = (*pause * 2).min(Duration::from_millis(50));
    }
}

#[async_trait]
impl Follow for FileLines {
    /// Polls the file until it has what `take` asks for or ends.
    async fn follow(&mut self, mut take: Take<'_>) -> Result<Step> {
        // Poll quickly at first (short jobs end in milliseconds), then back off.
        let mut pause = Duration::from_millis(1);
        loop {
            let FileLines {
                file,
                tail,
                app_id,
                shared,
                exited,
            } = self;
            let finished = || !*tail || app_finished(exited.as_ref(), shared, app_id);
            match file.poll(take.reborrow(), finished)? {
                Step::Wait => self.pause(&mut pause).await,
                step => return Ok(step),
            }
        }
    }
}
