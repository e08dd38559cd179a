"""Records the metadata-store cases write: a group commit of one entry, a node."""

from __future__ import annotations

from zonegate.metastore.models import NodeRecord
from zonegate.storage.index import IndexEntry, PartitionCommit, ProducerBatch, ProducerEntry


def append(
    sid: int, base: int, n: int = 2, *, epoch: int = 0, producer_id: int | None = None
) -> PartitionCommit:
    """`n` records at `base` as one index entry, fenced by leader epoch `epoch`; with
    `producer_id`, that producer's state after writing them (sequence numbers = offsets)."""
    last = base + n - 1
    producers = (
        ()
        if producer_id is None
        else (ProducerEntry(producer_id, 0, (ProducerBatch(base, last, base, last),)),)
    )
    return PartitionCommit(
        stream_id=sid,
        leader_epoch=epoch,
        next_offset=base + n,
        entries=(IndexEntry(base, last, f"wal/{sid}-{base}", 0, 10, 1000),),
        producers=producers,
    )


def node(node_id: int, zone: str = "zone-a") -> NodeRecord:
    return NodeRecord(node_id, zone, f"kafka-{node_id}", 9092, f"rpc-{node_id}", 9093)
