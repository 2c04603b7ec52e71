"""``python -m torchx.futures.run LOCATION``: the job side of ``torchx.futures``. Runs the call
an ``Executor`` wrote to ``LOCATION`` and writes its outcome there: the return value, or the
exception with its traceback text (the exception itself when it pickles)."""

from __future__ import annotations

import sys
import traceback
from typing import Any, List, Optional

from torchx.futures import _transport


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m torchx.futures.run LOCATION", file=sys.stderr)
        return 2
    location = args[0]
    try:
        fn, fn_args, fn_kwargs = _transport.load(location, _transport.CALL)
    except Exception as e:  # noqa: BLE001 - a module the job lacks, most often: said as the outcome
        return _failed(
            location,
            e,
            "torchx.futures: the call does not load where the job runs (is the function's module "
            f"importable there? a workspace or the image brings it):\n{traceback.format_exc()}",
        )
    if callable(getattr(fn, "checkpoint", None)):
        _on_checkpoint_signal(location, fn, fn_args, fn_kwargs)
    try:
        value = fn(*fn_args, **fn_kwargs)
    except BaseException as e:  # noqa: BLE001 - every outcome is the caller's to see
        return _failed(location, e, traceback.format_exc())
    outcome = _transport.outcome("ok", value, None)
    _transport.dump(location, _transport.RESULT, outcome)
    if outcome[0] == "error":
        print(outcome[2], file=sys.stderr)
        return 1
    return 0


def _failed(location: str, error: BaseException, text: str) -> int:
    """Says ``text`` on stderr and writes the error outcome; the job's exit code."""
    print(text, file=sys.stderr, end="")
    _transport.dump(location, _transport.RESULT, _transport.outcome("error", error, text))
    return 1


def _on_checkpoint_signal(location: str, fn: Any, args: Any, kwargs: Any) -> None:
    """A checkpointable callable (submitit's ``Checkpointable`` shape): on the checkpoint signal
    (or SIGTERM: preemption, the time limit), ``fn.checkpoint(*args, **kwargs)`` says what the
    next attempt runs — ``None`` (the same call), a ``(fn, args, kwargs)`` tuple or an object
    with ``function``/``args``/``kwargs`` — which replaces the call, and the job exits with the
    requeue exit code, so the scheduler runs it again."""
    import os
    import signal

    code = int(os.environ.get("TORCHX_FUTURES_REQUEUE_CODE", "75"))
    names = {"TERM", os.environ.get("TORCHX_FUTURES_CHECKPOINT_SIGNAL", "USR1")}

    def handler(signum: int, _frame: Any) -> None:
        nxt = fn.checkpoint(*args, **kwargs)
        if nxt is None:
            call = (fn, args, kwargs)
        elif isinstance(nxt, tuple):
            call = nxt
        else:
            call = (nxt.function, tuple(nxt.args), dict(nxt.kwargs))
        _transport.dump(location, _transport.CALL, call)
        print(f"torchx.futures: {signal.Signals(signum).name}: checkpointed, requeueing", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)

    for name in names:
        signal.signal(getattr(signal, f"SIG{name}"), handler)


if __name__ == "__main__":
    sys.exit(main())
