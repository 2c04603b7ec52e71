//! Library registration for teams that build their own `torchx` binary: [`Extensions`] adds
//! schedulers, components, named resources and trackers **next to** the builtins (TorchX's
//! entry points replace the builtin schedulers and components; this never does), and
//! `torchx_cli::main` runs the standard CLI over them.
//!
//! ```no_run
//! use torchx::Extensions;
//! use torchx::specs::Resource;
//!
//! let ext = Extensions::builtin()
//!     .named_resource("trn1.2xl", Resource::new(8, 0, 32 * 1024))
//!     .scheduler("my_sched", "Our cluster", || todo!("Arc::new(MyScheduler::new())"));
//! // torchx_cli::main(ext);
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::components::Component;
use crate::config::TorchxConfig;
use crate::error::{Error, Result};
use crate::scheduler::{Registry, Scheduler};
use crate::specs::Resource;
use crate::tracker::{Tracker, TrackerRegistry};
use crate::Runner;

/// Schedulers, components, named resources and trackers of a torchx build.
#[derive(Debug, Clone)]
pub struct Extensions {
    schedulers: Registry,
    trackers: TrackerRegistry,
    components: Vec<Component>,
    named_resources: BTreeMap<String, Resource>,
    /// Registrations that would have replaced something: reported by [`Extensions::runner`].
    clashes: Vec<String>,
}

impl Default for Extensions {
    fn default() -> Self {
        Extensions::builtin()
    }
}

impl Extensions {
    /// The builtins of this build (and scheduler plugins on PATH).
    pub fn builtin() -> Extensions {
        Extensions {
            schedulers: Registry::builtin(),
            trackers: TrackerRegistry::builtin(),
            components: Vec::new(),
            named_resources: BTreeMap::new(),
            clashes: Vec::new(),
        }
    }

    fn clash(&mut self, what: &str, name: &str) {
        self.clashes.push(format!(
            "{what} `{name}` is already defined (builtin or registered twice); registrations add, \
             they never replace"
        ));
    }

    /// Adds scheduler `name`; `factory` runs on its first use (keep it cheap).
    pub fn scheduler(
        mut self,
        name: &str,
        description: &'static str,
        factory: impl Fn() -> Result<Arc<dyn Scheduler>> + Send + Sync + 'static,
    ) -> Extensions {
        if self
            .schedulers
            .register(name, description, factory)
            .is_err()
        {
            self.clash("scheduler", name);
        }
        self
    }

    /// Adds a component.
    pub fn component(mut self, component: Component) -> Extensions {
        let taken = crate::components::builtins()
            .iter()
            .chain(&self.components)
            .any(|c| c.name == component.name);
        if taken {
            let name = component.name.clone();
            self.clash("component", &name);
        } else {
            self.components.push(component);
        }
        self
    }

    /// Adds named resource `name` (usable as `-h name` / `resource=name`).
    pub fn named_resource(mut self, name: &str, resource: Resource) -> Extensions {
        let builtin = crate::specs::named_resource_names().any(|b| b == name);
        if builtin || self.named_resources.contains_key(name) {
            self.clash("named resource", name);
        } else {
            self.named_resources.insert(name.to_string(), resource);
        }
        self
    }

    /// Adds tracker `name`, built from its config string (`[tracker:<name>] config`).
    pub fn tracker(
        mut self,
        name: &str,
        factory: impl Fn(Option<&str>) -> Result<Box<dyn Tracker>> + Send + Sync + 'static,
    ) -> Extensions {
        if self.trackers.names().any(|n| n == name) {
            self.clash("tracker", name);
        } else {
            self.trackers.register(name, factory);
        }
        self
    }

    /// A runner over these extensions and `config`; a clashing registration is an error here.
    pub fn runner(&self, config: TorchxConfig) -> Result<Runner> {
        if !self.clashes.is_empty() {
            return Err(Error::config(self.clashes.join("; ")));
        }
        Ok(Runner::new(self.schedulers.clone(), config)
            .with_trackers(self.trackers.clone())
            .with_components(self.components.clone(), self.named_resources.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::components::{ComponentRef, Param, ParamDefault, ParamType};
    use crate::specs::{AppDef, Role};

    fn hello() -> Component {
        Component::new(
            "acme.hello",
            "Says hello",
            vec![Param::new(
                "who",
                ParamType::Str,
                ParamDefault::Value("world".into()),
                "whom",
            )],
            "acme",
            |args, env| {
                let role = Role::new("hello", "ghcr.io/acme/base")
                    .with_entrypoint("echo")
                    .with_args([format!("hello {}", args.str("who"))])
                    .with_resource(env.resource("acme.small")?);
                Ok(AppDef::new("hello", vec![role]))
            },
        )
    }

    #[tokio::test]
    async fn registrations_sit_next_to_the_builtins() {
        let ext = Extensions::builtin()
            .component(hello())
            .named_resource("acme.small", Resource::new(2, 0, 4096))
            .tracker("acme", |_| Err(Error::config("unused")));
        let runner = ext.runner(TorchxConfig::default()).unwrap();
        let names: Vec<String> = runner
            .components()
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert!(
            names.contains(&"utils.echo".to_string()) && names.contains(&"acme.hello".to_string())
        );
        assert!(runner.registry().names().any(|n| n == "local_cwd"));
        assert!(runner.trackers().names().any(|n| n == "fsspec"));
        let Ok(ComponentRef::Component(c)) = runner.find_component("acme.hello") else {
            panic!("acme.hello not found")
        };
        assert_eq!(c.origin, "acme");
        let built = runner
            .build_component("acme.hello", &["--who".into(), "you".into()])
            .await;
        let app = match built {
            Ok(crate::runner::ComponentOutcome::Done(app)) => app,
            other => panic!("{other:?}"),
        };
        assert_eq!(app.roles[0].args, ["hello you"]);
        assert_eq!(app.roles[0].resource.mem_mb, 4096);
    }

    #[test]
    fn registrations_never_replace() {
        let ext = Extensions::builtin()
            .scheduler("local_cwd", "mine", || Err(Error::config("unused")))
            .named_resource("gpu.small", Resource::new(1, 1, 1))
            .component(Component::new("utils.echo", "", vec![], "x", |_, _| {
                Err(Error::config("unused"))
            }))
            .tracker("fsspec", |_| Err(Error::config("unused")));
        let e = ext.runner(TorchxConfig::default()).unwrap_err().to_string();
        for name in [
            "scheduler `local_cwd`",
            "named resource `gpu.small`",
            "component `utils.echo`",
            "tracker `fsspec`",
        ] {
            assert!(e.contains(name), "{name} in {e}");
        }
    }
}
