//! Workspaces: walking a workspace directory under its ignore file (`.torchxignore` for
//! directory workspaces, `.dockerignore` for image builds) with TorchX's semantics, and
//! TorchX's `DirWorkspaceMixin` (copy the kept files into a new job directory).

#[cfg(feature = "docker")]
pub(crate) mod docker;

use std::fs;
use std::path::Path;

#[cfg(feature = "docker")]
pub use docker::{build_workspace_image, tag_and_push};

use crate::error::{Error, Remedy, Result};
use crate::opts::{Cfg, CfgValue};
use crate::scheduler::WorkspaceSupport;
use crate::specs::{AppDef, Workspace, WorkspaceImage};

/// True when `workspace` is the directory `cwd` itself, where a job that runs in place (local_cwd,
/// slurm without `job_dir`) already finds its files.
pub fn is_current_dir(workspace: &Workspace, cwd: &Path) -> bool {
    let same = |p: &str| match (fs::canonicalize(p), fs::canonicalize(cwd)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    workspace.is_unmapped_single_project() && workspace.projects.keys().all(|p| same(p))
}

/// The ignore file read from the root of each workspace project.
pub const IGNORE_FILE: &str = ".torchxignore";

/// Ignore patterns read from `<root>/<ignore file>`: `#` starts a comment; blank lines and `.`
/// are skipped; `!pattern` re-includes.
fn read_patterns(root: &Path, ignore_name: &str) -> Vec<String> {
    fs::read_to_string(root.join(ignore_name))
        .map(|text| {
            text.lines()
                .map(|l| l.split('#').next().unwrap_or("").trim())
                .filter(|l| !l.is_empty() && *l != ".")
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// TorchX's `_ignore`: (index of the last matching pattern or -1, ignored?). `.` and
/// `Dockerfile.torchx` are never ignored; patterns are fnmatch'ed against the whole relative
/// path (so they are anchored at the root, and `*` crosses `/`).
fn ignore(rel: &str, patterns: &[String]) -> (i64, bool) {
    if rel == "." || rel == DOCKERFILE {
        return (-1, false);
    }
    let mut last = -1;
    let mut ignored = false;
    for (i, p) in patterns.iter().enumerate() {
        if let Some(neg) = p.strip_prefix('!') {
            if fnmatch(neg, rel) {
                (last, ignored) = (i as i64, false);
            }
        } else if fnmatch(p, rel) {
            (last, ignored) = (i as i64, true);
        }
    }
    (last, ignored)
}

/// The Dockerfile a workspace may bring; never ignored.
pub const DOCKERFILE: &str = "Dockerfile.torchx";

/// The files of a workspace directory that its ignore file (`.torchxignore` or `.dockerignore`)
/// keeps, as sorted relative paths. A port of TorchX's `walk_workspace`: ignored directories
/// are not descended into, and inside a kept directory only the patterns after the one that
/// kept it still apply.
pub fn walk_workspace(root: &Path, ignore_name: &str) -> Result<Vec<String>> {
    let patterns = read_patterns(root, ignore_name);
    let mut files = Vec::new();
    let mut todo: Vec<(usize, String)> = vec![(0, ".".to_string())];
    while let Some((first, rel_dir)) = todo.pop() {
        let active = &patterns[first.min(patterns.len())..];
        let dir = if rel_dir == "." {
            root.to_path_buf()
        } else {
            root.join(&rel_dir)
        };
        // Directories, files and links; sockets, FIFOs and devices have no content to ship
        // (reading a FIFO would block), and are skipped as tar skips sockets.
        let mut entries: Vec<(String, bool)> = fs::read_dir(&dir)
            .map_err(io(format!("reading {}", dir.display())))?
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let kind = e.file_type().ok()?;
                let name = e.file_name().to_string_lossy().into_owned();
                if kind.is_dir() || kind.is_file() || kind.is_symlink() {
                    Some((name, kind.is_dir()))
                } else {
                    log::debug!("workspace: skipping {} (not a file)", e.path().display());
                    None
                }
            })
            .collect();
        entries.sort();
        for (name, is_dir) in entries {
            let rel = if rel_dir == "." {
                name
            } else {
                format!("{rel_dir}/{name}")
            };
            let (last, ignored) = ignore(&rel, active);
            if ignored {
                continue;
            }
            if is_dir {
                todo.push(((first as i64 + last + 1) as usize, rel));
            } else {
                files.push(rel);
            }
        }
    }
    files.sort();
    Ok(files)
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

fn copy_file(src: &Path, dst: &Path) -> Result<()> {
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    }
    let meta = fs::symlink_metadata(src).map_err(io(format!("reading {}", src.display())))?;
    if meta.file_type().is_symlink() {
        let link = fs::read_link(src).map_err(io(format!("reading {}", src.display())))?;
        std::os::unix::fs::symlink(&link, dst).map_err(io(format!("linking {}", dst.display())))
    } else {
        fs::copy(src, dst)
            .map(drop)
            .map_err(io(format!("copying {}", src.display())))
    }
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
            copy_file(src, &target.join(src.file_name().unwrap_or_default()))?;
            continue;
        }
        for rel in walk_workspace(src, IGNORE_FILE)? {
            copy_file(&src.join(&rel), &target.join(&rel))?;
        }
    }
    Ok(())
}

/// Readies the roles' workspaces for `scheduler` before its dry run (TorchX's `WorkspaceMixin`
/// step): image schedulers get the images to build planned (roles point at them, their
/// workspaces consumed), local_cwd accepts only its own directory, slurm copies or runs in
/// place itself; the rest take none. Reads the workspaces; builds nothing.
pub fn prepare(
    app: &mut AppDef,
    scheduler: &str,
    support: WorkspaceSupport,
    cfg: &Cfg,
    cwd: &Path,
) -> Result<Vec<WorkspaceImage>> {
    let Some(first) = app.roles.iter().find(|r| r.workspace.is_some()) else {
        return Ok(Vec::new());
    };
    let described = format!(
        "role `{}` has workspace `{}`",
        first.name,
        first
            .workspace
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    );
    match support {
        WorkspaceSupport::None => Err(Error::unsupported(
            scheduler,
            format!("workspaces ({described})"),
        )
        .with_remedy(Remedy::NoWorkspace)),
        WorkspaceSupport::CurrentDir => {
            for role in &mut app.roles {
                match role.workspace.take() {
                    Some(ws) if !is_current_dir(&ws, cwd) => {
                        return Err(Error::arg(format!(
                            "{scheduler} runs jobs in the current directory ({}), but role `{}` \
                             has workspace `{ws}`: run from that directory",
                            cwd.display(),
                            role.name
                        ))
                        .with_remedy(Remedy::NoWorkspace))
                    }
                    _ => {}
                }
            }
            Ok(Vec::new())
        }
        WorkspaceSupport::Directory => Ok(Vec::new()),
        WorkspaceSupport::LocalImage => plan_images(app, None, scheduler),
        WorkspaceSupport::PushedImage => match cfg.get("image_repo") {
            Some(CfgValue::Str(repo)) if !repo.is_empty() => {
                plan_images(app, Some(repo), scheduler)
            }
            _ => Err(Error::config(format!(
                "{scheduler}: {described}, built into an image the job pulls from a registry: \
                 set the run option image_repo to <registry>/<repository> (in the run options, \
                 or in .torchxconfig's [{scheduler}] section)"
            ))
            .with_remedy(Remedy::NoWorkspace)),
        },
    }
}

#[cfg(feature = "docker")]
fn plan_images(
    app: &mut AppDef,
    push_to: Option<&str>,
    scheduler: &str,
) -> Result<Vec<WorkspaceImage>> {
    docker::plan_images(app, push_to, scheduler)
}

#[cfg(not(feature = "docker"))]
fn plan_images(_: &mut AppDef, _: Option<&str>, scheduler: &str) -> Result<Vec<WorkspaceImage>> {
    Err(Error::unsupported(
        scheduler,
        "workspace images in this build of torchx (it was built without the `docker` feature)",
    ))
}

/// Builds (and pushes) the images [`prepare`] planned, before the job is submitted.
pub async fn build_images(images: &[WorkspaceImage], scheduler: &str, cfg: &Cfg) -> Result<()> {
    #[cfg(feature = "docker")]
    {
        let quiet = cfg.get("quiet") == Some(&CfgValue::Bool(true));
        docker::build_images(images, scheduler, quiet).await
    }
    #[cfg(not(feature = "docker"))]
    match (images, cfg) {
        ([], _) => Ok(()),
        _ => Err(Error::unsupported(
            scheduler,
            "workspace images in this build of torchx",
        )),
    }
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

    /// A socket and a FIFO in a workspace are skipped: no content, and reading a FIFO would
    /// block (a workspace of /tmp once failed on a socket there).
    #[test]
    fn special_files_are_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("train.py"), "").unwrap();
        std::os::unix::fs::symlink("train.py", tmp.path().join("link.py")).unwrap();
        let _socket =
            std::os::unix::net::UnixListener::bind(tmp.path().join("agent.sock")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(tmp.path().join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(
            walk_workspace(tmp.path(), IGNORE_FILE).unwrap(),
            ["link.py", "train.py"]
        );
    }

    fn tree(files: &[&str], ignore_name: &str, ignore_text: &str) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for f in files {
            let p = tmp.path().join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, "").unwrap();
        }
        fs::write(tmp.path().join(ignore_name), ignore_text).unwrap();
        tmp
    }

    const TABLE: &str = "
        # comment

        # dirs/files
        ignoredir
        ignorefile
        three/part/ignore

        # globs
        */ignorefileglo*1
        **/ignorefileglob2
        dir?

        # inverse patterns
        unignore
        !unignore

        # ignore .
        .
    ";

    /// TorchX's `test_torchxignore` / `test_dockerignore` table.
    #[test]
    fn torchx_ignore_table() {
        let files = [
            "ignoredir/bar",
            "ignoredir/recursive/bar",
            "three/part/ignore/foo/bar",
            "dir1/bar",
            "dir/ignorefileglob1",
            "dir/recursive/ignorefileglob2",
            "dir/ignorefile",
            "ignorefile",
            "ignorefilesuffix",
            "dir/file",
            "foo.sh",
            "unignore",
        ];
        let t = tree(&files, ".dockerignore", TABLE);
        assert_eq!(
            walk_workspace(t.path(), ".dockerignore").unwrap(),
            [
                ".dockerignore",
                "dir/file",
                "dir/ignorefile",
                "foo.sh",
                "ignorefilesuffix",
                "unignore"
            ]
        );
    }

    /// TorchX's `test_dockerignore_include`: inside a re-included directory only the later
    /// patterns apply.
    #[test]
    fn torchx_ignore_include_table() {
        let files = [
            "Dockerfile.torchx",
            "timm_app.py",
            "bigfile",
            "some_dir/a",
            "some_dir/b",
            "some_dir/ignore1",
            "some_dir/ignore2",
            "some_dir/subdir/a",
            "some_dir/subdir/b",
            "some_dir/subdir/ignore3",
        ];
        let text = "*\n!timm_app.py\n**/a\n!some_dir\n**/ignore1\nsome_dir/ignore2\nsome_dir/subdir/ignore3\n";
        let t = tree(&files, ".dockerignore", text);
        assert_eq!(
            walk_workspace(t.path(), ".dockerignore").unwrap(),
            [
                "Dockerfile.torchx",
                "some_dir/a",
                "some_dir/b",
                "some_dir/subdir/a",
                "some_dir/subdir/b",
                "timm_app.py"
            ]
        );
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
