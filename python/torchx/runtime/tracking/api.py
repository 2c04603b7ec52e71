"""``ResultTracker``: results by key (``tracker[key] = {"l2norm": 1.2}``), and the fsspec
backed ``FsspecResultTracker`` (one JSON file per key under a base URI)."""

from __future__ import annotations

import abc
import json
from typing import Dict, Union

KeyType = Union[int, str]
ResultType = Union[int, float, str]


class ResultTracker(abc.ABC):
    """Results by key; ``tracker[key]`` is ``get``, ``tracker[key] = {...}`` is ``put``."""

    def __getitem__(self, key: KeyType) -> Dict[str, ResultType]:
        return self.get(key)

    def __setitem__(self, key: KeyType, results: Dict[str, ResultType]) -> None:
        self.put(key, **results)

    @abc.abstractmethod
    def put(self, key: KeyType, **results: ResultType) -> None:
        """Records ``results`` under ``str(key)`` (overwriting)."""

    @abc.abstractmethod
    def get(self, key: KeyType) -> Dict[str, ResultType]:
        """The results recorded under ``str(key)``, or ``{}``."""


class FsspecResultTracker(ResultTracker):
    """Results as pretty-printed JSON files ``<tracker_base>/<key>`` on any fsspec filesystem."""

    def __init__(self, tracker_base: str) -> None:
        self._tracker_base = tracker_base

    def put(self, key: KeyType, **results: ResultType) -> None:
        import fsspec

        mapper = fsspec.get_mapper(self._tracker_base, create=True)
        mapper[str(key)] = json.dumps(results, indent=2).encode("utf-8")

    def get(self, key: KeyType) -> Dict[str, ResultType]:
        import fsspec

        mapper = fsspec.get_mapper(self._tracker_base)
        try:
            results: Dict[str, Union[int, float, str]] = json.loads(mapper[str(key)].decode("utf-8"))
            return results
        except KeyError:
            return {}
