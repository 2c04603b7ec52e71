//! The scheduler registry: names → factories, constructed lazily on first use.

use std::sync::Arc;

use super::Scheduler;
use crate::error::{did_you_mean, Error, Result};

/// Builds a scheduler. Must be cheap: backend clients are created on first use, not here.
pub type SchedulerFactory = Arc<dyn Fn() -> Result<Arc<dyn Scheduler>> + Send + Sync>;

/// Registered schedulers, in order (the first is the default), and optionally the scheduler
/// plugins on PATH (`torchx-scheduler-<name>`), which never replace a registered name.
#[derive(Clone)]
pub struct Registry {
    entries: Vec<(String, &'static str, SchedulerFactory)>,
    path_plugins: bool,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.0))
            .finish()
    }
}

impl Registry {
    /// An empty registry (no PATH plugins either).
    pub fn empty() -> Registry {
        Registry {
            entries: Vec::new(),
            path_plugins: false,
        }
    }

    /// The builtin schedulers compiled into this build, plus the scheduler plugins on PATH.
    pub fn builtin() -> Registry {
        let mut r = Registry::empty().with_path_plugins(true);
        r.register(
            crate::schedulers::local_cwd::NAME,
            "Runs replicas as local processes in the current directory",
            crate::schedulers::local_cwd::create,
        );
        #[cfg(feature = "docker")]
        r.register(
            crate::schedulers::local_docker::NAME,
            "Runs each replica as a container on the local Docker engine",
            crate::schedulers::local_docker::create,
        );
        r.register(
            crate::schedulers::slurm::NAME,
            "Submits heterogeneous sbatch jobs to a Slurm cluster",
            crate::schedulers::slurm::create,
        );
        r.register(
            crate::schedulers::lsf::NAME,
            "Submits one LSF job per replica, each running its container with docker",
            crate::schedulers::lsf::create,
        );
        #[cfg(feature = "kubernetes")]
        r.register(
            crate::schedulers::kubernetes::NAME,
            "Runs an app as Kubernetes Indexed Jobs (or a Volcano Job) on a cluster",
            crate::schedulers::kubernetes::create,
        );
        #[cfg(feature = "kubernetes")]
        r.register(
            crate::schedulers::kubernetes_mcad::NAME,
            "Runs an app as an MCAD AppWrapper on a Kubernetes cluster",
            crate::schedulers::kubernetes_mcad::create,
        );
        #[cfg(feature = "aws")]
        r.register(
            crate::schedulers::aws_batch::NAME,
            "Runs an app as an AWS Batch multi-node parallel job",
            crate::schedulers::aws_batch::create,
        );
        #[cfg(feature = "aws")]
        r.register(
            crate::schedulers::aws_sagemaker::NAME,
            "Runs a one-role app as an AWS SageMaker training job",
            crate::schedulers::aws_sagemaker::create,
        );
        r
    }

    /// Whether `torchx-scheduler-<name>` programs on PATH serve names not registered here.
    pub fn with_path_plugins(mut self, enabled: bool) -> Registry {
        self.path_plugins = enabled;
        self
    }

    /// Adds (or replaces) a scheduler; `factory` runs on the scheduler's first use.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        description: &'static str,
        factory: impl Fn() -> Result<Arc<dyn Scheduler>> + Send + Sync + 'static,
    ) {
        let name = name.into();
        let factory: SchedulerFactory = Arc::new(factory);
        if let Some(e) = self.entries.iter_mut().find(|e| e.0 == name) {
            *e = (name, description, factory);
        } else {
            self.entries.push((name, description, factory));
        }
    }

    /// Registered names in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.0.as_str())
    }

    /// Registered names, then the names of PATH plugins that no registered scheduler shadows
    /// (this reads the PATH directories).
    pub fn all_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.names().map(String::from).collect();
        if self.path_plugins {
            let python = crate::components::entry_point_names("torchx.schedulers");
            for name in crate::schedulers::plugin::all()
                .into_iter()
                .map(|p| p.0)
                .chain(python)
            {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// The one-line description of a scheduler.
    pub fn description(&self, name: &str) -> Option<&'static str> {
        self.entries.iter().find(|e| e.0 == name).map(|e| e.1)
    }

    /// The default scheduler (the first registered).
    pub fn default_name(&self) -> Option<&str> {
        self.names().next()
    }

    /// Builds the scheduler `name`.
    pub fn create(&self, name: &str) -> Result<Arc<dyn Scheduler>> {
        if let Some(e) = self.entries.iter().find(|e| e.0 == name) {
            return (e.2)();
        }
        let plugin = self
            .path_plugins
            .then(|| crate::schedulers::plugin::find(name))
            .flatten();
        if let Some(path) = plugin {
            return Ok(Arc::new(
                crate::schedulers::plugin::PluginScheduler::connect(name, &path)?,
            ));
        }
        // A Python `Scheduler` of the `torchx.schedulers` entry points, hosted by its
        // interpreter over the same protocol.
        let hosted = self
            .path_plugins
            .then(|| crate::components::python_scheduler_host(name))
            .flatten();
        match hosted {
            Some((python, args)) => Ok(Arc::new(
                crate::schedulers::plugin::PluginScheduler::connect_with(name, &python, args)?,
            )),
            None => Err(self.unknown(name)),
        }
    }

    /// The error for an unknown scheduler name.
    pub fn unknown(&self, name: &str) -> Error {
        // A builtin this build left out (a slim `--no-default-features` build).
        const OPTIONAL: [(&str, &str); 5] = [
            ("local_docker", "docker"),
            ("kubernetes", "kubernetes"),
            ("kubernetes_mcad", "kubernetes"),
            ("aws_batch", "aws"),
            ("aws_sagemaker", "aws"),
        ];
        if let Some((_, feature)) = OPTIONAL.iter().find(|(n, _)| *n == name) {
            return Error::not_found(
                "scheduler",
                name,
                format!(": this torchx was built without it (cargo feature `{feature}`)"),
            );
        }
        let names = self.all_names();
        let plugins = if self.path_plugins {
            format!(
                " (or put a `{}{name}` program on PATH)",
                crate::schedulers::plugin::PREFIX
            )
        } else {
            String::new()
        };
        Error::not_found(
            "scheduler",
            name,
            format!(
                ".{} Use one of: {}{plugins}",
                did_you_mean(name, names.iter().map(String::as_str)),
                names.join(", ")
            ),
        )
    }
}
