//! Pure rendering of an AppDef into TorchX's AppWrapper: one Pod per replica, a headless
//! Service, optional PodGroups for a co-scheduler, requeuing for retries.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{EnvVar, Pod, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{json, Value};

use super::opts::KubernetesMcadOpts;
use crate::error::{Error, Result};
use crate::scheduler::{DryRunContext, NativeRequest};
use crate::schedulers::kubernetes::names::{
    check_dns_label, check_label_value, cleanup_str, LABEL_KUBE_APP_NAME, LABEL_UNIQUE_NAME,
};
use crate::schedulers::kubernetes::render::{
    object_labels, pod_labels, pod_overlay, role_to_pod, with_pod_overlay, PodSettings,
};
use crate::specs::{AppDef, MacroValues, Role};

/// The AppWrapper API version.
pub(crate) const API_VERSION: &str = "workload.codeflare.dev/v1beta1";
/// Label that ties PodGroups to their AppWrapper.
pub(crate) const LABEL_APPWRAPPER: &str = "appwrapper.workload.codeflare.dev";
/// Label that puts a pod in its co-scheduler PodGroup.
pub(crate) const LABEL_POD_GROUP: &str = "pod-group.scheduling.sigs.k8s.io";
/// Pod annotation naming an extra (Multus) network.
pub(crate) const ANNOTATION_NETWORK: &str = "k8s.v1.cni.cncf.io/networks";
const DEFAULT_PORT: u16 = 29500;

/// What `kubernetes_mcad` submits.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AppWrapperJob {
    /// Namespace.
    pub namespace: String,
    /// The AppWrapper's name (the unique app id).
    pub name: String,
    /// The AppWrapper object.
    pub resource: Value,
}

impl NativeRequest for AppWrapperJob {
    fn render(&self) -> String {
        serde_norway::to_string(&self.resource).unwrap_or_default()
    }
    fn to_json(&self) -> Value {
        self.resource.clone()
    }
}

/// TorchX's `get_unique_truncated_appid`: the unique part shrinks (14 characters at most) so
/// that `{id}-pg{role}` stays within 63; a very long app name is cut.
pub(crate) fn truncated_app_id(app_name: &str, num_roles: usize, unique: &str) -> String {
    let uid_chars = 4;
    let pg_chars = 3 + num_roles;
    let size = 63_i64 - (app_name.chars().count() + uid_chars + pg_chars) as i64;
    let (name, size): (String, usize) = if size <= 3 {
        let end = 63_usize.saturating_sub(uid_chars + pg_chars);
        (app_name.chars().take(end).collect(), 3)
    } else {
        (app_name.to_string(), size.min(14) as usize)
    };
    let unique: String = unique.chars().take(size).collect();
    cleanup_str(&format!("{name}-{unique}"))
}

/// The pod of replica `k` of role `role_idx`. TorchX named it `{id}-{k}` for every role, so
/// the pods of a multi-role app collided; roles after the first get `{id}-{role_idx}-{k}`.
pub(crate) fn pod_name(app_id: &str, role_idx: usize, k: u32) -> String {
    if role_idx == 0 {
        cleanup_str(&format!("{app_id}-{k}"))
    } else {
        cleanup_str(&format!("{app_id}-{role_idx}-{k}"))
    }
}

fn hosts_env(role: &str) -> String {
    format!("TORCHX_MCAD_{}_0_HOSTS", cleanup_str(role))
        .to_uppercase()
        .replace('-', "")
}

/// The port of the headless Service: the last port of any role's port_map, else 29500.
fn service_port(app: &AppDef) -> u16 {
    app.roles
        .iter()
        .flat_map(|r| r.port_map.values())
        .last()
        .copied()
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_PORT)
}

/// Renders the AppWrapper.
pub(crate) fn render(
    app: &AppDef,
    opts: &KubernetesMcadOpts,
    ctx: &DryRunContext,
) -> Result<AppWrapperJob> {
    let id = truncated_app_id(&app.name, app.roles.len(), &ctx.unique);
    check_dns_label("app id", &id)?;
    check_label_value(LABEL_KUBE_APP_NAME, &app.name)?;
    let ns = opts.namespace.clone();
    let mut items = pod_groups(app, opts, &id)?;
    // The wrapped pods never restart: a time limit and its signal apply, requeues cannot.
    if let Some(role) = app
        .roles
        .iter()
        .find(|r| r.requeue_exit_code.is_some() || r.max_requeues.is_some())
    {
        return Err(Error::unsupported(
            super::NAME,
            format!(
                "requeue_exit_code and max_requeues (role `{}`): the AppWrapper's pods are never \
                 restarted (time_limit and checkpoint_signal apply)",
                role.name
            ),
        ));
    }
    let wrapped = Wrapped {
        app,
        opts,
        id: &id,
        rank0_env: hosts_env(&app.roles[0].name),
        rank0_host: format!("{}.{id}", pod_name(&id, 0, 0)),
    };
    for (role_idx, role) in app.roles.iter().enumerate() {
        let overlay = pod_overlay(app, role)?;
        for k in 0..role.num_replicas {
            let pod = wrapped.pod(role_idx, role, k, overlay.as_ref())?;
            items.push(json!({"replicas": 1, "generictemplate": serde_json::to_value(&pod).unwrap_or_default()}));
        }
    }
    let service = headless_service(app, &id, &ns);
    items.push(json!({"replicas": 1, "generictemplate": serde_json::to_value(&service).unwrap_or_default()}));
    let mut spec = json!({"resources": {"GenericItems": items}});
    if let Some(p) = opts.priority {
        spec["priority"] = json!(p);
    }
    let retries = app.roles.iter().map(|r| r.max_retries).min().unwrap_or(0);
    if retries > 0 {
        let total: u32 = app.roles.iter().map(|r| r.num_replicas).sum();
        spec["schedulingSpec"] = json!({
            "minAvailable": total,
            "requeuing": {"timeInSeconds": 300, "maxTimeInSeconds": 0,
                          "growthType": "exponential", "maxNumRequeuings": retries},
        });
    }
    Ok(AppWrapperJob {
        namespace: ns.clone(),
        name: id.clone(),
        resource: json!({
            "apiVersion": API_VERSION,
            "kind": "AppWrapper",
            "metadata": {"name": id, "namespace": ns},
            "spec": spec,
        }),
    })
}

/// With a coscheduler, one PodGroup per role (all of its replicas or none).
fn pod_groups(app: &AppDef, opts: &KubernetesMcadOpts, id: &str) -> Result<Vec<Value>> {
    let Some(cosched) = &opts.coscheduler_name else {
        return Ok(Vec::new());
    };
    check_dns_label("coscheduler_name", cosched).map_err(|e| Error::config(e.to_string()))?;
    Ok(app
        .roles
        .iter()
        .enumerate()
        .map(|(role_idx, role)| {
            let mut labels = object_labels(app, id);
            labels.insert(LABEL_APPWRAPPER.into(), id.to_string());
            json!({"replicas": 1, "generictemplate": {
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": format!("{id}-pg{role_idx}"), "namespace": opts.namespace, "labels": labels},
                "spec": {"minMember": role.num_replicas},
            }})
        })
        .collect())
}

/// What every wrapped pod of the app shares.
struct Wrapped<'a> {
    app: &'a AppDef,
    opts: &'a KubernetesMcadOpts,
    id: &'a str,
    /// The first role's hosts variable, which the rank0_env macro names.
    rank0_env: String,
    rank0_host: String,
}

impl Wrapped<'_> {
    /// Replica `k` of `role` as a pod with a stable hostname under the app's service.
    fn pod(
        &self,
        role_idx: usize,
        role: &Role,
        k: u32,
        overlay: Option<&serde_json::Map<String, Value>>,
    ) -> Result<Pod> {
        let (id, opts) = (self.id, self.opts);
        let rank0 = role_idx == 0 && k == 0;
        let values = MacroValues {
            img_root: String::new(),
            app_id: id.to_string(),
            replica_id: k.to_string(),
            rank0_env: if rank0 {
                "TORCHX_RANK0_HOST".into()
            } else {
                self.rank0_env.clone()
            },
        };
        let name = pod_name(id, role_idx, k);
        check_dns_label("pod name", &name)?;
        let mut replica_role = values.apply(role);
        if rank0 {
            replica_role
                .env
                .insert("TORCHX_RANK0_HOST".into(), "localhost".into());
        }
        // Its own role's first host (TorchX), and the first role's, which the rank0_env
        // macro names (TorchX set that one only on the first role's pods).
        let mut trailing = vec![EnvVar {
            name: hosts_env(&role.name),
            value: Some(format!("{}.{id}", pod_name(id, role_idx, 0))),
            ..Default::default()
        }];
        if role_idx != 0 && hosts_env(&role.name) != self.rank0_env {
            trailing.push(EnvVar {
                name: self.rank0_env.clone(),
                value: Some(self.rank0_host.clone()),
                ..Default::default()
            });
        }
        let settings = PodSettings {
            service_account: opts.service_account.clone(),
            priority_class: opts.priority_class_name.clone(),
            image_pull_secret: opts.image_secret.clone(),
            trailing_env: trailing,
            ..Default::default()
        };
        let template = with_pod_overlay(
            role,
            overlay,
            role_to_pod(&name, &replica_role, &k.to_string(), &settings)?,
        )?;
        let mut metadata = template.metadata.unwrap_or_default();
        let mut labels = pod_labels(self.app, role_idx, role, Some(k), id);
        if opts.coscheduler_name.is_some() {
            labels.insert(LABEL_POD_GROUP.into(), format!("{id}-pg{role_idx}"));
        }
        labels
            .iter()
            .try_for_each(|(k, v)| check_label_value(k, v))?;
        metadata.labels = Some(labels);
        metadata.name = Some(name.clone());
        metadata.namespace = Some(opts.namespace.clone());
        if let Some(network) = &opts.network {
            metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(ANNOTATION_NETWORK.into(), network.clone());
        }
        let mut spec = template.spec.unwrap_or_default();
        spec.hostname = Some(name.clone());
        spec.subdomain = Some(id.to_string());
        spec.scheduler_name = opts.coscheduler_name.clone();
        Ok(Pod {
            metadata,
            spec: Some(spec),
            status: None,
        })
    }
}

/// The headless service that gives every pod its `<pod>.<app id>` name.
fn headless_service(app: &AppDef, id: &str, ns: &str) -> Service {
    let port = i32::from(service_port(app));
    Service {
        metadata: ObjectMeta {
            name: Some(id.to_string()),
            namespace: Some(ns.to_string()),
            labels: Some(object_labels(app, id)),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            ports: Some(vec![ServicePort {
                protocol: Some("TCP".into()),
                port,
                target_port: Some(IntOrString::Int(port)),
                ..Default::default()
            }]),
            selector: Some(BTreeMap::from([(
                LABEL_UNIQUE_NAME.to_string(),
                id.to_string(),
            )])),
            session_affinity: Some("None".into()),
            type_: Some("ClusterIP".into()),
            ..Default::default()
        }),
        status: None,
    }
}
