#!/usr/bin/env bash
# Real distributed training, end to end: `torchx run dist.ddp -j 2x2` (2 nodes x 2 processes,
# gloo) on local_cwd and on slurm; every rank all-reduces rank+1 and must report the sum 10.
# Skipped, loudly, when PyTorch is not importable; slurm is skipped, loudly, when no cluster
# answers (`scripts/slurm/up.sh --nodes 4` starts one whose node names resolve).
#
#   TORCHX_DDP_PYTHON  the python whose environment has PyTorch (default: python3); its bin
#                      directory goes first on PATH, so the job finds its torchrun
#   TORCHX             the torchx binary (default: target/debug/torchx, else torchx on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${TORCHX_DDP_PYTHON:-python3}
if ! "$python" -c 'import torch.distributed' 2>/dev/null; then
    if [[ ",${TORCHX_TEST_ENGINES:-}," == *,torch,* ]]; then
        echo "ddp_check: PyTorch was promised (TORCHX_TEST_ENGINES has torch) but \`$python -c 'import torch'\` fails" >&2
        exit 1
    fi
    echo "*** SKIPPED ddp_check: \`$python -c 'import torch'\` fails (set TORCHX_DDP_PYTHON to a python with PyTorch)" >&2
    exit 0
fi
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$PWD/$target ;; esac
torchx=${TORCHX:-$target/debug/torchx}
[ -x "$torchx" ] || torchx=$(command -v torchx || true)
[ -n "$torchx" ] || { echo "ddp_check: no torchx binary (build it, or set TORCHX)" >&2; exit 1; }
bin=$(dirname "$("$python" -c 'import sys; print(sys.executable)')")
export PATH="$bin:$PATH"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/allreduce.py" <<'PY'
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"ddp_check rank {rank} of {world} sum {int(t.item())}", flush=True)
dist.destroy_process_group()
PY

# check SCHEDULER [-cfg ...]: runs the job to its end, then every rank's line must be in its log.
check() {
    local scheduler=$1
    shift
    local out handle logs r
    out=$(cd "$work" && "$torchx" run -s "$scheduler" "$@" --wait dist.ddp -j 2x2 --script allreduce.py 2>&1) \
        || { echo "$out" >&2; echo "ddp_check: the $scheduler job failed" >&2; return 1; }
    handle=$(printf '%s\n' "$out" | grep -m1 "^$scheduler://")
    logs=$(cd "$work" && "$torchx" log --streams stdout "$handle" 2>&1; "$torchx" log --streams stderr "$handle" 2>&1) || true
    for r in 0 1 2 3; do
        printf '%s\n' "$logs" | grep -q "ddp_check rank $r of 4 sum 10" || {
            printf '%s\n' "$logs" >&2
            echo "ddp_check: rank $r of the $scheduler job did not report the all-reduce sum 10" >&2
            return 1
        }
    done
    echo "ddp_check: $scheduler: 4 ranks, all-reduce sum 10 on each ($handle)"
}

check local_cwd
if command -v sinfo >/dev/null && timeout 5 sinfo >/dev/null 2>&1; then
    check slurm
else
    echo "*** SKIPPED ddp_check on slurm: no Slurm cluster answers (scripts/slurm/up.sh --nodes 4)" >&2
fi
