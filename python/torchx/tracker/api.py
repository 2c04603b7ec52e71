"""Experiment tracking for jobs, as TorchX's ``torchx.tracker.api``: a job records metadata,
artifacts and the runs it derives from through ``AppRun``; the launcher tells it which
trackers to use (``TORCHX_TRACKERS``, ``TORCHX_TRACKER_<NAME>_CONFIG``), its run id
(``TORCHX_JOB_ID``) and its parent (``TORCHX_PARENT_RUN_ID``)."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, List, Mapping, Optional

from torchx import plugins
from torchx.util.entrypoints import load_group
from torchx.util.modules import load_module


def _logger() -> Any:
    # `logging` is imported when there is something to log, not by every Runner user.
    import logging

    return logging.getLogger(__name__)


# Defined in torchx.settings (0.8); re-exported where 0.7.0 had them.
from torchx.settings import (  # noqa: E402
    ENV_TORCHX_JOB_ID as ENV_TORCHX_JOB_ID,
    ENV_TORCHX_PARENT_RUN_ID as ENV_TORCHX_PARENT_RUN_ID,
    ENV_TORCHX_TRACKERS as ENV_TORCHX_TRACKERS,
)


@dataclass
class TrackerSource:
    """A run (or external entity) another run derives from; ``artifact_name`` says how."""

    source_run_id: str
    artifact_name: Optional[str]


@dataclass
class TrackerArtifact:
    """A named artifact of a run: its path and optional metadata."""

    name: str
    path: str
    metadata: Optional[Mapping[str, object]]


@dataclass
class AppRunTrackableSource:
    """A source of an ``AppRun``, as an ``AppRun``."""

    parent: "AppRun"
    artifact_name: Optional[str]


@dataclass
class Lineage:
    """Where a run comes from (``sources``) and which runs name it as a source
    (``descendants``; their ``source_run_id`` is the descendant's id)."""

    sources: List[TrackerSource] = field(default_factory=list)
    descendants: List[TrackerSource] = field(default_factory=list)


class TrackerBase(ABC):
    """A tracking backend. Experimental in TorchX too: the API may change."""

    @abstractmethod
    def add_artifact(self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        """Records artifact ``name`` at ``path`` for ``run_id``."""

    @abstractmethod
    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        """The artifacts of ``run_id`` by name (the latest record of a name wins)."""

    @abstractmethod
    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        """Records metadata values for ``run_id``."""

    @abstractmethod
    def metadata(self, run_id: str) -> Mapping[str, object]:
        """The metadata of ``run_id`` (the latest value of a key wins)."""

    @abstractmethod
    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        """Records that ``run_id`` derives from ``source_id`` (through ``artifact_name``)."""

    @abstractmethod
    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        """The sources of ``run_id``, only those through ``artifact_name`` if given."""

    @abstractmethod
    def lineage(self, run_id: str) -> Lineage:
        """The sources and descendants of ``run_id``."""

    @abstractmethod
    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """The run ids the tracker knows (backends may take filters)."""


def tracker_config_env_var_name(entrypoint_key: str) -> str:
    """``TORCHX_TRACKER_<NAME>_CONFIG``: where a job finds tracker ``entrypoint_key``'s config."""
    return f"TORCHX_TRACKER_{entrypoint_key.upper()}_CONFIG"


def _extract_tracker_name_and_config_from_environ() -> Mapping[str, Optional[str]]:
    trackers = os.environ.get(ENV_TORCHX_TRACKERS)
    if trackers is None:
        _logger().info("No trackers were configured, skipping setup.")
        return {}
    return {name: os.environ.get(tracker_config_env_var_name(name)) for name in trackers.split(",")}


def build_trackers(factory_and_config: Mapping[str, Optional[str]]) -> Iterable[TrackerBase]:
    """A tracker per ``name -> config``: ``name`` is a tracker plugin
    (``torchx_plugins.tracker`` or a ``torchx.tracker`` entry point) or a module path
    (``pkg.mod:factory``); the factory is called with the config (or None). An unknown name is
    skipped with a warning."""
    found = plugins.registry()
    factories = dict(found.get(plugins.PluginType.TRACKER))
    if found.reads_entry_points():
        # 0.7.0 read the entry points through this module's `load_group` (code patches it).
        factories = {**(load_group("torchx.tracker") or {}), **factories}
    if not factories:
        _logger().warning("no 'torchx.tracker' plugins registered")
    trackers = []
    for name, config in factory_and_config.items():
        factory = factories.get(name) or load_module(name)
        if not factory or not callable(factory):
            _logger().warning(
                "no tracker factory `%s` found in plugins or modules, see https://pytorch.org/torchx/main/tracker.html",
                name,
            )
            continue
        trackers.append(factory(config))
    return trackers


def trackers_from_environ() -> Iterable[TrackerBase]:
    """The trackers ``TORCHX_TRACKERS`` names, each built with its
    ``TORCHX_TRACKER_<NAME>_CONFIG``."""
    configs = _extract_tracker_name_and_config_from_environ()
    return build_trackers(configs) if configs else []


@dataclass
class AppRun:
    """A job's view of tracking: every write goes to each backend; reads use the first."""

    id: str
    backends: Iterable[TrackerBase]

    @staticmethod
    @lru_cache(maxsize=1)  # noqa: B019 - one AppRun per process, as in TorchX
    def run_from_env() -> "AppRun":
        """The ``AppRun`` of this job, from what the launcher put in the environment (run id
        ``<UNDEFINED>`` and no backends when not launched by torchx). The parent run, if
        any, is recorded as a source."""
        job_id = os.getenv(ENV_TORCHX_JOB_ID, default="<UNDEFINED>")
        trackers = list(trackers_from_environ())
        parent = os.environ.get(ENV_TORCHX_PARENT_RUN_ID)
        if parent:
            for tracker in trackers:
                tracker.add_source(job_id, parent, artifact_name=None)
        return AppRun(id=job_id, backends=trackers)

    def add_metadata(self, **kwargs: object) -> None:
        for backend in self.backends:
            backend.add_metadata(self.id, **kwargs)

    def add_artifact(self, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        for backend in self.backends:
            backend.add_artifact(self.id, name, path, metadata)

    def job_id(self) -> str:
        return self.id

    def add_source(self, source_id: str, artifact_name: Optional[str] = None) -> None:
        for backend in self.backends:
            backend.add_source(self.id, source_id, artifact_name)

    def sources(self) -> Iterable[AppRunTrackableSource]:
        backend = next(iter(self.backends), None)
        if backend is None:
            return []
        return [
            AppRunTrackableSource(AppRun(s.source_run_id, backends=self.backends), s.artifact_name)
            for s in backend.sources(self.id)
        ]

    def children(self) -> Iterable["AppRun"]:
        backend = next(iter(self.backends), None)
        if backend is None:
            return []
        return [AppRun(d.source_run_id, backends=self.backends) for d in backend.lineage(self.id).descendants]
