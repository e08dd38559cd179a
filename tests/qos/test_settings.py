"""The object-store budget, weights and floors from flags, the environment and a config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from zonegate.broker.cli import build_parser
from zonegate.broker.config import NodeConfig
from zonegate.broker.config_file import resolve
from zonegate.broker.serve_cli import config_from_args
from zonegate.broker.startup import StartupError
from zonegate.qos.scheduler import DEFAULT_POLICIES, ClassPolicy

pytestmark = pytest.mark.unit


def _config(argv: list[str], env: dict[str, str] | None = None) -> NodeConfig:
    args = build_parser().parse_args(["node", *argv])
    resolve(args, args.settings, env or {})
    return config_from_args(args)


def test_defaults_are_no_budget_and_the_documented_classes() -> None:
    qos = _config([]).qos
    assert qos.put.bytes_per_s == 0 and qos.get.requests_per_s == 0
    assert qos.put.max_in_flight == 64 and qos.get.max_in_flight == 64
    assert dict(qos.policies) == dict(DEFAULT_POLICIES)


def test_budget_weights_and_floors_from_file_environment_and_flags(tmp_path: Path) -> None:
    conf = tmp_path / "node.properties"
    conf.write_text(
        "zonegate.qos.put.bytes.per.s=50000000\n"
        "zonegate.qos.get.requests.per.s=5500\n"
        "zonegate.qos.weights=produce=60,compaction=10\n"
        "zonegate.qos.floors=compaction=0.2\n"
        "zonegate.qos.tail.window.ms=5000\n"
    )
    env = {"ZONEGATE_QOS_GET_BYTES_PER_S": "80000000"}
    c = _config(["--config", str(conf), "--qos-put-in-flight", "8"], env)
    assert c.qos.put.bytes_per_s == 50e6 and c.qos.put.max_in_flight == 8
    assert c.qos.get.bytes_per_s == 80e6 and c.qos.get.requests_per_s == 5500
    assert c.qos.policies["produce"] == ClassPolicy(60, 0.3)
    assert c.qos.policies["compaction"] == ClassPolicy(10, 0.2)
    assert c.qos.policies["tail_fetch"] == DEFAULT_POLICIES["tail_fetch"]
    assert c.qos_tail_window_ms == 5000


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--qos-floors", "produce=0.9"], ["floors add up to 1.25"]),
        (["--qos-weights", "compaction=0"], ["compaction: weight must be > 0"]),
    ],
)
def test_settings_the_scheduler_cannot_honour_are_refused(
    argv: list[str], words: list[str]
) -> None:
    with pytest.raises(StartupError) as info:
        _config(argv)
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize(
    "value", ["reads=5", "produce", "produce=fast", "compaction=1,retention=2"]
)
def test_a_bad_class_list_is_refused_naming_the_setting(tmp_path: Path, value: str) -> None:
    conf = tmp_path / "bad.properties"
    conf.write_text(f"zonegate.qos.weights={value}\n")
    with pytest.raises(StartupError, match="zonegate.qos.weights"):
        _config(["--config", str(conf)])


def test_a_negative_budget_is_refused() -> None:
    with pytest.raises(StartupError, match="ZONEGATE_QOS_PUT_BYTES_PER_S"):
        _config([], {"ZONEGATE_QOS_PUT_BYTES_PER_S": "-1"})
