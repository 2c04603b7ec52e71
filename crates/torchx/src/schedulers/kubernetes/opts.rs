//! Run options of `kubernetes` (TorchX's, plus `mode`, node selectors, tolerations and an image
//! pull secret), parsed and checked without I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Toleration;

use crate::error::{Error, Result};
use crate::opts::{Cfg, TypedOpts};
use crate::run_opts;

run_opts! {
    /// Run options of the `kubernetes` scheduler as given.
    pub(crate) struct RawKubernetesOpts {
        /// Kubernetes namespace to schedule job in
        namespace: String = "default".into(),
        /// what to create: `volcano` (a batch.volcano.sh Job, as TorchX; needs Volcano and `queue`) or `job` (native batch/v1 Indexed Jobs and a headless Service; any cluster). Default: `volcano` when `queue` is given, else `job`
        mode: Option<String>,
        /// Volcano queue to schedule job in (selects mode=volcano unless mode is given)
        queue: Option<String>,
        /// The service account name to set on the pod specs
        service_account: Option<String>,
        /// The name of the PriorityClass to set on the job specs
        priority_class: Option<String>,
        /// node labels every pod must match, e.g. `disktype:ssd,zone:a`
        node_selector: Option<BTreeMap<String, String>>,
        /// taints the pods tolerate: `key=value:Effect`, `key:Effect` or `key` (any value, any effect)
        tolerations: Option<Vec<String>>,
        /// name of the Secret used to pull the images (imagePullSecrets)
        image_pull_secret: Option<String>,
        /// (remote jobs) the image repository to use when pushing patched images, must have push access. Ex: example.com/your/container
        image_repo: Option<String>,
        /// whether to suppress verbose output for image building. Defaults to ``False``.
        quiet: bool = false,
    }
}

/// What `kubernetes` creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `batch/v1` Indexed Jobs, one per role, plus a headless Service.
    Job,
    /// A `batch.volcano.sh/v1alpha1` Job, as TorchX.
    Volcano,
}

impl Mode {
    /// The option value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Job => "job",
            Mode::Volcano => "volcano",
        }
    }
}

/// Checked run options of `kubernetes`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct KubernetesOpts {
    /// Namespace of every object.
    pub namespace: String,
    /// What to create.
    pub mode: Mode,
    /// Volcano queue.
    pub queue: Option<String>,
    /// Pods' service account.
    pub service_account: Option<String>,
    /// PriorityClass of the pods (Volcano: of the job).
    pub priority_class: Option<String>,
    /// Node labels the pods must match.
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Parsed `tolerations`.
    pub parsed_tolerations: Vec<Toleration>,
    /// Secret to pull images with.
    pub image_pull_secret: Option<String>,
    /// Where patched images would be pushed.
    pub image_repo: Option<String>,
    /// Quiet image builds.
    pub quiet: bool,
}

const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Parses `key=value:Effect`, `key:Effect`, `key=value` or `key`.
pub(crate) fn parse_toleration(s: &str) -> Result<Toleration> {
    let bad = |why: &str| {
        Error::config(format!(
            "run option tolerations: `{s}` {why}; expected `key=value:Effect`, `key:Effect` or \
             `key`, with Effect one of {}",
            EFFECTS.join(", ")
        ))
    };
    let (kv, effect) = match s.rsplit_once(':') {
        Some((kv, e)) if EFFECTS.contains(&e) => (kv, Some(e.to_string())),
        Some((_, e)) => return Err(bad(&format!("has the unknown effect `{e}`"))),
        None => (s, None),
    };
    let (key, value) = match kv.split_once('=') {
        Some((k, v)) => (k, Some(v.to_string())),
        None => (kv, None),
    };
    if key.is_empty() {
        return Err(bad("has no key"));
    }
    Ok(Toleration {
        key: Some(key.to_string()),
        operator: Some(if value.is_some() { "Equal" } else { "Exists" }.into()),
        value,
        effect,
        ..Default::default()
    })
}

/// The schema is the options as given; reading them checks them (no I/O).
impl TypedOpts for KubernetesOpts {
    fn schema() -> crate::opts::RunOpts {
        RawKubernetesOpts::schema()
    }

    fn from_cfg(cfg: &Cfg) -> Result<KubernetesOpts> {
        let raw = RawKubernetesOpts::from_cfg(cfg)?;
        // TorchX's configs set `queue` (its scheduler is Volcano only): a queue means Volcano
        // unless `mode` says otherwise, and never silently a plain Job.
        let mode = match (raw.mode.as_deref(), &raw.queue) {
            (Some("volcano"), _) | (None, Some(_)) => Mode::Volcano,
            (Some("job"), None) | (None, None) => Mode::Job,
            (Some("job"), Some(q)) => {
                return Err(Error::config(format!(
                    "run option queue={q} needs mode=volcano (a plain Job has no Volcano \
                     queue); drop `queue` or `mode=job`"
                )))
            }
            (Some(other), _) => {
                return Err(Error::config(format!(
                    "run option mode: `{other}` is not one of `job`, `volcano`"
                )))
            }
        };
        if mode == Mode::Volcano && raw.queue.is_none() {
            return Err(Error::config(
                "Required run option: queue, must be provided and not `None` (mode=volcano)",
            ));
        }
        super::names::check_dns_label("namespace", &raw.namespace)
            .map_err(|e| Error::config(format!("run option namespace: {e}")))?;
        let parsed_tolerations = raw
            .tolerations
            .iter()
            .flatten()
            .map(|t| parse_toleration(t))
            .collect::<Result<_>>()?;
        Ok(KubernetesOpts {
            namespace: raw.namespace,
            mode,
            queue: raw.queue,
            service_account: raw.service_account,
            priority_class: raw.priority_class,
            node_selector: raw.node_selector,
            parsed_tolerations,
            image_pull_secret: raw.image_pull_secret,
            image_repo: raw.image_repo,
            quiet: raw.quiet,
        })
    }
}
