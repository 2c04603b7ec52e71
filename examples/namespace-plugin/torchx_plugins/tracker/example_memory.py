"""A tracker that keeps what it is told in memory (for tests of tracker discovery)."""

from typing import Any, Dict, Iterable, Mapping, Optional

from torchx.plugins import register
from torchx.tracker.api import Lineage, TrackerArtifact, TrackerBase, TrackerSource


class MemoryTracker(TrackerBase):
    def __init__(self, config: Optional[str]) -> None:
        self.config = config
        self._metadata: Dict[str, Dict[str, object]] = {}

    def add_artifact(self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        pass

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        return {}

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        self._metadata.setdefault(run_id, {}).update(kwargs)

    def metadata(self, run_id: str) -> Mapping[str, object]:
        return self._metadata.get(run_id, {})

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        pass

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        return []

    def lineage(self, run_id: str) -> Lineage:
        raise NotImplementedError

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        return list(self._metadata)


@register.tracker()
def example_memory(config: Optional[str]) -> Any:
    return MemoryTracker(config)
