"""Showing a job's logs the way ``torchx log`` does, for programs that wrap the Runner with a
CLI of their own: one thread per replica, each line prefixed with ``role/replica``."""

from __future__ import annotations

import logging
import threading
from queue import Queue
from typing import TYPE_CHECKING, Callable, List, Optional, TextIO, Tuple

from torchx.util.types import none_throws

if TYPE_CHECKING:
    from torchx.runner.api import Runner
    from torchx.schedulers.api import Stream
    from torchx.specs.api import AppDef

logger: logging.Logger = logging.getLogger(__name__)


def _find_role_replicas(app: "AppDef", role_name: Optional[str]) -> List[Tuple[str, int]]:
    """``(role, replica id)`` of every replica of ``app`` (of role ``role_name`` only, if
    given)."""
    return [
        (role.name, i)
        for role in app.roles
        if role_name is None or role.name == role_name
        for i in range(role.num_replicas)
    ]


def _prefix_line(prefix: str, line: str) -> str:
    """``line`` with ``prefix`` before it and after each carriage return or inner newline."""
    if "\r" in line:
        line = line.replace("\r", f"\r{prefix}")
    if "\n" in line[:-1]:
        line = line[:-1].replace("\n", f"\n{prefix}") + line[-1:]
    if not line.startswith("\r"):
        line = f"{prefix}{line}"
    return line


def _print_log_lines_for_role_replica(
    dst: TextIO,
    app_handle: str,
    regex: Optional[str],
    runner: "Runner",
    which_role: str,
    which_replica: int,
    exceptions: "Queue[Exception]",
    should_tail: bool,
    streams: "Optional[Stream]",
    colorize: bool = False,
) -> None:
    """Prints replica ``which_replica`` of ``which_role``'s log lines to ``dst``, each prefixed
    ``role/replica`` (green with ``colorize``); what it raises is also put on ``exceptions``
    (one thread per replica runs it)."""
    begin, end = ("\033[32m", "\033[0m") if colorize else ("", "")
    prefix = f"{begin}{which_role}/{which_replica}{end} "
    try:
        for line in runner.log_lines(
            app_handle, which_role, which_replica, regex, should_tail=should_tail, streams=streams
        ):
            print(_prefix_line(prefix, line.strip()), file=dst, end="\n", flush=True)
    except Exception as e:
        exceptions.put(e)
        raise


def _follow_replicas(
    replicas: List[Tuple[str, int]],
    follow: Callable[[str, int], None],
) -> None:
    """Runs ``follow(role, replica)`` for every replica on its own thread and waits for them;
    the first exception a thread raised is raised (the others are logged)."""
    errors: "Queue[Exception]" = Queue()

    def run(role: str, replica: int) -> None:
        try:
            follow(role, replica)
        except Exception as e:
            errors.put(e)

    threads = [threading.Thread(target=run, args=replica, daemon=True) for replica in replicas]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raised: List[Exception] = []
    while not errors.empty():
        raised.append(errors.get())
    for extra in raised[1:]:
        logger.error(extra)
    if raised:
        raise raised[0]


def _start_threads_to_monitor_role_replicas(
    dst: TextIO,
    app_handle: str,
    regex: Optional[str],
    runner: "Runner",
    which_role: Optional[str] = None,
    should_tail: bool = False,
    streams: "Optional[Stream]" = None,
    colorize: bool = False,
) -> None:
    """Follows every replica of ``which_role`` (all roles if None) on a thread of its own and
    waits for them; the first exception a thread raised is raised (the others are logged)."""
    app = none_throws(runner.describe(app_handle))
    replicas = _find_role_replicas(app, which_role)
    if not replicas:
        roles = [role.name for role in app.roles]
        raise ValueError(f"{which_role} is not a valid role name. Available: {roles}")
    # Each thread's exception reaches `_follow_replicas` (the function also queues it).
    seen: "Queue[Exception]" = Queue()

    def follow(role: str, replica: int) -> None:
        _print_log_lines_for_role_replica(
            dst, app_handle, regex, runner, role, replica, seen, should_tail, streams, colorize
        )

    _follow_replicas(replicas, follow)


def tee_logs(
    dst: TextIO,
    app_handle: str,
    regex: Optional[str],
    runner: "Runner",
    should_tail: bool = False,
    streams: "Optional[Stream]" = None,
    colorize: bool = False,
) -> threading.Thread:
    """A thread (not started: start and join it) that copies the logs of every replica of
    ``app_handle`` into ``dst``, each line prefixed with ``role/replica``; ``regex`` filters
    lines, ``should_tail`` follows until the app ends, ``streams`` picks stdout, stderr or
    both."""
    return threading.Thread(
        target=_start_threads_to_monitor_role_replicas,
        kwargs={
            "dst": dst,
            "app_handle": app_handle,
            "regex": regex,
            "runner": runner,
            "should_tail": should_tail,
            "streams": streams,
            "colorize": colorize,
        },
        daemon=True,
    )
