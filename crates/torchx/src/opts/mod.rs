//! Scheduler run options: typed option structs declared with [`run_opts!`](crate::run_opts), their
//! schema ([`RunOpts`]), the `-cfg k=v,...` grammar and resolution.
//!
//! Architecture invariant: nothing here does I/O.

mod kv;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub use kv::{parse_kv, parse_list};

/// The value of one run option.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CfgValue {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A list of strings.
    List(Vec<String>),
    /// A string → string map.
    Dict(BTreeMap<String, String>),
}

impl CfgValue {
    /// The value as Python's `str()` renders it (how TorchX prints defaults).
    pub fn python_repr(&self) -> String {
        match self {
            CfgValue::Bool(true) => "True".into(),
            CfgValue::Bool(false) => "False".into(),
            CfgValue::Int(i) => i.to_string(),
            CfgValue::Float(f) => format!("{f:?}"),
            CfgValue::Str(s) => s.clone(),
            CfgValue::List(l) => {
                format!(
                    "[{}]",
                    l.iter()
                        .map(|s| format!("'{s}'"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            CfgValue::Dict(d) => format!(
                "{{{}}}",
                d.iter()
                    .map(|(k, v)| format!("'{k}': '{v}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// The value as a `.torchxconfig` file writes it (lists joined by `;`, dicts as `k:v;k2:v2`).
    pub fn config_repr(&self) -> String {
        match self {
            CfgValue::List(l) => l.join(";"),
            CfgValue::Dict(d) => d
                .iter()
                .map(|(k, v)| format!("{k}:{v}"))
                .collect::<Vec<_>>()
                .join(";"),
            other => other.python_repr(),
        }
    }
}

/// Resolved run options: canonical key → value.
pub type Cfg = BTreeMap<String, CfgValue>;

/// The type of a run option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptType {
    /// `str`.
    Str,
    /// `int`.
    Int,
    /// `float`.
    Float,
    /// `bool`.
    Bool,
    /// `List[str]`.
    List,
    /// `Dict[str, str]`.
    Dict,
}

impl OptType {
    /// TorchX's type name (`str`, `typing.List[str]`, ...).
    pub fn name(self) -> &'static str {
        match self {
            OptType::Str => "str",
            OptType::Int => "int",
            OptType::Float => "float",
            OptType::Bool => "bool",
            OptType::List => "typing.List[str]",
            OptType::Dict => "typing.Dict[str, str]",
        }
    }

    fn example(self) -> &'static str {
        match self {
            OptType::Str => "a string",
            OptType::Int => "an integer such as 3",
            OptType::Float => "a number such as 0.5",
            OptType::Bool => "true or false",
            OptType::List => "a list such as a;b",
            OptType::Dict => "a map such as k1:v1;k2:v2",
        }
    }

    fn mismatch(self, key: &str, value: &str) -> Error {
        Error::config(format!(
            "Run option: {key}, must be of type: {} ({}), but was: `{value}`",
            self.name(),
            self.example()
        ))
    }

    fn parse_bool(s: &str) -> Option<bool> {
        match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" | "y" => Some(true),
            "false" | "0" | "no" | "off" | "n" => Some(false),
            _ => None,
        }
    }

    fn parse_dict(key: &str, s: &str) -> Result<BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for pair in s
            .replace(',', ";")
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let Some((k, v)) = pair.split_once(':') else {
                return Err(Error::config(format!(
                    "Run option: {key}, entry `{pair}` is not of the form `key:value` (e.g. {key}=k1:v1;k2:v2)"
                )));
            };
            out.insert(k.trim().to_string(), v.trim().to_string());
        }
        Ok(out)
    }

    /// Casts a command-line string (`-cfg`) to this type. Lists split on `,` or `;`.
    pub fn cast_cli(self, key: &str, s: &str) -> Result<CfgValue> {
        Ok(match self {
            OptType::Str => CfgValue::Str(s.to_string()),
            OptType::Int => CfgValue::Int(s.trim().parse().map_err(|_| self.mismatch(key, s))?),
            OptType::Float => CfgValue::Float(s.trim().parse().map_err(|_| self.mismatch(key, s))?),
            OptType::Bool => {
                CfgValue::Bool(Self::parse_bool(s.trim()).ok_or_else(|| self.mismatch(key, s))?)
            }
            OptType::List => CfgValue::List(
                s.replace(';', ",")
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect(),
            ),
            OptType::Dict => CfgValue::Dict(Self::parse_dict(key, s)?),
        })
    }

    /// Casts a `.torchxconfig` value to this type. Lists split on `;` only, as in TorchX.
    pub fn cast_config(self, key: &str, s: &str) -> Result<CfgValue> {
        match self {
            OptType::List => Ok(CfgValue::List(
                s.split(';')
                    .filter(|p| !p.is_empty())
                    .map(str::to_string)
                    .collect(),
            )),
            _ => self.cast_cli(key, s),
        }
    }

    /// Checks (and where lossless, converts) a programmatic value.
    pub fn check(self, key: &str, v: CfgValue) -> Result<CfgValue> {
        match (self, v) {
            (OptType::Str, v @ CfgValue::Str(_))
            | (OptType::Int, v @ CfgValue::Int(_))
            | (OptType::Float, v @ CfgValue::Float(_))
            | (OptType::Bool, v @ CfgValue::Bool(_))
            | (OptType::List, v @ CfgValue::List(_))
            | (OptType::Dict, v @ CfgValue::Dict(_)) => Ok(v),
            (OptType::Float, CfgValue::Int(i)) => Ok(CfgValue::Float(i as f64)),
            (_, v) => Err(self.mismatch(key, &v.python_repr())),
        }
    }
}

/// One option in a scheduler's schema.
#[derive(Debug, Clone, PartialEq)]
pub struct OptSpec {
    /// The canonical name.
    pub name: &'static str,
    /// Other accepted spellings (camelCase, snake_case of dashed names).
    pub aliases: Vec<String>,
    /// The type.
    pub ty: OptType,
    /// Whether the option must be given.
    pub required: bool,
    /// The default when not given.
    pub default: Option<CfgValue>,
    /// Help text (from the field's doc comment).
    pub help: String,
}

impl OptSpec {
    /// A spec; aliases are derived from the name.
    pub fn new(
        name: &'static str,
        ty: OptType,
        required: bool,
        default: Option<CfgValue>,
        help: String,
    ) -> OptSpec {
        let mut aliases = Vec::new();
        let snake = name.replace('-', "_");
        let camel = to_camel(&snake);
        for a in [snake, camel] {
            if a != name && !aliases.contains(&a) {
                aliases.push(a);
            }
        }
        OptSpec {
            name,
            aliases,
            ty,
            required,
            default,
            help,
        }
    }

    fn matches(&self, key: &str) -> bool {
        self.name == key || self.aliases.iter().any(|a| a == key)
    }
}

fn to_camel(snake: &str) -> String {
    let mut out = String::new();
    for (i, part) in snake.split('_').filter(|p| !p.is_empty()).enumerate() {
        if i == 0 {
            out.push_str(part);
        } else {
            let mut cs = part.chars();
            if let Some(c) = cs.next() {
                out.extend(c.to_uppercase());
                out.push_str(cs.as_str());
            }
        }
    }
    out
}

/// A scheduler's run option schema.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunOpts {
    opts: Vec<OptSpec>,
}

impl RunOpts {
    /// A schema from option specs.
    pub fn new(opts: Vec<OptSpec>) -> RunOpts {
        RunOpts { opts }
    }

    /// The options, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = &OptSpec> {
        self.opts.iter()
    }

    /// True when there are no options.
    pub fn is_empty(&self) -> bool {
        self.opts.is_empty()
    }

    /// The option named `key` under any of its spellings.
    pub fn get(&self, key: &str) -> Option<&OptSpec> {
        self.opts.iter().find(|o| o.matches(key))
    }

    /// Appends the options of `other` (e.g. workspace options).
    pub fn extend(&mut self, other: RunOpts) {
        self.opts.extend(other.opts);
    }

    fn unknown_key(&self, key: &str) -> Error {
        let names: Vec<&str> = self.opts.iter().map(|o| o.name).collect();
        let valid = if names.is_empty() {
            "(this scheduler takes no options)".to_string()
        } else {
            names.join(", ")
        };
        Error::config(format!(
            "unknown run option `{key}`. Valid options are: {valid}"
        ))
        .suggesting(key, names.iter().copied())
    }

    /// Canonicalises `(key, value)` pairs: unknown keys are errors that list the valid keys, and
    /// the same option under two spellings with different values is an error.
    fn canonicalise(&self, pairs: Vec<(String, CfgValue)>) -> Result<Cfg> {
        let mut out = Cfg::new();
        let mut spelled: BTreeMap<&'static str, String> = BTreeMap::new();
        for (key, value) in pairs {
            let spec = self.get(&key).ok_or_else(|| self.unknown_key(&key))?;
            if let Some(prev) = out.get(spec.name) {
                if *prev != value {
                    return Err(Error::config(format!(
                        "run option `{}` is given twice with different values: {}={} and {key}={}",
                        spec.name,
                        spelled[spec.name],
                        prev.python_repr(),
                        value.python_repr()
                    )));
                }
            }
            spelled.insert(spec.name, key.clone());
            out.insert(spec.name.to_string(), value);
        }
        Ok(out)
    }

    /// Parses a command-line `-cfg` string (`k=v,k2=v2`); unknown keys are errors.
    pub fn parse_cli(&self, s: &str) -> Result<Cfg> {
        let pairs = parse_kv(s).map_err(|e| Error::config(format!("invalid run options: {e}")))?;
        let mut typed = Vec::with_capacity(pairs.len());
        for (key, raw) in pairs {
            let spec = self.get(&key).ok_or_else(|| self.unknown_key(&key))?;
            typed.push((key.clone(), spec.ty.cast_cli(spec.name, &raw)?));
        }
        self.canonicalise(typed)
    }

    /// Parses JSON run options (`{"k": v}`), casting strings to the declared types.
    pub fn parse_json(&self, v: &serde_json::Value) -> Result<Cfg> {
        let obj = v
            .as_object()
            .ok_or_else(|| Error::config("run options must be a JSON object"))?;
        let mut typed = Vec::new();
        for (key, value) in obj {
            let spec = self.get(key).ok_or_else(|| self.unknown_key(key))?;
            let cv = match value {
                serde_json::Value::Null => continue,
                serde_json::Value::String(s) => spec.ty.cast_cli(spec.name, s)?,
                other => {
                    let cv: CfgValue = serde_json::from_value(other.clone())
                        .map_err(|_| spec.ty.mismatch(spec.name, &other.to_string()))?;
                    spec.ty.check(spec.name, cv)?
                }
            };
            typed.push((key.clone(), cv));
        }
        self.canonicalise(typed)
    }

    /// Fills options absent from `cfg` from a config file section. Unknown keys and the literal
    /// `None` are skipped; unknown keys are returned as warnings.
    pub fn fill_from_config(
        &self,
        cfg: &mut Cfg,
        section: &[(String, String)],
    ) -> Result<Vec<String>> {
        let mut warnings = Vec::new();
        for (key, raw) in section {
            let Some(spec) = self.get(key) else {
                warnings.push(format!("{}", self.unknown_key(key)));
                continue;
            };
            if cfg.contains_key(spec.name) || raw == "None" {
                continue;
            }
            cfg.insert(spec.name.to_string(), spec.ty.cast_config(spec.name, raw)?);
        }
        Ok(warnings)
    }

    /// Validates `cfg` against the schema and fills defaults: unknown keys, wrong types, alias
    /// conflicts and missing required options are errors naming the key.
    pub fn resolve(&self, cfg: &Cfg) -> Result<Cfg> {
        let mut typed = Vec::with_capacity(cfg.len());
        for (key, value) in cfg {
            let spec = self.get(key).ok_or_else(|| self.unknown_key(key))?;
            typed.push((key.clone(), spec.ty.check(spec.name, value.clone())?));
        }
        let mut out = self.canonicalise(typed)?;
        for spec in &self.opts {
            if out.contains_key(spec.name) {
                continue;
            }
            if spec.required {
                return Err(Error::config(format!(
                    "Required run option: {}, must be provided and not `None`",
                    spec.name
                )));
            }
            if let Some(d) = &spec.default {
                out.insert(spec.name.to_string(), d.clone());
            }
        }
        Ok(out)
    }

    /// The schema as JSON (for `torchx runopts --json`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.opts
                .iter()
                .map(|o| {
                    serde_json::json!({
                        "name": o.name, "type": o.ty.name(), "required": o.required,
                        "default": o.default, "help": o.help, "aliases": o.aliases,
                    })
                })
                .collect(),
        )
    }
}

/// TorchX's `runopts.__repr__`, the text of `torchx runopts`.
impl fmt::Display for RunOpts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let required: Vec<&OptSpec> = self.opts.iter().filter(|o| o.required).collect();
        let optional: Vec<&OptSpec> = self.opts.iter().filter(|o| !o.required).collect();
        write!(f, "    usage:\n        ")?;
        for (i, o) in required.iter().chain(&optional).enumerate() {
            let sep = if i > 0 { "," } else { "" };
            if o.required {
                write!(f, "{sep}{}={}", o.name, o.name.to_uppercase())?;
            } else {
                write!(f, "{sep}[{}={}]", o.name, o.name.to_uppercase())?;
            }
        }
        for (section, opts) in [("required", &required), ("optional", &optional)] {
            if opts.is_empty() {
                continue;
            }
            write!(f, "\n\n    {section} arguments:")?;
            for o in opts.iter() {
                let default = if o.required {
                    String::new()
                } else {
                    format!(
                        ", {}",
                        o.default
                            .as_ref()
                            .map_or("None".into(), CfgValue::python_repr)
                    )
                };
                write!(
                    f,
                    "\n        {}={} ({}{default})",
                    o.name,
                    o.name.to_uppercase(),
                    o.ty.name()
                )?;
                write!(f, "\n            {}", o.help)?;
            }
        }
        Ok(())
    }
}

/// A Rust type usable as a run option field.
pub trait OptValue: Sized {
    /// The option type.
    const TYPE: OptType;
    /// True for `Option<T>` (not required, default None).
    const OPTIONAL: bool = false;
    /// The value as a [`CfgValue`].
    fn to_cfg(&self) -> Option<CfgValue>;
    /// Reads the value from a resolved option, `None` if absent or of another type.
    fn from_cfg(v: Option<&CfgValue>) -> Option<Self>;
}

macro_rules! opt_value {
    ($t:ty, $variant:ident, $ot:ident) => {
        impl OptValue for $t {
            const TYPE: OptType = OptType::$ot;
            fn to_cfg(&self) -> Option<CfgValue> {
                Some(CfgValue::$variant(self.clone()))
            }
            fn from_cfg(v: Option<&CfgValue>) -> Option<Self> {
                match v {
                    Some(CfgValue::$variant(x)) => Some(x.clone()),
                    _ => None,
                }
            }
        }
    };
}
opt_value!(String, Str, Str);
opt_value!(i64, Int, Int);
opt_value!(f64, Float, Float);
opt_value!(bool, Bool, Bool);
opt_value!(Vec<String>, List, List);
opt_value!(BTreeMap<String, String>, Dict, Dict);

impl<T: OptValue> OptValue for Option<T> {
    const TYPE: OptType = T::TYPE;
    const OPTIONAL: bool = true;
    fn to_cfg(&self) -> Option<CfgValue> {
        self.as_ref().and_then(T::to_cfg)
    }
    fn from_cfg(v: Option<&CfgValue>) -> Option<Self> {
        Some(T::from_cfg(v))
    }
}

/// A typed options struct (generated by [`run_opts!`](crate::run_opts)).
pub trait TypedOpts: Sized {
    /// The schema: names, types, defaults, help.
    fn schema() -> RunOpts;
    /// Reads the struct from resolved options.
    fn from_cfg(cfg: &Cfg) -> Result<Self>;
}

/// Joins doc-comment lines into one help string.
pub fn join_doc(lines: &[&str]) -> String {
    lines
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Declares a typed run options struct. Help comes from each field's doc comment; a field of
/// type `Option<T>` is optional, `T = default` has a default, and a plain `T` is required.
/// `#[key = "mail-user"]` sets a name that is not a Rust identifier.
///
/// ```
/// torchx::run_opts! {
///     /// Options of my scheduler.
///     pub struct MyOpts {
///         /// the queue to submit to
///         queue: String,
///         /// retries
///         retries: i64 = 3,
///         /// an optional comment
///         #[key = "job-comment"]
///         comment: Option<String>,
///     }
/// }
/// use torchx::opts::TypedOpts;
/// let schema = MyOpts::schema();
/// let cfg = schema.resolve(&schema.parse_cli("queue=q,jobComment=hi").unwrap()).unwrap();
/// let opts = MyOpts::from_cfg(&cfg).unwrap();
/// assert_eq!((opts.queue.as_str(), opts.retries, opts.comment.as_deref()), ("q", 3, Some("hi")));
/// ```
#[macro_export]
macro_rules! run_opts {
    (
        $(#[doc = $sdoc:literal])*
        $vis:vis struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[key = $key:literal])?
                $field:ident : $ty:ty $(= $default:expr)?
            ),* $(,)?
        }
    ) => {
        $(#[doc = $sdoc])*
        #[derive(Debug, Clone, PartialEq)]
        $vis struct $name {
            $( $(#[doc = $doc])* pub $field: $ty, )*
        }

        impl $crate::opts::TypedOpts for $name {
            fn schema() -> $crate::opts::RunOpts {
                $crate::opts::RunOpts::new(vec![$({
                    let (required, default) = $crate::run_opts!(@default $ty $(, $default)?);
                    $crate::opts::OptSpec::new(
                        $crate::run_opts!(@key $field $($key)?),
                        <$ty as $crate::opts::OptValue>::TYPE,
                        required,
                        default,
                        $crate::opts::join_doc(&[$($doc),*]),
                    )
                }),*])
            }

            fn from_cfg(cfg: &$crate::opts::Cfg) -> $crate::error::Result<Self> {
                Ok($name {$(
                    $field: {
                        let key = $crate::run_opts!(@key $field $($key)?);
                        match <$ty as $crate::opts::OptValue>::from_cfg(cfg.get(key)) {
                            Some(v) => v,
                            None => $crate::run_opts!(@fallback key $ty $(, $default)?),
                        }
                    },
                )*})
            }
        }
    };
    (@key $field:ident $key:literal) => { $key };
    (@key $field:ident) => { stringify!($field) };
    (@default $ty:ty, $default:expr) => {{
        let d: $ty = $default;
        (false, <$ty as $crate::opts::OptValue>::to_cfg(&d))
    }};
    (@default $ty:ty) => { (!<$ty as $crate::opts::OptValue>::OPTIONAL, None) };
    (@fallback $key:ident $ty:ty, $default:expr) => { $default };
    (@fallback $key:ident $ty:ty) => {
        return Err($crate::error::Error::config(format!(
            "Required run option: {}, must be provided and not `None`", $key
        )))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::run_opts! {
        /// Test options.
        struct TestOpts {
            /// Volcano queue to schedule job in
            queue: String,
            /// Kubernetes namespace to schedule job in
            namespace: String = "default".into(),
            /// retries
            max_retries: i64 = 0,
            /// ratio
            ratio: Option<f64>,
            /// a flag
            privileged: bool = false,
            /// the list
            ///   continued here
            subnets: Option<Vec<String>>,
            /// the env
            env: Option<BTreeMap<String, String>>,
            /// dashed
            #[key = "mail-user"]
            mail_user: Option<String>,
        }
    }

    fn schema() -> RunOpts {
        TestOpts::schema()
    }

    #[test]
    fn repr_matches_torchx_format() {
        insta::assert_snapshot!(schema().to_string());
    }

    #[test]
    fn parse_and_resolve() {
        let s = schema();
        let cfg = s
            .resolve(
                &s.parse_cli(
                    "queue=q,maxRetries=3,subnets=a;b,env=A:1,B:2,mail_user=x@y,ratio=0.5",
                )
                .unwrap(),
            )
            .unwrap();
        let o = TestOpts::from_cfg(&cfg).unwrap();
        assert_eq!(o.queue, "q");
        assert_eq!(o.namespace, "default");
        assert_eq!(o.max_retries, 3);
        assert_eq!(o.ratio, Some(0.5));
        assert_eq!(o.subnets, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(o.env.unwrap()["B"], "2");
        assert_eq!(o.mail_user.as_deref(), Some("x@y"));
        assert!(!o.privileged);
    }

    #[test]
    fn errors_name_the_key() {
        let s = schema();
        let e = |cli: &str| match s.parse_cli(cli).and_then(|c| s.resolve(&c)) {
            Ok(c) => panic!("{cli} accepted: {c:?}"),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            e("namespace=x"),
            "Required run option: queue, must be provided and not `None`"
        );
        assert_eq!(
            e("queue=q,max_retries=three"),
            "Run option: max_retries, must be of type: int (an integer such as 3), but was: `three`"
        );
        assert_eq!(
            e("queue=q,privileged=maybe"),
            "Run option: privileged, must be of type: bool (true or false), but was: `maybe`"
        );
        assert_eq!(
            e("queue=q,namespce=x"),
            "unknown run option `namespce`. Valid options are: queue, namespace, max_retries, ratio, privileged, subnets, env, mail-user"
        );
        let typo = s.parse_cli("queue=q,namespce=x").unwrap_err();
        assert_eq!(typo.suggestion(), Some("namespace"));
        assert_eq!(
            e("queue=q,max_retries=1,maxRetries=2"),
            "run option `max_retries` is given twice with different values: max_retries=1 and maxRetries=2"
        );
        assert!(s.parse_cli("queue=q,max_retries=1,maxRetries=1").is_ok());
        assert_eq!(
            e("queue=q,env=A"),
            "Run option: env, entry `A` is not of the form `key:value` (e.g. env=k1:v1;k2:v2)"
        );
        assert_eq!(
            e("queue="),
            "invalid run options: `queue=` does not have at least one `key=value` pair"
        );
    }

    #[test]
    fn programmatic_types_are_checked() {
        let s = schema();
        let mut cfg = Cfg::new();
        cfg.insert("queue".into(), CfgValue::Int(1));
        assert_eq!(
            s.resolve(&cfg).unwrap_err().to_string(),
            "Run option: queue, must be of type: str (a string), but was: `1`"
        );
        cfg.insert("queue".into(), CfgValue::Str("q".into()));
        cfg.insert("ratio".into(), CfgValue::Int(1));
        assert_eq!(s.resolve(&cfg).unwrap()["ratio"], CfgValue::Float(1.0));
    }

    #[test]
    fn config_file_fill() {
        let s = schema();
        let mut cfg = s.parse_cli("queue=cli").unwrap();
        let section = vec![
            ("queue".to_string(), "file".to_string()),
            ("subnets".to_string(), "a,b;c".to_string()),
            ("bogus".to_string(), "1".to_string()),
            ("ratio".to_string(), "None".to_string()),
        ];
        let warnings = s.fill_from_config(&mut cfg, &section).unwrap();
        assert_eq!(cfg["queue"], CfgValue::Str("cli".into()));
        assert_eq!(
            cfg["subnets"],
            CfgValue::List(vec!["a,b".into(), "c".into()])
        );
        assert!(!cfg.contains_key("ratio"));
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].starts_with("unknown run option `bogus`"));
    }

    #[test]
    fn json_options() {
        let s = schema();
        let cfg = s.parse_json(&serde_json::json!({"queue": "q", "max_retries": "2", "subnets": ["a"], "ratio": null})).unwrap();
        assert_eq!(cfg["max_retries"], CfgValue::Int(2));
        assert!(s.parse_json(&serde_json::json!({"queue": 3})).is_err());
    }
}
