"""Utility components: run a command, a script or a binary, copy files, and test apps.
Each returns the AppDef the Rust core's builder makes, as ``torchx run utils.<name>`` does."""

from typing import Dict, List, Optional

import torchx
from torchx import specs
from torchx.components._builtin import call


def echo(msg: str = "hello world", image: str = torchx.IMAGE, num_replicas: int = 1) -> specs.AppDef:
    """Echos a message to stdout (calls echo).

    Args:
        msg: message to echo
        image: image to use
        num_replicas: number of replicas to run
    """
    return call("utils.echo", (), dict(msg=msg, image=image, num_replicas=num_replicas))


def touch(file: str, image: str = torchx.IMAGE) -> specs.AppDef:
    """Touches a file (calls touch).

    Args:
        file: file to create
        image: the image to use
    """
    return call("utils.touch", (), dict(file=file, image=image))


def sh(
    *args: str,
    image: str = torchx.IMAGE,
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: Optional[str] = None,
    env: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    mounts: Optional[List[str]] = None,
) -> specs.AppDef:
    """Runs the command with ``sh -c``.

    Args:
        args: the command and its arguments
        image: image to use
        num_replicas: number of replicas to run
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (takes precedence over cpu, gpu, memMB)
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2)
        max_retries: the number of scheduler retries allowed
        mounts: mounts to mount into the worker environment/container
    """
    return call(
        "utils.sh",
        args,
        dict(image=image, num_replicas=num_replicas, cpu=cpu, gpu=gpu, memMB=memMB, h=h,
             env=env, max_retries=max_retries, mounts=mounts),
    )


def python(
    *args: str,
    m: Optional[str] = None,
    c: Optional[str] = None,
    script: Optional[str] = None,
    image: str = torchx.IMAGE,
    name: str = "torchx_utils_python",
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: Optional[str] = None,
    num_replicas: int = 1,
) -> specs.AppDef:
    """Runs ``python`` with a module (``-m``), a program (``-c``) or a script; exactly one.

    Args:
        args: arguments to the program
        m: run library module as a script
        c: program passed as string
        script: .py script to run
        image: image to run on
        name: name of the job
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (takes precedence over cpu, gpu, memMB)
        num_replicas: number of copies to run (each on its own container)
    """
    return call(
        "utils.python",
        args,
        dict(m=m, c=c, script=script, image=image, name=name, cpu=cpu, gpu=gpu, memMB=memMB,
             h=h, num_replicas=num_replicas),
    )


def binary(
    *args: str,
    entrypoint: str,
    name: str = "torchx_utils_binary",
    num_replicas: int = 1,
    cpu: int = 1,
    gpu: int = 0,
    memMB: int = 1024,
    h: Optional[str] = None,
) -> specs.AppDef:
    """Runs a binary in the image.

    Args:
        args: arguments to the binary
        entrypoint: the binary to run
        name: name of the job
        num_replicas: number of copies to run (each on its own container)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        h: a registered named resource (takes precedence over cpu, gpu, memMB)
    """
    return call(
        "utils.binary",
        args,
        dict(entrypoint=entrypoint, name=name, num_replicas=num_replicas, cpu=cpu, gpu=gpu,
             memMB=memMB, h=h),
    )


def copy(src: str, dst: str, image: str = torchx.IMAGE) -> specs.AppDef:
    """Copies a file from ``src`` to ``dst`` (fsspec locations).

    Args:
        src: the source fsspec file location
        dst: the destination fsspec file location
        image: the image that contains the copy app
    """
    return call("utils.copy", (), dict(src=src, dst=dst, image=image))


def booth(
    x1: float,
    x2: float,
    trial_idx: int = 0,
    tracker_base: str = "/tmp/torchx-util-booth",
    image: str = torchx.IMAGE,
) -> specs.AppDef:
    """Evaluates the Booth function at ``(x1, x2)`` (a test objective for HPO).

    Args:
        x1: x1
        x2: x2
        trial_idx: ignore if not running hpo
        tracker_base: URI of the tracker's base output directory (e.g. s3://foo/bar)
        image: the image that contains the booth app
    """
    return call(
        "utils.booth",
        (),
        dict(x1=x1, x2=x2, trial_idx=trial_idx, tracker_base=tracker_base, image=image),
    )
