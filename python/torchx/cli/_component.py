"""The bridge the native ``torchx`` CLI runs to evaluate a Python component file
(``torchx run ./my_component.py:train ...``): ``python -m torchx.cli._component``.

Reads one JSON request on stdin (``path``, ``function``, ``args``, ``defaults`` and an
optional ``action``: ``materialize`` (default) or ``source``) and writes one JSON result on
stdout: ``{"app": <AppDef in the core's shape>}``, ``{"help": text}``, ``{"source": text}``
or ``{"error": {"kind": ..., "message": ...}}``. Whatever the component prints goes to
stderr, so stdout carries only the result."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict


def _error(kind: str, message: str) -> Dict[str, Any]:
    return {"error": {"kind": kind, "message": message}}


def _evaluate(request: Dict[str, Any]) -> Dict[str, Any]:
    if request.get("action") == "named_resources":
        return _plugin_named_resources()
    if request.get("action") == "plugin_names":
        return _plugin_names(request["group"])
    if request.get("action") == "tracker":
        return _tracker(request)
    if request.get("action") == "list" or not request.get("path"):
        # The torchx.components entry points: listed, or one of them by name.
        try:
            found = _entry_point_components(request.get("entry_points"))
        except Exception as e:  # an entry point that fails to import
            return _error(
                "invalid_spec",
                f"loading the torchx.components entry points raised {_describe(e)}",
            )
        if request.get("action") == "list":
            valid = [c for c in found.values() if not c.validation_errors]
            return {"components": [{"name": c.name, "description": c.description} for c in valid]}
        name = request["function"]
        if name not in found and "." in name:
            # `pkg.module.fn`: a function by its module path (the nightly's finder).
            answer = _component(name, request)
            if answer.get("error", {}).get("kind") != "not_found":
                return answer
        if name not in found:
            return _error(
                "not_found",
                "no builtin, component directory or torchx.components entry point has it"
                + (", nor is it a function of a module on the Python path" if "." in name else ""),
            )
        if found[name].validation_errors:
            return _error("invalid_spec", "\n".join(found[name].validation_errors))
        return _materialize(found[name].fn, request)
    return _component(f"{request['path']}:{request['function']}", request)


def _component(name: str, request: Dict[str, Any]) -> Dict[str, Any]:
    """The component ``name`` (``path:fn``, ``pkg.module:fn`` or ``pkg.module.fn``), evaluated
    as ``request`` asks."""
    from torchx.specs.finder import ComponentNotFoundException, ComponentValidationException, get_component

    try:
        component = get_component(name)
    except ComponentNotFoundException as e:
        return _error("not_found", str(e))
    except ComponentValidationException as e:
        return _error("invalid_spec", str(e))
    except SyntaxError as e:
        return _error("invalid_spec", f"{e.msg} (line {e.lineno})")
    except Exception as e:  # the file raised while it was executed
        return _error("invalid_spec", f"executing the file raised {_describe(e)}")

    if request.get("action") == "source":
        import inspect

        return {"source": inspect.getsource(component.fn)}

    return _materialize(component.fn, request)


def _tracker(request: Dict[str, Any]) -> Dict[str, Any]:
    """One operation of a tracker of the ``torchx.tracker`` entry points, built with its config
    as a job's ``AppRun`` builds it."""
    from torchx.tracker.api import build_trackers

    name, op, args = request["name"], request["op"], request.get("args") or {}
    try:
        trackers = list(build_trackers({name: request.get("config")}))
    except Exception as e:
        return _error("backend", f"tracker plugin `{name}` cannot be built: {_describe(e)}")
    if not trackers:
        return _error(
            "not_found", f"no tracker plugin `{name}` (torchx_plugins.tracker or a torchx.tracker entry point)"
        )
    tracker = trackers[0]
    try:
        if op == "add_metadata":
            tracker.add_metadata(args["run_id"], **args["metadata"])
            return {"ok": None}
        if op == "add_artifact":
            tracker.add_artifact(args["run_id"], args["name"], args["path"], args.get("metadata"))
            return {"ok": None}
        if op == "add_source":
            tracker.add_source(args["run_id"], args["source_id"], args.get("artifact_name"))
            return {"ok": None}
        if op == "metadata":
            return {"ok": dict(tracker.metadata(args["run_id"]))}
        if op == "artifacts":
            return {
                "ok": {
                    n: {"path": a.path, "metadata": dict(a.metadata) if a.metadata else None}
                    for n, a in tracker.artifacts(args["run_id"]).items()
                }
            }
        if op == "sources":
            found = tracker.sources(args["run_id"], args.get("artifact_name"))
            return {"ok": [_source(s) for s in found]}
        if op == "lineage":
            lineage = tracker.lineage(args["run_id"])
            return {
                "ok": {
                    "sources": [_source(s) for s in getattr(lineage, "sources", [])],
                    "descendants": [_source(s) for s in getattr(lineage, "descendants", [])],
                }
            }
        if op == "run_ids":
            parent = args.get("parent_run_id")
            ids = tracker.run_ids(parent_run_id=parent) if parent else tracker.run_ids()
            return {"ok": list(ids)}
    except Exception as e:
        return _error("backend", f"tracker `{name}` failed `{op}`: {_describe(e)}")
    return _error("invalid_argument", f"unknown tracker operation `{op}`")


def _source(s: Any) -> Dict[str, Any]:
    return {"source_run_id": s.source_run_id, "artifact_name": s.artifact_name}


def _plugin_names(group: str) -> Dict[str, Any]:
    """The names ``torchx.plugins.registry()`` finds for ``group`` (schedulers: less the
    builtins' names, which plugins cannot take). Discovery errors go to stderr as warnings."""
    import logging

    from torchx import plugins

    logging.basicConfig(format="torchx: %(message)s")
    if group == plugins.PluginType.SCHEDULER.value:
        from torchx.schedulers import _plugin_factories

        return {"names": sorted(_plugin_factories())}
    return {"names": sorted(plugins.registry().get(plugins.PluginType(group)))}


def _plugin_named_resources() -> Dict[str, Any]:
    """Every named resource the plugins add (``torchx.named_resources`` entry points,
    ``torchx_plugins.named_resources`` modules, ``$TORCHX_CUSTOM_NAMED_RESOURCES``) in the
    core's shape, built once: the core hands them to component builders as data."""
    from torchx.specs import _named_resources
    from torchx.specs._json import resource_to_json

    try:
        extra = {name: factory for _, found in _named_resources._registered() for name, factory in found.items()}
        return {"resources": {name: resource_to_json(factory()) for name, factory in extra.items()}}
    except Exception as e:  # a plugin that fails to import or to build its resource
        return _error("invalid_spec", f"loading the named-resource plugins raised {_describe(e)}")


def _entry_point_components(declared: Any = None) -> Dict[str, Any]:
    """The components of the ``torchx.components`` entry points by name. ``declared``
    (``{name: module}``, read by the CLI from ``entry_points.txt``) spares the scan of every
    installed distribution."""
    from torchx.specs.finder import ModuleComponentsFinder, _load_custom_components

    if declared is None:
        return {c.name: c for c in _load_custom_components()}
    from torchx.util.modules import load_module

    found: Dict[str, Any] = {}
    for group, target in declared.items():
        module = load_module(target)
        if module is None:
            raise ImportError(f"entry point `{group} = {target}` of torchx.components names nothing")
        for c in ModuleComponentsFinder(module, "" if group.startswith("_") else group).find():
            found[c.name] = c
    return found


def _materialize(fn: Any, request: Dict[str, Any]) -> Dict[str, Any]:
    import contextlib
    import io

    from torchx.specs import AppDef
    from torchx.specs._json import app_to_json
    from torchx.specs.builders import component_args_from_str

    args = [str(a) for a in request.get("args", [])]
    defaults = {str(k): str(v) for k, v in request.get("defaults", {}).items()}
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            parsed = component_args_from_str(fn, args, defaults)
            # Called here rather than by materialize_appdef: a result that is not an AppDef
            # is the component's spec error, not a failure of its call.
            app = fn(*parsed.positional_args.values(), *parsed.var_args, **parsed.kwargs)
    except SystemExit as e:
        if e.code in (0, None):  # --help
            return {"help": out.getvalue()}
        sys.stderr.write(out.getvalue())
        return _error("invalid_argument", err.getvalue().strip() or f"exited with {e.code}")
    except Exception as e:
        sys.stderr.write(out.getvalue() + err.getvalue())
        return _error("invalid_argument", f"the component raised {_describe(e)}")
    sys.stderr.write(out.getvalue() + err.getvalue())
    if not isinstance(app, AppDef):
        return _error("invalid_spec", f"returned {type(app).__name__}, not an AppDef")
    try:
        return {"app": app_to_json(app)}
    except (TypeError, ValueError) as e:
        return _error("invalid_spec", f"the AppDef it returned is invalid: {e}")


def _describe(e: BaseException) -> str:
    import traceback

    frames = traceback.extract_tb(e.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return f"{type(e).__name__}: {e}{where}"


def main() -> int:
    try:
        request = json.load(sys.stdin)
    except ValueError as e:
        result = _error("invalid_argument", f"bad request from the torchx CLI: {e}")
    else:
        result = _evaluate(request)
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
