"""``metrics.tensorboard``'s wrapper: runs a program and stops it after ``--timeout`` seconds or
once ``--exit_on_file`` exists; with ``--start_on_file`` it starts only once that file exists
(fsspec paths). Exits with the program's exit code, or 34 if the timeout came before the start.

    python -m torchx.apps.utils.process_monitor --timeout 60 -- tensorboard --logdir ...
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from typing import List, Optional

TIMEOUT_EXIT_CODE = 34


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="monitors a process and terminates it when a condition is met")
    parser.add_argument("--timeout", type=float, help="timeout in seconds to wait before killing the process")
    parser.add_argument("--start_on_file", type=str, help="start the process once this fsspec path exists")
    parser.add_argument("--exit_on_file", type=str, help="terminate the process once this fsspec path exists")
    parser.add_argument("--poll_rate", type=float, default=5, help="seconds between polls of the process and files")
    parser.add_argument(
        "--kill_timeout", type=float, default=60, help="seconds to wait after terminating before killing"
    )
    parser.add_argument("entrypoint", type=str, help="program entrypoint")
    parser.add_argument("args", type=str, nargs=argparse.REMAINDER, help="program args")
    return parser.parse_args(argv)


def _exists(url: Optional[str]) -> bool:
    if not url:
        return False
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return bool(fs.exists(path))


def main(argv: List[str]) -> None:
    args = parse_args(argv)
    start = time.monotonic()

    def timed_out() -> bool:
        return bool(args.timeout) and time.monotonic() - start > args.timeout

    if args.start_on_file:
        while not _exists(args.start_on_file):
            if timed_out():
                print("reached timeout before launching, terminating...")
                sys.exit(TIMEOUT_EXIT_CODE)
            time.sleep(args.poll_rate)
        print(f"{args.start_on_file} exists, starting process...")

    command = [args.entrypoint, *args.args]
    if command[0] == "--":  # `process_monitor [opts] -- program args`
        command = command[1:]
    proc = subprocess.Popen(command)
    print(f"started process {proc.pid}")
    while True:
        try:
            proc.wait(args.poll_rate)
            print(f"process exited with exit code {proc.returncode}")
            sys.exit(proc.returncode)
        except subprocess.TimeoutExpired:
            if timed_out():
                print("reached timeout, terminating...")
                break
            if _exists(args.exit_on_file):
                print(f"{args.exit_on_file} exists, terminating...")
                break
    proc.terminate()
    print("issued terminate, waiting for exit...")
    try:
        proc.wait(args.kill_timeout)
    except subprocess.TimeoutExpired:
        print("reached safe termination timeout, killing...")
        proc.kill()
    proc.wait()
    print(f"process exited with exit code {proc.returncode}")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main(sys.argv[1:])
