//! The pod template of one replica, shared by `kubernetes` (Volcano and native Jobs) and
//! `kubernetes_mcad` (AppWrappers): resources, `/dev/shm`, mounts, ports, env, labels, the
//! recovery timer and a role's pod overlay; each name and label checked against Kubernetes'
//! rules.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource, HostPathVolumeSource,
    LocalObjectReference, ObjectFieldSelector, PersistentVolumeClaimVolumeSource, PodSpec,
    PodTemplateSpec, ResourceRequirements, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::names::{
    check_label_value, ANNOTATION_ISTIO_SIDECAR, LABEL_APP_NAME, LABEL_INSTANCE_TYPE,
    LABEL_KUBE_APP_NAME, LABEL_ORGANIZATION, LABEL_REPLICA_ID, LABEL_ROLE_INDEX, LABEL_ROLE_NAME,
    LABEL_UNIQUE_NAME, LABEL_VERSION, PLACEHOLDER_FIELD_PATH, RESERVED_MEMMB, RESERVED_MILLICPU,
};
use super::opts::KubernetesOpts;
use crate::error::{Error, Result};
use crate::schedulers::attempt_timer;
use crate::specs::{overlay, AppDef, Mount, Role};

/// Checks a container port name (IANA service name): 1-15 characters of `[a-z0-9-]` with a
/// letter, no leading/trailing or double '-'.
fn check_port_name(role: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && name.chars().any(|c| c.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(Error::spec(format!(
            "port_map key `{name}` of role `{role}` is not a valid Kubernetes port name: 1-15 \
             lowercase letters, digits and '-', with at least one letter"
        )))
    }
}

/// Labels of every pod (TorchX's `pod_labels`); `replica_id` is None in a shared template.
pub(crate) fn pod_labels(
    app: &AppDef,
    role_idx: usize,
    role: &Role,
    replica_id: Option<u32>,
    app_id: &str,
) -> BTreeMap<String, String> {
    let mut labels = object_labels(app, app_id);
    labels.insert(LABEL_VERSION.into(), crate::VERSION.into());
    labels.insert(LABEL_APP_NAME.into(), app.name.clone());
    labels.insert(LABEL_ROLE_INDEX.into(), role_idx.to_string());
    labels.insert(LABEL_ROLE_NAME.into(), role.name.clone());
    if let Some(r) = replica_id {
        labels.insert(LABEL_REPLICA_ID.into(), r.to_string());
    }
    labels
}

/// Labels of every object of an app (TorchX's `object_labels`).
pub(crate) fn object_labels(app: &AppDef, app_id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_KUBE_APP_NAME.to_string(), app.name.clone()),
        (
            LABEL_ORGANIZATION.to_string(),
            "torchx.pytorch.org".to_string(),
        ),
        (LABEL_UNIQUE_NAME.to_string(), app_id.to_string()),
    ])
}

pub(super) fn check_labels(labels: &BTreeMap<String, String>) -> Result<()> {
    labels.iter().try_for_each(|(k, v)| check_label_value(k, v))
}

/// Pod settings that come from run options rather than the role.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodSettings {
    /// Pods' service account.
    pub service_account: Option<String>,
    /// Pods' PriorityClass.
    pub priority_class: Option<String>,
    /// Node labels to match.
    pub node_selector: BTreeMap<String, String>,
    /// Taints to tolerate.
    pub tolerations: Vec<Toleration>,
    /// Secret to pull images with.
    pub image_pull_secret: Option<String>,
    /// Extra env vars placed first (others may refer to them with `$(NAME)`).
    pub leading_env: Vec<EnvVar>,
    /// Extra env vars placed last.
    pub trailing_env: Vec<EnvVar>,
}

fn quantity(s: String) -> Quantity {
    Quantity(s)
}

/// The pod template of one replica (TorchX's `role_to_pod`): resources with requests a little
/// under the limits, a memory-backed `/dev/shm`, the role's mounts, ports and env.
/// `replica` is how its replica id reads in its command (`N`, or `$(TORCHX_REPLICA_ID)` in a
/// template Indexed Job pods share).
pub(crate) fn role_to_pod(
    container_name: &str,
    role: &Role,
    replica: &str,
    settings: &PodSettings,
) -> Result<PodTemplateSpec> {
    let r = &role.resource;
    let mut node_selector = settings.node_selector.clone();
    if let Some(t) = r.capabilities.get(LABEL_INSTANCE_TYPE) {
        let t = t.as_str().map_or_else(|| t.to_string(), str::to_string);
        node_selector.insert(LABEL_INSTANCE_TYPE.to_string(), t);
    }
    let (volumes, mounts, privileged) = volumes(role);
    let mut ports = Vec::new();
    for (name, port) in &role.port_map {
        check_port_name(&role.name, name)?;
        ports.push(ContainerPort {
            name: Some(name.clone()),
            container_port: i32::from(*port),
            ..Default::default()
        });
    }
    // Kubernetes signals nothing before a pod's deadline: under the recovery contract the
    // container times itself, and the pod's activeDeadlineSeconds is the backstop. (A pod is
    // not told which attempt it is: TORCHX_ATTEMPT is not set here.)
    // The kubelet expands `$(VAR)` and turns `$$` into `$` in a container's command: our own
    // scripts are kept as written (`$$` escapes every `$`); the role's arguments after them
    // keep the expansion users (and `$(TORCHX_REPLICA_ID)`) rely on.
    let ours = |script: &mut String| *script = script.replace('$', "$$");
    let mut command: Vec<String> = std::iter::once(role.entrypoint.clone())
        .chain(role.args.iter().cloned())
        .collect();
    // The hang watch runs the command; the timer (below) runs the watch, and a hung attempt of
    // a recovering job gets the checkpoint signal first and asks the timer for a requeue.
    if let Some(timeout) = role.hang_timeout {
        let signal = role
            .uses_recovery()
            .then(|| crate::schedulers::hang_watch::hang_signal(role.checkpoint_signal));
        command = crate::schedulers::hang_watch::in_container(
            timeout,
            &format!("{}/{replica}", role.name),
            signal,
            command,
        );
        ours(&mut command[2]);
    }
    if role.uses_recovery() || role.hang_timeout.is_some() {
        let mut timed = attempt_timer::timed_command(
            &role.recovery(),
            role.max_retries,
            None,
            &command[0],
            &command[1..],
        );
        ours(&mut timed[2]);
        command = timed;
    }
    let container = Container {
        name: container_name.to_string(),
        image: Some(role.image.clone()),
        command: Some(command),
        env: Some(env_vars(role, settings)?),
        resources: Some(resources(&role.resource)),
        ports: Some(ports),
        volume_mounts: Some(mounts),
        security_context: Some(SecurityContext {
            privileged: privileged.then_some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    Ok(PodTemplateSpec {
        metadata: Some(ObjectMeta {
            annotations: Some(BTreeMap::from([(
                ANNOTATION_ISTIO_SIDECAR.to_string(),
                "false".to_string(),
            )])),
            labels: Some(BTreeMap::new()),
            ..Default::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            restart_policy: Some("Never".into()),
            active_deadline_seconds: role
                .uses_recovery()
                .then(|| role.recovery())
                .as_ref()
                .and_then(attempt_timer::backstop)
                .map(|secs| i64::try_from(secs).unwrap_or(i64::MAX)),
            service_account_name: settings.service_account.clone(),
            priority_class_name: settings.priority_class.clone(),
            volumes: Some(volumes),
            node_selector: Some(node_selector),
            tolerations: (!settings.tolerations.is_empty()).then(|| settings.tolerations.clone()),
            image_pull_secrets: settings
                .image_pull_secret
                .as_ref()
                .map(|s| vec![LocalObjectReference { name: s.clone() }]),
            ..Default::default()
        }),
    })
}

/// The container's limits and requests (requests leave room for the node's own daemons).
fn resources(r: &crate::specs::Resource) -> ResourceRequirements {
    let mut limits = BTreeMap::new();
    let mut requests = BTreeMap::new();
    if r.cpu > 0 {
        let mcpu = r.cpu * 1000;
        limits.insert("cpu".to_string(), quantity(format!("{mcpu}m")));
        requests.insert(
            "cpu".to_string(),
            quantity(format!("{}m", (mcpu - RESERVED_MILLICPU).max(0))),
        );
    }
    if r.mem_mb > 0 {
        limits.insert("memory".to_string(), quantity(format!("{}M", r.mem_mb)));
        requests.insert(
            "memory".to_string(),
            quantity(format!("{}M", (r.mem_mb - RESERVED_MEMMB).max(0))),
        );
    }
    if r.gpu > 0 {
        limits.insert("nvidia.com/gpu".to_string(), quantity(r.gpu.to_string()));
        requests.insert("nvidia.com/gpu".to_string(), quantity(r.gpu.to_string()));
    }
    for (name, count) in &r.devices {
        limits.insert(name.clone(), quantity(count.to_string()));
    }
    ResourceRequirements {
        limits: Some(limits),
        requests: Some(requests),
        ..Default::default()
    }
}

/// The pod's volumes and the container's mounts (`/dev/shm` in memory, then the role's), and
/// whether a device mount makes the container privileged.
fn volumes(role: &Role) -> (Vec<Volume>, Vec<VolumeMount>, bool) {
    let mut volumes = vec![Volume {
        name: "dshm".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".into()),
            ..Default::default()
        }),
        ..Default::default()
    }];
    let mut mounts = vec![VolumeMount {
        name: "dshm".into(),
        mount_path: "/dev/shm".into(),
        ..Default::default()
    }];
    let mut privileged = false;
    for (i, m) in role.mounts.iter().enumerate() {
        let name = format!("mount-{i}");
        let host_path = |p: &str| HostPathVolumeSource {
            path: p.to_string(),
            ..Default::default()
        };
        let (volume, dst, read_only) = match m {
            Mount::Bind {
                src_path,
                dst_path,
                read_only,
            } => (
                Volume {
                    name: name.clone(),
                    host_path: Some(host_path(src_path)),
                    ..Default::default()
                },
                dst_path,
                *read_only,
            ),
            Mount::Volume {
                src,
                dst_path,
                read_only,
            } => (
                Volume {
                    name: name.clone(),
                    persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                        claim_name: src.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                dst_path,
                *read_only,
            ),
            Mount::Device {
                src_path,
                dst_path,
                permissions,
            } => {
                privileged = true;
                (
                    Volume {
                        name: name.clone(),
                        host_path: Some(host_path(src_path)),
                        ..Default::default()
                    },
                    dst_path,
                    !permissions.contains('w') && !permissions.contains('m'),
                )
            }
        };
        volumes.push(volume);
        mounts.push(VolumeMount {
            name,
            mount_path: dst.clone(),
            read_only: Some(read_only),
            ..Default::default()
        });
    }
    (volumes, mounts, privileged)
}

/// The container's environment: the scheduler's leading variables, the role's (a
/// field-path placeholder becomes a `fieldRef`), `TORCHX_IMAGE`, the trailing ones, the
/// checkpoint directory.
fn env_vars(role: &Role, settings: &PodSettings) -> Result<Vec<EnvVar>> {
    let mut env = settings.leading_env.clone();
    for (k, v) in role.env.iter().filter(|(k, _)| *k != "TORCHX_IMAGE") {
        // TorchX strips a character set here (eating letters of the path); we strip the prefix.
        env.push(match v.strip_prefix(PLACEHOLDER_FIELD_PATH) {
            Some(path) => EnvVar {
                name: k.clone(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: path.to_string(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            },
            None => EnvVar {
                name: k.clone(),
                value: Some(v.clone()),
                ..Default::default()
            },
        });
    }
    // As TorchX's Kubernetes scheduler: the container knows its image.
    env.push(EnvVar {
        name: "TORCHX_IMAGE".into(),
        value: Some(role.image.clone()),
        ..Default::default()
    });
    env.extend(settings.trailing_env.iter().cloned());
    if let Some(dir) = role.container_checkpoint_dir()? {
        env.push(EnvVar {
            name: "TORCHX_CHECKPOINT_DIR".into(),
            value: Some(dir),
            ..Default::default()
        });
    }
    Ok(env)
}

/// The role's `kubernetes` metadata's `V1Pod` overlay (else the app's, as
/// `--metadata kubernetes=file://...` of the builtin components sets it), looked up (and a file
/// read) once per role. See [`crate::specs::overlay`].
pub(crate) fn pod_overlay(
    app: &AppDef,
    role: &Role,
) -> Result<Option<serde_json::Map<String, Value>>> {
    const NAMESPACE: &str = "kubernetes";
    let role_metadata: serde_json::Map<String, Value> = role
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let found = match overlay::get(&role_metadata, NAMESPACE, "V1Pod")? {
        Some(o) => Some(o),
        None => {
            let app_metadata: serde_json::Map<String, Value> = app
                .metadata
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            overlay::get(&app_metadata, NAMESPACE, "V1Pod")?
        }
    };
    Ok(found.and_then(|o| match o {
        Value::Object(map) => Some(map),
        _ => None,
    }))
}

/// `pod` with `overlay` (from [`pod_overlay`]) merged in: only its `metadata` and `spec` are
/// kept, as TorchX keeps them.
pub(crate) fn with_pod_overlay(
    role: &Role,
    overlay: Option<&serde_json::Map<String, Value>>,
    pod: PodTemplateSpec,
) -> Result<PodTemplateSpec> {
    let Some(overlay) = overlay else {
        return Ok(pod);
    };
    let Value::Object(mut merged) = to_value(&pod) else {
        unreachable!("a pod template serializes to an object")
    };
    overlay::apply(&mut merged, overlay)
        .map_err(|e| Error::spec(format!("role `{}`: the V1Pod overlay: {e}", role.name)))?;
    let kept: serde_json::Map<String, Value> = merged
        .into_iter()
        .filter(|(k, _)| k == "metadata" || k == "spec")
        .collect();
    serde_json::from_value(Value::Object(kept)).map_err(|e| {
        Error::spec(format!(
            "role `{}`: the V1Pod overlay does not make a valid pod: {e}",
            role.name
        ))
    })
}

pub(super) fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

pub(super) fn pod_settings(opts: &KubernetesOpts) -> PodSettings {
    PodSettings {
        service_account: opts.service_account.clone(),
        priority_class: None,
        node_selector: opts.node_selector.clone().unwrap_or_default(),
        tolerations: opts.parsed_tolerations.clone(),
        image_pull_secret: opts.image_pull_secret.clone(),
        leading_env: Vec::new(),
        trailing_env: Vec::new(),
    }
}
