"""Whether the real engines the tests use are here (scripts/*/up.sh start them; CI lists the
ones it started in TORCHX_TEST_ENGINES, and a promised engine that is missing fails the test)."""

import os
import subprocess

import pytest


def docker_up() -> bool:
    """The local Docker engine with its busybox:local image (scripts/docker/up.sh)."""
    up = subprocess.run(["docker", "image", "inspect", "busybox:local"], capture_output=True).returncode == 0
    if not up and "docker" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
        pytest.fail("the Docker engine was started for this run but is missing")
    return up


def slurm_up() -> bool:
    """The local Slurm cluster (scripts/slurm/up.sh)."""
    try:
        up = subprocess.run(["sinfo", "--noheader"], capture_output=True).stdout.strip() != b""
    except FileNotFoundError:
        up = False
    if not up and "slurm" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
        pytest.fail("the Slurm cluster was started for this run but is missing")
    return up


def aws_up() -> bool:
    """The AWS emulator (scripts/aws/up.sh) in its docker mode, where Batch jobs run as
    containers; its `moto.env` sourced (AWS_ENDPOINT_URL)."""
    mode = os.environ.get("AWS_EMU_BATCH_MODE")
    up = bool(os.environ.get("AWS_ENDPOINT_URL")) and mode == "docker"
    if not up and "aws" in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
        if mode != "docker" and "docker" not in os.environ.get("TORCHX_TEST_ENGINES", "").split(","):
            return False  # started without an engine to run containers: lifecycle mode only
        pytest.fail("the AWS emulator was started for this run (docker mode) but is missing")
    return up


def futures_image() -> str:
    """An image that has torchx.futures' job side: python:local (scripts/docker/up.sh) with this
    environment's torchx package (its Python files: the job side never loads the native
    extension) and cloudpickle and s3fs with what they require; tagged by the content of
    torchx's Python files, so it is built again when they change."""
    import hashlib
    import shutil
    import sys
    import tempfile
    from importlib import metadata
    from pathlib import Path

    import torchx
    from packaging.requirements import Requirement

    assert sys.version_info[:2] == (3, 11), "the image's Python (3.11) must be this one's: code pickles by version"
    # Compiled as pip would have: the job side does not compile its imports each run.
    dockerfile = (
        "FROM python:local\nCOPY site /opt/torchx-site\nENV PYTHONPATH=/opt/torchx-site\n"
        "RUN python -m compileall -q /opt/torchx-site\n"
    )
    digest = hashlib.sha256(dockerfile.encode())
    for path in sorted(Path(torchx.__file__).parent.rglob("*.py")):
        digest.update(path.read_bytes())
    tag = f"torchx-futures:{digest.hexdigest()[:16]}"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    ctx = Path(tempfile.mkdtemp(prefix="torchx-futures-image-"))
    site = ctx / "site"

    shutil.copytree(
        Path(torchx.__file__).parent,
        site / "torchx",
        ignore=shutil.ignore_patterns("__pycache__", "_rs*.so"),
    )
    seen: set = set()
    todo = ["cloudpickle", "s3fs"]
    while todo:
        dist = metadata.distribution(todo.pop())
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in seen:
            continue
        seen.add(key)
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
        for f in dist.files or []:
            if f.parts[0] != ".." and "__pycache__" not in f.parts:
                dst = site / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(dist.locate_file(f), dst)
    (ctx / "Dockerfile").write_text(dockerfile)
    out = subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)], capture_output=True, text=True)
    shutil.rmtree(ctx, ignore_errors=True)
    assert out.returncode == 0, f"docker build of {tag} failed: {out.stderr}"
    return tag


def torch_image() -> str:
    """An image that runs this machine's PyTorch: python:local (scripts/docker/up.sh) with
    Debian's bash and libstdc++ and a ``torchrun``; PyTorch and torchx's Python files are
    mounted (see ``torch_mounts``), as scripts/ddp_check.sh does for its pods. Host names are
    looked up in /etc/hosts only: this machine's containers wait 10 s for each reverse DNS
    lookup c10d's rendezvous makes (of ::ffff:127.0.0.1), which would turn a start into a
    quiet spell as long as a hang timeout."""
    import shutil
    import tempfile
    from pathlib import Path

    tag = "torchx-torch:local-2"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    ctx = Path(tempfile.mkdtemp(prefix="torchx-torch-image-"))
    rootfs = ctx / "rootfs"
    (rootfs / "usr" / "bin").mkdir(parents=True)
    got = subprocess.run(["apt-get", "download", "bash", "libstdc++6"], cwd=ctx, capture_output=True, text=True)
    assert got.returncode == 0, f"apt-get download bash libstdc++6 failed: {got.stderr}"
    for deb in ctx.glob("*.deb"):
        subprocess.run(["dpkg", "-x", str(deb), str(rootfs)], check=True)
    torchrun = rootfs / "usr" / "bin" / "torchrun"
    torchrun.write_text("#!/usr/bin/python3\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n")
    torchrun.chmod(0o755)
    (rootfs / "etc").mkdir(exist_ok=True)
    (rootfs / "etc" / "nsswitch.conf").write_text("hosts: files\n")
    (ctx / "Dockerfile").write_text("FROM python:local\nCOPY rootfs/ /\n")
    out = subprocess.run(["docker", "build", "-q", "-t", tag, str(ctx)], capture_output=True, text=True)
    shutil.rmtree(ctx, ignore_errors=True)
    assert out.returncode == 0, f"docker build of {tag} failed: {out.stderr}"
    return tag


def torch_mounts() -> "list[str]":
    """Component options that give a ``torch_image`` container this interpreter's PyTorch and
    this checkout's torchx package (its Python files), read-only."""
    import os.path
    import sys

    import torch
    import torchx

    site = os.path.dirname(os.path.dirname(torch.__file__))
    pkg = os.path.dirname(os.path.dirname(torchx.__file__))
    assert sys.version_info[:2] == (3, 11), "the image's Python (3.11) must be this one's"
    return [
        "--env",
        "PYTHONPATH=/opt/torch:/opt/torchx",
        "--mounts",
        f"type=bind,src={site},dst=/opt/torch,readonly,type=bind,src={pkg},dst=/opt/torchx,readonly",
    ]
