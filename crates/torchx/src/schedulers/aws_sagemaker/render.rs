//! Pure rendering of an AppDef into a SageMaker `CreateTrainingJob` request (the API's own JSON:
//! what `--dryrun` shows is what is sent). The role's entrypoint and args become the container's
//! `ContainerEntrypoint`/`ContainerArguments`, so the image runs exactly the AppDef's command.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::opts::AwsSageMakerOpts;
use crate::error::{Error, Result};
use crate::scheduler::{DryRunContext, NativeRequest};
use crate::schedulers::{attempt_timer, hang_watch};
use crate::specs::{AppDef, MacroValues, Recovery, Role};

/// The role name, in the job's environment as on aws_batch (describe reads it back).
pub(crate) const ENV_ROLE_NAME: &str = "TORCHX_ROLE_NAME";

/// What the `rank0_env` macro names: the first host's address, as SageMaker's training
/// toolkit exports it.
pub(crate) const RANK0_ENV: &str = "SM_MASTER_ADDR";

/// What `aws_sagemaker` submits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TrainingJob {
    /// The training job's name (the app id).
    pub name: String,
    /// The CreateTrainingJob request.
    pub request: Value,
}

impl NativeRequest for TrainingJob {
    fn render(&self) -> String {
        serde_json::to_string_pretty(&self.request).unwrap_or_default()
    }
    fn to_json(&self) -> Value {
        self.request.clone()
    }
}

/// SageMaker names: 1-63 letters, digits and '-', starting with a letter or digit.
pub(crate) fn check_job_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(Error::spec(format!(
            "training job name `{name}` is not valid for SageMaker: 1-63 letters, digits and '-', \
             starting with a letter or digit (shorten the app name or set base_job_name)"
        )))
    }
}

fn unsupported(what: impl Into<String>) -> Error {
    Error::unsupported(super::NAME, what)
}

/// Where SageMaker keeps a training job's checkpoints when `checkpoint_local_path` is unset.
const DEFAULT_CHECKPOINT_PATH: &str = "/opt/ml/checkpoints";

/// The role's recovery settings, where SageMaker can honour them: a time limit (the
/// container's timer, `MaxRuntimeInSeconds` as the backstop) and its signal, with
/// `CheckpointConfig` for `TORCHX_CHECKPOINT_DIR`. SageMaker retries only its own internal
/// errors (`RetryStrategy`), never on an exit code, so requeues are refused.
fn recovery(role: &crate::specs::Role, opts: &AwsSageMakerOpts) -> Result<Option<Recovery>> {
    if !role.uses_recovery() {
        return Ok(None);
    }
    if role.requeue_exit_code.is_some() || role.max_requeues.is_some() {
        return Err(unsupported(
            "requeue_exit_code and max_requeues: SageMaker restarts a training job only after \
             its own internal errors (RetryStrategy), never on an exit code",
        ));
    }
    if opts.max_run.is_some() && role.time_limit.is_some() {
        return Err(Error::config(
            "run option max_run and time_limit both set a time limit: give one",
        ));
    }
    if opts.checkpoint_s3_uri.is_none() {
        return Err(Error::config(
            "run option checkpoint_s3_uri: required with time_limit or checkpoint_signal \
             (SageMaker syncs TORCHX_CHECKPOINT_DIR, its checkpoint_local_path, to it)",
        ));
    }
    Ok(Some(role.recovery()))
}

/// `CheckpointConfig.LocalPath`: the run option, or the role's `checkpoint_dir` (they must
/// agree when both are given).
fn checkpoint_local_path(
    role: &crate::specs::Role,
    opts: &AwsSageMakerOpts,
) -> Result<Option<String>> {
    match (&opts.checkpoint_local_path, &role.checkpoint_dir) {
        (Some(a), Some(b)) if a != b => Err(Error::config(format!(
            "run option checkpoint_local_path `{a}` and checkpoint_dir `{b}` differ: give one"
        ))),
        (a, b) => Ok(a.clone().or_else(|| b.clone())),
    }
}

/// Renders the CreateTrainingJob request.
pub(crate) fn render(
    app: &AppDef,
    opts: &AwsSageMakerOpts,
    ctx: &DryRunContext,
) -> Result<TrainingJob> {
    let role = single_role(app, opts)?;
    let output_path = opts.output_path.clone().ok_or_else(|| {
        Error::config(
            "Required run option: output_path (an s3:// location for the model artifacts), \
             must be provided for aws_sagemaker",
        )
    })?;
    let base = opts
        .base_job_name
        .clone()
        .unwrap_or_else(|| app.name.clone());
    let name = ctx.make_unique(&base);
    check_job_name(&name)?;
    let role = MacroValues {
        img_root: String::new(),
        app_id: name.clone(),
        replica_id: String::new(),
        // Set by SageMaker's training toolkit (its framework images) to the first host.
        rank0_env: RANK0_ENV.into(),
    }
    .apply(role);
    let instance_count = match opts.instance_count {
        Some(n) if n < 1 => {
            return Err(Error::config(format!(
                "run option instance_count: {n} is not >= 1"
            )))
        }
        Some(n) => n,
        None => i64::from(role.num_replicas.max(1)),
    };
    let recovery = recovery(&role, opts)?;
    let checkpoint_local_path = checkpoint_local_path(&role, opts)?;
    let mut hyper: BTreeMap<String, String> = opts.hyperparameters.clone().unwrap_or_default();
    if let Some(level) = opts.container_log_level {
        hyper.insert("sagemaker_container_log_level".into(), level.to_string());
    }
    let env = environment(
        &role,
        opts,
        recovery.is_some(),
        checkpoint_local_path.as_deref(),
    );
    let mut tags = crate::schedulers::aws::job_tags(app, opts.user.as_deref());
    tags.extend(opts.tags.clone().unwrap_or_default());
    let mut req = Map::new();
    req.insert("TrainingJobName".into(), json!(name));
    req.insert("RoleArn".into(), json!(opts.role));
    req.insert(
        "AlgorithmSpecification".into(),
        algorithm(&role, opts, recovery.as_ref()),
    );
    req.insert("ResourceConfig".into(), resources(opts, instance_count));
    req.insert("OutputDataConfig".into(), output(opts, output_path));
    req.insert(
        "StoppingCondition".into(),
        stopping(opts, recovery.as_ref()),
    );
    if !hyper.is_empty() {
        req.insert("HyperParameters".into(), json!(hyper));
    }
    if !env.is_empty() {
        req.insert("Environment".into(), json!(env));
    }
    optional_configs(&mut req, opts, checkpoint_local_path.as_deref())?;
    // The role's max_retries unless the option says otherwise.
    let retries = opts
        .max_retry_attempts
        .or((role.max_retries > 0).then(|| i64::from(role.max_retries)));
    if let Some(n) = retries {
        req.insert("RetryStrategy".into(), json!({"MaximumRetryAttempts": n}));
    }
    req.insert(
        "Tags".into(),
        json!(tags
            .iter()
            .map(|(k, v)| json!({"Key": k, "Value": v}))
            .collect::<Vec<_>>()),
    );
    Ok(TrainingJob {
        name,
        request: Value::Object(req),
    })
}

/// The app's one role, if a training job can run it as it asks.
fn single_role<'a>(app: &'a AppDef, opts: &AwsSageMakerOpts) -> Result<&'a Role> {
    let [role] = app.roles.as_slice() else {
        return Err(unsupported(format!(
            "{} roles: a training job runs one image on its instances; submit one role",
            app.roles.len()
        )));
    };
    if !role.mounts.is_empty() {
        return Err(unsupported(
            "mounts: training jobs get data through input channels (model_uri) or S3, not mounts",
        ));
    }
    for (key, set) in [
        ("source_dir", opts.source_dir.is_some()),
        ("git_config", opts.git_config.is_some()),
        ("code_location", opts.code_location.is_some()),
        ("dependencies", opts.dependencies.is_some()),
    ] {
        if set {
            return Err(unsupported(format!(
                "run option {key}: uploading code needs S3 and the SageMaker Python SDK; bake \
                 the code into the image"
            )));
        }
    }
    // One command line serves every instance, so no per-replica value exists here.
    if role
        .args
        .iter()
        .chain(role.env.values())
        .any(|a| a.contains("${replica_id}"))
    {
        return Err(unsupported(
            "the ${replica_id} macro (SageMaker numbers its hosts itself: see SM_CURRENT_HOST \
             and SM_HOSTS in the container)",
        ));
    }
    Ok(role)
}

/// The replica label the hang watch reads as `role/N`, N the host's number (`algo-N`) less one.
const HOST_LABEL: &str = "@host";

/// The container's entrypoint: the role's, under the hang watch when it has a hang timeout,
/// under the timer when the job recovers or is watched. SageMaker's only signal is SIGTERM at
/// MaxRuntimeInSeconds: the container times itself. `ContainerArguments` (the role's args)
/// follow it, as the command's last words.
fn entrypoint(role: &Role, recovery: Option<&Recovery>) -> Vec<String> {
    let mut command = vec![role.entrypoint.clone()];
    if let Some(timeout) = role.hang_timeout {
        // SageMaker restarts no job on an exit code: a hang is the job's failure, after the
        // checkpoint signal when it recovers (so the trainer saves for a resubmission).
        let signal = recovery.map(|r| hang_watch::hang_signal(r.checkpoint_signal));
        command = hang_watch::in_container(
            timeout,
            &format!("{}/{HOST_LABEL}", role.name),
            signal,
            command,
        );
    }
    match recovery
        .copied()
        .or(role.hang_timeout.map(|_| role.recovery()))
    {
        Some(r) => {
            attempt_timer::timed_command(&r, role.max_retries, None, &command[0], &command[1..])
        }
        None => command,
    }
}

/// `AlgorithmSpecification`: the image and its command.
fn algorithm(role: &Role, opts: &AwsSageMakerOpts, recovery: Option<&Recovery>) -> Value {
    let entrypoint = entrypoint(role, recovery);
    let mut algorithm = json!({
        "TrainingImage": role.image,
        "TrainingInputMode": opts.input_mode.clone().unwrap_or_else(|| "File".into()),
        "ContainerEntrypoint": entrypoint,
        "ContainerArguments": role.args,
    });
    if role.args.is_empty() {
        if let Some(a) = algorithm.as_object_mut() {
            a.remove("ContainerArguments");
        }
    }
    if let Some(m) = &opts.metric_definitions {
        algorithm["MetricDefinitions"] = json!(m
            .iter()
            .map(|(n, r)| json!({"Name": n, "Regex": r}))
            .collect::<Vec<_>>());
    }
    if let Some(b) = opts.enable_sagemaker_metrics {
        algorithm["EnableSageMakerMetricsTimeSeries"] = json!(b);
    }
    if let Some(mode) = &opts.training_repository_access_mode {
        let mut image_config = json!({"TrainingRepositoryAccessMode": mode});
        if let Some(arn) = &opts.training_repository_credentials_provider_arn {
            image_config["TrainingRepositoryAuthConfig"] =
                json!({"TrainingRepositoryCredentialsProviderArn": arn});
        }
        algorithm["TrainingImageConfig"] = image_config;
    }
    algorithm
}

/// `ResourceConfig`.
fn resources(opts: &AwsSageMakerOpts, instance_count: i64) -> Value {
    let mut resources = json!({
        "InstanceType": opts.instance_type,
        "InstanceCount": instance_count,
        "VolumeSizeInGB": opts.volume_size.unwrap_or(30),
    });
    if let Some(k) = &opts.volume_kms_key {
        resources["VolumeKmsKeyId"] = json!(k);
    }
    if let Some(s) = opts.keep_alive_period_in_seconds {
        resources["KeepAlivePeriodInSeconds"] = json!(s);
    }
    resources
}

/// `OutputDataConfig`.
fn output(opts: &AwsSageMakerOpts, output_path: String) -> Value {
    let mut output = json!({"S3OutputPath": output_path});
    if let Some(k) = &opts.output_kms_key {
        output["KmsKeyId"] = json!(k);
    }
    if opts.disable_output_compression == Some(true) {
        output["CompressionType"] = json!("NONE");
    }
    output
}

/// `StoppingCondition`: the recovery contract's backstop, else `max_run`, else a day.
fn stopping(opts: &AwsSageMakerOpts, recovery: Option<&Recovery>) -> Value {
    let max_run = recovery
        .and_then(attempt_timer::backstop)
        .and_then(|secs| i64::try_from(secs).ok())
        .or(opts.max_run)
        .unwrap_or(24 * 60 * 60);
    let mut stopping = json!({"MaxRuntimeInSeconds": max_run});
    if let Some(w) = opts.max_wait {
        stopping["MaxWaitTimeInSeconds"] = json!(w);
    }
    stopping
}

/// The container's environment: the option's, the role's, the checkpoint directory under the
/// recovery contract, and the role's name (describe reads it back: DescribeTrainingJob returns
/// no tags).
fn environment(
    role: &Role,
    opts: &AwsSageMakerOpts,
    recovering: bool,
    checkpoint_local_path: Option<&str>,
) -> crate::specs::Env {
    let mut env: crate::specs::Env = opts
        .environment
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    env.extend(role.env.clone());
    if recovering {
        // SageMaker syncs this directory with checkpoint_s3_uri, and restores it on a restart.
        let dir = checkpoint_local_path.unwrap_or(DEFAULT_CHECKPOINT_PATH);
        env.insert("TORCHX_CHECKPOINT_DIR".into(), dir.to_string());
    }
    env.insert(ENV_ROLE_NAME.into(), role.name.clone());
    env
}

/// The request's parts that only some options ask for: VPC, the model channel, network and
/// spot flags, checkpoints, debugger, profiler, infrastructure checks.
fn optional_configs(
    req: &mut Map<String, Value>,
    opts: &AwsSageMakerOpts,
    checkpoint_local_path: Option<&str>,
) -> Result<()> {
    match (&opts.subnets, &opts.security_group_ids) {
        (Some(s), Some(g)) => {
            req.insert(
                "VpcConfig".into(),
                json!({"Subnets": s, "SecurityGroupIds": g}),
            );
        }
        (None, None) => {}
        _ => {
            return Err(Error::config(
                "run options subnets and security_group_ids: give both (a VPC config needs \
                 subnets and security groups) or neither",
            ))
        }
    }
    if let Some(uri) = &opts.model_uri {
        let channel = opts
            .model_channel_name
            .clone()
            .unwrap_or_else(|| "model".into());
        req.insert(
            "InputDataConfig".into(),
            json!([{"ChannelName": channel, "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": uri, "S3DataDistributionType": "FullyReplicated"}}}]),
        );
    }
    for (key, v) in [
        ("EnableNetworkIsolation", opts.enable_network_isolation),
        (
            "EnableInterContainerTrafficEncryption",
            opts.encrypt_inter_container_traffic,
        ),
        ("EnableManagedSpotTraining", opts.use_spot_instances),
    ] {
        if let Some(b) = v {
            req.insert(key.into(), json!(b));
        }
    }
    if opts.use_spot_instances == Some(true) && opts.max_wait.is_none() {
        return Err(Error::config(
            "run option max_wait: required when use_spot_instances is true",
        ));
    }
    if let Some(uri) = &opts.checkpoint_s3_uri {
        let mut c = json!({"S3Uri": uri});
        if let Some(p) = checkpoint_local_path {
            c["LocalPath"] = json!(p);
        }
        req.insert("CheckpointConfig".into(), c);
    }
    if opts.debugger_hook_config == Some(true) {
        req.insert(
            "DebugHookConfig".into(),
            json!({"S3OutputPath": opts.output_path}),
        );
    }
    if let Some(b) = opts.disable_profiler {
        req.insert("ProfilerConfig".into(), json!({"DisableProfiler": b}));
    }
    if let Some(b) = opts.enable_infra_check {
        req.insert("InfraCheckConfig".into(), json!({"EnableInfraCheck": b}));
    }
    Ok(())
}
