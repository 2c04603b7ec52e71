//! The portable job spec: [`AppDef`], [`Role`], [`Resource`] and friends.
//!
//! Architecture invariant: nothing in this module does I/O. Parsing and validation are pure.

mod after;
pub(crate) mod group;
mod handle;
mod macros;
mod mounts;
#[cfg(feature = "kubernetes")]
pub(crate) mod overlay;
pub(crate) mod pipeline;
mod recovery;
mod resource;
mod status;
mod time;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub use after::{Condition, Dependency, Verdict};
pub use handle::{make_app_handle, parse_app_handle, AppHandle, GROUP_MARK};
pub use macros::{substitute, MacroValues};
pub use mounts::{parse_mounts, parse_mounts_detailed, Mount, MountError};
pub use recovery::{
    default_checkpoint_signal, format_duration, parse_duration, CheckpointSignal, Recovery, Signal,
    DEFAULT_CHECKPOINT_SIGNAL, DEFAULT_MAX_REQUEUES, DEFAULT_REQUEUE_EXIT_CODE, RECOVERY_KEYS,
    TORCHRUN_SIGNALS_ENV,
};
pub use resource::{named_resource, named_resource_names, resource, Resource, GIB};
pub use status::{
    handle_keys, run_json, sort_newest_first, wrap_error_message, AppState, AppStatus, Attempt,
    DescribeAppResponse, EndReason, ListAppResponse, ReplicaStatus, RoleStatus, Stream,
};
pub use time::{format_time, format_utc, local_time_zone};

/// TorchX's marker for a value that was never set (`"<MISSING>"`).
pub const MISSING: &str = "<MISSING>";
/// TorchX's marker for "no value" (`"<NONE>"`).
pub const NONE: &str = "<NONE>";

/// The default container image of builtin components.
pub const DEFAULT_IMAGE: &str = "ghcr.io/pytorch/torchx:0.7.0";

/// What to restart when a replica fails and retries remain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum RetryPolicy {
    /// Restart only the failed replica.
    Replica,
    /// Restart every replica of the application (the default).
    #[default]
    Application,
    /// Restart every replica of the failed replica's role.
    Role,
}

impl RetryPolicy {
    /// The policy's canonical name.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryPolicy::Replica => "REPLICA",
            RetryPolicy::Application => "APPLICATION",
            RetryPolicy::Role => "ROLE",
        }
    }
}

impl std::str::FromStr for RetryPolicy {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_uppercase().as_str() {
            "REPLICA" => Ok(RetryPolicy::Replica),
            "APPLICATION" => Ok(RetryPolicy::Application),
            "ROLE" => Ok(RetryPolicy::Role),
            _ => Err(Error::arg(format!(
                "invalid retry policy `{s}`, must be one of: REPLICA, APPLICATION, ROLE"
            ))),
        }
    }
}

/// A role's environment variables, in insertion order.
pub type Env = indexmap::IndexMap<String, String>;

/// Local directories shipped with a role: local path → sub-directory of the remote root
/// (empty = the root itself).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workspace {
    /// Local path → remote sub-directory.
    pub projects: BTreeMap<String, String>,
}

impl Workspace {
    /// Parses TorchX's workspace string: a single path, or a `src:dst;src2` list / YAML mapping.
    pub fn parse(s: &str) -> Result<Workspace> {
        let s = s.trim();
        if s.is_empty() {
            return Err(Error::arg("workspace must not be empty"));
        }
        let mut projects = BTreeMap::new();
        if s.starts_with('{') {
            let map: BTreeMap<String, Option<String>> = serde_norway::from_str(s)
                .map_err(|e| Error::arg(format!("invalid workspace mapping `{s}`: {e}")))?;
            for (k, v) in map {
                projects.insert(local_path(&k)?.to_string(), v.unwrap_or_default());
            }
        } else {
            for part in s.split(';').filter(|p| !p.is_empty()) {
                let part = local_path(part)?;
                match part.split_once(':') {
                    Some((src, dst)) => projects.insert(src.to_string(), dst.to_string()),
                    None => projects.insert(part.to_string(), String::new()),
                };
            }
        }
        Ok(Workspace { projects })
    }

    /// True when this is a single project copied to the remote root.
    pub fn is_unmapped_single_project(&self) -> bool {
        self.projects.len() == 1 && self.projects.values().all(String::is_empty)
    }
}

/// An image a run builds from a workspace before it submits the job: planned by the dry run
/// (which builds nothing), built (and pushed) by `Runner::schedule`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkspaceImage {
    /// The roles that run it.
    pub roles: Vec<String>,
    /// The roles' own image, which the workspace is built on top of.
    pub base_image: String,
    /// What is built into it.
    pub workspace: Workspace,
    /// Its name: `torchx-workspace:<content hash>`, or `<image_repo>:<content hash>` when pushed.
    pub image: String,
    /// Whether it is pushed to the registry its name starts with.
    pub push: bool,
}

/// A workspace project's local path: TorchX's `file://` URLs name local directories; other
/// fsspec filesystems are not supported.
fn local_path(project: &str) -> Result<&str> {
    if let Some(path) = project.strip_prefix("file://") {
        return Ok(path);
    }
    match project.split_once("://") {
        Some((scheme, _)) if !scheme.contains(['/', ':']) => Err(Error::arg(format!(
            "workspace `{project}`: only local directories are supported (a path or a file:// \
             URL), not `{scheme}://`"
        ))),
        _ => Ok(project),
    }
}

impl fmt::Display for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .projects
            .iter()
            .map(|(k, v)| {
                if v.is_empty() {
                    k.clone()
                } else {
                    format!("{k}:{v}")
                }
            })
            .collect();
        f.write_str(&parts.join(";"))
    }
}

impl Serialize for Workspace {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Workspace {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Str(String),
            Map(BTreeMap<String, Option<String>>),
        }
        match Repr::deserialize(d)? {
            Repr::Str(s) => Workspace::parse(&s).map_err(serde::de::Error::custom),
            Repr::Map(m) => Ok(Workspace {
                projects: m
                    .into_iter()
                    .map(|(k, v)| (k, v.unwrap_or_default()))
                    .collect(),
            }),
        }
    }
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
fn default_replicas() -> u32 {
    1
}
fn is_one(v: &u32) -> bool {
    *v == 1
}
fn default_entrypoint() -> String {
    MISSING.to_string()
}

/// A set of identical replicas of one program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Role {
    /// The role's name, unique within the app.
    pub name: String,
    /// The image (container image, or directory for local schedulers).
    pub image: String,
    /// The program to run.
    #[serde(default = "default_entrypoint")]
    pub entrypoint: String,
    /// Its arguments (macros are substituted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment variables in the user's order (values have macros substituted): Kubernetes
    /// expands `$(VAR)` only from variables listed before.
    #[serde(default, skip_serializing_if = "Env::is_empty")]
    pub env: Env,
    /// How many replicas to run.
    #[serde(default = "default_replicas", skip_serializing_if = "is_one")]
    pub num_replicas: u32,
    /// The minimum replicas for elastic jobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<u32>,
    /// How many times to retry on failure.
    #[serde(default, skip_serializing_if = "is_default")]
    pub max_retries: u32,
    /// What a retry restarts.
    #[serde(default, skip_serializing_if = "is_default")]
    pub retry_policy: RetryPolicy,
    /// Resources per replica.
    #[serde(default = "Resource::null", skip_serializing_if = "Resource::is_null")]
    pub resource: Resource,
    /// Named ports.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub port_map: BTreeMap<String, u16>,
    /// Free-form metadata (string values have macros substituted).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, serde_json::Value>,
    /// Mounts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
    /// Local files to ship with this role (built into its image by workspace-aware schedulers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// Wall-clock seconds one attempt may run (`--time_limit 4h`; files may write `4h`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "recovery::deserialize_time_limit"
    )]
    pub time_limit: Option<u64>,
    /// The signal sent before the time limit (`USR1@90`, the default with a time limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_signal: Option<CheckpointSignal>,
    /// The exit code that asks for a requeue (default 75).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_exit_code: Option<i32>,
    /// Requeues allowed, which do not spend `max_retries` (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requeues: Option<u32>,
    /// Where `TORCHX_CHECKPOINT_DIR` points in every attempt. Container schedulers need it (a
    /// path in the container, on one of the role's mounts); local_cwd and slurm default to a
    /// directory next to the job's logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_dir: Option<String>,
    /// Seconds a replica may go without progress (a line on stdout or stderr, or a touch of
    /// `TORCHX_HEARTBEAT_FILE`) before it is hung: its stacks are captured and its attempt
    /// stopped (`--hang_timeout 10m`; files may write `10m`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "recovery::deserialize_hang_timeout"
    )]
    pub hang_timeout: Option<u64>,
}

impl Role {
    /// A role with defaults: entrypoint `<MISSING>`, 1 replica, no resource.
    pub fn new(name: impl Into<String>, image: impl Into<String>) -> Role {
        Role {
            name: name.into(),
            image: image.into(),
            entrypoint: MISSING.to_string(),
            args: Vec::new(),
            env: Env::new(),
            num_replicas: 1,
            min_replicas: None,
            max_retries: 0,
            retry_policy: RetryPolicy::default(),
            resource: Resource::null(),
            port_map: BTreeMap::new(),
            metadata: BTreeMap::new(),
            mounts: Vec::new(),
            workspace: None,
            time_limit: None,
            checkpoint_signal: None,
            requeue_exit_code: None,
            max_requeues: None,
            checkpoint_dir: None,
            hang_timeout: None,
        }
    }

    /// Sets the entrypoint.
    pub fn with_entrypoint(mut self, e: impl Into<String>) -> Role {
        self.entrypoint = e.into();
        self
    }

    /// Sets the arguments.
    pub fn with_args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Role {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the resource.
    pub fn with_resource(mut self, r: Resource) -> Role {
        self.resource = r;
        self
    }

    /// Sets the number of replicas.
    pub fn with_replicas(mut self, n: u32) -> Role {
        self.num_replicas = n;
        self
    }
}

/// An application: one or more roles launched together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppDef {
    /// The app's name (schedulers derive the app id from it).
    pub name: String,
    /// Its roles.
    #[serde(default)]
    pub roles: Vec<Role>,
    /// Free-form metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// The most roles an app may have.
pub const MAX_ROLES: usize = 1_000;
/// The most replicas a role, or a whole app, may have.
pub const MAX_REPLICAS: u32 = 100_000;
/// The longest app, role or session name, in bytes: they become file names (at most 255
/// bytes on Linux) with room for a unique suffix.
pub const MAX_NAME_LEN: usize = 200;

/// Checks that a user-given name (`what`: "role name", "app name", "session name") can be used
/// as one path component: not empty, not `.` or `..`, no `/` or NUL, at most [`MAX_NAME_LEN`]
/// bytes. Every scheduler that builds paths from names relies on this rule, checked before
/// anything is recorded.
pub fn check_path_component(what: &str, name: &str) -> Result<()> {
    let problem = if name.is_empty() {
        "is empty"
    } else if name == "." || name == ".." {
        "is a relative path"
    } else if name.contains('/') {
        "contains `/`"
    } else if name.contains('\0') {
        "contains a NUL byte"
    } else if name.len() > MAX_NAME_LEN {
        return Err(Error::spec(format!(
            "{what} `{}` is {} bytes long; at most {MAX_NAME_LEN} are allowed",
            crate::text::truncate(name, 40),
            name.len()
        )));
    } else {
        return Ok(());
    };
    Err(Error::spec(format!(
        "{what} `{}` {problem}: names become file and directory names, so they must be one \
         path component (not `.` or `..`, no `/`)",
        crate::text::truncate(name, 40).escape_debug()
    )))
}

impl AppDef {
    /// An app with the given name and roles.
    pub fn new(name: impl Into<String>, roles: Vec<Role>) -> AppDef {
        AppDef {
            name: name.into(),
            roles,
            metadata: BTreeMap::new(),
        }
    }

    /// Checks what every scheduler needs: a name, at least one role (at most [`MAX_ROLES`]),
    /// unique role names, an entrypoint and 1 to [`MAX_REPLICAS`] replicas per role (and at most
    /// [`MAX_REPLICAS`] in all), `min_replicas <= num_replicas`, resources that are either unset
    /// or not negative, and env names a process environment can hold. App and role names must
    /// be usable as one path component (see [`check_path_component`]), as schedulers build log
    /// and job paths from them.
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            return Err(Error::spec("app name must not be empty"));
        }
        check_path_component("app name", &self.name)?;
        if self.roles.is_empty() {
            return Err(Error::spec(format!(
                "No roles for app: {}. Did you forget to add roles to AppDef?",
                self.name
            )));
        }
        if self.roles.len() > MAX_ROLES {
            return Err(Error::spec(format!(
                "app `{}` has {} roles; at most {MAX_ROLES} are allowed",
                self.name,
                self.roles.len()
            )));
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut total: u64 = 0;
        for role in &self.roles {
            if role.name.trim().is_empty() {
                return Err(Error::spec(format!(
                    "app `{}` has a role with an empty name",
                    self.name
                )));
            }
            check_path_component("role name", &role.name)?;
            role.validate_recovery()?;
            if !seen.insert(role.name.as_str()) {
                return Err(Error::spec(format!(
                    "role name `{}` is used twice in app `{}`; role names must be unique",
                    role.name, self.name
                )));
            }
            if role.entrypoint.is_empty() || role.entrypoint == MISSING {
                return Err(Error::spec(format!(
                    "No entrypoint for role: {}",
                    role.name
                )));
            }
            if role.num_replicas == 0 {
                return Err(Error::spec(format!(
                    "Non-positive replicas for role: {}",
                    role.name
                )));
            }
            total += u64::from(role.num_replicas);
            if role.num_replicas > MAX_REPLICAS || total > u64::from(MAX_REPLICAS) {
                return Err(Error::spec(format!(
                    "role `{}`: num_replicas {} brings app `{}` to {total} replicas; at most \
                     {MAX_REPLICAS} are allowed",
                    role.name, role.num_replicas, self.name
                )));
            }
            if let Some(min) = role.min_replicas {
                if min > role.num_replicas {
                    return Err(Error::spec(format!(
                        "role `{}`: min_replicas ({min}) must not exceed num_replicas ({})",
                        role.name, role.num_replicas
                    )));
                }
            }
            role.resource
                .check()
                .map_err(|e| Error::spec(format!("role `{}`: {e}", role.name)))?;
            for key in role.env.keys() {
                if key.is_empty() || key.contains(['=', '\0']) {
                    return Err(Error::spec(format!(
                        "role `{}`: env name `{}` is not allowed: names must be non-empty and \
                         contain neither `=` nor NUL",
                        role.name,
                        key.escape_debug()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Parses an AppDef from YAML (JSON is YAML too).
    pub fn from_yaml(text: &str) -> Result<AppDef> {
        serde_norway::from_str(text).map_err(|e| Error::spec(format!("invalid AppDef: {e}")))
    }

    /// Parses an AppDef from JSON.
    pub fn from_json(text: &str) -> Result<AppDef> {
        serde_json::from_str(text).map_err(|e| Error::spec(format!("invalid AppDef: {e}")))
    }

    /// Serialises to YAML.
    pub fn to_yaml(&self) -> String {
        serde_norway::to_string(self).unwrap_or_default()
    }

    /// Serialises to pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo() -> AppDef {
        AppDef::new(
            "echo",
            vec![Role::new("echo", "img")
                .with_entrypoint("echo")
                .with_args(["hi"])],
        )
    }

    #[test]
    fn yaml_and_json_round_trip() {
        let mut app = echo();
        app.roles[0].mounts.push(Mount::Bind {
            src_path: "/a".into(),
            dst_path: "/b".into(),
            read_only: true,
        });
        app.roles[0].resource = Resource::new(1, 0, 1024);
        app.roles[0].workspace = Some(Workspace::parse("a:b;c").unwrap());
        assert_eq!(AppDef::from_yaml(&app.to_yaml()).unwrap(), app);
        assert_eq!(AppDef::from_json(&app.to_json()).unwrap(), app);
        insta::assert_snapshot!(app.to_yaml());
    }

    #[test]
    fn minimal_yaml_gets_defaults() {
        let app =
            AppDef::from_yaml("name: x\nroles:\n- {name: r, image: i, entrypoint: e}\n").unwrap();
        assert_eq!(app.roles[0].num_replicas, 1);
        assert_eq!(app.roles[0].resource, Resource::null());
        assert_eq!(app.roles[0].retry_policy, RetryPolicy::Application);
    }

    #[test]
    fn unknown_field_is_rejected_with_its_name() {
        let err = AppDef::from_yaml("name: x\nroles:\n- {name: r, image: i, entrypiont: e}\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `entrypiont`"), "{err}");
    }

    #[test]
    fn validation() {
        let mut app = echo();
        app.validate().unwrap();
        app.roles.push(app.roles[0].clone());
        assert!(app
            .validate()
            .unwrap_err()
            .to_string()
            .contains("used twice"));
        let mut app = echo();
        app.roles[0].entrypoint = MISSING.into();
        assert_eq!(
            app.validate().unwrap_err().to_string(),
            "No entrypoint for role: echo"
        );
        let app = AppDef::new("x", vec![]);
        assert_eq!(
            app.validate().unwrap_err().to_string(),
            "No roles for app: x. Did you forget to add roles to AppDef?"
        );
    }

    #[test]
    fn workspace_strings() {
        let w = Workspace::parse("/a").unwrap();
        assert!(w.is_unmapped_single_project());
        assert_eq!(w.to_string(), "/a");
        let w = Workspace::parse("a:x;b").unwrap();
        assert_eq!(w.to_string(), "a:x;b");
        let w = Workspace::parse("{a: x, b: null}").unwrap();
        assert_eq!(w.to_string(), "a:x;b");
        assert!(Workspace::parse("").is_err());
        // TorchX's default, `file://$PWD`, is a local path.
        assert_eq!(Workspace::parse("file:///a/b").unwrap().to_string(), "/a/b");
        assert_eq!(Workspace::parse("file:///a:x").unwrap().to_string(), "/a:x");
        let err = Workspace::parse("s3://bucket/dir").unwrap_err().to_string();
        assert!(err.contains("not `s3://`"), "{err}");
    }
}
