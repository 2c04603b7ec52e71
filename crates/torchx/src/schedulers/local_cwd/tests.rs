//! The client side against a real ledger.

use std::time::Duration;

use super::ledger::{AppRow, Ledger, Liveness};
use super::LocalCwdScheduler;
use crate::scheduler::Scheduler;
use crate::specs::AppState;

fn recorded(app_id: &str, submitter: (u32, Option<u64>)) -> AppRow {
    AppRow {
        live: Liveness::submitted(app_id.into(), super::now(), submitter),
        name: "echo".into(),
        session: "torchx".into(),
        msg: String::new(),
        log_dir: "/nonexistent".into(),
        num_restarts: 0,
        app_json: "{}".into(),
    }
}

/// A reader that settles an app whose owner is gone needs the ledger's write lock; while it
/// waits for it (another process holds it), every other reader still answers.
#[tokio::test]
async fn a_stalled_settle_holds_up_no_other_reader() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().to_path_buf();
    let mut ledger = Ledger::open(&state).unwrap();
    // Its submitter (no such pid) is gone before any supervisor claimed it: readers settle it.
    ledger
        .insert_app(&recorded("orphan-1", (u32::MAX, None)), "{}", &[])
        .unwrap();
    // Its submitter, this process, lives: nothing to settle.
    ledger
        .insert_app(&recorded("live-1", (std::process::id(), None)), "{}", &[])
        .unwrap();
    let holder = rusqlite::Connection::open(Ledger::path_in(&state)).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();

    let sched = LocalCwdScheduler::with_supervisor(state, "/nonexistent".into());
    let settling = tokio::spawn({
        let sched = sched.clone();
        async move { sched.describe("orphan-1").await }
    });
    // Long enough for the settling reader to reach the write lock (SQLite's busy timeout
    // keeps it there for a minute).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!settling.is_finished(), "settled without the write lock");
    let live = sched.describe("live-1").await.unwrap().unwrap();
    assert_eq!(live.state, AppState::Pending);
    assert!(
        !settling.is_finished(),
        "the other reader answered only after the settling one gave up"
    );

    holder.execute_batch("ROLLBACK").unwrap();
    let orphan = settling.await.unwrap().unwrap().unwrap();
    assert_eq!(orphan.state, AppState::Failed, "{orphan:?}");
    assert!(orphan.msg.contains("submitting process"), "{orphan:?}");
}
