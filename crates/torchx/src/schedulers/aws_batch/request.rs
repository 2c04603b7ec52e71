//! The shapes of a Batch job definition and submission as the Batch API takes them (camelCase
//! JSON; the dry run shows exactly that).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::scheduler::NativeRequest;

/// `{name, value}` (environment variables).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct KeyValue {
    /// Name.
    pub name: String,
    /// Value.
    pub value: String,
}

/// A resource requirement (`VCPU`, `MEMORY`, `GPU`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ResourceRequirement {
    /// The resource type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its amount.
    pub value: String,
}

/// A host device exposed to the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Device {
    /// Path on the host.
    pub host_path: String,
    /// Path in the container.
    pub container_path: String,
    /// READ, WRITE, MKNOD.
    pub permissions: Vec<String>,
}

/// `linuxParameters`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LinuxParameters {
    /// `/dev/shm` size in MiB (TorchX: the role's memMB).
    pub shared_memory_size: i64,
    /// Devices.
    pub devices: Vec<Device>,
}

/// `logConfiguration`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LogConfiguration {
    /// Always `awslogs` (CloudWatch group `/aws/batch/job`).
    pub log_driver: String,
}

/// A mount point of a volume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MountPoint {
    /// Path in the container.
    pub container_path: String,
    /// Read-only.
    pub read_only: bool,
    /// The volume's name.
    pub source_volume: String,
}

/// A volume: a host path or an EFS file system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Volume {
    /// Name (`mount_{i}`).
    pub name: String,
    /// `{sourcePath}` for a bind mount.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<BTreeMap<String, String>>,
    /// `{fileSystemId}` for a volume mount.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efs_volume_configuration: Option<BTreeMap<String, String>>,
}

/// The container of a node group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Container {
    /// Entrypoint and args.
    pub command: Vec<String>,
    /// Image.
    pub image: String,
    /// Environment.
    pub environment: Vec<KeyValue>,
    /// `--privileged`.
    pub privileged: bool,
    /// VCPU, MEMORY, GPU.
    pub resource_requirements: Vec<ResourceRequirement>,
    /// shm size and devices.
    pub linux_parameters: LinuxParameters,
    /// CloudWatch logs.
    pub log_configuration: LogConfiguration,
    /// Mount points.
    pub mount_points: Vec<MountPoint>,
    /// Volumes.
    pub volumes: Vec<Volume>,
    /// The role the container can assume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_role_arn: Option<String>,
    /// The role the ECS agent can assume.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution_role_arn: Option<String>,
    /// From the `node.kubernetes.io/instance-type` capability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
}

/// One node group (a role): nodes `start:end`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeRange {
    /// `start:end`, inclusive.
    pub target_nodes: String,
    /// The container every node of the group runs.
    pub container: Container,
}

/// `nodeProperties`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NodeProperties {
    /// Σ replicas.
    pub num_nodes: u32,
    /// Always 0.
    pub main_node: u32,
    /// One per role.
    pub node_range_properties: Vec<NodeRange>,
}

/// `evaluateOnExit` entry: every pattern given must match (`*` at the end: a prefix).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EvaluateOnExit {
    /// Exit code pattern.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_exit_code: Option<String>,
    /// Pattern of the attempt's `statusReason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_status_reason: Option<String>,
    /// EXIT or RETRY.
    pub action: String,
}

impl EvaluateOnExit {
    pub(super) fn on_exit(code: &str, action: &str) -> Self {
        EvaluateOnExit {
            on_exit_code: Some(code.into()),
            on_status_reason: None,
            action: action.into(),
        }
    }
}

/// `timeout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Timeout {
    /// An attempt's limit (Batch: at least 60).
    pub attempt_duration_seconds: u64,
}

/// `retryStrategy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RetryStrategy {
    /// Attempts (≥ 1).
    pub attempts: u32,
    /// Exit code 0 ends the job.
    pub evaluate_on_exit: Vec<EvaluateOnExit>,
}

/// The RegisterJobDefinition request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct JobDefinition {
    /// The job's unique name.
    pub job_definition_name: String,
    /// `multinode` (TorchX's: every app), or `container` for an array job's children.
    #[serde(rename = "type")]
    pub kind: String,
    /// The node groups of a `multinode` job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_properties: Option<NodeProperties>,
    /// The container of a `container` job (an array's children: Batch arrays are never
    /// multi-node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_properties: Option<Container>,
    /// Retries.
    pub retry_strategy: RetryStrategy,
    /// The attempt timeout (a backstop: under the recovery contract the container's own timer
    /// signals and stops the attempt first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Timeout>,
    /// Tags.
    pub tags: BTreeMap<String, String>,
    /// With a share id: the priority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_priority: Option<i64>,
}

/// What `aws_batch` submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BatchJob {
    /// Job (and job definition) name.
    pub name: String,
    /// Job queue.
    pub queue: String,
    /// Share identifier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// The job definition.
    pub job_def: JobDefinition,
    /// An array job's `arrayProperties.size`: its children run the tasks, child `i` the
    /// `i`-th (by `AWS_BATCH_JOB_ARRAY_INDEX`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub array_size: Option<u32>,
    /// `--after`: the jobs (`<queue>:<name>`) it waits for, Batch's `dependsOn`, each turned
    /// into its job id at submission.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

impl NativeRequest for BatchJob {
    fn render(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}
