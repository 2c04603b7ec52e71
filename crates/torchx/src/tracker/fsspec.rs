//! The `fsspec` tracker on a local (or mounted) filesystem, byte-compatible with TorchX's
//! `torchx.tracker.backend.fsspec` so that Python jobs and this CLI share data. Layout under
//! `root_path`, run ids base32-encoded (RFC 4648, padded):
//!
//! ```text
//! <b32(run_id)>/metadata/<time_ns>     {"metadata": {...}}
//! <b32(run_id)>/artifacts/<time_ns>    {"name": ..., "path": ..., "metadata": ...}
//! <b32(run_id)>/sources/<b32(source)>  one artifact name per line ("" = the run itself)
//! <b32(source)>/descendants/<b32(run)> same, appended only when that directory exists
//! ```
//!
//! Differences from TorchX, all compatible with its reader: records are read in time order so a
//! later value wins deterministically (TorchX uses directory order), a record never overwrites
//! another written in the same nanosecond, and `lineage` is implemented (TorchX raises).

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};

use super::{Lineage, Tracker, TrackerArtifact, TrackerSource};
use crate::error::{Error, Result};

/// The tracker's registry name (TorchX's entry point name).
pub(super) const NAME: &str = "fsspec";

/// The fsspec tracker over a directory.
#[derive(Debug, Clone)]
pub struct FsspecTracker {
    root: PathBuf,
}

fn io(context: impl Into<String>, e: std::io::Error) -> Error {
    Error::io(context, e)
}

impl FsspecTracker {
    /// A tracker over `root`, which must exist (as in TorchX).
    pub fn new(root: impl Into<PathBuf>) -> Result<FsspecTracker> {
        let root = root.into();
        if !root.is_dir() {
            return Err(Error::config(format!(
                "tracker fsspec: root_path `{}` does not exist or is not a directory (create it \
                 first)",
                root.display()
            )));
        }
        Ok(FsspecTracker { root })
    }

    /// TorchX's `create(config_file)`: `config` names a file of `key=value` lines (`#` comments)
    /// with `protocol` and `root_path`. Only the local filesystem (`file`/`local`) is available
    /// to this binary; other fsspec protocols are refused by name.
    pub fn from_config(config: Option<&str>) -> Result<FsspecTracker> {
        let Some(file) = config.filter(|c| !c.is_empty()) else {
            return Err(Error::config(
                "tracker fsspec needs a config file: set `config = <path>` in [tracker:fsspec] \
                 or TORCHX_TRACKER_FSSPEC_CONFIG (the file holds protocol=file and root_path=...)",
            ));
        };
        let path = file.strip_prefix("file://").unwrap_or(file);
        let text = std::fs::read_to_string(path)
            .map_err(|e| io(format!("reading the fsspec tracker config {path}"), e))?;
        let cfg = read_config(&text).map_err(|e| Error::config(format!("{path}: {e}")))?;
        let get = |k: &str| cfg.get(k).and_then(Value::as_str);
        let (Some(protocol), Some(root)) = (get("protocol"), get("root_path")) else {
            return Err(Error::config(format!(
                "Please specify 'protocol' and 'root_path' in {path}"
            )));
        };
        if !matches!(protocol, "file" | "local") {
            return Err(Error::config(format!(
                "{path}: fsspec protocol `{protocol}` is not available in this torchx (only \
                 `file`/`local`; mount remote storage and point root_path at it)"
            )));
        }
        FsspecTracker::new(root.strip_prefix("file://").unwrap_or(root))
    }

    /// The directory of `run_id`.
    fn run_dir(&self, run_id: &str) -> PathBuf {
        self.root.join(b32encode(run_id.as_bytes()))
    }

    fn persist(&self, run_id: &str, category: &str, content: &Value) -> Result<()> {
        let dir = self.run_dir(run_id).join(category);
        std::fs::create_dir_all(&dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
        let text = python_json(content);
        let mut ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        loop {
            let file = dir.join(ns.to_string());
            match OpenOptions::new().write(true).create_new(true).open(&file) {
                Ok(mut f) => {
                    return f
                        .write_all(text.as_bytes())
                        .map_err(|e| io(format!("writing {}", file.display()), e))
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => ns += 1,
                Err(e) => return Err(io(format!("creating {}", file.display()), e)),
            }
        }
    }

    /// The records of one category, oldest first.
    fn load(&self, run_id: &str, category: &str) -> Result<Vec<Value>> {
        let dir = self.run_dir(run_id).join(category);
        let mut files: Vec<(u128, String, PathBuf)> = Vec::new();
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    files.push((name.parse().unwrap_or(u128::MAX), name, e.path()));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(format!("listing {}", dir.display()), e)),
        }
        files.sort();
        files
            .into_iter()
            .map(|(_, _, path)| {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| io(format!("reading {}", path.display()), e))?;
                serde_json::from_str(&text).map_err(|e| {
                    Error::backend(
                        "tracker fsspec",
                        format!("{} is not a tracker record: {e}", path.display()),
                    )
                    .with_source(e)
                })
            })
            .collect()
    }

    fn read_links(&self, file: &Path, artifact: Option<&str>) -> Result<Vec<TrackerSource>> {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Some(source_run_id) = b32decode_str(&name) else {
            log::warn!(
                "tracker fsspec: skipping {}: not a base32 run id",
                file.display()
            );
            return Ok(Vec::new());
        };
        let text = std::fs::read_to_string(file)
            .map_err(|e| io(format!("reading {}", file.display()), e))?;
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            return Ok(match artifact {
                None => vec![TrackerSource {
                    source_run_id,
                    artifact_name: None,
                }],
                Some(_) => Vec::new(),
            });
        }
        Ok(lines
            .into_iter()
            .filter(|l| artifact.is_none_or(|a| a == *l))
            .map(|l| TrackerSource {
                source_run_id: source_run_id.clone(),
                artifact_name: Some(l.to_string()),
            })
            .collect())
    }

    fn links(&self, dir: &Path, artifact: Option<&str>) -> Result<Vec<TrackerSource>> {
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries.flatten().map(|e| e.path()).collect(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(format!("listing {}", dir.display()), e)),
        };
        files.sort();
        let mut out = Vec::new();
        for f in files {
            out.extend(self.read_links(&f, artifact)?);
        }
        Ok(out)
    }
}

impl Tracker for FsspecTracker {
    fn add_artifact(&self, run_id: &str, artifact: &TrackerArtifact) -> Result<()> {
        self.persist(run_id, "artifacts", &json!(artifact))
    }

    fn artifacts(&self, run_id: &str) -> Result<BTreeMap<String, TrackerArtifact>> {
        let mut out = BTreeMap::new();
        for entry in self.load(run_id, "artifacts")? {
            let text = |k: &str| match &entry[k] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let a = TrackerArtifact {
                name: text("name"),
                path: text("path"),
                metadata: entry["metadata"].as_object().cloned(),
            };
            out.insert(a.name.clone(), a);
        }
        Ok(out)
    }

    fn add_metadata(&self, run_id: &str, metadata: &Map<String, Value>) -> Result<()> {
        self.persist(run_id, "metadata", &json!({ "metadata": metadata }))
    }

    fn metadata(&self, run_id: &str) -> Result<Map<String, Value>> {
        let mut out = Map::new();
        for entry in self.load(run_id, "metadata")? {
            if let Some(m) = entry["metadata"].as_object() {
                out.extend(m.clone());
            }
        }
        Ok(out)
    }

    fn add_source(&self, run_id: &str, source_id: &str, artifact_name: Option<&str>) -> Result<()> {
        // As TorchX 0.8: links accumulate (each artifact of one source is kept), and a source
        // run that has tracked data learns of its descendant.
        let line = artifact_name.unwrap_or("");
        let sources = self.run_dir(run_id).join("sources");
        std::fs::create_dir_all(&sources)
            .map_err(|e| io(format!("creating {}", sources.display()), e))?;
        append_unique(&sources.join(b32encode(source_id.as_bytes())), line)?;
        let parent = self.run_dir(source_id);
        if parent.is_dir() {
            let descendants = parent.join("descendants");
            std::fs::create_dir_all(&descendants)
                .map_err(|e| io(format!("creating {}", descendants.display()), e))?;
            append_unique(&descendants.join(b32encode(run_id.as_bytes())), line)?;
        }
        Ok(())
    }

    fn sources(&self, run_id: &str, artifact_name: Option<&str>) -> Result<Vec<TrackerSource>> {
        self.links(&self.run_dir(run_id).join("sources"), artifact_name)
    }

    fn lineage(&self, run_id: &str) -> Result<Lineage> {
        // Descendants are the runs whose sources name this one (TorchX's `descendants/` files
        // only exist where someone created the directory, so they cannot be relied on).
        let mut descendants = Vec::new();
        for child in self.run_ids(Some(run_id))? {
            for s in self.sources(&child, None)? {
                if s.source_run_id == run_id {
                    descendants.push(TrackerSource {
                        source_run_id: child.clone(),
                        artifact_name: s.artifact_name,
                    });
                }
            }
        }
        Ok(Lineage {
            sources: self.sources(run_id, None)?,
            descendants,
        })
    }

    fn run_ids(&self, parent_run_id: Option<&str>) -> Result<Vec<String>> {
        let entries = std::fs::read_dir(&self.root)
            .map_err(|e| io(format!("listing {}", self.root.display()), e))?;
        let parent = parent_run_id.map(|p| b32encode(p.as_bytes()));
        let mut out = Vec::new();
        for e in entries.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if let Some(p) = &parent {
                if !e.path().join("sources").join(p).exists() {
                    continue;
                }
            }
            let name = e.file_name().to_string_lossy().into_owned();
            match b32decode_str(&name) {
                Some(id) => out.push(id),
                None => log::warn!("tracker fsspec: skipping {}: not a base32 run id", name),
            }
        }
        out.sort();
        Ok(out)
    }
}

/// TorchX's `_read_config`: `key=value` lines, `#` comment lines, dotted keys nest.
fn read_config(text: &str) -> std::result::Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || v.is_empty() {
            continue;
        }
        if k.ends_with('.') {
            return Err(format!(
                "Illegal config key `{k}`. Key should not have a `.` suffix"
            ));
        }
        let mut node = &mut out;
        let mut parts: Vec<&str> = k.split('.').collect();
        let last = parts.pop().unwrap_or(k);
        for p in parts {
            let entry = node.entry(p).or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            node = entry.as_object_mut().expect("just made an object");
        }
        node.insert(last.to_string(), Value::String(v.to_string()));
    }
    Ok(out)
}

const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

/// Python's `base64.b32encode`.
pub(super) fn b32encode(data: &[u8]) -> String {
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let bits = buf.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for i in 0..8 {
            if i < chars {
                out.push(B32[((bits >> (35 - i * 5)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Python's `base64.b32decode` (strict: uppercase, padded), as UTF-8.
pub(super) fn b32decode_str(s: &str) -> Option<String> {
    if s.is_empty() || !s.len().is_multiple_of(8) {
        return None;
    }
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(8) {
        let data: Vec<u8> = chunk.iter().copied().take_while(|c| *c != b'=').collect();
        if chunk[data.len()..].iter().any(|c| *c != b'=') {
            return None;
        }
        let mut bits = 0u64;
        for c in &data {
            bits = (bits << 5) | B32.iter().position(|b| b == c)? as u64;
        }
        bits <<= 5 * (8 - data.len());
        let bytes = match data.len() {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            _ => return None,
        };
        for i in 0..bytes {
            out.push((bits >> (32 - i * 8)) as u8);
        }
    }
    String::from_utf8(out).ok()
}

/// `json.dumps` with Python's defaults (`", "`/`": "` separators, non-ASCII escaped), so that
/// records are byte-identical to TorchX's.
pub(super) fn python_json(v: &Value) -> String {
    match v {
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_json).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", python_str(k), python_json(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::String(s) => python_str(s),
        other => other.to_string(),
    }
}

fn python_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Appends `line` to `file` unless the file holds that line already.
fn append_unique(file: &Path, line: &str) -> Result<()> {
    match std::fs::read_to_string(file) {
        Ok(text) if text.lines().any(|l| l.trim() == line) => return Ok(()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("reading {}", file.display()), e)),
    }
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(file)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()))
        .map_err(|e| io(format!("appending to {}", file.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base32_matches_python() {
        // base64.b32encode(b"local_cwd://torchx/echo-abc")
        assert_eq!(
            b32encode(b"local_cwd://torchx/echo-abc"),
            "NRXWGYLML5RXOZB2F4XXI33SMNUHQL3FMNUG6LLBMJRQ===="
        );
        for s in ["", "a", "ab", "abc", "abcd", "abcde", "abcdef", "ünï"] {
            let e = b32encode(s.as_bytes());
            assert_eq!(e.len() % 8, 0);
            if !s.is_empty() {
                assert_eq!(b32decode_str(&e).as_deref(), Some(s), "{e}");
            }
        }
        assert_eq!(b32decode_str("not-b32!"), None);
        assert_eq!(b32decode_str("MFRGG==="), Some("abc".into()));
        assert_eq!(b32decode_str("MFRGG=A="), None);
    }

    #[test]
    fn json_like_python() {
        let v = json!({"metadata": {"lr": 0.1, "name": "é\"x", "tags": [1, null, true]}});
        assert_eq!(
            python_json(&v),
            r#"{"metadata": {"lr": 0.1, "name": "\u00e9\"x", "tags": [1, null, true]}}"#
        );
    }

    #[test]
    fn config_files_nest_dotted_keys() {
        let c = read_config("# c\nprotocol=file\nroot_path = /x\nstorage.key=k\nbad\n").unwrap();
        assert_eq!(c["protocol"], "file");
        assert_eq!(c["root_path"], "/x");
        assert_eq!(c["storage"]["key"], "k");
        assert!(read_config("a.=1").unwrap_err().contains("`a.`"));
    }

    #[test]
    fn source_links_accumulate_and_reach_a_tracked_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let t = FsspecTracker::new(tmp.path()).unwrap();
        t.add_source("c", "untracked", None).unwrap();
        assert!(!tmp.path().join(b32encode(b"untracked")).exists());
        t.add_metadata("p", &json!({"k": 1}).as_object().unwrap().clone())
            .unwrap();
        for artifact in ["a1", "a2", "a1"] {
            t.add_source("c", "p", Some(artifact)).unwrap();
        }
        let mut names: Vec<_> = t
            .sources("c", None)
            .unwrap()
            .into_iter()
            .filter(|s| s.source_run_id == "p")
            .filter_map(|s| s.artifact_name)
            .collect();
        names.sort();
        assert_eq!(names, ["a1", "a2"]);
        let edge = tmp
            .path()
            .join(b32encode(b"p"))
            .join("descendants")
            .join(b32encode(b"c"));
        assert_eq!(std::fs::read_to_string(edge).unwrap(), "a1\na2\n");
    }

    #[test]
    fn round_trip_and_lineage() {
        let tmp = tempfile::tempdir().unwrap();
        let t = FsspecTracker::new(tmp.path()).unwrap();
        let md = |v: Value| v.as_object().unwrap().clone();
        t.add_metadata("p", &md(json!({"a": 1}))).unwrap();
        t.add_metadata("c", &md(json!({"a": 1, "b": "x"}))).unwrap();
        t.add_metadata("c", &md(json!({"a": 2}))).unwrap();
        assert_eq!(t.metadata("c").unwrap(), md(json!({"a": 2, "b": "x"})));
        let artifact = |path: &str, metadata: Option<Value>| TrackerArtifact {
            name: "model".into(),
            path: path.into(),
            metadata: metadata.map(md),
        };
        t.add_artifact("c", &artifact("/m1", None)).unwrap();
        t.add_artifact("c", &artifact("/m2", Some(json!({"k": "v"}))))
            .unwrap();
        let arts = t.artifacts("c").unwrap();
        assert_eq!(arts["model"].path, "/m2", "the later artifact wins");
        t.add_source("c", "p", None).unwrap();
        t.add_source("c", "ext", Some("data")).unwrap();
        assert_eq!(t.run_ids(None).unwrap(), ["c", "p"]);
        assert_eq!(t.run_ids(Some("p")).unwrap(), ["c"]);
        assert_eq!(t.sources("c", Some("data")).unwrap().len(), 1);
        let l = t.lineage("p").unwrap();
        assert!(l.sources.is_empty());
        assert_eq!(l.descendants[0].source_run_id, "c");
        assert_eq!(t.lineage("c").unwrap().sources.len(), 2);
        assert!(t.metadata("unknown").unwrap().is_empty());
        assert!(FsspecTracker::new(tmp.path().join("missing")).is_err());
    }
}
