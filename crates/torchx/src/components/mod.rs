//! Components: functions from command-line style arguments to an [`AppDef`].
//!
//! A component declares typed parameters; [`Component::parse_args`] handles TorchX's argument
//! conventions (every parameter is `--name` with `-x` for one-letter names, `-h` is an ordinary
//! parameter and only `--help` asks for help, bools take a value, varargs follow the first
//! positional or `--`), and [`Component::help`] is generated from the declarations.
//!
//! Architecture invariant: no I/O here except [`find_component`] reading component files;
//! environment facts reach builders through [`ComponentEnv`].

mod args;
mod builtins;
mod dist;
mod file;
mod params;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{Error, ErrorKind, Result};
use crate::opts::{parse_kv, parse_list};
use crate::specs::{AppDef, Resource};

pub use crate::python::{PythonComponent, PythonOutcome};
pub use builtins::{builtin_names, replaced_by};
pub use dist::{parse_nnodes, Nnodes, DEBUG_FLAGS};
pub use file::{load_app_file, load_component_dir, load_file_component};

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `str`.
    Str,
    /// `int`.
    Int,
    /// `float`.
    Float,
    /// `bool` (given as a value: `--debug True`; a bare `--debug` means true).
    Bool,
    /// `List[str]`, comma-separated.
    List,
    /// `Dict[str, str]`, `K=V,K2=V2`.
    Dict,
    /// `*args`: everything after the first positional or `--`.
    VarArgs,
}

impl ParamType {
    fn name(self) -> &'static str {
        match self {
            ParamType::Str => "str",
            ParamType::Int => "int",
            ParamType::Float => "float",
            ParamType::Bool => "bool",
            ParamType::List => "list",
            ParamType::Dict => "dict",
            ParamType::VarArgs => "args",
        }
    }

    /// Parses a type name used in component files.
    pub fn parse(s: &str) -> Result<ParamType> {
        Ok(match s {
            "str" | "string" => ParamType::Str,
            "int" | "integer" => ParamType::Int,
            "float" => ParamType::Float,
            "bool" | "boolean" => ParamType::Bool,
            "list" => ParamType::List,
            "dict" => ParamType::Dict,
            "args" | "varargs" => ParamType::VarArgs,
            _ => {
                return Err(Error::arg(format!(
                    "unknown parameter type `{s}`, must be one of: str, int, float, bool, list, dict, args"
                )))
            }
        })
    }
}

/// A parameter's default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamDefault {
    /// Must be given.
    Required,
    /// Optional, absent by default.
    Absent,
    /// This value (in command-line form).
    Value(String),
}

/// A component parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    /// Its name (`--name`).
    pub name: String,
    /// Its type.
    pub ty: ParamType,
    /// Its default.
    pub default: ParamDefault,
    /// Its help text.
    pub help: String,
}

impl Param {
    /// A parameter `--name` of type `ty`.
    pub fn new(name: &str, ty: ParamType, default: ParamDefault, help: &str) -> Param {
        Param {
            name: name.into(),
            ty,
            default,
            help: help.into(),
        }
    }
}

/// A typed argument value.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A bool.
    Bool(bool),
    /// A list.
    List(Vec<String>),
    /// A map.
    Dict(crate::specs::Env),
}

impl ArgValue {
    /// The value as a string for templates.
    pub fn to_template_string(&self) -> String {
        match self {
            ArgValue::Str(s) => s.clone(),
            ArgValue::Int(i) => i.to_string(),
            ArgValue::Float(f) => format!("{f:?}"),
            ArgValue::Bool(b) => {
                if *b {
                    "True".into()
                } else {
                    "False".into()
                }
            }
            ArgValue::List(l) => l.join(","),
            ArgValue::Dict(d) => d
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }
}

/// Parsed, typed arguments of a component.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ComponentArgs {
    /// Parameter name → value (absent optionals are missing).
    pub values: BTreeMap<String, ArgValue>,
    /// `*args`.
    pub varargs: Vec<String>,
    /// The component's declared parameters and their types (set by the parser): reading a
    /// name it does not declare is a bug in the component, caught at once instead of reading
    /// as `""`/`0`/`false`.
    declared: BTreeMap<String, ParamType>,
}

impl ComponentArgs {
    /// Panics when `name` is not a declared parameter of one of the `types`: a misspelled name
    /// in a component's builder would otherwise read as empty and build a wrong job.
    fn check(&self, name: &str, types: &[ParamType]) {
        if self.declared.is_empty() {
            return; // built by hand, not by a component's parser
        }
        if !self.declared.get(name).is_some_and(|t| types.contains(t)) {
            panic!(
                "component bug: it reads parameter `{name}` as {types:?}, but declares {}",
                self.declared
                    .iter()
                    .map(|(n, t)| format!("{n}: {t:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    /// A string argument.
    pub fn opt_str(&self, name: &str) -> Option<&str> {
        self.check(name, &[ParamType::Str]);
        match self.values.get(name) {
            Some(ArgValue::Str(s)) => Some(s),
            _ => None,
        }
    }
    /// A required string argument (declared with a default or as required).
    pub fn str(&self, name: &str) -> &str {
        self.opt_str(name).unwrap_or_default()
    }
    /// An int argument.
    pub fn opt_int(&self, name: &str) -> Option<i64> {
        self.check(name, &[ParamType::Int]);
        match self.values.get(name) {
            Some(ArgValue::Int(i)) => Some(*i),
            _ => None,
        }
    }
    /// An int argument with a declared default.
    pub fn int(&self, name: &str) -> i64 {
        self.opt_int(name).unwrap_or_default()
    }
    /// A float argument.
    pub fn float(&self, name: &str) -> f64 {
        self.check(name, &[ParamType::Float, ParamType::Int]);
        match self.values.get(name) {
            Some(ArgValue::Float(f)) => *f,
            Some(ArgValue::Int(i)) => *i as f64,
            _ => 0.0,
        }
    }
    /// A bool argument.
    pub fn bool(&self, name: &str) -> bool {
        self.check(name, &[ParamType::Bool]);
        matches!(self.values.get(name), Some(ArgValue::Bool(true)))
    }
    /// A list argument.
    pub fn list(&self, name: &str) -> Option<&[String]> {
        self.check(name, &[ParamType::List]);
        match self.values.get(name) {
            Some(ArgValue::List(l)) => Some(l),
            _ => None,
        }
    }
    /// A map argument.
    pub fn dict(&self, name: &str) -> Option<&crate::specs::Env> {
        self.check(name, &[ParamType::Dict]);
        match self.values.get(name) {
            Some(ArgValue::Dict(d)) => Some(d),
            _ => None,
        }
    }
}

/// Facts from the environment that builders may use (gathered by the caller, keeping builders
/// pure).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ComponentEnv {
    /// `$LOGLEVEL`.
    pub loglevel: Option<String>,
    /// `$HOME`, for `~` in mounts.
    pub home: Option<String>,
    /// Named resources beside the builtins: `.torchxconfig`'s (`[resource:<name>]`) and the
    /// Python plugins', gathered by the runner.
    pub named_resources: BTreeMap<String, Resource>,
}

impl ComponentEnv {
    /// Reads the environment.
    pub fn from_process() -> ComponentEnv {
        ComponentEnv {
            loglevel: std::env::var("LOGLEVEL").ok(),
            home: std::env::var("HOME").ok(),
            named_resources: BTreeMap::new(),
        }
    }

    /// A named resource: one defined in config or by a plugin (`named_resources`), else a
    /// builtin. Pure: the runner gathered the plugins' resources beforehand.
    pub fn resource(&self, name: &str) -> Result<Resource> {
        match self.named_resources.get(name) {
            Some(r) => Ok(r.clone()),
            None => crate::specs::named_resource(name).map_err(|e| {
                if e.kind() != ErrorKind::NotFound || self.named_resources.is_empty() {
                    return e;
                }
                let defined: Vec<&str> = self.named_resources.keys().map(String::as_str).collect();
                Error::not_found(
                    "named resource",
                    name,
                    format!(
                        " (neither builtin nor defined in .torchxconfig, which defines: {})",
                        defined.join(", ")
                    ),
                )
            }),
        }
    }
}

type NativeBuild = fn(&ComponentArgs, &ComponentEnv) -> Result<AppDef>;

/// The builder of a component registered by a custom binary.
pub type ComponentBuilder =
    std::sync::Arc<dyn Fn(&ComponentArgs, &ComponentEnv) -> Result<AppDef> + Send + Sync>;

#[derive(Clone)]
enum Build {
    Native(NativeBuild),
    Registered(ComponentBuilder),
    Template(Box<serde_json::Value>),
}

impl std::fmt::Debug for Build {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Build::Native(_) => f.write_str("Native"),
            Build::Registered(_) => f.write_str("Registered"),
            Build::Template(t) => f.debug_tuple("Template").field(t).finish(),
        }
    }
}

/// A component: declared parameters plus a builder.
#[derive(Debug, Clone)]
pub struct Component {
    /// Its name (`utils.echo`, `path.yaml:name`).
    pub name: String,
    /// Its description (first line is the summary).
    pub description: String,
    /// Its parameters.
    pub params: Vec<Param>,
    /// Where it comes from (`builtin` or a file path).
    pub origin: String,
    build: Build,
}

/// Why parsing component arguments stopped.
#[derive(Debug)]
pub enum ParseOutcome {
    /// Arguments parsed.
    Args(ComponentArgs),
    /// `--help` was given.
    Help,
}

impl Component {
    fn native(name: &str, description: &str, params: Vec<Param>, build: NativeBuild) -> Component {
        Component {
            name: name.into(),
            description: description.into(),
            params,
            origin: "builtin".into(),
            build: Build::Native(build),
        }
    }

    /// A component built by `build` from its parsed arguments (for custom binaries; `origin`
    /// says where it comes from in `torchx builtins`, e.g. the crate's name).
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        params: Vec<Param>,
        origin: impl Into<String>,
        build: impl Fn(&ComponentArgs, &ComponentEnv) -> Result<AppDef> + Send + Sync + 'static,
    ) -> Component {
        Component {
            name: name.into(),
            description: description.into(),
            params,
            origin: origin.into(),
            build: Build::Registered(std::sync::Arc::new(build)),
        }
    }

    fn param(&self, flag: &str) -> Option<&Param> {
        self.params
            .iter()
            .find(|p| p.ty != ParamType::VarArgs && p.name == flag)
    }

    fn varargs(&self) -> Option<&Param> {
        self.params.iter().find(|p| p.ty == ParamType::VarArgs)
    }

    fn err(&self, msg: impl std::fmt::Display) -> Error {
        Error::arg(format!("component `{}`: {msg}", self.name))
    }

    /// Builds the AppDef.
    pub fn build(&self, args: &ComponentArgs, env: &ComponentEnv) -> Result<AppDef> {
        let app = match &self.build {
            Build::Native(f) => f(args, env)?,
            Build::Registered(f) => f(args, env)?,
            Build::Template(t) => file::instantiate(self, t, args, env)?,
        };
        Ok(app)
    }

    /// Parses `tokens` and builds; `Ok(None)` when `--help` was asked.
    pub fn materialize<S: AsRef<str>>(
        &self,
        tokens: &[S],
        defaults: &BTreeMap<String, String>,
        env: &ComponentEnv,
    ) -> Result<Option<AppDef>> {
        match self.parse_args(tokens, defaults)? {
            ParseOutcome::Help => Ok(None),
            ParseOutcome::Args(a) => self.build(&a, env).map(Some),
        }
    }

    /// The generated `--help` text.
    pub fn help(&self, defaults: &BTreeMap<String, String>) -> String {
        let mut usage = format!("usage: torchx run <run args...> {}", self.name);
        for p in &self.params {
            let meta = p.name.to_uppercase();
            let flag = if p.name.chars().count() == 1 {
                format!("-{}", p.name)
            } else {
                format!("--{}", p.name)
            };
            let item = match (p.ty, &p.default) {
                (ParamType::VarArgs, _) => format!(" ...{meta}"),
                (_, ParamDefault::Required) if !defaults.contains_key(&p.name) => {
                    format!(" {flag} {meta}")
                }
                _ => format!(" [{flag} {meta}]"),
            };
            usage.push_str(&item);
        }
        let mut out = format!("{usage}\n\n{}\n\narguments:\n", self.description.trim());
        for p in &self.params {
            let flags = match (p.ty, p.name.chars().count()) {
                (ParamType::VarArgs, _) => p.name.clone(),
                (_, 1) => format!("-{0} {1}, --{0} {1}", p.name, p.name.to_uppercase()),
                _ => format!("--{} {}", p.name, p.name.to_uppercase()),
            };
            let note = match (defaults.get(&p.name), &p.default) {
                (Some(d), _) => format!(" (default: {d}, from .torchxconfig)"),
                (None, ParamDefault::Required) => " (required)".into(),
                (None, ParamDefault::Absent) => " (default: None)".into(),
                (None, ParamDefault::Value(v)) => format!(" (default: {v})"),
            };
            let _ = writeln!(out, "  {flags:<28} {}{note} [{}]", p.help, p.ty.name());
        }
        out
    }
}

/// The builtin components, sorted by name.
pub fn builtins() -> Vec<Component> {
    builtins::all()
}

/// What a component name on the command line refers to.
#[derive(Debug, Clone)]
pub enum ComponentRef {
    /// A builtin or file component.
    Component(Component),
    /// A declarative AppDef file (`./app.yaml`, `./app.json`).
    AppFile(AppDef),
    /// A function in a Python file (`./my_component.py:train`), evaluated by Python.
    Python(PythonComponent),
}

/// Finds a component: `path:name` is a component in a YAML/TOML file, a `.yaml`/`.yml`/`.json`
/// path is an AppDef file, anything else a builtin.
pub fn find_component(name: &str) -> Result<ComponentRef> {
    find_component_in(name, &[])
}

/// The builtins followed by the components of the search-path `dirs`. A directory component
/// may not take a builtin's name or another directory component's (never a silent shadow).
pub fn all_components(dirs: &[std::path::PathBuf]) -> Result<Vec<Component>> {
    all_components_with(&[], dirs)
}

/// The builtins, then `registered` (by a custom binary), then the components of `dirs`. No
/// name may be taken twice (never a silent shadow).
pub fn all_components_with(
    registered: &[Component],
    dirs: &[std::path::PathBuf],
) -> Result<Vec<Component>> {
    let mut all = builtins();
    let from_dirs = dirs
        .iter()
        .map(|d| load_component_dir(d))
        .collect::<Result<Vec<_>>>()?;
    for group in std::iter::once(registered.to_vec()).chain(from_dirs) {
        for c in group {
            if let Some(first) = all.iter().find(|b| b.name == c.name) {
                return Err(Error::config(format!(
                    "component `{}` in {} clashes with the one from {}; rename one",
                    c.name, c.origin, first.origin
                )));
            }
            all.push(c);
        }
    }
    Ok(all)
}

/// [`find_component`] with a component search path: bare names are looked up among the
/// builtins and then the components of `dirs`.
pub fn find_component_in(name: &str, dirs: &[std::path::PathBuf]) -> Result<ComponentRef> {
    find_component_with(name, &[], dirs)
}

/// [`find_component_in`] with components `registered` by a custom binary.
pub fn find_component_with(
    name: &str,
    registered: &[Component],
    dirs: &[std::path::PathBuf],
) -> Result<ComponentRef> {
    if let Some(python) = PythonComponent::parse(name) {
        return Ok(ComponentRef::Python(python));
    }
    if let Some((path, func)) = name.rsplit_once(':') {
        return load_file_component(path, func, name).map(ComponentRef::Component);
    }
    if [".yaml", ".yml", ".json"].iter().any(|e| name.ends_with(e)) {
        return load_app_file(name).map(ComponentRef::AppFile);
    }
    let all = all_components_with(registered, dirs)?;
    if let Some(c) = all.iter().find(|c| c.name == name) {
        return Ok(ComponentRef::Component(c.clone()));
    }
    // Python plugins come after every builtin and registration, so they cannot shadow one;
    // nor can a function by module path (`pkg.module.fn`, the nightly's), which may not use a
    // builtin's namespace (`utils.ehco` stays a typo with suggestions).
    let module_function = crate::python::is_module_function(name)
        && name.split_once('.').is_some_and(|(namespace, _)| {
            !all.iter()
                .any(|c| c.name.split_once('.').is_some_and(|(n, _)| n == namespace))
        });
    if module_function || crate::python::plugins_declared("torchx.components") {
        return Ok(ComponentRef::Python(PythonComponent::entry_point(name)));
    }
    Err(Error::not_found(
        "component",
        name,
        ". Run `torchx builtins` for the available components, or name a file: `./app.yaml` (an \
         AppDef) or `path.toml:name` / `path.yaml:name` (a parameterised component)",
    )
    .suggesting(name, all.iter().map(|c| c.name.as_str())))
}

#[cfg(test)]
mod tests;

/// A builtin component's AppDef from its CLI arguments (for scheduler tests).
#[cfg(test)]
pub(crate) fn test_app(name: &str, args: &[&str]) -> AppDef {
    let Ok(ComponentRef::Component(c)) = find_component(name) else {
        panic!("{name} is not a builtin component")
    };
    let env = ComponentEnv {
        loglevel: None,
        home: None,
        named_resources: BTreeMap::new(),
    };
    match c.materialize(args, &BTreeMap::new(), &env) {
        Ok(Some(app)) => app,
        other => panic!("{name} {args:?}: {other:?}"),
    }
}
