//! The names Kubernetes objects carry: torchx's labels and annotations, what a name or a label
//! value may hold, and TorchX's normalisation of names into them.

use crate::error::{Error, Result};

/// TorchX version label.
pub(crate) const LABEL_VERSION: &str = "torchx.pytorch.org/version";
/// AppDef name label.
pub(crate) const LABEL_APP_NAME: &str = "torchx.pytorch.org/app-name";
/// Role index label.
pub(crate) const LABEL_ROLE_INDEX: &str = "torchx.pytorch.org/role-index";
/// Role name label.
pub(crate) const LABEL_ROLE_NAME: &str = "torchx.pytorch.org/role-name";
/// Replica id label (per pod; absent from Indexed Job templates).
pub(crate) const LABEL_REPLICA_ID: &str = "torchx.pytorch.org/replica-id";
/// `app.kubernetes.io/name` (the AppDef name).
pub(crate) const LABEL_KUBE_APP_NAME: &str = "app.kubernetes.io/name";
/// `app.kubernetes.io/managed-by` (torchx.pytorch.org).
pub(crate) const LABEL_ORGANIZATION: &str = "app.kubernetes.io/managed-by";
/// The unique app id: every pod, Job and Service of an app carries it.
pub(crate) const LABEL_UNIQUE_NAME: &str = "app.kubernetes.io/instance";
/// Set by the Job controller on each pod of an Indexed Job (Kubernetes ≥ 1.28).
pub(crate) const LABEL_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
/// Keeps the Istio sidecar out: it would keep pods from completing.
pub(crate) const ANNOTATION_ISTIO_SIDECAR: &str = "sidecar.istio.io/inject";
/// Node label that the `node.kubernetes.io/instance-type` capability selects.
pub(crate) const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// An env value starting with this becomes a `fieldRef` to the rest (TorchX).
pub(crate) const PLACEHOLDER_FIELD_PATH: &str = "[FIELD_PATH]";
/// Kubernetes reserves this much of a node; requests are the limits minus it (TorchX).
pub(crate) const RESERVED_MILLICPU: i64 = 100;
/// Memory reserved for the node, in MB.
pub(crate) const RESERVED_MEMMB: i64 = 1024;
/// In `job` mode, each pod learns its replica id from its completion index through this env
/// var, which the `replica_id` macro expands to (`$(VAR)` is expanded by the kubelet).
pub(crate) const ENV_REPLICA_ID: &str = "TORCHX_REPLICA_ID";
/// TorchX's `normalize_str`: drop one leading `-`, lowercase, keep `[a-z0-9-]`.
pub(crate) fn normalize_str(s: &str) -> String {
    // As TorchX 0.8: filter, then strip every leading `-` (0.7.0 dropped one before filtering,
    // which left names like `-job` for `_-job`).
    let kept: String = s
        .to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
        .collect();
    kept.trim_start_matches('-').to_string()
}

/// TorchX's `cleanup_str` (kubernetes_mcad): `normalize_str`, then no leading digits.
pub(crate) fn cleanup_str(s: &str) -> String {
    normalize_str(s)
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .to_string()
}

/// Checks a DNS-1123 label (names of pods, Services, hostnames): at most 63 characters of
/// `[a-z0-9-]`, starting and ending with an alphanumeric.
pub(crate) fn check_dns_label(what: &str, name: &str) -> Result<()> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && alnum(name.chars().next())
        && alnum(name.chars().last());
    if ok {
        Ok(())
    } else {
        Err(Error::spec(format!(
            "{what} `{name}` ({} characters) is not a valid Kubernetes name: at most 63 \
             characters of lowercase letters, digits and '-', starting and ending with a letter \
             or digit; shorten the app or role name",
            name.len()
        )))
    }
}

/// Checks a label value: at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both ends.
pub(crate) fn check_label_value(key: &str, value: &str) -> Result<()> {
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let ok = value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && alnum(value.chars().next())
            && alnum(value.chars().last()));
    if ok {
        Ok(())
    } else {
        Err(Error::spec(format!(
            "label {key}=`{value}` is not a valid Kubernetes label value: at most 63 characters \
             of letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
        )))
    }
}
