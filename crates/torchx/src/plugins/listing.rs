//! The `torchx-*` names in each PATH directory, cached in the state dir while the directory is
//! unchanged: reading a large one (`/usr/bin`, a thousand entries) was most of what
//! `torchx --help` cost. An entry is keyed by the directory's device, inode and modification
//! time, which an entry added, removed or renamed changes. A listing read less than
//! [`RACY_SECS`] after that time is not cached: a second change within the time's granularity
//! would leave it unchanged (git's "racy" index entries).

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What every cached name starts with; the listed prefixes (`torchx-`, `torchx-scheduler-`)
/// are this or longer.
pub(super) const CACHED_PREFIX: &str = "torchx-";

/// How old a directory's modification must be for its listing to be cached.
const RACY_SECS: i64 = 2;

/// The listings of the directories of one PATH, from the cache file and read afresh where a
/// directory changed.
pub(super) struct Listings {
    file: PathBuf,
    /// Directory → (its stamp, its names).
    cached: HashMap<String, (String, Vec<String>)>,
    /// The directories asked for, in order: what the cache keeps.
    asked: Vec<String>,
    changed: bool,
}

impl Listings {
    /// The listings cached in `file` (none when it is missing or unreadable).
    pub(super) fn load(file: PathBuf) -> Listings {
        let cached = std::fs::read_to_string(&file)
            .map(|text| parse(&text))
            .unwrap_or_default();
        Listings {
            file,
            cached,
            asked: Vec::new(),
            changed: false,
        }
    }

    /// The names in `dir` (whose metadata is `meta`) that start with [`CACHED_PREFIX`] and
    /// could name a plugin.
    pub(super) fn names(&mut self, dir: &Path, meta: &std::fs::Metadata) -> Vec<String> {
        let stamp = format!(
            "{}:{}:{}.{}",
            meta.dev(),
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec()
        );
        // A path the file's tab-separated lines cannot hold is read every time.
        let Some(key) = dir.to_str().filter(|d| !d.contains(['\t', '\n'])) else {
            return read_names(dir);
        };
        self.asked.push(key.to_string());
        if let Some((cached_stamp, names)) = self.cached.get(key) {
            if *cached_stamp == stamp {
                return names.clone();
            }
        }
        let names = read_names(dir);
        self.changed = true;
        if now_secs() - meta.mtime() >= RACY_SECS {
            self.cached.insert(key.to_string(), (stamp, names.clone()));
        } else {
            self.cached.remove(key);
        }
        names
    }

    /// Writes the listings of the directories asked for, if any changed. Best effort: a cache
    /// that cannot be written only costs the next listing a read.
    pub(super) fn save(self) {
        if !self.changed {
            return;
        }
        let file = self.file;
        let mut text = String::new();
        for dir in &self.asked {
            if let Some((stamp, names)) = self.cached.get(dir) {
                text.push_str(&format!("{dir}\t{stamp}"));
                for name in names {
                    text.push('\t');
                    text.push_str(name);
                }
                text.push('\n');
            }
        }
        let dir = file.parent().unwrap_or(Path::new("."));
        // Written whole then renamed: a concurrent reader sees the old file or the new.
        let tmp = file.with_extension(format!("tmp{}", std::process::id()));
        let written = {
            use std::os::unix::fs::DirBuilderExt;
            // The state dir, private as every scheduler makes it.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
        }
        .and_then(|()| std::fs::write(&tmp, text))
        .and_then(|()| std::fs::rename(&tmp, &file));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            log::debug!("could not cache PATH listings in {}: {e}", file.display());
        }
    }
}

/// `dir\tstamp\tname…` lines; a malformed line is skipped.
fn parse(text: &str) -> HashMap<String, (String, Vec<String>)> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split('\t');
            let dir = fields.next().filter(|d| !d.is_empty())?;
            let stamp = fields.next().filter(|s| !s.is_empty())?;
            let names = fields.map(String::from).collect();
            Some((dir.to_string(), (stamp.to_string(), names)))
        })
        .collect()
}

fn read_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix(CACHED_PREFIX)
                .is_some_and(super::is_plugin_name)
        })
        .collect()
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    fn touch(path: &Path) {
        std::fs::write(path, "").unwrap();
    }

    fn set_mtime(dir: &Path, t: SystemTime) {
        std::fs::File::open(dir).unwrap().set_modified(t).unwrap();
    }

    /// A directory `bin` holding empty files `names`, and a cache file in a state dir not made
    /// yet, both in a temporary directory.
    fn bin_with(names: &[&str]) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, cache) = (tmp.path().join("bin"), tmp.path().join("state/path.tsv"));
        std::fs::create_dir(&dir).unwrap();
        for name in names {
            touch(&dir.join(name));
        }
        (tmp, dir, cache)
    }

    fn listed(cache: &Path, dir: &Path) -> Vec<String> {
        let mut listings = Listings::load(cache.to_path_buf());
        let mut names = listings.names(dir, &std::fs::metadata(dir).unwrap());
        listings.save();
        names.sort();
        names
    }

    /// An unchanged directory is not read again (a name slipped in under the same
    /// modification time is not seen); a changed one is.
    #[test]
    fn a_listing_is_read_again_only_when_its_directory_changes() {
        let (_tmp, dir, cache) = bin_with(&["torchx-a", "python3"]);
        let old = SystemTime::now() - Duration::from_secs(60);
        set_mtime(&dir, old);
        assert_eq!(listed(&cache, &dir), ["torchx-a"]);
        assert!(cache.exists());
        touch(&dir.join("torchx-b"));
        set_mtime(&dir, old);
        assert_eq!(listed(&cache, &dir), ["torchx-a"], "the cached listing");
        set_mtime(&dir, old + Duration::from_secs(1));
        assert_eq!(listed(&cache, &dir), ["torchx-a", "torchx-b"]);
    }

    /// A directory changed within the last seconds is read every time: a second change in the
    /// same tick of its clock would not change its modification time.
    #[test]
    fn a_directory_changed_just_now_is_not_cached() {
        let (_tmp, dir, cache) = bin_with(&["torchx-a"]);
        let now = SystemTime::now();
        set_mtime(&dir, now);
        assert_eq!(listed(&cache, &dir), ["torchx-a"]);
        touch(&dir.join("torchx-b"));
        set_mtime(&dir, now);
        assert_eq!(listed(&cache, &dir), ["torchx-a", "torchx-b"]);
    }

    /// A damaged cache file is ignored and replaced; names that cannot be plugins are not kept.
    #[test]
    fn a_damaged_cache_is_ignored() {
        let (_tmp, dir, cache) = bin_with(&["torchx-ok", "torchx-Bad Name"]);
        set_mtime(&dir, SystemTime::now() - Duration::from_secs(60));
        std::fs::create_dir(cache.parent().unwrap()).unwrap();
        std::fs::write(&cache, "\u{0}garbage\n\t\n").unwrap();
        assert_eq!(listed(&cache, &dir), ["torchx-ok"]);
        let text = std::fs::read_to_string(&cache).unwrap();
        assert!(text.starts_with(&format!("{}\t", dir.display())), "{text}");
    }
}
