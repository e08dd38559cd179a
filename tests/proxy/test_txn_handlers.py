"""The transaction handlers over a fake coordinator: what each request version is answered
(Kafka 4's KafkaApis maps PRODUCER_FENCED to INVALID_PRODUCER_EPOCH for old versions),
which transaction version a request speaks (EndTxn v5, TxnOffsetCommit v5: TV2), and
which partition AddOffsetsToTxn and TxnOffsetCommit name (the group's `__consumer_offsets`
partition). The requests go through the codec both ways, as a client sends and reads
them; the real coordinator is shown with real clients in tests/e2e/test_transactions*.py.
"""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from kio.schema.add_offsets_to_txn.v1.request import AddOffsetsToTxnRequest as AddOffsetsV1
from kio.schema.add_partitions_to_txn.v3 import request as apt3
from kio.schema.add_partitions_to_txn.v4 import request as apt4
from kio.schema.end_txn.v1.request import EndTxnRequest as EndTxnV1
from kio.schema.end_txn.v4.request import EndTxnRequest as EndTxnV4
from kio.schema.end_txn.v5.request import EndTxnRequest as EndTxnV5
from kio.schema.errors import ErrorCode
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as InitV3
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest as InitV4
from kio.schema.txn_offset_commit.v1 import request as toc1
from kio.schema.txn_offset_commit.v3 import request as toc3
from kio.schema.txn_offset_commit.v5 import request as toc5

import zonegate.proxy.handlers  # noqa: F401  (the handlers register themselves)
from zonegate.metastore.models import PartitionInfo, TopicInfo
from zonegate.proxy.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_header,
    response_type,
)
from zonegate.proxy.context import ClientInfo, RequestContext
from zonegate.proxy.registry import REGISTRY
from zonegate.runtime.clock import SYSTEM_CLOCK
from zonegate.services.authorizer import AuthorizerService
from zonegate.transactions.decisions import Answer
from zonegate.transactions.states import TransactionVersion, shard_for

pytestmark = pytest.mark.unit
E = ErrorCode
TOPIC = "t"
GROUP_PARTITION = ("__consumer_offsets", shard_for("g", 50))


class _Txns:
    """A coordinator answering `error` to everything, recording what it was asked."""

    def __init__(self, error: ErrorCode = E.none) -> None:
        self.error = error
        self.calls: list[tuple[Any, ...]] = []

    def shard_of(self, transactional_id: str) -> int:
        return shard_for(transactional_id, 50)

    async def init_producer_id(
        self, tid: str | None, timeout_ms: int, expected: tuple[int, int] | None
    ) -> Answer:
        self.calls.append(("init", tid, timeout_ms, expected))
        return Answer(self.error, 7, 3) if self.error == E.none else Answer(self.error)

    async def add_partitions(
        self,
        tid: str,
        pid: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
        client_version: TransactionVersion = TransactionVersion.TV_0,
    ) -> Answer:
        self.calls.append(("add", tid, sorted(partitions), client_version))
        return Answer(self.error)

    async def verify_partitions(
        self, tid: str, pid: int, epoch: int, partitions: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        parts = sorted(partitions)
        self.calls.append(("verify", tid, parts))
        return dict.fromkeys(parts, self.error)

    async def end_txn(
        self, tid: str, pid: int, epoch: int, commit: bool, version: TransactionVersion
    ) -> Answer:
        self.calls.append(("end", tid, commit, version))
        return Answer(self.error, pid, epoch + 1) if self.error == E.none else Answer(self.error)


class _Topics:
    def __init__(self) -> None:
        tid = uuid.uuid4()
        self.topic = TopicInfo(tid, TOPIC, (PartitionInfo(tid, TOPIC, 0, 1, 1, 1),))

    def get(self, name: str) -> TopicInfo | None:
        return self.topic if name == TOPIC else None

    async def lookup(self, name: str) -> TopicInfo | None:
        return self.get(name)


class _Groups:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def txn_commit_offsets(self, group: str, pid: int, partition: int, *rest: Any) -> Any:
        offsets = rest[-1]
        self.calls.append((group, pid, partition, len(offsets)))
        return [E.none] * len(offsets)


class _Services:
    def __init__(self, txns: _Txns) -> None:
        self.transactions = txns
        self.topics = _Topics()
        self.groups = _Groups()
        self.authorizer = AuthorizerService(None, SYSTEM_CLOCK, enabled=False)


def _exchange(services: _Services, request: Any) -> Any:
    frame = encode_request(9, "t", request)[4:]
    header, offset = peek_header(frame)
    decoded = decode_request(frame, header, offset)
    ctx = RequestContext(
        services=services,  # type: ignore[arg-type]
        principal="User:ANONYMOUS",
        listener="PLAINTEXT",
        client=ClientInfo("127.0.0.1", 1, 1),
        client_zone="zone-a",
        api_key=header.api_key,
        api_version=header.api_version,
        correlation_id=9,
        client_id="t",
        request_bytes=len(frame),
    )
    handler = REGISTRY.handler_for(header.api_key, header.api_version)
    assert handler is not None
    answer = asyncio.run(handler(ctx, decoded.body))
    out = encode_response(9, header.api_key, answer)[4:]
    return decode_response(out, response_type(header.api_key, header.api_version))[1]


def test_init_producer_id_fenced_before_v4_is_invalid_producer_epoch() -> None:
    def init(cls: Any, error: ErrorCode) -> Any:
        return _exchange(
            _Services(_Txns(error)),
            cls(
                transactional_id="x",
                transaction_timeout=datetime.timedelta(seconds=60),
                producer_id=-1,
                producer_epoch=-1,
            ),
        )

    assert init(InitV3, E.producer_fenced).error_code == E.invalid_producer_epoch
    assert init(InitV4, E.producer_fenced).error_code == E.producer_fenced
    ok = init(InitV4, E.none)
    assert (ok.error_code, ok.producer_id, ok.producer_epoch) == (E.none, 7, 3)


def test_end_txn_speaks_tv2_from_v5_and_answers_the_next_epoch() -> None:
    txns = _Txns()
    ended = _exchange(
        _Services(txns),
        EndTxnV5(transactional_id="x", producer_id=7, producer_epoch=3, committed=True),
    )
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (E.none, 7, 4)
    _exchange(
        _Services(txns),
        EndTxnV4(transactional_id="x", producer_id=7, producer_epoch=3, committed=False),
    )
    assert [c[3] for c in txns.calls] == [TransactionVersion.TV_2, TransactionVersion.TV_0]
    assert [c[2] for c in txns.calls] == [True, False]
    old = _exchange(
        _Services(_Txns(E.producer_fenced)),
        EndTxnV1(transactional_id="x", producer_id=7, producer_epoch=3, committed=True),
    )
    assert old.error_code == E.invalid_producer_epoch


def test_add_offsets_names_the_groups_offsets_partition() -> None:
    txns = _Txns(E.producer_fenced)
    answer = _exchange(
        _Services(txns),
        AddOffsetsV1(transactional_id="x", producer_id=7, producer_epoch=3, group_id="g"),
    )
    assert answer.error_code == E.invalid_producer_epoch  # v1: PRODUCER_FENCED's old name
    assert txns.calls == [("add", "x", [GROUP_PARTITION], TransactionVersion.TV_0)]


def test_add_partitions_fails_the_whole_transaction_on_an_unknown_partition() -> None:
    txns = _Txns()
    answer = _exchange(
        _Services(txns),
        apt3.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="x",
            v3_and_below_producer_id=7,
            v3_and_below_producer_epoch=3,
            v3_and_below_topics=(
                apt3.AddPartitionsToTxnTopic(name=TOPIC, partitions=(0, 5)),
                apt3.AddPartitionsToTxnTopic(name="nope", partitions=(0,)),
            ),
        ),
    )
    got = {
        (t.name, p.partition_index): p.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for p in t.results_by_partition
    }
    assert got == {
        (TOPIC, 0): E.operation_not_attempted,
        (TOPIC, 5): E.unknown_topic_or_partition,
        ("nope", 0): E.unknown_topic_or_partition,
    }
    assert txns.calls == []


def test_add_partitions_v4_batches_and_verifies() -> None:
    txns = _Txns(E.transaction_abortable)
    answer = _exchange(
        _Services(txns),
        apt4.AddPartitionsToTxnRequest(
            transactions=tuple(
                apt4.AddPartitionsToTxnTransaction(
                    transactional_id=tid,
                    producer_id=7,
                    producer_epoch=3,
                    verify_only=verify,
                    topics=(apt4.AddPartitionsToTxnTopic(name=TOPIC, partitions=(0,)),),
                )
                for tid, verify in (("a", True), ("b", False))
            )
        ),
    )
    assert answer.error_code == E.none
    assert [
        (r.transactional_id, r.topic_results[0].results_by_partition[0].partition_error_code)
        for r in answer.results_by_transaction
    ] == [("a", E.transaction_abortable), ("b", E.transaction_abortable)]
    assert sorted(c[:2] for c in txns.calls) == [("add", "b"), ("verify", "a")]


def _offsets(module: Any) -> Any:
    partition = module.TxnOffsetCommitRequestPartition
    fields = {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}
    if "committed_leader_epoch" in partition.__dataclass_fields__:
        fields["committed_leader_epoch"] = -1
    return (module.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=(partition(**fields),)),)


def _commit(module: Any, txns: _Txns) -> tuple[Any, _Services]:
    services = _Services(txns)
    extra: dict[str, Any] = {}
    if "generation_id" in module.TxnOffsetCommitRequest.__dataclass_fields__:
        extra = {"generation_id": -1, "member_id": "", "group_instance_id": None}
    answer = _exchange(
        services,
        module.TxnOffsetCommitRequest(
            transactional_id="x",
            group_id="g",
            producer_id=7,
            producer_epoch=3,
            topics=_offsets(module),
            **extra,
        ),
    )
    return answer.topics[0].partitions[0].error_code, services


def test_txn_offset_commit_adds_the_offsets_partition_from_v5_and_verifies_before() -> None:
    txns = _Txns()
    error, services = _commit(toc5, txns)
    assert error == E.none
    assert txns.calls == [("add", "x", [GROUP_PARTITION], TransactionVersion.TV_2)]
    assert services.groups.calls == [("g", 7, GROUP_PARTITION[1], 1)]
    txns = _Txns()
    assert _commit(toc3, txns)[0] == E.none
    assert txns.calls == [("verify", "x", [GROUP_PARTITION])]


def test_txn_offset_commit_translates_a_refused_verification() -> None:
    # The coordinator busy ending the last transaction: retriable for the producer.
    error, services = _commit(toc3, _Txns(E.concurrent_transactions))
    assert error == E.coordinator_not_available and services.groups.calls == []
    assert _commit(toc3, _Txns(E.producer_fenced))[0] == E.invalid_producer_epoch
    # Not added to the transaction (AddOffsetsToTxn never came).
    assert _commit(toc1, _Txns(E.transaction_abortable))[0] == E.invalid_txn_state
