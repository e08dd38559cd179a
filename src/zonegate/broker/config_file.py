"""Settings from a config file and the environment, under the command line's flags.

Every option of `zonegate node` and `zonegate serve` can be set three ways,
the first found winning: the flag (`--node-id 3`), an environment variable
(`ZONEGATE_NODE_ID=3`: ZONEGATE_ and the flag's name), or a line of the config
file named by `--config FILE` or `ZONEGATE_CONFIG` (`node.id=3`: Kafka's name
for the setting where Kafka has one, `zonegate.*` otherwise): each setting's
row in settings.py. The file is a Java properties file as Kafka's
`server.properties`: `key=value` lines, `#` and `!` comments.

A value from the file or the environment is parsed and checked by the same
function as the flag's, and a bad one is refused at start naming where it came
from; so is a key of the file that is not a setting (a typo would otherwise be
silently ignored). Unknown ZONEGATE_* variables are left alone: other tools use
that prefix too.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from zonegate.broker.setting_types import Setting
from zonegate.broker.startup import StartupError


class _Unset:
    """The default argparse keeps for an option not on the command line."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def read_properties(path: Path) -> dict[str, tuple[str, int]]:
    """`key=value` lines of a properties file -> {key: (value, line number)}."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise StartupError(
            f"--config {path}: cannot read it: {(exc.strerror or str(exc)).lower()}"
        ) from None
    found: dict[str, tuple[str, int]] = {}
    for number, raw in _logical_lines(text):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise StartupError(f"config file {path} line {number}: expected key=value, got {raw!r}")
        if key in found:
            raise StartupError(
                f"config file {path} line {number}: {key} is set twice (first on line "
                f"{found[key][1]})"
            )
        found[key] = (value.strip(), number)
    return found


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, line) with Java's continuations joined: a line ending in an
    odd number of backslashes goes on with the next, its leading blanks dropped (how a
    JAAS line is spread over several in a Kafka server.properties)."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        if pending is None:
            if raw.lstrip().startswith(("#", "!")):
                lines.append((number, raw))  # a comment never goes on
                continue
            start, body = number, raw
        else:
            start, body = pending[0], pending[1] + raw.lstrip()
            pending = None
        if (len(body) - len(body.rstrip("\\"))) % 2 == 1:
            pending = (start, body[:-1])
            continue
        lines.append((start, body))
    if pending is not None:
        lines.append(pending)
    return lines


def resolve(
    args: argparse.Namespace,
    settings: Sequence[Setting],
    environ: Mapping[str, str] = os.environ,
) -> None:
    """Fills each setting the command line left UNSET from the environment, else the
    config file, else its default; a bad value raises StartupError naming its source."""
    config = getattr(args, "config", None) or environ.get("ZONEGATE_CONFIG")
    from_file = read_properties(Path(config)) if config else {}
    known = {s.key for s in settings}
    # Keys of a family (`listener.name.*`): all of them are one setting's lines.
    families = {s.key.removesuffix("*"): s for s in settings if s.key.endswith(".*")}
    in_family: dict[str, list[str]] = {}
    for key, (value, _) in from_file.items():
        for prefix in families:
            if key.startswith(prefix):
                in_family.setdefault(prefix, []).append(f"{key}={value}")
    for key, (_, number) in from_file.items():
        if key not in known and not any(key.startswith(p) for p in families):
            raise StartupError(
                f"config file {config} line {number}: {key} is not a setting of this command "
                "(see --help for each setting's name)"
            )
    for s in settings:
        if getattr(args, s.dest) is not UNSET:
            continue
        if s.env in environ:
            source, text = f"environment {s.env}", environ[s.env]
        elif s.key in from_file:
            text, number = from_file[s.key]
            source = f"config file {config} line {number}: {s.key}"
        elif s.key.removesuffix("*") in in_family:
            text = "\n".join(in_family[s.key.removesuffix("*")])
            source = f"config file {config}: {s.key}"
        else:
            setattr(args, s.dest, s.default)
            continue
        try:
            value = s.parse(text)
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise StartupError(f"{source}={text!r} (the setting of {s.flag}): {exc}") from None
        setattr(args, s.dest, value)
