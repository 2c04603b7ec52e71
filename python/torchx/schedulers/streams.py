"""``Tee``: copies what is written to several files (e.g. the pipes a subprocess writes) into
one writer, on a background thread. Close it to flush and stop the thread."""

from __future__ import annotations

import io
import os
import threading
import time
from typing import BinaryIO, List

_CHUNK = 64000


class Tee:
    """Writes everything readable from the files ``sources`` (paths, read without blocking) and
    everything given to :meth:`write` into ``out``. The order between the two is not
    kept."""

    def __init__(self, out: BinaryIO, *sources: str) -> None:
        if not sources:
            raise AssertionError("must have at least one stream")
        self.streams_lock = threading.Lock()
        self.out = out
        self.streams: List[BinaryIO] = []
        for source in sources:
            stream = io.open(source, "rb", buffering=0)
            os.set_blocking(stream.fileno(), False)
            self.streams.append(stream)
        self._closed = False
        self.thread = threading.Thread(target=self._copy, daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        while True:
            # Read once more after close(): what was written before it is not lost.
            closing = self._closed
            copied = False
            for stream in self.streams:
                data = stream.read(_CHUNK)
                if data:
                    copied = True
                    self.write(data)
            if not copied:
                if closing:
                    return
                time.sleep(0.1)

    def close(self) -> None:
        """Copies what is left, stops the thread, closes the sources and ``out``."""
        if self._closed:
            return
        self._closed = True
        self.thread.join()
        with self.streams_lock:
            for stream in self.streams:
                stream.close()
            self.out.close()

    def write(self, s: bytes) -> int:
        with self.streams_lock:
            return self.out.write(s)
