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
                let mut env = ComponentEnv {
                    named_resources: self.named_resources()?,
                    ..ComponentEnv::from_process()
                };
                // The Python plugins' named resources only for a name nothing else defines:
                // asking them starts an interpreter, and most jobs name no resource at all.
                let app = match c.materialize(args, &defaults, &env) {
                    Err(e) if e.kind() == ErrorKind::NotFound => {
                        env.named_resources = self.named_resources_with_plugins()?;
                        c.materialize(args, &defaults, &env)
                    }
                    built => built,
                };
                match app? {
                    Some(app) => Ok(ComponentOutcome::Done(app)),
                    None => Ok(ComponentOutcome::Help(c.help(&defaults))),
                }
            }
            ComponentRef::Python(c) => {
                let defaults = self.component_defaults(component)?;
                match c.materialize(args, &defaults)? {
                    PythonOutcome::App(app) => Ok(ComponentOutcome::Done(app)),
                    PythonOutcome::Help(h) => Ok(ComponentOutcome::Help(h)),
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
