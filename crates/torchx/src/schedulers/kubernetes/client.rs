//! The I/O half shared by `kubernetes` and `kubernetes_mcad`: a kube-rs client (kubeconfig or
//! in-cluster config, TLS, auth plugins), built on first use, speaking JSON objects through
//! `DynamicObject` so that Volcano Jobs, AppWrappers and native objects take one code path.

use futures_util::AsyncBufRead;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, LogParams, Patch,
    PatchParams, PostParams, PropagationPolicy,
};
use kube::{Client, Config};
use serde_json::Value;
use tokio::sync::OnceCell;

use crate::error::{Error, ErrorKind, Result};

/// A kind of object: its API group/version, kind and plural.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Kind {
    /// API group (empty for the core group).
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural used in REST paths.
    pub plural: &'static str,
}

/// Volcano's Job.
pub(crate) const VOLCANO_JOB: Kind = Kind {
    group: "batch.volcano.sh",
    version: "v1alpha1",
    kind: "Job",
    plural: "jobs",
};
/// Volcano's command bus: an `AbortJob` command is how `vcctl job suspend` stops a job.
pub(crate) const VOLCANO_COMMAND: Kind = Kind {
    group: "bus.volcano.sh",
    version: "v1alpha1",
    kind: "Command",
    plural: "commands",
};
/// Volcano's Queue (cluster-scoped).
pub(crate) const VOLCANO_QUEUE: Kind = Kind {
    group: "scheduling.volcano.sh",
    version: "v1beta1",
    kind: "Queue",
    plural: "queues",
};
/// MCAD's AppWrapper.
pub(crate) const APPWRAPPER: Kind = Kind {
    group: "workload.codeflare.dev",
    version: "v1beta1",
    kind: "AppWrapper",
    plural: "appwrappers",
};
/// Native Job.
pub(crate) const JOB: Kind = Kind {
    group: "batch",
    version: "v1",
    kind: "Job",
    plural: "jobs",
};
/// Core Service.
pub(crate) const SERVICE: Kind = Kind {
    group: "",
    version: "v1",
    kind: "Service",
    plural: "services",
};
/// Core Pod.
pub(crate) const POD: Kind = Kind {
    group: "",
    version: "v1",
    kind: "Pod",
    plural: "pods",
};

impl Kind {
    /// The kind of a JSON object by its `apiVersion` and `kind`.
    pub(crate) fn of(obj: &Value) -> Option<Kind> {
        let api_version = obj["apiVersion"].as_str()?;
        let kind = obj["kind"].as_str()?;
        [VOLCANO_JOB, VOLCANO_COMMAND, APPWRAPPER, JOB, SERVICE, POD]
            .into_iter()
            .find(|k| k.api_version() == api_version && k.kind == kind)
    }

    /// `group/version` (or `version` for the core group).
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }
}

/// The Kubernetes API, connected on first use (a clone shares the connection once made).
#[derive(Clone)]
pub(crate) struct Kube {
    scheduler: &'static str,
    client: OnceCell<Client>,
}

impl std::fmt::Debug for Kube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kube")
            .field("connected", &self.client.initialized())
            .finish()
    }
}

impl Kube {
    /// A client for this scheduler's errors; connects on first use.
    pub(crate) fn new(scheduler: &'static str) -> Kube {
        Kube {
            scheduler,
            client: OnceCell::new(),
        }
    }

    /// A client error, kept as the source, classed by its HTTP status
    /// ([`ErrorKind::from_http_status`]); anything that is not an answer of the API server
    /// (connection, TLS, timeouts) means the cluster is unavailable.
    fn err(&self, what: String) -> impl FnOnce(kube::Error) -> Error + '_ {
        move |e| {
            let (detail, kind) = match &e {
                kube::Error::Api(s) => (
                    format!("{} ({})", s.message, s.code),
                    ErrorKind::from_http_status(s.code),
                ),
                other => (
                    format!("the Kubernetes API server does not answer ({other})"),
                    ErrorKind::Unavailable,
                ),
            };
            Error::backend_caused_by(self.scheduler, format!("{what}: {detail}"), kind, e)
        }
    }

    async fn client(&self) -> Result<&Client> {
        self.client
            .get_or_try_init(|| async {
                let config = Config::infer().await.map_err(|e| {
                    Error::backend(
                        self.scheduler,
                        format!(
                            "no Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster): {e}"
                        ),
                    )
                    .with_source(e)
                })?;
                Client::try_from(config).map_err(self.err("creating the Kubernetes client".into()))
            })
            .await
    }

    /// The namespace of the active kubeconfig context (what `list` looks in, as TorchX).
    pub(crate) async fn default_namespace(&self) -> Result<String> {
        Ok(self.client().await?.default_namespace().to_string())
    }

    async fn api(&self, ns: &str, kind: Kind) -> Result<Api<DynamicObject>> {
        let client = self.client().await?.clone();
        Ok(Api::namespaced_with(client, ns, &kind.resource()))
    }

    /// Creates `obj`; a name that exists already is a clear error, not a retry.
    pub(crate) async fn create(&self, ns: &str, obj: &Value) -> Result<Value> {
        let kind = Kind::of(obj).ok_or_else(|| {
            Error::backend(self.scheduler, format!("unknown object kind in {obj}"))
        })?;
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let dynamic: DynamicObject = serde_json::from_value(obj.clone()).map_err(|e| {
            Error::backend(self.scheduler, format!("bad object {name}: {e}")).with_source(e)
        })?;
        let created = self
            .api(ns, kind)
            .await?
            .create(&PostParams::default(), &dynamic)
            .await
            .map_err(|e| match &e {
                kube::Error::Api(s) if s.code == 409 => Error::already_exists(
                    self.scheduler,
                    format!(
                        "{} `{name}` already exists in namespace `{ns}`; this is transient, \
                         resubmit the job",
                        kind.kind
                    ),
                )
                .with_source(e),
                _ => self.err(format!("creating {} {name}", kind.kind))(e),
            })?;
        Ok(serde_json::to_value(created).unwrap_or_default())
    }

    /// Every node's allocatable resources: (name, CPUs, memory in MiB, GPUs).
    pub(crate) async fn node_allocatables(&self) -> Result<Vec<(String, f64, f64, f64)>> {
        let client = self.client().await?.clone();
        let api: Api<k8s_openapi::api::core::v1::Node> = Api::all(client);
        let nodes = api
            .list(&ListParams::default())
            .await
            .map_err(self.err("listing nodes".into()))?;
        Ok(nodes
            .items
            .iter()
            .map(|n| {
                let alloc = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
                let get = |k: &str| {
                    alloc
                        .and_then(|a| a.get(k))
                        .and_then(|q| parse_quantity(&q.0))
                        .unwrap_or(0.0)
                };
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    get("cpu"),
                    get("memory") / (1024.0 * 1024.0),
                    get("nvidia.com/gpu"),
                )
            })
            .collect())
    }

    /// Whether namespace `ns` exists.
    pub(crate) async fn namespace_exists(&self, ns: &str) -> Result<bool> {
        let client = self.client().await?.clone();
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
        api.get_opt(ns)
            .await
            .map(|n| n.is_some())
            .map_err(self.err(format!("reading namespace {ns}")))
    }

    /// The names of Volcano's queues; `None` if the cluster serves no Volcano queues (Volcano
    /// is not installed).
    pub(crate) async fn volcano_queues(&self) -> Result<Option<Vec<String>>> {
        let client = self.client().await?.clone();
        let api: Api<DynamicObject> = Api::all_with(client, &VOLCANO_QUEUE.resource());
        match api.list(&ListParams::default()).await {
            Ok(list) => Ok(Some(
                list.items
                    .into_iter()
                    .filter_map(|q| q.metadata.name)
                    .collect(),
            )),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(self.err("listing Volcano queues".into())(e)),
        }
    }

    /// The object, `None` if it does not exist.
    pub(crate) async fn get(&self, ns: &str, kind: Kind, name: &str) -> Result<Option<Value>> {
        match self.api(ns, kind).await?.get_opt(name).await {
            Ok(o) => Ok(o.map(|o| serde_json::to_value(o).unwrap_or_default())),
            Err(e) => Err(self.err(format!("reading {} {name}", kind.kind))(e)),
        }
    }

    /// Objects of `kind`, optionally only those matching a label selector.
    pub(crate) async fn list(
        &self,
        ns: &str,
        kind: Kind,
        selector: Option<&str>,
    ) -> Result<Vec<Value>> {
        let mut lp = ListParams::default();
        if let Some(s) = selector {
            lp = lp.labels(s);
        }
        let list = self
            .api(ns, kind)
            .await?
            .list(&lp)
            .await
            .map_err(self.err(format!("listing {}s", kind.kind)))?;
        // A list's items carry no apiVersion and kind: each gets its kind's, as a get's has.
        Ok(list
            .items
            .into_iter()
            .map(|o| {
                let mut v = serde_json::to_value(o).unwrap_or_default();
                if let Some(obj) = v.as_object_mut() {
                    obj.entry("apiVersion").or_insert(kind.api_version().into());
                    obj.entry("kind").or_insert(kind.kind.into());
                }
                v
            })
            .collect())
    }

    /// Deletes the object and (in the background) what it owns; false if it did not exist.
    pub(crate) async fn delete(&self, ns: &str, kind: Kind, name: &str) -> Result<bool> {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..Default::default()
        };
        match self.api(ns, kind).await?.delete(name, &dp).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(self.err(format!("deleting {} {name}", kind.kind))(e)),
        }
    }

    /// Applies a JSON merge patch.
    pub(crate) async fn merge_patch(
        &self,
        ns: &str,
        kind: Kind,
        name: &str,
        patch: &Value,
    ) -> Result<()> {
        self.api(ns, kind)
            .await?
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map(|_| ())
            .map_err(self.err(format!("updating {} {name}", kind.kind)))
    }

    /// A pod's log as a byte stream (following it when `params.follow`); `None` while the pod
    /// does not exist or its container has not started (404 / 400 from the API server).
    pub(crate) async fn pod_log(
        &self,
        ns: &str,
        pod: &str,
        params: &LogParams,
    ) -> Result<Option<impl AsyncBufRead + Send + Unpin + use<>>> {
        let client = self.client().await?.clone();
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client, ns);
        match api.log_stream(pod, params).await {
            Ok(stream) => Ok(Some(Box::pin(stream))),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 400 => Ok(None),
            Err(e) => Err(self.err(format!("reading the log of pod {pod}"))(e)),
        }
    }
}

/// A Kubernetes quantity as a number (`3500m` → 3.5, `16Gi` → 17179869184, `2` → 2).
pub(crate) fn parse_quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let n: f64 = number.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024.0f64.powi(4),
        _ => return None,
    };
    Some(n * scale)
}
