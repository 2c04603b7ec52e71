"""``Runner.plan`` and ``scheduler="auto:S1,S2"``: a job checked on each scheduler before it is
queued (its dry run, the pre-flight checks and what the scheduler can tell, as ``torchx plan``
does; this module asks the ``torchx`` command of this environment)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from torchx.runner._cli import raise_for as _raise_for, torchx as _torchx


@dataclass
class PlanCheck:
    """One check: what was checked, what was found, its outcome (``ok``, ``fails`` or
    ``unknown``), what to change (``fails``) or why it could not be made (``unknown``)."""

    check: str
    detail: str
    outcome: str
    fix: Optional[str] = None
    why: Optional[str] = None


@dataclass
class PlanRow:
    """One scheduler's plan of a job: its verdict (``ok``, ``fails``, ``unknown``), its checks,
    what each role asks for and, where the scheduler can tell, when it would start."""

    scheduler: str
    verdict: str
    checks: List[PlanCheck] = field(default_factory=list)
    resources: List[str] = field(default_factory=list)
    start: Optional[str] = None


def _cfg_arg(cfg: Optional[Mapping[str, Any]]) -> List[str]:
    if not cfg:
        return []
    items = []
    for key, value in cfg.items():
        if isinstance(value, (list, tuple)):
            value = ";".join(str(v) for v in value)
        items.append(f"{key}={value}")
    return ["--cfg", ",".join(items)]


def plan(
    component: str,
    component_args: Sequence[str],
    schedulers: Sequence[str],
    cfg: Optional[Mapping[str, Any]] = None,
    workspace: Optional[str] = None,
) -> List[PlanRow]:
    """Plans the component on each scheduler (``cfg`` keys may say ``S.key`` for scheduler S
    only). A mistake in the component itself raises ``ValueError``."""
    args = ["plan", "--json", "--scheduler", ",".join(schedulers), *_cfg_arg(cfg)]
    if workspace is not None:
        args += ["--workspace", workspace]
    done = _torchx([*args, component, *component_args])
    if done.returncode not in (0, 1) or not done.stdout.strip():
        _raise_for(done)
    rows: List[Dict[str, Any]] = json.loads(done.stdout)
    return [
        PlanRow(
            scheduler=r["scheduler"],
            verdict=r["verdict"],
            checks=[PlanCheck(c["check"], c["detail"], c["outcome"], c.get("fix"), c.get("why")) for c in r["checks"]],
            resources=list(r["resources"]),
            start=r.get("start"),
        )
        for r in rows
    ]


def plan_app(
    app: Any,
    schedulers: Sequence[str],
    cfg: Optional[Mapping[str, Any]] = None,
    workspace: Optional[str] = None,
) -> List[PlanRow]:
    """``plan`` of an ``AppDef`` (given to ``torchx plan`` as an AppDef file)."""
    import os
    import tempfile

    from torchx.specs._json import app_to_json

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix="torchx-plan-", delete=False) as f:
        json.dump(app_to_json(app), f)  # JSON is YAML
    try:
        return plan(f.name, [], schedulers, cfg, workspace)
    finally:
        os.unlink(f.name)


def auto_schedulers(scheduler: str) -> Optional[List[str]]:
    """The schedulers of ``"auto:S1,S2"``, in order; ``None`` for a plain scheduler name."""
    if not scheduler.startswith("auto:"):
        return None
    names = [s.strip() for s in scheduler[len("auto:") :].split(",") if s.strip()]
    if not names:
        raise ValueError("scheduler='auto:...' needs the schedulers to try, in order: 'auto:slurm,local_cwd'")
    return names


def cfg_for(scheduler: str, cfg: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The part of ``cfg`` meant for ``scheduler``: its ``S.key`` items (unprefixed) and the
    unprefixed ones."""
    out: Dict[str, Any] = {}
    for key, value in (cfg or {}).items():
        prefix, dot, rest = key.partition(".")
        if not dot:
            out[key] = value
        elif prefix == scheduler:
            out[rest] = value
    return out


def choose(rows: Sequence[PlanRow]) -> str:
    """The first scheduler whose plan is ``ok``; ``ValueError`` naming each one's reason if
    none is."""
    for row in rows:
        if row.verdict == "ok":
            return row.scheduler
    reasons = []
    for row in rows:
        bad = next((c for c in row.checks if c.outcome != "ok"), None)
        reasons.append(
            f"{row.scheduler} ({row.verdict}: {bad.check + ': ' + (bad.detail or bad.why or '') if bad else ''})"
        )
    raise ValueError(f"scheduler='auto:...': no scheduler can run this job: {'; '.join(reasons)}")
