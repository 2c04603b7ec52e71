"""A ``torchx example_hello`` subcommand registered under ``torchx.cli.cmds``."""

import argparse

from torchx.cli.cmd_base import SubCommand


class CmdHello(SubCommand):
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        subparser.add_argument("name", type=str, help="whom to greet")
        subparser.add_argument("--shout", action="store_true", help="in capitals")

    def run(self, args: argparse.Namespace) -> None:
        text = f"hello {args.name}"
        print(text.upper() if args.shout else text)
