//! Docker workspaces (TorchX's `DockerWorkspaceMixin`), for every container scheduler: build the
//! workspace on top of the role's image (the workspace's own `Dockerfile.torchx`, else TorchX's
//! default), honouring `.dockerignore` with TorchX's semantics. Images are tagged with a hash of
//! their build context, so an unchanged workspace reuses its image without building.

use std::collections::HashMap;
use std::path::Path;

use bollard::query_parameters::BuildImageOptions;
use bollard::Docker;
use futures_util::StreamExt;

use super::{walk_workspace, DOCKERFILE};
use crate::error::{Error, Result};
use crate::specs::Workspace;

/// TorchX's default `Dockerfile.torchx`.
pub const DEFAULT_DOCKERFILE: &str = "ARG IMAGE\nFROM $IMAGE\n\nCOPY . .\n";
/// The repository of workspace images.
pub const IMAGE_REPO: &str = "torchx-workspace";
/// The ignore file of image builds.
pub const IGNORE_FILE: &str = ".dockerignore";

/// The build context: every project's kept files under its target directory, plus the default
/// Dockerfile when the workspace brings none. Deterministic (sorted, zeroed times), so equal
/// workspaces give equal bytes.
pub fn build_context(workspace: &Workspace) -> Result<Vec<u8>> {
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
            let data = std::fs::read(&path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
            let mode = std::fs::metadata(&path)
                .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
                .unwrap_or(0o644);
            let name = join(&rel);
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

/// `torchx-workspace:<hash of base image and context>` (FNV-1a, 64 bits).
pub fn image_tag(base_image: &str, context: &[u8]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in base_image
        .as_bytes()
        .iter()
        .chain([0u8].iter())
        .chain(context)
    {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{IMAGE_REPO}:{h:016x}")
}

/// Builds (or reuses) the workspace image on top of `base_image`; returns its tag.
pub async fn build_workspace_image(
    docker: &Docker,
    scheduler: &str,
    base_image: &str,
    workspace: &Workspace,
    quiet: bool,
) -> Result<String> {
    let context = build_context(workspace)?;
    let tag = image_tag(base_image, &context);
    if docker.inspect_image(&tag).await.is_ok() {
        log::info!("workspace unchanged: reusing image {tag}");
        return Ok(tag);
    }
    log::info!("building workspace image {tag} on top of {base_image}");
    let opts = BuildImageOptions {
        dockerfile: DOCKERFILE.into(),
        t: Some(tag.clone()),
        rm: true,
        buildargs: Some(HashMap::from([
            ("IMAGE".to_string(), base_image.to_string()),
            ("WORKSPACE".to_string(), workspace.to_string()),
        ])),
        labels: Some(HashMap::from([(
            "torchx.pytorch.org/version".to_string(),
            crate::VERSION.to_string(),
        )])),
        ..Default::default()
    };
    let body = bollard::body_full(bytes::Bytes::from(context));
    let mut events = docker.build_image(opts, None, Some(body));
    while let Some(event) = events.next().await {
        let event = event
            .map_err(|e| Error::backend(scheduler, format!("building the workspace image: {e}")))?;
        if let Some(err) = event.error {
            return Err(Error::backend(
                scheduler,
                format!("building the workspace image on top of {base_image}: {err}"),
            ));
        }
        if let (false, Some(msg)) = (quiet, event.stream) {
            let msg = msg.trim_end();
            if !msg.is_empty() {
                log::info!("{msg}");
            }
        }
    }
    docker.inspect_image(&tag).await.map_err(|e| {
        Error::backend(
            scheduler,
            format!("the workspace image {tag} was not built: {e}"),
        )
    })?;
    Ok(tag)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            image_tag("img", &a),
            image_tag("img", &build_context(&ws).unwrap())
        );
        assert_ne!(image_tag("img", &a), image_tag("img2", &a));
        std::fs::write(tmp.path().join("main.py"), "print(2)").unwrap();
        assert_ne!(
            image_tag("img", &a),
            image_tag("img", &build_context(&ws).unwrap())
        );
    }
}
