"""One local SparkSession for all analytics tests, and synthetic usage written once."""

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
    pyspark_sql = pytest.importorskip("pyspark.sql")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("zonegate-tests")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def synthetic_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Truth]:
    root = tmp_path_factory.mktemp("store")
    truth = Truth()
    write_local(generate(SPEC, truth), root)
    return root, truth


@pytest.fixture(scope="session")
def report(
    spark: Any, synthetic_store: tuple[Path, Truth], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, Truth, Path]:
    root, truth = synthetic_store
    out = tmp_path_factory.mktemp("report") / "out"
    progress_log = out.parent / "progress.txt"
    with progress_log.open("w") as f:
        result = run_report(spark, locate(root.as_uri()), out, AWS, progress=Progress(5, f))
    return result, truth, out
