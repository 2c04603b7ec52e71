"""``DockerWorkspaceMixin``: the workspace of a Python scheduler that runs containers (as
TorchX's): a role's workspace is built into a new image on top of its image (``Dockerfile.torchx``
in the workspace, else ``COPY . .``; ``.dockerignore`` honoured), pushed to ``image_repo`` for
remote jobs.

Images are built and pushed by the core's Docker workspace code, the one the builtin schedulers
use (``DOCKER_HOST``, Docker config credentials; an unchanged workspace reuses its image; an
fsspec workspace such as ``memory://`` is copied to a local directory first). A scheduler that
passes its own ``docker_client`` (a docker-py client, as TorchX's tests do) is served through
that client instead.
"""

from __future__ import annotations

import contextlib
import io
import logging
import posixpath
import stat
import sys
import tarfile
import tempfile
from typing import IO, TYPE_CHECKING, Dict, Iterable, Iterator, Mapping, Optional, TextIO, Tuple

from torchx.specs import AppDef, CfgVal, Role, runopts
from torchx.workspace.api import WorkspaceMixin, copy_to_dir, is_remote, walk_workspace

if TYPE_CHECKING:
    from docker import DockerClient

log: logging.Logger = logging.getLogger(__name__)

TORCHX_DOCKERFILE = "Dockerfile.torchx"

DEFAULT_DOCKERFILE = b"""
ARG IMAGE
FROM $IMAGE

COPY . .
"""

# local image id -> (repository, tag) to push it as
ImagesToPush = Dict[str, Tuple[str, str]]


class DockerWorkspaceMixin(WorkspaceMixin[ImagesToPush]):
    """Builds role workspaces into Docker images and pushes them for remote jobs (through the
    core, or through ``docker_client``, a docker-py client, when one is given)."""

    LABEL_VERSION: str = "torchx.pytorch.org/version"

    def __init__(self, *args: object, docker_client: "Optional[DockerClient]" = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.__docker_client = docker_client

    def _native(self) -> bool:
        """Whether the core builds and pushes (no docker-py client was given)."""
        return self.__docker_client is None

    def _backend_name(self) -> str:
        return str(getattr(self, "backend", None) or "docker")

    @property
    def _docker_client(self) -> "DockerClient":
        if self.__docker_client is None:
            import docker

            self.__docker_client = docker.from_env()
        return self.__docker_client

    def workspace_opts(self) -> runopts:
        opts = runopts()
        opts.add(
            "image_repo",
            type_=str,
            help="(remote jobs) the image repository to use when pushing patched images, must"
            " have push access. Ex: example.com/your/container",
        )
        opts.add(
            "quiet",
            type_=bool,
            default=False,
            help="whether to suppress verbose output for image building. Defaults to ``False``.",
        )
        return opts

    def build_workspace_and_update_role(self, role: Role, workspace: str, cfg: Mapping[str, CfgVal]) -> None:
        """Builds ``workspace`` (an fsspec path) on top of ``role.image`` and points the role
        at the new image's id. With a docker-py client the base image is pulled first when it
        can be (a local one is used otherwise) and a failed build raises docker's
        ``BuildError``; the core's build raises ``RuntimeError``."""
        if self._native():
            from torchx import _native

            with _local_copy(workspace) as path:
                role.image = _native.ext.docker_build_workspace(
                    self._backend_name(), role.image, path, bool(cfg.get("quiet", False))
                )
            return
        from docker.errors import BuildError

        import torchx

        context = _build_context(role.image, workspace)
        try:
            try:
                self._docker_client.images.pull(role.image)
            except Exception as e:
                log.warning("failed to pull image `%s`, falling back to local: %s", role.image, e)
            log.info("Building workspace docker image (this may take a while)...")
            events = self._docker_client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile=TORCHX_DOCKERFILE,
                buildargs={"IMAGE": role.image, "WORKSPACE": workspace},
                pull=False,
                rm=True,
                decode=True,
                labels={self.LABEL_VERSION: torchx.__version__},
            )
            image_id = None
            for event in events:
                message = event.get("stream")
                if message and not cfg.get("quiet", False):
                    message = message.strip("\r\n").strip("\n")
                    if message:
                        log.info(message)
                if event.get("aux"):
                    image_id = event["aux"]["ID"]
                if event.get("error"):
                    raise BuildError(reason=event["error"], build_log=None)
            if not image_id:
                raise AssertionError("image id was not found")
            role.image = image_id
        finally:
            context.close()

    def dryrun_push_images(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> ImagesToPush:
        """Points every role that runs a locally built image (``sha256:...``) at its name in
        ``image_repo`` and returns what :meth:`push_images` must push. ``KeyError`` without an
        ``image_repo``."""
        prefix = "sha256:"
        repo = cfg.get("image_repo")
        to_push: ImagesToPush = {}
        for role in app.roles:
            if not role.image.startswith(prefix):
                continue
            if not repo:
                raise KeyError(
                    "must specify the image repository via `image_repo` config to be able to"
                    f" upload local image {role.image}"
                )
            tag = role.image[len(prefix) :]
            to_push[role.image] = (str(repo), tag)
            role.image = f"{repo}:{tag}"
        return to_push

    def push_images(self, images_to_push: ImagesToPush) -> None:
        """Tags and pushes each local image, showing docker's progress."""
        if not images_to_push:
            return
        if self._native():
            from torchx import _native

            for local, (repo, tag) in images_to_push.items():
                log.info("pushing image `%s:%s`...", repo, tag)
                _native.ext.docker_push(self._backend_name(), local, repo, tag)
            return
        client = self._docker_client
        for local, (repo, tag) in images_to_push.items():
            log.info("pushing image `%s:%s`...", repo, tag)
            client.images.get(local).tag(repo, tag=tag)
            print_push_events(client.images.push(repo, tag=tag, stream=True, decode=True))


def print_push_events(events: Iterable[Dict[str, str]], stream: TextIO = sys.stderr) -> None:
    """Shows docker push progress events, one line per layer (updated in place); an error
    event is a ``RuntimeError``."""
    header = "\033[34mdocker push \033[0m"
    clear = "\033[2K"
    layers: list[str] = []
    for event in events:
        if "error" in event:
            raise RuntimeError(f"failed to push docker image: {event['error']}")
        status = event.get("status")
        if not status:
            continue
        layer = event.get("id")
        if not layer:
            stream.write(f"{header}{status}\n")
            continue
        line = f"{header}{layer}: {status} {event.get('progress', '')}"
        if layer not in layers:
            layers.append(layer)
            stream.write(f"{line}\n")
        else:
            up = len(layers) - layers.index(layer)
            stream.write(f"\033[{up}F{clear}{line}\033[{up}E")


@contextlib.contextmanager
def _local_copy(workspace: str) -> Iterator[str]:
    """``workspace`` as a local directory: itself, or a temporary copy of an fsspec one."""
    if not is_remote(workspace):
        yield workspace[len("file://") :] if workspace.startswith("file://") else workspace
        return
    with tempfile.TemporaryDirectory(prefix="torchx-workspace-") as local:
        copy_to_dir(workspace, local)
        yield local


def _build_context(img: str, workspace: str) -> IO[bytes]:
    """A tar of ``workspace`` (less what its ``.dockerignore`` excludes) with the default
    ``Dockerfile.torchx`` added when the workspace has none."""
    f = tempfile.NamedTemporaryFile(prefix="torchx-context", suffix=".tar")  # noqa: SIM115
    with tarfile.open(fileobj=f, mode="w") as tf:
        _copy_to_tarfile(workspace, tf)
        if TORCHX_DOCKERFILE not in tf.getnames():
            info = tarfile.TarInfo(TORCHX_DOCKERFILE)
            info.size = len(DEFAULT_DOCKERFILE)
            tf.addfile(info, io.BytesIO(DEFAULT_DOCKERFILE))
    f.seek(0)
    return f


def _copy_to_tarfile(workspace: str, tf: tarfile.TarFile) -> None:
    import fsspec

    fs, path = fsspec.core.url_to_fs(workspace)
    log.info("workspace `%s` resolved to filesystem path `%s`", workspace, path)
    for directory, _, files in walk_workspace(fs, path, ".dockerignore"):
        rel = posixpath.relpath(directory, path)
        for name, info in files.items():
            member = tarfile.TarInfo(posixpath.join(rel, name) if rel != "." else name)
            member.size = int(info["size"])  # type: ignore[call-overload]
            if "mode" in info:
                # Unix permissions where the filesystem has them (not fsspec's memory one).
                member.mode = stat.S_IMODE(int(info["mode"]))  # type: ignore[call-overload]
            with fs.open(info["name"], "rb") as src:
                tf.addfile(member, src)


__all__ = ["DockerWorkspaceMixin", "TORCHX_DOCKERFILE", "print_push_events"]
