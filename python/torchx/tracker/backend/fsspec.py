"""The ``fsspec`` tracker: records on any fsspec filesystem (local, S3, ...), in the layout of
TorchX's ``torchx.tracker.backend.fsspec`` that the ``torchx tracker`` CLI reads and writes too::

    <root>/<b32(run_id)>/metadata/<time_ns>      {"metadata": {...}}
    <root>/<b32(run_id)>/artifacts/<time_ns>     {"name": ..., "path": ..., "metadata": ...}
    <root>/<b32(run_id)>/sources/<b32(source)>   one artifact name per line ("" = the run)
    <root>/<b32(source)>/descendants/<b32(run)>  the same, when that directory exists

As in the CLI: records are read oldest first so the latest value wins, a record never replaces
one written in the same nanosecond, and ``lineage`` is answered from the sources.

Configured by a file of ``key=value`` lines (``protocol``, ``root_path``, and any filesystem
options, dotted keys nesting: ``client_kwargs.endpoint_url=...``)."""

from __future__ import annotations

import json
import os
import time
from base64 import b32decode, b32encode
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional

import fsspec

from torchx.tracker.api import Lineage, TrackerArtifact, TrackerBase, TrackerSource


def generate_filename() -> str:
    """A record's file name: the time in nanoseconds."""
    return str(time.time_ns())


def _encode_torchx_run_id(run_id: str) -> str:
    """A run id as a case-preserving, POSIX-safe file name (base32)."""
    return b32encode(run_id.encode("utf-8")).decode("ascii")


def _decode_torchx_run_id(s: str) -> str:
    return b32decode(s).decode("utf-8")


@dataclass(frozen=True)
class _FsspecTrackerPathBuilder:
    root_dir: str

    def with_run_id(self, run_id: str) -> "_FsspecTrackerPathBuilder":
        return self.with_subpath(_encode_torchx_run_id(run_id))

    def with_subpath(self, subpath: str) -> "_FsspecTrackerPathBuilder":
        return _FsspecTrackerPathBuilder(os.path.join(self.root_dir, subpath))

    def with_unique_filename(self) -> "_FsspecTrackerPathBuilder":
        return self.with_subpath(generate_filename())

    def path(self) -> str:
        return self.root_dir


def _record_order(name: str) -> tuple[Any, ...]:
    base = os.path.basename(name)
    return (int(base) if base.isdigit() else float("inf"), base)


class FsspecTracker(TrackerBase):
    """A tracker over ``fs`` under ``root_dir`` (which must exist)."""

    def __init__(self, fs: fsspec.AbstractFileSystem, root_dir: str) -> None:
        assert fs.exists(root_dir), f"Expects FSSpec tracker directory '{root_dir}' to exist."
        self.fs = fs
        self._path_builder = _FsspecTrackerPathBuilder(root_dir)

    def _run(self, run_id: str) -> _FsspecTrackerPathBuilder:
        return self._path_builder.with_run_id(run_id)

    def _persist(self, run_id: str, category: str, content: Mapping[str, object]) -> None:
        directory = self._run(run_id).with_subpath(category).path()
        self.fs.mkdirs(directory, exist_ok=True)
        ns = time.time_ns()
        while self.fs.exists(os.path.join(directory, str(ns))):
            ns += 1  # never replace a record written in the same nanosecond
        with self.fs.open(os.path.join(directory, str(ns)), mode="w") as f:
            json.dump(content, f)

    def _load(self, run_id: str, category: str) -> List[Mapping[str, Any]]:
        directory = self._run(run_id).with_subpath(category).path()
        if not self.fs.exists(directory):
            return []
        records = []
        for name in sorted((e["name"] for e in self.fs.listdir(directory)), key=_record_order):
            with self.fs.open(name, mode="r") as f:
                records.append(json.load(f))
        return records

    def add_artifact(self, run_id: str, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        self._persist(run_id, "artifacts", {"name": name, "path": path, "metadata": metadata})

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        return {
            str(r["name"]): TrackerArtifact(str(r["name"]), str(r["path"]), r.get("metadata"))
            for r in self._load(run_id, "artifacts")
        }

    def add_metadata(self, run_id: str, **metadata: object) -> None:
        self._persist(run_id, "metadata", {"metadata": metadata})

    def metadata(self, run_id: str) -> Mapping[str, object]:
        merged: Dict[str, object] = {}
        for record in self._load(run_id, "metadata"):
            merged.update(record["metadata"])
        return merged

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        """Links ``run_id`` to its source run, for ``artifact_name`` (links accumulate: each
        artifact of one source is kept). A source run that has tracked data learns of its
        descendant too."""
        sources = self._run(run_id).with_subpath("sources")
        self.fs.mkdirs(sources.path(), exist_ok=True)
        line = artifact_name or ""
        self._append_unique(sources.with_run_id(source_id).path(), line)
        if self.fs.exists(self._run(source_id).path()):
            descendants = self._run(source_id).with_subpath("descendants")
            self.fs.mkdirs(descendants.path(), exist_ok=True)
            self._append_unique(descendants.with_run_id(run_id).path(), line)

    def _append_unique(self, ref_file: str, line: str) -> None:
        """Appends ``line`` to ``ref_file`` unless it holds it already."""
        if self.fs.exists(ref_file):
            with self.fs.open(ref_file, mode="r") as f:
                if line in (existing.strip() for existing in f.read().splitlines()):
                    return
        with self.fs.open(ref_file, mode="a") as f:
            f.write(f"{line}\n")

    def _read_links(self, file: str, artifact_name: Optional[str]) -> List[TrackerSource]:
        with self.fs.open(file, mode="r") as f:
            names = [line.strip() for line in f.read().splitlines() if line.strip()]
        other = _decode_torchx_run_id(os.path.basename(file))
        if not names:
            return [] if artifact_name else [TrackerSource(other, None)]
        return [TrackerSource(other, n) for n in names if not artifact_name or n == artifact_name]

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        directory = self._run(run_id).with_subpath("sources").path()
        if not self.fs.exists(directory):
            return []
        found: List[TrackerSource] = []
        for name in sorted(e["name"] for e in self.fs.listdir(directory)):
            found += self._read_links(name, artifact_name)
        return found

    def run_ids(self, parent_run_id: Optional[str] = None, **kwargs: str) -> Iterable[str]:
        root = self._path_builder.path()
        if not self.fs.exists(root):
            return []
        ids = []
        for entry in self.fs.listdir(root):
            if entry["type"] != "directory":
                continue
            if parent_run_id and not self.fs.exists(
                os.path.join(entry["name"], "sources", _encode_torchx_run_id(parent_run_id))
            ):
                continue
            try:
                ids.append(_decode_torchx_run_id(os.path.basename(entry["name"].rstrip("/"))))
            except (ValueError, UnicodeDecodeError):
                continue  # not a run directory
        return sorted(ids)

    def lineage(self, run_id: str) -> Lineage:
        # Descendants from the children's sources: ``descendants/`` exists only where someone
        # created it, so it cannot be relied on.
        descendants = [
            TrackerSource(child, s.artifact_name)
            for child in self.run_ids(parent_run_id=run_id)
            for s in self.sources(child)
            if s.source_run_id == run_id
        ]
        return Lineage(sources=list(self.sources(run_id)), descendants=descendants)

    def __repr__(self) -> str:
        return f"<FsspecTracker: root_path={self._path_builder.path()}>"


def _put_config(key: str, value: str, config: Dict[str, Any]) -> None:
    first, dot, rest = key.partition(".")
    if not dot:
        config[key] = value
    elif not rest:
        raise ValueError(f"Illegal config key `{key}`. Key should not have a `.` suffix")
    else:
        _put_config(rest, value, config.setdefault(first, {}))


def _read_config(config_file: str) -> Mapping[str, Any]:
    """The ``key=value`` lines of ``config_file`` (any fsspec URL; ``#`` comments), dotted
    keys nested."""
    data: Dict[str, Any] = {}
    with fsspec.open(config_file, "rt") as f:
        for line in f:
            if line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if key and sep and value:
                _put_config(key.strip(), value.strip(), data)
    return data


def create(config_file: str) -> TrackerBase:
    """The ``torchx.tracker`` entry point: a tracker from the config file (which names the
    filesystem ``protocol`` and the ``root_path``; other keys are the filesystem's options)."""
    config = dict(_read_config(config_file))
    if "protocol" not in config or "root_path" not in config:
        raise ValueError(f"Please specify 'protocol' and 'root_path' in {config_file}")
    protocol = config.pop("protocol")
    root = config.pop("root_path")
    return FsspecTracker(fsspec.filesystem(protocol, **config), root)
