"""Report throughput: usage records per second at 1M and 10M synthetic records.

    python3 benchmarks/report.py [--sizes 1000000,10000000] [--master local[*]]

Writes synthetic records to a temporary local store (not timed), then times the
whole report (read, aggregate, write tables and dashboard) in one Spark session.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import math
import tempfile
import time
from pathlib import Path

from zonegate.analytics.job import run_report, spark_session
from zonegate.analytics.progress import Progress
from zonegate.analytics.source import locate
from zonegate.analytics.synthetic import SyntheticSpec, Truth, generate, write_local
from zonegate.cost_model import price_table

BASE = SyntheticSpec(nodes_per_zone=2, topics=40, clients_per_zone=12, days=1, intervals_per_day=1)


def spec_for(records: int) -> SyntheticSpec:
    probe = Truth()
    for _ in generate(BASE, probe):
        pass
    intervals = max(1, math.ceil(records / probe.rows))
    days = max(1, math.ceil(intervals / 1440))
    return dataclasses.replace(BASE, days=days, intervals_per_day=math.ceil(intervals / days))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--master", default="local[*]")
    args = ap.parse_args()
    spark = spark_session(args.master, "zonegate-report-bench")
    spark.sparkContext.setLogLevel("ERROR")
    prices = price_table("aws", "us-east-1")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            root = Path(tmp) / f"store-{size}"
            t = time.monotonic()
            n_objects = write_local(generate(spec_for(size)), root)
            gen_s = time.monotonic() - t
            loc = locate(root.as_uri())
            t = time.monotonic()
            r = run_report(
                spark, loc, Path(tmp) / f"out-{size}", prices, progress=Progress(5, io.StringIO())
            )
            secs = time.monotonic() - t
            results.append((r.records, n_objects, secs))
            print(
                f"{r.records:>11,} records in {n_objects:>6,} objects: report {secs:7.1f} s, "
                f"{r.records / secs:>10,.0f} records/s (generated in {gen_s:.0f} s)",
                flush=True,
            )
    spark.stop()
    if len(results) >= 2:
        (n0, _, s0), (n1, _, s1) = results[0], results[-1]
        print(
            f"x{n1 / n0:.1f} records -> x{s1 / s0:.2f} time "
            f"(growth exponent {math.log(s1 / s0) / math.log(n1 / n0):.2f})"
        )


if __name__ == "__main__":
    main()
