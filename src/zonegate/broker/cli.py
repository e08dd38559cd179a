"""The `zonegate` command line: one subcommand per entry point, each registered by its package."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module exposes `register(subparsers)`, adding one or more subcommands whose
# parsers set `func=callable(args) -> int`. Modules are imported only when present,
# so a missing optional extra (pyspark) never breaks `zonegate serve`.
_SUBCOMMAND_MODULES = (
    "zonegate.broker.serve_cli",
    "zonegate.cost_model.cli",
    "zonegate.analytics.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zonegate", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in _SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue  # the subcommand's module is not written yet
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
