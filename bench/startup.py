#!/usr/bin/env python3
"""Start-up of the `torchx` command against exec of `/bin/true`: `--help`, `builtins`, a
Kubernetes dry run (no cluster asked) and a Slurm dry run (its `sinfo` probe cached, as after a
user's first command), each run many times in turns, medians of wall time.

    python3 bench/startup.py [--torchx target/release/torchx] [--runs 300]
"""

import argparse
import os
import subprocess
import tempfile

from timing import medians_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchx", default="target/release/torchx")
    ap.add_argument("--runs", type=int, default=300)
    a = ap.parse_args()
    torchx = os.path.abspath(a.torchx)
    work = tempfile.mkdtemp()
    env = dict(os.environ, HOME=work, TORCHX_STATE_DIR=os.path.join(work, "state"))
    env.pop("TORCHXCONFIG", None)
    commands = {
        "/bin/true": ["/bin/true"],
        "torchx --help": [torchx, "--help"],
        "torchx builtins": [torchx, "builtins"],
        'torchx run --dryrun -s kubernetes -cfg queue=q --workspace "" utils.echo': [
            torchx,
            *["run", "--dryrun", "-s", "kubernetes", "-cfg", "queue=q", "--workspace", "", "utils.echo"],
        ],
        'torchx run --dryrun -s slurm --workspace "" utils.echo': [
            torchx,
            *["run", "--dryrun", "-s", "slurm", "--workspace", "", "utils.echo"],
        ],
    }
    # The Slurm dry run's probe, once: later runs read it from the cache (as a user's do).
    subprocess.run(
        commands['torchx run --dryrun -s slurm --workspace "" utils.echo'],
        env=env,
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    medians = medians_ms(commands, a.runs, env, work)
    print("| command | median (ms) | ×`/bin/true` |")
    print("|---|---|---|")
    for name, ms in medians.items():
        print(f"| `{name}` | {ms:.2f} | {ms / medians['/bin/true']:.1f}× |")


if __name__ == "__main__":
    main()
