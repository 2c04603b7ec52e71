//! Argument definitions and dispatch.

use clap::{Args, CommandFactory, Parser, Subcommand};

use crate::commands;
use crate::commands::group::{RerunArgs, SubmitGroupArgs};
use crate::commands::info::{BuiltinsArgs, ConfigureArgs, RunoptsArgs};
use crate::commands::pipeline::{HoldPipelineArgs, SubmitStepArgs};
use crate::commands::plan::PlanArgs;
use crate::commands::query::{HandleArgs, ListArgs, LogArgs, StatusArgs};
use crate::commands::run_args::RunArgs;
use crate::commands::tracker::TrackerArgs;
#[cfg(feature = "ui")]
use crate::commands::ui::UiArgs;
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

// Each subcommand's arguments are built only when it is the one run (or its help is shown):
// building every other's cost a tenth of a millisecond at each start (BENCHMARKS.md).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
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
    /// (Internal) submits one step of a pipeline for its holder.
    #[command(name = "__pipeline-step", hide = true)]
    SubmitStep(SubmitStepArgs),
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
        // The top level's subcommands are deferred: `run`'s arguments are built here alone.
        let cli = Cli::command();
        let run = RunArgs::augment_args(clap::Command::new("run"));
        let mut options = RunOptions {
            long: Vec::new(),
            valued: Vec::new(),
        };
        for a in cli.get_arguments().chain(run.get_arguments()) {
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
        Command::Rerun(a) => commands::group::rerun(a, commands::run::run),
        Command::SubmitGroup(a) => commands::group::submit_rest(a, commands::run::run),
        Command::HoldPipeline(a) => commands::pipeline::hold(a),
        Command::SubmitStep(a) => commands::pipeline::submit_step(a, commands::run::run),
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

    /// Start-up: a command builds the arguments of the subcommand it runs, not the others'.
    #[test]
    fn only_the_subcommand_that_runs_has_its_arguments_built() {
        let command = Cli::command();
        let status = command.find_subcommand("status").unwrap();
        assert_eq!(status.get_arguments().count(), 0);
        let args = ["torchx", "status", "--json", "local_cwd://torchx/x"];
        let Command::Status(a) = Cli::try_parse_from(args).unwrap().command else {
            panic!("not status");
        };
        assert!(a.json);
    }
}
