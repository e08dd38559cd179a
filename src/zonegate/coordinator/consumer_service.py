"""KIP-848 entry points on the group coordinator: ConsumerGroupHeartbeat, ConsumerGroupDescribe.

Finds (or, on a join, creates) the group, refuses a group id that belongs to
the classic protocol as Kafka does, runs the state machine
(`consumer_group.py`) and saves what changed before the answer reveals it.
An empty classic group (offsets only, e.g. from kcat or an old classic
consumer) is taken over by the first KIP-848 member, as Kafka does; its
committed offsets stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from zonegate.coordinator.consumer_group import (
    JOIN_EPOCH,
    ConsumerGroup,
    ConsumerGroupSettings,
    HeartbeatRequest,
    HeartbeatResult,
    Topics,
    validate_request,
)
from zonegate.coordinator.describe import ConsumerGroupDescription, describe_consumer
from zonegate.coordinator.service import GroupCoordinator, now_ms


def _not_found(message: str) -> HeartbeatResult:
    return HeartbeatResult(ErrorCode.group_id_not_found, message)


async def consumer_heartbeat(
    coord: GroupCoordinator,
    group_id: str,
    req: HeartbeatRequest,
    settings: ConsumerGroupSettings,
    topic_names: Callable[[], Iterable[str]],
) -> HeartbeatResult:
    if not group_id:
        return HeartbeatResult(ErrorCode.invalid_request, "GroupId can't be empty.")
    invalid = validate_request(req)
    if invalid is not None:
        return invalid
    group = await coord.get(group_id)
    joining = req.member_epoch == JOIN_EPOCH
    if group is None:
        if not joining:
            return _not_found(f"Consumer group {group_id} not found.")
        group = ConsumerGroup(group_id, coord.config, settings)
        coord.adopt(group)
    elif not isinstance(group, ConsumerGroup):
        if not (joining and group.is_empty()):
            return _not_found(f"Group {group_id} is not a consumer group.")
        group.shutdown()
        group = ConsumerGroup(group_id, coord.config, settings)
        coord.adopt(group)
    group.update_settings(settings)
    result = group.heartbeat(req, Topics(coord.topics, topic_names), now_ms(coord.clock))
    await coord.save(group)
    return result


async def heartbeat(
    coord: GroupCoordinator, group_id: str, req: HeartbeatRequest
) -> HeartbeatResult:
    """ConsumerGroupHeartbeat with the coordinator's own settings, under the group's own
    configs, and topic names."""
    return await consumer_heartbeat(
        coord,
        group_id,
        req,
        coord.consumer_settings.for_group(coord.group_configs(group_id)),
        coord.topic_names,
    )


async def describe(coord: GroupCoordinator, group_id: str) -> ConsumerGroupDescription:
    """ConsumerGroupDescribe of one group."""
    (d,) = await consumer_describe(coord, [group_id])
    if d.group is None:
        return ConsumerGroupDescription(d.group_id, d.error, d.message)
    return describe_consumer(d.group, coord.topic_by_id)


@dataclass(frozen=True, slots=True)
class Described:
    group_id: str
    error: ErrorCode
    message: str | None = None
    group: ConsumerGroup | None = None


async def consumer_describe(coord: GroupCoordinator, group_ids: Sequence[str]) -> list[Described]:
    out: list[Described] = []
    for gid in group_ids:
        if not gid:
            out.append(Described(gid, ErrorCode.invalid_group_id, "GroupId can't be empty."))
            continue
        group = await coord.get(gid)
        if group is None:
            out.append(Described(gid, ErrorCode.group_id_not_found, f"Group {gid} not found."))
        elif not isinstance(group, ConsumerGroup):
            out.append(
                Described(
                    gid, ErrorCode.group_id_not_found, f"Group {gid} is not a consumer group."
                )
            )
        else:
            out.append(Described(gid, ErrorCode.none, None, group))
    return out
