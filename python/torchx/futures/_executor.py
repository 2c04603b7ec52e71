"""``Executor`` and ``Job``: a ``concurrent.futures`` interface over torchx's schedulers. Each call
is one app (``python -m torchx.futures.run LOCATION``) whose handle the CLI understands; a
thread of the executor follows the unfinished ones and settles their futures."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import re
import secrets
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple, Union

from torchx.futures import _transport
from torchx.progress import Progress
from torchx.specs import AppDef, AppState, Resource, Role, is_terminal

# Schedulers whose jobs run processes on this machine's (or a shared) file system, with this
# Python; and those whose containers see it through a bind mount of the result directory.
_HOST = ("local_cwd", "slurm")
_MOUNTED = ("local_docker", "lsf")
# Polls come a tenth of the time since the newest submission apart, within these bounds: on
# this machine's schedulers a short call is seen done within milliseconds; a cluster's is not
# asked about more than 4 times a second.
_POLL_MIN_LOCAL, _POLL_MIN, _POLL_MAX = 0.005, 0.25, 0.5
# How long a job's scheduler may fail to say how it is before the job's future fails with
# that error (one that answers again within it goes on as if nothing happened).
_STATUS_PATIENCE = 300.0
# How long a job may be unknown to its scheduler before its future fails as lost: a listing
# may miss a job for a moment (just submitted, or between two writes of its record).
_UNKNOWN_PATIENCE = 5.0

logger = logging.getLogger(__name__)


class RemoteError(Exception):
    """An exception raised by the job that could not be brought back as itself; its message is
    the remote traceback. Also the ``__cause__`` of one that could, holding that traceback."""


class JobError(Exception):
    """A job that ended without a result: cancelled, killed, out of memory, lost."""


class Job(concurrent.futures.Future[Any]):
    """The future of one call: its job's app ``handle`` works with ``torchx status``, ``log``
    and ``cancel``; ``cancel()`` cancels the job."""

    def __init__(self, executor: Executor, handle: str, location: str, role: str) -> None:
        super().__init__()
        self._executor = executor
        self.handle = handle
        self.location = location
        self._role = role
        # When its scheduler began failing to say how it is (None: it answers).
        self._status_error_since: Optional[float] = None
        self._unknown_since: Optional[float] = None

    def cancel(self) -> bool:
        """Cancels the job (unless it is over); True if the future is now cancelled."""
        if self.done():
            return self.cancelled()
        self._executor._cancel(self.handle)
        if not super().cancel():
            return False
        # As an executor must: waiters (`concurrent.futures.wait`, `as_completed`) learn of it.
        self.set_running_or_notify_cancel()
        return True

    def logs(self) -> List[str]:
        """The job's log lines so far."""
        return self._executor._logs(self.handle, self._role)

    def __repr__(self) -> str:
        return f"<Job {self.handle} {self._state}>"


class Executor(concurrent.futures.Executor):
    """Runs Python callables as jobs on ``scheduler``.

    ``image``: where the job runs (local_cwd, slurm: a directory, default the current one;
    schedulers that run containers, lsf among them: an image with torchx and cloudpickle
    installed, required). ``resource``: a ``Resource`` or a named resource. ``result_dir``:
    where calls and results travel (default: the local state directory on local_cwd, and on
    local_docker, which mounts it; ``./.torchx-futures`` on slurm and lsf, whose jobs share
    this machine's file system, lsf's containers through a mount; elsewhere an fsspec URL
    both ends reach, such as ``s3://bucket/prefix``, required); a call's directory there is
    removed once its result was read, and kept when it failed (for debugging).
    ``max_retries`` and ``time_limit`` (seconds) apply to every job. A missing ``image`` or
    ``result_dir`` is a ``ValueError`` at the first ``submit`` or ``map``."""

    def __init__(
        self,
        scheduler: str = "local_cwd",
        cfg: Optional[Mapping[str, Any]] = None,
        *,
        image: Optional[str] = None,
        resource: Union[Resource, str, None] = None,
        env: Optional[Mapping[str, str]] = None,
        name: Optional[str] = None,
        workspace: Optional[str] = None,
        result_dir: Optional[str] = None,
        max_retries: int = 0,
        time_limit: Optional[int] = None,
    ) -> None:
        from torchx.runner import get_runner

        self.scheduler = scheduler
        self.cfg = dict(cfg or {})
        self._image = image
        self._resource = resource
        self._env = dict(env or {})
        self._name = name
        self._workspace = workspace
        self._result_dir = result_dir
        self._max_retries = max_retries
        self._time_limit = time_limit
        self._runner = get_runner()
        self._lock = threading.Lock()  # the runner, the job list, the shutdown flag
        self._jobs: List[Job] = []  # followed one by one
        self._groups: List[Tuple[Dict[str, Any], List[Job]]] = []  # `map`'s groups (record, task jobs)
        self._wake = threading.Event()
        self._poller: Optional[threading.Thread] = None
        self._shut = False

    # -- concurrent.futures.Executor --------------------------------------------------------

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Job:
        """Runs ``fn(*args, **kwargs)`` as a job; its ``Job``."""
        return self._submit_as(_job_name(self._name, fn), fn, args, kwargs)

    def _submit_as(self, name: str, fn: Callable[..., Any], args: Any, kwargs: Any) -> Job:
        location = self._write_call(fn, args, kwargs)
        app = self._app(name, fn, location)
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            handle = self._runner.run(app, self.scheduler, self.cfg, self._workspace)
        return self._follow(handle, location, name)

    def map(
        self,
        fn: Callable[..., Any],
        *iterables: Iterable[Any],
        timeout: Optional[float] = None,
        chunksize: int = 1,
        progress: Optional[Callable[[Progress], None]] = None,
    ) -> Iterator[Any]:
        """``fn`` over the items, as one array where the scheduler has native arrays (else one
        job per ``chunksize`` items); yields the results in order. ``progress`` is called with
        the jobs' ``torchx.progress.Progress`` as each one ends."""
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        calls = list(zip(*iterables, strict=False))  # as builtins.map: the shortest
        jobs = self._submit_many(fn, calls, max(1, chunksize))
        if progress is not None:
            _report_progress([job for job, _ in jobs], progress, started)

        def results() -> Iterator[Any]:
            try:
                for job, chunked in jobs:
                    left = None if deadline is None else max(0.0, deadline - time.monotonic())
                    value = job.result(left)
                    if chunked:
                        yield from value
                    else:
                        yield value
            finally:
                for job, _ in jobs:
                    job.cancel()

        return results()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut = True
            jobs = self._jobs + [j for _, members in self._groups for j in members]
        if cancel_futures:
            for job in jobs:
                job.cancel()
        if wait:
            concurrent.futures.wait(jobs)
        self._wake.set()

    # -- submission ------------------------------------------------------------------------

    def _where(self) -> str:
        """The result directory, once the executor can run jobs at all (checked at the first
        submission, as TorchX checks a scheduler's options at run)."""
        scheduler, result_dir = self.scheduler, self._result_dir
        self._runner._scheduler(scheduler)  # TorchX's UnknownSchedulerException, first
        if scheduler not in _HOST and self._image is None:
            raise ValueError(
                f"scheduler {scheduler!r} runs containers: give image=... (one with torchx and cloudpickle installed)"
            )
        if scheduler in _HOST or scheduler in _MOUNTED:
            return result_dir or _default_result_dir(scheduler)
        if result_dir is None or "://" not in result_dir:
            raise ValueError(
                f"scheduler {scheduler!r} runs jobs on other machines: give result_dir=... as an "
                f"fsspec URL that both this machine and the job reach, such as "
                f"s3://bucket/prefix (got {result_dir!r})"
            )
        return result_dir

    def _write_call(self, fn: Callable[..., Any], args: Any, kwargs: Any) -> str:
        location = f"{self._where().rstrip('/')}/{secrets.token_hex(8)}"
        _transport.dump(location, _transport.CALL, (fn, tuple(args), dict(kwargs)))
        return location

    def _app(self, name: str, fn: Callable[..., Any], location: str) -> AppDef:
        """The app that runs the call ``fn`` at ``location``."""
        python = sys.executable if self.scheduler in _HOST else "python"
        resource = self._resource
        if isinstance(resource, str):
            from torchx.specs import resource as named_resource

            resource = named_resource(h=resource)
        role = Role(
            name=name,
            image=self._image or os.getcwd(),
            entrypoint=python,
            args=["-m", "torchx.futures.run", location],
            env=dict(self._env),
            resource=resource or Resource(cpu=1, gpu=0, memMB=1024),
            max_retries=self._max_retries,
        )
        if self._time_limit is not None:
            role.time_limit = self._time_limit
        if callable(getattr(fn, "checkpoint", None)):
            _checkpointable(role, self._time_limit)
        if self.scheduler in _MOUNTED and "://" not in location:
            from torchx.specs import BindMount

            # The call and its result cross into the container at the same path: the result
            # directory, which holds the call's.
            where = os.path.dirname(location)
            role.mounts = [BindMount(src_path=where, dst_path=where)]
        return AppDef(name=name, roles=[role])

    def _submit_many(self, fn: Callable[..., Any], calls: List[Any], chunksize: int) -> List[Tuple[Job, bool]]:
        """One job per call, or per chunk of ``chunksize`` calls: one group, natively where
        the scheduler can (a builtin one), else one submission each; whether they are chunks."""
        if not calls:
            return []
        name = _job_name(self._name, fn)
        chunked = chunksize > 1
        run = fn
        if chunked:
            calls = [(fn, calls[i : i + chunksize]) for i in range(0, len(calls), chunksize)]
            run = _call_chunk
        from torchx.schedulers._rust import RustScheduler

        if isinstance(self._runner._scheduler(self.scheduler), RustScheduler):
            jobs = self._submit_group(name, run, calls)
        else:
            jobs = [self._submit_as(name, run, call, {}) for call in calls]
        return [(job, chunked) for job in jobs]

    def _submit_group(self, name: str, fn: Callable[..., Any], calls: List[Any]) -> List[Job]:
        from torchx import _native
        from torchx.schedulers._rust import RustRequest

        locations = [self._write_call(fn, call, {}) for call in calls]
        handles = []
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            for i, location in enumerate(locations):
                app = self._app(name, fn, location)
                for role in app.roles:
                    role.env.update({"TORCHX_ARRAY_INDEX": str(i), "TORCHX_ARRAY_SIZE": str(len(calls))})
                info = self._runner.dryrun(app, self.scheduler, self.cfg, self._workspace)
                request = info.request
                if not isinstance(request, RustRequest):
                    raise TypeError(f"{self.scheduler} made a {type(request).__name__}")
                handles.append(request._handle)
            about = {
                "component": f"torchx.futures.map({name})",
                "args": [],
                "spec": f"map over {len(calls)} items",
                "max_concurrent": None,
                "tasks": [{"index": i, "params": {}} for i in range(len(calls))],
            }
            record = _native.ext.schedule_group(self._runner.name, handles, about)
        jobs = []
        for task, location in zip(record["tasks"], locations, strict=True):
            if task["handle"] is None:
                job = Job(self, "", location, name)
                job.set_exception(JobError(f"task {task['index']} was not submitted: {task['error']}"))
                jobs.append(job)
            else:
                jobs.append(self._follow(task["handle"], location, name, group=True))
        with self._lock:
            self._groups.append((record, jobs))
        return jobs

    # -- following jobs --------------------------------------------------------------------

    def _follow(self, handle: str, location: str, role: str, group: bool = False) -> Job:
        job = Job(self, handle, location, role)
        with self._lock:
            if not group:
                self._jobs.append(job)
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll, name="torchx-futures", daemon=True)
                self._poller.start()
        self._wake.set()
        return job

    def _poll(self) -> None:
        least = _POLL_MIN_LOCAL if self.scheduler in ("local_cwd", "local_docker") else _POLL_MIN
        since = time.monotonic()  # the newest submission
        while True:
            with self._lock:
                self._jobs = [j for j in self._jobs if not j.done()]
                self._groups = [(r, js) for r, js in self._groups if not all(j.done() for j in js)]
                jobs, groups = list(self._jobs), list(self._groups)
                if not jobs and not groups and self._shut:
                    return
            for job, state in self._observe(jobs, groups):
                try:
                    if state != AppState.UNKNOWN:
                        job._unknown_since = None
                    elif job._unknown_since is None:
                        job._unknown_since = time.monotonic()
                    elif time.monotonic() - job._unknown_since >= _UNKNOWN_PATIENCE:
                        _settle(job, None, state)
                    if is_terminal(state):
                        _settle(job, job.location, state)
                except Exception as e:  # noqa: BLE001 - the poller serves every other job too
                    if not job.done():
                        error = JobError(f"{job.handle}: reading its result from {job.location} failed: {e!r}")
                        error.__cause__ = e
                        job.set_exception(error)
            # A job is seen done at most 10% after it ended, and a long one costs few polls.
            pause = min(_POLL_MAX, max(least, 0.1 * (time.monotonic() - since)))
            if self._wake.wait(pause):
                self._wake.clear()
                since = time.monotonic()

    def _observe(
        self, jobs: List[Job], groups: List[Tuple[Dict[str, Any], List[Job]]]
    ) -> Iterator[Tuple[Job, AppState]]:
        """Each unfinished job's state: a ``map``'s jobs in one question to their scheduler
        (one squeue for a Slurm array), the others one by one. A scheduler that cannot answer
        now is asked again on the next round; one that keeps failing for ``_STATUS_PATIENCE``
        seconds fails the futures it leaves waiting, with its error as the cause."""
        from torchx import _native

        for record, members in groups:
            try:
                with self._lock:
                    names = _native.ext.group_states(record)
            except Exception as e:  # noqa: BLE001 - asked again, up to the patience
                self._status_failed(members, e)
                continue
            for job, name in zip(members, names, strict=True):
                job._status_error_since = None
                if not job.done():
                    yield job, AppState[name]
        for job in jobs:
            try:
                with self._lock:
                    status = self._runner.status(job.handle)
            except Exception as e:  # noqa: BLE001 - asked again, up to the patience
                self._status_failed([job], e)
                continue
            job._status_error_since = None
            yield job, AppState.UNKNOWN if status is None else status.state

    def _status_failed(self, jobs: List[Job], error: Exception) -> None:
        now = time.monotonic()
        for job in jobs:
            if job.done():
                continue
            if job._status_error_since is None:
                job._status_error_since = now
                logger.warning("torchx.futures: the status of %s failed (asked again): %r", job.handle, error)
            elif now - job._status_error_since >= _STATUS_PATIENCE:
                failed = JobError(
                    f"{job.handle}: its scheduler has not said how it is for "
                    f"{now - job._status_error_since:.0f}s: {error!r}"
                )
                failed.__cause__ = error
                job.set_exception(failed)

    def _cancel(self, handle: str) -> None:
        with self._lock:
            self._runner.cancel(handle)

    def _logs(self, handle: str, role: str) -> List[str]:
        with self._lock:
            return list(self._runner.log_lines(handle, role, 0))


def _report_progress(jobs: List[Job], progress: Callable[[Progress], None], started: float) -> None:
    """Calls ``progress`` once now and once as each of ``jobs`` ends (from the thread that
    settles it); calls never overlap."""
    lock = threading.Lock()

    def report(_: object = None) -> None:
        with lock:
            states = [_job_state(j) for j in jobs]
            progress(Progress.of(states, time.monotonic() - started))

    report()
    for job in jobs:
        job.add_done_callback(report)


def _job_state(job: Job) -> AppState:
    if not job.done():
        return AppState.RUNNING
    if job.cancelled():
        return AppState.CANCELLED
    return AppState.FAILED if job.exception() is not None else AppState.SUCCEEDED


def _settle(job: Job, location: Optional[str], state: AppState) -> None:
    """Sets the job's outcome from what its call wrote, else from its final state."""
    if job.done():
        return
    outcome = None
    for _ in range(3 if location is not None else 0):
        try:
            outcome = _transport.load(location or "", _transport.RESULT)
            break
        except FileNotFoundError:
            time.sleep(0.05)  # a shared file system may show it a moment later
    if outcome is None:
        job.set_exception(
            JobError(f"{job.handle} ended {state.name} without a result; its logs: `torchx log {job.handle}`")
        )
        return
    kind, payload, text = outcome
    value: Any = None
    if payload is not None and not isinstance(payload, bytes):
        job.set_exception(
            RemoteError(
                f"{job.handle}'s result is in another torchx version's format: install this "
                f"torchx ({_version()}) where the job runs"
            )
        )
        return
    if payload is not None:
        import pickle

        try:
            value = pickle.loads(payload)
        except Exception as e:  # noqa: BLE001 - a class this side lacks, or any other
            what = "return value" if kind == "ok" else "exception"
            remote = RemoteError(f"the job's {what} does not unpickle here: {e!r}\n{text or ''}")
            remote.__cause__ = e
            job.set_exception(remote)
            return
    if kind == "ok":
        # Read and done: nothing left to debug (removed before the result is given, so a
        # caller that has it finds the directory gone). A failed call's directory stays: its
        # call and traceback reproduce the failure.
        _transport.remove(location or "")
        job.set_result(value)
        return
    remote = RemoteError(text or "")
    if isinstance(value, BaseException):
        value.__cause__ = remote
        if hasattr(value, "add_note"):
            value.add_note(f"Remote traceback ({job.handle}):\n{text}")
        job.set_exception(value)
    else:
        job.set_exception(remote)


def _version() -> str:
    import torchx

    return torchx.__version__


def _checkpointable(role: Role, time_limit: Optional[int]) -> None:
    """The recovery contract for a callable with ``checkpoint``: the checkpoint signal before
    the time limit (a quarter of it, at most a minute), and the requeue exit code its job exits
    with once checkpointed (``run.py``)."""
    signal = "USR1"
    if time_limit is not None:
        lead = max(1, min(60, time_limit // 4))
        role.checkpoint_signal = f"{signal}@{lead}"
    role.requeue_exit_code = role.requeue_exit_code or 75
    role.env["TORCHX_FUTURES_CHECKPOINT_SIGNAL"] = signal
    role.env["TORCHX_FUTURES_REQUEUE_CODE"] = str(role.requeue_exit_code)


def _call_chunk(fn: Callable[..., Any], chunk: List[Any]) -> List[Any]:
    """A chunk of ``map``'s calls, run in one job."""
    return [fn(*call) for call in chunk]


def _job_name(name: Optional[str], fn: Callable[..., Any]) -> str:
    """An app and role name from ``name`` or the function's: lowercase letters, digits, ``-``."""
    raw = name or getattr(fn, "__name__", None) or type(fn).__name__
    cleaned = re.sub(r"[^a-z0-9-]+", "-", raw.lower()).strip("-")
    return cleaned[:40] or "fn"


def _default_result_dir(scheduler: str) -> str:
    if scheduler in ("slurm", "lsf"):
        return os.path.join(os.getcwd(), ".torchx-futures")
    from torchx import _native

    return os.path.join(_native.ext.state_dir(), "futures")


__all__ = ["Executor", "Job", "JobError", "RemoteError"]
