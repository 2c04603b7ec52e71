"""The session id of this process's TorchX calls: ``$TORCHX_INTERNAL_SESSION_ID`` if set, else
a new uuid, the same for the life of the process."""

import os
from typing import Optional

from torchx import settings

TORCHX_INTERNAL_SESSION_ID: str = settings.ENV_TORCHX_INTERNAL_SESSION_ID

CURRENT_SESSION_ID: Optional[str] = None


def get_session_id_or_create_new() -> str:
    """This process's session id (created on the first call)."""
    global CURRENT_SESSION_ID
    if not CURRENT_SESSION_ID:
        CURRENT_SESSION_ID = os.getenv(TORCHX_INTERNAL_SESSION_ID) or _new_id()
    return CURRENT_SESSION_ID


def _new_id() -> str:
    """A random (version 4) UUID's text, as ``str(uuid.uuid4())``: made here because importing
    ``uuid`` (and ``platform`` with it) costs a short script more than its dry run."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def get_torchx_session_id() -> Optional[str]:
    """The session id, if one was created."""
    return CURRENT_SESSION_ID
