//! Submitting: the app recorded in the ledger, then its detached supervisor started (or,
//! embedded, run in this process's background).

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use super::ledger::{AppRow, Liveness, ReplicaRow};
use super::{after, check_app_id, now, LocalCwdScheduler, PopenRequest, NAME};
use super::{entry, supervisor};
use crate::error::{Error, Result};
use crate::specs::{AppDef, AppState};
use crate::sys;

impl LocalCwdScheduler {
    pub(super) fn launch(&self, req: &PopenRequest, app: &AppDef, session: &str) -> Result<String> {
        check_app_id(&req.app_id)?;
        let exe = match &self.shared.supervisor {
            Some(exe) => exe.clone(),
            None => entry::supervisor_exe()?,
        };
        let json = |v: serde_json::Result<String>| {
            v.map_err(|e| {
                Error::backend(NAME, format!("cannot serialise the app: {e}")).with_source(e)
            })
        };
        let row = AppRow {
            live: Liveness::submitted(
                req.app_id.clone(),
                now(),
                (std::process::id(), sys::proc_start_time(std::process::id())),
            ),
            name: app.name.clone(),
            session: session.to_string(),
            msg: String::new(),
            log_dir: req.log_dir.display().to_string(),
            num_restarts: 0,
            app_json: json(serde_json::to_string(app))?,
        };
        let replicas: Vec<ReplicaRow> = req
            .roles
            .iter()
            .enumerate()
            .flat_map(|(ri, role)| {
                role.replicas.iter().enumerate().map(move |(i, p)| {
                    let logs =
                        [&p.stdout, &p.stderr, &p.combined].map(|path| path.display().to_string());
                    let error_file = p.env.get("TORCHELASTIC_ERROR_FILE");
                    let [stdout, stderr, combined] = logs;
                    ReplicaRow::pending(
                        ri as u32,
                        i as u32,
                        role.role.clone(),
                        [
                            stdout,
                            stderr,
                            combined,
                            error_file.cloned().unwrap_or_default(),
                        ],
                    )
                })
            })
            .collect();
        let request_json = json(serde_json::to_string(req))?;
        // Before anything is recorded: a log_dir that cannot exist fails the submission alone.
        crate::schedulers::create_private_dir(&req.log_dir).map_err(|e| {
            let unusable = e.io_error().map(std::io::Error::kind).is_some_and(|k| {
                matches!(
                    k,
                    std::io::ErrorKind::NotADirectory
                        | std::io::ErrorKind::PermissionDenied
                        | std::io::ErrorKind::NotFound
                        | std::io::ErrorKind::ReadOnlyFilesystem
                        | std::io::ErrorKind::InvalidFilename
                )
            });
            if !unusable {
                return e;
            }
            Error::config(format!(
                "cannot create the app's log directory {} (the run option log_dir, or under \
                 $TORCHX_STATE_DIR): {}",
                req.log_dir.display(),
                e.io_error().map(ToString::to_string).unwrap_or_default()
            ))
            .with_source(e)
        })?;
        // The checkpoint directories of every attempt (TORCHX_CHECKPOINT_DIR), there before any.
        // (A container's is a path inside it: local_docker makes the host side.)
        let checkpoints = req
            .roles
            .iter()
            .flat_map(|r| &r.replicas)
            .filter(|r| r.container.is_none())
            .filter_map(|r| r.env.get("TORCHX_CHECKPOINT_DIR"));
        for dir in checkpoints.collect::<std::collections::BTreeSet<_>>() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating checkpoint directory {dir}"), e))?;
        }
        self.with_ledger(|l| l.insert_app(&row, &request_json, &replicas))?;
        // From here on the app is recorded: any failure is recorded on it too.
        self.start_supervisor(&exe, req).inspect_err(|e| {
            let _ = self.with_ledger(|l| {
                l.finish_if_unfinished(&req.app_id, AppState::Failed, &e.to_string(), now())
            });
        })?;
        Ok(req.app_id.clone())
    }

    fn start_supervisor(&self, exe: &Path, req: &PopenRequest) -> Result<()> {
        let log_path = req.log_dir.join("supervisor.log");
        let log = File::create(&log_path)
            .map_err(|e| Error::io(format!("creating {}", log_path.display()), e))?;
        let mut child = Command::new(exe)
            .arg(supervisor::SUPERVISE_ARG)
            .env("TORCHX_STATE_DIR", self.state_dir())
            // The user's own, where `torchx status` finds a dependency (local_docker's apps
            // have a ledger of their own).
            .env(
                after::USER_STATE_DIR,
                crate::schedulers::default_state_dir(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| {
                Error::backend(
                    NAME,
                    format!("cannot start the supervisor `{}`: {e}", exe.display()),
                )
                .with_source(e)
            })?;
        if let Some(mut stdin) = child.stdin.take() {
            let _ = writeln!(stdin, "{}", req.app_id);
        }
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        // Reap it whenever it ends (a long-lived caller collects no zombies) and tell the log
        // followers in this process.
        let (exited, on_exit) = tokio::sync::watch::channel(false);
        if let Ok(mut exits) = self.shared.exits.lock() {
            exits.insert(req.app_id.clone(), on_exit);
        }
        std::thread::spawn(move || {
            let _ = child.wait();
            let _ = exited.send(true);
        });
        match line.trim_end() {
            "ready" => Ok(()),
            l => Err(Error::backend(
                NAME,
                match l.strip_prefix("failed: ") {
                    Some(why) => why.to_string(),
                    None => format!(
                        "the supervisor exited before starting the app; see {}",
                        log_path.display()
                    ),
                },
            )),
        }
    }
}
