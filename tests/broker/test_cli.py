"""The `zonegate` command line as a newcomer meets it: help, version, and one-line errors."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

import zonegate
from zonegate.broker.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _options(p: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for a in p._actions:
        if (
            a.option_strings
            and a.help != argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction)
        ):
            yield a


@pytest.mark.unit
def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"zonegate {zonegate.__version__}"
    # The installed metadata and pyproject.toml say the same, so --version cannot drift.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == zonegate.__version__
    assert importlib.metadata.version("zonegate") == zonegate.__version__


@pytest.mark.unit
def test_plain_zonegate_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    out = capsys.readouterr().err
    assert out.startswith("usage: zonegate")
    for command in ("serve", "node", "cost", "report"):
        assert f"    {command} " in out, command


@pytest.mark.unit
def test_short_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["-V"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"zonegate {zonegate.__version__}"


@pytest.mark.unit
@pytest.mark.parametrize(
    "command, required",
    [
        ("serve", []),
        ("node", []),
        ("cost", ["--ingress-mib-s", "1"]),
        ("report", ["--usage", "file:///nowhere", "--out", "nowhere"]),
    ],
)
def test_a_mistyped_option_points_at_its_command(
    command: str, required: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, *required, "--bogus"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"zonegate {command}: unrecognized arguments: --bogus (see zonegate {command} --help)"
    )


@pytest.mark.unit
def test_every_option_says_what_it_does_and_its_default() -> None:
    commands = _subcommands()
    assert set(commands) == {"serve", "node", "cost", "report"}
    missing = []
    for name, p in commands.items():
        for a in _options(p):
            text = (a.help or "").lower()
            if len(text) < 12 or not ("default" in text or "required" in text):
                missing.append(f"{name} {a.option_strings[0]}: {a.help!r}")
            if a.required:
                assert "required" in text, f"{name} {a.option_strings[0]}"
    assert not missing, "\n".join(missing)


@pytest.mark.unit
def test_serve_has_zones_and_node_has_zone() -> None:
    commands = _subcommands()
    serve = {o for a in _options(commands["serve"]) for o in a.option_strings}
    node = {o for a in _options(commands["node"]) for o in a.option_strings}
    assert "--zones" in serve and "--zone" not in serve
    assert "--zone" in node and "--zones" not in node


@pytest.mark.unit
def test_a_usage_mistake_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, words in (
        (["serve", "--listen", "nine"], "argument --listen: expected HOST:PORT"),
        (["serve", "--usage-interval-s", "0"], "argument --usage-interval-s: must be at least"),
        (["node", "--log-level", "loud"], "argument --log-level"),
        (
            ["serve", "--zone", "zone-b"],
            "takes --zones ZONE,... (--zone ZONE is for zonegate node)",
        ),
        (["node", "--zones", "zone-b"], "unrecognized arguments: --zones zone-b"),
        (["serve", "--data", "x"], "unrecognized arguments: --data x"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and words in err, err


def _zonegate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zonegate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _one_line(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    for w in words:
        assert w in done.stderr, done.stderr
    assert done.stdout == ""
    return done.stderr


@pytest.mark.integration
def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in ("serve", "node"):
            done = _zonegate(command, "--listen", f"127.0.0.1:{port}", cwd=tmp_path)
            _one_line(done, f"zonegate {command}: ", f"127.0.0.1:{port}", "in use")
        # A refused start leaves nothing behind: neither a data directory it made, nor
        # node directories or stores in one that was there.
        assert not (tmp_path / "zonegate-data").exists()
        kept = tmp_path / "kept"
        (kept / "mine").mkdir(parents=True)
        done = _zonegate(
            "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", "kept", cwd=tmp_path
        )
        _one_line(done, "zonegate serve: ", "in use")
        assert [p.name for p in kept.iterdir()] == ["mine"]


@pytest.mark.integration
def test_unwritable_data_directory_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    done = _zonegate("serve", "--listen", "127.0.0.1:0", "--data-dir", "a-file/data", cwd=tmp_path)
    _one_line(done, "cannot write the data directory (--data-dir) a-file/data")
    if os.geteuid() != 0:  # root writes anywhere; the case above covers it
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        done = _zonegate("node", "--listen", "127.0.0.1:0", "--data-dir", "locked", cwd=tmp_path)
        _one_line(done, "cannot write the data directory", "permission denied")


@pytest.mark.integration
@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("--object-store", "ftp://host/x", "--object-store 'ftp://host/x' is not a supported"),
        ("--object-store", "file://relative/x", "does not name an absolute local path"),
        ("--object-store", "s3:///prefix", "names no bucket"),
        ("--metastore", "mysql://db/zonegate", "not a supported metadata store URL"),
        ("--metastore", "postgresql://zg:pw@db:x/zg", "'postgresql://zg:***@db:x/zg': the port"),
        # A server that is not there: one line at start, not a traceback.
        ("--metastore", "postgresql://zg@127.0.0.1:1/zg", "cannot start: PostgreSQL unreachable"),
        ("--s3-endpoint", "minio:9000", "--s3-endpoint 'minio:9000' is not an http://"),
    ],
)
def test_bad_url_is_one_line(tmp_path: Path, option: str, value: str, words: str) -> None:
    done = _zonegate("serve", "--listen", "127.0.0.1:0", option, value, cwd=tmp_path)
    _one_line(done, "zonegate serve: ", words)


@pytest.mark.integration
def test_a_refused_postgresql_url_is_one_line(tmp_path: Path, postgres_server: Any) -> None:
    # A database or a role that is not there: one line naming the server, database and
    # user (never the password) and what to do, not the driver's traceback.
    url = postgres_server.new_database()
    parts = urlsplit(url)
    for bad, words in (
        (parts._replace(path="/no_such_db").geturl(), ['database "no_such_db" does not exist',
                                                       "createdb"]),
        (parts._replace(netloc=f"nobody:s3cret@{parts.hostname}:{parts.port}").geturl(),
         ['role "nobody" does not exist', "createuser"]),
    ):  # fmt: skip
        done = _zonegate("serve", "--listen", "127.0.0.1:0", "--metastore", bad, cwd=tmp_path)
        line = _one_line(done, "zonegate serve: ", "cannot start: PostgreSQL at ", *words)
        assert "s3cret" not in line


@pytest.mark.integration
def test_a_port_taken_after_the_checks_still_stops_cleanly(tmp_path: Path) -> None:
    # The checks bind every port first; a port another process takes between the check
    # and the listener's bind must still end in one sentence, with the started nodes stopped.
    from zonegate.broker.config import NodeConfig
    from zonegate.broker.serve_cli import _start
    from zonegate.broker.startup import StartupError

    meta, objects = f"sqlite:///{tmp_path / 'meta.db'}", (tmp_path / "objects").as_uri()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        configs = [
            NodeConfig(
                tmp_path / f"n{i}",
                port=p,
                node_id=i,
                zone=z,
                metastore_url=meta,
                object_store_url=objects,
            )
            for i, p, z in ((1, 0, "a"), (2, port, "b"))
        ]

        async def start() -> None:
            with pytest.raises(StartupError, match=f"127.0.0.1:{port} .*in use"):
                await _start(configs)
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            assert not others, others  # node 1 was stopped, nothing left running

        asyncio.run(start())


@pytest.mark.integration
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    """`zonegate cost --json | head -1`: the pipe's reader is gone before the output is
    written; the command stops with the status of a tool killed by SIGPIPE, no traceback."""
    read, write = os.pipe()
    os.close(read)  # every write to `write` now fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "zonegate", "cost", "--ingress-mib-s", "10", "--json"],
            cwd=tmp_path,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert done.stderr == ""
    assert done.returncode == 141
