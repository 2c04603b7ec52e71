//! Starting replicas and copying their output into their log files: the supervisor's process
//! and file I/O, apart from its decisions (`machine.rs`).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::render::{join_path, ReplicaParam};
use super::NAME;
use crate::error::{Error, Result};
use crate::sys;

/// A pipe from a replica and the log it feeds.
struct Pipe {
    src: File,
    partial: Vec<u8>,
}

/// A running replica process: its pid (and process group id), its output pipes and logs.
pub(super) struct Proc {
    pub(super) pid: u32,
    /// stdout and stderr.
    pipes: [Option<Pipe>; 2],
    /// stdout, stderr and combined logs; opened once the batch of replicas being started is
    /// running (`None` until then, or if that failed: output is then dropped and the failure
    /// recorded).
    logs: Option<[File; 3]>,
}

impl Proc {
    /// The pipes still open, as (descriptor, stream index) for `poll`.
    pub(super) fn pipe_fds(&self) -> impl Iterator<Item = (RawFd, usize)> + '_ {
        self.pipes
            .iter()
            .enumerate()
            .filter_map(|(k, p)| Some((p.as_ref()?.src.as_raw_fd(), k)))
    }

    /// Opens its log files for writing, unless they are open; the first failure is kept in
    /// `log_error`.
    pub(super) fn open_logs(&mut self, p: &ReplicaParam, log_error: &mut Option<String>) {
        if self.logs.is_some() {
            return;
        }
        match open_logs(
            &[p.stdout.clone(), p.stderr.clone(), p.combined.clone()],
            false,
        ) {
            Ok(files) => self.logs = Some(files),
            Err(e) => {
                log_error.get_or_insert_with(|| format!("its logs are incomplete: {e}"));
            }
        }
    }

    /// Copies what is available from stream `k` (0 stdout, 1 stderr) into its log and, whole
    /// lines only, into the combined log. Returns false at end of file (or on error); true if
    /// there may be more. The first failed log write (a full disk) is kept in `log_error`;
    /// reading goes on so the replica never blocks.
    pub(super) fn pump(&mut self, k: usize, log_error: &mut Option<String>) -> bool {
        let Some(p) = self.pipes[k].as_mut() else {
            return false;
        };
        let mut buf = [0u8; 65536];
        match p.src.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => {
                p.partial.extend_from_slice(&buf[..n]);
                let whole = p.partial.iter().rposition(|b| *b == b'\n');
                if let Some([out, err, combined]) = self.logs.as_mut() {
                    let log = if k == 0 { out } else { err };
                    note_log_error(log.write_all(&buf[..n]), log_error);
                    if let Some(last) = whole {
                        note_log_error(combined.write_all(&p.partial[..=last]), log_error);
                    }
                }
                if let Some(last) = whole {
                    p.partial.drain(..=last);
                }
                return true;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => return true,
            // Nothing right now: keep the pipe.
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => {}
        }
        self.close_pipe(k, log_error);
        false
    }

    /// After the process exited: copies what its pipes still hold, then closes them, even if
    /// a process that escaped its group holds them open.
    pub(super) fn drain(&mut self, log_error: &mut Option<String>) {
        for k in 0..2 {
            while self.pump(k, log_error) {}
            self.close_pipe(k, log_error);
        }
    }

    /// Closes a pipe; its last unterminated line still belongs in the combined log.
    fn close_pipe(&mut self, k: usize, log_error: &mut Option<String>) {
        if let (Some(p), Some([_, _, combined])) = (self.pipes[k].take(), self.logs.as_mut()) {
            if !p.partial.is_empty() {
                note_log_error(combined.write_all(&p.partial), log_error);
            }
        }
    }
}

fn note_log_error(result: std::io::Result<()>, log_error: &mut Option<String>) {
    if let Err(e) = result {
        log_error
            .get_or_insert_with(|| format!("its logs are incomplete: writing them failed ({e})"));
    }
}

/// Opens (creating, with their directories) a replica's stdout, stderr and combined logs.
pub(super) fn open_logs(paths: &[PathBuf; 3], create_dirs: bool) -> Result<[File; 3]> {
    let open = |p: &PathBuf, create_dir: bool| {
        let dir = p.parent().filter(|_| create_dirs && create_dir);
        dir.map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| OpenOptions::new().create(true).append(true).open(p))
            .map_err(|e| Error::io(format!("opening log {}", p.display()), e))
    };
    // They usually share a directory: create it once.
    let same_dir = |a: &PathBuf, b: &PathBuf| a.parent() == b.parent();
    Ok([
        open(&paths[0], true)?,
        open(&paths[1], !same_dir(&paths[0], &paths[1]))?,
        open(&paths[2], !same_dir(&paths[0], &paths[2]))?,
    ])
}

/// Starts replicas; what stays the same between them (the supervisor's environment, where a
/// program lies on PATH) is looked up once.
pub(super) struct Launcher {
    base_env: BTreeMap<OsString, OsString>,
    os_path: String,
    resolved: BTreeMap<(String, OsString, PathBuf), PathBuf>,
}

fn cannot_start(program: &str, e: std::io::Error) -> Error {
    Error::backend(NAME, format!("cannot start `{program}`: {e}"))
}

impl Launcher {
    pub(super) fn new() -> Launcher {
        Launcher {
            base_env: std::env::vars_os().collect(),
            os_path: std::env::var("PATH").unwrap_or_default(),
            resolved: BTreeMap::new(),
        }
    }

    /// Starts one replica as the leader of its own process group, in its working directory,
    /// with stdin on /dev/null and stdout/stderr piped to us, and none of the signals the
    /// supervisor blocks blocked (`sys::unblock_signals_in_child`: std leaves the mask as it
    /// is). std reports exec failures from `spawn` itself. The child is reaped by the
    /// supervisor's `waitid` loop (dropping a `Child` neither waits nor kills). With
    /// `join_cgroup` it starts inside that cgroup (`cgroup.rs`).
    pub(super) fn launch(
        &mut self,
        p: &ReplicaParam,
        env: &crate::specs::Env,
        join_cgroup: Option<&File>,
    ) -> Result<Proc> {
        // Created (with their directories) before the start, so a replica never runs without
        // them; opened for writing after its batch started (see `Supervisor::launch`).
        drop(open_logs(
            &[p.stdout.clone(), p.stderr.clone(), p.combined.clone()],
            true,
        )?);
        let program = p
            .args
            .first()
            .ok_or_else(|| Error::spec("empty command line"))?
            .clone();
        let cannot = |e: std::io::Error| cannot_start(&program, e);
        let mut child_env = self.base_env.clone();
        for (k, v) in env {
            let v = if k == "PATH" {
                join_path([Some(v.as_str()), Some(self.os_path.as_str())])
            } else {
                v.clone()
            };
            child_env.insert(k.into(), v.into());
        }
        child_env
            .entry("PYTHONUNBUFFERED".into())
            .or_insert_with(|| "x".into());
        let path = self
            .resolve(&program, child_env.get(OsStr::new("PATH")), &p.cwd)
            .map_err(cannot)?;
        let mut command = Command::new(&path);
        command
            .current_dir(&p.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let argv: Vec<&str> = p.args.iter().map(String::as_str).collect();
        let env: Vec<(OsString, OsString)> = child_env.into_iter().collect();
        sys::exec_unmasked(&mut command, &path, &argv, &env, join_cgroup).map_err(cannot)?;
        let mut child = command.spawn().map_err(cannot)?;
        let pipe = |src: Option<OwnedFd>| {
            let src = File::from(src?);
            sys::set_nonblocking(&src).ok()?;
            Some(Pipe {
                src,
                partial: Vec::new(),
            })
        };
        Ok(Proc {
            pid: child.id(),
            pipes: [
                pipe(child.stdout.take().map(OwnedFd::from)),
                pipe(child.stderr.take().map(OwnedFd::from)),
            ],
            logs: None,
        })
    }

    /// Where execve finds `program`: as given when it has a slash (relative to `cwd`, where the
    /// child runs), else the first executable file in the child's PATH, as execvp would search.
    fn resolve(
        &mut self,
        program: &str,
        path: Option<&OsString>,
        cwd: &Path,
    ) -> std::io::Result<PathBuf> {
        if program.contains('/') {
            return Ok(PathBuf::from(program));
        }
        let path = path
            .cloned()
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let key = (program.to_string(), path, cwd.to_path_buf());
        if let Some(found) = self.resolved.get(&key) {
            return Ok(found.clone());
        }
        let found = std::env::split_paths(&key.1)
            .map(|dir| cwd.join(dir).join(program))
            .find(|candidate| {
                std::fs::metadata(candidate)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))?;
        self.resolved.insert(key, found.clone());
        Ok(found)
    }
}
