"""What DescribeGroups and ConsumerGroupDescribe show of a group: plain values, no group
objects, so a node can pass them to another (services/group_wire.py)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from zonegate.coordinator.classic import ClassicGroup
from zonegate.coordinator.consumer_group import ConsumerGroup, Parts
from zonegate.metastore.models import TopicInfo

# (topic id, topic name, partitions) of an assignment, topics in id order
Assignment = tuple[tuple[uuid.UUID, str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ClassicMemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class ClassicGroupDescription:
    """A classic group as DescribeGroups shows it. `group_type` is what the group is
    ("" when there is no such group)."""

    error: ErrorCode
    group_type: str = ""
    state: str = "Dead"
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[ClassicMemberDescription, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerMemberDescription:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[ConsumerMemberDescription, ...] = field(default_factory=tuple)


def describe_classic(group: object | None) -> ClassicGroupDescription:
    """A loaded group (or None) as DescribeGroups shows a classic group: members'
    metadata and assignments only while the group is stable, as Kafka shows them."""
    if group is None:
        return ClassicGroupDescription(ErrorCode.group_id_not_found)
    if not isinstance(group, ClassicGroup):
        return ClassicGroupDescription(
            ErrorCode.group_id_not_found, str(getattr(group, "group_type", ""))
        )
    stable = group.state_name == "Stable"
    protocol = group.protocol_name or ""
    return ClassicGroupDescription(
        ErrorCode.none,
        group.group_type,
        group.state_name,
        group.protocol_type or "",
        protocol if stable else "",
        tuple(
            ClassicMemberDescription(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.metadata_for(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ),
    )


def describe_consumer(
    group: ConsumerGroup, topic_by_id: Callable[[uuid.UUID], TopicInfo | None]
) -> ConsumerGroupDescription:
    """A KIP-848 group as ConsumerGroupDescribe shows it; topics the group no longer
    names are looked up by id in the cluster's catalog."""

    def name(tid: uuid.UUID) -> str:
        known = group.topic_name(tid)
        if known is None:
            info = topic_by_id(tid)
            known = info.name if info is not None else ""
        return known

    def assignment(parts: Parts) -> Assignment:
        return tuple(
            (tid, name(tid), tuple(sorted(ps)))
            for tid, ps in sorted(parts.items(), key=lambda kv: str(kv[0]))
        )

    return ConsumerGroupDescription(
        group.group_id,
        ErrorCode.none,
        None,
        group.state_name,
        group.group_epoch,
        group.assignment_epoch,
        group.preferred_assignor(),
        tuple(
            ConsumerMemberDescription(
                m.member_id,
                m.instance_id,
                m.rack_id,
                m.epoch,
                m.client_id,
                m.client_host,
                m.subscribed_topic_names,
                m.subscribed_topic_regex,
                assignment(m.assigned),
                assignment(group.target.get(m.member_id, {})),
            )
            for m in group.members.values()
        ),
    )
