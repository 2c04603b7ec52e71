//! Pre-flight: the checks of a job that are certain and cheap, made before it is submitted, so
//! that a job that would die in its first second is refused at once instead of after its
//! wait in a queue. Only what cannot go otherwise is refused: a script the job runs from the
//! directory it runs in (the submitter's, or a copy of it) that is not there, an entrypoint
//! given as a path that does not exist. Everything else (modules, commands on the nodes' PATH,
//! files a job makes itself before it uses them) is left to the job.

use std::path::Path;

use crate::specs::{AppDef, Role};

/// A file a role's command needs in the directory it runs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Needed {
    /// The role.
    pub role: String,
    /// What it is: `script`, `entrypoint`.
    pub what: &'static str,
    /// The path as the command says it.
    pub path: String,
}

/// The files `role`'s command needs where it runs: the entrypoint when it is a path; the
/// script of `python SCRIPT`, `torchrun ... SCRIPT` (the first argument ending in `.py`, not a
/// `-m` or `-c` run), `bash SCRIPT`/`sh SCRIPT`, and the first word of `sh -c "WORD ..."`
/// when it is a path (TorchX's `utils.sh`).
pub(crate) fn needed(role: &Role) -> Vec<Needed> {
    let need = |what, path: &str| Needed {
        role: role.name.clone(),
        what,
        path: path.to_string(),
    };
    let mut out = Vec::new();
    let entrypoint = &role.entrypoint;
    if entrypoint.contains('/') && !entrypoint.contains('$') && !has_shell_syntax(entrypoint) {
        out.push(need("entrypoint", entrypoint));
    }
    let program = Path::new(&role.entrypoint)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let args = &role.args;
    let is_python = program.starts_with("python") || program == "torchrun";
    if is_python
        && !args
            .iter()
            .any(|a| a == "-m" || a == "-c" || a == "--module")
    {
        if let Some(script) = args
            .iter()
            .find(|a| a.ends_with(".py") && !a.starts_with('-'))
        {
            out.push(need("script", script));
        }
    }
    if matches!(program, "sh" | "bash") {
        match args.first().map(String::as_str) {
            Some("-c") => {
                // The command's words, when it is one simple command (TorchX's `utils.sh`,
                // `dist.ddp`'s `torchrun ...`): the same rules apply to it.
                let command = args.get(1).map(String::as_str).unwrap_or("");
                let words: Option<Vec<String>> = command.split_whitespace().map(word).collect();
                if let Some((first, rest)) = words.as_ref().and_then(|w| w.split_first()) {
                    if !rest.is_empty() || first.contains('/') {
                        let inner = Role::new(&role.name, &role.image)
                            .with_entrypoint(first.as_str())
                            .with_args(rest.iter().cloned());
                        out.extend(needed(&inner));
                    }
                    if !first.contains('/') && looks_like_path(first) {
                        out.push(need("script", first));
                    }
                }
            }
            Some(script) if !script.starts_with('-') => out.push(need("script", script)),
            _ => {}
        }
    }
    out
}

/// A shell word without its quotes, if it is a plain one: `'anything'`, or `"x"` and `x`
/// holding no shell syntax (`None` for a command this reading cannot follow).
fn word(w: &str) -> Option<String> {
    if let Some(inner) = w.strip_prefix('\'') {
        let inner = inner.strip_suffix('\'')?;
        return (!inner.contains('\'')).then(|| inner.to_string());
    }
    let inner = match w.strip_prefix('"') {
        Some(rest) => rest.strip_suffix('"')?,
        None => w,
    };
    (!inner.contains(['\'', '"', '\\']) && !has_shell_syntax(inner)).then(|| inner.to_string())
}

fn has_shell_syntax(word: &str) -> bool {
    word.contains(['`', '*', '?', '(', ')', '{', '}', ';', '&', '|', '<', '>'])
}

/// A word that names a file rather than a command or shell syntax.
fn looks_like_path(word: &str) -> bool {
    (word.contains('/') || word.ends_with(".sh") || word.ends_with(".py"))
        && !word.contains(['$', '='])
        && !has_shell_syntax(word)
}

/// The files `app`'s roles need (see [`needed`]) that are not in `dir`, the directory its
/// commands run in, each said as a problem: the job would fail at once.
pub(crate) fn check_files(scheduler: &str, app: &AppDef, dir: &Path) -> Vec<String> {
    app.roles
        .iter()
        .flat_map(needed)
        .filter(|n| !dir.join(&n.path).exists())
        .map(|n| {
            format!(
                "role `{}`: {} `{}` does not exist in {} (where the job runs on {scheduler})",
                n.role,
                n.what,
                n.path,
                dir.display()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(entrypoint: &str, args: &[&str]) -> Role {
        Role::new("r", ".")
            .with_entrypoint(entrypoint)
            .with_args(args.iter().copied())
    }

    #[test]
    fn what_a_command_needs() {
        let paths = |r: &Role| -> Vec<String> { needed(r).into_iter().map(|n| n.path).collect() };
        assert_eq!(
            paths(&role("python", &["train.py", "--lr", "1"])),
            ["train.py"]
        );
        assert_eq!(
            paths(&role("python", &["-u", "x/train.py"])),
            ["x/train.py"]
        );
        assert!(paths(&role("python", &["-m", "pkg.train.py"])).is_empty());
        assert!(paths(&role("python", &["-c", "print(1)"])).is_empty());
        assert_eq!(
            paths(&role(
                "torchrun",
                &[
                    "--nnodes",
                    "1",
                    "--nproc_per_node",
                    "2",
                    "--tee",
                    "3",
                    "train.py",
                    "--x"
                ]
            )),
            ["train.py"]
        );
        assert_eq!(paths(&role("bash", &["work.sh"])), ["work.sh"]);
        assert_eq!(paths(&role("sh", &["-c", "./run.sh a b"])), ["./run.sh"]);
        assert_eq!(
            paths(&role("sh", &["-c", "python3 t/x.py --lr 1"])),
            ["t/x.py"]
        );
        assert_eq!(
            paths(&role(
                "bash",
                &[
                    "-c",
                    "torchrun --rdzv_id '${app_id}' --nnodes 1 --role '' train.py --x 1"
                ]
            )),
            ["train.py"]
        );
        assert!(paths(&role("sh", &["-c", "cd x && python y.py"])).is_empty());
        assert!(paths(&role("sh", &["-c", "echo hi; ls"])).is_empty());
        assert!(paths(&role("sh", &["-c", "$HOME/x.sh"])).is_empty());
        assert_eq!(paths(&role("./bin/tool", &[])), ["./bin/tool"]);
        assert!(paths(&role("echo", &["a.py"])).is_empty());
    }

    #[test]
    fn a_missing_file_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("train.py"), "").unwrap();
        let app = |r: Role| AppDef::new("a", vec![r]);
        assert!(
            check_files("local_cwd", &app(role("python", &["train.py"])), dir.path()).is_empty()
        );
        let found = check_files("slurm", &app(role("python", &["tain.py"])), dir.path());
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].contains("script `tain.py` does not exist"),
            "{found:?}"
        );
    }
}
