//! Pure rendering of an AppDef into TorchX's LSF submit script: one `bsub` per replica whose
//! job script (a heredoc) runs the replica's container with `docker run`. Replica 0 runs on the
//! rank-0 host (chosen from `bhosts` before the dry run); the others wait for it to start and
//! avoid its host. Unlike TorchX, every user string is shell-quoted and each heredoc has a
//! quoted delimiter that no line of its body equals, so nothing in an arg is ever expanded.

use super::opts::LsfOpts;
use crate::error::{Error, Result};
use crate::scheduler::{ArrayRequest, ArrayTask, DryRunContext, NativeRequest};
use crate::schedulers::attempt_timer;
use crate::specs::group::ArraySpec;
use crate::specs::{AppDef, MacroValues, Mount, Recovery, Role};
use crate::text::{shell_join, shell_quote};

/// What a dry run learns from the cluster (`Scheduler::dryrun_facts`): `bhosts -noheader -o
/// "hname max ng"`'s output, or why LSF could not be asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LsfFacts {
    /// The hosts, or the reason there are none.
    pub bhosts: std::result::Result<String, String>,
}

/// What `lsf` submits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LsfBsub {
    /// The app id (the LSF project of every job).
    pub app_id: String,
    /// Where job logs go, if set.
    pub jobdir: Option<String>,
    /// The submit script.
    pub script: String,
    /// Why the rank-0 host is unknown (the script then holds a placeholder and cannot be
    /// submitted), if it is.
    pub rank0_unknown: Option<String>,
}

impl NativeRequest for LsfBsub {
    fn render(&self) -> String {
        format!(
            "/bin/bash $BSUB_SCRIPT\n#------------\n# BSUB_SCRIPT\n#------------\n{}",
            self.script
        )
    }
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"app_id": self.app_id, "jobdir": self.jobdir, "script": self.script})
    }
}

/// TorchX's lsf `cleanup_str`: lowercase, keep `[a-z0-9_-]`, drop one leading `-`.
pub(super) fn cleanup_str(s: &str) -> String {
    let s = s.strip_prefix('-').unwrap_or(s);
    s.to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-' || *c == '_')
        .collect()
}

/// The `docker run` command of one replica (already macro-substituted).
fn docker_command(job_name: &str, role: &Role, opts: &LsfOpts) -> String {
    let mut cmd: Vec<String> = vec!["docker".into(), "run".into(), format!("--name={job_name}")];
    for m in &role.mounts {
        match m {
            Mount::Bind {
                src_path,
                dst_path,
                read_only,
            } => {
                let rw = if *read_only { "ro" } else { "rw" };
                cmd.extend(["-v".into(), format!("{src_path}:{dst_path}:{rw}")]);
            }
            Mount::Volume {
                src,
                dst_path,
                read_only,
            } => {
                let ro = if *read_only { ",ro" } else { "" };
                cmd.extend([
                    "--mount".into(),
                    format!("type=volume,src={src},dst={dst_path}{ro}"),
                ]);
            }
            Mount::Device {
                src_path,
                dst_path,
                permissions,
            } => cmd.push(format!("--device={src_path}:{dst_path}:{permissions}")),
        }
    }
    if let Some(w) = &opts.container_workdir {
        cmd.extend(["-w".into(), w.clone()]);
    }
    if opts.host_network {
        cmd.extend(["--net=host".into(), "--ipc=host".into()]);
    } else {
        for port in role.port_map.values() {
            cmd.extend(["-p".into(), port.to_string()]);
        }
    }
    if !opts.shm_size.is_empty() {
        cmd.push(format!("--shm-size={}", opts.shm_size));
    }
    for (k, v) in &role.env {
        cmd.extend(["-e".into(), format!("{k}={v}")]);
    }
    let r = &role.resource;
    if r.cpu > 0 {
        cmd.push(format!("--cpus={}", r.cpu));
    }
    if r.mem_mb > 0 {
        cmd.push(format!("--memory={}", r.mem_mb * 1024 * 1024));
    }
    if r.gpu > 0 {
        cmd.extend(["--gpus".into(), "all".into()]);
    }
    cmd.extend([
        "--entrypoint".into(),
        role.entrypoint.clone(),
        "--rm".into(),
        role.image.clone(),
    ]);
    cmd.extend(role.args.iter().cloned());
    shell_join(&cmd)
}

/// A heredoc delimiter that is no line of `body`.
fn delimiter(body: &str) -> String {
    let mut d = "TORCHX_EOF".to_string();
    while body.lines().any(|l| l == d) {
        d.push('_');
    }
    d
}

/// One replica's `bsub` (TorchX's options, each value quoted) with its job script.
fn bsub(
    app_id: &str,
    job_name: &str,
    role: &Role,
    opts: &LsfOpts,
    head: Option<&str>,
    rank0_host: &str,
) -> String {
    let placement = match head {
        Some(head) => vec![
            "-w".into(),
            format!("started({head})"),
            "-R".into(),
            format!("select[hname!='{rank0_host}']"),
        ],
        None => vec!["-m".into(), rank0_host.into()],
    };
    let args = bsub_args(app_id, job_name, placement, role, opts);
    with_script(&args, &job_body(job_name, job_name, role, opts))
}

/// `bsub ARGS` fed `body` through a heredoc whose quoted delimiter no line of it equals.
fn with_script(args: &[String], body: &str) -> String {
    let eof = delimiter(body);
    format!("{} << '{eof}'\n{body}\n{eof}", shell_join(args))
}

/// `bsub`'s options for a job of `role`, where it runs (`placement`) after its name.
fn bsub_args(
    app_id: &str,
    job_name: &str,
    placement: Vec<String>,
    role: &Role,
    opts: &LsfOpts,
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "bsub".into(),
        "-P".into(),
        app_id.into(),
        "-J".into(),
        job_name.into(),
    ];
    args.extend(placement);
    if let Some(d) = &opts.jobdir {
        // An array's elements share one submission log (`name[1-6]%2` is not a file name).
        let base = job_name.split('[').next().unwrap_or(job_name);
        let submit_log = |ext: &str| format!("{d}/{base}.submit.{ext}");
        args.extend([
            "-cwd".into(),
            d.clone(),
            "-outdir".into(),
            d.clone(),
            "-oo".into(),
            submit_log("out"),
            "-eo".into(),
            submit_log("err"),
        ]);
    }
    if let Some(q) = &opts.lsf_queue {
        args.extend(["-q".into(), q.clone()]);
    }
    if role.uses_recovery() {
        args.extend(recovery_args(&role.recovery()));
    }
    let r = &role.resource;
    if r.cpu > 0 {
        args.extend(["-n".into(), r.cpu.to_string()]);
    }
    // (TorchX wrote `span[hosts=1]]` here when memMB was unset: a typo LSF rejects.)
    args.extend([
        "-R".into(),
        if r.mem_mb > 0 {
            format!("span[hosts=1] rusage[mem={}]", r.mem_mb)
        } else {
            "span[hosts=1]".into()
        },
    ]);
    if r.gpu > 0 {
        args.extend([
            "-gpu".into(),
            format!("num={}:mode=shared:j_exclusive=yes", r.gpu),
        ]);
    }
    args
}

/// A job's script: its container's `docker run`, the output to `<log_name>.{out,err}` in the
/// jobdir.
fn job_body(container: &str, log_name: &str, role: &Role, opts: &LsfOpts) -> String {
    let mut body = docker_command(container, role, opts);
    if let Some(d) = &opts.jobdir {
        body.push_str(&format!(
            " > {} 2> {}",
            shell_quote(&format!("{d}/{log_name}.out")),
            shell_quote(&format!("{d}/{log_name}.err"))
        ));
    }
    body
}

/// The recovery contract in `bsub`'s words: `-W` the run limit and `-wa`/`-wt` the warning
/// signal before it (both in whole minutes: LSF's unit), `-Q` the requeue exit code, `-r` rerun
/// when the host fails. `docker run` passes the signal on to the container.
fn recovery_args(r: &Recovery) -> Vec<String> {
    let minutes = |secs: u64| secs.div_ceil(60).to_string();
    let mut args = Vec::new();
    if let Some(limit) = r.time_limit {
        args.extend(["-W".into(), minutes(limit)]);
    }
    if let Some(sig) = r.checkpoint_signal {
        args.extend([
            "-wa".into(),
            sig.signal.name().into(),
            "-wt".into(),
            minutes(sig.seconds),
        ]);
    }
    args.extend(["-Q".into(), r.requeue_exit_code.to_string(), "-r".into()]);
    args
}

/// LSF bounds requeues per queue (`MAX_JOB_REQUEUE` in lsb.params or lsb.queues), not per job.
fn check_requeue_budget(app: &AppDef) -> Result<()> {
    match app.roles.iter().find(|r| r.max_requeues.is_some()) {
        Some(role) => Err(Error::unsupported(
            super::NAME,
            format!(
                "max_requeues (role `{}`): LSF bounds requeues per queue (MAX_JOB_REQUEUE), \
                 not per job",
                role.name
            ),
        )),
        None => Ok(()),
    }
}

/// Replica `replica_id` of `role` as its job runs it: macros applied, the rank-0 host in its
/// env and, under the recovery contract, its attempts counted under `attempt_key`.
fn replica_job(
    role: &Role,
    app_id: &str,
    replica_id: u32,
    rank0_host: &str,
    attempt_key: &str,
) -> Result<Role> {
    let values = MacroValues {
        img_root: String::new(),
        app_id: app_id.to_string(),
        replica_id: replica_id.to_string(),
        rank0_env: "TORCHX_RANK0_HOST".into(),
    };
    let mut replica = values.apply(role);
    replica
        .env
        .insert("TORCHX_RANK0_HOST".into(), rank0_host.to_string());
    if let Some(dir) = replica.container_checkpoint_dir()? {
        replica.env.insert("TORCHX_CHECKPOINT_DIR".into(), dir);
        // LSF numbers no attempt: the container counts its own, by the job's name.
        replica
            .env
            .insert("TORCHX_ATTEMPT_KEY".into(), attempt_key.to_string());
        replica
            .env
            .insert("TORCHX_MAX_RETRIES".into(), replica.max_retries.to_string());
        let mut cmd =
            attempt_timer::counted_command(&replica.entrypoint, &replica.args).into_iter();
        replica.entrypoint = cmd.next().unwrap_or_default();
        replica.args = cmd.collect();
    }
    Ok(replica)
}

/// The app id LSF knows an app by (its jobs' project).
fn project(app: &AppDef, ctx: &DryRunContext) -> Result<String> {
    let app_id = cleanup_str(&ctx.make_unique(&app.name));
    if app_id.is_empty() || app_id.len() > 511 {
        return Err(Error::spec(format!(
            "app name `{}` gives no usable LSF project name",
            app.name
        )));
    }
    Ok(app_id)
}

/// The tasks as one LSF job array, `bsub -J "<name>[1-6]%2"` (LSF's indexes start at 1: an
/// element's is its task's index plus one), whose job script runs the task `$LSB_JOBINDEX`
/// names; or why not: an element is one single-host job, so apps of several replicas (or
/// whose tasks differ beyond their command and env) go one submission per task. An element
/// is a single-replica job: it is its own rank 0 (`TORCHX_RANK0_HOST=localhost`).
pub(super) fn render_array(
    tasks: &[ArrayTask<'_>],
    max_concurrent: Option<u32>,
    opts: &LsfOpts,
    ctx: &DryRunContext,
) -> Result<ArrayRequest<LsfBsub>> {
    check_shm_size(&opts.shm_size)?;
    let Some(first) = tasks.first().map(|t| t.app) else {
        return Ok(ArrayRequest::PerTask("a group of no tasks".into()));
    };
    check_requeue_budget(first)?;
    if let Some(t) = tasks.iter().find(|t| !t.is_single_replica()) {
        let replicas: u32 = t.app.roles.iter().map(|r| r.num_replicas).sum();
        return Ok(ArrayRequest::PerTask(format!(
            "task {}'s app has {replicas} replicas, and an LSF job array's elements are single \
             jobs",
            t.index
        )));
    }
    let erase = |r: &Role| Role {
        args: Vec::new(),
        env: Default::default(),
        ..r.clone()
    };
    if let Some(t) = ArrayTask::first_differing(tasks, erase) {
        return Ok(ArrayRequest::PerTask(format!(
            "task {}'s job differs from task {}'s in more than its command and environment, \
             and an LSF job array's elements share their options",
            t.index, tasks[0].index
        )));
    }
    let app_id = project(first, ctx)?;
    let name = format!(
        "{app_id}-{}",
        cleanup_str(&format!("{}-0", first.roles[0].name))
    );
    let mut script = String::from("case \"$LSB_JOBINDEX\" in\n");
    for t in tasks {
        let i = t.index + 1;
        let task_id = format!("{app_id}_{}", t.index);
        let element = format!("{name}[{i}]");
        let replica = replica_job(&t.app.roles[0], &task_id, 0, "localhost", &element)?;
        let body = job_body(&format!("{name}-{i}"), &element, &replica, opts);
        script.push_str(&format!("{i}) {body} ;;\n"));
    }
    script.push_str(
        "*) echo \"torchx: element $LSB_JOBINDEX is not in this array\" >&2; exit 2 ;;\nesac",
    );
    let indexes = ArraySpec {
        indexes: tasks.iter().map(|t| t.index + 1).collect(),
        max_concurrent: None,
    };
    let cap = max_concurrent.map_or(String::new(), |k| format!("%{k}"));
    let waits = match dependency_condition(&ctx.after)? {
        Some(w) => vec!["-w".to_string(), w, "-ti".to_string()],
        None => Vec::new(),
    };
    let args = bsub_args(
        &app_id,
        &format!("{name}[{indexes}]{cap}"),
        waits,
        &first.roles[0],
        opts,
    );
    Ok(ArrayRequest::Native(LsfBsub {
        app_id,
        jobdir: opts.jobdir.clone(),
        script: format!("#!/bin/bash\n{}\n", with_script(&args, &script)),
        rank0_unknown: None,
    }))
}

/// Renders the submit script; the rank-0 host is chosen from `facts` (a placeholder when LSF
/// could not be asked, which `schedule` refuses).
pub(crate) fn render(
    app: &AppDef,
    opts: &LsfOpts,
    ctx: &DryRunContext,
    facts: Option<&LsfFacts>,
) -> Result<LsfBsub> {
    check_shm_size(&opts.shm_size)?;
    check_requeue_budget(app)?;
    let app_id = project(app, ctx)?;
    let bhosts = match facts {
        Some(f) => f.bhosts.clone(),
        None => Err("LSF's hosts were not asked (no dry-run facts)".into()),
    };
    let (rank0_host, rank0_unknown) = match (bhosts, app.roles.first()) {
        (Ok(hosts), Some(role)) => (
            pick_rank0_host(&hosts, role.resource.cpu, role.resource.gpu)?,
            None,
        ),
        (Ok(_), None) => (String::new(), None),
        (Err(why), _) => ("<RANK0_HOST>".to_string(), Some(why)),
    };
    let mut bsubs = Vec::new();
    let mut head: Option<String> = None;
    let waits = dependency_condition(&ctx.after)?;
    for role in &app.roles {
        for replica_id in 0..role.num_replicas {
            let job_name = format!(
                "{app_id}-{}",
                cleanup_str(&format!("{}-{replica_id}", role.name))
            );
            let replica = replica_job(role, &app_id, replica_id, &rank0_host, &job_name)?;
            let mut one = bsub(
                &app_id,
                &job_name,
                &replica,
                opts,
                head.as_deref(),
                &rank0_host,
            );
            if let (None, Some(waits)) = (&head, &waits) {
                // The first replica waits for the dependencies (the others wait for it to
                // start); `-ti` ends it at once if they can no longer be met.
                one = one.replacen("bsub ", &format!("bsub -w {} -ti ", shell_quote(waits)), 1);
            }
            bsubs.push(one);
            head.get_or_insert(job_name);
        }
    }
    Ok(LsfBsub {
        app_id,
        jobdir: opts.jobdir.clone(),
        script: format!("#!/bin/bash\n{}\n", bsubs.join("\n")),
        rank0_unknown,
    })
}

/// LSF's dependency condition for `--after`: `done("<app>-*")` (ok), `exit(...)` (notok) or
/// `ended(...)` (any) of every job of each LSF app, joined with `&&`. Only LSF apps can be
/// waited for natively (not another scheduler's job, nor an array's task).
fn dependency_condition(after: &[crate::specs::Dependency]) -> Result<Option<String>> {
    use crate::specs::Condition;
    let mut clauses = Vec::new();
    for dep in after {
        let handle = crate::specs::parse_app_handle(&dep.handle)?;
        let array_task = handle
            .app_id()
            .rsplit_once('_')
            .is_some_and(|(_, i)| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()));
        let clean = handle
            .app_id()
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if handle.scheduler() != super::NAME || array_task || !clean {
            return Err(Error::unsupported(
                super::NAME,
                format!(
                    "--after {dep}: an LSF job waits natively only for LSF apps (not for {})",
                    if handle.scheduler() == super::NAME {
                        "an array's task"
                    } else {
                        "a job of another scheduler"
                    }
                ),
            ));
        }
        let test = match dep.condition {
            Condition::Ok => "done",
            Condition::NotOk => "exit",
            Condition::Any => "ended",
        };
        clauses.push(format!("{test}(\"{}-*\")", handle.app_id()));
    }
    Ok((!clauses.is_empty()).then(|| clauses.join(" && ")))
}

/// The first host in `bhosts -noheader -o "hname max ng"` output with enough CPUs and GPUs
/// for the first role (TorchX's rank-0 choice).
pub(super) fn pick_rank0_host(bhosts: &str, cpu: i64, gpu: i64) -> Result<String> {
    let (cpu, gpu) = (cpu.max(1), gpu.max(0));
    for line in bhosts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        // `-` means none.
        let num = |s: &str| s.parse::<i64>().unwrap_or(0);
        if num(f[1]) >= cpu && num(f[2]) >= gpu {
            return Ok(f[0].to_string());
        }
    }
    Err(Error::backend(
        super::NAME,
        format!("cannot find a host with {cpu} CPUs and {gpu} GPUs (bhosts lists none); try again with fewer resources"),
    ))
}

/// `shm_size` reaches `docker run --shm-size`: a size (`64m`, `1g`, `1073741824`, optionally with
/// `b`), nothing else — quoting would keep a newline from breaking the script, but it is still
/// not a size.
fn check_shm_size(size: &str) -> Result<()> {
    static SIZE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^[0-9]+(\.[0-9]+)?[bkmgBKMG]?[bB]?$").expect("valid regex")
    });
    if size.is_empty() || SIZE.is_match(size) {
        return Ok(());
    }
    Err(Error::config(format!(
        "shm_size `{}` is not a size: give a number with an optional unit (b, k, m, g), e.g. 64m or 1g",
        size.escape_debug()
    )))
}
