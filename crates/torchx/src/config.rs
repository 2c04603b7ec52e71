//! `.torchxconfig` files: TorchX's INI format (Python `configparser` semantics with case-sensitive
//! keys), their lookup and precedence, and the `torchx configure` template.
//!
//! Precedence, highest first: command line, `$HOME/.torchxconfig`, `$CWD/.torchxconfig`, option
//! defaults. `TORCHXCONFIG=<file>` replaces the search. The first file that sets a key wins.
//!
//! [`parse_ini`] is pure; [`TorchxConfig::load`] and [`find_configs`] read the filesystem.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::opts::{CfgValue, RunOpts};

/// One parsed INI file: sections in file order, keys in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ini {
    /// Where it came from (for messages).
    pub origin: String,
    /// Section name → (key, value) pairs.
    pub sections: Vec<(String, Vec<(String, String)>)>,
}

impl Ini {
    /// The pairs of a section (with `[DEFAULT]` keys it does not set), if present.
    pub fn section(&self, name: &str) -> Option<Vec<(String, String)>> {
        let (_, pairs) = self.sections.iter().find(|(n, _)| n == name)?;
        let mut out = pairs.clone();
        if let Some((_, defaults)) = self.sections.iter().find(|(n, _)| n == "DEFAULT") {
            for (k, v) in defaults {
                if !out.iter().any(|(ok, _)| ok == k) {
                    out.push((k.clone(), v.clone()));
                }
            }
        }
        Some(out)
    }
}

/// Parses INI text like Python's `configparser` (strict mode, `optionxform = identity`): `key = v`
/// or `key: v`, full-line `#`/`;` comments, indented continuation lines, `%%` and `%(key)s`
/// interpolation, duplicate sections or keys are errors.
pub fn parse_ini(text: &str, origin: &str) -> Result<Ini> {
    let mut ini = Ini {
        origin: origin.to_string(),
        sections: Vec::new(),
    };
    let err = |line: usize, msg: String| Error::config(format!("{origin}:{line}: {msg}"));
    let mut last_key: Option<(usize, usize)> = None; // (section idx, key idx) for continuations
    for (n, raw) in text.lines().enumerate() {
        let lineno = n + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            last_key = None;
            continue;
        }
        if trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if raw.starts_with([' ', '\t']) {
            if let Some((s, k)) = last_key {
                let value = &mut ini.sections[s].1[k].1;
                value.push('\n');
                value.push_str(trimmed);
                continue;
            }
        }
        if let Some(rest) = trimmed.strip_prefix('[') {
            let Some(name) = rest.strip_suffix(']') else {
                return Err(err(lineno, format!("malformed section header `{trimmed}`")));
            };
            if ini.sections.iter().any(|(s, _)| s == name) {
                return Err(err(lineno, format!("section `[{name}]` appears twice")));
            }
            ini.sections.push((name.to_string(), Vec::new()));
            last_key = None;
            continue;
        }
        let Some(pos) = trimmed.find(['=', ':']) else {
            return Err(err(
                lineno,
                format!("expected `key = value`, got `{trimmed}`"),
            ));
        };
        let key = trimmed[..pos].trim();
        let value = trimmed[pos + 1..].trim();
        if key.is_empty() {
            return Err(err(
                lineno,
                format!("missing key before `{}`", &trimmed[pos..pos + 1]),
            ));
        }
        let Some(section) = ini.sections.last_mut() else {
            return Err(err(lineno, format!("`{key}` is outside of any [section]")));
        };
        if section.1.iter().any(|(k, _)| k == key) {
            return Err(err(
                lineno,
                format!("key `{key}` appears twice in section [{}]", section.0),
            ));
        }
        section.1.push((key.to_string(), value.to_string()));
        let key_idx = section.1.len() - 1;
        last_key = Some((ini.sections.len() - 1, key_idx));
    }
    interpolate(&mut ini)?;
    Ok(ini)
}

fn interpolate(ini: &mut Ini) -> Result<()> {
    let snapshot = ini.clone();
    for (name, pairs) in &mut ini.sections {
        let scope = snapshot.section(name).unwrap_or_default();
        for (key, value) in pairs.iter_mut() {
            *value = expand(value, &scope, 0)
                .map_err(|m| Error::config(format!("{}: [{name}] {key}: {m}", snapshot.origin)))?;
        }
    }
    Ok(())
}

fn expand(
    value: &str,
    scope: &[(String, String)],
    depth: usize,
) -> std::result::Result<String, String> {
    if depth > 10 {
        return Err("interpolation is nested too deeply".into());
    }
    let mut out = String::new();
    let mut rest = value;
    while let Some(pos) = rest.find('%') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(r) = after.strip_prefix('%') {
            out.push('%');
            rest = r;
        } else if let Some(r) = after.strip_prefix('(') {
            let end = r.find(")s").ok_or_else(|| {
                format!("bad interpolation syntax in `{value}` (write %% for a literal %)")
            })?;
            let name = &r[..end];
            let (_, v) = scope
                .iter()
                .find(|(k, _)| k == name)
                .ok_or_else(|| format!("`%({name})s` refers to a key that is not set"))?;
            out.push_str(&expand(v, scope, depth + 1)?);
            rest = &r[end + 2..];
        } else {
            return Err(format!(
                "`%` must be followed by `%` or `(name)s` in `{value}` (write %% for a literal %)"
            ));
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The config files to read, in precedence order: `$TORCHXCONFIG` alone if set (it must exist;
/// set and empty, as in TorchX 0.8, it means no config file at all), else `$HOME/.torchxconfig`
/// then `$CWD/.torchxconfig` when they exist.
pub fn find_configs() -> Result<Vec<PathBuf>> {
    if let Some(path) = std::env::var_os("TORCHXCONFIG") {
        if path.is_empty() {
            return Ok(Vec::new());
        }
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(Error::config(format!(
                "TORCHXCONFIG is set to `{}`, which is not a file",
                path.display()
            )));
        }
        return Ok(vec![path]);
    }
    let mut out = Vec::new();
    let dirs = [
        std::env::var_os("HOME").map(PathBuf::from),
        std::env::current_dir().ok(),
    ];
    for dir in dirs.into_iter().flatten() {
        let p = dir.join(".torchxconfig");
        if p.is_file() && !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The merged view of the config files that apply.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TorchxConfig {
    /// Files in precedence order (first wins).
    pub files: Vec<Ini>,
}

pub use crate::specs::RECOVERY_KEYS;

/// `[cli:run]` defaults for `torchx run`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CliRunDefaults {
    /// Default scheduler.
    pub scheduler: Option<String>,
    /// Default workspace.
    pub workspace: Option<String>,
    /// Default component (when the command line names none).
    pub component: Option<String>,
    /// Default `--time_limit`, `--checkpoint_signal`, `--max_retries`, `--requeue_exit_code`
    /// and `--max_requeues`, by those names.
    pub recovery: BTreeMap<String, String>,
    /// Keys of the section that are none of these (a typo, most likely), which `torchx run`
    /// warns of.
    pub unknown: Vec<String>,
}

impl CliRunDefaults {
    /// The keys `[cli:run]` takes.
    pub fn keys() -> impl Iterator<Item = &'static str> {
        ["scheduler", "workspace", "component"]
            .into_iter()
            .chain(RECOVERY_KEYS.iter().copied())
    }

    /// What `torchx run` says of an unknown key: that it is ignored, and the nearest key.
    pub fn unknown_key_warning(key: &str) -> String {
        let hint = crate::error::nearest(key, Self::keys())
            .map(|k| format!(" (did you mean `{k}`?)"))
            .unwrap_or_default();
        format!(
            "`{key}` in .torchxconfig's [cli:run] is not a default `torchx run` takes; ignoring it{hint}. It takes: {}",
            Self::keys().collect::<Vec<_>>().join(", ")
        )
    }
}

impl TorchxConfig {
    /// Reads the given files.
    pub fn load(paths: &[PathBuf]) -> Result<TorchxConfig> {
        let mut files = Vec::new();
        for p in paths {
            let text = std::fs::read_to_string(p).map_err(|e| {
                Error::config(format!(
                    "cannot read config file {}: {}",
                    p.display(),
                    match e.kind() {
                        std::io::ErrorKind::InvalidData => "it is not UTF-8 text".to_string(),
                        _ => e.to_string(),
                    }
                ))
                .with_source(e)
            })?;
            files.push(parse_ini(&text, &p.display().to_string())?);
        }
        Ok(TorchxConfig { files })
    }

    /// Reads the files [`find_configs`] returns.
    pub fn discover() -> Result<TorchxConfig> {
        Self::load(&find_configs()?)
    }

    /// A section merged across files, first file winning per key.
    pub fn section(&self, name: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for ini in &self.files {
            for (k, v) in ini.section(name).unwrap_or_default() {
                if !out.iter().any(|(ok, _)| *ok == k) {
                    out.push((k, v));
                }
            }
        }
        out
    }

    /// All sections named `prefix:name`, keyed by name.
    pub fn sections_with_prefix(
        &self,
        prefix: &str,
    ) -> Result<BTreeMap<String, Vec<(String, String)>>> {
        let mut names = Vec::new();
        for ini in &self.files {
            for (section, _) in &ini.sections {
                if let Some((p, name)) = section.split_once(':') {
                    if p == prefix {
                        if name.is_empty() {
                            return Err(Error::config(format!(
                                "{}: section [{section}] needs a name after `{prefix}:`",
                                ini.origin
                            )));
                        }
                        names.push(name.to_string());
                    }
                }
            }
        }
        Ok(names
            .into_iter()
            .map(|n| {
                let pairs = self.section(&format!("{prefix}:{n}"));
                (n, pairs)
            })
            .collect())
    }

    /// Fills `cfg` from the `[scheduler]` section; returns warnings for unknown keys.
    pub fn apply_scheduler(
        &self,
        scheduler: &str,
        opts: &RunOpts,
        cfg: &mut crate::opts::Cfg,
    ) -> Result<Vec<String>> {
        let section = self.section(scheduler);
        if let Some((k, _)) = section.iter().find(|(_, v)| v.starts_with("#FIXME")) {
            return Err(Error::config(format!(
                "`{k}` in the [{scheduler}] section of .torchxconfig is still the `#FIXME` placeholder written by `torchx configure`; set a value"
            )));
        }
        opts.fill_from_config(cfg, &section).map(|w| {
            w.into_iter()
                .map(|m| format!(".torchxconfig [{scheduler}]: {m} (ignored)"))
                .collect()
        })
    }

    /// `[component:<name>]` defaults, keyed by component name.
    pub fn component_defaults(&self) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
        Ok(self
            .sections_with_prefix("component")?
            .into_iter()
            .map(|(name, pairs)| (name, pairs.into_iter().collect()))
            .collect())
    }

    /// Named resources defined in `[resource:<name>]` sections: `cpu`, `memMB` (required),
    /// `gpu`, `capabilities` (`k=v,...`), `devices` (`name=count,...`). A name that is already
    /// a builtin named resource is an error (a config must not silently replace a builtin).
    pub fn named_resources(&self) -> Result<BTreeMap<String, crate::specs::Resource>> {
        let mut out = BTreeMap::new();
        for (name, pairs) in self.sections_with_prefix("resource")? {
            let err = |m: String| Error::config(format!(".torchxconfig [resource:{name}]: {m}"));
            if crate::specs::named_resource_names().any(|b| b == name) {
                return Err(err(format!(
                    "`{name}` is a builtin named resource; pick another name"
                )));
            }
            let int = |k: &str, v: &str| {
                v.trim()
                    .parse::<u32>()
                    .map(i64::from)
                    .map_err(|_| err(format!("`{k}` must be a whole number >= 0, got `{v}`")))
            };
            let pairs_of = |k: &str, v: &str| -> Result<Vec<(String, String)>> {
                v.split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        p.split_once('=')
                            .map(|(a, b)| (a.trim().to_string(), b.trim().to_string()))
                            .ok_or_else(|| err(format!("`{k}` entry `{p}` is not `key=value`")))
                    })
                    .collect()
            };
            let (mut cpu, mut mem, mut r) = (None, None, crate::specs::Resource::new(0, 0, 0));
            for (k, v) in &pairs {
                match k.as_str() {
                    "cpu" => cpu = Some(int(k, v)?),
                    "gpu" => r.gpu = int(k, v)?,
                    "memMB" | "memmb" => mem = Some(int(k, v)?),
                    "capabilities" => {
                        for (a, b) in pairs_of(k, v)? {
                            r.capabilities.insert(a, serde_json::Value::String(b));
                        }
                    }
                    "devices" => {
                        for (a, b) in pairs_of(k, v)? {
                            let n = int(&format!("devices.{a}"), &b)?;
                            r.devices.insert(a, n);
                        }
                    }
                    other => {
                        return Err(err(format!(
                            "unknown key `{other}`; allowed: cpu, gpu, memMB, capabilities, devices"
                        )))
                    }
                }
            }
            r.cpu = cpu.ok_or_else(|| err("`cpu` is required".into()))?;
            r.mem_mb = mem.ok_or_else(|| err("`memMB` is required".into()))?;
            out.insert(name, r);
        }
        Ok(out)
    }

    /// The component search path: `dirs` (comma-separated) of `[torchx:components]`.
    pub fn component_dirs(&self) -> Vec<PathBuf> {
        self.section("torchx:components")
            .into_iter()
            .filter(|(k, _)| k == "dirs")
            .flat_map(|(_, v)| {
                v.split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(PathBuf::from)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// `[cli:run]` defaults.
    pub fn cli_run(&self) -> CliRunDefaults {
        let s: BTreeMap<String, String> = self.section("cli:run").into_iter().collect();
        CliRunDefaults {
            scheduler: s.get("scheduler").cloned(),
            workspace: s.get("workspace").cloned(),
            component: s.get("component").cloned(),
            recovery: s
                .iter()
                .filter(|(k, _)| RECOVERY_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            // Keys written in the section itself ([DEFAULT]'s reach every section).
            unknown: self
                .files
                .iter()
                .filter_map(|ini| ini.sections.iter().find(|(n, _)| n == "cli:run"))
                .flat_map(|(_, pairs)| pairs.iter().map(|(k, _)| k))
                .filter(|k| !CliRunDefaults::keys().any(|known| known == k.as_str()))
                .cloned()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect(),
        }
    }

    /// Tracker names from `[torchx:tracker]` and their `[tracker:<name>] config`.
    pub fn trackers(&self) -> Vec<(String, Option<String>)> {
        self.section("torchx:tracker")
            .into_iter()
            .map(|(name, _)| {
                let config = self.tracker_config(&name);
                (name, config)
            })
            .collect()
    }

    /// `[tracker:<name>] config`.
    pub fn tracker_config(&self, name: &str) -> Option<String> {
        self.section(&format!("tracker:{name}"))
            .into_iter()
            .find(|(k, _)| k == "config")
            .map(|(_, v)| v)
    }
}

/// The `torchx configure` template for the given schedulers and their schemas: required options
/// get a `#FIXME:(type) help` placeholder; optional ones (unless `required_only`) their default,
/// each preceded by its help as a comment.
pub fn dump(schedulers: &[(&str, RunOpts)], required_only: bool) -> String {
    let mut out = String::new();
    for (name, opts) in schedulers {
        out.push_str(&format!("[{name}]\n"));
        for o in opts.iter() {
            let value = if o.required {
                let ph = format!("#FIXME:({}) {}", o.ty.name(), o.help);
                if ph.chars().count() <= 60 {
                    ph
                } else {
                    format!("{}...", ph.chars().take(60).collect::<String>())
                }
            } else if required_only {
                continue;
            } else {
                match &o.default {
                    None => "None".to_string(),
                    Some(CfgValue::List(l)) if l.is_empty() => "None".to_string(),
                    Some(CfgValue::Dict(d)) if d.is_empty() => "None".to_string(),
                    Some(v) => v.config_repr().replace('%', "%%"),
                }
            };
            out.push_str(&format!("# {}\n{} = {value}\n", o.help, o.name));
        }
        out.push('\n');
    }
    out
}

/// Writes `text` to `dir/.torchxconfig`.
pub fn write_config(dir: &Path, text: &str) -> Result<PathBuf> {
    let path = dir.join(".torchxconfig");
    std::fs::write(&path, text).map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configparser_semantics() {
        let text = "# comment\n[DEFAULT]\nshared = s\n\n[local_cwd]\nlog_dir = /tmp/x\nprepend_cwd: True\n; another comment\n[component:dist.ddp]\nj = 2x2\nenv = A=1,B=2\nscript_args = --lr\n   0.1\npct = 50%%\nref = %(j)s-%(shared)s\n[cli:run]\nscheduler = local_cwd\n";
        let ini = parse_ini(text, "t").unwrap();
        let local = ini.section("local_cwd").unwrap();
        assert_eq!(local[0], ("log_dir".into(), "/tmp/x".into()));
        assert_eq!(local[1], ("prepend_cwd".into(), "True".into()));
        assert_eq!(local[2], ("shared".into(), "s".into()));
        let ddp: BTreeMap<_, _> = ini
            .section("component:dist.ddp")
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(ddp["env"], "A=1,B=2");
        assert_eq!(ddp["script_args"], "--lr\n0.1");
        assert_eq!(ddp["pct"], "50%");
        assert_eq!(ddp["ref"], "2x2-s");
        let cfg = TorchxConfig { files: vec![ini] };
        assert_eq!(cfg.cli_run().scheduler.as_deref(), Some("local_cwd"));
        assert!(cfg.cli_run().unknown.is_empty());
        assert_eq!(cfg.component_defaults().unwrap()["dist.ddp"]["j"], "2x2");
    }

    #[test]
    fn first_file_wins() {
        let home = parse_ini("[s]\na = home\n", "home").unwrap();
        let cwd = parse_ini("[s]\na = cwd\nb = cwd\n", "cwd").unwrap();
        let cfg = TorchxConfig {
            files: vec![home, cwd],
        };
        assert_eq!(
            cfg.section("s"),
            vec![("a".into(), "home".into()), ("b".into(), "cwd".into())]
        );
    }

    #[test]
    fn errors_say_where() {
        let e = |t: &str| parse_ini(t, "f").unwrap_err().to_string();
        assert_eq!(e("a = 1\n"), "f:1: `a` is outside of any [section]");
        assert_eq!(
            e("[s]\na = 1\na = 2\n"),
            "f:3: key `a` appears twice in section [s]"
        );
        assert_eq!(e("[s]\n[s]\n"), "f:2: section `[s]` appears twice");
        assert_eq!(e("[s\n"), "f:1: malformed section header `[s`");
        assert_eq!(e("[s]\njunk\n"), "f:2: expected `key = value`, got `junk`");
        assert_eq!(e("[s]\na = 50%\n"), "f: [s] a: `%` must be followed by `%` or `(name)s` in `50%` (write %% for a literal %)");
        assert_eq!(
            e("[s]\na = %(b)s\n"),
            "f: [s] a: `%(b)s` refers to a key that is not set"
        );
    }
}
