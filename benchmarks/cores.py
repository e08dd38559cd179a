"""Produce throughput of one node given 1 core and given N: does the node use the cores
it is given (issue 31, docs/cores.md)?

The workload is benchmarks/produce.py's: confluent-kafka, 1 KiB records, acks=all,
idempotent, linger 5 ms, no compression; here from `--producers` processes at once
(enough to load a node), into a topic of `--partitions` partitions on one
`zonegate node` (local store, SQLite). Each producer process warms up (metadata,
producer id, connections), then all start together; MB/s is all their record
bytes over the time from the first start to the last flush. The node's CPU
seconds over that time (its process tree's, so its workers' too:
benchmarks/cpu_time.py) per GiB of records are reported beside it, and the cores it
used (those CPU seconds over the run's seconds): a node held to 1 core cannot pass
1.0, and a node using N cores can reach N; and the node's PUTs per MB of records
(each of its processes seals its own WAL objects).

- "1 core": `--workers 1`, the node pinned to one CPU (sched_setaffinity before it
  starts; its threads inherit it).
- "N cores": `--workers N` (default: the CPUs this process may run on), the node on
  all of them.
The producers run on `--generator-cpus` (default: every CPU), so on a machine with
more cores than N + the generator's, pin them apart to measure the node alone.
The two runs are interleaved `--rounds` times and each figure is the median; every
run's figure is printed with the load average (1 minute) at its end, since a shared
machine moves the MB/s.

On a machine whose load generator shares the node's cores (2 cores, both used by
producers and node alike), S is not the node's scaling: in the 1-core run the
producers have the other core to themselves; in the N-core run they compete with
the node's N processes. S then says how much more the node takes from the machine
when it may use all of it, a floor of its scaling.

Last line, exactly: `cores: MB/s with 1 core X, with N cores Y, scaling S` (S = Y / X).

    python benchmarks/cores.py [--records N] [--producers P] [--workers N]
                               [--rounds R] [--generator-cpus 2,3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.cpu_time import cpu_s  # noqa: E402 - needs the path above
from benchmarks.produce import RECORD_BYTES  # noqa: E402


def _producer(
    bootstrap: str,
    records: int,
    partitions: int,
    cpus: list[int] | None,
    go: Barrier,
    out: Any,
) -> None:
    """One producer process: warm up, wait for the others, produce, flush."""
    from confluent_kafka import Producer

    if cpus:
        os.sched_setaffinity(0, cpus)
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "compression.type": "none",
            "queue.buffering.max.kbytes": 256 * 1024,
        }
    )
    for i in range(partitions):
        p.produce("bench", b"x" * RECORD_BYTES, partition=i)
    p.flush(60)
    payload = os.urandom(RECORD_BYTES)
    errors = 0

    def on_delivery(err: Any, _msg: Any) -> None:
        nonlocal errors
        errors += err is not None

    go.wait(120)
    start = time.time()
    for i in range(records):
        while True:
            try:
                p.produce("bench", payload, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.001)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(300)
    out.put((start, time.time(), left + errors))


def run(args: argparse.Namespace, workers: int, node_cpus: list[int] | None) -> dict[str, float]:
    """One run: a fresh node, the producers at once; MB/s, node CPU s per GiB, load."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.cluster_harness import start_cluster

    everything = sorted(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        if node_cpus:
            os.sched_setaffinity(0, node_cpus)  # inherited by the node and its workers
        try:
            cluster = start_cluster(Path(tmp), ["a"], 1, ["--workers", str(workers)])
        finally:
            os.sched_setaffinity(0, everything)
        node = cluster.nodes[0]
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            admin.create_topics([NewTopic("bench", args.partitions, 1)])["bench"].result(30)
            del admin
            ctx = mp.get_context("spawn")
            go = ctx.Barrier(args.producers + 1)
            out = ctx.Queue()
            each = args.records // args.producers
            procs = [
                ctx.Process(
                    target=_producer,
                    args=(node.bootstrap, each, args.partitions, args.generator_cpus, go, out),
                )
                for _ in range(args.producers)
            ]
            for proc in procs:
                proc.start()
            go.wait(120)
            assert node.proc is not None
            cpu0 = cpu_s(node.proc.pid)
            results = [out.get(timeout=600) for _ in procs]
            cpu = cpu_s(node.proc.pid) - cpu0
            for proc in procs:
                proc.join(30)
            puts = sum(
                v
                for name, labels, v in node.metrics()
                if name == "zonegate_object_store_requests_total" and labels["op"] == "put"
            )
        finally:
            cluster.stop()
    if any(r[2] for r in results):
        raise RuntimeError(f"undelivered or failed records: {[r[2] for r in results]}")
    elapsed = max(r[1] for r in results) - min(r[0] for r in results)
    nbytes = each * args.producers * RECORD_BYTES
    return {
        "mb_s": nbytes / elapsed / 1e6,
        "cpu_gib": cpu / (nbytes / 2**30),
        "cores_used": cpu / elapsed,  # the node's CPU seconds per second of the run
        # All the node's PUTs (WAL objects, or appends to pack files on the local
        # store, and a few of its own) per MB of records: each process seals its own.
        "puts_mb": puts / (nbytes / 1e6),
        "load": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=300_000, help="in all, per run")
    parser.add_argument("--producers", type=int, default=4, help="producer processes")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument(
        "--workers", type=int, default=len(os.sched_getaffinity(0)), help="N (default: CPUs)"
    )
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--generator-cpus",
        type=lambda s: [int(c) for c in s.split(",")],
        default=None,
        help="CPUs the producers run on, e.g. 2,3 (default: all)",
    )
    args = parser.parse_args()
    one_cpu = [sorted(os.sched_getaffinity(0))[0]]
    ones: list[dict[str, float]] = []
    alls: list[dict[str, float]] = []
    for r in range(args.rounds):
        ones.append(run(args, 1, one_cpu))
        print(
            f"round {r + 1}: 1 core  {ones[-1]['mb_s']:.1f} MB/s, node CPU "
            f"{ones[-1]['cpu_gib']:.1f} s/GiB, using {ones[-1]['cores_used']:.2f} cores, "
            f"{ones[-1]['puts_mb']:.2f} PUTs/MB, "
            f"load {ones[-1]['load']:.1f}",
            flush=True,
        )
        alls.append(run(args, args.workers, None))
        print(
            f"round {r + 1}: {args.workers} cores {alls[-1]['mb_s']:.1f} MB/s, node CPU "
            f"{alls[-1]['cpu_gib']:.1f} s/GiB, using {alls[-1]['cores_used']:.2f} cores, "
            f"{alls[-1]['puts_mb']:.2f} PUTs/MB, "
            f"load {alls[-1]['load']:.1f}",
            flush=True,
        )
    x = statistics.median(o["mb_s"] for o in ones)
    y = statistics.median(a["mb_s"] for a in alls)
    load = os.getloadavg()
    print(f"load average: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(
        f"cores: MB/s with 1 core {x:.1f}, with {args.workers} cores {y:.1f}, scaling {y / x:.2f}"
    )


if __name__ == "__main__":
    main()
