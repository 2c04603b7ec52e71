"""``utils.copy``'s program: copies one file between fsspec locations.

python -m torchx.apps.utils.copy_main --src s3://bucket/a --dst /tmp/a
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import List


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="copies a file between fsspec locations")
    parser.add_argument("--src", type=str, required=True, help="fsspec location of the file to read from")
    parser.add_argument("--dst", type=str, required=True, help="fsspec location of where to copy the file to")
    parser.add_argument("--bufsize", type=int, default=64 * 1024, help="bufsize to use for copying")
    return parser.parse_args(argv)


def main(argv: List[str]) -> None:
    import fsspec

    args = parse_args(argv)
    print(f"copying from {args.src} to {args.dst}")
    src_fs, src_path = fsspec.core.url_to_fs(args.src)
    dst_fs, dst_path = fsspec.core.url_to_fs(args.dst)
    parent = os.path.dirname(dst_path)
    if parent:
        try:
            dst_fs.mkdir(parent, create_parents=True)
        except FileExistsError:  # some filesystems (memory://) raise for an existing dir
            pass
    if src_fs == dst_fs:
        src_fs.copy(src_path, dst_path)
    else:
        with src_fs.open(src_path, "rb") as src, dst_fs.open(dst_path, "wb") as dst:
            shutil.copyfileobj(src, dst, args.bufsize)


if __name__ == "__main__":
    main(sys.argv[1:])
