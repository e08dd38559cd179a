"""docs/configuration.md, written from the setting rows (settings.py), so the page
cannot drift from the CLI: `python scripts/gen_configuration_doc.py` rewrites it and
tests/broker/test_configuration_doc.py fails while the committed page is not current."""

from __future__ import annotations

import textwrap

from zonegate.broker.setting_types import Setting
from zonegate.broker.settings import CONFIG_HELP, SETTINGS

_INTRO = """\
# Configuration

<!-- Written by scripts/gen_configuration_doc.py from src/zonegate/broker/settings.py
     (and the QoS rows in qos_flags.py): change a setting there, then run the script. -->

Every setting of `zonegate node` and `zonegate serve` can come from three
places; the first found wins:

1. a flag: `zonegate node --lease-ms 6000`;
2. an environment variable: `ZONEGATE_` and the flag's name, `ZONEGATE_LEASE_MS=6000`;
3. the config file named by `--config FILE` (or `ZONEGATE_CONFIG`), a Java
   properties file like Kafka's `server.properties`: `key=value` lines, `#`
   and `!` comments. Keys are Kafka's names where Kafka has one, `zonegate.*`
   otherwise.

A value from the environment or the file is checked as the flag's is, and a
bad one stops the node at start with one line naming where it came from; so
does a key of the file that is not a setting, and a key set twice
([operations.md](operations.md#configuring-a-node)). `zonegate node --help`
and `zonegate serve --help` say the same as this page.

Sizes (BYTES) and durations (MS) take units wherever they are given, as
`zonegate cost` takes them: `8MiB`, `512KiB`, `100kB`, `1048576`; `250ms`,
`10s`, `5m`, `1h`. A plain number keeps Kafka's meaning (bytes, milliseconds),
so Kafka's own config lines read the same.

"""


def _flag(s: Setting) -> str:
    if s.metavar:
        return f"{s.flag} {s.metavar}"
    if s.choices:
        return f"{s.flag} {{{','.join(s.choices)}}}"
    return s.flag


def _commands(s: Setting) -> str:
    return f"`zonegate {s.only}` only" if s.only else "`zonegate node` and `zonegate serve`"


def _paragraph(text: str) -> list[str]:
    return [textwrap.fill(text, 80, break_long_words=False, break_on_hyphens=False), ""]


def render() -> str:
    out = [
        _INTRO.rstrip("\n"),
        "",
        *_paragraph(f"`--config FILE` (or `ZONEGATE_CONFIG`): {CONFIG_HELP}."),
    ]
    out += ["## Settings at a glance", ""]
    out += ["| Flag | Config file key | Environment variable |", "| --- | --- | --- |"]
    out += [f"| `{s.flag}` | `{s.key}` | `{s.env}` |" for s in SETTINGS]
    out += ["", "## Each setting", ""]
    for s in SETTINGS:
        out += [f"### `{_flag(s)}`", ""]
        out += _paragraph(f"Config file: `{s.key}`; environment: `{s.env}`; {_commands(s)}.")
        out += _paragraph(s.help_for("serve" if s.only == "serve" else "node") + ".")
        if s.serve_help:
            out += _paragraph(f"On `zonegate serve` (one node per zone): {s.help_for('serve')}.")
    return "\n".join(out).rstrip("\n") + "\n"
