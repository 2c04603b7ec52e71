"""Python functions as jobs: ``Executor(scheduler).submit(fn, *args)`` runs ``fn`` as a job on any
scheduler and returns a ``Job``, a ``concurrent.futures.Future`` of its return value.

>>> from torchx.futures import Executor
>>> with Executor("local_cwd") as ex:
...     ex.submit(pow, 2, 10).result()
1024

The names load on first use: a job's side (``python -m torchx.futures.run``) imports only
``_transport`` and cloudpickle, never the runner or the native extension, so an image needs
no more of torchx than its pure-Python files.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchx.futures._executor import Executor, Job, JobError, RemoteError

__all__ = ["Executor", "Job", "JobError", "RemoteError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from torchx.futures import _executor

        return getattr(_executor, name)
    raise AttributeError(f"module 'torchx.futures' has no attribute {name!r}")
