"""`benchmarks/produce.py --acls N`: produce throughput with N ACLs on the cluster against
the same node with only the ACLs the benchmark's producer needs, the same run.

Two identical nodes (`serve --zones zone-a`, local store, each its own data directory
and metadata store) with Kafka's StandardAuthorizer on and two listeners: PLAINTEXT,
whose principal (User:ANONYMOUS) is the benchmark's producer, and SASL_PLAINTEXT, where
the PLAIN user `admin` (a super user) creates the topics and the ACLs. The producer's
principal holds no super-user pass: every produce request is checked against the ACLs.
It needs WRITE on its topics (which implies DESCRIBE, and IDEMPOTENT_WRITE through
KIP-679's any-topic rule), given as a PREFIXED ALLOW on `bench-`. One node gets the N
ACLs and the producer's, the other the producer's only, once, before any phase.

The N ACLs are made as tenants' ACLs look (`filler_acls`): per tenant (a principal of
its own, names of varied lengths so the index meets many prefix lengths) PREFIXED ALLOWs
on its topics and groups, LITERAL ALLOWs and DENYs on single topics and groups, some
with a host; and one in a hundred on the benchmark's own topic prefix for other
principals (readers granted the topics, as a shared cluster has), so a check of the
producer's topic walks past ACLs that match the resource but not the principal.

Then, after one unmeasured warm-up phase on each node (`_warm_up`), `--acl-rounds`
rounds of produce.py's throughput phase (confluent-kafka, 1 KiB records, acks=all,
idempotent), each round measuring the node with the N ACLs and the node without them,
in turn ABBA-ordered so a drift of the shared machine falls on both sides alike, each
phase on a topic of its own, both nodes idle before each phase.

Why two nodes rather than one whose ACLs are replaced before each phase: there,
inserting the 10,001 ACLs (CreateAcls in batches, the index rebuilt after each, in the
metadata store that takes the leader's commits) came right before every phase with the
ACLs and never before the others, so whatever it leaves behind (the store's WAL, the
node's heap) could only fall on that side. With two nodes the sides differ by their
ACLs only, set once, as on a cluster.

The medians are reported, and the node's CPU seconds per GiB produced (steadier than
MB/s when other jobs share the machine); the last line is exactly
`produce MB/s with N ACLs: X, without Y, ratio R`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
BENCH_PREFIX = "bench-"
PRODUCER = "User:ANONYMOUS"  # the PLAINTEXT listener's principal

Producer = Callable[[dict[str, Any], str, int, int], dict[str, float]]


class Acl(NamedTuple):
    """One ACL in Kafka's words (resource type, pattern type, operation and permission
    by name), turned into a client's binding by `binding`."""

    resource_type: str  # TOPIC, GROUP
    name: str
    pattern: str  # LITERAL, PREFIXED
    principal: str
    host: str
    operation: str
    permission: str  # ALLOW, DENY


def filler_acls(count: int, seed: int = 26) -> list[Acl]:
    """`count` ACLs of other principals on their own topics and groups (see the module
    doc); deterministic for a seed."""
    rng = random.Random(seed)
    acls: list[Acl] = []
    tenant = 0
    while len(acls) < count:
        tenant += 1
        who = f"User:tenant-{tenant}"
        # Names from 3 to 40 characters: the prefixed index keys on name lengths.
        letters = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(1, 34)))
        name = f"t{tenant}-{letters}"
        host = f"10.{tenant % 256}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
        acls += [
            Acl("TOPIC", f"{name}.", "PREFIXED", who, "*", "ALL", "ALLOW"),
            Acl("GROUP", f"{name}.", "PREFIXED", who, "*", "READ", "ALLOW"),
            Acl("TOPIC", f"{name}-events", "LITERAL", who, "*", "WRITE", "ALLOW"),
            Acl("TOPIC", f"{name}.audit", "LITERAL", who, host, "WRITE", "DENY"),
            Acl("GROUP", f"{name}-app", "LITERAL", who, "*", "DESCRIBE", "ALLOW"),
        ]
        if tenant % 20 == 0:  # one in a hundred: a reader of the benchmark's topics
            acls.append(Acl("TOPIC", BENCH_PREFIX, "PREFIXED", who, "*", "READ", "ALLOW"))
    return acls[:count]


def producer_acls() -> list[Acl]:
    """What the benchmark's producer needs: WRITE on its topics."""
    return [Acl("TOPIC", BENCH_PREFIX, "PREFIXED", PRODUCER, "*", "WRITE", "ALLOW")]


def binding(acl: Acl) -> Any:
    """`acl` as confluent-kafka's AclBinding."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBinding(
        ResourceType[acl.resource_type],
        acl.name,
        ResourcePatternType[acl.pattern],
        acl.principal,
        acl.host,
        AclOperation[acl.operation],
        AclPermissionType[acl.permission],
    )


def _all_filter() -> Any:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )


def _settle(admin: Any, acls: list[Acl]) -> float:
    """Replaces every ACL of the cluster by `acls`: seconds taken."""
    start = time.monotonic()
    every = _all_filter()
    admin.delete_acls([every])[every].result(120)
    batch = 1000  # a few CreateAcls requests rather than one of megabytes
    for i in range(0, len(acls), batch):
        for future in admin.create_acls([binding(a) for a in acls[i : i + batch]]).values():
            future.result(120)
    found = len(admin.describe_acls(every).result(120))
    if found != len(acls):
        raise RuntimeError(f"{found} ACLs on the cluster, expected {len(acls)}")
    return time.monotonic() - start


def _start(tmp: Path, name: str) -> tuple[Any, Any, dict[str, Any]]:
    """One node as the module doc says: (the running node, its admin client, the
    producer's client settings)."""
    from confluent_kafka.admin import AdminClient

    from tests.node_harness import free_port_block, start_node
    from tests.security.secure_node import plain_jaas

    base = free_port_block(2)
    node = start_node(
        tmp / name,
        [
            "--zones", "zone-a",
            "--listen", f"PLAINTEXT://127.0.0.1:{base},SASL_PLAINTEXT://127.0.0.1:{base + 1}",
            "--authorizer-class-name", STANDARD,
            "--super-users", f"User:{ADMIN}",
            "--sasl-enabled-mechanisms", "PLAIN",
            "--listener-setting",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config="
            + plain_jaas({ADMIN: ADMIN_PASSWORD}),
        ],
    )  # fmt: skip
    admin = AdminClient(
        {
            "bootstrap.servers": f"127.0.0.1:{base + 1}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": ADMIN,
            "sasl.password": ADMIN_PASSWORD,
        }
    )
    return node, admin, {"bootstrap.servers": f"127.0.0.1:{base}"}


def run(args: argparse.Namespace, run_producer: Producer) -> None:
    from confluent_kafka.admin import NewTopic

    from benchmarks.cpu_time import cpu_s as _cpu_s

    acl_sets = {
        f"with {args.acls} ACLs": filler_acls(args.acls) + producer_acls(),
        "without": producer_acls(),
    }
    results: dict[str, list[float]] = {name: [] for name in acl_sets}
    # The node's CPU seconds per GiB produced: on a shared machine the throughput
    # follows the other jobs, the node's CPU time per byte much less.
    cpu: dict[str, list[float]] = {name: [] for name in acl_sets}
    gib = args.records * 1024 / 2**30
    with tempfile.TemporaryDirectory(prefix="zonegate-bench-acls-") as tmp:
        sides: dict[str, tuple[Any, Any, dict[str, Any]]] = {}
        try:
            for i, (name, acls) in enumerate(acl_sets.items()):
                sides[name] = _start(Path(tmp), f"node-{i}")
                node, admin, producer = sides[name]
                took = _settle(admin, acls)
                print(f"{name}: {len(acls)} ACLs set in {took:.1f} s", flush=True)
                _warm_up(admin, producer, args, run_producer)
            pids = [node.proc.pid for node, _, _ in sides.values()]
            for i in range(args.acl_rounds):
                order = list(sides) if i % 2 == 0 else list(reversed(sides))
                for name in order:
                    node, admin, producer = sides[name]
                    topic = f"{BENCH_PREFIX}{i}"
                    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
                    for pid in pids:  # the other node's compaction would run into this phase
                        _quiet(pid)
                    node0 = _cpu_s(node.proc.pid)
                    r = run_producer(producer, topic, args.records, args.partitions)
                    node_cpu = (_cpu_s(node.proc.pid) - node0) / gib
                    results[name].append(r["mb_s"])
                    cpu[name].append(node_cpu)
                    print(
                        f"round {i + 1}: {name:16s} {r['mb_s']:8.1f} MB/s ({args.records} x 1024 B"
                        f" in {r['seconds']:.1f} s; p50 {r['p50_ms']:.1f} ms p99"
                        f" {r['p99_ms']:.1f} ms at full speed; node CPU {node_cpu:.2f} s/GiB;"
                        f" load average {_load()})",
                        flush=True,
                    )
        finally:
            for node, _, _ in sides.values():
                node.stop()
    cpu_with, cpu_without = (statistics.median(c) for c in cpu.values())
    print(
        f"node CPU s/GiB (medians): with {args.acls} ACLs {cpu_with:.2f}, without"
        f" {cpu_without:.2f}, ratio {cpu_without / cpu_with:.2f}"
    )
    with_acls = statistics.median(results[f"with {args.acls} ACLs"])
    without = statistics.median(results["without"])
    print(
        f"produce MB/s with {args.acls} ACLs: {with_acls:.1f}, without {without:.1f}, "
        f"ratio {with_acls / without:.2f}"
    )


def _warm_up(admin: Any, producer: dict[str, Any], args: argparse.Namespace, run: Producer) -> None:
    """One unmeasured phase of the rounds' size on a node before its first round. A
    node's first phase pays its start: the heap and the log cache grow to their working
    size (over 100,000 minor page faults in the first phase against under 7,000 in later
    ones), and round 1 starts with the side with the ACLs, which alone paid it."""
    from confluent_kafka.admin import NewTopic

    topic = f"{BENCH_PREFIX}warm-up"
    admin.create_topics([NewTopic(topic, args.partitions, 1)])[topic].result(30)
    r = run(producer, topic, args.records, args.partitions)
    print(f"warm-up (not counted): {r['mb_s']:.1f} MB/s; load average {_load()}", flush=True)


def _quiet(pid: int, timeout_s: float = 60.0) -> None:
    """Waits until the node is idle (under a tenth of a core over half a second): the
    previous phase's compaction and uploads otherwise run into the next phase, and in an
    A/A run (`--acls 1`) phases then differed by up to 2x and the ratio said 0.90."""
    from benchmarks.cpu_time import cpu_s

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        before = cpu_s(pid)
        time.sleep(0.5)
        if cpu_s(pid) - before < 0.05:
            return


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
