//! The `dist.*` builtins (`dist.ddp`, `dist.torchrun`, `dist.spmd`): torchrun's roles, `-j`
//! parsing and the rendezvous options.

use std::collections::BTreeMap;

use super::{
    Component, ComponentArgs, ComponentEnv, Param, ParamDefault as D, ParamType as T, ParseOutcome,
};
use crate::error::{Error, Result};
use crate::specs::{AppDef, Role};
use crate::text::shell_join;

use super::params::{
    args_mounts, args_resource, image, loglevel, non_negative, p, single, v, ENV_HELP,
    METADATA_HELP, MOUNTS_HELP,
};

pub(super) const DDP_DOC: &str = "Distributed data parallel style application (one role, multi-replica). Uses `torch.distributed.run` to launch and coordinate PyTorch worker processes. Defaults to using ``c10d`` rendezvous backend on rendezvous_endpoint ``$rank_0_host:$rdzv_port``. Note that ``rdzv_port`` parameter is ignored when running on single node, and instead we use port 0 which instructs torchelastic to chose a free random port on the host.\n\nNote: (cpu, gpu, memMB) parameters are mutually exclusive with ``h`` (named resource) where ``h`` takes precedence if specified for setting resource requirements.";

pub(super) const TORCHRUN_DOC: &str = "Launches a distributed PyTorch program (DDP, FSDP, RPC, ...) with `torchrun` (`torch.distributed.run`): one role of `nnodes` replicas, each running `nproc_per_node` processes. The canonical name of `dist.ddp` (which stays, with its own `-j` rules): with a named host `-h`, a bare `-j N` means N nodes with as many processes as the host has GPUs (as `dist.spmd`), so `-h gpu.small -j 2` is two nodes of one process; any other `-j` (`[{min_nnodes}:]{nnodes}x{nproc_per_node}`, or a bare process count without `-h`) means what it means to `dist.ddp`.\n\nUsage (by script): torchx run dist.torchrun -j 2x8 -h aws_p4d.24xlarge --script path/to/my/trainer.py -foo bar";

pub(super) const SPMD_DOC: &str = "Creates an AppDef for a Single-Process-Multiple-Data (SPMD) style application: `n x m` (set via `-j nxm`) copies of the same program, where `n` is the number of nodes and `m` the number of processes on each node. For GPU hosts, `-j n` infers `m` from the GPU count of the host type `-h`.\n\nUsage (by script): torchx run dist.spmd -j 2x8 -h aws_p4d.24xlarge --name my_experiment/trial_1 --script path/to/my/trainer.py -foo bar";

fn dist_common() -> Vec<Param> {
    vec![
        p("script_args", T::VarArgs, D::Absent, "arguments to the main module"),
        p("script", T::Str, D::Absent, "script or binary to run within the image"),
        p("m", T::Str, D::Absent, "the python module path to run"),
        image("image (e.g. docker)"),
        p("name", T::Str, v("/"), "job name override in the following format: ``{experimentname}/{runname}`` or ``{experimentname}/`` or ``/{runname}`` or ``{runname}``. Uses the script or module name if ``{runname}`` not specified."),
    ]
}

pub(super) fn ddp_params() -> Vec<Param> {
    [
        dist_common(),
        vec![
            p("h", T::Str, D::Absent, "a registered named resource (if specified takes precedence over cpu, gpu, memMB)"),
            p("cpu", T::Int, v("2"), "number of cpus per replica"),
            p("gpu", T::Int, v("0"), "number of gpus per replica"),
            p("memMB", T::Int, v("1024"), "cpu memory in MB per replica"),
            p("j", T::Str, v("1x2"), "[{min_nnodes}:]{nnodes}x{nproc_per_node}, for gpu hosts, nproc_per_node must not exceed num gpus"),
            p("env", T::Dict, D::Absent, ENV_HELP),
            p("metadata", T::Dict, D::Absent, METADATA_HELP),
            p("max_retries", T::Int, v("0"), "the number of scheduler retries allowed"),
            p("rdzv_port", T::Int, v("29500"), "the port on rank0's host to use for hosting the c10d store used for rendezvous. Only takes effect when running multi-node."),
            p("rdzv_backend", T::Str, v("c10d"), "the rendezvous backend to use. Only takes effect when running multi-node."),
            p("rdzv_conf", T::Str, D::Absent, "the additional rendezvous configuration to use (ex. join_timeout=600,close_timeout=600,timeout=600)."),
            p("mounts", T::List, D::Absent, MOUNTS_HELP),
            p("debug", T::Bool, v("False"), "whether to run with preset debug flags enabled"),
            p("tee", T::Int, v("3"), "tees the specified std stream(s) to console + file. 0: none, 1: stdout, 2: stderr, 3: both"),
        ],
    ]
    .concat()
}

pub(super) fn spmd_params() -> Vec<Param> {
    [
        dist_common(),
        vec![
            p("h", T::Str, v("gpu.small"), "the type of host to run on (e.g. aws_p4d.24xlarge). Must be one of the registered named resources"),
            p("j", T::Str, v("1x1"), "{nnodes}x{nproc_per_node}. For GPU hosts omitting nproc_per_node will infer it from the GPU count on the host"),
            p("env", T::Dict, D::Absent, ENV_HELP),
            p("metadata", T::Dict, D::Absent, METADATA_HELP),
            p("max_retries", T::Int, v("0"), "the number of scheduler retries allowed"),
            p("mounts", T::List, D::Absent, MOUNTS_HELP),
            p("debug", T::Bool, v("False"), "whether to run with preset debug flags enabled"),
        ],
    ]
    .concat()
}

/// The result of parsing `-j`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nnodes {
    /// Minimum nodes.
    pub min_nnodes: u32,
    /// Maximum nodes.
    pub max_nnodes: u32,
    /// Processes per node.
    pub nproc_per_node: u32,
    /// The `--nnodes` value passed to torchrun (`2` or `1:2`).
    pub nnodes_rep: String,
}

/// The `rdzv_conf` keys torchrun's rendezvous handlers read (PyTorch's c10d, etcd and static
/// backends), and which of them must be whole numbers (seconds, counts).
const RDZV_CONF_KEYS: &[(&str, bool)] = &[
    ("join_timeout", true),
    ("last_call_timeout", true),
    ("close_timeout", true),
    ("heartbeat_timeout", true),
    ("keep_alive_interval", true),
    ("keep_alive_max_attempt", true),
    ("read_timeout", true),
    ("timeout", true),
    ("cas_backoff_max_seconds", true),
    ("is_host", false),
    ("store_type", false),
    ("etcd_prefix", false),
    ("protocol", false),
    ("cacert", false),
    ("cert", false),
    ("key", false),
    ("ca_cert", false),
    ("ssl_cert", false),
    ("ssl_cert_key", false),
    ("rank", true),
];

/// Checks `--rdzv_conf` (`key=value,...`, e.g. `join_timeout=600,close_timeout=600`) before
/// any node starts: a malformed item, or a timeout that is not a whole number, would fail
/// every node's torchrun at its start; an unknown key, which torchrun ignores silently (a
/// misspelt `join_timout` is lost), is warned about with the nearest known one.
fn check_rdzv_conf(conf: &str) -> Result<()> {
    for item in conf.split(',').filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            return Err(Error::arg(format!(
                "--rdzv_conf: `{item}` is not key=value (e.g. join_timeout=600,close_timeout=600)"
            )));
        };
        let key = key.trim();
        match RDZV_CONF_KEYS.iter().find(|(k, _)| *k == key) {
            Some((_, true)) if value.trim().parse::<i64>().is_err() => {
                return Err(Error::arg(format!(
                    "--rdzv_conf: {key}={value}: torchrun reads {key} as a whole number \
                     (seconds or a count)"
                )))
            }
            Some(_) => {}
            None => {
                let known = RDZV_CONF_KEYS.iter().map(|(k, _)| *k);
                let hint = crate::error::nearest(key, known)
                    .map(|k| format!("; did you mean `{k}`?"))
                    .unwrap_or_default();
                log::warn!(
                    "--rdzv_conf: torchrun's rendezvous does not read `{key}` and ignores it{hint}"
                );
            }
        }
    }
    Ok(())
}

/// Parses `-j`: `{min}:{max}x{nproc}`, `{n}x{nproc}` or `{nproc}`.
pub fn parse_nnodes(j: &str) -> Result<Nnodes> {
    let bad = || {
        Error::arg(format!(
            "Invalid format for -j, usage example: 1:2x4 or 1x4 or 4. Given: {j}"
        ))
    };
    let num = |s: &str| -> Result<u32> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse::<u32>().map_err(|_| bad())
    };
    let parsed = match j.split_once('x') {
        Some((nodes, nproc)) => {
            let nproc = num(nproc)?;
            match nodes.split_once(':') {
                Some((min, max)) => Nnodes {
                    min_nnodes: num(min)?,
                    max_nnodes: num(max)?,
                    nproc_per_node: nproc,
                    nnodes_rep: nodes.to_string(),
                },
                None => {
                    let n = num(nodes)?;
                    Nnodes {
                        min_nnodes: n,
                        max_nnodes: n,
                        nproc_per_node: nproc,
                        nnodes_rep: nodes.to_string(),
                    }
                }
            }
        }
        None => Nnodes {
            min_nnodes: 1,
            max_nnodes: 1,
            nproc_per_node: num(j)?,
            nnodes_rep: "1".into(),
        },
    };
    if parsed.max_nnodes == 0 {
        return Err(Error::arg(format!(
            "Invalid -j {j}: the number of nodes must be at least 1"
        )));
    }
    if parsed.min_nnodes > parsed.max_nnodes {
        return Err(Error::arg(format!(
            "Invalid -j {j}: the minimum number of nodes ({}) exceeds the maximum ({})",
            parsed.min_nnodes, parsed.max_nnodes
        )));
    }
    Ok(parsed)
}

/// TorchX's `StructuredNameArgument`: (experiment, run) from `--name`, `-m` and `--script`.
fn structured_name(name: &str, m: Option<&str>, script: Option<&str>) -> (String, String) {
    let (mut experiment, mut run) = match name.find('/') {
        None => (String::new(), name.to_string()),
        Some(idx) => (name[..idx].to_string(), name[idx + 1..].to_string()),
    };
    if run.is_empty() {
        run = match (m, script) {
            (Some(m), _) => m.rsplit('.').next().unwrap_or(m).to_string(),
            (_, Some(s)) => stem(s),
            _ => String::new(),
        };
    }
    if experiment.is_empty() {
        experiment = "default-experiment".into();
    }
    (experiment, run)
}

fn stem(path: &str) -> String {
    let file = path.rsplit('/').next().unwrap_or(path);
    match file.rfind('.') {
        Some(i) if i > 0 => file[..i].to_string(),
        _ => file.to_string(),
    }
}

/// The environment `dist.ddp --debug` sets: PyTorch's usual debugging switches.
pub const DEBUG_FLAGS: [(&str, &str); 4] = [
    ("CUDA_LAUNCH_BLOCKING", "1"),
    ("NCCL_DESYNC_DEBUG", "1"),
    ("TORCH_DISTRIBUTED_DEBUG", "DETAIL"),
    ("TORCH_SHOW_CPP_STACKTRACES", "1"),
];

pub(super) fn ddp(a: &ComponentArgs, cenv: &ComponentEnv) -> Result<AppDef> {
    ddp_with(a, cenv, a.str("j"))
}

/// `dist.torchrun`, TorchX's name for its distributed launcher since the 0.8 line: `dist.ddp`'s
/// parameters, but with a named host `-h` a bare `-j N` is N nodes of as many processes as the
/// host has GPUs (as `dist.spmd`); any other `-j` means what it means to `dist.ddp`.
pub(super) fn torchrun(a: &ComponentArgs, cenv: &ComponentEnv) -> Result<AppDef> {
    let j = a.str("j");
    match a.opt_str("h") {
        Some(h) if !j.is_empty() && j.bytes().all(|b| b.is_ascii_digit()) => {
            let gpus = cenv.resource(h)?.gpu;
            ddp_with(a, cenv, &format!("{j}x{}", nproc_from_gpus(h, gpus, j)?))
        }
        _ => ddp_with(a, cenv, j),
    }
}

/// The processes per node of a bare `-j N` on named host `h`: its `gpus`, which must be some.
fn nproc_from_gpus(h: &str, gpus: i64, n: &str) -> Result<i64> {
    if gpus <= 0 {
        return Err(Error::arg(format!("nproc_per_node cannot be inferred from GPU count. `{h}` is not a GPU instance. You must specify `-j $nnodes x $nproc_per_node` (e.g. `-j {n}x8`)")));
    }
    Ok(gpus)
}

fn ddp_with(a: &ComponentArgs, cenv: &ComponentEnv, j: &str) -> Result<AppDef> {
    let (script, m) = (a.opt_str("script"), a.opt_str("m"));
    if script.is_some() == m.is_some() {
        return Err(Error::arg(
            "exactly one of --script and -m must be specified",
        ));
    }
    let nn = parse_nnodes(j)?;
    let rdzv_port = u16::try_from(a.opt_int("rdzv_port").unwrap_or(29500)).map_err(|_| {
        Error::arg(format!(
            "`--rdzv_port` must be a port number (0-65535), got {}",
            a.int("rdzv_port")
        ))
    })?;
    let rdzv_backend = a.opt_str("rdzv_backend").unwrap_or("c10d");
    let rdzv_endpoint = if nn.max_nnodes == 1 {
        "localhost:0".to_string()
    } else {
        format!("$${{${{rank0_env}}:=localhost}}:{rdzv_port}")
    };
    let (experiment, run) = structured_name(a.str("name"), m, script);
    let mut env = a.dict("env").cloned().unwrap_or_default();
    env.insert("TORCHX_TRACKING_EXPERIMENT_NAME".into(), experiment);
    env.insert("TORCHX_TRACKING_RUN_NAME".into(), run.clone());
    loglevel(&mut env, cenv);
    if a.bool("debug") {
        env.extend(
            DEBUG_FLAGS
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
    }
    let tee = a.opt_int("tee").unwrap_or(3).to_string();
    let mut head = vec![
        "torchrun".to_string(),
        "--rdzv_backend".into(),
        rdzv_backend.into(),
    ];
    if let Some(conf) = a.opt_str("rdzv_conf") {
        check_rdzv_conf(conf)?;
        head.extend(["--rdzv_conf".to_string(), conf.to_string()]);
    }
    let mut tail = vec![
        "--rdzv_id".to_string(),
        "${app_id}".into(),
        "--nnodes".into(),
        nn.nnodes_rep.clone(),
        "--nproc_per_node".into(),
        nn.nproc_per_node.to_string(),
        "--tee".into(),
        tee,
        "--role".into(),
        String::new(),
    ];
    if rdzv_backend == "static" {
        tail.extend(["--node_rank".to_string(), "${replica_id}".into()]);
    }
    match (script, m) {
        (Some(s), _) => tail.push(s.into()),
        (_, Some(m)) => tail.extend(["-m".to_string(), m.into()]),
        _ => {}
    }
    tail.extend(a.varargs.iter().cloned());
    // The endpoint stays unquoted so that the shell expands the rank-0 host variable.
    let cmd = format!(
        "{} --rdzv_endpoint {rdzv_endpoint} {}",
        shell_join(&head),
        shell_join(&tail)
    );
    let role_name = match (script, m) {
        (Some(s), _) => stem(s),
        (_, Some(m)) => m.rsplit('.').next().unwrap_or(m).to_string(),
        _ => unreachable!("checked above"),
    };
    let resource = args_resource(a, cenv)?;
    let mut role = Role::new(role_name, a.str("image"))
        .with_entrypoint("bash")
        .with_args(["-c".to_string(), cmd])
        .with_replicas(nn.max_nnodes)
        .with_resource(resource);
    role.min_replicas = Some(nn.min_nnodes);
    role.env = env;
    role.port_map.insert("c10d".into(), rdzv_port);
    role.max_retries = non_negative(a, "max_retries")?;
    role.mounts = args_mounts(a, cenv)?;
    let mut app = single(&run, role);
    app.metadata = a
        .dict("metadata")
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .collect();
    Ok(app)
}

pub(super) fn spmd(a: &ComponentArgs, cenv: &ComponentEnv) -> Result<AppDef> {
    let h = a.str("h");
    let gpus = cenv.resource(h)?.gpu;
    let j = a.str("j");
    let nums: Vec<&str> = j.split('x').collect();
    let j = match nums.as_slice() {
        [n] => format!("{n}x{}", nproc_from_gpus(h, gpus, n)?),
        [n, nproc] => {
            if gpus > 0 && nproc.parse::<i64>().ok() != Some(gpus) {
                log::warn!("In `-j {j}` you specified nproc_per_node={nproc} which does not equal the number of GPUs on a {h}: {gpus}. This may lead to under-utilization or an error.");
            }
            format!("{n}x{nproc}")
        }
        _ => {
            return Err(Error::arg(format!(
                "Invalid format for -j, usage example: 2x8 or 2. Given: {j}"
            )))
        }
    };
    // As TorchX's spmd: `ddp` with spmd's arguments, ddp's defaults for the rest (rdzv port and
    // backend, tee, resources).
    let ddp = Component::native("dist.ddp", DDP_DOC, ddp_params(), ddp);
    let mut args = match ddp.parse_args(&[] as &[&str], &BTreeMap::new())? {
        ParseOutcome::Args(defaults) => defaults,
        ParseOutcome::Help => unreachable!("no --help was given"),
    };
    args.values
        .extend(a.values.iter().map(|(k, v)| (k.clone(), v.clone())));
    args.varargs.clone_from(&a.varargs);
    ddp_with(&args, cenv, &j)
}
