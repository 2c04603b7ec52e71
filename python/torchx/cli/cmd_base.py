"""``SubCommand``: the base of a ``torchx <cmd>`` plugin registered under the
``torchx.cli.cmds`` entry points (TorchX's ``torchx.cli.cmd_base``)."""

from __future__ import annotations

import abc
import argparse


class SubCommand(abc.ABC):
    """A subcommand: declares its arguments, then runs with them parsed."""

    @abc.abstractmethod
    def add_arguments(self, subparser: argparse.ArgumentParser) -> None:
        """Adds this subcommand's arguments to ``subparser``."""

    @abc.abstractmethod
    def run(self, args: argparse.Namespace) -> None:
        """Runs the subcommand with the parsed ``args``."""
