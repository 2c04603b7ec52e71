"""``python -m torchx.cli.main`` (TorchX's entry point): runs this environment's native
``torchx`` command with the same arguments and exits with its code."""

from __future__ import annotations

import os
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> None:
    from torchx._bin import find_torchx_bin

    binary = find_torchx_bin()
    if binary is None:
        sys.exit("torchx: no `torchx` executable (pip install torchx-rs-cli, or put it on PATH)")
    args = sys.argv[1:] if argv is None else argv
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(binary, [binary, *args])


if __name__ == "__main__":
    main()
