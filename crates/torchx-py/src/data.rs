//! Values in the serde shape of the `torchx` crate's types, crossing as plain Python values
//! (`dict`, `list`, `str`, `int`, `float`, `bool`, `None`) rather than JSON text: neither side
//! prints or parses JSON, and the Python package needs no `json` module to call the core.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Number, Value};

/// How deep a value may nest: serde_json's own limit, which also stops a value that contains
/// itself (`json.dumps` would say "Circular reference detected").
const MAX_DEPTH: usize = 128;

/// A `T` that crosses as the plain Python values of its serde form: extracted from them (a
/// value of the wrong shape is a ValueError naming what serde expected), converted into them.
pub struct Data<T>(pub T);

impl<'a, 'py, T: DeserializeOwned> FromPyObject<'a, 'py> for Data<T> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let value = to_value(&obj, 0)?;
        serde_json::from_value(value)
            .map(Data)
            .map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

impl<'py, T: Serialize> IntoPyObject<'py> for Data<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value =
            serde_json::to_value(&self.0).map_err(|e| PyValueError::new_err(e.to_string()))?;
        from_value(py, &value)
    }
}

/// `obj` as a JSON value, as `json.dumps` reads it: a subclass of a builtin (an `Enum` of
/// `str`, say) as its base, tuples as lists; dict keys must be strings.
fn to_value(obj: &Bound<'_, PyAny>, depth: usize) -> PyResult<Value> {
    if depth > MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "a value nested over {MAX_DEPTH} levels deep (one that contains itself?)"
        )));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    // Before int: bool is a subclass of it.
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.to_str()?.to_owned()));
    }
    if obj.is_instance_of::<PyInt>() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        let u = obj.extract::<u64>().map_err(|_| {
            PyValueError::new_err(format!("the integer {obj} does not fit in 64 bits"))
        })?;
        return Ok(Value::Number(u.into()));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| PyValueError::new_err(format!("{obj} is not a finite number")));
    }
    if let Ok(dict) = obj.cast::<PyDict>() {
        let mut map = Map::with_capacity(dict.len());
        for (key, value) in dict.iter() {
            map.insert(key_text(&key)?, to_value(&value, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return obj
            .try_iter()?
            .map(|item| to_value(&item?, depth + 1))
            .collect::<PyResult<_>>()
            .map(Value::Array);
    }
    Err(PyTypeError::new_err(format!(
        "Object of type {} is not JSON serializable",
        obj.get_type().name()?
    )))
}

/// A dict key as `json.dumps` writes it: a `str` as it is, a number, bool or `None` as its
/// JSON text.
fn key_text(key: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = key.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    let scalar = key.is_none()
        || key.is_instance_of::<PyBool>()
        || key.is_instance_of::<PyInt>()
        || key.is_instance_of::<PyFloat>();
    if !scalar {
        return Err(PyTypeError::new_err(format!(
            "keys must be str, int, float, bool or None, not {}",
            key.get_type().name()?
        )));
    }
    Ok(to_value(key, 0)?.to_string())
}

/// `value` as plain Python values.
fn from_value<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(from_value(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, from_value(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
