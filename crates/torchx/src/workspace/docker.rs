//! Docker workspaces (TorchX's `DockerWorkspaceMixin`), for every container scheduler: build the
//! workspace on top of the role's image (the workspace's own `Dockerfile.torchx`, else TorchX's
//! default), honouring `.dockerignore` with TorchX's semantics, and push it to the `image_repo`
//! registry for remote schedulers. Images are named after a hash of their base image and build
//! context, so a dry run knows every name without building, and an unchanged workspace reuses
//! its image without building or pushing.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use bollard::auth::DockerCredentials;
use bollard::query_parameters::{BuildImageOptions, PushImageOptions};
use bollard::Docker;
use futures_util::StreamExt;
use regex::Regex;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{walk_workspace, DOCKERFILE};
use crate::blocking::blocking;
use crate::error::{Error, ErrorKind, Result};
use crate::specs::{AppDef, Workspace, WorkspaceImage};

/// TorchX's default `Dockerfile.torchx`.
pub(crate) const DEFAULT_DOCKERFILE: &str = "ARG IMAGE\nFROM $IMAGE\n\nCOPY . .\n";
/// The repository of workspace images that are not pushed.
pub(crate) const LOCAL_REPO: &str = "torchx-workspace";
/// The ignore file of image builds.
pub(crate) const IGNORE_FILE: &str = ".dockerignore";

/// The build context: every project's kept files under its target directory, plus the default
/// Dockerfile when the workspace brings none. Deterministic (sorted, zeroed times), so equal
/// workspaces give equal bytes.
pub(crate) fn build_context(workspace: &Workspace) -> Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut has_dockerfile = false;
    let append = |tar: &mut tar::Builder<Vec<u8>>, name: &str, mode: u32, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(mode);
        h.set_mtime(0);
        h.set_cksum();
        tar.append_data(&mut h, name, data)
            .map_err(|e| Error::io(format!("adding {name} to the build context"), e))
    };
    for (src, dst) in &workspace.projects {
        let src = Path::new(src);
        let prefix = dst.trim_matches('/');
        let join = |rel: &str| {
            if prefix.is_empty() {
                rel.to_string()
            } else {
                format!("{prefix}/{rel}")
            }
        };
        let files = if src.is_file() {
            vec![src
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()]
        } else {
            walk_workspace(src, IGNORE_FILE)?
        };
        for rel in files {
            let path = if src.is_file() {
                src.to_path_buf()
            } else {
                src.join(&rel)
            };
            let name = join(&rel);
            // A symbolic link (a venv's `lib64 -> lib`) goes in as a link, as `docker build`
            // sends it: reading through it would read a directory, or leave the workspace.
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path)
                    .map_err(|e| Error::io(format!("reading link {}", path.display()), e))?;
                let mut h = tar::Header::new_gnu();
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                h.set_mode(0o777);
                h.set_mtime(0);
                tar.append_link(&mut h, &name, &target)
                    .map_err(|e| Error::io(format!("adding {name} to the build context"), e))?;
                continue;
            }
            let data = std::fs::read(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            let mode = std::fs::metadata(&path)
                .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
                .unwrap_or(0o644);
            has_dockerfile |= name == DOCKERFILE;
            append(&mut tar, &name, mode, &data)?;
        }
    }
    if !has_dockerfile {
        append(&mut tar, DOCKERFILE, 0o644, DEFAULT_DOCKERFILE.as_bytes())?;
    }
    tar.into_inner()
        .map_err(|e| Error::io("finishing the build context", e))
}

/// `<repo>:<first 128 bits of sha256(base image, context)>`.
pub(crate) fn image_name(repo: &str, base_image: &str, context: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(base_image.as_bytes());
    h.update([0u8]);
    h.update(context);
    let hex: String = h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{repo}:{hex}")
}

/// An image repository as Docker names one: `[registry[:port]/]path`, lowercase path
/// components, no tag or digest.
static IMAGE_REPO_RE: LazyLock<Regex> = LazyLock::new(|| {
    let path = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*";
    let host = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?";
    Regex::new(&format!(
        r"^(?:{host}(?:\.{host})*(?::[0-9]+)?/)?{path}(?:/{path})*$"
    ))
    .expect("valid regex")
});

fn check_image_repo(scheduler: &str, repo: &str) -> Result<()> {
    if repo.len() <= 255 && IMAGE_REPO_RE.is_match(repo) {
        return Ok(());
    }
    Err(Error::config(format!(
        "{scheduler}: image_repo `{repo}` is not an image repository: give \
         [registry[:port]/]path with lowercase path components and no tag, e.g. \
         registry.example.com:5000/team/trainer"
    )))
}

/// Plans the images `app`'s workspaces are built into: every role with a workspace is pointed
/// at its image (roles sharing a base image and workspace share one) and its workspace is
/// cleared, being part of that image now. Images are pushed to `push_to` (an `image_repo`) when
/// given, else named `torchx-workspace:<hash>` on the local engine. Reads the workspaces;
/// builds nothing.
pub(crate) fn plan_images(
    app: &mut AppDef,
    push_to: Option<&str>,
    scheduler: &str,
) -> Result<Vec<WorkspaceImage>> {
    if let Some(repo) = push_to {
        check_image_repo(scheduler, repo)?;
    }
    let repo = push_to.unwrap_or(LOCAL_REPO);
    let mut images: Vec<WorkspaceImage> = Vec::new();
    for role in &mut app.roles {
        let Some(workspace) = role.workspace.take() else {
            continue;
        };
        let context = build_context(&workspace)?;
        let image = image_name(repo, &role.image, &context);
        match images.iter_mut().find(|i| i.image == image) {
            Some(planned) => planned.roles.push(role.name.clone()),
            None => images.push(WorkspaceImage {
                roles: vec![role.name.clone()],
                base_image: role.image.clone(),
                workspace,
                image: image.clone(),
                push: push_to.is_some(),
            }),
        }
        role.image = image;
    }
    Ok(images)
}

/// Connects to the Docker engine named by `DOCKER_HOST` (else the default socket).
pub(crate) async fn connect(scheduler: &str) -> Result<Docker> {
    let unavailable = |what: &str, e: bollard::errors::Error| {
        Error::backend_caused_by(
            scheduler,
            format!("{what} the Docker engine (is dockerd running? DOCKER_HOST?)"),
            ErrorKind::Unavailable,
            e,
        )
    };
    let docker =
        Docker::connect_with_defaults().map_err(|e| unavailable("cannot connect to", e))?;
    docker
        .negotiate_version()
        .await
        .map_err(|e| unavailable("cannot reach", e))
}

/// Builds (and pushes) the planned images that are not there yet: an image the registry already
/// holds is neither built nor pushed; one the local engine holds is not built again.
pub(crate) async fn build_images(
    images: &[WorkspaceImage],
    scheduler: &str,
    quiet: bool,
) -> Result<()> {
    if images.is_empty() {
        return Ok(());
    }
    let docker = connect(scheduler).await?;
    for planned in images {
        let workspace = planned.workspace.clone();
        let context = blocking(scheduler, move || build_context(&workspace)).await?;
        let (repo, _) = planned
            .image
            .rsplit_once(':')
            .unwrap_or((&planned.image, ""));
        let now = image_name(repo, &planned.base_image, &context);
        if now != planned.image {
            return Err(Error::arg(format!(
                "workspace `{}` changed since the dry run planned image {} (it is now {now}); \
                 run again",
                planned.workspace, planned.image
            )));
        }
        let registry = registry_of(&planned.image).to_string();
        let creds = if planned.push {
            let registry = registry.clone();
            blocking(scheduler, move || credentials(&registry)).await?
        } else {
            None
        };
        if planned.push
            && docker
                .inspect_registry_image(&planned.image, creds.clone())
                .await
                .is_ok()
        {
            log::info!(
                "workspace unchanged: {} is already in its registry",
                planned.image
            );
            continue;
        }
        if docker.inspect_image(&planned.image).await.is_ok() {
            log::info!("workspace unchanged: reusing image {}", planned.image);
        } else {
            build(&docker, scheduler, planned, context, quiet).await?;
        }
        if planned.push {
            push(&docker, scheduler, &planned.image, &registry, creds).await?;
        }
    }
    Ok(())
}

/// Builds `workspace` on top of `base_image` into a local `torchx-workspace:<hash>` image (an
/// unchanged workspace reuses it) and returns the image's id (`sha256:...`): TorchX's
/// `DockerWorkspaceMixin.build_workspace_and_update_role` for Python schedulers.
pub async fn build_workspace_image(
    base_image: &str,
    workspace: &Workspace,
    scheduler: &str,
    quiet: bool,
) -> Result<String> {
    let owned = workspace.clone();
    let context = blocking(scheduler, move || build_context(&owned)).await?;
    let planned = WorkspaceImage {
        roles: Vec::new(),
        base_image: base_image.to_string(),
        workspace: workspace.clone(),
        image: image_name(LOCAL_REPO, base_image, &context),
        push: false,
    };
    let docker = connect(scheduler).await?;
    let inspected = match docker.inspect_image(&planned.image).await {
        Ok(found) => found,
        Err(_) => build(&docker, scheduler, &planned, context, quiet).await?,
    };
    inspected.id.ok_or_else(|| {
        Error::backend(
            scheduler,
            format!("the engine gave no id for {}", planned.image),
        )
    })
}

/// Tags local image `local` (a name or id) as `repo:tag` and pushes it with the registry's
/// Docker config credentials: TorchX's `DockerWorkspaceMixin.push_images`.
pub async fn tag_and_push(local: &str, repo: &str, tag: &str, scheduler: &str) -> Result<()> {
    check_image_repo(scheduler, repo)?;
    let docker = connect(scheduler).await?;
    let opts = bollard::query_parameters::TagImageOptions {
        repo: Some(repo.to_string()),
        tag: Some(tag.to_string()),
    };
    docker
        .tag_image(local, Some(opts))
        .await
        .map_err(engine_error(
            scheduler,
            format!("tagging {local} as {repo}:{tag}"),
        ))?;
    let image = format!("{repo}:{tag}");
    let registry = registry_of(&image).to_string();
    let lookup = registry.clone();
    let creds = blocking(scheduler, move || credentials(&lookup)).await?;
    push(&docker, scheduler, &image, &registry, creds).await
}

/// Builds the workspace image and returns it as the engine sees it.
async fn build(
    docker: &Docker,
    scheduler: &str,
    planned: &WorkspaceImage,
    context: Vec<u8>,
    quiet: bool,
) -> Result<bollard::models::ImageInspect> {
    let base = &planned.base_image;
    log::info!(
        "building workspace image {} on top of {base}",
        planned.image
    );
    // The base image may have to be pulled from a registry that wants credentials.
    let base_registry = registry_of(base).to_string();
    let base_creds = blocking(scheduler, move || {
        credentials(&base_registry).map(|c| c.map(|c| HashMap::from([(base_registry, c)])))
    })
    .await?;
    let opts = BuildImageOptions {
        dockerfile: DOCKERFILE.into(),
        t: Some(planned.image.clone()),
        rm: true,
        buildargs: Some(HashMap::from([
            ("IMAGE".to_string(), base.clone()),
            ("WORKSPACE".to_string(), planned.workspace.to_string()),
        ])),
        labels: Some(HashMap::from([(
            "torchx.pytorch.org/version".to_string(),
            crate::VERSION.to_string(),
        )])),
        ..Default::default()
    };
    let body = bollard::body_full(bytes::Bytes::from(context));
    let mut events = docker.build_image(opts, base_creds, Some(body));
    while let Some(event) = events.next().await {
        let event = event.map_err(engine_error(
            scheduler,
            "building the workspace image".to_string(),
        ))?;
        if let Some(err) = event.error {
            return Err(Error::backend(
                scheduler,
                format!("building the workspace image on top of {base}: {err}"),
            ));
        }
        if let (false, Some(msg)) = (quiet, event.stream) {
            let msg = msg.trim_end();
            if !msg.is_empty() {
                log::info!("{msg}");
            }
        }
    }
    docker
        .inspect_image(&planned.image)
        .await
        .map_err(engine_error(
            scheduler,
            format!("the workspace image {} was not built", planned.image),
        ))
}

async fn push(
    docker: &Docker,
    scheduler: &str,
    image: &str,
    registry: &str,
    creds: Option<DockerCredentials>,
) -> Result<()> {
    log::info!("pushing image {image}");
    let (repo, tag) = image.rsplit_once(':').unwrap_or((image, "latest"));
    let opts = PushImageOptions {
        tag: Some(tag.to_string()),
        ..Default::default()
    };
    let had_creds = creds.is_some();
    let mut events = docker.push_image(repo, Some(opts), creds);
    while let Some(event) = events.next().await {
        // The engine says a push failed in the stream (an event's error) or by ending it with
        // an error: either way the same words (`no basic auth credentials`) say why.
        let (failure, cause) = match event {
            Ok(e) => (e.error_detail.and_then(|d| d.message).or(e.error), None),
            Err(e) => (Some(e.to_string()), Some(e)),
        };
        if let Some(message) = failure {
            let denied = [
                "unauthorized",
                "authentication required",
                "no basic auth",
                "denied",
            ]
            .iter()
            .any(|w| message.to_lowercase().contains(w));
            let hint = match (denied, had_creds) {
                (true, false) => format!(
                    " (no credentials for {registry} in {}: run `docker login {registry}`)",
                    config_path().display()
                ),
                (true, true) => format!(
                    " (the credentials for {registry} in {} were refused)",
                    config_path().display()
                ),
                _ => String::new(),
            };
            let kind = if denied {
                ErrorKind::PermissionDenied
            } else {
                ErrorKind::Backend
            };
            let error =
                Error::backend(scheduler, format!("pushing image {image}: {message}{hint}"))
                    .with_kind(kind);
            return Err(match cause {
                Some(cause) => error.with_source(cause),
                None => error,
            });
        }
    }
    Ok(())
}

/// A Docker Engine API error as ours, keeping it as the cause: the engine's own message and
/// its HTTP status's kind when it answered, else `Unavailable` (it could not be reached).
pub(crate) fn engine_error(
    scheduler: &str,
    what: String,
) -> impl FnOnce(bollard::errors::Error) -> Error + '_ {
    move |e| {
        let (detail, kind) = match &e {
            bollard::errors::Error::DockerResponseServerError {
                message,
                status_code,
            } => (message.clone(), ErrorKind::from_http_status(*status_code)),
            other => (other.to_string(), ErrorKind::Unavailable),
        };
        Error::backend_caused_by(scheduler, format!("{what}: {detail}"), kind, e)
    }
}

/// The registry an image name refers to: its first component when that is a host (has a `.` or
/// `:`, or is `localhost`), else Docker Hub.
pub(crate) fn registry_of(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first,
        _ => DOCKER_HUB,
    }
}

const DOCKER_HUB: &str = "docker.io";

/// A registry as Docker config keys name it (`https://index.docker.io/v1/`, `host:port`, ...),
/// normalised to compare with [`registry_of`].
fn normalise_registry(key: &str) -> &str {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key);
    match host {
        "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB,
        h => h,
    }
}

/// Docker's client configuration: `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
pub(crate) fn config_path() -> PathBuf {
    match std::env::var_os("DOCKER_CONFIG").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("config.json"),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".docker")
            .join("config.json"),
    }
}

#[derive(Debug, Default, Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
    #[serde(rename = "credsStore")]
    creds_store: Option<String>,
    #[serde(rename = "credHelpers", default)]
    cred_helpers: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct AuthEntry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

/// The credentials Docker's own client would use for `registry`: a credential helper
/// (`credHelpers`, else `credsStore`), else `auths`. None when the config names none.
pub(crate) fn credentials(registry: &str) -> Result<Option<DockerCredentials>> {
    let path = config_path();
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    let config: DockerConfig = serde_json::from_str(&text).map_err(|e| {
        Error::config(format!(
            "{} is not Docker's config.json: {e}",
            path.display()
        ))
        .with_source(e)
    })?;
    credentials_from(&config, registry, &path)
}

fn credentials_from(
    config: &DockerConfig,
    registry: &str,
    path: &Path,
) -> Result<Option<DockerCredentials>> {
    let helper = config
        .cred_helpers
        .iter()
        .find(|(k, _)| normalise_registry(k) == registry)
        .map(|(k, h)| (k.as_str(), h))
        .or_else(|| config.creds_store.as_ref().map(|h| (registry, h)));
    if let Some((server, helper)) = helper {
        let server = if server == DOCKER_HUB {
            "https://index.docker.io/v1/"
        } else {
            server
        };
        return helper_credentials(helper, server);
    }
    let Some((server, entry)) = config
        .auths
        .iter()
        .find(|(k, _)| normalise_registry(k) == registry)
    else {
        return Ok(None);
    };
    let (mut username, mut password) = (entry.username.clone(), entry.password.clone());
    if let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) {
        use base64::Engine as _;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth)
            .ok()
            .and_then(|b| String::from_utf8(b).ok());
        let Some((user, pass)) = decoded.as_deref().and_then(|d| d.split_once(':')) else {
            return Err(Error::config(format!(
                "{}: auths[\"{server}\"].auth is not base64 of user:password",
                path.display()
            )));
        };
        (username, password) = (Some(user.to_string()), Some(pass.to_string()));
    }
    Ok(Some(DockerCredentials {
        username,
        password,
        identitytoken: entry.identitytoken.clone(),
        serveraddress: Some(server.clone()),
        ..Default::default()
    }))
}

/// Asks `docker-credential-<helper> get` for `server`'s credentials, as Docker's client does.
fn helper_credentials(helper: &str, server: &str) -> Result<Option<DockerCredentials>> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let program = format!("docker-credential-{helper}");
    let mut child = Command::new(&program)
        .arg("get")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io(format!("running the Docker credential helper {program}"), e))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(server.as_bytes())
            .map_err(|e| Error::io(format!("writing to {program}"), e))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io(format!("running {program}"), e))?;
    if !out.status.success() {
        // Helpers answer "credentials not found" with a failure.
        log::debug!(
            "{program} has no credentials for {server}: {}",
            String::from_utf8_lossy(&out.stdout).trim()
        );
        return Ok(None);
    }
    #[derive(Deserialize)]
    struct HelperAnswer {
        #[serde(rename = "Username")]
        username: String,
        #[serde(rename = "Secret")]
        secret: String,
    }
    let answer: HelperAnswer = serde_json::from_slice(&out.stdout).map_err(|e| {
        Error::config(format!(
            "{program} answered something else than credentials: {e}"
        ))
        .with_source(e)
    })?;
    // Docker's convention: the user name `<token>` marks an identity token.
    let creds = if answer.username == "<token>" {
        DockerCredentials {
            identitytoken: Some(answer.secret),
            ..Default::default()
        }
    } else {
        DockerCredentials {
            username: Some(answer.username),
            password: Some(answer.secret),
            ..Default::default()
        }
    };
    Ok(Some(DockerCredentials {
        serveraddress: Some(server.to_string()),
        ..creds
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine's errors keep their cause and say what the engine said, with its status's
    /// kind (this is every engine call of the workspace's: build, inspect, tag, push).
    #[test]
    fn engine_errors_keep_their_cause() {
        let e = engine_error("local_docker", "tagging a as b".into())(
            bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                message: "No such image: a".into(),
            },
        );
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert!(
            e.to_string().contains("tagging a as b: No such image: a"),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some());
        let e = engine_error("x", "building".into())(bollard::errors::Error::RequestTimeoutError);
        assert_eq!(e.kind(), ErrorKind::Unavailable);
        assert!(std::error::Error::source(&e).is_some());
    }

    fn names(tar_bytes: &[u8]) -> Vec<String> {
        let mut a = tar::Archive::new(tar_bytes);
        a.entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn context_has_default_dockerfile_ignores_and_is_deterministic() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("main.py"), "print(1)").unwrap();
        std::fs::write(tmp.path().join("big.bin"), "x").unwrap();
        std::fs::write(tmp.path().join(".dockerignore"), "*.bin\n").unwrap();
        let ws = Workspace::parse(tmp.path().to_str().unwrap()).unwrap();
        let a = build_context(&ws).unwrap();
        assert_eq!(names(&a), [".dockerignore", "main.py", DOCKERFILE]);
        assert_eq!(a, build_context(&ws).unwrap());
        assert_eq!(
            image_name("r", "img", &a),
            image_name("r", "img", &build_context(&ws).unwrap())
        );
        assert_ne!(image_name("r", "img", &a), image_name("r", "img2", &a));
        std::fs::write(tmp.path().join("main.py"), "print(2)").unwrap();
        assert_ne!(
            image_name("r", "img", &a),
            image_name("r", "img", &build_context(&ws).unwrap())
        );
    }

    /// A venv in the project (`lib64 -> lib`) and a link out of it go in as links.
    #[test]
    fn symbolic_links_go_in_as_links() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join("venv/lib")).unwrap();
        std::fs::write(tmp.path().join("venv/lib/x.py"), "x").unwrap();
        std::os::unix::fs::symlink("lib", tmp.path().join("venv/lib64")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", tmp.path().join("outside")).unwrap();
        let ws = Workspace::parse(tmp.path().to_str().unwrap()).unwrap();
        let context = build_context(&ws).unwrap();
        let mut a = tar::Archive::new(&context[..]);
        let links: Vec<(String, String)> = a
            .entries()
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.header().entry_type() == tar::EntryType::Symlink)
            .map(|e| {
                let target = e.link_name().unwrap().unwrap().display().to_string();
                (e.path().unwrap().display().to_string(), target)
            })
            .collect();
        assert_eq!(
            links,
            [
                ("outside".to_string(), "/etc/passwd".to_string()),
                ("venv/lib64".to_string(), "lib".to_string())
            ]
        );
    }

    #[test]
    fn plans_one_image_per_base_and_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("main.py"), "print(1)").unwrap();
        let ws = Workspace::parse(tmp.path().to_str().unwrap()).unwrap();
        let role = |name: &str, image: &str| {
            let mut r = crate::specs::Role::new(name, image).with_entrypoint("python");
            r.workspace = Some(ws.clone());
            r
        };
        let mut app = AppDef::new(
            "a",
            vec![
                role("trainer", "base:1"),
                role("reader", "base:1"),
                role("ps", "base:2"),
                crate::specs::Role::new("plain", "base:1").with_entrypoint("x"),
            ],
        );
        let images = plan_images(&mut app, Some("localhost:5001/team/app"), "kubernetes").unwrap();
        assert_eq!(images.len(), 2);
        assert_eq!(images[0].roles, ["trainer", "reader"]);
        assert!(images
            .iter()
            .all(|i| i.push && i.image.starts_with("localhost:5001/team/app:")));
        assert_eq!(app.roles[0].image, images[0].image);
        assert_eq!(app.roles[1].image, images[0].image);
        assert_eq!(app.roles[2].image, images[1].image);
        assert_eq!(app.roles[3].image, "base:1");
        assert!(app.roles.iter().all(|r| r.workspace.is_none()));
        let local = plan_images(&mut app.clone(), None, "local_docker").unwrap();
        assert!(
            local.is_empty(),
            "workspaces were consumed by the first plan"
        );

        for bad in ["Team/App", "host:5000/app:tag", "app@sha256:x", "", "a//b"] {
            let mut app = AppDef::new("a", vec![role("t", "base:1")]);
            let err = plan_images(&mut app, Some(bad), "aws_batch")
                .unwrap_err()
                .to_string();
            assert!(err.contains("image_repo") && err.contains(bad), "{err}");
        }
    }

    #[test]
    fn registries_and_credentials_as_docker_finds_them() {
        assert_eq!(registry_of("localhost:5001/a:b"), "localhost:5001");
        assert_eq!(registry_of("localhost/a"), "localhost");
        assert_eq!(registry_of("ghcr.io/pytorch/torchx:0.7.0"), "ghcr.io");
        assert_eq!(registry_of("team/app:1"), "docker.io");
        assert_eq!(registry_of("busybox"), "docker.io");
        let config: DockerConfig = serde_json::from_str(
            r#"{"auths": {
                "http://localhost:5001/v2/": {"auth": "dXNlcjpwYTpzcw=="},
                "https://index.docker.io/v1/": {"username": "u", "password": "p"},
                "bad.example": {"auth": "!!"}}}"#,
        )
        .unwrap();
        let path = Path::new("config.json");
        let c = credentials_from(&config, "localhost:5001", path)
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.username.as_deref(), c.password.as_deref()),
            (Some("user"), Some("pa:ss"))
        );
        let hub = credentials_from(&config, "docker.io", path)
            .unwrap()
            .unwrap();
        assert_eq!(hub.username.as_deref(), Some("u"));
        assert!(credentials_from(&config, "ghcr.io", path)
            .unwrap()
            .is_none());
        let err = credentials_from(&config, "bad.example", path)
            .unwrap_err()
            .to_string();
        assert!(err.contains("auths[\"bad.example\"].auth"), "{err}");
    }
}
