"""Distributed training components: ``torchrun`` (any number of nodes; ``ddp`` is its 0.7
name) and ``spmd``."""

import warnings
from typing import Any, Dict, List, Optional, Tuple

import torchx
from torchx import specs
from torchx.components._builtin import call


def parse_nnodes(j: str) -> Tuple[int, int, int, str]:
    """``-j`` as ``(min_nnodes, max_nnodes, nproc_per_node, nnodes_rep)``: ``[[min:]max x]nproc``
    (``"2"`` is one node of 2 processes, ``"1:2x3"`` one to two nodes of 3). ``ValueError`` if
    malformed."""
    from torchx import _native

    return _native.ext.parse_nnodes(j)


class _noquote(str):
    """A command-line argument that :func:`_args_join` leaves unquoted (a shell expansion such
    as ``$${TORCHX_RANK0_HOST:=localhost}:29500``), as TorchX's."""


def _args_join(args: List[str]) -> str:
    """``shlex.join``, except for :class:`_noquote` arguments, which are kept as they are."""
    import shlex

    return " ".join(arg if isinstance(arg, _noquote) else shlex.quote(arg) for arg in args)


def __getattr__(name: str) -> Any:
    # _TORCH_DEBUG_FLAGS: the environment ``debug=True`` sets (the Rust builder's table).
    if name == "_TORCH_DEBUG_FLAGS":
        from torchx import _native

        return dict(_native.ext.torch_debug_flags())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def spmd(
    *args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: str = torchx.IMAGE,
    name: str = "/",
    h: str = "gpu.small",
    j: str = "1x1",
    env: Optional[Dict[str, str]] = None,
    metadata: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    mounts: Optional[List[str]] = None,
    debug: bool = False,
) -> specs.AppDef:
    """Single program, multiple data: ``script`` or ``m`` on ``j`` = {nnodes}x{nproc_per_node}
    processes.

    Args:
        args: the arguments to the main module or script
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name override ({experimentname}/{runname}, {experimentname}/, /{runname}
            or {runname}); uses the script or module name if {runname} is not given
        h: the type of host to run on (a registered named resource)
        j: {nnodes}x{nproc_per_node}
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2)
        max_retries: the number of scheduler retries allowed
        mounts: mounts to mount into the worker environment/container
        debug: whether to run with preset debug flags enabled
    """
    warnings.warn(
        "[Deprecated] dist.spmd is deprecated; use dist.torchrun instead.",
        UserWarning,
        stacklevel=2,
    )
    return call(
        "dist.spmd",
        args,
        dict(
            script=script,
            m=m,
            image=image,
            name=name,
            h=h,
            j=j,
            env=env,
            metadata=metadata,
            max_retries=max_retries,
            mounts=mounts,
            debug=debug,
        ),
    )


def ddp(
    *script_args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: str = torchx.IMAGE,
    name: str = "/",
    h: Optional[str] = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,
    j: str = "1x2",
    env: Optional[Dict[str, str]] = None,
    metadata: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    rdzv_conf: Optional[str] = None,
    mounts: Optional[List[str]] = None,
    debug: bool = False,
    tee: int = 3,
) -> specs.AppDef:
    """Distributed data parallel with torchrun: ``script`` or ``m`` on ``j`` =
    [{min_nnodes}:]{nnodes}x{nproc_per_node} processes.

    Args:
        script_args: arguments to the main module or script
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name override ({experimentname}/{runname}, {experimentname}/, /{runname}
            or {runname}); uses the script or module name if {runname} is not given
        h: a registered named resource (takes precedence over cpu, gpu, memMB)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2)
        max_retries: the number of scheduler retries allowed
        rdzv_port: the port on rank0's host for the c10d rendezvous store (multi-node only)
        rdzv_backend: the rendezvous backend to use (multi-node only)
        rdzv_conf: additional rendezvous configuration (e.g. join_timeout=600,timeout=600)
        mounts: mounts to mount into the worker environment/container
        debug: whether to run with preset debug flags enabled
        tee: tees the std stream(s) to console + file (0: none, 1: stdout, 2: stderr, 3: both)
    """
    warnings.warn(
        "[Deprecated] dist.ddp is deprecated; use dist.torchrun instead.",
        UserWarning,
        stacklevel=2,
    )
    return call(
        "dist.ddp",
        script_args,
        dict(
            script=script,
            m=m,
            image=image,
            name=name,
            h=h,
            cpu=cpu,
            gpu=gpu,
            memMB=memMB,
            j=j,
            env=env,
            metadata=metadata,
            max_retries=max_retries,
            rdzv_port=rdzv_port,
            rdzv_backend=rdzv_backend,
            rdzv_conf=rdzv_conf,
            mounts=mounts,
            debug=debug,
            tee=tee,
        ),
    )


def torchrun(
    *script_args: str,
    script: Optional[str] = None,
    m: Optional[str] = None,
    image: str = torchx.IMAGE,
    name: str = "/",
    h: Optional[str] = None,
    cpu: int = 2,
    gpu: int = 0,
    memMB: int = 1024,
    j: str = "1x2",
    env: Optional[Dict[str, str]] = None,
    metadata: Optional[Dict[str, str]] = None,
    max_retries: int = 0,
    rdzv_port: int = 29500,
    rdzv_backend: str = "c10d",
    rdzv_conf: Optional[str] = None,
    mounts: Optional[List[str]] = None,
    debug: bool = False,
    tee: int = 3,
) -> specs.AppDef:
    """A distributed PyTorch program (DDP, FSDP, RPC, ...) launched with torchrun: TorchX's
    name for :func:`ddp` since its 0.8 line. The same parameters; with a named host ``h``, a
    bare ``j`` = N means N nodes with as many processes as the host has GPUs (as :func:`spmd`),
    so ``h="gpu.small", j="2"`` is two nodes of one process.

    Args:
        script_args: arguments to the main module or script
        script: script or binary to run within the image
        m: the python module path to run
        image: image (e.g. docker)
        name: job name override ({experimentname}/{runname}, {experimentname}/, /{runname}
            or {runname}); uses the script or module name if {runname} is not given
        h: a registered named resource (takes precedence over cpu, gpu, memMB)
        cpu: number of cpus per replica
        gpu: number of gpus per replica
        memMB: cpu memory in MB per replica
        j: [{min_nnodes}:]{nnodes}x{nproc_per_node}, or {nnodes} with a GPU host ``h``
        env: environment variables to be passed to the run (e.g. ENV1=v1,ENV2=v2)
        metadata: metadata to be passed to the scheduler (e.g. KEY1=v1,KEY2=v2)
        max_retries: the number of scheduler retries allowed
        rdzv_port: the port on rank0's host for the c10d rendezvous store (multi-node only)
        rdzv_backend: the rendezvous backend to use (multi-node only)
        rdzv_conf: additional rendezvous configuration (e.g. join_timeout=600,timeout=600)
        mounts: mounts to mount into the worker environment/container
        debug: whether to run with preset debug flags enabled
        tee: tees the std stream(s) to console + file (0: none, 1: stdout, 2: stderr, 3: both)
    """
    options = dict(locals())
    del options["script_args"]
    return call("dist.torchrun", script_args, options)
