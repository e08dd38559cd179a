"""How long `zonegate report` takes, as a user waits for it, at a few sizes of usage.

    python benchmarks/report.py [--sizes 23,1000000,10000000] [--engine auto|arrow|spark]

For each size, writes exactly that many synthetic usage records to a temporary
local store (not timed), then runs the `zonegate report` command on them in a
fresh process and times it from start to exit: Spark's start (when it starts),
reading, the tables, writing Parquet, CSV and the dashboard. 23 records is a
short demo session on the embedded default; 1M and 10M are a cluster's day or
weeks. Needs the report extra and Java (see docs/report.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from zonegate.analytics.synthetic import SyntheticSpec, Truth, UsageObject, generate, write_local

BASE = SyntheticSpec(nodes_per_zone=2, topics=40, clients_per_zone=12, days=1, intervals_per_day=1)
# A demo session: one node per zone, one topic, one client per zone.
TINY = SyntheticSpec(nodes_per_zone=1, topics=1, clients_per_zone=1, days=1, intervals_per_day=1)


def spec_for(records: int) -> SyntheticSpec:
    """A spec making at least `records` rows: BASE's layout, as many intervals as needed."""
    base = TINY if records < 1000 else BASE
    probe = Truth()
    for _ in generate(base, probe):
        pass
    intervals = max(1, math.ceil(records / probe.rows))
    days = max(1, math.ceil(intervals / 1440))
    return dataclasses.replace(base, days=days, intervals_per_day=math.ceil(intervals / days))


def exactly(objects: Iterator[UsageObject], records: int) -> Iterator[UsageObject]:
    """The first `records` rows of `objects`, the last object cut short if need be."""
    left = records
    for obj in objects:
        if left <= 0:
            return
        n = obj.table.num_rows
        yield obj if n <= left else UsageObject(obj.key, obj.table.slice(0, left))
        left -= n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes", default="23,1000000,10000000", help="records per run (default %(default)s)"
    )
    ap.add_argument(
        "--engine",
        choices=("auto", "arrow", "spark"),
        default="auto",
        help="passed to zonegate report --engine (default %(default)s)",
    )
    ap.add_argument("--master", default=None, help="passed to zonegate report (default: none)")
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            root = Path(tmp) / f"store-{size}"
            t = time.monotonic()
            n_objects = write_local(exactly(generate(spec_for(size)), size), root)
            gen_s = time.monotonic() - t
            out = Path(tmp) / f"out-{size}"
            cmd = [sys.executable, "-m", "zonegate", "report", "--usage", root.as_uri()]
            cmd += ["--out", str(out), "--engine", args.engine]
            cmd += ["--master", args.master] if args.master else []
            t = time.monotonic()
            done = subprocess.run(cmd, capture_output=True, text=True)
            secs = time.monotonic() - t
            if done.returncode != 0:
                sys.exit(f"zonegate report failed on {size:,} records:\n{done.stderr[-3000:]}")
            results.append((size, secs))
            # The report's own last progress line times the job without the process start.
            job = re.findall(r"^done: .* in ([0-9.]+)s$", done.stderr, re.MULTILINE)
            ran = "Spark" if "(Spark) " in done.stderr else "in process"
            print(
                f"{size:>11,} records in {n_objects:>6,} objects: `zonegate report` {secs:7.1f} s "
                f"(job {job[-1] if job else '?'} s, {ran}), {size / secs:>10,.0f} records/s "
                f"(generated in {gen_s:.0f} s)",
                flush=True,
            )
    if len(results) >= 2:
        (n0, s0), (n1, s1) = results[0], results[-1]
        print(
            f"x{n1 / n0:,.0f} records -> x{s1 / s0:.2f} time "
            f"(growth exponent {math.log(s1 / s0) / math.log(n1 / n0):.2f})"
        )


if __name__ == "__main__":
    main()
