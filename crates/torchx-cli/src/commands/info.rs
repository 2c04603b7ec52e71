//! Informational commands: builtins, runopts, configure.

use torchx::components::{ComponentEnv, ComponentRef};
use torchx::config::{dump, write_config};
use torchx::opts::RunOpts;
use torchx::{Error, Result, Runner};

use crate::exit_codes;
use crate::output::print_json;
use clap::Args;

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

pub fn builtins(a: BuiltinsArgs) -> Result<i32> {
    let runner = super::runner()?;
    if let Some(name) = a.print {
        let c = match runner.find_component(&name)? {
            ComponentRef::Component(c) => c,
            ComponentRef::Python(c) => {
                print!("{}", c.source()?);
                return Ok(exit_codes::OK);
            }
            ComponentRef::AppFile(_) => {
                return Err(Error::arg(format!(
                    "`{name}` is an AppDef file, not a component"
                )))
            }
        };
        print!("{}", c.help(&Default::default()));
        // The AppDef with default arguments, when the component has no required parameters.
        let env = ComponentEnv {
            named_resources: runner.named_resources()?,
            ..ComponentEnv::from_process()
        };
        if let Ok(Some(app)) = c.materialize::<&str>(&[], &Default::default(), &env) {
            println!("\nAppDef with the default arguments:\n{}", app.to_yaml());
        }
        return Ok(exit_codes::OK);
    }
    let all = runner.components()?;
    if a.json {
        let items: Vec<serde_json::Value> = all.iter().map(|c| serde_json::json!({"name": c.name, "description": c.description.lines().next().unwrap_or_default(), "origin": c.origin})).collect();
        print_json(&serde_json::Value::Array(items));
        return Ok(exit_codes::OK);
    }
    println!("Found {} builtin components:", all.len());
    for (i, c) in all.iter().enumerate() {
        if c.origin == "builtin" {
            println!(" {:2}. {}", i + 1, c.name);
        } else {
            println!(" {:2}. {}  ({})", i + 1, c.name, c.origin);
        }
    }
    // Components of the Python `torchx.components` entry points (a name a builtin has stays
    // the builtin's).
    let plugins: Vec<(String, String)> = match torchx::plugins::entry_point_components() {
        Ok(found) => found
            .into_iter()
            .filter(|(name, _)| !all.iter().any(|c| &c.name == name))
            .collect(),
        Err(e) => {
            log::warn!("cannot list the torchx.components entry points: {e}");
            Vec::new()
        }
    };
    if !plugins.is_empty() {
        println!(
            "Found {} components of the torchx.components entry points:",
            plugins.len()
        );
        for (i, (name, _)) in plugins.iter().enumerate() {
            println!(" {:2}. {}", all.len() + i + 1, name);
        }
    }
    Ok(exit_codes::OK)
}

pub fn runopts(a: RunoptsArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    let listing_all = a.scheduler.is_none();
    let names: Vec<String> = match a.scheduler {
        Some(s) => vec![s],
        None => runner.registry().all_names(),
    };
    let mut json = serde_json::Map::new();
    for name in names {
        let Some(opts) = run_opts(&runner, &name, listing_all)? else {
            continue;
        };
        if a.json {
            json.insert(name, opts.to_json());
        } else {
            println!("{name}:\n{opts}\n");
        }
    }
    if a.json {
        print_json(&serde_json::Value::Object(json));
    }
    Ok(exit_codes::OK)
}

pub fn configure(a: ConfigureArgs) -> Result<i32> {
    let runner = super::runner_without_config()?;
    let names: Vec<String> = match &a.schedulers {
        Some(s) => super::split_list(s),
        None => runner.registry().all_names(),
    };
    let mut schemas = Vec::new();
    for n in &names {
        if let Some(opts) = run_opts(&runner, n, a.schedulers.is_none())? {
            schemas.push((n.as_str(), opts));
        }
    }
    let text = dump(&schemas, !a.all);
    if a.print {
        print!("{text}");
    } else {
        let cwd =
            std::env::current_dir().map_err(|e| Error::io("reading the current directory", e))?;
        let path = write_config(&cwd, &text)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(exit_codes::OK)
}

/// The run options of `name`. When listing every scheduler, a broken plugin on PATH is a
/// warning, not the end of the listing.
fn run_opts(runner: &Runner, name: &str, listing_all: bool) -> Result<Option<RunOpts>> {
    match super::block_on(runner.scheduler(name)) {
        Ok(s) => Ok(Some(s.run_opts())),
        Err(e) if listing_all && runner.registry().names().all(|n| n != name) => {
            log::warn!("skipping scheduler plugin `{name}`: {e}");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
