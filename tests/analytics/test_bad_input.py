"""Bad input stops the report with a clear message, a non-zero exit and no report."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from zonegate.analytics.job import check_out_dir, run_report
from zonegate.analytics.source import locate
from zonegate.analytics.synthetic import SyntheticSpec, generate, write_local
from zonegate.broker.cli import main
from zonegate.cost_model import price_table
from zonegate.usage.schema import UnknownSchemaVersion, UsageInputError

pytestmark = pytest.mark.integration


def _report(tmp: Path, *args: str) -> list[str]:
    return ["report", "--out", str(tmp / "out"), *args]


def test_missing_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_report(tmp_path, "--usage", (tmp_path / "nope").as_uri())) == 2
    err = capsys.readouterr().err
    assert "no usage records" in err or "does not exist" in err
    assert not (tmp_path / "out").exists()


def test_empty_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "store" / "usage").mkdir(parents=True)
    assert main(_report(tmp_path, "--usage", (tmp_path / "store").as_uri())) == 2
    assert "no usage records" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_unknown_provider_or_region(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_report(tmp_path, "--usage", tmp_path.as_uri(), "--provider", "ibm")) == 2
    assert "unknown provider 'ibm'" in capsys.readouterr().err
    assert main(_report(tmp_path, "--usage", tmp_path.as_uri(), "--region", "mars-1")) == 2
    assert "unknown region 'mars-1'" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_unknown_schema_version_leaves_no_report(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    spark: Any = request.getfixturevalue("spark") if engine == "spark" else None
    spec = SyntheticSpec(days=1, intervals_per_day=1, topics=1, clients_per_zone=1)
    write_local(generate(spec), tmp_path / "store")
    write_local(generate(dataclasses.replace(spec, schema_version=5, seed=9)), tmp_path / "store")
    out = tmp_path / "out"
    with pytest.raises(UnknownSchemaVersion, match="schema_version 5"):
        run_report(
            locate((tmp_path / "store").as_uri()),
            out,
            price_table("aws", "us-east-1"),
            spark=spark,
        )
    assert not out.exists()
    assert not list(tmp_path.glob(".out.partial-*"))


def test_refuses_to_overwrite_a_directory_that_is_not_a_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("x")
    with pytest.raises(UsageInputError, match="not an earlier report"):
        check_out_dir(out)
    assert main(_report(tmp_path, "--usage", tmp_path.as_uri())) == 2
    assert (out / "precious.txt").read_text() == "x"


def test_an_object_that_is_not_parquet_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = SyntheticSpec(days=1, intervals_per_day=1, topics=1, clients_per_zone=1)
    write_local(generate(spec), tmp_path / "store")
    bad = tmp_path / "store" / "usage" / "date=2025-01-01" / "node=9" / "1-0.parquet"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not parquet at all")
    assert main(_report(tmp_path, "--usage", (tmp_path / "store").as_uri())) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("zonegate report:")]
    assert "cannot read the usage records" in line and "1-0.parquet" in line, err
    assert not (tmp_path / "out").exists()
