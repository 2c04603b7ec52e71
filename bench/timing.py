"""Wall-time medians of commands run in turns, shared by the bench scripts."""

import random
import statistics
import subprocess
import time


def medians_ms(cmds, runs, env, cwd, *, may_fail=(), pause=0.0):
    """Runs every command of `cmds` ({label: argv}) `runs` times and returns {label: median ms}.

    The commands run in turns, each turn in another order: a drift of this VM's speed during the
    run moves every row alike, and no command always follows the same other one. A command must
    exit 0 unless its label is in `may_fail` (Python TorchX fails some rows by design).
    """
    times = {label: [] for label in cmds}
    order = random.Random(0)
    for _ in range(runs):
        for label in order.sample(list(cmds), len(cmds)):
            start = time.perf_counter()
            done = subprocess.run(cmds[label], env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[label].append((time.perf_counter() - start) * 1000)
            if done.returncode != 0 and label not in may_fail:
                raise SystemExit(f"{label}: `{' '.join(cmds[label])}` exited {done.returncode}")
            time.sleep(pause)
    return {label: statistics.median(samples) for label, samples in times.items()}
