"""The recovery contract from inside a job: what ``torchx run --time_limit ...`` tells each
attempt, and how it asks to be started again.

A job that opted into the contract (any of ``--time_limit``, ``--checkpoint_signal``,
``--requeue_exit_code``, ``--max_requeues``, ``--checkpoint_dir`` or the role fields) gets, in
every attempt, ``TORCHX_ATTEMPT``, ``TORCHX_CHECKPOINT_DIR`` and ``TORCHX_REQUEUE_FILE``.
A job run with ``--hang_timeout`` gets ``TORCHX_HEARTBEAT_FILE``: :func:`heartbeat` tells the
watchdog it makes progress while it prints nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

__all__ = ["attempt", "checkpoint_dir", "heartbeat", "request_requeue"]


def request_requeue() -> None:
    """Asks for a requeue of this attempt: once any process of the replica called it, the
    attempt is started again (without spending ``max_retries``) whatever exit code the replica
    then ends with, 0 included. Works from under wrappers and launchers (``sh -c``, torchrun)
    that would turn an exit code of 75 into another.

    Raises ``RuntimeError`` in a job that did not opt into the recovery contract.
    """
    path = os.environ.get("TORCHX_REQUEUE_FILE")
    if not path:
        raise RuntimeError(
            "TORCHX_REQUEUE_FILE is not set: this job did not opt into the recovery contract "
            "(give --time_limit, --checkpoint_signal, --max_requeues or --requeue_exit_code)"
        )
    Path(path).touch()


def heartbeat() -> None:
    """Tells the hang watchdog (``--hang_timeout``) that this replica makes progress, as a line
    on stdout or stderr would: for a job that computes quietly for longer than its timeout.
    Cheap (one ``utime``); a no-op in a job that is not watched."""
    path = os.environ.get("TORCHX_HEARTBEAT_FILE")
    if path:
        try:
            os.utime(path)
        except FileNotFoundError:
            Path(path).touch()


def attempt() -> int:
    """This attempt's number: 0 first (0 outside the recovery contract)."""
    return int(os.environ.get("TORCHX_ATTEMPT", "0"))


def checkpoint_dir() -> Optional[Path]:
    """The directory every attempt shares for its checkpoints; ``None`` outside the contract."""
    path = os.environ.get("TORCHX_CHECKPOINT_DIR")
    return Path(path) if path else None
