#!/usr/bin/env bash
# The whole test suite: Rust (`cargo test`, every crate but the Python extension) and Python
# (pytest against the `torchx` package as `pip install .` builds it, in a venv, which the Rust
# tests also use to host a Python scheduler). Both run; the exit code is non-zero if either
# failed.
#
#   bash scripts/test.sh
#
# TORCHX_TEST_VENV   the venv for the Python tests (default: .venv-test in the repository)
# TORCHX_TEST_TORCH  1: also install PyTorch into it (.ci/run does), for torchx.distributed's
#                    tests and scripts/ddp_check.sh
# TORCHX_TEST_NEMO   1: also make a venv with NeMo-Run over the same wheels (.ci/run does)
# TORCHX_TEST_NIGHTLY 1: also make a venv with upstream's torchx-nightly (.ci/run does)
# TORCHX_TEST_MONARCH 1: also make a venv with Monarch 0.7.0 over the same wheels (.ci/run does)
set -uo pipefail
cd "$(dirname "$0")/.."

echo "== Python: pip install . into a venv (the tests of both languages use it)"
venv=${TORCHX_TEST_VENV:-$PWD/.venv-test}
python=${PYTHON:-python3}
python_status=0
if [ ! -x "$venv/bin/python" ] && ! "$python" -m venv "$venv"; then
    # Debian ships venv apart (python3-venv); install it when we can.
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y -q python3-venv >/dev/null && "$python" -m venv "$venv" || python_status=1
    else
        echo "!! cannot create a venv: install python3-venv" >&2
        python_status=1
    fi
fi
if [ "$python_status" -eq 0 ]; then
    # Both distributions: the package and the native `torchx` command it requires; and the
    # example plugin packages the plugin tests drive: one plugin per entry-point group, and
    # TorchX 0.8's namespace-package shape (torchx_plugins.*).
    # Both wheels are built once (maturin, release) and installed from the files, so the
    # NeMo-Run venv below installs the very same ones.
    wheels="$venv/wheels"
    rm -rf "$wheels"
    pip_q=(-q --disable-pip-version-check)
    # The library is asked for by name and exact version (its extras, and the CLI's
    # requirement on it, then resolve to the built wheel, never to PyPI's torchx).
    "$venv/bin/python" -m pip wheel "${pip_q[@]}" --no-deps -w "$wheels" ./crates/torchx-cli . &&
        version=$(basename "$wheels"/torchx-*.whl | cut -d- -f2) &&
        "$venv/bin/python" -m pip install "${pip_q[@]}" --find-links "$wheels" \
            "torchx[test]==$version" torchx-rs-cli ./examples/python-plugin ./examples/namespace-plugin
    python_status=$?
fi
if [ "$python_status" -eq 0 ] && [ "${TORCHX_TEST_TORCH:-0}" = 1 ]; then
    # Real PyTorch (CPU use of PyPI's wheel) for torchx.distributed's tests and
    # scripts/ddp_check.sh; pip's cache and an existing install make later runs quick.
    echo "== Python: PyTorch into the venv (TORCHX_TEST_TORCH=1)"
    "$venv/bin/python" -c 'import torch' 2>/dev/null ||
        "$venv/bin/python" -m pip install -q --disable-pip-version-check torch || python_status=1
fi
if [ "$python_status" -eq 0 ] && [ "${TORCHX_TEST_NEMO:-0}" = 1 ]; then
    # NeMo-Run 0.11.1 (requires torchx>=0.7.0) installed after our wheels, in a venv of its
    # own, as its users install it: it must keep our torchx (python/tests/test_nemo_run.py).
    # leptonai 0.47 dropped the `leptonai.api.v1` NeMo-Run 0.11.1 imports: an older one.
    echo "== Python: NeMo-Run 0.11.1 over our package (TORCHX_TEST_NEMO=1)"
    nemo_venv=${TORCHX_TEST_NEMO_VENV:-$PWD/.venv-nemo}
    { [ -x "$nemo_venv/bin/python" ] || "$python" -m venv "$nemo_venv"; } &&
        "$nemo_venv/bin/python" -m pip install "${pip_q[@]}" --find-links "$wheels" \
            "torchx==$version" torchx-rs-cli &&
        "$nemo_venv/bin/python" -m pip install "${pip_q[@]}" nemo-run==0.11.1 "leptonai<0.47" &&
        export TORCHX_TEST_NEMO_PYTHON="$nemo_venv/bin/python" || python_status=1
    # The wheels, for the test that installs them over upstream torchx.
    export TORCHX_TEST_WHEELS="$wheels"
fi
if [ "$python_status" -eq 0 ] && [ "${TORCHX_TEST_MONARCH:-0}" = 1 ]; then
    # Monarch 0.7.0 as its users install it over ours: --no-deps (its [torchx] extra would
    # install torchx-nightly), then its own runtime dependencies (python/tests/test_monarch.py).
    echo "== Python: Monarch 0.7.0 over our package (TORCHX_TEST_MONARCH=1)"
    monarch_venv=${TORCHX_TEST_MONARCH_VENV:-$PWD/.venv-monarch}
    { [ -x "$monarch_venv/bin/python" ] || "$python" -m venv "$monarch_venv"; } &&
        "$monarch_venv/bin/python" -m pip install "${pip_q[@]}" --find-links "$wheels" \
            "torchx==$version" torchx-rs-cli pytest &&
        "$monarch_venv/bin/python" -m pip install "${pip_q[@]}" --no-deps torchmonarch==0.7.0 &&
        "$monarch_venv/bin/python" -m pip install "${pip_q[@]}" pyzmq "pyarrow>=17" requests \
            "numpy>=1.26" pyre-extensions "typing-extensions>=4.12" lark opentelemetry-api \
            clusterscope "flask>=2.0" py-spy xxhash &&
        export TORCHX_TEST_MONARCH_PYTHON="$monarch_venv/bin/python" || python_status=1
fi
if [ "$python_status" -eq 0 ] && [ "${TORCHX_TEST_NIGHTLY:-0}" = 1 ]; then
    # Upstream's nightly from PyPI in a venv of its own, for the differential test
    # (python/tests/test_nightly_differential.py: the same calls, the same answers).
    echo "== Python: torchx-nightly==2026.10.26 in its own venv (TORCHX_TEST_NIGHTLY=1)"
    nightly_venv=${TORCHX_TEST_NIGHTLY_VENV:-$PWD/.venv-nightly}
    { [ -x "$nightly_venv/bin/python" ] || "$python" -m venv "$nightly_venv"; } &&
        "$nightly_venv/bin/python" -m pip install -q --disable-pip-version-check \
            torchx-nightly==2026.10.26 &&
        export TORCHX_NIGHTLY_PYTHON="$nightly_venv/bin/python" || python_status=1
fi
if [ "$python_status" -eq 0 ]; then
    # The Python package is typed, linted and formatted: ruff (lint and format), mypy --strict
    # (config in pyproject.toml) and stubtest, which checks the extension's stubs (_rs.pyi)
    # against the built module.
    echo "== Python: ruff check, ruff format --check, mypy --strict, stubtest of torchx._rs"
    "$venv/bin/python" -m ruff check python/torchx python/tests examples bench &&
        "$venv/bin/python" -m ruff format --check python/torchx python/tests examples bench &&
        "$venv/bin/python" -m mypy &&
        "$venv/bin/python" -m mypy.stubtest torchx._rs --mypy-config-file pyproject.toml ||
        python_status=1
fi
if [ "$python_status" -eq 0 ]; then
    # The interpreter whose Python schedulers the Rust conformance suite runs.
    export TORCHX_TEST_PYTHON="$venv/bin/python"
fi

# Tests run plugin commands in many environments, each with its own warm plugin host: let them
# go soon after the suite instead of the default ten minutes.
export TORCHX_PLUGIN_HOST_IDLE="${TORCHX_PLUGIN_HOST_IDLE:-20}"

echo "== cargo test --workspace --exclude torchx-py"
# Every suite runs even after a failure, so a run reports everything that is broken.
cargo test --workspace --exclude torchx-py --no-fail-fast
rust=$?

if [ "$python_status" -eq 0 ]; then
    echo "== pytest python/tests"
    # The CLI (and local_cwd's supervisor) the Python tests talk to: the one cargo just built.
    export TORCHX_BIN="${TORCHX_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/debug/torchx}"
    "$venv/bin/python" -m pytest -q python/tests
    python_status=$?
fi

if [ "$rust" -ne 0 ] || [ "$python_status" -ne 0 ]; then
    echo "!! failed: rust=$rust python=$python_status" >&2
    exit 1
fi
