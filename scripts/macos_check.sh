#!/usr/bin/env bash
# Checks that the workspace compiles for macOS (x86_64 and aarch64): `cargo check` of every
# target, with the Rust std from `rustup target add` and zig's C compiler (PyPI's `ziglang`)
# for the C dependencies (SQLite, aws-lc). It proves the code compiles there, not that it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${TORCHX_ZIG_VENV:-$HOME/.cache/torchx-zig-venv}"
if ! "$venv/bin/python" -c "import ziglang" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q ziglang
fi
wrappers=$(mktemp -d)
trap 'rm -rf "$wrappers"' EXIT
printf '#!/bin/sh\nexec "%s" -m ziglang ar "$@"\n' "$venv/bin/python" >"$wrappers/ar"
chmod +x "$wrappers/ar"
for arch in x86_64 aarch64; do
    target="$arch-apple-darwin"
    rustup target add "$target" >/dev/null
    # cc-rs passes clang's spelling of the target, which zig does not parse: zig gets its own.
    cat >"$wrappers/cc-$target" <<WRAPPER
#!/bin/sh
for a do shift; case "\$a" in --target=*|-mmacosx-version-min=*) ;; *) set -- "\$@" "\$a" ;; esac; done
exec "$venv/bin/python" -m ziglang cc -target $arch-macos "\$@"
WRAPPER
    chmod +x "$wrappers/cc-$target"
    var=$(echo "$target" | tr - _)
    echo "== cargo check --workspace --all-targets --target $target"
    env "CC_$var=$wrappers/cc-$target" "AR_$var=$wrappers/ar" \
        cargo check --workspace --all-targets --target "$target" -q
    # Nothing reuses the check's metadata but a later check: give its disk back (~0.8 GB).
    [ "${TORCHX_MACOS_CHECK_KEEP:-0}" = 1 ] || rm -rf "${CARGO_TARGET_DIR:-target}/$target"
done
