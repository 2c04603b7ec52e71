"""Python functions as jobs: ``Executor(scheduler).submit(fn, *args)`` runs ``fn`` as a job on any
scheduler and returns a ``Job``, a ``concurrent.futures.Future`` of its return value.

>>> from torchx.futures import Executor
>>> with Executor("local_cwd") as ex:
...     ex.submit(pow, 2, 10).result()
1024
"""

from torchx.futures._executor import Executor, Job, JobError, RemoteError

__all__ = ["Executor", "Job", "JobError", "RemoteError"]
