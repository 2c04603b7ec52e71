"""Where a call and its outcome travel: a directory (a local path every job sees, or an fsspec
URL such as ``s3://bucket/prefix``) holding ``call.pkl`` (the function and its arguments,
cloudpickled) and, once the job ends, ``result.pkl``: an ``outcome``."""

from __future__ import annotations

from typing import Any, Optional, Tuple

# ("ok", the cloudpickled return value, None) or ("error", the cloudpickled exception or None
# when it does not pickle, the traceback text). The value travels pickled inside the outcome,
# so the outcome itself always loads, even where the value's classes do not.
Outcome = Tuple[str, Optional[bytes], Optional[str]]

CALL = "call.pkl"
RESULT = "result.pkl"


def _is_url(location: str) -> bool:
    return "://" in location


def dump(location: str, name: str, obj: Any) -> None:
    """Writes ``obj`` cloudpickled to ``location/name``, whole or not at all."""
    import cloudpickle

    data = cloudpickle.dumps(obj)
    if _is_url(location):
        import fsspec

        with fsspec.open(f"{location.rstrip('/')}/{name}", "wb") as f:
            f.write(data)
        return
    import os

    os.makedirs(location, exist_ok=True)
    path = os.path.join(location, name)
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def remove(location: str) -> None:
    """Removes ``location`` and what it holds, as far as it can (best effort: a result already
    read must not fail the future that read it)."""
    try:
        if _is_url(location):
            import fsspec

            fs, path = fsspec.core.url_to_fs(location)
            fs.rm(path, recursive=True)
            return
        import shutil

        shutil.rmtree(location, ignore_errors=True)
    except Exception:  # noqa: BLE001 - best effort, by contract
        pass


def load(location: str, name: str) -> Any:
    """The object at ``location/name``; ``FileNotFoundError`` if there is none."""
    import pickle

    if _is_url(location):
        import fsspec

        with fsspec.open(f"{location.rstrip('/')}/{name}", "rb") as f:
            return pickle.loads(f.read())
    import os

    with open(os.path.join(location, name), "rb") as f:
        return pickle.loads(f.read())


def outcome(kind: str, value: Any, text: Optional[str]) -> Outcome:
    """The outcome of a call; a return value that does not pickle is an error that says so."""
    import cloudpickle

    try:
        return (kind, cloudpickle.dumps(value), text)
    except Exception as e:  # noqa: BLE001 - any pickling failure: its text travels instead
        if kind == "error":
            return ("error", None, text)
        return ("error", None, f"the return value ({type(value).__name__}) does not pickle: {e!r}")
