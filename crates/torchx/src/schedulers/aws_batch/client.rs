//! The Batch SDK side of the scheduler: its clients (built on first use), finding a job by its
//! app id, and a rendered job definition in the SDK's types.

use std::collections::BTreeMap;

use aws_sdk_batch::types as bt;
use serde_json::{json, Value};

use super::{aws_err, is_deleted, render, split_app_id, split_child, AwsBatchScheduler, NAME};
use crate::error::Result;

impl AwsBatchScheduler {
    pub(super) async fn clients(
        &self,
    ) -> Result<&(
        aws_sdk_batch::Client,
        aws_sdk_cloudwatchlogs::Client,
        String,
    )> {
        self.clients
            .get_or_try_init(|| async {
                let (conf, region) = crate::schedulers::aws::load_config(NAME).await?;
                Ok((
                    aws_sdk_batch::Client::new(&conf),
                    aws_sdk_cloudwatchlogs::Client::new(&conf),
                    region,
                ))
            })
            .await
    }

    pub(super) async fn batch(&self) -> Result<&aws_sdk_batch::Client> {
        Ok(&self.clients().await?.0)
    }

    /// The newest job of this name in this queue, as listed.
    pub(super) async fn find_summary(&self, app_id: &str) -> Result<Option<bt::JobSummary>> {
        let Some((queue, name)) = split_app_id(app_id) else {
            return Ok(None);
        };
        let listed = self
            .batch()
            .await?
            .list_jobs()
            .job_queue(queue)
            .filters(
                bt::KeyValuesPair::builder()
                    .name("JOB_NAME")
                    .values(name)
                    .build(),
            )
            .send()
            .await
            .map_err(aws_err("listing jobs"))?;
        Ok(listed
            .job_summary_list()
            .iter()
            .filter(|j| j.job_name() == Some(name))
            // An array's children share its name (Batch lists them only when asked; some
            // emulators always): the app is the parent.
            .filter(|j| j.job_id().is_some_and(|id| !id.contains(':')))
            .max_by_key(|j| j.created_at().unwrap_or(0))
            .cloned())
    }

    /// The newest job of this name in this queue (or its array child), unless `delete`
    /// removed it.
    pub(super) async fn find_job(&self, app_id: &str) -> Result<Option<bt::JobDetail>> {
        let (job_app_id, child) = split_child(app_id);
        let job = match self.find_summary(job_app_id).await? {
            Some(summary) => self.describe_listed(&summary).await?,
            None => None,
        };
        match (job, child) {
            (Some(job), Some(pos)) => {
                let id = format!("{}:{pos}", job.job_id().unwrap_or_default());
                self.describe_id(&id).await
            }
            (job, _) => Ok(job),
        }
    }

    /// A job by id, if Batch knows it.
    pub(super) async fn describe_id(&self, id: &str) -> Result<Option<bt::JobDetail>> {
        let described = self
            .batch()
            .await?
            .describe_jobs()
            .jobs(id)
            .send()
            .await
            .map_err(aws_err("describing a job"))?;
        Ok(described.jobs().first().cloned())
    }

    /// A listed job's details, unless `delete` removed it.
    pub(super) async fn describe_listed(
        &self,
        summary: &bt::JobSummary,
    ) -> Result<Option<bt::JobDetail>> {
        let Some(id) = summary.job_id() else {
            return Ok(None);
        };
        Ok(self.describe_id(id).await?.filter(|j| !is_deleted(j)))
    }

    /// Node-level details (`{id}#{index}`), where Batch (or the emulator) reports them.
    pub(super) async fn nodes(
        &self,
        job_id: &str,
        indexes: &[i32],
    ) -> Result<BTreeMap<i32, bt::JobDetail>> {
        let mut out = BTreeMap::new();
        for chunk in indexes.chunks(100) {
            let ids: Vec<String> = chunk.iter().map(|i| format!("{job_id}#{i}")).collect();
            let resp = self
                .batch()
                .await?
                .describe_jobs()
                .set_jobs(Some(ids))
                .send()
                .await
                .map_err(aws_err("describing job nodes"))?;
            for j in resp.jobs() {
                let idx = j.node_details().and_then(|n| n.node_index()).or_else(|| {
                    j.job_id()
                        .and_then(|id| id.rsplit_once('#')?.1.parse().ok())
                });
                if let Some(i) = idx {
                    out.insert(i, j.clone());
                }
            }
        }
        Ok(out)
    }
}

/// The SDK form of a rendered job definition.
pub(super) fn container_properties(c: &render::Container) -> bt::ContainerProperties {
    let mut b = bt::ContainerProperties::builder()
        .image(&c.image)
        .set_command(Some(c.command.clone()))
        .set_environment(Some(
            c.environment
                .iter()
                .map(|kv| {
                    bt::KeyValuePair::builder()
                        .name(&kv.name)
                        .value(&kv.value)
                        .build()
                })
                .collect(),
        ))
        .privileged(c.privileged)
        .set_resource_requirements(Some(
            c.resource_requirements
                .iter()
                .map(|r| {
                    bt::ResourceRequirement::builder()
                        .r#type(bt::ResourceType::from(r.kind.as_str()))
                        .value(&r.value)
                        .build()
                })
                .collect(),
        ))
        .linux_parameters(
            bt::LinuxParameters::builder()
                .shared_memory_size(c.linux_parameters.shared_memory_size as i32)
                .set_devices(Some(
                    c.linux_parameters
                        .devices
                        .iter()
                        .map(|d| {
                            bt::Device::builder()
                                .host_path(&d.host_path)
                                .container_path(&d.container_path)
                                .set_permissions(Some(
                                    d.permissions
                                        .iter()
                                        .map(|p| bt::DeviceCgroupPermission::from(p.as_str()))
                                        .collect(),
                                ))
                                .build()
                        })
                        .collect(),
                ))
                .build(),
        )
        .log_configuration(
            bt::LogConfiguration::builder()
                .log_driver(bt::LogDriver::from(c.log_configuration.log_driver.as_str()))
                .build(),
        )
        .set_mount_points(Some(
            c.mount_points
                .iter()
                .map(|m| {
                    bt::MountPoint::builder()
                        .container_path(&m.container_path)
                        .read_only(m.read_only)
                        .source_volume(&m.source_volume)
                        .build()
                })
                .collect(),
        ))
        .set_volumes(Some(
            c.volumes
                .iter()
                .map(|v| {
                    let mut b = bt::Volume::builder().name(&v.name);
                    if let Some(p) = v.host.as_ref().and_then(|h| h.get("sourcePath")) {
                        b = b.host(bt::Host::builder().source_path(p).build());
                    }
                    if let Some(fs) = v
                        .efs_volume_configuration
                        .as_ref()
                        .and_then(|e| e.get("fileSystemId"))
                    {
                        b = b.efs_volume_configuration(
                            bt::EfsVolumeConfiguration::builder()
                                .file_system_id(fs)
                                .build(),
                        );
                    }
                    b.build()
                })
                .collect(),
        ));
    b = b
        .set_job_role_arn(c.job_role_arn.clone())
        .set_execution_role_arn(c.execution_role_arn.clone())
        .set_instance_type(c.instance_type.clone());
    b.build()
}

impl AwsBatchScheduler {
    /// A job definition by its ARN (or `name:revision`), if Batch still has it.
    pub(super) async fn job_definition(&self, arn: &str) -> Result<Option<bt::JobDefinition>> {
        let described = self
            .batch()
            .await?
            .describe_job_definitions()
            .job_definitions(arn)
            .send()
            .await
            .map_err(aws_err("describing a job definition"))?;
        Ok(described.job_definitions().first().cloned())
    }
}

/// A submitted job read back in the shape of the dry run's request (`BatchJob`'s JSON): the
/// job's name, queue, share, array size and dependencies, and its job definition as Batch holds
/// it (`None` when it is gone).
pub(super) fn native_json(job: &bt::JobDetail, def: Option<&bt::JobDefinition>) -> Value {
    let mut out = json!({
        "name": job.job_name(),
        "queue": job.job_queue(),
        "jobDef": def.map(job_definition_json),
    });
    if let Some(share) = job.share_identifier() {
        out["shareId"] = json!(share);
    }
    if let Some(size) = job.array_properties().and_then(|a| a.size()) {
        out["arraySize"] = json!(size);
    }
    let depends: Vec<_> = job.depends_on().iter().filter_map(|d| d.job_id()).collect();
    if !depends.is_empty() {
        out["dependsOn"] = json!(depends);
    }
    out
}

fn job_definition_json(def: &bt::JobDefinition) -> Value {
    let mut out = json!({
        "jobDefinitionName": def.job_definition_name(),
        "type": def.r#type(),
        "tags": def.tags().cloned().unwrap_or_default().into_iter().collect::<BTreeMap<_, _>>(),
    });
    if let Some(nodes) = def.node_properties() {
        out["nodeProperties"] = json!({
            "numNodes": nodes.num_nodes(),
            "mainNode": nodes.main_node(),
            "nodeRangeProperties": nodes.node_range_properties().iter().map(|r| json!({
                "targetNodes": r.target_nodes(),
                "container": r.container().map(container_json),
            })).collect::<Vec<_>>(),
        });
    }
    if let Some(c) = def.container_properties() {
        out["containerProperties"] = container_json(c);
    }
    if let Some(retry) = def.retry_strategy() {
        out["retryStrategy"] = json!({
            "attempts": retry.attempts(),
            "evaluateOnExit": retry.evaluate_on_exit().iter().map(|e| {
                let mut rule = serde_json::Map::new();
                if let Some(code) = e.on_exit_code() {
                    rule.insert("onExitCode".into(), json!(code));
                }
                if let Some(reason) = e.on_status_reason() {
                    rule.insert("onStatusReason".into(), json!(reason));
                }
                rule.insert("action".into(), json!(e.action().map(|a| a.as_str())));
                Value::Object(rule)
            }).collect::<Vec<_>>(),
        });
    }
    if let Some(seconds) = def.timeout().and_then(|t| t.attempt_duration_seconds()) {
        out["timeout"] = json!({"attemptDurationSeconds": seconds});
    }
    if let Some(priority) = def.scheduling_priority() {
        out["schedulingPriority"] = json!(priority);
    }
    out
}

/// The inverse of [`container_properties`], for what Batch gives back.
fn container_json(c: &bt::ContainerProperties) -> Value {
    let mut out = json!({
        "command": c.command(),
        "image": c.image(),
        "environment": c.environment().iter()
            .map(|kv| json!({"name": kv.name(), "value": kv.value()}))
            .collect::<Vec<_>>(),
        "privileged": c.privileged().unwrap_or(false),
        "resourceRequirements": c.resource_requirements().iter()
            .map(|r| json!({"type": r.r#type().map(|t| t.as_str()), "value": r.value()}))
            .collect::<Vec<_>>(),
        "mountPoints": c.mount_points().iter()
            .map(|m| json!({
                "containerPath": m.container_path(),
                "readOnly": m.read_only().unwrap_or(false),
                "sourceVolume": m.source_volume(),
            }))
            .collect::<Vec<_>>(),
        "volumes": c.volumes().iter()
            .map(|v| {
                let mut vol = json!({"name": v.name()});
                if let Some(path) = v.host().and_then(|h| h.source_path()) {
                    vol["host"] = json!({"sourcePath": path});
                }
                if let Some(fs) = v.efs_volume_configuration() {
                    vol["efsVolumeConfiguration"] = json!({"fileSystemId": fs.file_system_id()});
                }
                vol
            })
            .collect::<Vec<_>>(),
    });
    if let Some(linux) = c.linux_parameters() {
        out["linuxParameters"] = json!({
            "sharedMemorySize": linux.shared_memory_size(),
            "devices": linux.devices().iter().map(|d| json!({
                "hostPath": d.host_path(),
                "containerPath": d.container_path(),
                "permissions": d.permissions().iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
    }
    if let Some(log) = c.log_configuration() {
        out["logConfiguration"] = json!({"logDriver": log.log_driver().map(|d| d.as_str())});
    }
    for (key, value) in [
        ("jobRoleArn", c.job_role_arn()),
        ("executionRoleArn", c.execution_role_arn()),
        ("instanceType", c.instance_type()),
    ] {
        if let Some(value) = value {
            out[key] = json!(value);
        }
    }
    out
}
