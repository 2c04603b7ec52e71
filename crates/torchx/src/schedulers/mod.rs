//! Builtin schedulers. Each has the same inner shape: `opts.rs` (typed run options),
//! `render.rs` (pure AppDef → native request), an I/O part, and state mapping.

pub(crate) mod attempt_timer;
#[cfg(feature = "aws")]
pub(crate) mod aws;
#[cfg(feature = "aws")]
pub(crate) mod aws_batch;
#[cfg(feature = "aws")]
pub(crate) mod aws_sagemaker;
pub(crate) mod command;
pub(crate) mod hang_watch;
#[cfg(test)]
mod hostile;
#[cfg(feature = "kubernetes")]
pub(crate) mod kubernetes;
#[cfg(feature = "kubernetes")]
pub(crate) mod kubernetes_mcad;
pub mod local_cwd;
#[cfg(feature = "docker")]
pub mod local_docker;
pub(crate) mod lsf;
pub(crate) mod plugin;
pub(crate) mod probe_cache;
pub mod slurm;

pub use plugin::PluginScheduler;

use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::error::{Error, Result, Subject};
use crate::scheduler::{
    Backend, LogLines, LogQuery, Registry, Replica, Scheduler, SchedulerSource,
};

impl Registry {
    /// The builtin schedulers compiled into this build, then the plugins: `torchx-scheduler-<name>`
    /// programs on PATH and Python `torchx.schedulers` entry points.
    pub fn builtin() -> Registry {
        let mut r = Registry::empty().with_source(Arc::new(Plugins));
        // Distinct builtin names: registering cannot fail.
        let mut add = |name, description, factory: fn() -> Result<Arc<dyn Scheduler>>| {
            let _ = r.register(name, description, factory);
        };
        add(
            local_cwd::NAME,
            "Runs replicas as local processes in the current directory",
            local_cwd::create,
        );
        #[cfg(feature = "docker")]
        add(
            local_docker::NAME,
            "Runs each replica as a container on the local Docker engine",
            local_docker::create,
        );
        add(
            slurm::NAME,
            "Submits heterogeneous sbatch jobs to a Slurm cluster",
            slurm::create,
        );
        add(
            lsf::NAME,
            "Submits one LSF job per replica, each running its container with docker",
            lsf::create,
        );
        #[cfg(feature = "kubernetes")]
        add(
            kubernetes::NAME,
            "Runs an app as Kubernetes Indexed Jobs (or a Volcano Job) on a cluster",
            kubernetes::create,
        );
        #[cfg(feature = "kubernetes")]
        add(
            kubernetes_mcad::NAME,
            "Runs an app as an MCAD AppWrapper on a Kubernetes cluster",
            kubernetes_mcad::create,
        );
        #[cfg(feature = "aws")]
        add(
            aws_batch::NAME,
            "Runs an app as an AWS Batch multi-node parallel job",
            aws_batch::create,
        );
        #[cfg(feature = "aws")]
        add(
            aws_sagemaker::NAME,
            "Runs a one-role app as an AWS SageMaker training job",
            aws_sagemaker::create,
        );
        r
    }
}

/// The plugins `Registry::builtin()` serves beyond its schedulers, and a clear error for a
/// builtin this build left out (a slim `--no-default-features` build).
struct Plugins;

impl SchedulerSource for Plugins {
    fn names(&self) -> Vec<String> {
        let python = crate::python::plugin_names("torchx.schedulers");
        plugin::all()
            .into_iter()
            .map(|p| p.0)
            .chain(python)
            .collect()
    }

    fn create(&self, name: &str) -> Option<Result<Arc<dyn Scheduler>>> {
        const OPTIONAL: [(&str, &str, bool); 5] = [
            ("local_docker", "docker", cfg!(feature = "docker")),
            ("kubernetes", "kubernetes", cfg!(feature = "kubernetes")),
            (
                "kubernetes_mcad",
                "kubernetes",
                cfg!(feature = "kubernetes"),
            ),
            ("aws_batch", "aws", cfg!(feature = "aws")),
            ("aws_sagemaker", "aws", cfg!(feature = "aws")),
        ];
        if let Some((_, feature, _)) = OPTIONAL.iter().find(|(n, _, built)| *n == name && !built) {
            return Some(Err(Error::not_found(
                "scheduler",
                name,
                format!(": this torchx was built without it (cargo feature `{feature}`)"),
            )));
        }
        if let Some(path) = plugin::find(name) {
            let connected = plugin::PluginScheduler::connect(name, &path);
            return Some(connected.map(|s| Arc::new(s) as Arc<dyn Scheduler>));
        }
        // A Python `Scheduler` of the `torchx.schedulers` entry points, hosted by its
        // interpreter over the same protocol.
        let (python, plugin) = crate::python::python_scheduler_host(name)?;
        match plugin::PluginScheduler::connect_python(name, &python, plugin) {
            Ok(s) => Some(Ok(Arc::new(s) as Arc<dyn Scheduler>)),
            // No namespace plugin has that name: the registry's unknown-scheduler error.
            Err(e) if e.is_not_found(Subject::Scheduler) => None,
            Err(e) => Some(Err(e)),
        }
    }

    fn hint(&self, name: &str) -> String {
        format!(" (or put a `{}{name}` program on PATH)", plugin::PREFIX)
    }
}

pub(crate) use crate::blocking::blocking;

/// [`blocking`] work of a backend whose operations are commands and SQLite (local_cwd, slurm,
/// lsf), given a clone of the backend (a cheap handle).
pub(crate) async fn off_executor<B: Backend + Clone, T: Send + 'static>(
    backend: &B,
    work: impl FnOnce(&B) -> Result<T> + Send + 'static,
) -> Result<T> {
    let backend = backend.clone();
    blocking(B::NAME, move || work(&backend)).await
}

/// A blocking opener of a replica's log.
pub(crate) type OpenLog<B> = fn(&B, Replica<'_>, &LogQuery) -> Result<Box<dyn LogLines>>;

/// [`off_executor`] for a backend whose logs are files it finds with blocking calls, as
/// slurm's and lsf's.
pub(crate) async fn log_lines_off_executor<B: Backend + Clone>(
    backend: &B,
    replica: Replica<'_>,
    query: &LogQuery,
    open: OpenLog<B>,
) -> Result<Box<dyn LogLines>> {
    let (app_id, role, k) = (
        replica.app_id.to_string(),
        replica.role.to_string(),
        replica.k,
    );
    let query = query.clone();
    off_executor(backend, move |b| {
        let replica = Replica {
            app_id: &app_id,
            role: &role,
            k,
        };
        open(b, replica, &query)
    })
    .await
}

/// The per-user state directory of every scheduler that keeps records locally:
/// `$TORCHX_STATE_DIR`, else `$XDG_STATE_HOME/torchx`, else `~/.local/state/torchx`.
pub fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("TORCHX_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("torchx");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(h) => PathBuf::from(h).join(".local/state/torchx"),
        None => std::env::temp_dir().join(format!("torchx-{}", crate::sys::uid())),
    }
}

/// Creates `dir` (and parents) with owner-only permissions.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))
}

/// Writes `bytes` to `path`, a file only its owner can read or write from its first byte on
/// (what carries a job's environment, credentials or a token: batch scripts, the dashboard's
/// page). A file that was there is replaced, whatever its permissions were.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io("replacing", e)),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| io("writing", e))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    /// A private file is its owner's alone from its first byte, even where a readable one was.
    #[test]
    fn a_private_file_replaces_a_readable_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("script.sh");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        super::write_private_file(&path, b"export TOKEN=secret\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "export TOKEN=secret\n"
        );
    }
}
