#!/usr/bin/env python3
"""Python functions as jobs, side by side (BENCHMARKS.md, "Python functions as jobs").

Usage: python3 bench/futures.py --ours target/release/torchx [--runs N] [--docker IMAGE] [--slurm N]
(the running Python must have this torchx package and submitit installed)

On local_cwd: `Executor("local_cwd").submit(pow, 2, 10).result()` (one executor, reused),
`torchx run --wait utils.python -c ...` of the equivalent job (the CLI, a process per run), and
submitit's `LocalExecutor` (`submit(pow, 2, 10).result()`). Medians of N runs.

With `--docker IMAGE` (an image with torchx and cloudpickle, on the engine DOCKER_HOST names):
the same call and `torchx run` on local_docker.

With `--slurm N` (a Slurm cluster: scripts/slurm/up.sh): `map(pow, range(N), [2] * N)` to the
last result, ours (`Executor("slurm").map`) against submitit's `SlurmExecutor.map_array`, both
one job array; one run each.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time


def median_ms(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours", required=True)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--docker", metavar="IMAGE")
    ap.add_argument("--slurm", type=int, default=0, metavar="N")
    a = ap.parse_args()
    root = tempfile.mkdtemp()
    os.environ["TORCHX_STATE_DIR"] = os.path.join(root, "state")
    a.ours = os.path.abspath(a.ours)
    os.environ["TORCHX_SUPERVISOR"] = a.ours
    os.chdir(root)

    from torchx.futures import Executor

    with Executor("local_cwd") as ex:
        ex.submit(pow, 2, 10).result()  # warm
        ours = median_ms(lambda: ex.submit(pow, 2, 10).result(), a.runs)
    cli = [a.ours, "run", "--wait", "utils.python", "-c", "print(2 ** 10)"]
    run = median_ms(lambda: subprocess.run(cli, capture_output=True, check=True), a.runs)

    import submitit

    local = submitit.LocalExecutor(folder=os.path.join(root, "submitit"))
    local.submit(pow, 2, 10).result()  # warm
    theirs = median_ms(lambda: local.submit(pow, 2, 10).result(), a.runs)

    print(f"\npython {sys.version.split()[0]}, medians of {a.runs}\n")
    print("| a trivial call on the local machine | median (ms) |")
    print("|---|---|")
    print(f"| ours: `Executor('local_cwd').submit(pow, 2, 10).result()` | {ours:.0f} |")
    print(f"| ours: `torchx run --wait utils.python -c 'print(2 ** 10)'` | {run:.0f} |")
    print(f"| submitit {submitit.__version__}: `LocalExecutor.submit(pow, 2, 10).result()` | {theirs:.0f} |")
    if a.docker:
        docker_call(a.ours, a.docker, a.runs)
    if a.slurm:
        slurm_map(a.slurm, root)


def docker_call(ours, image, runs):
    """The trivial call on local_docker: ours and the equivalent ``torchx run``."""
    from torchx.futures import Executor

    with Executor("local_docker", image=image) as ex:
        ex.submit(pow, 2, 10).result()  # warm
        call = median_ms(lambda: ex.submit(pow, 2, 10).result(), runs)
    cli = [ours, "run", "-s", "local_docker", "--wait", "utils.python", "--image", image, "-c", "print(2 ** 10)"]
    run = median_ms(lambda: subprocess.run(cli, capture_output=True, check=True), runs)
    print("\n| a trivial call in a container (local_docker) | median (ms) |")
    print("|---|---|")
    print(f"| ours: `Executor('local_docker', image=...).submit(pow, 2, 10).result()` | {call:.0f} |")
    print(f"| ours: `torchx run -s local_docker --wait utils.python -c 'print(2 ** 10)'` | {run:.0f} |")


def slurm_map(n, root):
    """``map`` over ``n`` items on Slurm, ours and submitit's: seconds to the last result."""
    import submitit
    from torchx.futures import Executor

    expected = [i * i for i in range(n)]
    t = time.perf_counter()
    with Executor("slurm") as ex:
        assert list(ex.map(pow, range(n), [2] * n, timeout=1800)) == expected
    ours = time.perf_counter() - t

    slurm = submitit.AutoExecutor(folder=os.path.join(root, "submitit-slurm"), cluster="slurm")
    slurm.update_parameters(timeout_min=10, slurm_partition="debug", cpus_per_task=1)
    t = time.perf_counter()
    jobs = slurm.map_array(pow, range(n), [2] * n)
    assert [j.result() for j in jobs] == expected
    theirs = time.perf_counter() - t

    print(f"\n| map(pow, range({n}), [2] * {n}) on Slurm, to the last result | seconds |")
    print("|---|---|")
    print(f"| ours: `Executor('slurm').map` (one `sbatch --array`) | {ours:.1f} |")
    print(f"| submitit {submitit.__version__}: `AutoExecutor(cluster='slurm').map_array` | {theirs:.1f} |")


if __name__ == "__main__":
    main()
