"""One local SparkSession for all analytics tests, synthetic usage written once, and the
report over it made by each engine (in this process with Arrow, and with Spark)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zonegate.analytics.job import run_report
from zonegate.analytics.progress import Progress
from zonegate.analytics.source import locate
from zonegate.analytics.synthetic import SyntheticSpec, Truth, generate, write_local
from zonegate.cost_model import price_table

AWS = price_table("aws", "us-east-1")

SPEC = SyntheticSpec(nodes_per_zone=2, topics=4, clients_per_zone=3, days=3, intervals_per_day=2)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    pytest.importorskip("pyspark.sql")
    from zonegate.analytics.spark_engine import spark_session

    session = spark_session("local[2]", "zonegate-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    root = tmp_path_factory.mktemp("store")
    truth = Truth()
    write_local(generate(SPEC, truth), root)
    return root, truth


@pytest.fixture(scope="session", params=["arrow", "spark"])
def report(
    request: pytest.FixtureRequest,
    synthetic_store: tuple[Path, Truth],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Any, Truth, Path]:
    spark = request.getfixturevalue("spark") if request.param == "spark" else None
    root, truth = synthetic_store
    out = tmp_path_factory.mktemp(f"report-{request.param}") / "out"
    progress_log = out.parent / "progress.txt"
    with progress_log.open("w") as f:
        result = run_report(locate(root.as_uri()), out, AWS, progress=Progress(5, f), spark=spark)
    return result, truth, out
