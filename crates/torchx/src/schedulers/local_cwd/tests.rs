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

/// However many calls come at once, at most `MAX_LEDGERS` connections are open (each is three
/// open files); the others wait for one and all finish.
#[test]
fn concurrent_calls_share_a_bounded_set_of_connections() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let sched = LocalCwdScheduler::with_supervisor(dir.path().to_path_buf(), "/x".into());
    let (in_use, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for _ in 0..4 * super::MAX_LEDGERS {
            scope.spawn(|| {
                sched
                    .shared
                    .with_ledger(|l| {
                        let now = in_use.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        in_use.fetch_sub(1, Ordering::SeqCst);
                        l.list()
                    })
                    .unwrap();
            });
        }
    });
    let most = most.load(Ordering::SeqCst);
    assert!((2..=super::MAX_LEDGERS).contains(&most), "{most} at once");
    let pool = sched.shared.pool();
    assert!(
        most <= pool.open && pool.open <= super::MAX_LEDGERS,
        "{} open",
        pool.open
    );
    assert_eq!(pool.idle.len(), pool.open, "every connection put back");
}

/// While the guard of an app whose supervisor died is still writing its verdict, a reader
/// shows the verdict with its reason (not its state beside the row's empty message), and
/// leaves the writing to the guard.
#[tokio::test]
async fn a_verdict_the_guard_has_not_written_yet_is_shown_with_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let mut ledger = Ledger::open(&state).unwrap();
    let mut supervisor = std::process::Command::new("true").spawn().unwrap();
    let dead = supervisor.id();
    supervisor.wait().unwrap();
    let mut row = recorded("orphan-2", (std::process::id(), None));
    row.live.state = AppState::Running;
    row.live.supervisor_pid = Some(dead);
    ledger.insert_app(&row, "{}", &[]).unwrap();
    // A stand-in guard: a process whose command line is a guard's (`<program> __guard <id>`).
    std::fs::write(dir.path().join(super::guard::GUARD_ARG), "sleep 30\n").unwrap();
    let mut guard = std::process::Command::new("sh")
        .args([super::guard::GUARD_ARG, "orphan-2"])
        .current_dir(dir.path())
        .spawn()
        .unwrap();

    let sched = LocalCwdScheduler::with_supervisor(state, "/nonexistent".into());
    let shown = sched.describe("orphan-2").await;
    let recorded = ledger.app_liveness("orphan-2").unwrap().unwrap().state;
    guard.kill().unwrap();
    guard.wait().unwrap();
    let shown = shown.unwrap().unwrap();
    assert_eq!(shown.state, AppState::Failed, "{shown:?}");
    assert!(
        shown
            .msg
            .contains(&format!("the supervisor (pid {dead}) died")),
        "{shown:?}"
    );
    assert_eq!(recorded, AppState::Running, "written by the reader");
}
