"""Settings from a config file, the environment and flags: flags win over the
environment, which wins over the file; a bad value is refused naming the setting."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from zonegate.broker.cli import build_parser
from zonegate.broker.config import NodeConfig
from zonegate.broker.config_file import resolve
from zonegate.broker.serve_cli import config_from_args
from zonegate.broker.startup import StartupError

pytestmark = pytest.mark.unit


def _config(argv: list[str], env: dict[str, str] | None = None) -> NodeConfig:
    args = build_parser().parse_args(["node", *argv])
    resolve(args, args.settings, env or {})
    return config_from_args(args)


def _subcommand(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = sub.choices[name]
    return found


def test_flag_wins_over_environment_which_wins_over_file(tmp_path: Path) -> None:
    conf = tmp_path / "node.properties"
    conf.write_text(
        "# a node of zone b\n"
        "node.id=5\n"
        "broker.rack = zone-b\n"
        "listeners=PLAINTEXT://127.0.0.1:19092\n"
        "zonegate.metastore=postgresql://zg@db/zonegate\n"
        "group.min.session.timeout.ms=1000\n"
        "zonegate.zone.routing=false\n"
        "! Java properties comments too\n"
    )
    env = {"ZONEGATE_NODE_ID": "6", "ZONEGATE_LEASE_MS": "9000"}
    c = _config(["--config", str(conf), "--node-id", "7"], env)
    assert c.node_id == 7, "the flag"
    assert c.lease_ms == 9000, "the environment"
    assert (c.zone, c.host, c.port) == ("zone-b", "127.0.0.1", 19092), "the file"
    assert c.metastore_url == "postgresql://zg@db/zonegate"
    assert c.group_min_session_timeout_ms == 1000 and c.zone_routing is False
    assert c.group_max_session_timeout_ms == 1_800_000, "the default"
    assert _config(["--config", str(conf)], env).node_id == 6, "the environment"
    assert _config(["--config", str(conf)]).node_id == 5, "the file"
    assert _config([]).node_id == 1, "the default"
    # ZONEGATE_CONFIG names the file when --config does not.
    assert _config([], {"ZONEGATE_CONFIG": str(conf)}).zone == "zone-b"


@pytest.mark.parametrize(
    ("line", "env", "words"),
    [
        ("node.id=abc", {}, ["line 1", "node.id='abc'", "expected int"]),
        ("zonegate.lease.ms=-5", {}, ["zonegate.lease.ms", "at least 1"]),
        ("zonegate.zone.routing=maybe", {}, ["zonegate.zone.routing", "expected one of"]),
        ("node.idd=3", {}, ["node.idd is not a setting", "line 1"]),
        ("node.id", {}, ["line 1", "expected key=value"]),
        ("", {"ZONEGATE_HTTP_PORT": "http"}, ["environment ZONEGATE_HTTP_PORT", "--http-port"]),
        ("", {"ZONEGATE_LOG_LEVEL": "loud"}, ["ZONEGATE_LOG_LEVEL", "DEBUG, INFO"]),
        ("zonegate.lease.ms=1000", {}, ["--lease-ms 1000", "four heartbeats"]),
        (
            "group.min.session.timeout.ms=9000\ngroup.max.session.timeout.ms=8000",
            {},
            ["group.min.session.timeout.ms (9000) is above group.max.session.timeout.ms"],
        ),
    ],
)
def test_bad_values_are_refused_naming_the_setting(
    tmp_path: Path, line: str, env: dict[str, str], words: list[str]
) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text(line + "\n")
    with pytest.raises(StartupError) as info:
        _config(["--config", str(conf)], env)
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_a_setting_twice_in_the_file_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "twice.properties"
    conf.write_text("node.id=1\n\nnode.id=2\n")
    with pytest.raises(StartupError, match="node.id is set twice \\(first on line 1\\)"):
        _config(["--config", str(conf)])
    with pytest.raises(StartupError, match="cannot read it"):
        _config(["--config", str(tmp_path / "missing.properties")])


@pytest.mark.parametrize("command", ["node", "serve"])
def test_help_names_each_settings_key_and_variable(command: str) -> None:
    for action in _subcommand(command)._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        if action.dest in ("help", "config"):
            continue
        assert action.help is not None and "Config file: " in action.help, action.dest
        assert "environment: ZONEGATE_" in action.help, action.dest


@pytest.mark.integration
def test_a_bad_file_value_stops_the_node_with_one_line(tmp_path: Path) -> None:
    conf = tmp_path / "node.properties"
    conf.write_text("node.id=3\nnum.partitions=0\n")
    done = subprocess.run(
        [sys.executable, "-m", "zonegate", "node", "--config", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "line 2: num.partitions='0'" in lines[0] and "at least 1" in lines[0]
