"""Hosts a Python scheduler plugin (``torchx_plugins.schedulers`` or a ``torchx.schedulers``
entry point) for the native CLI, over the scheduler-plugin protocol (docs/scheduler-plugins.md,
version 1) in a session: the CLI starts ``python -c "... main()" <name> [<module:attr>]`` once
per command (or has a warm host fork one, ``torchx.cli._warm_host``) and the one scheduler object
serves every operation. Requests come as JSON lines
on stdin and answers go as JSON lines to stdout, each carrying its request's ``id``. Whatever
the scheduler prints goes to stderr."""

from __future__ import annotations

import base64
import json
import pickle
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional

PROTOCOL = 1

_TYPES = {str: "str", int: "int", float: "float", bool: "bool"}


class _Failure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _type_name(tp: Any) -> str:
    import typing

    if tp in _TYPES:
        return _TYPES[tp]
    origin = typing.get_origin(tp)
    if origin is list:
        return "list"
    if origin is dict:
        return "dict"
    raise _Failure("invalid_config", f"run option type {tp} is not one the CLI can pass")


def _info(sched: Any, name: str) -> Dict[str, Any]:
    opts: List[Dict[str, Any]] = []
    for name, opt in sched.run_opts():
        opts.append(
            {
                "name": name,
                "type": _type_name(opt.opt_type),
                "required": opt.is_required,
                "default": opt.default,
                "help": opt.help,
            }
        )
    capabilities = _capabilities(sched)
    # TorchX's `torchx run` waits for and tails the jobs of any scheduler named `local*`.
    capabilities["runs_locally"] = name.startswith("local")
    return {
        "description": (type(sched).__doc__ or type(sched).__name__).strip().splitlines()[0],
        "capabilities": capabilities,
        "run_opts": opts,
    }


_CAPABILITIES = (
    "describe_replicas",
    "list",
    "cancel",
    "delete",
    "logs",
    "log_streams",
    "log_since_until",
    "log_tail",
    "mounts",
    "retries",
    "multi_role",
)


def _capabilities(sched: Any) -> Dict[str, bool]:
    """Everything but what the class says it lacks (``unsupported_capabilities``), and logs only
    if it overrides ``log_iter``: the log options reach ``log_iter`` as in TorchX, and the
    conformance suite checks every claim."""
    from torchx.schedulers.api import Scheduler

    lacks = set(getattr(sched, "unsupported_capabilities", ()))
    unknown = lacks.difference(_CAPABILITIES)
    if unknown:
        raise _Failure(
            "invalid_config",
            f"unsupported_capabilities of {type(sched).__qualname__}: {sorted(unknown)} are not "
            f"capabilities (one of {', '.join(_CAPABILITIES)})",
        )
    if getattr(type(sched), "log_iter", None) is getattr(Scheduler, "log_iter", None):
        lacks.update(("logs", "log_streams", "log_since_until", "log_tail"))
    return {flag: flag not in lacks for flag in _CAPABILITIES}


def _dryrun(sched: Any, request: Dict[str, Any]) -> Any:
    from torchx.schedulers.api import call_validate
    from torchx.schedulers.ids import pinned
    from torchx.specs._json import app_from_json

    app = app_from_json(request["app"])
    # As TorchX's Runner: the scheduler's own checks (e.g. "role has a resource") first.
    call_validate(sched, app, sched.backend, request.get("cfg") or {})
    # `make_unique` appends the CLI's id: the same inputs give the same request.
    with pinned((request.get("context") or {}).get("unique")):
        return sched.submit_dryrun(app, request.get("cfg") or {})


def _describe(sched: Any, app_id: str) -> Optional[Dict[str, Any]]:
    desc = sched.describe(app_id)
    if desc is None:
        return None
    return {
        "state": desc.state.name,
        "msg": desc.msg,
        "num_restarts": max(desc.num_restarts, 0),
        "ui_url": desc.ui_url,
        "structured_error_msg": desc.structured_error_msg,
        "roles": [
            {
                "role": rs.role,
                "replicas": [{"id": r.id, "state": r.state.name, "hostname": r.hostname} for r in rs.replicas],
            }
            for rs in desc.roles_statuses
        ],
    }


def _log_lines(sched: Any, request: Dict[str, Any]) -> Iterator[str]:
    from datetime import datetime

    from torchx.schedulers.api import Stream

    def when(t: Optional[float]) -> Optional[datetime]:
        return None if t is None else datetime.fromtimestamp(t)

    streams = request.get("streams")
    return iter(
        sched.log_iter(
            request["app_id"],
            request["role"],
            request.get("k", 0),
            request.get("regex"),
            when(request.get("since")),
            when(request.get("until")),
            bool(request.get("should_tail")),
            streams=Stream(streams) if streams else None,
        )
    )


def _answer(sched: Any, request: Dict[str, Any], emit: Any) -> Any:
    op = request.get("op")
    if op == "info":
        return _info(sched, str(request.get("scheduler") or getattr(sched, "backend", "")))
    if op == "dryrun":
        info = _dryrun(sched, request)
        try:
            kept: Dict[str, Any] = {"pickle": base64.b64encode(pickle.dumps(info.request)).decode()}
        except Exception:
            kept = {"redo": True}  # an unpicklable request is rebuilt (dry runs are pure)
        return {"request": kept, "rendered": repr(info)}
    if op == "schedule":
        from torchx.specs import AppDryRunInfo

        kept = request.get("request") or {}
        if "pickle" in kept:
            info = AppDryRunInfo(pickle.loads(base64.b64decode(kept["pickle"])), repr)
        else:
            info = _dryrun(sched, request)
        return {"app_id": sched.schedule(info)}
    if op == "describe":
        return _describe(sched, request["app_id"])
    if op == "list":
        return [{"app_id": a.app_id, "state": a.state.name, "name": a.name} for a in sched.list()]
    if op == "cancel":
        sched.cancel(request["app_id"])
        return None
    if op == "delete":
        sched.delete(request["app_id"])
        return None
    if op == "log_lines":
        if not sched.exists(request["app_id"]):
            raise _Failure("not_found", f"no app `{request['app_id']}`")
        lines = _log_lines(sched, request)
        emit({"streaming": True})
        for line in lines:
            emit({"line": line.rstrip("\n")})
        return None
    raise _Failure("unsupported", f"unknown operation `{op}`")


def _factory(name: str, target: Optional[str]) -> Any:
    """``create_scheduler`` of plugin ``name``: ``target`` (``module:attr``, the entry point the
    CLI read from ``entry_points.txt``) is imported directly. Without one the CLI found no entry
    point by that name, so only the ``torchx_plugins.schedulers`` namespace is scanned (which
    spares ``importlib.metadata``'s scan of every installed distribution)."""
    if target:
        from torchx.util.modules import load_module

        factory = load_module(target)
        if factory is None:
            raise ImportError(f"`{target}` names nothing")
        return factory
    from torchx.plugins._registry import PluginRegistry, PluginSource, PluginType, sources_from_env
    from torchx.schedulers import DEFAULT_SCHEDULER_MODULES, without_builtins

    found = PluginRegistry(plugin_sources=sources_from_env() & PluginSource.NAMESPACE_PKG)
    factories = without_builtins(found.get(PluginType.SCHEDULER), DEFAULT_SCHEDULER_MODULES, "scheduler")
    if name in factories:
        return factories[name]
    if found.errors:
        # It may be in one of these: name them rather than calling the scheduler unknown.
        failures = "; ".join(f"`{e.module}`: {e.error}" for e in found.errors)
        raise _Failure("backend", f"no scheduler plugin `{name}` is registered; plugins failed: {failures}")
    raise _Failure("not_found", f"no scheduler plugin `{name}` is registered")


def _serve(request: Dict[str, Any], scheduler: Any, emit: Any) -> None:
    """Answers one request with ``emit`` (errors as the protocol's error messages)."""
    try:
        emit({"ok": _answer(scheduler(request), request, emit)})
    except _Failure as e:
        emit({"error": {"kind": e.kind, "message": str(e)}})
    except (ValueError, KeyError) as e:
        emit({"error": {"kind": "invalid_argument", "message": f"{type(e).__name__}: {e}"}})
    except NotImplementedError as e:
        emit({"error": {"kind": "unsupported", "message": str(e) or "not supported"}})
    except Exception as e:
        emit({"error": {"kind": "backend", "message": f"{type(e).__name__}: {e}"}})


def serve(name: str, load: Callable[[], Any]) -> int:
    """Serves the CLI's requests (one JSON object a line, each with an ``id`` that its answers
    repeat) until stdin closes, with the scheduler ``load()`` returns the factory of. Each
    request runs on its own thread, as TorchX's runner calls a scheduler from several (a
    followed log and the status polls of ``torchx run``)."""
    import threading

    real_stdout = sys.stdout
    # What the scheduler prints goes to stderr: stdout is the protocol's.
    sys.stdout = sys.stderr
    write_lock = threading.Lock()
    create_lock = threading.Lock()
    created: List[Any] = []

    def scheduler(request: Dict[str, Any]) -> Any:
        with create_lock:
            if not created:
                try:
                    create = load()
                    session = (request.get("context") or {}).get("session_name", "torchx")
                    created.append(create(session_name=session))
                except _Failure:
                    raise
                except Exception as e:
                    raise _Failure(
                        "backend",
                        f"scheduler plugin `{name}` cannot be loaded: {type(e).__name__}: {e}",
                    ) from e
            return created[0]

    def answer(line: str) -> None:
        try:
            request = json.loads(line)
        except ValueError:
            return  # not a request: no id to answer
        ident = request.get("id")

        def emit(message: Dict[str, Any]) -> None:
            text = json.dumps({"protocol": PROTOCOL, "id": ident, **message}) + "\n"
            with write_lock:
                real_stdout.write(text)
                real_stdout.flush()

        _serve(request, scheduler, emit)

    for line in sys.stdin:
        if line.strip():
            threading.Thread(target=answer, args=(line,), daemon=True).start()
    return 0


def main() -> int:
    """``<name> [<module:attr>]``: serves plugin ``name`` (docs/scheduler-plugins.md)."""
    name = sys.argv[1]
    target = sys.argv[2] if len(sys.argv) > 2 else None
    return serve(name, lambda: _factory(name, target))


if __name__ == "__main__":
    sys.exit(main())
