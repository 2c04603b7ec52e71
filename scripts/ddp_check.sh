#!/usr/bin/env bash
# Real distributed training, end to end: `torchx run dist.ddp -j 2x2` (2 nodes x 2 processes,
# gloo) on local_cwd and on slurm, and `-j 2x1` over two pods on Kubernetes (as a Volcano Job
# and as an Indexed Job: rendezvous through the cluster's DNS); every rank all-reduces rank+1
# and must report the sum. Skipped, loudly, when PyTorch is not importable; slurm is skipped,
# loudly, when no cluster answers (`scripts/slurm/up.sh --nodes 4` starts one whose node names
# resolve), Kubernetes when TORCHX_TEST_KUBECONFIG is unset (scripts/k8s/up.sh, with the
# registry of scripts/registry/up.sh, whose TORCHX_TEST_REGISTRY the pods pull from).
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

# check SCHEDULER NODESxPROCS [run option...] [-- component option...]: runs the job to its
# end, then every rank's line must be in its log.
check() {
    local scheduler=$1 job=$2
    shift 2
    local run_args=() component_args=() out handle logs r
    while [ $# -gt 0 ] && [ "$1" != -- ]; do run_args+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    component_args=("$@")
    local world=$((${job%x*} * ${job#*x})) sum=0
    for r in $(seq 1 "$world"); do sum=$((sum + r)); done
    out=$(cd "$work" && "$torchx" run -s "$scheduler" "${run_args[@]}" --wait dist.ddp -j "$job" \
        "${component_args[@]}" --script "${script:-allreduce.py}" 2>&1) \
        || { echo "$out" >&2; echo "ddp_check: the $scheduler job failed" >&2; return 1; }
    handle=$(printf '%s\n' "$out" | grep -m1 "^$scheduler://")
    logs=$(cd "$work" && for streams in stdout stderr; do "$torchx" log --streams "$streams" "$handle" 2>&1; done
        "$torchx" log "$handle" 2>&1) || true
    for r in $(seq 0 $((world - 1))); do
        printf '%s\n' "$logs" | grep -q "ddp_check rank $r of $world sum $sum" || {
            printf '%s\n' "$logs" >&2
            echo "ddp_check: rank $r of the $scheduler job did not report the all-reduce sum $sum" >&2
            return 1
        }
    done
    echo "ddp_check: $scheduler ${run_args[*]}: $world ranks, all-reduce sum $sum on each ($handle)"
}

check local_cwd 2x2
if command -v sinfo >/dev/null && timeout 5 sinfo >/dev/null 2>&1; then
    check slurm 2x2
else
    echo "*** SKIPPED ddp_check on slurm: no Slurm cluster answers (scripts/slurm/up.sh --nodes 4)" >&2
fi

# Kubernetes: the pods run python:local with Debian's bash and libstdc++ and a torchrun
# (pushed to the test registry, pulled by the node); PyTorch itself is this machine's, mounted
# read-only (TorchX bind mounts become hostPath volumes), as is the script.
if [ -n "${TORCHX_TEST_KUBECONFIG:-}" ]; then
    [ -n "${TORCHX_TEST_REGISTRY:-}" ] ||
        { echo "ddp_check: TORCHX_TEST_REGISTRY is unset (scripts/registry/up.sh's registry.env)" >&2; exit 1; }
    image=$TORCHX_TEST_REGISTRY/torchx-ddp:local
    mkdir -p "$work/image/rootfs/usr/bin"
    (cd "$work/image" && apt-get download bash libstdc++6 >/dev/null 2>&1) ||
        { echo "ddp_check: apt-get download bash libstdc++6 failed" >&2; exit 1; }
    for deb in "$work"/image/*.deb; do dpkg -x "$deb" "$work/image/rootfs"; done
    printf '#!/usr/bin/python3\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n' \
        >"$work/image/rootfs/usr/bin/torchrun"
    chmod 755 "$work/image/rootfs/usr/bin/torchrun"
    printf 'FROM python:local\nCOPY rootfs/ /\n' >"$work/image/Dockerfile"
    docker build -q -t "$image" "$work/image" >/dev/null && docker push -q "$image" >/dev/null ||
        { echo "ddp_check: building or pushing $image failed" >&2; exit 1; }
    site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
    chmod 755 "$work"
    export KUBECONFIG=$TORCHX_TEST_KUBECONFIG
    pod_args=(-- --image "$image" --cpu 1 --env "PYTHONPATH=/opt/torch"
        --mounts "type=bind,src=$site,dst=/opt/torch,readonly,type=bind,src=$work,dst=/ddp,readonly")
    script=/ddp/allreduce.py check kubernetes 2x1 --workspace "" -cfg queue=default "${pod_args[@]}"
    script=/ddp/allreduce.py check kubernetes 2x1 --workspace "" -cfg mode=job "${pod_args[@]}"
else
    echo "*** SKIPPED ddp_check on kubernetes: TORCHX_TEST_KUBECONFIG is unset (scripts/k8s/up.sh)" >&2
fi
