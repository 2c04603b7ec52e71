//! Fills a `local_cwd` job ledger with N finished apps, for benchmarking `torchx list`.
//!
//! Usage: `TORCHX_STATE_DIR=/tmp/s cargo run --release --example ledger_fill -- 10000`

use torchx::schedulers::default_state_dir;
use torchx::schedulers::local_cwd::ledger::{AppRow, Ledger, ReplicaRow};
use torchx::specs::{AppDef, AppState, Role};

fn main() -> torchx::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let mut ledger = Ledger::open(&default_state_dir())?;
    let app = AppDef::new(
        "echo",
        vec![Role::new("echo", "img").with_entrypoint("echo")],
    );
    let app_json = serde_json::to_string(&app).expect("serialisable");
    let start = 1_700_000_000.0;
    for i in 0..n {
        let app_id = format!("echo-fill{i:06}");
        let created = start + i as f64;
        let state = [AppState::Succeeded, AppState::Failed, AppState::Cancelled][i % 3];
        let row = AppRow {
            app_id: app_id.clone(),
            name: "echo".into(),
            session: "torchx".into(),
            state,
            msg: String::new(),
            created,
            ended: Some(created + 0.5),
            log_dir: format!("/tmp/logs/{app_id}"),
            num_restarts: 0,
            supervisor_pid: Some(1),
            supervisor_start: None,
            submitter_pid: 1,
            submitter_start: None,
            cancel_requested: false,
            app_json: app_json.clone(),
        };
        let replica = ReplicaRow {
            role_idx: 0,
            replica_id: 0,
            role: "echo".into(),
            state,
            attempt: 0,
            pid: Some(1),
            pid_start: None,
            exit_code: Some(0),
            signal: None,
            msg: String::new(),
            started: Some(created),
            ended: Some(created + 0.5),
            stdout: format!("/tmp/logs/{app_id}/echo/0/stdout.log"),
            stderr: format!("/tmp/logs/{app_id}/echo/0/stderr.log"),
            combined: format!("/tmp/logs/{app_id}/echo/0/combined.log"),
            error_file: format!("/tmp/logs/{app_id}/echo/0/error.json"),
        };
        ledger.insert_app(&row, "{}", &[replica])?;
    }
    println!(
        "{n} apps recorded in {}",
        Ledger::path_in(&default_state_dir()).display()
    );
    Ok(())
}
