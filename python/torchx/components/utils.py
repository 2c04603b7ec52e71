"""Utility components: run a command, a script or a binary, copy files, and test apps.
Each returns the AppDef the Rust core's builder makes, as ``torchx run utils.<name>`` does."""

from typing import Annotated, Dict, List, Optional

import torchx
from torchx import specs
from torchx.components._builtin import call


def echo(msg: str = "hello world", image: str = torchx.IMAGE, num_replicas: int = 1) -> specs.AppDef:
    """Echos a message to stdout (calls echo)

    Args:
        msg: message to echo
        image: image to use
        num_replicas: number of replicas to run
    """
    return call("utils.echo", (), dict(msg=msg, image=image, num_replicas=num_replicas))


def touch(file: str, image: str = torchx.IMAGE) -> specs.AppDef:
    """Touches a file (calls touch)

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
        dict(
            image=image,
            num_replicas=num_replicas,
            cpu=cpu,
            gpu=gpu,
            memMB=memMB,
            h=h,
            env=env,
            max_retries=max_retries,
            mounts=mounts,
        ),
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
    mounts: Optional[List[str]] = None,
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
        mounts: mounts to mount into the worker environment/container
            (ex. type=<bind/volume>,src=/host,dst=/job[,readonly])
    """
    return call(
        "utils.python",
        args,
        dict(
            m=m,
            c=c,
            script=script,
            image=image,
            name=name,
            cpu=cpu,
            gpu=gpu,
            memMB=memMB,
            h=h,
            num_replicas=num_replicas,
            mounts=mounts,
        ),
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
        dict(entrypoint=entrypoint, name=name, num_replicas=num_replicas, cpu=cpu, gpu=gpu, memMB=memMB, h=h),
    )


def copy(src: str, dst: str, image: str = torchx.IMAGE, mounts: Optional[List[str]] = None) -> specs.AppDef:
    """Copies a file from ``src`` to ``dst`` (fsspec locations).

    Args:
        src: the source fsspec file location
        dst: the destination fsspec file location
        image: the image that contains the copy app
    """
    return call("utils.copy", (), dict(src=src, dst=dst, image=image, mounts=mounts))


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


def hydra(
    *overrides: str,
    config_name: Annotated[str, "-cn"],
    config_dir: Annotated[str, "-cd"] = ".torchx",
) -> specs.AppDef:
    """Builds the AppDef a Hydra config describes: its ``app`` key, with
    ``_target_: torchx.specs.AppDef`` (other top-level keys serve as config groups and
    interpolation sources). Needs ``hydra-core``. The resolvers ``${torchx.app_id}``,
    ``${torchx.replica_id}``, ``${torchx.rank0_env}`` and ``${torchx.img_root}`` give TorchX's
    macros, substituted by the scheduler.

    Args:
        overrides: Hydra overrides (e.g. role.num_replicas=2)
        config_name: the config's name in config_dir
        config_dir: the directory of the configs
    """
    import os

    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    for name in ("app_id", "replica_id", "rank0_env", "img_root"):
        # A backslash keeps OmegaConf from resolving the macro's own `${...}` again.
        macro = getattr(specs.macros, name)
        OmegaConf.register_new_resolver(f"torchx.{name}", lambda m=macro: f"\\{m}", replace=True)
    initialize_config_dir(config_dir=os.path.abspath(config_dir), version_base="1.3")
    cfg = compose(config_name=config_name, overrides=list(overrides))
    if os.environ.get("TORCHX_DEBUG"):
        print(OmegaConf.to_yaml(cfg))
    return instantiate(cfg.app, _convert_="all")  # type: ignore[no-any-return]
