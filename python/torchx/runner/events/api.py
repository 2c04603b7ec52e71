"""The event each Runner API call records (TorchX's ``torchx.runner.events.api``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Dict, Optional, Union

from torchx._record import Record


class SourceType(str, Enum):
    UNKNOWN = "<unknown>"
    INTERNAL = "INTERNAL"
    EXTERNAL = "EXTERNAL"


@dataclass(init=False, repr=False, eq=False)
class TorchxEvent(Record):
    """One Runner API call: its session, scheduler, api name, app, config, where it came from,
    its CPU and wall time, and the exception it raised, if any."""

    session: str
    scheduler: str
    api: str
    app_id: Optional[str] = None
    app_image: Optional[str] = None
    app_metadata: Optional[Dict[str, str]] = None
    runcfg: Optional[str] = None
    raw_exception: Optional[str] = None
    source: SourceType = SourceType.UNKNOWN
    cpu_time_usec: Optional[int] = None
    wall_time_usec: Optional[int] = None
    start_epoch_time_usec: Optional[int] = None
    workspace: Optional[str] = None
    exception_type: Optional[str] = None
    exception_message: Optional[str] = None
    exception_source_location: Optional[str] = None

    def __init__(
        self,
        session: str,
        scheduler: str,
        api: str,
        app_id: Optional[str] = None,
        app_image: Optional[str] = None,
        app_metadata: Optional[Dict[str, str]] = None,
        runcfg: Optional[str] = None,
        raw_exception: Optional[str] = None,
        source: SourceType = SourceType.UNKNOWN,
        cpu_time_usec: Optional[int] = None,
        wall_time_usec: Optional[int] = None,
        start_epoch_time_usec: Optional[int] = None,
        workspace: Optional[str] = None,
        exception_type: Optional[str] = None,
        exception_message: Optional[str] = None,
        exception_source_location: Optional[str] = None,
    ) -> None:
        self.session = session
        self.scheduler = scheduler
        self.api = api
        self.app_id = app_id
        self.app_image = app_image
        self.app_metadata = app_metadata
        self.runcfg = runcfg
        self.raw_exception = raw_exception
        self.source = source
        self.cpu_time_usec = cpu_time_usec
        self.wall_time_usec = wall_time_usec
        self.start_epoch_time_usec = start_epoch_time_usec
        self.workspace = workspace
        self.exception_type = exception_type
        self.exception_message = exception_message
        self.exception_source_location = exception_source_location

    def __str__(self) -> str:
        return self.serialize()

    @staticmethod
    def deserialize(data: Union[str, "TorchxEvent"]) -> "TorchxEvent":
        """The event ``serialize`` wrote (an event is returned as it is); ``TypeError`` for
        anything else. An unknown ``source`` is dropped (read as ``UNKNOWN``)."""
        if isinstance(data, TorchxEvent):
            return data
        if not isinstance(data, str):
            raise TypeError(f"expected a serialized TorchxEvent (str) or a TorchxEvent, got {type(data).__name__}")
        import json  # here: a run that records no event never loads it

        fields = json.loads(data)
        if "source" in fields:
            try:
                fields["source"] = SourceType(fields["source"])
            except ValueError:
                del fields["source"]
        return TorchxEvent(**fields)

    def serialize(self) -> str:
        import json

        return json.dumps(asdict(self))
