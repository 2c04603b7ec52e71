//! Argument definitions and dispatch.

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::commands;
use crate::exit_codes;
use crate::output;

/// torchx: launch PyTorch jobs on any scheduler from one job spec.
#[derive(Debug, Parser)]
#[command(
    name = "torchx",
    version,
    about,
    long_about = None,
    max_term_width = 100,
    // As TorchX's argparse: an unambiguous prefix of a long option is that option
    // (`torchx status --role echo` for `--roles`).
    infer_long_args = true
)]
pub struct Cli {
    /// Log level: DEBUG, INFO, WARNING, ERROR (default: $LOGLEVEL or WARNING).
    #[arg(long = "log_level", alias = "log-level", global = true)]
    pub log_level: Option<String>,
    /// Verbose errors (cause chain) and debug logs.
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a component or AppDef file on a scheduler.
    #[command(infer_long_args = true)]
    Run(Box<RunArgs>),
    /// List the builtin components.
    #[command(infer_long_args = true)]
    Builtins(BuiltinsArgs),
    /// Show the status of an app.
    #[command(infer_long_args = true)]
    Status(StatusArgs),
    /// Show the AppDef of an app as the scheduler knows it.
    #[command(infer_long_args = true)]
    Describe(HandleArgs),
    /// List the apps a scheduler knows.
    #[command(infer_long_args = true)]
    List(ListArgs),
    /// Print the logs of an app's replicas.
    #[command(infer_long_args = true)]
    Log(LogArgs),
    /// Cancel an app.
    #[command(infer_long_args = true)]
    Cancel(HandleArgs),
    /// Delete an app (cancelling it first) and what the scheduler keeps of it.
    #[command(infer_long_args = true)]
    Delete(HandleArgs),
    /// Show the run options of schedulers.
    #[command(infer_long_args = true)]
    Runopts(RunoptsArgs),
    /// Check a job on one or more schedulers before queueing it: one row per scheduler with a
    /// verdict (ok, fails, unknown), each failed check with what to change, and when it would
    /// start where the scheduler can tell. Submits nothing.
    #[command(infer_long_args = true)]
    Plan(PlanArgs),
    /// Write a .torchxconfig template.
    #[command(infer_long_args = true)]
    Configure(ConfigureArgs),
    /// Submit again the failed or cancelled tasks of a group (an array or sweep), as a new
    /// group linked to it; or the failed, cancelled and never-started steps of a pipeline.
    #[command(infer_long_args = true)]
    Rerun(RerunArgs),
    /// (Internal) submit the rest of a group, in the background of `torchx run --array ...%K`.
    #[command(name = "__submit-group", hide = true)]
    SubmitGroup(SubmitGroupArgs),
    /// (Internal) a pipeline's holder: submits its steps as their dependencies end.
    #[command(name = "__pipeline", hide = true)]
    HoldPipeline(HoldPipelineArgs),
    /// Serve a dashboard of every job, group and pipeline (local ones and those of the
    /// schedulers in .torchxconfig or -s) until Ctrl-C.
    #[cfg(feature = "ui")]
    #[command(infer_long_args = true)]
    Ui(UiArgs),
    /// Query what trackers recorded, or record from inside a job.
    #[command(infer_long_args = true)]
    Tracker(TrackerArgs),
    /// Print shell completions.
    #[command(infer_long_args = true)]
    Completions(CompletionsArgs),
    /// A plugin command: `torchx-<cmd>` on PATH.
    #[command(external_subcommand)]
    External(Vec<String>),
}

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
    /// else a failure). local_cwd.
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
    /// (Internal, a pipeline's step) environment every role gets: KEY=VALUE.
    #[arg(long = "pipeline_env", hide = true, value_name = "KEY=VALUE")]
    pub pipeline_env: Vec<String>,
    /// (Internal, a pipeline's step on local containers) a host directory mounted at its own
    /// path in every role.
    #[arg(long = "pipeline_mount", hide = true, value_name = "DIR")]
    pub pipeline_mount: Option<String>,
    /// (Internal, a pipeline's step) wait for the holder's go-ahead on stdin.
    #[arg(long = "pipeline_go", hide = true)]
    pub pipeline_go: bool,
    /// Set by `torchx rerun`: the tasks to run again and the group they come from.
    #[arg(skip)]
    pub rerun_of: Option<crate::commands::group::RerunOf>,
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

#[derive(Debug, Args)]
pub struct BuiltinsArgs {
    /// Print the definition of one builtin.
    #[arg(long)]
    pub print: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The app handle: scheduler://session/app_id.
    pub app_handle: String,
    /// Only these roles (comma-separated).
    #[arg(long)]
    pub roles: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RerunArgs {
    /// The group handle (scheduler://session/~group_id) or pipeline handle
    /// (pipeline://session/id).
    pub group_handle: String,
    /// Only the tasks (or steps) that failed or were cancelled (or never started).
    #[arg(long, required = true)]
    pub failed: bool,
    /// Wait for the new group to finish.
    #[arg(long)]
    pub wait: bool,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The schedulers to plan on, comma-separated (default: the configured scheduler).
    #[arg(short = 's', long, value_name = "S1,S2,...")]
    pub scheduler: Option<String>,
    /// Run options: key=value for every scheduler that has the option, S.key=value for
    /// scheduler S only; .torchxconfig sections fill the rest. Also -cfg.
    #[arg(long = "cfg", alias = "scheduler_args", value_name = "CFG")]
    pub cfg: Vec<String>,
    /// A workspace to plan with (built into images, or copied; never pushed by plan).
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// The component (utils.echo, ./app.yaml) followed by its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMPONENT_AND_ARGS"
    )]
    pub component_and_args: Vec<String>,
}

#[derive(Debug, Args)]
pub struct HoldPipelineArgs {
    /// The pipeline handle.
    pub pipeline_handle: String,
}

#[derive(Debug, Args)]
pub struct SubmitGroupArgs {
    /// The group handle.
    pub group_handle: String,
}

#[derive(Debug, Args)]
pub struct HandleArgs {
    /// The app handle: scheduler://session/app_id.
    pub app_handle: String,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "ui")]
#[derive(Debug, Args)]
pub struct UiArgs {
    /// The address to serve on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port (0: a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Open the page in a browser.
    #[arg(long)]
    pub open: bool,
    /// Offer no way to change a job (no cancel, delete or rerun).
    #[arg(long = "read_only")]
    pub read_only: bool,
    /// Serve cancel, delete and rerun on an address other machines reach (plain HTTP: anyone
    /// on the network who learns the token can use them). Without it, only with --read_only.
    #[arg(long = "allow_remote_changes")]
    pub allow_remote_changes: bool,
    /// The schedulers whose jobs to show besides local_cwd's, comma-separated (default: those
    /// with a section in .torchxconfig).
    #[arg(short = 's', long, value_name = "S1,S2,...")]
    pub scheduler: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The scheduler (default: local_cwd).
    #[arg(short = 's', long)]
    pub scheduler: Option<String>,
    /// Only apps in this state (e.g. RUNNING, SUCCEEDED).
    #[arg(long)]
    pub state: Option<String>,
    /// At most this many apps (newest first).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Also the apps of other state directories (local_docker's engine is shared: by default
    /// it lists this state directory's apps, as local_cwd does).
    #[arg(long)]
    pub all: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// scheduler://[session]/app_id[/role[/replica_ids,...]]
    pub identifier: String,
    /// Only lines matching this regex.
    #[arg(long)]
    pub regex: Option<String>,
    /// Follow the logs until the app ends.
    #[arg(short = 't', long)]
    pub tail: bool,
    /// stdout, stderr or combined.
    #[arg(long)]
    pub streams: Option<String>,
    /// Only lines since this time (unix seconds, or a duration ago such as 10m, 2h).
    #[arg(long)]
    pub since: Option<String>,
    /// Only lines until this time (same formats as --since).
    #[arg(long)]
    pub until: Option<String>,
    /// The stacks captured when replicas hung (--hang_timeout) instead of the log lines: a
    /// block per process, headed by role, replica and rank.
    #[arg(long)]
    pub stacks: bool,
    /// With --stacks: of this attempt (default: each replica's latest that hung).
    #[arg(long, value_name = "N", requires = "stacks")]
    pub attempt: Option<u32>,
    /// With --stacks: as JSON.
    #[arg(long, requires = "stacks")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunoptsArgs {
    /// The scheduler (default: all).
    pub scheduler: Option<String>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ConfigureArgs {
    /// Schedulers to include (comma-separated; default: all).
    #[arg(short = 's', long)]
    pub schedulers: Option<String>,
    /// Print to stdout instead of writing ./.torchxconfig.
    #[arg(long)]
    pub print: bool,
    /// Include optional options with their defaults.
    #[arg(short = 'a', long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct TrackerArgs {
    /// The tracker to use (default: the first configured one; `add` records in all of them).
    #[arg(long, global = true)]
    pub tracker: Option<String>,
    #[command(subcommand)]
    pub command: TrackerCommand,
}

#[derive(Debug, Subcommand)]
pub enum TrackerCommand {
    /// List jobs, metadata, artifacts or lineage.
    #[command(subcommand)]
    List(TrackerList),
    /// Record metadata, an artifact or a source for a run (default: this job, $TORCHX_JOB_ID).
    #[command(subcommand)]
    Add(TrackerAdd),
}

#[derive(Debug, Subcommand)]
pub enum TrackerList {
    /// The tracked runs.
    Jobs {
        /// Only runs that name this run as a source.
        #[arg(long = "parent-run-id", alias = "parent_run_id")]
        parent_run_id: Option<String>,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// A run's metadata.
    Metadata {
        /// The run id (a job's TORCHX_JOB_ID, i.e. its app handle).
        #[arg(value_name = "RUN_ID")]
        run_id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// A run's artifacts.
    Artifacts {
        /// Only this artifact.
        #[arg(long)]
        artifact: Option<String>,
        /// The run id.
        #[arg(value_name = "RUN_ID")]
        run_id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// The runs a run derives from (sources) and those derived from it (descendants).
    Lineage {
        /// Only sources.
        #[arg(long = "sources-only", conflicts_with = "descendants_only")]
        sources_only: bool,
        /// Only descendants.
        #[arg(long = "descendants-only")]
        descendants_only: bool,
        /// Only links through this artifact.
        #[arg(long)]
        artifact: Option<String>,
        /// The run id.
        #[arg(value_name = "RUN_ID")]
        run_id: String,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum TrackerAdd {
    /// KEY=VALUE pairs (values that parse as JSON keep their type).
    Metadata {
        /// The run (default: $TORCHX_JOB_ID).
        #[arg(long = "run-id")]
        run_id: Option<String>,
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
    /// An artifact: a name and where it is.
    Artifact {
        /// The run (default: $TORCHX_JOB_ID).
        #[arg(long = "run-id")]
        run_id: Option<String>,
        /// Metadata of the artifact, KEY=VALUE (repeatable).
        #[arg(long)]
        metadata: Vec<String>,
        name: String,
        path: String,
    },
    /// A run this one derives from.
    Source {
        /// The run (default: $TORCHX_JOB_ID).
        #[arg(long = "run-id")]
        run_id: Option<String>,
        /// Which of the source's artifacts was used.
        #[arg(long)]
        artifact: Option<String>,
        source_run_id: String,
    },
}

impl TrackerAdd {
    pub fn run_id(&self) -> Option<&str> {
        match self {
            TrackerAdd::Metadata { run_id, .. }
            | TrackerAdd::Artifact { run_id, .. }
            | TrackerAdd::Source { run_id, .. } => run_id.as_deref(),
        }
    }
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    pub shell: clap_complete::Shell,
}

/// TorchX spells the run-options flag `-cfg`; clap shorts are one character, so rewrite it.
/// The arguments as text: component arguments, handles and options all end up in UTF-8 job
/// specs, so a byte sequence that is not UTF-8 is refused up front, naming its position.
fn utf8_args(args: impl Iterator<Item = std::ffi::OsString>) -> torchx::Result<Vec<String>> {
    args.enumerate()
        .map(|(i, a)| {
            a.into_string().map_err(|a| {
                torchx::Error::arg(format!(
                    "argument {i} ({}) is not valid UTF-8",
                    a.to_string_lossy()
                ))
            })
        })
        .collect()
}

fn normalise_args(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_component = false;
    let mut seen_run = false;
    let mut run_options: Option<RunOptions> = None;
    for a in args {
        if in_component {
            out.push(a);
            continue;
        }
        // `run`'s own options come before the component, where clap reads unknown `--x` as
        // the component (it takes hyphen values): their prefixes are completed here.
        let a = if seen_run && a.starts_with("--") {
            let options = run_options.get_or_insert_with(RunOptions::new);
            complete_prefix(&a, &options.long)
        } else {
            a
        };
        if seen_run && !a.starts_with('-') {
            let options = run_options.get_or_insert_with(RunOptions::new);
            if out.last().is_none_or(|p: &String| !options.takes_value(p)) {
                in_component = true;
            }
        }
        if (a == "run" || a == "plan") && !seen_run {
            seen_run = true;
        }
        if let Some(rest) = a.strip_prefix("-cfg") {
            if rest.is_empty() || rest.starts_with('=') {
                out.push(format!("--cfg{rest}"));
                continue;
            }
        }
        out.push(a);
    }
    out
}

/// What `torchx run` accepts before its component (its own options and the global ones), read
/// from the clap definition itself, so a new option is never taken for the component.
struct RunOptions {
    /// Every long name, with its argument's id: aliases of one option share it.
    long: Vec<(String, String)>,
    /// Every spelling (`-s`, `--scheduler`, aliases) of an option that takes a value.
    valued: Vec<String>,
}

impl RunOptions {
    fn new() -> RunOptions {
        let cli = Cli::command();
        let run = cli.find_subcommand("run");
        let mut options = RunOptions {
            long: Vec::new(),
            valued: Vec::new(),
        };
        for a in [Some(&cli), run]
            .into_iter()
            .flatten()
            .flat_map(|c| c.get_arguments())
        {
            let id = a.get_id().to_string();
            let longs: Vec<&str> = a
                .get_long()
                .into_iter()
                .chain(a.get_all_aliases().unwrap_or_default())
                .collect();
            if a.get_action().takes_values() {
                options
                    .valued
                    .extend(longs.iter().map(|l| format!("--{l}")));
                options
                    .valued
                    .extend(a.get_short().map(|c| format!("-{c}")));
            }
            options
                .long
                .extend(longs.iter().map(|l| (id.clone(), l.to_string())));
        }
        options
    }

    /// Whether `flag` (as written, `=value` forms excluded) takes the next argument as its value.
    fn takes_value(&self, flag: &str) -> bool {
        self.valued.iter().any(|v| v == flag)
    }
}

/// `--pre[=v]` as the one option of `names` that starts with `pre` (argparse's abbreviations);
/// unchanged when it is an option, matches none, or could be several (clap then reports it).
fn complete_prefix(arg: &str, names: &[(String, String)]) -> String {
    let (flag, value) = match arg[2..].split_once('=') {
        Some((f, v)) => (f, Some(v)),
        None => (&arg[2..], None),
    };
    if flag.is_empty() || names.iter().any(|(_, n)| n == flag) {
        return arg.to_string();
    }
    let matches: Vec<&(String, String)> =
        names.iter().filter(|(_, n)| n.starts_with(flag)).collect();
    match matches.first() {
        Some((id, name)) if matches.iter().all(|(other, _)| other == id) => match value {
            Some(v) => format!("--{name}={v}"),
            None => format!("--{name}"),
        },
        _ => arg.to_string(),
    }
}

pub fn main() -> i32 {
    let args = match utf8_args(std::env::args_os()) {
        Ok(args) => normalise_args(args.into_iter()),
        Err(e) => {
            output::print_error(&e, false);
            return exit_codes::USAGE;
        }
    };
    let mut command = Cli::command();
    // Only a help request pays for scanning PATH for plugins.
    let wants_help = args.len() == 1
        || args[1..]
            .iter()
            .take_while(|a| a.starts_with('-'))
            .any(|a| a == "-h" || a == "--help")
        || args.get(1).is_some_and(|a| a == "help");
    if wants_help {
        command = command.after_help(crate::plugins::help_section());
    }
    let parsed = command
        .try_get_matches_from(args)
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                exit_codes::USAGE
            } else {
                exit_codes::OK
            };
            let _ = e.print();
            return code;
        }
    };
    let level = if cli.verbose {
        Some("DEBUG".to_string())
    } else {
        cli.log_level
            .clone()
            .or_else(|| std::env::var("LOGLEVEL").ok())
    };
    if let Err(e) = output::init_logger(level.as_deref().unwrap_or("WARNING")) {
        output::print_error(&e, false);
        return exit_codes::USAGE;
    }
    let result = match cli.command {
        Command::Run(a) => commands::run::run(*a),
        Command::Builtins(a) => commands::info::builtins(a),
        Command::Status(a) => commands::query::status(a),
        Command::Describe(a) => commands::query::describe(a),
        Command::List(a) => commands::query::list(a),
        Command::Log(a) => commands::query::log(a),
        Command::Cancel(a) => commands::query::cancel(a),
        Command::Delete(a) => commands::query::delete(a),
        Command::Runopts(a) => commands::info::runopts(a),
        Command::Configure(a) => commands::info::configure(a),
        Command::Plan(a) => commands::plan::plan(a),
        Command::Rerun(a) if torchx::pipeline::is_pipeline_handle(&a.group_handle) => {
            commands::pipeline::rerun(a)
        }
        Command::Rerun(a) => commands::group::rerun(a),
        Command::SubmitGroup(a) => commands::group::submit_rest(a),
        Command::HoldPipeline(a) => commands::pipeline::hold(a),
        #[cfg(feature = "ui")]
        Command::Ui(a) => commands::ui::ui(a),
        Command::Tracker(a) => commands::runner().and_then(|r| commands::tracker::tracker(&r, a)),
        Command::External(mut words) => {
            let cmd = words.remove(0);
            let builtins: Vec<String> = Cli::command()
                .get_subcommands()
                .map(|c| c.get_name().to_string())
                .collect();
            return crate::plugins::run(&cmd, &words, &builtins);
        }
        Command::Completions(a) => {
            clap_complete::generate(
                a.shell,
                &mut Cli::command(),
                "torchx",
                &mut std::io::stdout(),
            );
            Ok(exit_codes::OK)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            output::print_error(
                &e,
                cli.verbose || std::env::var_os("RUST_BACKTRACE").is_some(),
            );
            exit_codes::for_error(e.kind())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_flag_is_rewritten_only_before_the_component() {
        let a = |v: &[&str]| normalise_args(v.iter().map(|s| s.to_string()));
        assert_eq!(
            a(&["torchx", "run", "-cfg", "a=b", "utils.sh", "-cfg"]),
            ["torchx", "run", "--cfg", "a=b", "utils.sh", "-cfg"]
        );
        assert_eq!(
            a(&["torchx", "run", "-s", "local_cwd", "-cfg=a=b", "x"]),
            ["torchx", "run", "-s", "local_cwd", "--cfg=a=b", "x"]
        );
    }

    #[test]
    fn cfg_is_read_after_every_option_that_takes_a_value() {
        let options = RunOptions::new();
        assert!(options.valued.len() >= 20, "{:?}", options.valued);
        for flag in &options.valued {
            let value = match flag.as_str() {
                "-s" | "--scheduler" => "local_cwd",
                "--max_concurrent" | "--max_retries" | "--max_requeues" => "2",
                _ => "x",
            };
            let args = [
                "torchx",
                "run",
                flag,
                value,
                "-cfg",
                "a=b",
                "utils.echo",
                "-cfg",
            ];
            let args = normalise_args(args.iter().map(|s| s.to_string()));
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{flag}: {e}"));
            let Command::Run(run) = cli.command else {
                panic!("{flag}: not a run");
            };
            let cfg: &[&str] = if ["--cfg", "--scheduler_args"].contains(&flag.as_str()) {
                &["x", "a=b"]
            } else {
                &["a=b"]
            };
            assert_eq!(run.cfg, cfg, "{flag}");
            assert_eq!(run.component_and_args, ["utils.echo", "-cfg"], "{flag}");
        }
    }

    #[test]
    fn clap_definition_is_valid() {
        Cli::command().debug_assert();
    }
}
