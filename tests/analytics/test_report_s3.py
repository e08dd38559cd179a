"""The report reads s3:// usage records through the Python data source over the object store."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.s3_server import DEFAULT_BUCKET, FAKE_AWS_ENV, MotoS3Server
from zonegate.analytics.source import locate
from zonegate.analytics.synthetic import SyntheticSpec, Truth, UsageObject, generate
from zonegate.storage.store_url import open_object_store

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoS3Server]:
    saved = {k: os.environ.get(k) for k in FAKE_AWS_ENV}
    os.environ.update(FAKE_AWS_ENV)  # for the uploads made in this process
    try:
        with MotoS3Server() as server:
            yield server
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def _upload(url: str, endpoint: str, objects: list[UsageObject]) -> None:
    store = open_object_store(url, endpoint_url=endpoint)
    try:
        for o in objects:
            await store.put(o.key, o.parquet_bytes())
    finally:
        await store.close()


ENGINES = {"arrow": ["--engine", "arrow"], "spark": ["--engine", "spark", "--master", "local[2]"]}


def _report_cli(
    url: str, endpoint: str, out: Path, engine: str
) -> subprocess.CompletedProcess[str]:
    # A child process: its Spark workers get the S3 credentials in their environment.
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "zonegate",
            "report",
            "--usage",
            url,
            "--out",
            str(out),
            *ENGINES[engine],
        ],
        env={**os.environ, **FAKE_AWS_ENV, "ZONEGATE_S3_ENDPOINT": endpoint},
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_report_over_s3_matches_truth(s3: MotoS3Server, tmp_path: Path, engine: str) -> None:
    url = f"s3://{DEFAULT_BUCKET}/cluster1-{engine}"
    truth = Truth()
    spec = SyntheticSpec(days=2, intervals_per_day=2, topics=2, clients_per_zone=2)
    asyncio.run(_upload(url, s3.endpoint_url, list(generate(spec, truth))))
    assert len(locate(url, s3.endpoint_url).keys) == truth.objects
    done = _report_cli(url, s3.endpoint_url, tmp_path / "out", engine)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[5/5]" in done.stderr
    matrix = pq.read_table(tmp_path / "out" / "parquet" / "matrix").to_pylist()
    got = {(r["kind"], r["from_zone"], r["to_zone"]): r["bytes"] for r in matrix}
    assert got == {k: v for k, v in truth.flows.items() if v}
    assert json.loads((tmp_path / "out" / "report.json").read_text())["records"] == truth.rows


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_unknown_version_over_s3_is_named(s3: MotoS3Server, tmp_path: Path, engine: str) -> None:
    url = f"s3://{DEFAULT_BUCKET}/cluster2-{engine}"
    spec = SyntheticSpec(
        days=1, intervals_per_day=1, topics=1, clients_per_zone=1, schema_version=5
    )
    asyncio.run(_upload(url, s3.endpoint_url, list(generate(spec))))
    done = _report_cli(url, s3.endpoint_url, tmp_path / "out", engine)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "schema_version 5" in done.stderr and "no report was written" in done.stderr
    assert not (tmp_path / "out").exists()
