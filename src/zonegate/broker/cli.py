"""The `zonegate` command line: one subcommand per entry point, each registered by its package."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import zonegate

# Each module exposes `register(subparsers)`, adding one or more subcommands whose
# parsers set `func=callable(args) -> int`. Modules are imported only when present,
# so a missing optional extra (pyspark) never breaks `zonegate serve`.
_SUBCOMMAND_MODULES = (
    "zonegate.broker.serve_cli",
    "zonegate.cost_model.cli",
    "zonegate.analytics.cli",
)

_DESCRIPTION = (
    "A Kafka-compatible broker whose producers never pay for cross-zone traffic, and "
    "the tools to price it. Run `zonegate COMMAND --help` for a command's options."
)


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are one line naming the option, then where to read more.

    argparse's default repeats the whole usage first, which for `serve` is a
    screenful in front of the one line that matters. Abbreviated options are
    refused: `--zone` would otherwise be taken for `--zones` on one command and
    be ambiguous on another.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def version() -> str:
    return zonegate.__version__


def build_parser() -> argparse.ArgumentParser:
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The top-level parser, and each subcommand's own parser by name."""
    parser = _Parser(prog="zonegate", description=_DESCRIPTION)
    parser.add_argument(
        "-V",
        "--version",
        action="version",
        version=f"zonegate {version()}",
        help="print the version",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in _SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue  # the subcommand's module is not written yet
            raise
        module.register(subparsers)
    return parser, dict(subparsers.choices)


def main(argv: Sequence[str] | None = None) -> int:
    parser, commands = _build()
    args, unknown = parser.parse_known_args(argv)
    if args.command is None:
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        # Plain `zonegate`: what there is to run, on stderr, and a usage error's status
        # (as git and kubectl): a script that forgot its command must not pass.
        parser.print_help(sys.stderr)
        return 2
    if unknown:
        # A mistyped option after a command is that command's mistake: name it and
        # point at its help, not the top-level one.
        commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        result: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`zonegate cost --json | head`): as a Unix tool, stop
        # quietly. stdout is pointed at /dev/null so the interpreter's own flush at
        # exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a tool killed by it
    return result


if __name__ == "__main__":
    sys.exit(main())
