"""The Python functions of TorchX's ``torchx log`` that scripts call (``get_logs``). The
``torchx log`` command itself is the native CLI's."""

from __future__ import annotations

import logging
import re
import sys
import time
from queue import Queue
from typing import TYPE_CHECKING, Optional, TextIO

from torchx.runner import get_runner
from torchx.specs.api import is_started, make_app_handle
from torchx.util.colors import ENDC, GREEN
from torchx.util.log_tee_helpers import _find_role_replicas as find_role_replicas, _follow_replicas, _prefix_line
from torchx.util.types import none_throws

if TYPE_CHECKING:
    from torchx.runner.api import Runner
    from torchx.schedulers.api import Stream

logger: logging.Logger = logging.getLogger(__name__)

ID_FORMAT = "SCHEDULER://[SESSION_NAME]/APP_ID/[ROLE_NAME/[REPLICA_IDS,...]]"


def validate(job_identifier: str) -> None:
    """Exits (1) if ``job_identifier`` is not of the form ``ID_FORMAT``."""
    if not re.match(r"^\w+://[^/]*/[^/]+(/[^/]+(/(\d+,?)+)?)?$", job_identifier):
        logger.error("`%s` is not of the form %s", job_identifier, ID_FORMAT)
        sys.exit(1)


def print_log_lines(
    file: TextIO,
    runner: "Runner",
    app_handle: str,
    role_name: str,
    replica_id: int,
    regex: Optional[str],
    should_tail: bool,
    exceptions: "Queue[Exception]",
    streams: "Optional[Stream]",
) -> None:
    """Prints one replica's log lines to ``file``, prefixed with ``role/replica``; an error is
    put on ``exceptions`` and raised."""
    try:
        for line in runner.log_lines(
            app_handle, role_name, replica_id, regex, should_tail=should_tail, streams=streams
        ):
            try:
                print(_prefix_line(f"{GREEN}{role_name}/{replica_id}{ENDC} ", line), file=file, end="", flush=True)
            except BrokenPipeError:
                return
    except Exception as e:
        exceptions.put(e)
        raise


def _wait_for_app_started(runner: "Runner", app_handle: str) -> bool:
    """Waits until the app has started; False (with a warning) if there is no such app."""
    waiting_said = False
    while True:
        status = runner.status(app_handle)
        if status is None:
            logger.warning("app `%s` not found; it does not exist or the app id is incorrect", app_handle)
            return False
        if is_started(status.state):
            return True
        if not waiting_said:
            logger.info("Waiting for app state response before fetching logs...")
            waiting_said = True
        time.sleep(1)


def get_logs(
    file: TextIO,
    identifier: str,
    regex: Optional[str],
    should_tail: bool = False,
    runner: "Optional[Runner]" = None,
    streams: "Optional[Stream]" = None,
) -> None:
    """Prints the logs ``identifier`` names (``scheduler://session/app_id[/role[/replicas]]``)
    to ``file``, one thread per replica, as ``torchx log`` does. Exits (1) for a malformed
    identifier or an unknown role."""
    validate(identifier)
    scheduler, _, rest = identifier.partition("://")
    path = rest.split("/")
    session, app_id = path[0] or "default", path[1]
    role_name = path[2] if len(path) > 2 else None
    if runner is None:
        runner = get_runner()
    app_handle = make_app_handle(scheduler, session, app_id)
    if len(path) == 4:
        replicas = [(none_throws(role_name), int(i)) for i in path[3].split(",") if i]
    else:
        if not _wait_for_app_started(runner, app_handle):
            return
        app = none_throws(runner.describe(app_handle))
        replicas = find_role_replicas(app, role_name)
        if not replicas:
            known = "\n".join(f"  {i}: {scheduler}://{app_id}/{role.name}" for i, role in enumerate(app.roles))
            logger.error(
                "no role `%s` found for app `%s`, did you mean one of the following:\n%s",
                role_name,
                app.name,
                known,
            )
            sys.exit(1)
    found_runner = runner
    errors: "Queue[Exception]" = Queue()

    def follow(role: str, replica: int) -> None:
        print_log_lines(file, found_runner, app_handle, role, replica, regex, should_tail, errors, streams)

    _follow_replicas(replicas, follow)
