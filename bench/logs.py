#!/usr/bin/env python3
"""Log streaming and replica launch on local_cwd, side by side with their shell baselines.

    python3 bench/logs.py [--torchx target/release/torchx] [--gib 1]

Measures (median of 3, wall time and peak RSS of the measured process):
  - `torchx log` of a 1 GiB log vs `cat` of the same file;
  - `torchx log --tail` of a log that is still growing vs `cat` of the finished file;
  - `torchx run` of a job printing 1 GiB vs the same generator piped to `cat`;
  - 200 replicas of `/bin/true` to all SUCCEEDED vs a shell loop that starts and waits for 200.
Output goes to /dev/null. Needs ~6 GiB free under $TMPDIR. The peak RSS column is the largest
of all children so far (Python's RUSAGE_CHILDREN), so it is an upper bound for each row.
"""

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time

LINE = "0123456789" * 9 + "abcdefgh"  # 98 characters + newline


def generator(gib: float) -> str:
    lines = int(gib * (1 << 30) / (len(LINE) + 1))
    return f"yes {LINE} | head -n {lines}"


def timed(cmd, env, cwd, stdin=None):
    """Runs cmd to its end with stdout/stderr discarded: (seconds, peak RSS MiB)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(
        cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, stdin=stdin
    )
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    # ru_maxrss of children is a running maximum: a larger earlier child hides this one.
    return elapsed, max(after, before) / 1024


def median(runs):
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--torchx", default="target/release/torchx")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    torchx = os.path.abspath(a.torchx)
    tmp = tempfile.mkdtemp()
    env = dict(os.environ, HOME=tmp, TORCHX_STATE_DIR=os.path.join(tmp, "state"))
    env.pop("TORCHXCONFIG", None)
    gen = generator(a.gib)
    rows = []

    out = subprocess.run(
        [torchx, "run", "utils.sh", "sh", "-c", gen],
        env=env,
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    handle = out.stdout.strip()
    app_id = handle.rsplit("/", 1)[1]
    log = os.path.join(tmp, "state/local_cwd/logs/torchx", app_id, "sh/0/stdout.log")
    size = os.path.getsize(log) / (1 << 30)
    ours = median([timed([torchx, "log", handle, "--streams", "stdout"], env, tmp) for _ in range(a.runs)])
    cat = median([timed(["cat", log], env, tmp) for _ in range(a.runs)])
    rows.append((f"`torchx log` of a {size:.2f} GiB log", ours, cat))

    def tail_growing():
        h = subprocess.run(
            [torchx, "run", "--detach", "utils.sh", "sh", "-c", gen],
            env=env,
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        ).stdout.strip()
        result = timed([torchx, "log", h, "--streams", "stdout", "--tail"], env, tmp)
        subprocess.run([torchx, "delete", h], env=env, cwd=tmp, stderr=subprocess.DEVNULL)
        return result

    ours = median([tail_growing() for _ in range(a.runs)])
    # Following cannot end before the job does: compare with the job writing its log alone.
    writer = median([timed(["sh", "-c", f"{gen} > {tmp}/alone.log"], env, tmp) for _ in range(a.runs)])
    rows.append(
        (
            "`torchx log --tail` of a growing log, submission to end (baseline: the generator writing the file alone)",
            ours,
            writer,
        )
    )

    ours = median([timed([torchx, "run", "utils.sh", "sh", "-c", gen], env, tmp) for _ in range(a.runs)])
    piped = median([timed(["sh", "-c", f"{gen} | cat"], env, tmp) for _ in range(a.runs)])
    rows.append((f"`torchx run` of a job printing {a.gib:g} GiB (to exit) vs `gen | cat`", ours, piped))
    # What local_cwd keeps (stdout.log and combined.log, as TorchX does) costs disk writes that
    # `cat` does not pay: the same pipeline keeping both files.
    teed = median([timed(["sh", "-c", f"{gen} | tee {tmp}/a.log {tmp}/b.log"], env, tmp) for _ in range(a.runs)])
    rows.append(
        (f"`torchx run` of a job printing {a.gib:g} GiB (to exit) vs `gen | tee stdout.log combined.log`", ours, teed)
    )

    true = "/bin/true"
    many = os.path.join(tmp, "many.yaml")
    with open(many, "w") as f:
        f.write(f"name: many\nroles:\n- name: t\n  image: /tmp\n  entrypoint: {true}\n  num_replicas: 200\n")
    ours = median([timed([torchx, "run", many], env, tmp) for _ in range(max(a.runs, 7))])
    loop = median(
        [timed(["sh", "-c", f"for i in $(seq 200); do {true} & done; wait"], env, tmp) for _ in range(max(a.runs, 7))]
    )
    rows.append(("200 replicas of `/bin/true` to all SUCCEEDED (`torchx run`, to exit)", ours, loop))

    print("| what | ours (s) | ours peak RSS (MiB) | baseline (s) | ours / baseline |")
    print("|---|---|---|---|---|")
    for what, (t, rss), (bt, _) in rows:
        print(f"| {what} | {t:.3f} | {rss:.1f} | {bt:.3f} | {t / bt:.2f}× |")
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
