#!/usr/bin/env python3
"""Start-up of the `torchx` command against exec of `/bin/true`: `--help`, `builtins`, a
Kubernetes dry run (no cluster asked) and a Slurm dry run (its `sinfo` probe cached, as after a
user's first command), each run many times in turns, medians of wall time.

    python3 bench/startup.py [--torchx target/release/torchx] [--before OLD_TORCHX] [--runs 300]

`--before`: another build of `torchx` (an earlier commit's) measured in the same turns, its
rows marked "(before)".
"""

import argparse
import os
import subprocess
import tempfile

from timing import medians_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchx", default="target/release/torchx")
    ap.add_argument("--before", help="an earlier torchx binary, measured in the same turns")
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    binaries = {"": os.path.abspath(a.torchx)}
    if a.before:
        binaries[" (before)"] = os.path.abspath(a.before)
    work = tempfile.mkdtemp()
    env = dict(os.environ, HOME=work, TORCHX_STATE_DIR=os.path.join(work, "state"))
    env.pop("TORCHXCONFIG", None)
    rows = {
        "torchx --help": ["--help"],
        "torchx builtins": ["builtins"],
        'torchx run --dryrun -s kubernetes -cfg queue=q --workspace "" utils.echo': [
            *["run", "--dryrun", "-s", "kubernetes", "-cfg", "queue=q", "--workspace", "", "utils.echo"],
        ],
        'torchx run --dryrun -s slurm --workspace "" utils.echo': [
            *["run", "--dryrun", "-s", "slurm", "--workspace", "", "utils.echo"],
        ],
    }
    # Labels are the table's first column.
    commands = {"`/bin/true`": ["/bin/true"]}
    for name, args in rows.items():
        for mark, torchx in binaries.items():
            commands[f"`{name}`{mark}"] = [torchx, *args]
    # The Slurm dry run's probe, once: later runs read it from the cache (as a user's do).
    subprocess.run(
        commands['`torchx run --dryrun -s slurm --workspace "" utils.echo`'],
        env=env,
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    medians = medians_ms(commands, a.runs, env, work)
    print("| command | median (ms) | ×`/bin/true` |")
    print("|---|---|---|")
    for label, ms in medians.items():
        print(f"| {label} | {ms:.2f} | {ms / medians['`/bin/true`']:.1f}× |")


if __name__ == "__main__":
    main()
