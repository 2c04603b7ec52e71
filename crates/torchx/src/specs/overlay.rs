//! Overlays (TorchX 0.8's `torchx.specs.overlays`): partial scheduler-native objects kept in a
//! role's (or the app's) metadata, merged into what a scheduler renders. The Kubernetes and MCAD
//! renders merge `metadata["kubernetes"]`'s `V1Pod` overlay into each pod.
//!
//! Merging: objects merge recursively, arrays append, other values replace. Operator keys
//! change that for one field: `__put__:<field>` replaces it whole, `__join__:<field>:<on>` merges
//! an array of objects item by item on their `<on>` field, `__del__:<field>` removes it. (Python
//! tuples replace a list; they reach the core as `__put__:` keys, and YAML's `!!python/tuple`
//! does the same here.) The Python module `torchx.specs.overlays` applies the same rules to
//! Python values; `python/tests/test_overlays.py` checks that both agree.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Marks a metadata namespace as holding overlays by kind.
pub(crate) const FORMAT_KEY: &str = "__torchx_overlays__";
const PUT: &str = "__put__:";
const JOIN: &str = "__join__:";
const DEL: &str = "__del__:";

/// The field an (operator) key names.
fn field_of(key: &str) -> &str {
    if let Some(f) = key.strip_prefix(PUT).or_else(|| key.strip_prefix(DEL)) {
        return f;
    }
    match key.strip_prefix(JOIN) {
        Some(rest) => rest.split_once(':').map_or(rest, |(f, _)| f),
        None => key,
    }
}

fn drop_field(base: &mut Map<String, Value>, field: &str, keep_plain: bool) {
    base.retain(|k, _| field_of(k) != field || (keep_plain && k == field));
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn join(base: &mut Map<String, Value>, key: &str, value: &Value, field: &str) -> Result<()> {
    drop_field(base, field, true);
    let on = match key[JOIN.len()..].split_once(':') {
        Some((_, on)) if !on.is_empty() => on,
        _ => {
            return Err(Error::spec(format!(
                "malformed JOIN key: `{key}`, expected format from JOIN(field, on=key)"
            )))
        }
    };
    let Value::Array(items) = value else {
        return Err(Error::spec(format!(
            "JOIN requires a list value, got {} for field `{field}`",
            kind_name(value)
        )));
    };
    if !items.iter().all(Value::is_object) {
        return Err(Error::spec(format!(
            "JOIN requires a list of dicts as overlay value, but `{field}` overlay contains non-dict items"
        )));
    }
    let existing = match base.get_mut(field) {
        None => {
            base.insert(field.to_string(), value.clone());
            return Ok(());
        }
        Some(Value::Array(existing)) if existing.iter().all(Value::is_object) => existing,
        Some(Value::Array(_)) => {
            return Err(Error::spec(format!(
                "JOIN requires a list of dicts, but `{field}` contains non-dict items"
            )))
        }
        Some(other) => {
            return Err(Error::spec(format!(
                "JOIN requires base[`{field}`] to be a list, got {}",
                kind_name(other)
            )))
        }
    };
    for item in items {
        let slot = item.get(on).and_then(|want| {
            existing
                .iter()
                .position(|e| e.get(on).is_some_and(|v| v == want))
        });
        match (slot, item) {
            (Some(i), Value::Object(fields)) => {
                if let Some(Value::Object(target)) = existing.get_mut(i) {
                    for (k, v) in fields.iter().filter(|(k, _)| k.as_str() != on) {
                        target.insert(k.clone(), v.clone());
                    }
                }
            }
            _ => existing.push(item.clone()),
        }
    }
    Ok(())
}

fn merge(base: &mut Map<String, Value>, key: &str, value: &Value) -> Result<()> {
    let Some(current) = base.get_mut(key) else {
        base.insert(key.to_string(), value.clone());
        return Ok(());
    };
    match (current, value) {
        (Value::Object(current), Value::Object(value)) => apply(current, value),
        (Value::Array(current), Value::Array(value)) => {
            current.extend(value.iter().cloned());
            Ok(())
        }
        (current @ (Value::Object(_) | Value::Array(_)), value)
        | (current, value @ (Value::Object(_) | Value::Array(_))) => Err(Error::spec(format!(
            "type mismatch for attr: `{key}`. {} != {}",
            kind_name(current),
            kind_name(value)
        ))),
        (current, value) => {
            *current = value.clone();
            Ok(())
        }
    }
}

/// Merges `overlay` into `base` (see the module's rules). Errors name the field: a dict or list
/// meeting a value of another type, a `JOIN` of something that is not a list of dicts, a
/// malformed `JOIN` key.
pub(crate) fn apply(base: &mut Map<String, Value>, overlay: &Map<String, Value>) -> Result<()> {
    for (key, value) in overlay {
        let field = field_of(key).to_string();
        if key.starts_with(DEL) {
            drop_field(base, &field, false);
        } else if key.starts_with(PUT) {
            drop_field(base, &field, false);
            base.insert(field, value.clone());
        } else if key.starts_with(JOIN) {
            join(base, key, value, &field)?;
        } else {
            base.retain(|k, _| k == key || field_of(k) != field);
            merge(base, key, value)?;
        }
    }
    Ok(())
}

/// The `kind` overlay of `metadata[namespace]`: the nested format (`{FORMAT_KEY: true, kind:
/// {...}}`), a flat overlay (a namespace holding one overlay, as before 0.8), or a path or
/// `file://` URL of a JSON or YAML file holding either. `None` if there is none.
pub(crate) fn get(
    metadata: &Map<String, Value>,
    namespace: &str,
    kind: &str,
) -> Result<Option<Value>> {
    let loaded;
    let value = match metadata.get(namespace) {
        None => return Ok(None),
        Some(Value::String(uri)) => {
            loaded = load_file(namespace, uri)?;
            &loaded
        }
        Some(v) => v,
    };
    let Value::Object(ns) = value else {
        return Ok(None);
    };
    if let Some(found @ Value::Object(_)) = ns.get(kind) {
        return Ok(Some(found.clone()));
    }
    if ns
        .get(FORMAT_KEY)
        .is_some_and(|v| v != &Value::Bool(false) && !v.is_null())
    {
        return Ok(None);
    }
    let several_kinds = ns.len() > 1 && ns.values().all(Value::is_object);
    Ok((!ns.is_empty() && !several_kinds).then(|| value.clone()))
}

/// An overlay file: JSON, else YAML (a `!!python/tuple` sequence replaces: its key becomes a
/// `__put__:` key).
fn load_file(namespace: &str, uri: &str) -> Result<Value> {
    let path = match uri.split_once("://") {
        None => uri,
        Some(("file", path)) => path,
        Some((scheme, _)) => {
            return Err(Error::unsupported(
                "overlays",
                format!(
                    "metadata[\"{namespace}\"] = `{uri}`: this build reads overlay files from local paths and file:// URLs, not {scheme}://"
                ),
            ))
        }
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::io(
            format!("reading the overlay file of metadata[\"{namespace}\"]"),
            e,
        )
    })?;
    let value = match serde_json::from_str::<Value>(&text) {
        Ok(v) => v,
        Err(_) => serde_norway::from_str(&tuples_as_put(&text))
            .map_err(|e| Error::spec(format!("overlay file `{uri}`: {e}")))?,
    };
    if !value.is_object() {
        return Err(Error::spec(format!(
            "overlay file `{uri}` must contain a dict, got {}",
            kind_name(&value)
        )));
    }
    Ok(value)
}

/// `key: !!python/tuple` (block or flow sequence) as `"__put__:key":`: the YAML parser drops
/// that tag, and a tuple means "replace".
fn tuples_as_put(text: &str) -> String {
    static TUPLE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r#"(?m)^(\s*(?:-\s+)?)["']?([^\s"':#][^"':]*?)["']?\s*:\s*!!python/tuple\b"#,
        )
        .expect("valid regex")
    });
    TUPLE
        .replace_all(text, |c: &regex::Captures<'_>| {
            format!("{}\"{PUT}{}\":", &c[1], &c[2])
        })
        .into_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn applied(base: Value, overlay: Value) -> Result<Value> {
        let (Value::Object(mut b), Value::Object(o)) = (base, overlay) else {
            unreachable!("objects")
        };
        apply(&mut b, &o)?;
        Ok(Value::Object(b))
    }

    #[test]
    fn merge_rules_and_operators() {
        let base = json!({"spec": {"nodeSelector": {"a": "1"}, "tolerations": [{"key": "x"}],
            "volumes": [{"name": "v0"}], "containers": [{"name": "c", "image": "i"}], "drop": 1}});
        let overlay = json!({"spec": {"nodeSelector": {"b": "2"}, "tolerations": [{"key": "y"}],
            "__put__:volumes": [{"name": "v1"}], "__del__:drop": null,
            "__join__:containers:name": [{"name": "c", "image": "j"}, {"name": "d"}]}});
        assert_eq!(
            applied(base, overlay).unwrap(),
            json!({"spec": {"nodeSelector": {"a": "1", "b": "2"},
                "tolerations": [{"key": "x"}, {"key": "y"}], "volumes": [{"name": "v1"}],
                "containers": [{"name": "c", "image": "j"}, {"name": "d"}]}})
        );
    }

    #[test]
    fn bad_overlays_are_errors_naming_the_field() {
        let err = applied(json!({"a": {"b": 1}}), json!({"a": [1]})).unwrap_err();
        assert!(
            err.to_string()
                .contains("type mismatch for attr: `a`. dict != list"),
            "{err}"
        );
        let err = applied(json!({}), json!({"__join__:a:name": [1]})).unwrap_err();
        assert!(err.to_string().contains("non-dict items"), "{err}");
        let err = applied(json!({}), json!({"__join__:a": []})).unwrap_err();
        assert!(err.to_string().contains("malformed JOIN key"), "{err}");
    }

    #[test]
    fn nested_flat_and_file_overlays() {
        let nested = json!({"kubernetes": {FORMAT_KEY: true, "V1Pod": {"spec": {}}}});
        let m = nested.as_object().unwrap();
        assert_eq!(
            get(m, "kubernetes", "V1Pod").unwrap(),
            Some(json!({"spec": {}}))
        );
        assert_eq!(get(m, "kubernetes", "Other").unwrap(), None);
        let flat = json!({"kubernetes": {"spec": {"x": 1}}});
        assert_eq!(
            get(flat.as_object().unwrap(), "kubernetes", "V1Pod").unwrap(),
            Some(json!({"spec": {"x": 1}}))
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("o.yaml");
        std::fs::write(&file, "spec:\n  volumes: !!python/tuple\n    - name: v\n").unwrap();
        let uri = json!({"kubernetes": format!("file://{}", file.display())});
        assert_eq!(
            get(uri.as_object().unwrap(), "kubernetes", "V1Pod").unwrap(),
            Some(json!({"spec": {"__put__:volumes": [{"name": "v"}]}}))
        );
        let s3 = json!({"kubernetes": "s3://bucket/o.yaml"});
        assert!(get(s3.as_object().unwrap(), "kubernetes", "V1Pod").is_err());
    }
}
