"""Where recorded events go: a ``logging`` handler per destination name."""

import logging
from typing import Dict

_log_handlers: Dict[str, logging.Handler] = {
    "console": logging.StreamHandler(),
    "null": logging.NullHandler(),
}


def get_logging_handler(destination: str = "null") -> logging.Handler:
    """The handler of ``destination`` (``KeyError`` for an unknown one)."""
    return _log_handlers[destination]
