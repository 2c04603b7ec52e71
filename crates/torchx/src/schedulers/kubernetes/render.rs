//! Pure rendering of an AppDef into Kubernetes objects: TorchX's Volcano Job, or native
//! `batch/v1` Indexed Jobs (one per role) plus a headless Service. The pod template is shared
//! with `kubernetes_mcad`. Every name is checked against Kubernetes' rules here, before any
//! request is sent.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{
    Job, JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
};
use k8s_openapi::api::core::v1::{
    EnvVar, EnvVarSource, ObjectFieldSelector, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{json, Value};

use super::names::{
    check_dns_label, check_label_value, normalize_str, ENV_REPLICA_ID, LABEL_COMPLETION_INDEX,
    LABEL_KUBE_APP_NAME, LABEL_UNIQUE_NAME,
};
use super::opts::{KubernetesOpts, Mode};
use super::pod::{check_labels, pod_settings, to_value};
pub(crate) use super::pod::{
    object_labels, pod_labels, pod_overlay, role_to_pod, with_pod_overlay, PodSettings,
};
use crate::error::{Error, Result};
use crate::scheduler::{ArrayRequest, ArrayTask, DryRunContext, NativeRequest};
use crate::specs::{AppDef, MacroValues, RetryPolicy, Role};
use crate::text::{shell_join, shell_quote};

/// The Volcano Job API version.
pub(crate) const VOLCANO_API_VERSION: &str = "batch.volcano.sh/v1alpha1";

/// What `kubernetes` submits: the objects, in creation order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KubernetesJob {
    /// Namespace of every object.
    pub namespace: String,
    /// The app's unique name (the handle is `{namespace}:{name}`).
    pub name: String,
    /// Which kind of objects.
    pub mode: Mode,
    /// The objects (JSON as sent to the API server).
    pub objects: Vec<Value>,
}

impl NativeRequest for KubernetesJob {
    fn render(&self) -> String {
        render_yaml(&self.objects)
    }
    fn to_json(&self) -> Value {
        json!({"namespace": self.namespace, "name": self.name, "mode": self.mode.as_str(),
               "objects": self.objects})
    }
}

/// Objects as a multi-document YAML stream (what `kubectl apply -f` takes).
pub(crate) fn render_yaml(objects: &[Value]) -> String {
    objects
        .iter()
        .map(|o| serde_norway::to_string(o).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Renders the app for `kubernetes` in the mode the options choose.
pub(crate) fn render(
    app: &AppDef,
    opts: &KubernetesOpts,
    ctx: &DryRunContext,
) -> Result<KubernetesJob> {
    let name = normalize_str(&ctx.make_unique(&app.name));
    check_dns_label("app id", &name)?;
    check_label_value(LABEL_KUBE_APP_NAME, &app.name)?;
    let objects = match opts.mode {
        Mode::Volcano => vec![volcano_job(app, opts, &name)?],
        Mode::Job => native_jobs(app, opts, &name)?,
    };
    Ok(KubernetesJob {
        namespace: opts.namespace.clone(),
        name,
        mode: opts.mode,
        objects,
    })
}

/// How long the command choosing an Indexed Job pod's task may be.
const MAX_ARRAY_SCRIPT_BYTES: usize = 1024 * 1024;

/// The tasks as one Indexed Job (`job` mode): a completion per task, at most `max_concurrent`
/// pods at once (`parallelism`), each task's failures its own (`backoffLimitPerIndex`), and
/// the pod of index `i` running the `i`-th task, chosen by `JOB_COMPLETION_INDEX` (the image
/// needs `sh`). Or why not: Volcano mode keeps each task its own gang, and a multi-replica app
/// or tasks whose pods differ beyond their command and environment go one app per task.
pub(crate) fn render_array(
    tasks: &[ArrayTask<'_>],
    max_concurrent: Option<u32>,
    opts: &KubernetesOpts,
    ctx: &DryRunContext,
) -> Result<ArrayRequest<KubernetesJob>> {
    let per_task = |why: String| Ok(ArrayRequest::PerTask(why));
    if opts.mode == Mode::Volcano {
        return per_task(
            "in Volcano mode each task is its own gang-scheduled Volcano Job (mode=job makes \
             an array one Indexed Job)"
                .into(),
        );
    }
    let Some(first) = tasks.first().map(|t| t.app) else {
        return per_task("a group of no tasks".into());
    };
    if let Some(t) = tasks.iter().find(|t| !t.is_single_replica()) {
        return per_task(format!(
            "task {}'s app has several replicas: an Indexed Job's indexes are the tasks",
            t.index
        ));
    }
    let erase = |r: &Role| Role {
        entrypoint: String::new(),
        args: Vec::new(),
        env: Default::default(),
        ..r.clone()
    };
    if let Some(t) = ArrayTask::first_differing(tasks, erase) {
        return per_task(format!(
            "task {}'s pod differs from task {}'s in more than its command and environment, \
             and an Indexed Job's pods share one template",
            t.index, tasks[0].index
        ));
    }
    let app_id = normalize_str(&ctx.make_unique(&first.name));
    // Each task's command with its macros: it is its own replica 0 and rank 0.
    let roles: Vec<Role> = tasks
        .iter()
        .enumerate()
        .map(|(position, t)| {
            MacroValues {
                img_root: String::new(),
                app_id: format!("{app_id}-{position}"),
                replica_id: "0".into(),
                rank0_env: "TORCHX_RANK0_HOST".into(),
            }
            .apply(&t.app.roles[0])
        })
        .collect();
    let common: crate::specs::Env = roles[0]
        .env
        .iter()
        .filter(|(k, v)| roles.iter().all(|r| r.env.get(*k) == Some(*v)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut script = String::from(
        "export TORCHX_REPLICA_ID=0 TORCHX_RANK0_HOST=localhost\n\
         case \"$JOB_COMPLETION_INDEX\" in\n",
    );
    for (position, role) in roles.iter().enumerate() {
        let exports: String = role
            .env
            .iter()
            .filter(|(k, _)| !common.contains_key(*k))
            .map(|(k, v)| format!("export {k}={}; ", shell_quote(v)))
            .collect();
        let mut command = vec![role.entrypoint.clone()];
        command.extend(role.args.iter().cloned());
        script.push_str(&format!(
            "{position}) {exports}exec {} ;;\n",
            shell_join(&command)
        ));
    }
    script.push_str(
        "*) echo \"torchx: no task at index $JOB_COMPLETION_INDEX\" >&2; exit 2 ;;\nesac",
    );
    if script.len() > MAX_ARRAY_SCRIPT_BYTES {
        return per_task(format!(
            "the tasks' commands make a pod command of {} bytes, over the {MAX_ARRAY_SCRIPT_BYTES} \
             an object may hold here (the API server stores objects of at most about 1.5 MiB)",
            script.len()
        ));
    }
    // The tasks' macros are applied: `render` applies them again, to text where `$$` is a `$`.
    let escape = |s: &str| s.replace('$', "$$");
    let mut app = first.clone();
    let role = &mut app.roles[0];
    role.entrypoint = "sh".into();
    // `$(VAR)` in a container's command is Kubernetes' own expansion: `$$(` keeps it literal.
    role.args = vec!["-c".into(), escape(&script.replace("$(", "$$("))];
    role.env = common.iter().map(|(k, v)| (k.clone(), escape(v))).collect();
    role.num_replicas = u32::try_from(tasks.len()).unwrap_or(u32::MAX);
    let (retries, size) = (role.max_retries, role.num_replicas);
    let mut job = render(&app, opts, ctx)?;
    let parallelism = max_concurrent.map_or(size, |k| k.min(size));
    for o in job.objects.iter_mut().filter(|o| o["kind"] == "Job") {
        let spec = &mut o["spec"];
        spec["parallelism"] = json!(parallelism);
        spec["backoffLimitPerIndex"] = json!(retries);
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("backoffLimit");
        }
    }
    Ok(ArrayRequest::Native(job))
}

/// TorchX's Volcano Job: one task per replica (macros differ per replica).
pub(crate) fn volcano_job(app: &AppDef, opts: &KubernetesOpts, app_id: &str) -> Result<Value> {
    let queue = opts.queue.as_deref().ok_or_else(|| {
        Error::config("Required run option: queue, must be provided and not `None` (mode=volcano)")
    })?;
    let settings = pod_settings(opts);
    let rank0_env = format!("VC_{}_0_HOSTS", normalize_str(&app.roles[0].name)).to_uppercase();
    let mut tasks = Vec::new();
    let mut min_available = 0u32;
    let elastic = app.roles.iter().any(|r| r.min_replicas.is_some());
    for (role_idx, role) in app.roles.iter().enumerate() {
        min_available += role.min_replicas.unwrap_or(role.num_replicas);
        let overlay = pod_overlay(app, role)?;
        for replica_id in 0..role.num_replicas {
            let rank0 = role_idx == 0 && replica_id == 0;
            let values = MacroValues {
                img_root: String::new(),
                app_id: app_id.to_string(),
                replica_id: replica_id.to_string(),
                rank0_env: if rank0 {
                    "TORCHX_RANK0_HOST".into()
                } else {
                    rank0_env.clone()
                },
            };
            let task_name = normalize_str(&format!("{}-{replica_id}", role.name));
            check_dns_label("task name", &task_name)?;
            // Volcano names the pod `{job}-{task}-{index}` and makes it the hostname.
            check_dns_label("pod name", &format!("{app_id}-{task_name}-0"))?;
            let mut replica_role = values.apply(role);
            if rank0 {
                replica_role
                    .env
                    .insert("TORCHX_RANK0_HOST".into(), "localhost".into());
            }
            let mut pod = with_pod_overlay(
                role,
                overlay.as_ref(),
                role_to_pod(
                    &task_name,
                    &replica_role,
                    &replica_id.to_string(),
                    &settings,
                )?,
            )?;
            let labels = pod_labels(app, role_idx, role, Some(replica_id), app_id);
            check_labels(&labels)?;
            if let Some(m) = pod.metadata.as_mut() {
                m.labels = Some(labels);
            }
            let mut task = json!({"replicas": 1, "name": task_name, "template": to_value(&pod)});
            if role.max_retries > 0 || role.uses_recovery() {
                task["maxRetry"] = json!(role.max_retries);
                task["policies"] = json!(volcano_policies(role)?);
            }
            if let Some(min) = role.min_replicas {
                task["minAvailable"] = json!(u32::from(replica_id < min));
            }
            tasks.push(task);
        }
    }
    let mut spec = json!({
        "schedulerName": "volcano",
        "queue": queue,
        "tasks": tasks,
        "maxRetry": volcano_max_retry(app),
        "plugins": {"svc": ["--publish-not-ready-addresses"], "env": []},
    });
    if elastic {
        spec["minAvailable"] = json!(min_available);
    }
    if let Some(p) = &opts.priority_class {
        spec["priorityClassName"] = json!(p);
    }
    Ok(json!({
        "apiVersion": VOLCANO_API_VERSION,
        "kind": "Job",
        "metadata": {"name": app_id},
        "spec": spec,
    }))
}

/// A Volcano Job's `maxRetry`: how many times Volcano restarts the whole job. TorchX's is the
/// smallest `max_retries`; under the recovery contract each requeue is such a restart too, so
/// the default requeue budget is added (Volcano's mutating webhook would make a 0 into 3).
fn volcano_max_retry(app: &AppDef) -> u32 {
    let retries = app.roles.iter().map(|r| r.max_retries).min().unwrap_or(0);
    if app.roles.iter().any(Role::uses_recovery) {
        retries + crate::specs::DEFAULT_MAX_REQUEUES
    } else {
        retries
    }
}

/// A Volcano task's `policies`: TorchX's for its retry policy; under the recovery contract the
/// requeue exit code restarts the job (Volcano 1.10's `RestartTask` only re-creates *missing*
/// pods, so a pod that exited would stay failed; a time limit reaches every pod anyway) and an
/// eviction re-creates the evicted pod (the whole job for APPLICATION). Volcano refuses two
/// policies for one event, so each event appears once.
fn volcano_policies(role: &Role) -> Result<Vec<Value>> {
    let application = role.max_retries > 0 && role.retry_policy == RetryPolicy::Application;
    if role.max_retries > 0 && role.retry_policy == RetryPolicy::Role {
        return Err(Error::spec(format!(
            "role `{}`: retry_policy ROLE is not supported by Volcano; use REPLICA or \
             APPLICATION (or mode=job)",
            role.name
        )));
    }
    let restart = if application {
        "RestartJob"
    } else {
        "RestartTask"
    };
    let mut policies = Vec::new();
    if role.uses_recovery() {
        check_requeue_budget(super::NAME, role)?;
        let code = role.recovery().requeue_exit_code;
        policies.push(json!({"exitCode": code, "action": "RestartJob"}));
    }
    if application || role.uses_recovery() {
        policies.push(json!({"event": "PodEvicted", "action": restart}));
    }
    if application {
        policies.push(json!({"event": "PodFailed", "action": "RestartJob"}));
    }
    Ok(policies)
}

/// In `job` mode every pod of a role shares one template, so each is told rank 0's DNS name;
/// but rank 0 itself may ask for its own name before the cluster's DNS has it (torchrun then
/// never becomes the rendezvous host and every rank times out). So a first role that reads
/// `TORCHX_RANK0_HOST` runs under `sh`, which sets it to `localhost` at completion index 0, as
/// TorchX's Volcano Job tells its first pod. (An array's pods, each its own rank 0, are told
/// `localhost` by their own script.)
fn rank0_knows_itself(role_idx: usize, mut role: Role) -> Role {
    const LOCAL: &str = "TORCHX_RANK0_HOST=localhost";
    let script = format!("[ \"$JOB_COMPLETION_INDEX\" != 0 ] || export {LOCAL}; exec \"$@\"");
    let command = || std::iter::once(&role.entrypoint).chain(&role.args);
    let reads_rank0 = command().any(|a| a.contains("TORCHX_RANK0_HOST"));
    let sets_rank0 = command().any(|a| a.contains(LOCAL));
    if role_idx == 0 && role.num_replicas > 1 && reads_rank0 && !sets_rank0 {
        let command = std::mem::take(&mut role.args);
        let entrypoint = std::mem::replace(&mut role.entrypoint, "sh".into());
        role.args = ["-c", &script, "sh"]
            .into_iter()
            .map(String::from)
            .chain(std::iter::once(entrypoint))
            .chain(command)
            .collect();
    }
    role
}

/// The name of role `role`'s Job in `job` mode.
pub(crate) fn role_job_name(app_id: &str, role: &str) -> String {
    format!("{app_id}-{}", normalize_str(role))
}

/// Native objects: a headless Service (so `{job}-{index}.{service}` resolves every replica)
/// and one Indexed Job per role.
pub(crate) fn native_jobs(app: &AppDef, opts: &KubernetesOpts, app_id: &str) -> Result<Vec<Value>> {
    let role0_host = format!("{}-0.{app_id}", role_job_name(app_id, &app.roles[0].name));
    let mut settings = pod_settings(opts);
    settings.priority_class = opts.priority_class.clone();
    settings.leading_env = vec![EnvVar {
        name: ENV_REPLICA_ID.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: format!("metadata.annotations['{LABEL_COMPLETION_INDEX}']"),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }];
    settings.trailing_env = vec![EnvVar {
        name: "TORCHX_RANK0_HOST".into(),
        value: Some(role0_host),
        ..Default::default()
    }];
    let mut ports: BTreeMap<u16, String> = BTreeMap::new();
    let mut jobs = Vec::new();
    for (role_idx, role) in app.roles.iter().enumerate() {
        let job_name = role_job_name(app_id, &role.name);
        let last = role.num_replicas.saturating_sub(1);
        // Pods of an Indexed Job get the hostname `{job}-{index}`.
        check_dns_label("pod hostname", &format!("{job_name}-{last}"))?;
        let values = MacroValues {
            img_root: String::new(),
            app_id: app_id.to_string(),
            replica_id: format!("$({ENV_REPLICA_ID})"),
            rank0_env: "TORCHX_RANK0_HOST".into(),
        };
        let container = normalize_str(&role.name);
        check_dns_label("container name", &container)?;
        let mut pod = with_pod_overlay(
            role,
            pod_overlay(app, role)?.as_ref(),
            role_to_pod(
                &container,
                &rank0_knows_itself(role_idx, values.apply(role)),
                &values.replica_id,
                &settings,
            )?,
        )?;
        let labels = pod_labels(app, role_idx, role, None, app_id);
        check_labels(&labels)?;
        if let Some(m) = pod.metadata.as_mut() {
            m.labels = Some(labels.clone());
        }
        if let Some(s) = pod.spec.as_mut() {
            s.subdomain = Some(app_id.to_string());
        }
        for (name, port) in &role.port_map {
            ports.entry(*port).or_insert_with(|| name.clone());
        }
        let retries = i32::try_from(role.max_retries).unwrap_or(i32::MAX);
        let replicas = i32::try_from(role.num_replicas).unwrap_or(i32::MAX);
        let (backoff_limit, per_index) = match role.retry_policy {
            // Only the failed replica is retried, each up to max_retries times.
            RetryPolicy::Replica if retries > 0 => (None, Some(retries)),
            // Kubernetes cannot restart sibling replicas: the role's failure budget is shared.
            _ => (Some(retries), None),
        };
        let job = Job {
            metadata: ObjectMeta {
                name: Some(job_name),
                labels: Some(labels.clone()),
                ..Default::default()
            },
            spec: Some(JobSpec {
                completion_mode: Some("Indexed".into()),
                completions: Some(replicas),
                parallelism: Some(replicas),
                backoff_limit,
                backoff_limit_per_index: per_index,
                pod_failure_policy: Some(pod_failure_policy(role)?),
                template: pod,
                ..Default::default()
            }),
            ..Default::default()
        };
        jobs.push(to_value(&job));
    }
    let service = Service {
        metadata: ObjectMeta {
            name: Some(app_id.to_string()),
            labels: Some(object_labels(app, app_id)),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(BTreeMap::from([(
                LABEL_UNIQUE_NAME.to_string(),
                app_id.to_string(),
            )])),
            ports: (!ports.is_empty()).then(|| {
                ports
                    .iter()
                    .map(|(port, name)| ServicePort {
                        name: Some(name.clone()),
                        port: i32::from(*port),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut objects = vec![json!({"apiVersion": "v1", "kind": "Service"})];
    merge(&mut objects[0], to_value(&service));
    for j in jobs {
        let mut o = json!({"apiVersion": "batch/v1", "kind": "Job"});
        merge(&mut o, j);
        objects.push(o);
    }
    Ok(objects)
}

/// Evictions and preemptions (`DisruptionTarget`) are not the program's failure: retried
/// without counting toward `backoffLimit`; under the recovery contract neither is the requeue
/// exit code.
fn pod_failure_policy(role: &Role) -> Result<PodFailurePolicy> {
    let mut rules = vec![PodFailurePolicyRule {
        action: "Ignore".into(),
        on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
            type_: "DisruptionTarget".into(),
            status: "True".into(),
        }]),
        ..Default::default()
    }];
    if role.uses_recovery() {
        check_requeue_budget(super::NAME, role)?;
        rules.push(PodFailurePolicyRule {
            action: "Ignore".into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: None,
                operator: "In".into(),
                values: vec![role.recovery().requeue_exit_code],
            }),
            ..Default::default()
        });
    }
    Ok(PodFailurePolicy { rules })
}

/// Kubernetes counts no requeues (a failure a pod failure policy or a Volcano policy ignores
/// is not counted at all): an explicit `max_requeues` cannot be honoured.
pub(crate) fn check_requeue_budget(scheduler: &str, role: &Role) -> Result<()> {
    match role.max_requeues {
        Some(n) => Err(Error::unsupported(
            scheduler,
            format!(
                "max_requeues {n} (role `{}`): Kubernetes does not count the pod failures it \
                 ignores, so requeues are unbounded there",
                role.name
            ),
        )),
        None => Ok(()),
    }
}

/// Adds the fields of `from` to `into` (both objects), keeping `apiVersion`/`kind` first.
fn merge(into: &mut Value, from: Value) {
    if let (Some(into), Value::Object(from)) = (into.as_object_mut(), from) {
        into.extend(from);
    }
}
