"""A tracker registered under ``torchx.tracker``: every record is a line of a JSON-lines file
(the config names the file)."""

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional

from torchx.tracker.api import Lineage, TrackerArtifact, TrackerBase, TrackerSource


class JsonLinesTracker(TrackerBase):
    def __init__(self, path: str) -> None:
        self.path = path

    def _append(self, record: Dict[str, Any]) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")

    def _records(self, kind: str, run_id: Optional[str] = None) -> List[Dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            records = [json.loads(line) for line in f if line.strip()]
        return [r for r in records if r["kind"] == kind and (run_id is None or r["run_id"] == run_id)]

    def add_artifact(self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        self._append({"kind": "artifact", "run_id": run_id, "name": name, "path": path, "metadata": metadata})

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        return {
            r["name"]: TrackerArtifact(r["name"], r["path"], r["metadata"]) for r in self._records("artifact", run_id)
        }

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        self._append({"kind": "metadata", "run_id": run_id, "values": kwargs})

    def metadata(self, run_id: str) -> Mapping[str, object]:
        merged: Dict[str, object] = {}
        for r in self._records("metadata", run_id):
            merged.update(r["values"])
        return merged

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        self._append({"kind": "source", "run_id": run_id, "source": source_id, "artifact": artifact_name})

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        return [
            TrackerSource(r["source"], r["artifact"])
            for r in self._records("source", run_id)
            if artifact_name is None or r["artifact"] == artifact_name
        ]

    def lineage(self, run_id: str) -> Lineage:
        lineage = Lineage()
        for r in self._records("source"):
            if r["run_id"] == run_id:
                lineage.sources.append(TrackerSource(r["source"], r["artifact"]))
            if r["source"] == run_id:
                lineage.descendants.append(TrackerSource(r["run_id"], r["artifact"]))
        return lineage

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        parent = kwargs.get("parent_run_id")
        ids: List[str] = []
        for kind in ("metadata", "artifact", "source"):
            for r in self._records(kind):
                if parent and not (kind == "source" and r["source"] == parent):
                    continue
                if r["run_id"] not in ids:
                    ids.append(r["run_id"])
        return ids


def create(config: Optional[str]) -> JsonLinesTracker:
    if not config:
        raise ValueError("example_jsonl needs a config: the path of its JSON-lines file")
    return JsonLinesTracker(config)
