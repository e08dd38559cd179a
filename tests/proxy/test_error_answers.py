"""Any API's error answer (proxy/error_answers.py): it encodes for every API and version
served, and carries the error where Kafka's getErrorResponse puts it."""

from __future__ import annotations

import dataclasses
import typing
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import ProduceRequest

import zonegate.proxy.handlers  # noqa: F401 (registers the handlers)
from zonegate.proxy.codec import decode_response, encode_response, request_type, response_type
from zonegate.proxy.error_answers import error_answer
from zonegate.proxy.registry import REGISTRY

pytestmark = pytest.mark.unit
ILLEGAL_SASL_STATE = 34


def _request(cls: type[Any]) -> Any:
    """A request with every field empty, zero or null (one of each list's items none)."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        hint = hints[f.name]
        origin = typing.get_origin(hint)
        if origin is tuple:
            values[f.name] = ()
        elif type(None) in typing.get_args(hint):
            values[f.name] = None
        elif hint is bool:
            values[f.name] = False
        elif hint is bytes:
            values[f.name] = b""
        elif hint is uuid.UUID:
            values[f.name] = uuid.UUID(int=0)
        elif isinstance(hint, type) and issubclass(hint, str):
            values[f.name] = hint("")
        elif isinstance(hint, type) and issubclass(hint, int):
            values[f.name] = hint(0)
        else:
            import datetime

            values[f.name] = datetime.timedelta(0)
    return cls(**values)


SERVED = [(r.api_key, v) for r in REGISTRY for v in range(r.min_version, r.max_version + 1)]


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_every_served_api_and_version_has_an_error_answer_that_encodes(
    api_key: int, version: int
) -> None:
    answer = error_answer(api_key, version, _request(request_type(api_key, version)), 34)
    cls = response_type(api_key, version)
    cid, back = decode_response(encode_response(7, api_key, answer)[4:], cls)
    assert cid == 7 and back == answer
    if "error_code" in {f.name for f in dataclasses.fields(cls)}:
        assert back.error_code == ErrorCode.illegal_sasl_state


def test_metadata_answers_each_topic_asked_for_with_the_error() -> None:
    """Kafka's MetadataRequest.getErrorResponse: one topic per topic asked, with the error,
    no partitions; a topic asked for by id gets an empty name."""
    request = MetadataRequest(
        topics=(
            MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="orders"),  # type: ignore[arg-type]
            MetadataRequestTopic(topic_id=uuid.UUID(int=5), name=None),
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    answer = error_answer(3, 12, request, ILLEGAL_SASL_STATE)
    assert [(t.name, t.topic_id, t.error_code, t.partitions) for t in answer.topics] == [
        ("orders", uuid.UUID(int=0), ErrorCode.illegal_sasl_state, ()),
        (None, uuid.UUID(int=5), ErrorCode.illegal_sasl_state, ()),
    ]
    assert answer.brokers == ()


def test_a_top_level_error_code_carries_the_error() -> None:
    from kio.schema.describe_cluster.v0.request import DescribeClusterRequest

    answer = error_answer(
        60, 0, DescribeClusterRequest(include_cluster_authorized_operations=False), 34
    )
    assert answer.error_code == ErrorCode.illegal_sasl_state


def test_produce_answers_each_partition_with_the_error_and_acks_0_nothing() -> None:
    """Kafka's ProduceRequest.getErrorResponse: every partition of the request, with the
    error and offsets unknown (-1); with acks=0, no answer at all."""
    import datetime

    from kio.schema.produce.v9.request import PartitionProduceData, TopicProduceData
    from kio.static.primitive import i16, i32

    from zonegate.proxy.codec import encode_request
    from zonegate.proxy.error_answers import refusal_answer

    def produce(acks: int) -> ProduceRequest:
        return ProduceRequest(
            transactional_id=None,
            acks=i16(acks),
            timeout=datetime.timedelta(seconds=30),
            topic_data=(
                TopicProduceData(
                    name="orders",  # type: ignore[arg-type]
                    partition_data=(
                        PartitionProduceData(index=i32(0), records=b""),
                        PartitionProduceData(index=i32(3), records=None),
                    ),
                ),
            ),
        )

    answer = error_answer(0, 9, produce(-1), ILLEGAL_SASL_STATE)
    (topic,) = answer.responses
    assert topic.name == "orders"
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
        (0, ErrorCode.illegal_sasl_state, -1),
        (3, ErrorCode.illegal_sasl_state, -1),
    ]
    assert refusal_answer(encode_request(5, "raw", produce(0))[4:], ILLEGAL_SASL_STATE) is None
    assert refusal_answer(encode_request(5, "raw", produce(1))[4:], ILLEGAL_SASL_STATE)


def test_a_refused_frame_gets_its_answer_frame_and_an_unknown_api_none() -> None:
    from zonegate.proxy.codec import encode_request
    from zonegate.proxy.error_answers import refusal_answer

    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="orders"),),  # type: ignore[arg-type]
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    frame = encode_request(41, "raw", request)[4:]
    answer = refusal_answer(frame, ILLEGAL_SASL_STATE)
    assert answer is not None
    cid, back = decode_response(answer[4:], response_type(3, 12))
    assert cid == 41 and back.topics[0].error_code == ErrorCode.illegal_sasl_state
    unknown = frame[:2] + b"\x00\x63" + frame[4:]  # Metadata v99
    assert refusal_answer(unknown, ILLEGAL_SASL_STATE) is None
