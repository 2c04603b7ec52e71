//! Pure rendering of an AppDef into TorchX's AWS Batch multi-node job definition and submission
//! (`BatchJob`), as the Batch API takes them (camelCase JSON; the dry run shows exactly that).

use std::collections::BTreeMap;

use super::opts::AwsBatchOpts;
use crate::error::{Error, Result};
use crate::scheduler::{ArrayRequest, ArrayTask, DryRunContext};
use crate::schedulers::attempt_timer;
use crate::specs::{AppDef, MacroValues, Mount, Recovery, Role};
use crate::text::{shell_join, shell_quote};

/// Env var naming the role of a node group (describe and logs find roles by it).
pub(crate) const ENV_ROLE_NAME: &str = "TORCHX_ROLE_NAME";
/// Env var with the role's index.
pub(crate) const ENV_ROLE_IDX: &str = "TORCHX_ROLE_IDX";
/// TorchX's limit on roles (Batch node groups).
pub(crate) const MAX_ROLES: usize = 5;
/// Batch's limit on the nodes of a multi-node job.
pub(crate) const MAX_NODES: u32 = 1000;

pub(crate) use super::request::{
    BatchJob, Container, Device, EvaluateOnExit, JobDefinition, KeyValue, LinuxParameters,
    LogConfiguration, MountPoint, NodeProperties, NodeRange, ResourceRequirement, RetryStrategy,
    Timeout, Volume,
};

/// Batch names: 1-128 letters, digits, `-` and `_`, starting with a letter or digit.
pub(crate) fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Error::spec(format!(
            "{what} `{name}` is not a valid AWS Batch name: 1-128 letters, digits, '-' and '_', \
             starting with a letter or digit"
        )))
    }
}

fn resource_requirements(role: &Role) -> Result<Vec<ResourceRequirement>> {
    let r = &role.resource;
    if r.mem_mb <= 0 {
        return Err(Error::spec(format!(
            "role `{}`: aws_batch needs resource.memMB > 0 (got {}); set a resource, e.g. \
             `-h` / `--memMB`",
            role.name, r.mem_mb
        )));
    }
    let rr = |kind: &str, v: i64| ResourceRequirement {
        kind: kind.into(),
        value: v.to_string(),
    };
    let mut out = vec![
        rr("VCPU", if r.cpu > 0 { r.cpu } else { 1 }),
        rr("MEMORY", r.mem_mb),
    ];
    if r.gpu > 0 {
        out.push(rr("GPU", r.gpu));
    }
    Ok(out)
}

/// Named resource devices as device mounts (TorchX: EFA and Neuron).
fn resource_device_mounts(devices: &BTreeMap<String, i64>) -> Vec<Mount> {
    let mut out = Vec::new();
    for (name, count) in devices {
        let path = match name.as_str() {
            "vpc.amazonaws.com/efa" => "/dev/infiniband/uverbs",
            "aws.amazon.com/neurondevice" => "/dev/neuron",
            _ => continue,
        };
        for i in 0..(*count).max(0) {
            out.push(Mount::Device {
                src_path: format!("{path}{i}"),
                dst_path: format!("{path}{i}"),
                permissions: "rwm".into(),
            });
        }
    }
    out
}

/// The role's mounts (and its resource's devices) as Batch volumes with their mount points,
/// and devices.
fn volumes_and_devices(role: &Role) -> Result<(Vec<Volume>, Vec<MountPoint>, Vec<Device>)> {
    let mut mount_points = Vec::new();
    let mut volumes = Vec::new();
    let mut devices = Vec::new();
    let mounts = role
        .mounts
        .iter()
        .cloned()
        .chain(resource_device_mounts(&role.resource.devices));
    for (i, m) in mounts.enumerate() {
        let name = format!("mount_{i}");
        match m {
            Mount::Bind {
                src_path,
                dst_path,
                read_only,
            } => {
                volumes.push(Volume {
                    name: name.clone(),
                    host: Some(BTreeMap::from([("sourcePath".into(), src_path)])),
                    efs_volume_configuration: None,
                });
                mount_points.push(MountPoint {
                    container_path: dst_path,
                    read_only,
                    source_volume: name,
                });
            }
            Mount::Volume {
                src,
                dst_path,
                read_only,
            } => {
                volumes.push(Volume {
                    name: name.clone(),
                    host: None,
                    efs_volume_configuration: Some(BTreeMap::from([("fileSystemId".into(), src)])),
                });
                mount_points.push(MountPoint {
                    container_path: dst_path,
                    read_only,
                    source_volume: name,
                });
            }
            Mount::Device {
                src_path,
                dst_path,
                permissions,
            } => {
                let permissions = permissions
                    .chars()
                    .map(|p| match p {
                        'r' => Ok("READ".to_string()),
                        'w' => Ok("WRITE".to_string()),
                        'm' => Ok("MKNOD".to_string()),
                        other => Err(Error::spec(format!(
                            "role `{}`: device permission `{other}` of {src_path} is not one \
                             of r, w, m",
                            role.name
                        ))),
                    })
                    .collect::<Result<_>>()?;
                devices.push(Device {
                    host_path: src_path,
                    container_path: dst_path,
                    permissions,
                });
            }
        }
    }
    Ok((volumes, mount_points, devices))
}

/// The role's command: under the hang watch when it has a hang timeout (its replica is
/// `AWS_BATCH_JOB_NODE_INDEX` less the role's first node `start`, told by the shell), under
/// the timer when the job recovers or is watched (Batch sends no signal before its timeout and
/// never retries an attempt it timed out: the container times itself).
fn command(role: &Role, start: u32, recovery: Option<&Recovery>) -> Vec<String> {
    let mut command: Vec<String> = std::iter::once(role.entrypoint.clone())
        .chain(role.args.iter().cloned())
        .collect();
    if let Some(timeout) = role.hang_timeout {
        let signal =
            recovery.map(|r| crate::schedulers::hang_watch::hang_signal(r.checkpoint_signal));
        command = crate::schedulers::hang_watch::in_container(
            timeout,
            &format!("{}/+{start}", role.name),
            signal,
            command,
        );
    }
    // A watched job without recovery options gets the timer without a limit.
    match recovery
        .copied()
        .or(role.hang_timeout.map(|_| role.recovery()))
    {
        Some(r) => attempt_timer::timed_command(
            &r,
            role.max_retries,
            Some("export TORCHX_ATTEMPT=$((${AWS_BATCH_JOB_ATTEMPT:-1} - 1))"),
            &command[0],
            &command[1..],
        ),
        None => command,
    }
}

fn node_range(
    role: &Role,
    start: u32,
    opts: &AwsBatchOpts,
    recovery: Option<&Recovery>,
) -> Result<NodeRange> {
    let (volumes, mount_points, devices) = volumes_and_devices(role)?;
    let instance_type = role
        .resource
        .capabilities
        .get("node.kubernetes.io/instance-type")
        .map(|t| t.as_str().map_or_else(|| t.to_string(), str::to_string));
    Ok(NodeRange {
        target_nodes: format!("{start}:{}", start + role.num_replicas - 1),
        container: Container {
            command: command(role, start, recovery),
            image: role.image.clone(),
            environment: role
                .env
                .iter()
                .map(|(k, v)| KeyValue {
                    name: k.clone(),
                    value: v.clone(),
                })
                .collect(),
            privileged: opts.privileged,
            resource_requirements: resource_requirements(role)?,
            linux_parameters: LinuxParameters {
                shared_memory_size: role.resource.mem_mb,
                devices,
            },
            log_configuration: LogConfiguration {
                log_driver: "awslogs".into(),
            },
            mount_points,
            volumes,
            job_role_arn: opts.job_role_arn.clone(),
            execution_role_arn: opts.execution_role_arn.clone(),
            instance_type,
        },
    })
}

/// The job tag that records the requeue exit code, for describe to tell requeues apart.
pub(crate) const TAG_REQUEUE_EXIT_CODE: &str = "torchx.pytorch.org/requeue-exit-code";
/// Tags a job whose replicas run under the hang watch (a role's `hang_timeout`, seconds): an
/// attempt that exits with [`HUNG_EXIT_CODE`](crate::schedulers::hang_watch::HUNG_EXIT_CODE)
/// hung.
pub(crate) const TAG_HANG_TIMEOUT: &str = "torchx.pytorch.org/hang-timeout";
/// Batch's most attempts per job.
const MAX_ATTEMPTS: u32 = 10;
/// Batch's shortest attempt timeout.
const MIN_TIMEOUT: u64 = 60;
/// How Batch says the instance went away (spot reclaim, a lost host): retried as a requeue.
const HOST_GONE: &str = "Host EC2*";

/// `retryStrategy` and `timeout` under the recovery contract. Batch counts every attempt
/// against one `attempts` (at most 10): the requeue exit code and a lost host retry, other
/// failures retry only when `max_retries` allows any.
fn recovery_strategy(
    app: &AppDef,
    r: &Recovery,
    max_retries: u32,
) -> Result<(RetryStrategy, Option<Timeout>)> {
    let wanted = 1 + max_retries + r.max_requeues;
    let explicit = app.roles.iter().any(|role| role.max_requeues.is_some());
    if wanted > MAX_ATTEMPTS && explicit {
        return Err(Error::unsupported(
            super::NAME,
            format!(
                "max_requeues {} with max_retries {max_retries}: a Batch job has at most \
                 {MAX_ATTEMPTS} attempts in all (1 + max_retries + max_requeues ≤ {MAX_ATTEMPTS})",
                r.max_requeues
            ),
        ));
    }
    if let Some(limit) = r.time_limit.filter(|l| *l < MIN_TIMEOUT) {
        return Err(Error::unsupported(
            super::NAME,
            format!(
                "time_limit {}: Batch attempt timeouts are at least {MIN_TIMEOUT} seconds",
                crate::specs::format_duration(limit)
            ),
        ));
    }
    let mut rules = vec![
        EvaluateOnExit::on_exit("0", "EXIT"),
        EvaluateOnExit::on_exit(&r.requeue_exit_code.to_string(), "RETRY"),
        EvaluateOnExit {
            on_exit_code: None,
            on_status_reason: Some(HOST_GONE.into()),
            action: "RETRY".into(),
        },
    ];
    if max_retries == 0 {
        rules.push(EvaluateOnExit::on_exit("*", "EXIT"));
    }
    let timeout = attempt_timer::backstop(r).map(|secs| Timeout {
        attempt_duration_seconds: secs,
    });
    Ok((
        RetryStrategy {
            attempts: wanted.min(MAX_ATTEMPTS),
            evaluate_on_exit: rules,
        },
        timeout,
    ))
}

/// Renders the job definition and submission.
pub(crate) fn render(app: &AppDef, opts: &AwsBatchOpts, ctx: &DryRunContext) -> Result<BatchJob> {
    if app.roles.len() > MAX_ROLES {
        return Err(Error::spec(format!(
            "AWS Batch only supports <= {MAX_ROLES} roles (node groups), this app has {}; see \
             https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html",
            app.roles.len()
        )));
    }
    let name = unique_name(app, opts, ctx);
    render_as(app, opts, ctx, name.clone(), name)
}

/// The job's name: the app's, with the share id, made unique.
fn unique_name(app: &AppDef, opts: &AwsBatchOpts, ctx: &DryRunContext) -> String {
    let suffix = opts
        .share_id
        .as_ref()
        .map_or(String::new(), |s| format!("-{s}"));
    ctx.make_unique(&format!("{}{suffix}", app.name))
}

/// `render` under a given job name, and `app_id` for the `${app_id}` macro (TorchX's: the
/// name; an array child's: `<name>:<index>`, its handle's tail).
fn render_as(
    app: &AppDef,
    opts: &AwsBatchOpts,
    ctx: &DryRunContext,
    name: String,
    app_id: String,
) -> Result<BatchJob> {
    check_name("queue", &opts.queue)
        .map_err(|e| Error::config(format!("run option queue: {e}")))?;
    check_name("job name", &name)?;
    let recovery = app.job_recovery(super::NAME)?;
    let mut nodes = Vec::new();
    let mut next: u32 = 0;
    for (role_idx, role) in app.roles.iter().enumerate() {
        if role.num_replicas == 0 {
            return Err(Error::spec(format!("role `{}` has no replicas", role.name)));
        }
        let values = MacroValues {
            img_root: String::new(),
            app_id: app_id.clone(),
            replica_id: "$AWS_BATCH_JOB_NODE_INDEX".into(),
            rank0_env: "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS".into(),
        };
        let mut role = values.apply(role);
        role.env.insert(ENV_ROLE_IDX.into(), role_idx.to_string());
        if let Some(dir) = role.container_checkpoint_dir()? {
            role.env.insert("TORCHX_CHECKPOINT_DIR".into(), dir);
        }
        role.env.insert(ENV_ROLE_NAME.into(), role.name.clone());
        nodes.push(node_range(&role, next, opts, recovery.as_ref())?);
        next += role.num_replicas;
    }
    if next > MAX_NODES {
        return Err(Error::spec(format!(
            "AWS Batch multi-node jobs have at most {MAX_NODES} nodes; this app asks for {next}"
        )));
    }
    let mut tags = crate::schedulers::aws::job_tags(app, opts.user.as_deref());
    if let Some(t) = app.roles.iter().find_map(|r| r.hang_timeout) {
        tags.insert(TAG_HANG_TIMEOUT.into(), t.to_string());
    }
    let max_retries = app.roles.iter().map(|r| r.max_retries).max().unwrap_or(0);
    let (retry_strategy, timeout) = match &recovery {
        Some(r) => {
            tags.insert(
                TAG_REQUEUE_EXIT_CODE.into(),
                r.requeue_exit_code.to_string(),
            );
            recovery_strategy(app, r, max_retries)?
        }
        // TorchX's: `attempts` counts the first one, so max_retries 1 never retries.
        None => (
            RetryStrategy {
                attempts: max_retries.max(1),
                evaluate_on_exit: vec![EvaluateOnExit::on_exit("0", "EXIT")],
            },
            None,
        ),
    };
    Ok(BatchJob {
        name: name.clone(),
        queue: opts.queue.clone(),
        share_id: opts.share_id.clone(),
        job_def: JobDefinition {
            job_definition_name: name,
            kind: "multinode".into(),
            node_properties: Some(NodeProperties {
                num_nodes: next,
                main_node: 0,
                node_range_properties: nodes,
            }),
            container_properties: None,
            retry_strategy,
            timeout,
            tags,
            scheduling_priority: opts.share_id.as_ref().map(|_| opts.priority),
        },
        array_size: None,
        depends_on: depends_on(&ctx.after)?,
    })
}

/// `--after` as Batch's `dependsOn`: the job waits until each dependency SUCCEEDED, and fails
/// when one fails. That is `:ok` on another Batch job; anything else (`notok`, `any`, another
/// scheduler's job, an array's child) Batch cannot express.
fn depends_on(after: &[crate::specs::Dependency]) -> Result<Vec<String>> {
    after
        .iter()
        .map(|dep| {
            let handle = crate::specs::parse_app_handle(&dep.handle)?;
            let plain = handle.app_id().matches(':').count() == 1;
            if handle.scheduler() == super::NAME
                && plain
                && dep.condition == crate::specs::Condition::Ok
            {
                return Ok(handle.app_id().to_string());
            }
            let why = if handle.scheduler() != super::NAME {
                "a job of another scheduler"
            } else if !plain {
                "an array's child"
            } else {
                "a job that must fail or merely end (dependsOn waits for success)"
            };
            Err(Error::unsupported(
                super::NAME,
                format!("--after {dep}: Batch's dependsOn cannot wait for {why}"),
            ))
        })
        .collect()
}

/// How long the command choosing an array child's task may be: it is part of the job
/// definition, which becomes an ECS task definition (at most 64 KiB); a group that needs more
/// goes one job per task.
const MAX_ARRAY_COMMAND_BYTES: usize = 48 * 1024;
/// Batch's bounds on an array job's size.
const ARRAY_SIZES: std::ops::RangeInclusive<usize> = 2..=10_000;

/// The tasks as one Batch array job, or why not. Batch arrays are of single-container jobs
/// (never multi-node) with no cap on how many children run at once: a group of multi-replica
/// apps, a capped one (`%K`) and one outside 2..=10,000 tasks go one job per task. The
/// children share one container; its command picks the task's own command and environment by
/// `AWS_BATCH_JOB_ARRAY_INDEX` (so the image needs `sh`).
pub(crate) fn render_array(
    tasks: &[ArrayTask<'_>],
    max_concurrent: Option<u32>,
    opts: &AwsBatchOpts,
    ctx: &DryRunContext,
) -> Result<ArrayRequest<BatchJob>> {
    let per_task = |why: String| Ok(ArrayRequest::PerTask(why));
    if let Some(k) = max_concurrent {
        return per_task(format!(
            "AWS Batch array jobs cannot cap how many children run at once (%{k}): torchx \
             submits each task as a job, at most {k} unfinished at once"
        ));
    }
    if !ARRAY_SIZES.contains(&tasks.len()) {
        return per_task(format!(
            "AWS Batch array jobs have 2 to 10,000 children, this group {} tasks",
            tasks.len()
        ));
    }
    if let Some(t) = tasks.iter().find(|t| !t.is_single_replica()) {
        return per_task(format!(
            "task {}'s app is a multi-node job, and AWS Batch array jobs are of single \
             containers",
            t.index
        ));
    }
    let Some(name) = tasks.first().map(|t| unique_name(t.app, opts, ctx)) else {
        return per_task("a group of no tasks".into());
    };
    let mut containers = Vec::with_capacity(tasks.len());
    let mut first: Option<BatchJob> = None;
    for (position, t) in tasks.iter().enumerate() {
        let app_id = format!("{name}:{position}");
        let mut job = render_as(t.app, opts, ctx, name.clone(), app_id)?;
        let Some(mut nodes) = job.job_def.node_properties.take() else {
            continue;
        };
        containers.push(nodes.node_range_properties.remove(0).container);
        first.get_or_insert(job);
    }
    let (Some(mut job), Some(shared)) = (first, containers.first()) else {
        return per_task("a group of no tasks".into());
    };
    let shape = |c: &Container| Container {
        command: Vec::new(),
        environment: Vec::new(),
        ..c.clone()
    };
    if let Some((t, _)) = tasks
        .iter()
        .zip(&containers)
        .find(|(_, c)| shape(c) != shape(shared))
    {
        return per_task(format!(
            "task {}'s job differs from task {}'s in more than its command and environment, \
             and an array job's children share their job definition",
            t.index, tasks[0].index
        ));
    }
    // The environment every task has stays the container's; the rest is each task's own.
    let common: Vec<KeyValue> = shared
        .environment
        .iter()
        .filter(|kv| containers.iter().all(|c| c.environment.contains(kv)))
        .cloned()
        .collect();
    let mut script = String::from(
        "export AWS_BATCH_JOB_NODE_INDEX=0 AWS_BATCH_JOB_NUM_NODES=1 \
         AWS_BATCH_JOB_MAIN_NODE_INDEX=0 AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS=127.0.0.1\n\
         case \"$AWS_BATCH_JOB_ARRAY_INDEX\" in\n",
    );
    for (position, c) in containers.iter().enumerate() {
        let exports: Vec<String> = c
            .environment
            .iter()
            .filter(|kv| !common.contains(kv))
            .map(|kv| format!("export {}={}; ", kv.name, shell_quote(&kv.value)))
            .collect();
        script.push_str(&format!(
            "{position}) {}exec {} ;;\n",
            exports.concat(),
            shell_join(&c.command)
        ));
    }
    script.push_str(
        "*) echo \"torchx: no task at array index $AWS_BATCH_JOB_ARRAY_INDEX\" >&2; exit 2 ;;\n\
         esac",
    );
    if script.len() > MAX_ARRAY_COMMAND_BYTES {
        return per_task(format!(
            "the tasks' commands make a container command of {} bytes, and an array job's \
             definition (an ECS task definition, at most 64 KiB) holds {MAX_ARRAY_COMMAND_BYTES}",
            script.len()
        ));
    }
    let container = Container {
        command: vec!["sh".into(), "-c".into(), script],
        environment: common,
        ..shared.clone()
    };
    job.job_def.kind = "container".into();
    job.job_def.container_properties = Some(container);
    job.array_size = Some(tasks.len() as u32);
    Ok(ArrayRequest::Native(job))
}
