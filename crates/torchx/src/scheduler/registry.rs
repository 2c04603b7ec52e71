//! The scheduler registry: names → factories, constructed lazily on first use.

use std::sync::Arc;

use super::Scheduler;
use crate::error::{Error, Result};

/// Builds a scheduler. Must be cheap: backend clients are created on first use, not here.
pub type SchedulerFactory = Arc<dyn Fn() -> Result<Arc<dyn Scheduler>> + Send + Sync>;

/// Schedulers found by name outside the registry (the plugins of `schedulers::plugin`), asked
/// only for names the registry does not hold.
pub trait SchedulerSource: Send + Sync {
    /// The names it serves (may read directories).
    fn names(&self) -> Vec<String>;
    /// The scheduler `name`, if it serves it.
    fn create(&self, name: &str) -> Option<Result<Arc<dyn Scheduler>>>;
    /// How a user would provide `name` (appended to the unknown-scheduler error).
    fn hint(&self, name: &str) -> String;
}

/// Registered schedulers, in order (the first is the default), and optionally a source of more
/// (the plugins), which never replaces a registered name. `Registry::builtin()` (in
/// `schedulers`) registers every backend compiled in.
#[derive(Clone)]
pub struct Registry {
    entries: Vec<(String, &'static str, SchedulerFactory)>,
    source: Option<Arc<dyn SchedulerSource>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.0))
            .finish()
    }
}

impl Registry {
    /// An empty registry (no plugins either).
    pub fn empty() -> Registry {
        Registry {
            entries: Vec::new(),
            source: None,
        }
    }

    /// Also serves the names `source` has and no registered scheduler shadows.
    pub fn with_source(mut self, source: Arc<dyn SchedulerSource>) -> Registry {
        self.source = Some(source);
        self
    }

    /// Adds a scheduler; `factory` runs on the scheduler's first use. A name already
    /// registered is refused ([`ErrorKind::AlreadyExists`](crate::error::ErrorKind)): a
    /// registration never silently replaces another.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        description: &'static str,
        factory: impl Fn() -> Result<Arc<dyn Scheduler>> + Send + Sync + 'static,
    ) -> Result<()> {
        let name = name.into();
        if self.entries.iter().any(|e| e.0 == name) {
            return Err(Error::already_exists(
                name.clone(),
                format!("a scheduler named `{name}` is already registered"),
            ));
        }
        self.entries.push((name, description, Arc::new(factory)));
        Ok(())
    }

    /// Registered names in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.0.as_str())
    }

    /// Registered names, then the names of the source's schedulers that no registered one
    /// shadows (this may read the PATH directories).
    pub fn all_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.names().map(String::from).collect();
        for name in self.source.iter().flat_map(|s| s.names()) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// The one-line description of a scheduler.
    pub fn description(&self, name: &str) -> Option<&'static str> {
        self.entries.iter().find(|e| e.0 == name).map(|e| e.1)
    }

    /// Whether `name` is registered (not a plugin's).
    pub fn is_registered(&self, name: &str) -> bool {
        self.entries.iter().any(|e| e.0 == name)
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
        match self.source.as_ref().and_then(|s| s.create(name)) {
            Some(created) => created,
            None => Err(self.unknown(name)),
        }
    }

    /// The error for an unknown scheduler name.
    pub fn unknown(&self, name: &str) -> Error {
        let names = self.all_names();
        let plugins = self
            .source
            .as_ref()
            .map(|s| s.hint(name))
            .unwrap_or_default();
        Error::not_found(
            "scheduler",
            name,
            format!(". Use one of: {}{plugins}", names.join(", ")),
        )
        .suggesting(name, names.iter().map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn a_name_is_registered_once() {
        let mut r = Registry::empty();
        let unavailable = || Err(Error::backend("x", "not here"));
        r.register("x", "first", unavailable).unwrap();
        let err = r.register("x", "second", unavailable).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::AlreadyExists);
        assert_eq!(
            err.to_string(),
            "x: a scheduler named `x` is already registered"
        );
        assert_eq!(r.names().collect::<Vec<_>>(), ["x"]);
    }
}
