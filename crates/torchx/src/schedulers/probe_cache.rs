//! Backend facts that dry runs need (the Slurm version and partitions, LSF hosts), cached in
//! the state dir for a few minutes so a dry run does not ask the cluster every time. An entry
//! is keyed by the files that would change with the cluster (the command's binary, its
//! configuration, each with its modification time), so a changed cluster is noticed at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// How long a cached probe is trusted.
pub(crate) const VALID: Duration = Duration::from_secs(300);

/// One cached probe: a JSON file in the state dir.
#[derive(Debug, Clone)]
pub(crate) struct ProbeCache {
    file: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Entry<T> {
    key: String,
    /// Seconds since the epoch.
    at: u64,
    probe: T,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl ProbeCache {
    /// The cache kept in `file`.
    pub(crate) fn new(file: PathBuf) -> ProbeCache {
        ProbeCache { file }
    }

    /// The probe cached under `key`, while it is fresh.
    pub(crate) fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        let text = std::fs::read_to_string(&self.file).ok()?;
        let entry: Entry<T> = serde_json::from_str(&text).ok()?;
        let fresh = now().saturating_sub(entry.at) < VALID.as_secs();
        (entry.key == key && fresh).then_some(entry.probe)
    }

    /// Best effort: a cache that cannot be written only costs the next command a probe.
    pub(crate) fn put<T: Serialize>(&self, key: &str, probe: &T) {
        let entry = Entry {
            key: key.to_string(),
            at: now(),
            probe,
        };
        let dir = self.file.parent().unwrap_or(Path::new("."));
        let written = crate::schedulers::create_private_dir(dir)
            .ok()
            .and_then(|()| serde_json::to_vec(&entry).ok())
            .map(|bytes| {
                // Written whole then renamed: a concurrent reader sees the old file or the new.
                let tmp = self
                    .file
                    .with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, &self.file))
            });
        if let Some(Err(e)) = written {
            log::debug!("could not cache a probe in {}: {e}", self.file.display());
        }
    }
}

/// A cache key part: `path@mtime` (`@0` for a missing file).
pub(crate) fn stamp(path: &Path) -> String {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let nanos = modified
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    format!("{}@{nanos}", path.display())
}

/// Where `program` is on PATH (empty if nowhere).
pub(crate) fn on_path(program: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_served_under_its_own_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ProbeCache::new(dir.path().join("sub/probe.json"));
        assert_eq!(cache.get::<Vec<u32>>("k"), None);
        cache.put("k", &vec![1u32, 2]);
        assert_eq!(cache.get::<Vec<u32>>("k"), Some(vec![1, 2]));
        assert_eq!(cache.get::<Vec<u32>>("other cluster"), None);
    }

    #[test]
    fn a_stale_probe_is_not_served() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("probe.json");
        let stale = now() - VALID.as_secs() - 1;
        std::fs::write(&file, format!(r#"{{"key":"k","at":{stale},"probe":[1]}}"#)).unwrap();
        let cache = ProbeCache::new(file.clone());
        assert_eq!(cache.get::<Vec<u32>>("k"), None);
        std::fs::write(&file, "not json").unwrap();
        assert_eq!(
            cache.get::<Vec<u32>>("k"),
            None,
            "a damaged cache is ignored"
        );
    }

    #[test]
    fn a_stamp_changes_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("slurm.conf");
        let missing = stamp(&f);
        std::fs::write(&f, "a").unwrap();
        assert_ne!(stamp(&f), missing);
    }
}
