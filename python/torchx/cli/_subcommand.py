"""Runs a ``SubCommand`` of the ``torchx.cli.cmds`` entry points for the native CLI:
``torchx my_tool --config c.yaml APP`` becomes
``python -c "... main()" my_tool --config c.yaml APP`` with the terminal inherited. The
subcommand parses its own arguments (argparse, ``prog="torchx my_tool"``)."""

from __future__ import annotations

import argparse
import sys


def main() -> int:
    name, args = sys.argv[1], sys.argv[2:]
    from torchx.util.entrypoints import load_group

    where = f"entry point `{name}` of torchx.cli.cmds"
    commands = load_group("torchx.cli.cmds", default={}) or {}
    if name not in commands:
        print(
            f"torchx: error: unrecognized subcommand `{name}` (no builtin command, no"
            f" `torchx-{name}` on PATH and no torchx.cli.cmds entry point). See `torchx --help`.",
            file=sys.stderr,
        )
        return 2
    try:
        command = commands[name]()
        parser = argparse.ArgumentParser(prog=f"torchx {name}")
        command.add_arguments(parser)
    except Exception as e:
        print(f"torchx: error: {where} cannot be loaded: {type(e).__name__}: {e}", file=sys.stderr)
        return 5
    parsed = parser.parse_args(args)  # exits 2 with argparse's message on bad arguments
    try:
        command.run(parsed)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        print(f"torchx: error: `torchx {name}` ({where}) raised {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
