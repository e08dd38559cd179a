"""Synthetic usage records that follow docs/usage-records.md, with the totals they were made from.

For tests and the benchmark, before a multi-zone cluster writes real ones. The
generator plays a zone-routed cluster: clients talk to a node of their zone
(except a `misrouted_fraction` of them, whose bytes cross zones), produce data
reaches a leader elsewhere as `forward_rpc` summaries counted at both ends,
and every node writes one object per interval with `s3` and `storage` rows.
`Truth` accumulates what was generated, so a test can check a report against it.
"""

from __future__ import annotations

import datetime
import io
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zonegate.analytics.tables import LEADER_RPCS, NO_CLIENT_ID, NO_TOPIC
from zonegate.usage.schema import (
    ARROW_SCHEMA,
    CLIENT_KINDS,
    SCHEMA_VERSION,
    V2_DEFAULTS,
    V3_DEFAULTS,
    V4_DEFAULTS,
)


@dataclass(frozen=True)
class SyntheticSpec:
    zones: tuple[str, ...] = ("a", "b", "c")
    nodes_per_zone: int = 1
    topics: int = 3
    clients_per_zone: int = 2
    days: int = 2
    intervals_per_day: int = 3
    interval_s: int = 60
    misrouted_fraction: float = 0.25
    cluster: str = "synthetic"
    start: datetime.datetime = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
    seed: int = 7
    schema_version: int = SCHEMA_VERSION
    # Multiplies every byte count: 1/4096 looks like a demo session on a laptop,
    # 10_000 like a busy production cluster. Request counts do not change.
    byte_scale: float = 1.0
    # Topics each client produces to and fetches from (None: every topic), so that
    # 1,000 topics and 10,000 client ids stay tens of thousands of rows an interval.
    topics_per_client: int | None = None


@dataclass
class Truth:
    """What the generator made, summed: the answers a report must reproduce."""

    rows: int = 0
    objects: int = 0
    # (kind, from zone, to zone) -> bytes, every transfer once
    flows: dict[tuple[str, str, str], int] = field(default_factory=lambda: defaultdict(int))
    # By topic or client id as the report labels them (tables.LEADER_RPCS, ...):
    # every transfer once, the cross-zone ones, produced and fetched bytes.
    bytes_by_topic: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    bytes_by_client: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cross_zone_by_topic: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cross_zone_by_client: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    produce_by_topic: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    fetch_by_client: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    produce_bytes: int = 0  # produce_data bytes_in
    fetch_bytes: int = 0  # fetch_data bytes_out
    s3_put_requests: int = 0
    s3_get_requests: int = 0
    s3_other_requests: int = 0
    s3_put_bytes: int = 0
    s3_get_bytes: int = 0
    stored_byte_seconds: float = 0.0
    # Produce and Fetch bytes (both ways) whose client and partition leader were in
    # different zones (schema 2 and later: what Kafka's baseline takes as measured).
    leader_cross_produce: int = 0
    leader_cross_fetch: int = 0
    days: set[str] = field(default_factory=set)

    @property
    def cross_zone_bytes(self) -> int:
        return sum(b for (_, src, dst), b in self.flows.items() if src != dst)


@dataclass(frozen=True)
class UsageObject:
    key: str
    table: pa.Table

    def parquet_bytes(self) -> bytes:
        buf = io.BytesIO()
        pq.write_table(self.table, buf)
        return buf.getvalue()


@dataclass(frozen=True)
class _Plan:
    """Row layout of one interval (same every interval), ordered by node."""

    node: np.ndarray  # node index per row
    kind: list[str]
    client_zone: list[str]
    leader_zone: list[str]
    peer_zone: list[str]
    topic: list[str]
    client_id: list[str]
    produce_rows: np.ndarray  # row index of each produce_data row
    sender_of_produce: np.ndarray  # forward_rpc sender row per produce row (-1: leader local)
    receiver_of_sender: dict[int, int]


def _plan(spec: SyntheticSpec) -> _Plan:
    zones = spec.zones
    nodes = [zones[i // spec.nodes_per_zone] for i in range(len(zones) * spec.nodes_per_zone)]
    leader = [t % len(nodes) for t in range(spec.topics)]
    every = round(1 / spec.misrouted_fraction) if spec.misrouted_fraction > 0 else 0
    per_node: list[list[tuple[str, str, str, str, str, str]]] = [[] for _ in nodes]
    produce_at: list[tuple[int, int, str, int]] = []  # (node, slot, client zone, topic)
    n_client = 0
    for zi, zone in enumerate(zones):
        for k in range(spec.clients_per_zone):
            cid = f"svc-{k} zonegate_az={zone}"
            misrouted = every > 0 and n_client % every == every - 1
            n_client += 1
            node_zone_i = (zi + 1) % len(zones) if misrouted else zi
            n = node_zone_i * spec.nodes_per_zone + k % spec.nodes_per_zone
            mine = range(spec.topics)
            if spec.topics_per_client is not None:
                first = (n_client - 1) * spec.topics_per_client
                mine = range(first, first + spec.topics_per_client)
            for t in (t % spec.topics for t in mine):
                lz = nodes[leader[t]]
                produce_at.append((n, len(per_node[n]), zone, t))
                per_node[n].append(("produce_data", zone, lz, zone, f"topic-{t}", cid))
                per_node[n].append(("fetch_data", zone, lz, zone, f"topic-{t}", cid))
            per_node[n].append(("other", zone, "", zone, "", cid))
    senders: dict[tuple[int, str, int], tuple[int, int]] = {}
    for n, _, cz, t in produce_at:
        if leader[t] != n and (n, cz, t) not in senders:
            slot = len(per_node[n])
            per_node[n].append(
                ("forward_rpc", cz, nodes[leader[t]], nodes[leader[t]], f"topic-{t}", "")
            )
            senders[(n, cz, t)] = (n, slot)
    receivers: dict[tuple[int, str, str, int], tuple[int, int]] = {}
    for n, cz, t in senders:
        key = (leader[t], cz, nodes[n], t)
        if key not in receivers:
            lz = nodes[leader[t]]
            receivers[key] = (leader[t], len(per_node[leader[t]]))
            per_node[leader[t]].append(("forward_rpc", cz, lz, nodes[n], f"topic-{t}", ""))
    for n, z in enumerate(nodes):
        per_node[n].append(("s3", "", "", z, "", ""))
        per_node[n].append(("storage", "", z, z, "", ""))
    offsets = np.cumsum([0] + [len(r) for r in per_node])
    flat = [row for rows in per_node for row in rows]

    def at(node_slot: tuple[int, int]) -> int:
        return int(offsets[node_slot[0]] + node_slot[1])

    produce_rows = np.array([at((n, s)) for n, s, _, _ in produce_at], dtype=np.int64)
    sender_of = np.array(
        [at(senders[(n, cz, t)]) if leader[t] != n else -1 for n, _, cz, t in produce_at],
        dtype=np.int64,
    )
    recv = {
        at(senders[(n, cz, t)]): at(receivers[(leader[t], cz, nodes[n], t)]) for n, cz, t in senders
    }
    return _Plan(
        node=np.repeat(np.arange(len(nodes)), [len(r) for r in per_node]),
        kind=[r[0] for r in flat],
        client_zone=[r[1] for r in flat],
        leader_zone=[r[2] for r in flat],
        peer_zone=[r[3] for r in flat],
        topic=[r[4] for r in flat],
        client_id=[r[5] for r in flat],
        produce_rows=produce_rows,
        sender_of_produce=sender_of,
        receiver_of_sender=recv,
    )


def generate(spec: SyntheticSpec, truth: Truth | None = None) -> Iterator[UsageObject]:
    """Yield one `UsageObject` per node per interval, adding what it holds to `truth`."""
    rng = np.random.default_rng(spec.seed)

    def nbytes(lo: int, hi: int, n: int) -> np.ndarray:
        scale = spec.byte_scale
        if scale == 1.0:
            return rng.integers(lo, hi, n)
        return rng.integers(max(1, int(lo * scale)), max(2, int(hi * scale)), n)

    plan = _plan(spec)
    nodes = [
        spec.zones[i // spec.nodes_per_zone] for i in range(len(spec.zones) * spec.nodes_per_zone)
    ]
    n_rows = len(plan.kind)
    kind = np.array(plan.kind)
    node_zone = np.array(nodes)[plan.node]
    peer = np.array(plan.peer_zone)
    is_ = {k: kind == k for k in ("produce_data", "fetch_data", "other", "s3", "storage")}
    senders = np.array(sorted(plan.receiver_of_sender), dtype=np.int64)
    receivers = np.array([plan.receiver_of_sender[s] for s in senders], dtype=np.int64)
    static = {
        "cluster": pa.array([spec.cluster] * n_rows, pa.string()),
        "node_id": pa.array(plan.node + 1, pa.int32()),
        "node_zone": pa.array(node_zone.tolist(), pa.string()),
        "kind": pa.array(plan.kind, pa.string()),
        "client_zone": pa.array(plan.client_zone, pa.string()),
        "leader_zone": pa.array(plan.leader_zone, pa.string()),
        "peer_zone": pa.array(plan.peer_zone, pa.string()),
        "topic": pa.array(plan.topic, pa.string()),
        "client_id": pa.array(plan.client_id, pa.string()),
        # Schema 2: every synthetic S3 request is a WAL one; LIST and DeleteObjects
        # stay in the "other" count, as schema 1 kept them.
        "s3_purpose": pa.array(["wal" if k == "s3" else "" for k in plan.kind], pa.string()),
        "s3_list_requests": pa.array(np.zeros(n_rows, np.int64)),
        "s3_delete_requests": pa.array(np.zeros(n_rows, np.int64)),
        # Schema 3: clients on a PLAINTEXT listener, as most demo clusters have them.
        "principal": pa.array(
            ["User:ANONYMOUS" if k in CLIENT_KINDS else "" for k in plan.kind], pa.string()
        ),
        # Schema 4: a misrouted client reached a node of another zone while its own had
        # nodes (no zone is lost in the synthetic cluster).
        "cross_zone_reason": pa.array(
            [
                "routed" if k in CLIENT_KINDS and c and c != z else ""
                for k, c, z in zip(plan.kind, plan.client_zone, node_zone.tolist(), strict=True)
            ],
            pa.string(),
        ),
    }
    bounds = np.flatnonzero(np.diff(plan.node)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [n_rows]])
    stored = nbytes(1 << 30, 4 << 30, len(nodes))
    step_ms = spec.interval_s * 1000
    day_ms = 86_400_000
    t0 = int(spec.start.timestamp() * 1000)
    cols = (
        "bytes_in bytes_out requests s3_put_requests s3_get_requests s3_other_requests "
        "s3_put_bytes s3_get_bytes stored_bytes"
    ).split()
    for day in range(spec.days):
        for i in range(spec.intervals_per_day):
            start_ms = t0 + day * day_ms + i * step_ms
            v = {c: np.zeros(n_rows, np.int64) for c in cols}
            n_client = int(is_["produce_data"].sum())
            v["bytes_in"][is_["produce_data"]] = nbytes(1 << 16, 1 << 22, n_client)
            v["bytes_out"][is_["produce_data"]] = nbytes(100, 5000, n_client)
            v["bytes_in"][is_["fetch_data"]] = nbytes(100, 5000, n_client)
            v["bytes_out"][is_["fetch_data"]] = nbytes(1 << 16, 1 << 22, n_client)
            n_other = int(is_["other"].sum())
            v["bytes_in"][is_["other"]] = nbytes(50, 2000, n_other)
            v["bytes_out"][is_["other"]] = nbytes(50, 8000, n_other)
            for k in ("produce_data", "fetch_data", "other"):
                v["requests"][is_[k]] = rng.integers(1, 500, int(is_[k].sum()))
            # Each produce request forwarded to a remote leader costs a summary, not its data.
            remote = plan.sender_of_produce >= 0
            summary = v["bytes_in"][plan.produce_rows[remote]] // 256 + 40
            np.add.at(v["bytes_out"], plan.sender_of_produce[remote], summary)
            v["bytes_in"][senders] = nbytes(20, 400, len(senders))  # the answers
            v["requests"][senders] = rng.integers(1, 100, len(senders))
            v["bytes_in"][receivers] = v["bytes_out"][senders]
            v["bytes_out"][receivers] = v["bytes_in"][senders]
            v["requests"][receivers] = v["requests"][senders]
            n_nodes = len(nodes)
            s3 = is_["s3"]
            for c, lo, hi in (
                ("s3_put_requests", 1, 300),
                ("s3_get_requests", 1, 900),
                ("s3_other_requests", 0, 20),
            ):
                v[c][s3] = rng.integers(lo, hi, n_nodes)
            for c in ("s3_put_bytes", "s3_get_bytes"):
                v[c][s3] = nbytes(1 << 20, 1 << 26, n_nodes)
            v["requests"][s3] = (
                v["s3_put_requests"][s3] + v["s3_get_requests"][s3] + v["s3_other_requests"][s3]
            )
            v["bytes_out"][s3] = v["s3_put_bytes"][s3]
            v["bytes_in"][s3] = v["s3_get_bytes"][s3]
            stored = stored + nbytes(0, 1 << 24, n_nodes)
            v["stored_bytes"][is_["storage"]] = stored
            table = pa.table(
                {
                    "schema_version": pa.array(np.full(n_rows, spec.schema_version, np.int32)),
                    "interval_start": pa.array(np.full(n_rows, start_ms, np.int64)).cast(
                        pa.timestamp("ms", tz="UTC")
                    ),
                    "interval_end": pa.array(np.full(n_rows, start_ms + step_ms, np.int64)).cast(
                        pa.timestamp("ms", tz="UTC")
                    ),
                    **static,
                    **{c: pa.array(v[c]) for c in cols},
                },
                schema=ARROW_SCHEMA,
            )
            if spec.schema_version == 1:  # as nodes wrote them before schema 2
                table = table.drop_columns([*V2_DEFAULTS, *V3_DEFAULTS, *V4_DEFAULTS])
            elif spec.schema_version == 2:  # before schema 3
                table = table.drop_columns([*V3_DEFAULTS, *V4_DEFAULTS])
            elif spec.schema_version == 3:  # before schema 4
                table = table.drop_columns(list(V4_DEFAULTS))
            if truth is not None:
                _account(truth, v, kind, node_zone, peer, plan, spec, start_ms)
            date = datetime.datetime.fromtimestamp(start_ms / 1000, datetime.UTC).date()
            for n, (a, b) in enumerate(zip(starts, ends, strict=True)):
                name = f"{start_ms}-{rng.bytes(6).hex()}.parquet"
                key = f"usage/date={date.isoformat()}/node={n + 1}/{name}"
                if truth is not None:
                    truth.objects += 1
                    truth.rows += int(b - a)
                yield UsageObject(key, table.slice(int(a), int(b - a)))


def _account(
    truth: Truth,
    v: dict[str, np.ndarray],
    kind: np.ndarray,
    node_zone: np.ndarray,
    peer: np.ndarray,
    plan: _Plan,
    spec: SyntheticSpec,
    start_ms: int,
) -> None:
    truth.days.add(
        datetime.datetime.fromtimestamp(start_ms / 1000, datetime.UTC).date().isoformat()
    )
    topic = np.array(plan.topic)
    client = np.array(plan.client_id)
    for r in range(len(kind)):
        k = str(kind[r])
        moves: list[tuple[str, str, int]] = []
        if k in ("produce_data", "fetch_data", "other"):
            moves = [
                (peer[r], node_zone[r], int(v["bytes_in"][r])),
                (node_zone[r], peer[r], int(v["bytes_out"][r])),
            ]
        elif k == "forward_rpc":
            # requests leave the sender, answers leave the leader: each once
            moves = [(node_zone[r], peer[r], int(v["bytes_out"][r]))]
        t_label = str(topic[r]) or (LEADER_RPCS if k == "forward_rpc" else NO_TOPIC)
        c_label = str(client[r]) or (LEADER_RPCS if k == "forward_rpc" else NO_CLIENT_ID)
        for src, dst, b in moves:
            if b == 0:
                continue
            truth.flows[(k, str(src), str(dst))] += b
            truth.bytes_by_topic[t_label] += b
            truth.bytes_by_client[c_label] += b
            if src != dst:
                truth.cross_zone_by_topic[t_label] += b
                truth.cross_zone_by_client[c_label] += b
        if (
            k in ("produce_data", "fetch_data")
            and spec.schema_version >= 2
            and plan.client_zone[r]
            and plan.leader_zone[r]
            and plan.client_zone[r] != plan.leader_zone[r]
        ):
            both = int(v["bytes_in"][r]) + int(v["bytes_out"][r])
            if k == "produce_data":
                truth.leader_cross_produce += both
            else:
                truth.leader_cross_fetch += both
        if k == "produce_data":
            truth.produce_by_topic[t_label] += int(v["bytes_in"][r])
        elif k == "fetch_data":
            truth.fetch_by_client[c_label] += int(v["bytes_out"][r])
    truth.produce_bytes += int(v["bytes_in"][kind == "produce_data"].sum())
    truth.fetch_bytes += int(v["bytes_out"][kind == "fetch_data"].sum())
    for c in (
        "s3_put_requests",
        "s3_get_requests",
        "s3_other_requests",
        "s3_put_bytes",
        "s3_get_bytes",
    ):
        setattr(truth, c, getattr(truth, c) + int(v[c].sum()))
    truth.stored_byte_seconds += float(v["stored_bytes"].sum()) * spec.interval_s


def write_local(objects: Iterator[UsageObject], root: Path) -> int:
    """Write objects under `root` as a local object store would (`root/usage/date=.../...`)."""
    n = 0
    for obj in objects:
        path = root / obj.key
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(obj.table, path)
        n += 1
    return n
