"""``utils.booth``'s program: evaluates the Booth function at (x1, x2) and records the result
with ``FsspecResultTracker`` under ``--tracker_base`` (key: the trial index), for HPO demos.

    python -m torchx.apps.utils.booth_main --x1 1 --x2 3 --tracker_base /tmp/booth
"""

from __future__ import annotations

import argparse
import sys
from typing import List


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="evaluates the booth function at (x1, x2)")
    parser.add_argument("--x1", type=float, required=True, help="x1")
    parser.add_argument("--x2", type=float, required=True, help="x2")
    parser.add_argument(
        "--tracker_base",
        type=str,
        default="/tmp/torchx-utils-booth",
        help="URI of output directory to use as the tracker's base dir",
    )
    parser.add_argument("--trial_idx", type=int, default=0, help="trial index (ignore if not running hpo)")
    return parser.parse_args(argv)


def booth(x1: float, x2: float) -> float:
    return (x1 + 2 * x2 - 7) ** 2 + (2 * x1 + x2 - 5) ** 2


def main(argv: List[str]) -> None:
    from torchx.runtime.tracking import FsspecResultTracker

    args = parse_args(argv)
    FsspecResultTracker(args.tracker_base)[args.trial_idx] = {"booth_eval": booth(args.x1, args.x2)}


if __name__ == "__main__":
    main(sys.argv[1:])
