"""Where recorded events go: a ``logging`` handler per destination name."""

import logging
from typing import Dict

_log_handlers: Dict[str, logging.Handler] = {
    "console": logging.StreamHandler(),
    "null": logging.NullHandler(),
}


def get_logging_handler(destination: str = "null") -> logging.Handler:
    """The handler of ``destination``: a ``torchx.event_handlers`` plugin of that name (made by
    its factory), else the builtin ``console`` or ``null`` one; ``KeyError`` for neither."""
    from torchx.plugins import PluginType, registry

    factory = registry().get(PluginType.EVENT_HANDLER).get(destination)
    if factory is None:
        return _log_handlers[destination]
    handler: logging.Handler = factory()
    return handler
