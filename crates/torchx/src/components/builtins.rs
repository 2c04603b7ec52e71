//! The 11 builtin components, with TorchX's names, parameters, defaults and AppDefs (the `dist.*`
//! ones in `dist.rs`, the parameters they share in `params.rs`).

use super::dist::{ddp, ddp_params, spmd, spmd_params, torchrun, DDP_DOC, SPMD_DOC, TORCHRUN_DOC};
use super::params::{
    args_mounts, args_resource, image, loglevel, non_negative, p, replicas, resource_params,
    single, v, ENV_HELP, MOUNTS_HELP,
};
use super::{Component, ComponentArgs, ComponentEnv, ParamDefault as D, ParamType as T};
use crate::error::{Error, Result};
use crate::specs::{AppDef, Resource, Role, NONE};
use crate::text::shell_quote;

/// The builtin that replaces a deprecated one (TorchX's nightly: `dist.ddp` and `dist.spmd`
/// are aliases of `dist.torchrun` that warn, and keep their own defaults).
pub fn replaced_by(builtin: &str) -> Option<&'static str> {
    matches!(builtin, "dist.ddp" | "dist.spmd").then_some("dist.torchrun")
}

/// Names of the builtin components.
pub fn builtin_names() -> Vec<String> {
    all().into_iter().map(|c| c.name).collect()
}

pub(super) fn all() -> Vec<Component> {
    vec![
        Component::native("dist.ddp", DDP_DOC, ddp_params(), ddp),
        Component::native("dist.spmd", SPMD_DOC, spmd_params(), spmd),
        Component::native("dist.torchrun", TORCHRUN_DOC, ddp_params(), torchrun),
        Component::native(
            "metrics.tensorboard",
            "This component runs a Tensorboard server which will render the logs specified by logdir.\n\nSince Tensorboard runs as a service you need to specify the termination conditions. This consists of a timeout as well as an optional ``exit_on_file`` which will cause the service to quit when that path is created.",
            vec![
                p("logdir", T::Str, D::Required, "fsspec path to the Tensorboard logs"),
                image("image to use"),
                p("timeout", T::Float, v("3600.0"), "maximum time to run before exiting (seconds)"),
                p("port", T::Int, v("6006"), "the port to serve on"),
                p("start_on_file", T::Str, v(""), "start the server when the fsspec path is created"),
                p("exit_on_file", T::Str, v(""), "shutdown the server when the fsspec path is created"),
            ],
            tensorboard,
        ),
        Component::native(
            "serve.torchserve",
            "Deploys the provided model to the given torchserve management API endpoint.",
            vec![
                p("model_path", T::Str, D::Required, "The fsspec path to the model archive file."),
                p("management_api", T::Str, D::Required, "The URL to the root of the torchserve management API."),
                image("Container to use."),
                p("params", T::Dict, D::Absent, "torchserve parameters. See https://pytorch.org/serve/management_api.html#register-a-model"),
                p("dryrun", T::Bool, v("False"), "Start the app, but does not perform actual work"),
            ],
            torchserve,
        ),
    ]
    .into_iter()
    .chain(utils())
    .collect()
}

/// The `utils.*` builtins.
fn utils() -> Vec<Component> {
    vec![
        Component::native(
            "utils.binary",
            "Test component",
            [
                vec![
                    p("args", T::VarArgs, D::Absent, "arguments passed to the program in sys.argv[1:]"),
                    p("entrypoint", T::Str, D::Required, "the binary to run"),
                    p("name", T::Str, v("torchx_utils_binary"), "name of the job"),
                    p("num_replicas", T::Int, v("1"), "number of copies to run (each on its own container)"),
                ],
                resource_params(),
            ]
            .concat(),
            binary,
        ),
        Component::native(
            "utils.booth",
            "Evaluates the booth function, ``f(x1, x2) = (x1 + 2*x2 - 7)^2 + (2*x1 + x2 - 5)^2``.\n\nOutput result is accessible via ``FsspecResultTracker(outdir)[trial_idx]``",
            vec![
                p("x1", T::Float, D::Required, "x1"),
                p("x2", T::Float, D::Required, "x2"),
                p("trial_idx", T::Int, v("0"), "ignore if not running hpo"),
                p("tracker_base", T::Str, v("/tmp/torchx-util-booth"), "URI of the tracker's base output directory (e.g. s3://foo/bar)"),
                image("the image that contains the booth app"),
            ],
            booth,
        ),
        Component::native(
            "utils.copy",
            "copy copies the file from src to dst. src and dst can be any valid fsspec url.\n\nThis does not support recursive copies or directories.",
            vec![
                p("src", T::Str, D::Required, "the source fsspec file location"),
                p("dst", T::Str, D::Required, "the destination fsspec file location"),
                image("the image that contains the copy app"),
                p("mounts", T::List, D::Absent, MOUNTS_HELP),
            ],
            copy,
        ),
        Component::native(
            "utils.echo",
            "Echos a message to stdout (calls echo)",
            vec![
                p("msg", T::Str, v("hello world"), "message to echo"),
                image("image to use"),
                p("num_replicas", T::Int, v("1"), "number of replicas to run"),
            ],
            echo,
        ),
        Component::native(
            "utils.python",
            "Runs ``python`` with the specified module, command or script on the specified image and host. Use ``--`` to separate component args and program args (e.g. ``torchx run utils.python --m foo.main -- --args to --main``)",
            [
                vec![
                    p("args", T::VarArgs, D::Absent, "arguments passed to the program in sys.argv[1:] (ignored with `--c`)"),
                    p("m", T::Str, D::Absent, "run library module as a script"),
                    p("c", T::Str, D::Absent, "program passed as string (may error if scheduler has a length limit on args)"),
                    p("script", T::Str, D::Absent, ".py script to run"),
                    image("image to run on"),
                    p("name", T::Str, v("torchx_utils_python"), "name of the job"),
                ],
                resource_params(),
                vec![
                    p("num_replicas", T::Int, v("1"), "number of copies to run (each on its own container)"),
                    p("mounts", T::List, D::Absent, MOUNTS_HELP),
                ],
            ]
            .concat(),
            python,
        ),
        Component::native(
            "utils.sh",
            "Runs the provided command via sh. Currently sh does not support environment variable substitution.",
            [
                vec![
                    p("args", T::VarArgs, D::Absent, "bash arguments"),
                    image("image to use"),
                    p("num_replicas", T::Int, v("1"), "number of replicas to run"),
                ],
                resource_params(),
                vec![
                    p("env", T::Dict, D::Absent, ENV_HELP),
                    p("max_retries", T::Int, v("0"), "the number of scheduler retries allowed"),
                    p("mounts", T::List, D::Absent, MOUNTS_HELP),
                    p("entrypoint", T::Str, D::Absent, "the entrypoint to use for the command (defaults to sh)"),
                ],
            ]
            .concat(),
            sh,
        ),
        Component::native(
            "utils.touch",
            "Touches a file (calls touch)",
            vec![p("file", T::Str, D::Required, "file to create"), image("the image to use")],
            touch,
        ),
    ]
}

fn echo(a: &ComponentArgs, _: &ComponentEnv) -> Result<AppDef> {
    let role = Role::new("echo", a.str("image"))
        .with_entrypoint("echo")
        .with_args([a.str("msg")])
        .with_replicas(replicas(a)?)
        .with_resource(Resource::new(1, 0, 1024));
    Ok(single("echo", role))
}

fn touch(a: &ComponentArgs, _: &ComponentEnv) -> Result<AppDef> {
    let role = Role::new("touch", a.str("image"))
        .with_entrypoint("touch")
        .with_args([a.str("file")])
        .with_resource(Resource::new(1, 0, 1024));
    Ok(single("touch", role))
}

fn sh(a: &ComponentArgs, cenv: &ComponentEnv) -> Result<AppDef> {
    let escaped: Vec<String> = a.varargs.iter().map(|s| shell_quote(s)).collect();
    let mut env = a.dict("env").cloned().unwrap_or_default();
    loglevel(&mut env, cenv);
    let (entrypoint, args) = match a.opt_str("entrypoint") {
        Some(e) => (e.to_string(), escaped),
        None => ("sh".to_string(), vec!["-c".to_string(), escaped.join(" ")]),
    };
    let mut role = Role::new("sh", a.str("image"))
        .with_entrypoint(entrypoint)
        .with_args(args)
        .with_replicas(replicas(a)?)
        .with_resource(args_resource(a, cenv)?);
    role.env = env;
    role.max_retries = non_negative(a, "max_retries")?;
    role.mounts = args_mounts(a, cenv)?;
    Ok(single("sh", role))
}

fn python(a: &ComponentArgs, cenv: &ComponentEnv) -> Result<AppDef> {
    let (m, c, script) = (a.opt_str("m"), a.opt_str("c"), a.opt_str("script"));
    let mut cmd: Vec<String> = match (m, c, script) {
        (Some(m), None, None) => vec!["-m".into(), m.into()],
        (None, Some(c), None) => vec!["-c".into(), c.into()],
        (None, None, Some(s)) => vec![s.into()],
        _ => return Err(Error::arg("component `utils.python`: exactly one of `-m`, `-c` and `--script` needs to be specified")),
    };
    cmd.extend(a.varargs.iter().cloned());
    let mut role = Role::new("python", a.str("image"))
        .with_entrypoint("python")
        .with_args(cmd)
        .with_replicas(replicas(a)?)
        .with_resource(args_resource(a, cenv)?);
    if let Some(m) = m {
        role.env.insert("HYDRA_MAIN_MODULE".into(), m.into());
    }
    role.mounts = args_mounts(a, cenv)?;
    Ok(single(a.str("name"), role))
}

fn binary(a: &ComponentArgs, cenv: &ComponentEnv) -> Result<AppDef> {
    let role = Role::new("binary", NONE)
        .with_entrypoint(a.str("entrypoint"))
        .with_args(a.varargs.clone())
        .with_replicas(replicas(a)?)
        .with_resource(args_resource(a, cenv)?);
    Ok(single(a.str("name"), role))
}

fn copy(a: &ComponentArgs, cenv: &ComponentEnv) -> Result<AppDef> {
    let mut role = Role::new("torchx-utils-copy", a.str("image"))
        .with_entrypoint("python")
        .with_args([
            "-m",
            "torchx.apps.utils.copy_main",
            "--src",
            a.str("src"),
            "--dst",
            a.str("dst"),
        ])
        .with_resource(Resource::new(1, 0, 1024));
    role.mounts = args_mounts(a, cenv)?;
    Ok(single("torchx-utils-copy", role))
}

/// Python's `str(float)` for the values components print.
fn py_float(f: f64) -> String {
    format!("{f:?}")
}

fn booth(a: &ComponentArgs, _: &ComponentEnv) -> Result<AppDef> {
    let role = Role::new("torchx-utils-booth", a.str("image"))
        .with_entrypoint("python")
        .with_args([
            "-m".to_string(),
            "torchx.apps.utils.booth_main".into(),
            "--x1".into(),
            py_float(a.float("x1")),
            "--x2".into(),
            py_float(a.float("x2")),
            "--trial_idx".into(),
            a.int("trial_idx").to_string(),
            "--tracker_base".into(),
            a.str("tracker_base").into(),
        ])
        .with_resource(Resource::new(1, 0, 1024));
    Ok(single("torchx-utils-booth", role))
}

fn torchserve(a: &ComponentArgs, _: &ComponentEnv) -> Result<AppDef> {
    let mut args = vec![
        "-m".to_string(),
        "torchx.apps.serve.serve".into(),
        "--model_path".into(),
        a.str("model_path").into(),
        "--management_api".into(),
        a.str("management_api").into(),
    ];
    for (k, v) in a.dict("params").into_iter().flatten() {
        args.push(format!("--{k}"));
        args.push(v.clone());
    }
    if a.bool("dryrun") {
        args.push("--dryrun".into());
    }
    let mut role = Role::new("worker", a.str("image"))
        .with_entrypoint("python")
        .with_args(args)
        .with_resource(Resource::new(1, 0, 1024));
    role.port_map.insert("model-download".into(), 8222);
    Ok(single("torchx-torchserve", role))
}

fn tensorboard(a: &ComponentArgs, _: &ComponentEnv) -> Result<AppDef> {
    let port = u16::try_from(a.int("port")).map_err(|_| {
        Error::arg(format!(
            "component `metrics.tensorboard`: `--port` must be a port number (0-65535), got {}",
            a.int("port")
        ))
    })?;
    let mut role = Role::new("tensorboard", a.str("image"))
        .with_entrypoint("python")
        .with_args([
            "-m".to_string(),
            "torchx.apps.utils.process_monitor".into(),
            "--timeout".into(),
            py_float(a.float("timeout")),
            "--start_on_file".into(),
            a.str("start_on_file").into(),
            "--exit_on_file".into(),
            a.str("exit_on_file").into(),
            "--".into(),
            "tensorboard".into(),
            "--bind_all".into(),
            "--port".into(),
            port.to_string(),
            "--logdir".into(),
            a.str("logdir").into(),
        ]);
    role.port_map.insert("http".into(), port);
    Ok(single("tensorboard", role))
}
