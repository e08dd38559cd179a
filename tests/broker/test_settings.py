"""The setting rows (broker/settings.py): each names a distinct flag, key and variable, and
sets real NodeConfig fields, whose defaults are the rows' defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from zonegate.broker.cli import build_parser
from zonegate.broker.config import NodeConfig
from zonegate.broker.config_file import resolve
from zonegate.broker.serve_cli import config_from_args
from zonegate.broker.settings import SETTINGS, field_default
from zonegate.broker.startup import StartupError

pytestmark = pytest.mark.unit


def test_flags_keys_and_variables_are_distinct() -> None:
    for name in ("flag", "key", "env"):
        values = [getattr(s, name) for s in SETTINGS]
        assert len(values) == len(set(values)), name


def test_each_row_sets_real_fields() -> None:
    fields = {f.name for f in dataclasses.fields(NodeConfig)}
    for s in SETTINGS:
        assert set(s.node_fields(s.default)) <= fields, s.flag


def test_node_config_defaults_are_the_rows_defaults() -> None:
    args = build_parser().parse_args(["node"])
    resolve(args, args.settings, {})
    data_dir = field_default("data_dir")
    assert config_from_args(args) == NodeConfig(data_dir)
    # A field NodeConfig fixes itself is no setting's.
    with pytest.raises(KeyError):
        field_default("log_cache_bytes")
    assert isinstance(data_dir, Path)


def test_other_nodes_dial_a_wildcard_rpc_listener_at_the_advertised_host() -> None:
    assert NodeConfig(Path("d")).rpc_reachable_host == "127.0.0.1"
    pod = NodeConfig(Path("d"), host="0.0.0.0", advertised_host="10.0.1.7")
    assert pod.rpc_reachable_host == "10.0.1.7"
    assert dataclasses.replace(pod, rpc_host="10.0.1.8").rpc_reachable_host == "10.0.1.8"


def test_an_rpc_dial_map_is_parsed_and_a_bad_item_named() -> None:
    args = build_parser().parse_args(
        ["node", "--rpc-dial-map", "10.0.2.7:9093=127.0.0.1:19093, 10.0.3.7:9093=h:1"]
    )
    resolve(args, args.settings, {})
    assert config_from_args(args).rpc_dial_map == (
        ("10.0.2.7:9093", "127.0.0.1:19093"),
        ("10.0.3.7:9093", "h:1"),
    )
    for bad in ("10.0.2.7:9093", "10.0.2.7=h:1", "10.0.2.7:9093=h"):
        args = build_parser().parse_args(["node", "--rpc-dial-map", bad])
        resolve(args, args.settings, {})
        with pytest.raises(StartupError, match="--rpc-dial-map item"):
            config_from_args(args)


def test_sizes_and_durations_take_units_on_every_command() -> None:
    for command in (["node", "--zone", "a", "--node-id", "1"], ["serve"]):
        args = build_parser().parse_args(
            [*command, "--wal-seal-bytes", "8MiB", "--block-cache-bytes", "64MiB",
             "--lease-ms", "10s", "--max-request-bytes", "100MB"]
        )  # fmt: skip
        assert args.wal_seal_bytes == 8 << 20
        assert args.block_cache_bytes == 64 << 20
        assert args.lease_ms == 10_000
        assert args.max_request_bytes == 100_000_000
