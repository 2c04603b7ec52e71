//! The hang watchdog of a replica whose role sets `hang_timeout`: the supervisor tells it of
//! every output the replica writes, and it looks at the replica's heartbeat file
//! (`TORCHX_HEARTBEAT_FILE`) each time the supervisor wakes (at least once a second while
//! replicas run). A replica with no progress for the timeout is hung: the stack of each of its
//! processes is captured (`py-spy dump` where py-spy is installed, else each process's command
//! line and kernel state) into `stacks.<attempt>` beside its logs, and the machine stops it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// The variable naming the file whose modification counts as progress.
pub(crate) const HEARTBEAT_FILE_ENV: &str = "TORCHX_HEARTBEAT_FILE";

/// How long one `py-spy dump` may take before it is given up (the process is then described
/// by its command line and state).
const DUMP_TIMEOUT: Duration = Duration::from_secs(10);

/// Frames that say a rank waits in a collective.
pub(crate) const COLLECTIVES: [&str; 9] = [
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "barrier",
    "all_to_all",
    "gather",
    "scatter",
    "monitored_barrier",
];

/// One replica's watch over one attempt.
#[derive(Debug)]
pub(super) struct Watch {
    timeout: Duration,
    last: Instant,
    heartbeat: Option<PathBuf>,
    heartbeat_seen: Option<SystemTime>,
    fired: bool,
}

impl Watch {
    /// A watch that starts now; `heartbeat` is this attempt's heartbeat file.
    pub(super) fn new(timeout: Duration, heartbeat: Option<PathBuf>) -> Watch {
        let heartbeat_seen = heartbeat.as_deref().and_then(modified);
        Watch {
            timeout,
            last: Instant::now(),
            heartbeat,
            heartbeat_seen,
            fired: false,
        }
    }

    /// The replica wrote something.
    pub(super) fn progressed(&mut self) {
        self.last = Instant::now();
    }

    /// Whether the replica just became hung (once per attempt). The heartbeat file is looked
    /// at only once the output has been quiet for the timeout: a stat per timeout, not per
    /// wake-up of the supervisor.
    pub(super) fn hung_now(&mut self) -> bool {
        if self.fired || self.last.elapsed() < self.timeout {
            return false;
        }
        let touched = self.heartbeat.as_deref().and_then(modified);
        if let Some(at) = touched.filter(|t| Some(*t) != self.heartbeat_seen) {
            self.heartbeat_seen = Some(at);
            // A touch in the future (a clock step) counts as now.
            let ago = SystemTime::now().duration_since(at).unwrap_or_default();
            if ago < self.timeout {
                self.last = Instant::now().checked_sub(ago).unwrap_or_else(Instant::now);
                return false;
            }
        }
        self.fired = true;
        true
    }

    /// How long until it would be hung without progress.
    pub(super) fn left(&self) -> Duration {
        self.timeout.saturating_sub(self.last.elapsed())
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// A heartbeat file, made empty for an attempt (so that `touch` and a write both count).
pub(super) fn prepare_heartbeat(file: &Path) {
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(file, b"");
}

/// The captured stack of one process of a hung replica.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProcessStack {
    pub pid: u32,
    /// `RANK` in its environment (torchrun's workers), if any.
    pub rank: Option<String>,
    pub cmdline: String,
    /// `py-spy`, or `proc` (command line and kernel state only).
    pub how: &'static str,
    pub text: String,
}

/// The stacks of `pids`, in order. The dumps run at once, within one [`DUMP_TIMEOUT`] for all:
/// the supervisor's loop waits for them.
pub(super) fn capture(pids: &[u32]) -> Vec<ProcessStack> {
    let py_spy = py_spy();
    let dumps: Vec<Option<Dump>> = pids
        .iter()
        .map(|&pid| py_spy.as_deref().and_then(|p| Dump::start(p, pid)))
        .collect();
    let deadline = Instant::now() + DUMP_TIMEOUT;
    pids.iter()
        .zip(dumps)
        .filter_map(|(&pid, dump)| {
            let cmdline = read_proc(pid, "cmdline")?
                .replace('\0', " ")
                .trim()
                .to_string();
            let rank = read_proc(pid, "environ").and_then(|env| {
                env.split('\0')
                    .find_map(|kv| kv.strip_prefix("RANK=").map(str::to_string))
            });
            let (how, text) = match dump.and_then(|d| d.finish(deadline)) {
                Some(text) => ("py-spy", text),
                None => {
                    let note = if is_python(&cmdline) {
                        FAULTHANDLER_NOTE
                    } else {
                        NO_PYTHON_STACK_NOTE
                    };
                    ("proc", format!("{}{note}\n", proc_state(pid)))
                }
            };
            Some(ProcessStack {
                pid,
                rank,
                cmdline,
                how,
                text,
            })
        })
        .collect()
}

/// `$TORCHX_PY_SPY`, else `py-spy` on PATH.
fn py_spy() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TORCHX_PY_SPY") {
        return Some(PathBuf::from(p));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("py-spy"))
        .find(|p| p.is_file())
}

/// A running `py-spy dump --pid`, writing to a private file (a pipe could fill and stall it).
struct Dump {
    child: std::process::Child,
    out: PathBuf,
}

impl Dump {
    fn start(py_spy: &Path, pid: u32) -> Option<Dump> {
        use std::os::unix::fs::OpenOptionsExt;
        let out = std::env::temp_dir().join(format!("torchx-stack-{}-{pid}", std::process::id()));
        let _ = std::fs::remove_file(&out);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&out)
            .ok()?;
        let child = Command::new(py_spy)
            .args(["dump", "--pid", &pid.to_string()])
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(Stdio::null())
            .spawn();
        match child {
            Ok(child) => Some(Dump { child, out }),
            Err(_) => {
                let _ = std::fs::remove_file(&out);
                None
            }
        }
    }

    /// Its dump, if it succeeded by `deadline` (a process that is not Python, or that ptrace
    /// may not reach, gives nothing); else it is killed.
    fn finish(mut self, deadline: Instant) -> Option<String> {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break None;
                }
            }
        };
        let text = std::fs::read_to_string(&self.out).unwrap_or_default();
        let _ = std::fs::remove_file(&self.out);
        status
            .filter(|s| s.success() && !text.trim().is_empty())
            .map(|_| text)
    }
}

fn read_proc(pid: u32, file: &str) -> Option<String> {
    let bytes = std::fs::read(format!("/proc/{pid}/{file}")).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// The variable that arms Python's `faulthandler` at start-up: a watched attempt gets it (unless
/// the role sets it), so a Python process py-spy could not read still shows its threads.
pub(crate) const FAULTHANDLER_ENV: &str = "PYTHONFAULTHANDLER";

/// What a stack read from `/proc` says when the process is Python: its threads' stacks are
/// dumped to its stderr by `faulthandler` on SIGABRT, which a hang that is a failure sends.
pub(crate) const FAULTHANDLER_NOTE: &str = "(Python's faulthandler, armed by PYTHONFAULTHANDLER, \
     dumps every thread's stack to the replica's stderr on SIGABRT, sent when the hang is a \
     failure: `torchx log HANDLE`)";

/// What a stack read from `/proc` says of a process that is not Python, or that no one could
/// read otherwise.
pub(crate) const NO_PYTHON_STACK_NOTE: &str =
    "(no Python stack: not a Python process, or py-spy is not installed or cannot attach)";

/// Whether a command line runs Python (its program's name starts `python`).
pub(super) fn is_python(cmdline: &str) -> bool {
    let program = cmdline.split_whitespace().next().unwrap_or_default();
    let name = program.rsplit('/').next().unwrap_or(program);
    name.starts_with("python")
}

/// Sends SIGABRT to each Python process whose stack py-spy could not take: armed by
/// [`FAULTHANDLER_ENV`], it dumps its threads' stacks to its stderr (the replica's log) as it
/// dies. Only for a hang that is a failure: the process is stopped anyway.
pub(super) fn abort_for_faulthandler(stacks: &[ProcessStack]) {
    let mut sent = false;
    for s in stacks
        .iter()
        .filter(|s| s.how == "proc" && is_python(&s.cmdline))
    {
        sent |= crate::sys::signal_pid(s.pid, crate::sys::SIGABRT);
    }
    if sent {
        // The dump is written as the process dies; a moment for it before the stop.
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// What the kernel says of a process: its state and where it waits.
fn proc_state(pid: u32) -> String {
    let state = read_proc(pid, "status")
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("State:"))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "State: unknown".into());
    let wchan = read_proc(pid, "wchan").unwrap_or_default();
    format!(
        "{state}\nwaiting in: {}\n",
        if wchan.is_empty() {
            "-"
        } else {
            wchan.as_str()
        }
    )
}

/// The collective a stack waits in, if one of its frames names one.
pub(super) fn collective(stack: &str) -> Option<&'static str> {
    stack.lines().find_map(|line| {
        let frame = line.trim_start();
        let function = frame.split([' ', '(']).next().unwrap_or(frame);
        let function = function.rsplit('.').next().unwrap_or(function);
        COLLECTIVES.into_iter().find(|c| function == *c)
    })
}

/// The stacks file of one replica's hung attempt: a block per process, headed by role,
/// replica, rank, pid, how it was captured and its command line.
pub(super) fn render(replica: &str, stacks: &[ProcessStack]) -> String {
    let mut out = String::new();
    for s in stacks {
        let rank = s
            .rank
            .as_deref()
            .map(|r| format!(" rank {r}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "=== {replica}{rank} pid {} ({}): {}\n{}\n",
            s.pid,
            s.how,
            headline(&s.cmdline),
            s.text.trim_end()
        ));
    }
    out
}

/// A command line on one heading line: up to its first line break (a `sh -c` script's
/// first line), at most [`HEADLINE_CHARS`] characters, `…` where cut.
fn headline(cmdline: &str) -> String {
    let first = cmdline.lines().next().unwrap_or_default();
    let mut head: String = first.chars().take(HEADLINE_CHARS).collect();
    if head.len() < cmdline.len() {
        head.push_str(" …");
    }
    head
}

const HEADLINE_CHARS: usize = 240;

/// The blocks of a stacks file as [`render`] (or the hang watch's shell) writes them; lines
/// before the first heading are skipped.
pub(crate) fn parse(text: &str) -> Vec<ProcessStack> {
    let mut out: Vec<ProcessStack> = Vec::new();
    for line in text.lines() {
        let heading = line.strip_prefix("=== ").and_then(|h| {
            let (who, rest) = h.split_once(" pid ")?;
            let (pid, rest) = rest.split_once(" (")?;
            let (how, cmdline) = rest
                .split_once("): ")
                .unwrap_or((rest.trim_end_matches(')'), ""));
            let rank = who.split_once(" rank ").map(|(_, r)| r.to_string());
            Some(ProcessStack {
                pid: pid.parse().ok()?,
                rank,
                cmdline: cmdline.to_string(),
                how: if how == "py-spy" { "py-spy" } else { "proc" },
                text: String::new(),
            })
        });
        match (heading, out.last_mut()) {
            (Some(h), _) => out.push(h),
            (None, Some(last)) => {
                last.text.push_str(line);
                last.text.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// What the stacks say, for the hang's message: the ranks waiting in a collective.
pub(crate) fn summary(stacks: &[ProcessStack]) -> String {
    let waiting: Vec<String> = stacks
        .iter()
        .filter_map(|s| {
            let what = collective(&s.text)?;
            Some(match &s.rank {
                Some(rank) => format!("rank {rank} in {what}"),
                None => format!("pid {} in {what}", s.pid),
            })
        })
        .collect();
    waiting.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANK0: &str = "Thread 10 (idle): \"MainThread\"\n    \
        all_reduce (torch/distributed/distributed_c10d.py:2501)\n    \
        wrapper (torch/distributed/c10d_logger.py:81)\n    \
        train (train.py:12)\n";
    const RANK1: &str = "Thread 11 (idle): \"MainThread\"\n    train (train.py:9)\n";

    fn stack(pid: u32, rank: Option<&str>, text: &str) -> ProcessStack {
        ProcessStack {
            pid,
            rank: rank.map(str::to_string),
            cmdline: "python train.py".into(),
            how: "py-spy",
            text: text.into(),
        }
    }

    #[test]
    fn a_long_or_multi_line_command_is_one_heading_line() {
        assert_eq!(headline("python train.py"), "python train.py");
        assert_eq!(headline("sh -c :\nexact=\nours() {"), "sh -c : …");
        let long = "x".repeat(HEADLINE_CHARS + 10);
        assert_eq!(headline(&long).chars().count(), HEADLINE_CHARS + 2);
    }

    #[test]
    fn a_rendered_file_parses_back() {
        let stacks = vec![
            stack(7, Some("0"), "Thread 1:\n    all_reduce (x.py:3)"),
            stack(8, None, "State: S"),
        ];
        let parsed = parse(&render("trainer/0", &stacks));
        assert_eq!(parsed.len(), 2, "{parsed:?}");
        assert_eq!((parsed[0].pid, parsed[0].rank.as_deref()), (7, Some("0")));
        assert_eq!(parsed[1].rank, None);
        assert_eq!(summary(&parsed), summary(&stacks));
    }

    #[test]
    fn collectives_are_found_by_frame_name() {
        assert_eq!(collective(RANK0), Some("all_reduce"));
        assert_eq!(collective(RANK1), None);
        assert_eq!(collective("    barrier (x.py:1)"), Some("barrier"));
        assert_eq!(
            collective("    torch.distributed.broadcast (x.py:1)"),
            Some("broadcast")
        );
        // A name that merely contains one is not one.
        assert_eq!(collective("    my_all_reduce_helper (x.py:1)"), None);
    }

    #[test]
    fn the_summary_names_the_ranks_in_a_collective_and_the_file_heads_each_process() {
        let stacks = [
            stack(10, Some("0"), RANK0),
            stack(11, Some("1"), RANK1),
            stack(9, None, RANK0),
        ];
        assert_eq!(
            summary(&stacks),
            "rank 0 in all_reduce, pid 9 in all_reduce"
        );
        let text = render("trainer/0", &stacks);
        assert!(
            text.starts_with("=== trainer/0 rank 0 pid 10 (py-spy): python train.py\nThread 10"),
            "{text}"
        );
        assert!(
            text.contains("=== trainer/0 rank 1 pid 11 (py-spy)"),
            "{text}"
        );
        assert!(text.contains("=== trainer/0 pid 9 (py-spy)"), "{text}");
    }

    #[test]
    fn output_and_the_heartbeat_file_are_progress() {
        let dir = tempfile::tempdir().unwrap();
        let beat = dir.path().join("heartbeat.0");
        prepare_heartbeat(&beat);
        let mut w = Watch::new(Duration::from_millis(300), Some(beat.clone()));
        std::thread::sleep(Duration::from_millis(200));
        w.progressed();
        std::thread::sleep(Duration::from_millis(200));
        assert!(!w.hung_now(), "output 200 ms ago");
        // A touch (a newer modification time) is progress too.
        let later = SystemTime::now() + Duration::from_secs(1);
        std::fs::File::options()
            .write(true)
            .open(&beat)
            .unwrap()
            .set_modified(later)
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        assert!(!w.hung_now(), "touched just now");
        assert!(w.left() > Duration::from_millis(250), "{:?}", w.left());
        std::thread::sleep(Duration::from_millis(350));
        assert!(w.hung_now());
        assert!(!w.hung_now(), "once per attempt");
    }

    #[test]
    fn a_process_is_captured_with_its_command_line_and_environment() {
        let mut child = Command::new("sleep")
            .arg("30")
            .env("RANK", "3")
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let stacks = capture(&[child.id()]);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(stacks.len(), 1);
        assert_eq!(stacks[0].cmdline, "sleep 30");
        assert_eq!(stacks[0].rank.as_deref(), Some("3"));
        // sleep is not Python: py-spy (if installed) cannot dump it; its state is described.
        assert_eq!(stacks[0].how, "proc");
        assert!(stacks[0].text.contains("State:"), "{}", stacks[0].text);
    }
}
