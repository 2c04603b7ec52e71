//! Declarative components: AppDef files (`./app.yaml`, `./app.json`) and parameterised
//! components in YAML or TOML files (`path.yaml:name`, `path.toml:name`).
//!
//! A parameterised component file maps names to `{description, params, app}`; `params` maps each
//! parameter to `{type, default, help}` (no `default` = required; YAML `default: null` or TOML
//! `optional = true` = absent unless given), and `app` is an AppDef whose strings may contain
//! `{{param}}` (a string exactly `{{param}}` keeps an int/float/bool type) and, as a whole list
//! element, `{{*args}}` to splice the varargs.

use serde_json::Value;

use super::{Build, Component, ComponentArgs, Param, ParamDefault, ParamType};
use crate::error::{Error, Result};
use crate::specs::AppDef;

fn read(path: &str) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::not_found(
                "file",
                path,
                ". For a list of available builtins run `torchx builtins`".to_string(),
            )
        } else {
            Error::io(format!("reading {path}"), e)
        }
    })
}

/// Reads an AppDef from a `.yaml`/`.yml`/`.json` file.
pub fn load_app_file(path: &str) -> Result<AppDef> {
    let text = read(path)?;
    let app = if path.ends_with(".json") {
        AppDef::from_json(&text)
    } else {
        AppDef::from_yaml(&text)
    };
    app.map_err(|e| Error::spec(format!("{path}: {e}")))
}

fn parse_doc(path: &str, text: &str) -> Result<Value> {
    if path.ends_with(".toml") {
        let v: toml::Value =
            toml::from_str(text).map_err(|e| Error::spec(format!("{path}: invalid TOML: {e}")))?;
        serde_json::to_value(v).map_err(|e| Error::spec(format!("{path}: {e}")))
    } else {
        serde_norway::from_str(text).map_err(|e| Error::spec(format!("{path}: invalid YAML: {e}")))
    }
}

/// Loads component `func` from the file at `path`.
pub fn load_file_component(path: &str, func: &str, full_name: &str) -> Result<Component> {
    if path.is_empty() || func.is_empty() {
        return Err(Error::arg(format!(
            "`{full_name}` is not of the form `path:name` (e.g. ./components.toml:train)"
        )));
    }
    if ![".toml", ".yaml", ".yml", ".json"]
        .iter()
        .any(|e| path.ends_with(e))
    {
        return Err(Error::arg(format!(
            "component file `{path}` must end in .py, .toml, .yaml, .yml or .json"
        )));
    }
    let doc = parse_doc(path, &read(path)?)?;
    let table = doc
        .as_object()
        .ok_or_else(|| Error::spec(format!("{path}: expected a mapping of component names")))?;
    let Some(def) = table.get(func) else {
        let names: Vec<&str> = table.keys().map(String::as_str).collect();
        return Err(Error::not_found(
            "component",
            full_name,
            format!(
                ": Function {func} does not exist in file {path}; it defines: {}",
                names.join(", ")
            ),
        ));
    };
    component_from_value(def, full_name, path)
}

/// Every component in the `.toml`/`.yaml`/`.yml` files of `dir` (a component search path
/// entry), named `<file stem>.<name>` as the builtins are (`utils.echo`), in file order.
pub fn load_component_dir(dir: &std::path::Path) -> Result<Vec<Component>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::config(format!(
            "component directory {} (from .torchxconfig [torchx:components] dirs): {e}",
            dir.display()
        ))
    })?;
    let mut files: Vec<std::path::PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "toml" || e == "yaml" || e == "yml")
        })
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let path = file.display().to_string();
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let doc = parse_doc(&path, &read(&path)?)?;
        let table = doc
            .as_object()
            .ok_or_else(|| Error::spec(format!("{path}: expected a mapping of component names")))?;
        for (name, def) in table {
            out.push(component_from_value(def, &format!("{stem}.{name}"), &path)?);
        }
    }
    Ok(out)
}

fn component_from_value(def: &Value, name: &str, path: &str) -> Result<Component> {
    let err = |m: String| Error::spec(format!("{path}: component `{name}`: {m}"));
    let obj = def.as_object().ok_or_else(|| {
        err("expected a mapping with `app` (and optional `params`, `description`)".into())
    })?;
    for key in obj.keys() {
        if !["description", "params", "app"].contains(&key.as_str()) {
            return Err(err(format!(
                "unknown key `{key}`, expected: description, params, app"
            )));
        }
    }
    let app = obj
        .get("app")
        .ok_or_else(|| err("missing `app`".into()))?
        .clone();
    let mut params = Vec::new();
    if let Some(ps) = obj.get("params") {
        let ps = ps
            .as_object()
            .ok_or_else(|| err("`params` must be a mapping".into()))?;
        for (pname, spec) in ps {
            let spec = spec
                .as_object()
                .ok_or_else(|| err(format!("parameter `{pname}` must be a mapping with `type`")))?;
            for key in spec.keys() {
                if !["type", "default", "help", "optional"].contains(&key.as_str()) {
                    return Err(err(format!("parameter `{pname}`: unknown key `{key}`, expected: type, default, help, optional")));
                }
            }
            let ty = ParamType::parse(spec.get("type").and_then(Value::as_str).unwrap_or("str"))
                .map_err(|e| err(format!("parameter `{pname}`: {e}")))?;
            let default = match spec.get("default") {
                None if spec.get("optional").and_then(Value::as_bool) == Some(true)
                    || ty == ParamType::VarArgs =>
                {
                    ParamDefault::Absent
                }
                None => ParamDefault::Required,
                Some(Value::Null) => ParamDefault::Absent,
                Some(Value::String(s)) => ParamDefault::Value(s.clone()),
                Some(Value::Bool(b)) => {
                    ParamDefault::Value(if *b { "True".into() } else { "False".into() })
                }
                Some(Value::Array(items)) => {
                    ParamDefault::Value(items.iter().map(scalar).collect::<Vec<_>>().join(","))
                }
                Some(Value::Object(map)) => ParamDefault::Value(
                    map.iter()
                        .map(|(k, v)| format!("{k}={}", scalar(v)))
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                Some(other) => ParamDefault::Value(other.to_string()),
            };
            let help = spec
                .get("help")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            params.push(Param {
                name: pname.clone(),
                ty,
                default,
                help,
            });
        }
    }
    let description = obj
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("(no description)")
        .to_string();
    let comp = Component {
        name: name.to_string(),
        description,
        params,
        origin: path.to_string(),
        build: Build::Template(Box::new(app)),
    };
    // Catch template mistakes (unknown {{names}}) at load time, not only when a value is missing.
    check_template(&comp, comp_template(&comp))?;
    Ok(comp)
}

fn comp_template(c: &Component) -> &Value {
    match &c.build {
        Build::Template(t) => t,
        Build::Native(_) | Build::Registered(_) => &Value::Null,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else { break };
        out.push(after[..end].trim());
        rest = &after[end + 2..];
    }
    out
}

fn check_template(c: &Component, v: &Value) -> Result<()> {
    match v {
        Value::String(s) => {
            for name in placeholders(s) {
                let name = name.trim_start_matches('*');
                if c.params.iter().all(|p| p.name != name) {
                    return Err(Error::spec(format!(
                        "{}: component `{}` uses `{{{{{name}}}}}` but declares no parameter `{name}`",
                        c.origin, c.name
                    )));
                }
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(|i| check_template(c, i)),
        Value::Object(map) => map.values().try_for_each(|i| check_template(c, i)),
        _ => Ok(()),
    }
}

pub(super) fn instantiate(
    c: &Component,
    template: &Value,
    args: &ComponentArgs,
    env: &super::ComponentEnv,
) -> Result<AppDef> {
    let mut value = fill(template, args, false);
    // `resource = "a100x4"` (or `"{{h}}"`): a named resource, builtin or from .torchxconfig.
    for role in value["roles"].as_array_mut().into_iter().flatten() {
        if let Some(name) = role["resource"].as_str() {
            let r = env
                .resource(name)
                .map_err(|e| Error::spec(format!("{}: component `{}`: {e}", c.origin, c.name)))?;
            role["resource"] =
                serde_json::to_value(r).map_err(|e| Error::spec(format!("{}: {e}", c.origin)))?;
        }
    }
    let app: AppDef = serde_json::from_value(value).map_err(|e| {
        Error::spec(format!(
            "{}: component `{}` produced an invalid AppDef: {e}",
            c.origin, c.name
        ))
    })?;
    Ok(app)
}

/// Substitutes the parameters into a template. A string that is exactly `{{param}}` keeps an
/// int/float/bool parameter's type (for `num_replicas`, `max_retries`, resources), except where
/// the AppDef holds text (`as_text`): list items (`args`, `mounts`) and the values of `env` and
/// `metadata`, which get the value as text, as TorchX's `str(...)` would.
fn fill(v: &Value, args: &ComponentArgs, as_text: bool) -> Value {
    match v {
        Value::String(s) => {
            let ph = placeholders(s);
            if !as_text && ph.len() == 1 && s.trim() == format!("{{{{{}}}}}", ph[0]) {
                return match args.values.get(ph[0]) {
                    Some(super::ArgValue::Int(i)) => Value::from(*i),
                    Some(super::ArgValue::Float(f)) => Value::from(*f),
                    Some(super::ArgValue::Bool(b)) => Value::from(*b),
                    Some(other) => Value::String(other.to_template_string()),
                    None => Value::Null,
                };
            }
            let mut out = s.clone();
            for name in ph {
                let val = args
                    .values
                    .get(name)
                    .map(|v| v.to_template_string())
                    .unwrap_or_default();
                out = out.replace(&format!("{{{{{name}}}}}",), &val);
            }
            Value::String(out)
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                if let Value::String(s) = item {
                    let ph = placeholders(s);
                    if ph.len() == 1
                        && ph[0].starts_with('*')
                        && s.trim() == format!("{{{{{}}}}}", ph[0])
                    {
                        out.extend(args.varargs.iter().cloned().map(Value::String));
                        continue;
                    }
                }
                // Strings in lists are text; objects in lists (roles) keep their own rules.
                out.push(fill(item, args, as_text || item.is_string()));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            let filled: serde_json::Map<String, Value> = map
                .iter()
                .map(|(k, v)| {
                    let text = as_text || k == "env" || k == "metadata";
                    (k.clone(), fill(v, args, text))
                })
                .filter(|(_, v)| !v.is_null())
                .collect();
            Value::Object(filled)
        }
        other => other.clone(),
    }
}
