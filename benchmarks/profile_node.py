"""Where a node's CPU goes per GiB produced and consumed: cProfile of every thread, by stage.

Starts one node (local store, `--zones zone-a`) in a child process that runs
`zonegate serve` under cProfile, timed by each thread's own CPU clock (so
waiting costs nothing), on its main thread and on every thread it starts (the
metastore's executor, asyncio.to_thread's file writes), produces `--records`
1 KiB records with benchmarks/produce.py's throughput phase (confluent-kafka,
acks=all, idempotent, 4 partitions), reads them back with its consume pass,
stops the node and groups the profile by stage:

- produce: framing, request decode, validation, WAL encode and upload, leader
  commit, answer encode;
- fetch: index read, cache (the log cache and the object reads behind it),
  answer encode;
- in the background: compaction (WAL ranges rewritten into stream objects,
  docs/storage.md), and the object reads behind it and behind fetches that
  miss the caches;
- event loop (asyncio's own work, its selector and socket calls not claimed
  above), and other.

The event loop's thread is profiled over the workload only (from the first
produce to the end of the consume pass); the node's other threads (the
metastore's executor, file writes) over their whole life, whose start-up part
is small.

A function's own time goes to the stage its module and name say; time in
code outside zonegate (the standard library, builtins, C extensions) goes to
its nearest zonegate callers, in proportion to the time each call edge took.
cProfile's own overhead inflates call-heavy code, so read the shares, and the
node's CPU per GiB from the unprofiled benchmark (benchmarks/produce.py).

    python benchmarks/profile_node.py [--records N] [--stats FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# (stage, path pattern, function-name pattern) for zonegate's own functions, first match wins.
# Paths are relative to src/zonegate/.
STAGES: list[tuple[str, str, str]] = [
    ("fetch: answer encode", r"proxy/handlers/fetch\.py", r"encode|answer|response|_build"),
    ("fetch: index read", r"services/read_path\.py|leader_forwarder/index_reads\.py", r""),
    ("fetch: index read", r"storage/index\.py|leader_forwarder/leader\.py", r"read|index|watch"),
    ("fetch: cache", r"storage/(reader|log_cache|block_cache|segments)\.py", r""),
    ("fetch: cache", r"records/(retain|rewrite)\.py", r""),
    ("fetch: request", r"proxy/handlers/fetch\.py", r""),
    ("answer encode", r"proxy/handlers/produce\.py", r"encode|answer|response|_result"),
    ("answer encode", r"proxy/(codec|schema|registry)\.py", r"encode|write|response|serial"),
    ("answer encode", r"proxy/accounting\.py|usage/", r""),
    ("framing", r"proxy/(server|connection|tls|gate|memory|throttling|secured)\.py", r""),
    ("request decode", r"proxy/(codec|decoder|schema|registry|context|authz)\.py", r""),
    ("request decode", r"proxy/handlers/", r""),
    ("validation", r"services/log_validator\.py|records/|storage/topic_rules\.py", r""),
    # The local store serves the WAL (pack files), compaction (whole objects) and reads.
    ("WAL encode and upload", r"storage/local_store\.py", r"pack|_write_alone|_pwrite_all|_create"),
    ("background: compaction", r"storage/local_store\.py", r"^_?(write|put)"),
    ("object reads (compaction, fetch misses)", r"storage/local_store\.py", r""),
    ("background: compaction", r"maintenance/|storage/(stream_objects|cleaner)\.py", r""),
    (
        "WAL encode and upload",
        r"wal_s3/|storage/(objects|pack_files|instrumented|s3_store)\.py",
        r"",
    ),
    ("leader commit", r"leader_forwarder/|metastore/", r""),
    ("write path", r"services/write_path\.py", r""),
    ("other", r"", r""),
]
_COMPILED = [(s, re.compile(p), re.compile(f)) for s, p, f in STAGES]
# Code outside zonegate that is a stage of its own wherever it is called from.
OUTSIDE: list[tuple[str, re.Pattern[str]]] = [
    (
        "event loop",
        re.compile(r"asyncio/(base_events|selector_events|events|unix_events)\.py|selectors\.py"),
    ),
    ("other", re.compile(r"<frozen importlib|importlib/|<frozen zipimport")),
]


def _zonegate_path(filename: str) -> str | None:
    marker = os.sep + "zonegate" + os.sep
    if marker in filename and "benchmarks" not in filename:
        return filename.rsplit(marker, 1)[1]
    return None


def stage_of(func: tuple[str, int, str]) -> str | None:
    """The stage of a zonegate function, of code that is a stage wherever it runs, or None."""
    filename, _line, name = func
    rel = _zonegate_path(filename)
    if rel is None:
        for stage, pattern in OUTSIDE:
            if pattern.search(filename):
                return stage
        return None
    for stage, path, fn in _COMPILED:
        if path.search(rel) and fn.search(name):
            return stage
    return "other"


def by_stage(stats: dict[Any, Any]) -> dict[str, float]:
    """Every function's own time, to its stage or (outside zonegate) its callers' stages."""
    memo: dict[Any, dict[str, float]] = {}
    active: set[Any] = set()  # the functions being attributed: a caller among them is a cycle

    def shares(func: Any, depth: int = 0) -> dict[str, float]:
        """How one second of `func`'s own time splits among stages."""
        stage = stage_of(func)
        if stage is not None:
            return {stage: 1.0}
        if func in memo:
            return memo[func]
        callers = {
            c: edge
            for c, edge in (stats[func][4] if func in stats else {}).items()
            if c not in active and c != func  # recursion: the outermost call decides
        }
        total = sum(edge[3] for edge in callers.values())
        if depth > 30 or total <= 0:
            return {"other": 1.0}
        active.add(func)
        out: dict[str, float] = defaultdict(float)
        for caller, edge in callers.items():
            for stage, part in shares(caller, depth + 1).items():
                out[stage] += part * edge[3] / total
        active.discard(func)
        memo[func] = dict(out)
        return memo[func]

    result: dict[str, float] = defaultdict(float)
    for func, (_cc, _nc, tt, _ct, _callers) in stats.items():
        if func[0] == threading.__file__ and func[2] == "run":
            # Thread.run's own time is an artefact: it never runs code of its own, but a
            # thread profile closed at exit charges its open bottom frame a wrong clock's time.
            result["(Thread.run artefact, not counted)"] += tt
            continue
        for stage, part in shares(func).items():
            result[stage] += tt * part
    return dict(result)


def _thread_ticks(pid: int) -> dict[tuple[str, int], int]:
    """(thread name, tid) -> user + system clock ticks, for every live thread of `pid`."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[(name, int(task.name))] = int(fields[11]) + int(fields[12])
    return out


def _run_node_profiled(out: str, argv: list[str]) -> None:
    """The child: `zonegate serve` with every thread profiled, the stats dumped at exit."""
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()
    original_run = threading.Thread.run

    def run(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)
        with lock:
            profiles.append(profile)
        profile.enable()
        try:
            original_run(self)
        finally:
            profile.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    # The main thread (the event loop: nearly all of the node's work) is profiled only
    # between SIGUSR1 and SIGUSR2, the workload, so start-up and shutdown stay out.
    main = cProfile.Profile(time.thread_time)
    signal.signal(signal.SIGUSR1, lambda *_: main.enable())
    signal.signal(signal.SIGUSR2, lambda *_: main.disable())
    sys.argv = ["zonegate", *argv]
    import concurrent.futures.thread
    import runpy

    try:
        runpy.run_module("zonegate", run_name="__main__")
    except SystemExit:
        pass
    finally:
        main.disable()
        # Executor threads end here (as at interpreter exit), so each thread's profile is
        # closed on its own thread, timed by its own clock.
        concurrent.futures.thread._python_exit()  # type: ignore[attr-defined]
        merged = pstats.Stats(main)
        for p in profiles:
            try:
                p.create_stats()
                merged.add(p)
            except (TypeError, ValueError):
                continue  # a thread that never ran Python code
        merged.dump_stats(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--stats", help="keep the merged pstats file here")
    args = parser.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    from benchmarks.produce import RECORD_BYTES, run_consumer, run_producer

    with tempfile.TemporaryDirectory() as tmp:
        out = args.stats or str(Path(tmp) / "node.prof")
        proc = subprocess.Popen(
            [
                sys.executable, __file__, "--as-node", out, "serve", "--listen", "127.0.0.1:0",
                "--data-dir", str(Path(tmp) / "node"), "--http-port", "0", "--zones", "zone-a",
            ],
            stdout=subprocess.PIPE,
            stderr=open(Path(tmp) / "node.log", "w"),  # noqa: SIM115 - the child's, for its life
            text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("zonegate listening on"):
            proc.kill()
            raise RuntimeError(f"node did not start: {(Path(tmp) / 'node.log').read_text()}")
        conf = {"bootstrap.servers": line.split()[3]}
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("bench", args.partitions, 1)])["bench"].result(30)
        del admin
        load0 = os.getloadavg()[0]
        nbytes = args.records * RECORD_BYTES
        ticks0 = _thread_ticks(proc.pid)
        proc.send_signal(signal.SIGUSR1)
        produced = run_producer(conf, "bench", args.records, args.partitions)
        consumed = run_consumer(conf, "bench", args.partitions, nbytes)
        proc.send_signal(signal.SIGUSR2)
        ticks1 = _thread_ticks(proc.pid)
        hz = os.sysconf("SC_CLK_TCK")
        names = sorted({n for n, _ in ticks1})
        used = {n: sum(t for (m, i), t in ticks1.items() if m == n) for n in names}
        used = {
            n: (u - sum(t for (m, _), t in ticks0.items() if m == n)) / hz for n, u in used.items()
        }
        threads = ", ".join(
            f"{n} {u:.2f} s" for n, u in sorted(used.items(), key=lambda kv: -kv[1]) if u > 0
        )
        load1 = os.getloadavg()[0]
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        stats = pstats.Stats(out).stats  # type: ignore[attr-defined]
    stages = by_stage(stats)
    gib = nbytes / 2**30
    artefact = stages.pop("(Thread.run artefact, not counted)", 0.0)
    total = sum(stages.values())
    print(
        f"profiled node: {args.records} x {RECORD_BYTES} B produced at {produced['mb_s']:.1f} MB/s"
        f" and {consumed['bytes'] / 1e6:.0f} MB read back at {consumed['mb_s']:.1f} MB/s"
        f" under cProfile; load average {load0:.1f} at start, {load1:.1f} at end"
    )
    print(f"{'stage':40s} {'CPU s':>8s} {'s per GiB':>10s} {'share':>6s}")
    for stage, seconds in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"{stage:40s} {seconds:8.2f} {seconds / gib:10.2f} {seconds / total:6.1%}")
    print(f"{'all (profiled)':40s} {total:8.2f} {total / gib:10.2f}")
    print(f"not counted: {artefact:.2f} s charged to Thread.run (see by_stage)")
    print(f"node CPU by thread over the workload, from /proc (not profiled time): {threads}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--as-node":
        _run_node_profiled(sys.argv[2], sys.argv[3:])
    else:
        main()
