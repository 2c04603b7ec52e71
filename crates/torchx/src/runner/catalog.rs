//! What a Runner builds apps from: its components, named resources and config files. Building
//! may read component directories and start a Python interpreter (a Python component, the
//! plugins' named resources), so the Runner hands a `Catalog` to tokio's blocking pool.

use std::collections::BTreeMap;

use super::ComponentOutcome;
use crate::components::{
    all_components_with, find_component_with, Component, ComponentEnv, ComponentRef, PythonOutcome,
};
use crate::config::TorchxConfig;
use crate::error::{Error, ErrorKind, Result};
use crate::specs::{AppDef, Resource};

/// The components (registered ones; builtins and the config's directories are found on
/// demand), named resources and config files of a Runner.
#[derive(Debug, Clone, Default)]
pub(super) struct Catalog {
    pub(super) components: Vec<Component>,
    pub(super) named_resources: BTreeMap<String, Resource>,
    pub(super) config: TorchxConfig,
}

impl Catalog {
    /// Every component by name: builtins, registered ones, then those of the config's
    /// component directories.
    pub(super) fn components(&self) -> Result<Vec<Component>> {
        all_components_with(&self.components, &self.config.component_dirs())
    }

    /// What a component name refers to.
    pub(super) fn find_component(&self, name: &str) -> Result<ComponentRef> {
        find_component_with(name, &self.components, &self.config.component_dirs())
    }

    /// Named resources besides the builtins: registered ones and `[resource:<name>]` sections.
    pub(super) fn named_resources(&self) -> Result<BTreeMap<String, Resource>> {
        let mut all = self.named_resources.clone();
        for (name, r) in self.config.named_resources()? {
            if all.contains_key(&name) {
                return Err(Error::config(format!(
                    ".torchxconfig [resource:{name}]: `{name}` is already defined by this torchx build; \
                     pick another name"
                )));
            }
            all.insert(name, r);
        }
        Ok(all)
    }

    /// [`named_resources`](Self::named_resources) and those of the Python plugins, which add
    /// names and never replace one (as TorchX's registry, a builtin wins). A plugin that fails
    /// to load is a warning: only a component that names its resources fails, as not found.
    fn named_resources_with_plugins(&self) -> Result<BTreeMap<String, Resource>> {
        let mut all = self.named_resources()?;
        match crate::python::plugin_named_resources() {
            Ok(extra) => {
                for (name, r) in extra {
                    if !all.contains_key(&name) && crate::specs::named_resource(&name).is_err() {
                        all.insert(name, r);
                    }
                }
            }
            Err(e) => log::warn!("{e}"),
        }
        Ok(all)
    }

    /// [`build`](Self::build) for a builtin component when that needs neither a file nor an
    /// interpreter (no component directories or registered components to check its name
    /// against, no plugin named resource): `None` when it may. It takes microseconds, less than
    /// a hop to the blocking pool (which, for a resource only a plugin may define, repeats it).
    pub(super) fn build_in_memory(
        &self,
        component: &str,
        args: &[String],
    ) -> Option<Result<ComponentOutcome<AppDef>>> {
        if !self.components.is_empty() || !self.config.component_dirs().is_empty() {
            return None;
        }
        let c = crate::components::builtins()
            .into_iter()
            .find(|c| c.name == component)?;
        let built = self
            .component_defaults(component)
            .and_then(|defaults| materialize(&c, &defaults, args, self.named_resources()?));
        match built {
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            built => Some(built),
        }
    }

    /// Builds a component from command-line style arguments (applying `[component:<name>]`
    /// defaults), or returns its help. Blocks: reads files, may start an interpreter.
    pub(super) fn build(
        &self,
        component: &str,
        args: &[String],
    ) -> Result<ComponentOutcome<AppDef>> {
        match self.find_component(component)? {
            ComponentRef::AppFile(app) => {
                if args.iter().any(|a| a == "--help") {
                    return Ok(ComponentOutcome::Help(format!(
                        "{component} is an AppDef file; it takes no arguments.\n"
                    )));
                }
                if !args.is_empty() {
                    return Err(Error::arg(format!(
                        "`{component}` is an AppDef file and takes no arguments, got: {}",
                        args.join(" ")
                    )));
                }
                Ok(ComponentOutcome::Done(app))
            }
            ComponentRef::Component(c) => {
                let defaults = self.component_defaults(component)?;
                match materialize(&c, &defaults, args, self.named_resources()?) {
                    // The Python plugins' named resources only for a name nothing else
                    // defines: asking them starts an interpreter, and most jobs name none.
                    Err(e) if e.kind() == ErrorKind::NotFound => {
                        materialize(&c, &defaults, args, self.named_resources_with_plugins()?)
                    }
                    built => built,
                }
            }
            ComponentRef::Python(c) => {
                let defaults = self.component_defaults(component)?;
                match c.materialize(args, &defaults) {
                    Ok(PythonOutcome::App(app)) => Ok(ComponentOutcome::Done(app)),
                    Ok(PythonOutcome::Help(h)) => Ok(ComponentOutcome::Help(h)),
                    // A name that no plugin (or module) has may be a misspelt component of ours.
                    Err(e) if e.kind() == ErrorKind::NotFound && !component.contains(':') => {
                        let known = self.components()?;
                        Err(e.suggesting(component, known.iter().map(|c| c.name.as_str())))
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// `[component:<name>]` of the config files.
    fn component_defaults(&self, component: &str) -> Result<BTreeMap<String, String>> {
        Ok(self
            .config
            .component_defaults()?
            .remove(component)
            .unwrap_or_default())
    }
}

/// `c` from command-line style arguments and its `[component:<name>]` `defaults`, or its help.
/// Its only NotFound is a named resource `c` names that `named_resources` lacks.
fn materialize(
    c: &Component,
    defaults: &BTreeMap<String, String>,
    args: &[String],
    named_resources: BTreeMap<String, Resource>,
) -> Result<ComponentOutcome<AppDef>> {
    let env = ComponentEnv {
        named_resources,
        ..ComponentEnv::from_process()
    };
    Ok(match c.materialize(args, defaults, &env)? {
        Some(app) => ComponentOutcome::Done(app),
        None => ComponentOutcome::Help(c.help(defaults)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_builtin_builds_in_memory_only_when_nothing_needs_a_file_or_an_interpreter() {
        let catalog = Catalog::default();
        let built = catalog.build_in_memory("utils.echo", &args(&["--msg", "hi"]));
        let Some(Ok(ComponentOutcome::Done(app))) = built else {
            panic!("a builtin builds in memory: {built:?}")
        };
        assert_eq!(app.roles[0].args, ["hi"]);
        assert!(matches!(
            catalog.build_in_memory("utils.echo", &args(&["--help"])),
            Some(Ok(ComponentOutcome::Help(_)))
        ));
        // Bad arguments are the builtin's own error, found here too.
        assert!(matches!(
            catalog.build_in_memory("utils.echo", &args(&["--nope", "x"])),
            Some(Err(_))
        ));
        // A file, a Python component, or a host only a plugin may name: the blocking pool.
        assert!(catalog.build_in_memory("./c.yaml:c", &[]).is_none());
        assert!(catalog.build_in_memory("./c.py:f", &[]).is_none());
        assert!(catalog
            .build_in_memory(
                "dist.ddp",
                &args(&["-h", "plugin.host", "--script", "t.py"])
            )
            .is_none());
        // Component directories or registered components to check names against.
        let dir = tempfile::tempdir().unwrap();
        let ini = format!("[torchx:components]\ndirs = {}\n", dir.path().display());
        let path = dir.path().join(".torchxconfig");
        std::fs::write(&path, ini).unwrap();
        let with_dirs = Catalog {
            config: TorchxConfig::load(&[path]).unwrap(),
            ..Catalog::default()
        };
        assert!(with_dirs.build_in_memory("utils.echo", &[]).is_none());
        let registered = Catalog {
            components: crate::components::builtins()[..1].to_vec(),
            ..Catalog::default()
        };
        assert!(registered.build_in_memory("utils.echo", &[]).is_none());
    }
}
