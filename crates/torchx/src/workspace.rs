//! Directory workspaces (TorchX's `DirWorkspaceMixin`): copy the workspace's files into a job
//! directory, honouring `.torchxignore` (fnmatch patterns, `!` re-includes, last match wins,
//! ignored directories are not descended into).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::specs::Workspace;

/// The ignore file read from the root of each workspace project.
pub const IGNORE_FILE: &str = ".torchxignore";

/// Parsed `.torchxignore` rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IgnoreRules {
    /// (pattern, negated) in file order.
    rules: Vec<(String, bool)>,
}

impl IgnoreRules {
    /// Parses the file's text: `#` starts a comment, blank lines and `.` are skipped.
    pub fn parse(text: &str) -> Self {
        let rules = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty() && *l != ".")
            .map(|l| match l.strip_prefix('!') {
                Some(p) => (p.trim().to_string(), true),
                None => (l.to_string(), false),
            })
            .collect();
        IgnoreRules { rules }
    }

    /// Whether the relative path `rel` (with `/` separators) is ignored.
    pub fn ignored(&self, rel: &str) -> bool {
        let mut ignored = false;
        for (pat, negated) in &self.rules {
            if fnmatch(pat, rel) {
                ignored = !negated;
            }
        }
        ignored
    }
}

/// Python's `fnmatch.fnmatch` (case-sensitive): `*` matches anything including `/`, `?` one
/// character, `[...]`/`[!...]` a class.
pub fn fnmatch(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    fn go(p: &[char], n: &[char]) -> bool {
        match p.first() {
            None => n.is_empty(),
            Some('*') => (0..=n.len()).any(|i| go(&p[1..], &n[i..])),
            Some('?') => !n.is_empty() && go(&p[1..], &n[1..]),
            Some('[') => {
                let Some(close) = p.iter().skip(2).position(|c| *c == ']').map(|i| i + 2) else {
                    return n.first() == Some(&'[') && go(&p[1..], &n[1..]);
                };
                let Some(c) = n.first() else { return false };
                let (negate, set) = match p[1] {
                    '!' => (true, &p[2..close]),
                    _ => (false, &p[1..close]),
                };
                let mut hit = false;
                let mut i = 0;
                while i < set.len() {
                    if i + 2 < set.len() && set[i + 1] == '-' {
                        hit |= set[i] <= *c && *c <= set[i + 2];
                        i += 3;
                    } else {
                        hit |= set[i] == *c;
                        i += 1;
                    }
                }
                hit != negate && go(&p[close + 1..], &n[1..])
            }
            Some(c) => n.first() == Some(c) && go(&p[1..], &n[1..]),
        }
    }
    go(&p, &n)
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> Error {
    move |e| Error::io(what, e)
}

fn copy_tree(src: &Path, dst: &Path, root: &Path, rules: &IgnoreRules) -> Result<()> {
    fs::create_dir_all(dst).map_err(io(format!("creating {}", dst.display())))?;
    let mut entries: Vec<PathBuf> = fs::read_dir(src)
        .map_err(io(format!("reading {}", src.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        let rel = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        if rules.ignored(&rel) {
            continue;
        }
        let target = dst.join(path.file_name().unwrap_or_default());
        let meta =
            fs::symlink_metadata(&path).map_err(io(format!("reading {}", path.display())))?;
        if meta.is_dir() {
            copy_tree(&path, &target, root, rules)?;
        } else if meta.file_type().is_symlink() {
            let link = fs::read_link(&path).map_err(io(format!("reading {}", path.display())))?;
            std::os::unix::fs::symlink(&link, &target)
                .map_err(io(format!("linking {}", target.display())))?;
        } else {
            fs::copy(&path, &target).map_err(io(format!("copying {}", path.display())))?;
        }
    }
    Ok(())
}

/// Creates `job_dir` (it must not exist; its parent must) and copies every project of the
/// workspace into it (`src` → `job_dir/dst`), skipping what `.torchxignore` ignores.
pub fn copy_into_job_dir(workspace: &Workspace, job_dir: &Path) -> Result<()> {
    fs::create_dir(job_dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Error::config(format!(
            "job_dir `{}` already exists; give a new directory (it is created for the job)",
            job_dir.display()
        )),
        _ => Error::io(format!("creating job_dir {}", job_dir.display()), e),
    })?;
    for (src, dst) in &workspace.projects {
        let src = Path::new(src);
        let target = job_dir.join(dst);
        if src.is_file() {
            fs::create_dir_all(&target).map_err(io(format!("creating {}", target.display())))?;
            let name = src.file_name().unwrap_or_default();
            fs::copy(src, target.join(name)).map_err(io(format!("copying {}", src.display())))?;
            continue;
        }
        let rules = fs::read_to_string(src.join(IGNORE_FILE))
            .map(|t| IgnoreRules::parse(&t))
            .unwrap_or_default();
        copy_tree(src, &target, src, &rules)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_like_python() {
        assert!(fnmatch("*.pyc", "a/b/c.pyc"));
        assert!(fnmatch("data", "data"));
        assert!(!fnmatch("data", "data/x"));
        assert!(fnmatch("data*", "data/x"));
        assert!(fnmatch("f?o", "foo"));
        assert!(fnmatch("[a-c]x", "bx"));
        assert!(!fnmatch("[!a-c]x", "bx"));
        assert!(!fnmatch("*.py", "x.pyc"));
    }

    #[test]
    fn ignore_rules_last_match_wins() {
        let r = IgnoreRules::parse("# comment\n*.log\n!keep.log\n.\n\nbuild # trailing\n");
        assert!(r.ignored("a.log"));
        assert!(!r.ignored("keep.log"));
        assert!(r.ignored("build"));
        assert!(!r.ignored("src/main.py"));
    }

    #[test]
    fn copies_and_ignores() {
        let tmp = tempfile::tempdir().unwrap();
        let src = tmp.path().join("src");
        fs::create_dir_all(src.join("build")).unwrap();
        fs::create_dir_all(src.join("pkg")).unwrap();
        fs::write(src.join(".torchxignore"), "build\n*.log\n").unwrap();
        fs::write(src.join("main.py"), "print(1)").unwrap();
        fs::write(src.join("x.log"), "").unwrap();
        fs::write(src.join("build/out"), "").unwrap();
        fs::write(src.join("pkg/m.py"), "").unwrap();
        let job = tmp.path().join("job");
        let ws = Workspace::parse(src.to_str().unwrap()).unwrap();
        copy_into_job_dir(&ws, &job).unwrap();
        assert!(job.join("main.py").exists() && job.join("pkg/m.py").exists());
        assert!(!job.join("x.log").exists() && !job.join("build").exists());
        let again = copy_into_job_dir(&ws, &job).unwrap_err();
        assert!(again.to_string().contains("already exists"), "{again}");
    }
}
