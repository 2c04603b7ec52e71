//! `torchx run`'s arguments, shared by what submits through them (groups, pipelines, reruns):
//! the definition, a recorded command line parsed back, the `--timeout` value.

use std::time::Duration;

use clap::Args;
use torchx::group::{GroupRecord, Task};
use torchx::{Error, Result};

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The scheduler to run on (default: [cli:run] scheduler in .torchxconfig, else local_cwd).
    #[arg(short = 's', long)]
    pub scheduler: Option<String>,
    /// Scheduler run options: k1=v1,k2=v2 (lists with ; or ,). Also -cfg.
    #[arg(long = "cfg", alias = "scheduler_args", value_name = "CFG")]
    pub cfg: Vec<String>,
    /// Print the AppDef and the scheduler's native request; submit nothing.
    #[arg(long)]
    pub dryrun: bool,
    /// Wait for the app to finish (local schedulers always wait).
    #[arg(long)]
    pub wait: bool,
    /// Stream the logs while waiting (implies --wait).
    #[arg(long, conflicts_with = "detach")]
    pub log: bool,
    /// Print the handle and return at once; the app keeps running (local schedulers wait by
    /// default).
    #[arg(short = 'd', long, conflicts_with = "wait")]
    pub detach: bool,
    /// Give up waiting after this many seconds (exit code 7; the app keeps running).
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<String>,
    /// Local directory built into the job's image (container schedulers) or copied for it
    /// (slurm job_dir). Default: `[cli:run] workspace`, else the current directory, where the
    /// scheduler supports workspaces; `--workspace ""` ships nothing.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<String>,
    /// Tracker parent run id.
    #[arg(long = "parent_run_id", alias = "parent-run-id")]
    pub parent_run_id: Option<String>,
    /// With -s auto:S1,S2,...: a job still pending (not started) this long after its
    /// submission is cancelled and submitted to the next scheduler whose plan was ok (90s,
    /// 10m, 2h); `run` prints a handle that follows it.
    #[arg(long = "failover_after", value_name = "DURATION")]
    pub failover_after: Option<String>,
    /// Submit without the pre-flight checks (a script the job runs that is not there).
    #[arg(long = "skip_preflight")]
    pub skip_preflight: bool,
    /// Start only once this job (or group) has ended as required: HANDLE[:ok|:notok|:any]
    /// (ok, the default: SUCCEEDED; notok: FAILED or CANCELLED; any: any end). Repeatable.
    #[arg(long, value_name = "HANDLE[:COND]")]
    pub after: Vec<String>,
    /// Wall-clock limit of one attempt of every role: 90s, 30m, 4h, 1d2h (a role's own wins).
    #[arg(long = "time_limit", value_name = "DURATION")]
    pub time_limit: Option<String>,
    /// SIG@SECONDS: replicas get SIG that long before the time limit (default USR1@90, at most
    /// a quarter of the limit), to checkpoint and exit with the requeue code. torchrun
    /// (dist.ddp) is told to pass it on to its workers (PET_SIGNALS_TO_HANDLE, torch 2.15+);
    /// an older torchrun dies of it, and its workers get it from torchx instead.
    #[arg(long = "checkpoint_signal", value_name = "SIG@SECONDS")]
    pub checkpoint_signal: Option<String>,
    /// Restarts after failures, for roles that set none.
    #[arg(long = "max_retries", value_name = "N")]
    pub max_retries: Option<String>,
    /// The exit code that asks for a requeue (default 75); requeues do not spend max_retries.
    #[arg(long = "requeue_exit_code", value_name = "N")]
    pub requeue_exit_code: Option<String>,
    /// Requeues allowed after the requeue code or a preemption (default 100).
    #[arg(long = "max_requeues", value_name = "N")]
    pub max_requeues: Option<String>,
    /// Where TORCHX_CHECKPOINT_DIR points in every attempt (for container schedulers: a path
    /// on one of the role's mounts).
    #[arg(long = "checkpoint_dir", value_name = "PATH")]
    pub checkpoint_dir: Option<String>,
    /// A replica with no progress (a line on stdout or stderr, or a touch of
    /// TORCHX_HEARTBEAT_FILE) for DURATION is hung: the stacks of its processes are captured
    /// (`torchx log --stacks`) and its attempt stopped (requeued under the recovery options,
    /// else a failure). Every builtin scheduler but lsf.
    #[arg(long = "hang_timeout", value_name = "DURATION")]
    pub hang_timeout: Option<String>,
    /// Run an array of tasks: N (0..N-1), A-B or A-B:STEP, with %K to run at most K at once;
    /// component args and env may say ${array_index}. Prints one group handle.
    #[arg(long, value_name = "SPEC")]
    pub array: Option<String>,
    /// Sweep KEY over values: KEY=V1,V2,... (repeat for the grid of several); component args
    /// and env say ${sweep.KEY}.
    #[arg(long, value_name = "KEY=V1,V2")]
    pub sweep: Vec<String>,
    /// Sweep the points of a file: JSON lines, or CSV with a header.
    #[arg(long = "sweep_file", value_name = "FILE", conflicts_with = "sweep")]
    pub sweep_file: Option<String>,
    /// With --sweep or --sweep_file: run at most K tasks at once.
    #[arg(long = "max_concurrent", value_name = "K")]
    pub max_concurrent: Option<u32>,
    /// Set for a pipeline's step (by its submission and the pipeline's dry run): what the
    /// pipeline gives its job, and where `run` reports instead of printing.
    #[arg(skip)]
    pub step: Option<StepRun>,
    /// Set by `torchx rerun`: the tasks to run again and the group they come from.
    #[arg(skip)]
    pub rerun_of: Option<RerunOf>,
    /// Set by `torchx __submit-group`: the group whose pending tasks this run submits.
    #[arg(skip)]
    pub rest_of: Option<torchx::group::GroupRecord>,
    /// Machine-readable output (the dry run, or the handle and final status).
    #[arg(long)]
    pub json: bool,
    /// The component (utils.echo, ./app.yaml, ./c.toml:name) followed by its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMPONENT_AND_ARGS"
    )]
    pub component_and_args: Vec<String>,
}

/// A recorded `torchx run` command line (`torchx run ARGS...`: a group's tasks, a rerun)
/// parsed as the command line is.
pub fn parse_recorded(argv: &[String]) -> std::result::Result<RunArgs, clap::Error> {
    #[derive(Debug, clap::Parser)]
    #[command(name = "torchx", infer_long_args = true)]
    struct Recorded {
        #[arg(long = "log_level", alias = "log-level")]
        _log_level: Option<String>,
        #[arg(short, long)]
        _verbose: bool,
        #[command(subcommand)]
        run: Run,
    }
    #[derive(Debug, clap::Subcommand)]
    enum Run {
        #[command(infer_long_args = true)]
        Run(Box<RunArgs>),
    }
    let Recorded {
        run: Run::Run(run), ..
    } = clap::Parser::try_parse_from(argv)?;
    Ok(*run)
}

/// `--timeout`: a positive, finite number of seconds, at most a year.
pub fn parse_timeout(s: &str) -> Result<Duration> {
    const YEAR: f64 = 365.0 * 86400.0;
    match s.parse::<f64>() {
        Ok(t) if t > 0.0 && t <= YEAR => Ok(Duration::from_secs_f64(t)),
        _ => Err(Error::arg(format!(
            "--timeout `{s}` is not a timeout: give a number of seconds greater than 0 and at \
             most {YEAR}"
        ))),
    }
}

/// What `torchx rerun` runs again: these tasks of that group.
#[derive(Debug, Clone)]
pub struct RerunOf {
    /// The group.
    pub group: GroupRecord,
    /// Its tasks to run again (with their indexes and points).
    pub tasks: Vec<Task>,
}

/// `torchx run` itself, handed down by the top level to the commands that run again what a
/// record holds (a group's rest, a rerun), which sit below it.
pub type RunCommand = fn(RunArgs) -> Result<i32>;

/// A pipeline step's `torchx run`: the environment and mount the pipeline gives its job, and
/// what `run` did (a submission's handle, or what a dry run shows), reported here instead of
/// printed.
#[derive(Debug, Clone, Default)]
pub struct StepRun {
    /// What the pipeline gives the step's job.
    pub context: torchx::pipeline::StepContext,
    /// What `run` did, once it did it.
    pub reported: std::rc::Rc<std::cell::RefCell<Option<Reported>>>,
}

/// What a step's `run` did.
#[derive(Debug)]
pub enum Reported {
    /// It submitted this handle's job or group.
    Submitted(String),
    /// It showed this (a dry run, or a component's help).
    Shown(super::show::Shown),
}

impl RunArgs {
    /// Prints `shown`, or reports it for a pipeline's step.
    pub fn show(&self, shown: super::show::Shown) {
        match &self.step {
            Some(step) => *step.reported.borrow_mut() = Some(Reported::Shown(shown)),
            None => shown.print(),
        }
    }

    /// For a pipeline's step, reports its submitted `handle` (true); else false (the caller
    /// prints it).
    pub fn report_submitted(&self, handle: &str) -> bool {
        match &self.step {
            Some(step) => {
                *step.reported.borrow_mut() = Some(Reported::Submitted(handle.to_string()));
                true
            }
            None => false,
        }
    }
}
