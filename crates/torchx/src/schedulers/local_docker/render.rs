//! Pure rendering of an AppDef into one container per replica (TorchX's `DockerJob`).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::opts::LocalDockerOpts;
use crate::error::{Error, Result};
use crate::scheduler::{DryRunContext, NativeRequest};
use crate::specs::{AppDef, MacroValues, Mount};

/// The network every container joins (containers reach each other by name on it).
pub(super) const NETWORK: &str = "torchx";
/// Labels TorchX puts on every container.
pub(super) const LABEL_VERSION: &str = "torchx.pytorch.org/version";
/// The app id label: describe, list, cancel and delete find containers by it.
pub(super) const LABEL_APP_ID: &str = "torchx.pytorch.org/app-id";
/// The role label.
pub(super) const LABEL_ROLE: &str = "torchx.pytorch.org/role-name";
/// The replica label.
pub(super) const LABEL_REPLICA: &str = "torchx.pytorch.org/replica-id";
/// The state directory the app was submitted from (set by the scheduler, not the pure render).
pub(super) const LABEL_STATE_DIR: &str = "torchx.pytorch.org/state-dir";
/// local_docker's dry-run fact: the submitter's environment variables that `copy_env` selects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopiedEnv(pub crate::specs::Env);

/// A mount of a container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerMount {
    /// `bind` or `volume`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Host path or volume name.
    pub source: String,
    /// Path in the container.
    pub target: String,
    /// Read-only.
    pub read_only: bool,
}

/// One container (replica).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Container {
    /// Image.
    pub image: String,
    /// Entrypoint and args.
    pub command: Vec<String>,
    /// Container name (also its hostname on the network).
    pub name: String,
    /// Hostname.
    pub hostname: String,
    /// Environment.
    pub environment: crate::specs::Env,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// `--privileged`.
    pub privileged: bool,
    /// Network.
    pub network: String,
    /// Bind and volume mounts.
    pub mounts: Vec<ContainerMount>,
    /// Devices as `host:container:permissions`.
    pub devices: Vec<String>,
    /// `on-failure` restarts, when max_retries > 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<u32>,
    /// Memory limit and shm size in MB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_mb: Option<i64>,
    /// CPU limit in billionths of a CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nano_cpus: Option<i64>,
    /// GPUs requested (a device request with the `gpu` capability).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<i64>,
}

/// The containers of an app.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DockerJob {
    /// App id.
    pub app_id: String,
    /// One container per replica, in role order.
    pub containers: Vec<Container>,
    /// Under the recovery contract: the same containers, one `docker run` per attempt under
    /// torchx's supervisor (see `supervised.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supervised: Option<crate::schedulers::local_cwd::PopenRequest>,
}

impl NativeRequest for DockerJob {
    fn render(&self) -> String {
        let containers = serde_norway::to_string(&self.containers).unwrap_or_default();
        match &self.supervised {
            Some(req) => {
                let runs: Vec<String> = req
                    .roles
                    .iter()
                    .flat_map(|r| &r.replicas)
                    .map(|p| crate::text::shell_join(&p.args))
                    .collect();
                format!(
                    "{containers}# supervised by torchx (time limits, requeues): one attempt \
                     of each container is\n{}\n",
                    runs.join("\n")
                )
            }
            None => containers,
        }
    }
    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

fn tail(s: &str, n: usize) -> &str {
    let start = s
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    &s[start..]
}

fn head(s: &str, n: usize) -> &str {
    s.char_indices().nth(n).map_or(s, |(i, _)| &s[..i])
}

/// `{app_id[-30:]}-{role[:30]}-{replica}`, stripped of leading non-alphanumerics (TorchX).
pub fn container_name(app_id: &str, role: &str, replica: u32) -> String {
    let raw = format!("{}-{}-{replica}", tail(app_id, 30), head(role, 30));
    raw.trim_start_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// Converts named resource devices to device paths (TorchX: EFA and Neuron).
fn resource_devices(devices: &BTreeMap<String, i64>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, count) in devices {
        for i in 0..(*count).max(0) {
            match name.as_str() {
                "vpc.amazonaws.com/efa" => {
                    let d = format!("/dev/infiniband/uverbs{i}");
                    out.push(format!("{d}:{d}:rwm"));
                }
                "aws.amazon.com/neurondevice" => {
                    let d = format!("/dev/neuron{i}");
                    out.push(format!("{d}:{d}:rwm"));
                }
                _ => {}
            }
        }
    }
    out
}

/// Renders the containers for `app`, with the variables `copy_env` copied from this
/// environment. A role name Docker cannot use in a container name is an error.
pub fn render(
    app: &AppDef,
    opts: &LocalDockerOpts,
    ctx: &DryRunContext,
    copied: Option<&CopiedEnv>,
) -> Result<DockerJob> {
    let app_id = ctx.make_unique(&app.name);
    let rank0 = app
        .roles
        .first()
        .map(|r| format!("{}-{}-0", tail(&app_id, 30), head(&r.name, 30)))
        .unwrap_or_default();
    let copied = copied.map(|c| c.0.clone()).unwrap_or_default();
    let mut containers = Vec::new();
    for role in &app.roles {
        // The role name is part of each container's name, which Docker limits to these.
        if let Some(c) = role
            .name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "_.-".contains(*c)))
        {
            return Err(Error::spec(format!(
                "role name `{}` contains {c:?}; on local_docker (it names the containers) it may \
                 only contain letters, digits, `_`, `.` and `-`",
                role.name
            )));
        }
        for i in 0..role.num_replicas {
            let values = MacroValues {
                img_root: String::new(),
                app_id: app_id.clone(),
                replica_id: i.to_string(),
                rank0_env: "TORCHX_RANK0_HOST".into(),
            };
            let r = values.apply(role);
            let name = container_name(&app_id, &role.name, i);
            let mut environment = copied.clone();
            environment.extend(opts.env.clone().unwrap_or_default());
            environment.extend(r.env.clone());
            environment.insert("TORCHX_RANK0_HOST".into(), rank0.clone());
            // As TorchX's docker scheduler: the container knows its image.
            environment.insert("TORCHX_IMAGE".into(), r.image.clone());
            let labels = BTreeMap::from([
                (LABEL_VERSION.to_string(), crate::VERSION.to_string()),
                (LABEL_APP_ID.to_string(), app_id.clone()),
                (LABEL_ROLE.to_string(), role.name.clone()),
                (LABEL_REPLICA.to_string(), i.to_string()),
            ]);
            let mut mounts = Vec::new();
            let mut devices = Vec::new();
            for m in &r.mounts {
                match m {
                    Mount::Bind {
                        src_path,
                        dst_path,
                        read_only,
                    } => mounts.push(ContainerMount {
                        kind: "bind".into(),
                        source: src_path.clone(),
                        target: dst_path.clone(),
                        read_only: *read_only,
                    }),
                    Mount::Volume {
                        src,
                        dst_path,
                        read_only,
                    } => mounts.push(ContainerMount {
                        kind: "volume".into(),
                        source: src.clone(),
                        target: dst_path.clone(),
                        read_only: *read_only,
                    }),
                    Mount::Device {
                        src_path,
                        dst_path,
                        permissions,
                    } => devices.push(format!("{src_path}:{dst_path}:{permissions}")),
                }
            }
            devices.extend(resource_devices(&r.resource.devices));
            let mut command = vec![r.entrypoint.clone()];
            command.extend(r.args.iter().cloned());
            containers.push(Container {
                image: r.image.clone(),
                command,
                hostname: name.clone(),
                name,
                environment,
                labels,
                privileged: opts.privileged,
                network: NETWORK.into(),
                mounts,
                devices,
                max_restarts: (r.max_retries > 0).then_some(r.max_retries),
                mem_mb: (r.resource.mem_mb >= 0).then_some(r.resource.mem_mb),
                nano_cpus: (r.resource.cpu >= 0).then_some(r.resource.cpu * 1_000_000_000),
                gpus: (r.resource.gpu > 0).then_some(r.resource.gpu),
            });
        }
    }
    Ok(DockerJob {
        app_id,
        containers,
        supervised: None,
    })
}

/// The engine's filter for the containers of `app_id` (of every app: `None`).
pub(super) fn label_filter(app_id: Option<&str>) -> HashMap<String, Vec<String>> {
    let label = match app_id {
        Some(id) => format!("{}={id}", LABEL_APP_ID),
        None => LABEL_APP_ID.to_string(),
    };
    HashMap::from([("label".to_string(), vec![label])])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opts::{Cfg, TypedOpts};
    use crate::specs::{Resource, Role};

    fn ctx() -> DryRunContext {
        DryRunContext::new("torchx", "abc123", "/work")
    }

    fn copied() -> Option<&'static CopiedEnv> {
        static COPIED: std::sync::OnceLock<CopiedEnv> = std::sync::OnceLock::new();
        Some(
            COPIED.get_or_init(|| CopiedEnv([("FOO_TOKEN".to_string(), "t0k".to_string())].into())),
        )
    }

    #[test]
    fn names_are_truncated_and_cleaned_like_torchx() {
        assert_eq!(container_name("app-abc", "trainer", 1), "app-abc-trainer-1");
        let long_id = format!("{}-abc", "x".repeat(40));
        assert_eq!(
            container_name(&long_id, &"r".repeat(40), 0).len(),
            30 + 1 + 30 + 2
        );
        assert_eq!(container_name("--a", "r", 0), "a-r-0");
    }

    #[test]
    fn two_roles_with_mounts_resources_and_retries_snapshot() {
        let mut trainer = Role::new("trainer", "img:1")
            .with_entrypoint("python")
            .with_args([
                "train.py",
                "--rank",
                "${replica_id}",
                "--master",
                "$${${rank0_env}}",
            ]);
        trainer.num_replicas = 2;
        trainer.max_retries = 3;
        trainer.resource = Resource::new(2, 1, 4096);
        trainer
            .resource
            .devices
            .insert("vpc.amazonaws.com/efa".into(), 1);
        trainer.mounts = crate::specs::parse_mounts(
            &[
                "type=bind",
                "src=/data",
                "dst=/data",
                "readonly",
                "type=volume",
                "src=cache",
                "dst=/cache",
                "type=device",
                "src=/dev/fuse",
            ],
            None,
        )
        .unwrap();
        trainer.env.insert("LR".into(), "0.1".into());
        let reader = Role::new("reader", "img:2").with_entrypoint("reader");
        let app = AppDef::new("train", vec![trainer, reader]);
        let mut cfg = Cfg::new();
        cfg.insert("privileged".into(), crate::opts::CfgValue::Bool(true));
        cfg.insert(
            "env".into(),
            crate::opts::CfgValue::Dict(BTreeMap::from([
                ("LR".into(), "overridden".into()),
                ("X".into(), "1".into()),
            ])),
        );
        let opts = LocalDockerOpts::from_cfg(&cfg).unwrap();
        let job = render(&app, &opts, &ctx(), copied()).unwrap();
        let c = &job.containers[1];
        assert_eq!(
            c.environment["LR"], "0.1",
            "the role's env wins over -cfg env"
        );
        assert_eq!(c.environment["FOO_TOKEN"], "t0k");
        assert_eq!(c.environment["TORCHX_RANK0_HOST"], "train-abc123-trainer-0");
        assert_eq!(c.environment["TORCHX_IMAGE"], c.image);
        insta::assert_snapshot!(job.render());
    }

    #[test]
    fn role_names_docker_cannot_use_are_refused() {
        let opts = LocalDockerOpts::from_cfg(&Cfg::new()).unwrap();
        let app = AppDef::new(
            "a",
            vec![Role::new("my role", "img").with_entrypoint("true")],
        );
        let err = render(&app, &opts, &ctx(), copied())
            .unwrap_err()
            .to_string();
        assert!(err.contains("role name `my role` contains ' '"), "{err}");
        let app = AppDef::new(
            "a",
            vec![Role::new("my_role.v-2", "img").with_entrypoint("true")],
        );
        assert!(render(&app, &opts, &ctx(), copied()).is_ok());
    }
}
