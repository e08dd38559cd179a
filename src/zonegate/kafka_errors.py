"""Kafka's error codes in one table: each code's name, whether Kafka calls it
retriable, and what it means (franz-go's `kerr` is the model).

Every member of kio's `ErrorCode` (Kafka 3.9 and 4.x) has a row. `retriable` is
Kafka's own flag, not ours: true exactly when the exception that Kafka's
`org.apache.kafka.common.protocol.Errors` maps the code to extends
`RetriableException`, so a Kafka client retries it by itself; the descriptions are
Kafka's. Every layer asks this table instead of keeping its own lists of codes, and
the answers zonegate chooses for a condition a client should wait out are named
at the end, so that tests check each is one a client retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from kio.schema.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class KafkaErrorInfo:
    code: ErrorCode
    retriable: bool  # a Kafka client retries it by itself
    description: str  # Kafka's; empty for NONE

    @property
    def name(self) -> str:
        """Kafka's name of the code, as clients print it: `NOT_LEADER_OR_FOLLOWER`."""
        return self.code.name.upper()


def _row(code: ErrorCode, retriable: bool, description: str) -> tuple[ErrorCode, KafkaErrorInfo]:
    return code, KafkaErrorInfo(code, retriable, description)


# Flags: Kafka 4.0's Errors.java, each code's exception class followed up to
# RetriableException or not (and the classes of codes 129-133 one by one); descriptions:
# Kafka's, as kio carries them. Hand-wrapped: one row per code, read as a table.
# fmt: off
KAFKA_ERRORS: Final[Mapping[ErrorCode, KafkaErrorInfo]] = MappingProxyType(dict((
    _row(ErrorCode.unknown_server_error, False, "The server experienced an unexpected error "
         "when processing the request."),
    _row(ErrorCode.none, False, ""),
    _row(ErrorCode.offset_out_of_range, False, "The requested offset is not within the range "
         "of offsets maintained by the server."),
    _row(ErrorCode.corrupt_message, True, "This message has failed its CRC checksum, exceeds "
         "the valid size, has a null key for a compacted topic, or is otherwise corrupt."),
    _row(ErrorCode.unknown_topic_or_partition, True, "This server does not host this "
         "topic-partition."),
    _row(ErrorCode.invalid_fetch_size, False, "The requested fetch size is invalid."),
    _row(ErrorCode.leader_not_available, True, "There is no leader for this topic-partition as "
         "we are in the middle of a leadership election."),
    _row(ErrorCode.not_leader_or_follower, True, "For requests intended only for the leader, "
         "this error indicates that the broker is not the current leader. For requests "
         "intended for any replica, this error indicates that the broker is not a replica of "
         "the topic partition."),
    _row(ErrorCode.request_timed_out, True, "The request timed out."),
    _row(ErrorCode.broker_not_available, False, "The broker is not available."),
    _row(ErrorCode.replica_not_available, True, "The replica is not available for the "
         "requested topic-partition. Produce/Fetch requests and other requests intended only "
         "for the leader or follower return NOT_LEADER_OR_FOLLOWER if the broker is not a "
         "replica of the topic-partition."),
    _row(ErrorCode.message_too_large, False, "The request included a message larger than the "
         "max message size the server will accept."),
    _row(ErrorCode.stale_controller_epoch, False, "The controller moved to another broker."),
    _row(ErrorCode.offset_metadata_too_large, False, "The metadata field of the offset request "
         "was too large."),
    _row(ErrorCode.network_exception, True, "The server disconnected before a response was "
         "received."),
    _row(ErrorCode.coordinator_load_in_progress, True, "The coordinator is loading and hence "
         "can't process requests."),
    _row(ErrorCode.coordinator_not_available, True, "The coordinator is not available."),
    _row(ErrorCode.not_coordinator, True, "This is not the correct coordinator."),
    _row(ErrorCode.invalid_topic_exception, False, "The request attempted to perform an "
         "operation on an invalid topic."),
    _row(ErrorCode.record_list_too_large, False, "The request included message batch larger "
         "than the configured segment size on the server."),
    _row(ErrorCode.not_enough_replicas, True, "Messages are rejected since there are fewer "
         "in-sync replicas than required."),
    _row(ErrorCode.not_enough_replicas_after_append, True, "Messages are written to the log, "
         "but to fewer in-sync replicas than required."),
    _row(ErrorCode.invalid_required_acks, False, "Produce request specified an invalid value "
         "for required acks."),
    _row(ErrorCode.illegal_generation, False, "Specified group generation id is not valid."),
    _row(ErrorCode.inconsistent_group_protocol, False, "The group member's supported protocols "
         "are incompatible with those of existing members or first group member tried to join "
         "with empty protocol type or empty protocol list."),
    _row(ErrorCode.invalid_group_id, False, "The group id is invalid."),
    _row(ErrorCode.unknown_member_id, False, "The coordinator is not aware of this member."),
    _row(ErrorCode.invalid_session_timeout, False, "The session timeout is not within the "
         "range allowed by the broker (as configured by group.min.session.timeout.ms and "
         "group.max.session.timeout.ms)."),
    _row(ErrorCode.rebalance_in_progress, False, "The group is rebalancing, so a rejoin is "
         "needed."),
    _row(ErrorCode.invalid_commit_offset_size, False, "The committing offset data size is not "
         "valid."),
    _row(ErrorCode.topic_authorization_failed, False, "Topic authorization failed."),
    _row(ErrorCode.group_authorization_failed, False, "Group authorization failed."),
    _row(ErrorCode.cluster_authorization_failed, False, "Cluster authorization failed."),
    _row(ErrorCode.invalid_timestamp, False, "The timestamp of the message is out of "
         "acceptable range."),
    _row(ErrorCode.unsupported_sasl_mechanism, False, "The broker does not support the "
         "requested SASL mechanism."),
    _row(ErrorCode.illegal_sasl_state, False, "Request is not valid given the current SASL "
         "state."),
    _row(ErrorCode.unsupported_version, False, "The version of API is not supported."),
    _row(ErrorCode.topic_already_exists, False, "Topic with this name already exists."),
    _row(ErrorCode.invalid_partitions, False, "Number of partitions is below 1."),
    _row(ErrorCode.invalid_replication_factor, False, "Replication factor is below 1 or larger "
         "than the number of available brokers."),
    _row(ErrorCode.invalid_replica_assignment, False, "Replica assignment is invalid."),
    _row(ErrorCode.invalid_config, False, "Configuration is invalid."),
    _row(ErrorCode.not_controller, True, "This is not the correct controller for this cluster."),
    _row(ErrorCode.invalid_request, False, "This most likely occurs because of a request being "
         "malformed by the client library or the message was sent to an incompatible broker. "
         "See the broker logs for more details."),
    _row(ErrorCode.unsupported_for_message_format, False, "The message format version on the "
         "broker does not support the request."),
    _row(ErrorCode.policy_violation, False, "Request parameters do not satisfy the configured "
         "policy."),
    _row(ErrorCode.out_of_order_sequence_number, False, "The broker received an out of order "
         "sequence number."),
    _row(ErrorCode.duplicate_sequence_number, False, "The broker received a duplicate sequence "
         "number."),
    _row(ErrorCode.invalid_producer_epoch, False, "Producer attempted to produce with an old "
         "epoch."),
    _row(ErrorCode.invalid_txn_state, False, "The producer attempted a transactional operation "
         "in an invalid state."),
    _row(ErrorCode.invalid_producer_id_mapping, False, "The producer attempted to use a "
         "producer id which is not currently assigned to its transactional id."),
    _row(ErrorCode.invalid_transaction_timeout, False, "The transaction timeout is larger than "
         "the maximum value allowed by the broker (as configured by "
         "transaction.max.timeout.ms)."),
    _row(ErrorCode.concurrent_transactions, True, "The producer attempted to update a "
         "transaction while another concurrent operation on the same transaction was ongoing."),
    _row(ErrorCode.transaction_coordinator_fenced, False, "Indicates that the transaction "
         "coordinator sending a WriteTxnMarker is no longer the current coordinator for a "
         "given producer."),
    _row(ErrorCode.transactional_id_authorization_failed, False, "Transactional Id "
         "authorization failed."),
    _row(ErrorCode.security_disabled, False, "Security features are disabled."),
    _row(ErrorCode.operation_not_attempted, False, "The broker did not attempt to execute this "
         "operation. This may happen for batched RPCs where some operations in the batch "
         "failed, causing the broker to respond without trying the rest."),
    _row(ErrorCode.kafka_storage_error, True, "Disk error when trying to access log file on "
         "the disk."),
    _row(ErrorCode.log_dir_not_found, False, "The user-specified log directory is not found in "
         "the broker config."),
    _row(ErrorCode.sasl_authentication_failed, False, "SASL Authentication failed."),
    _row(ErrorCode.unknown_producer_id, False, "This exception is raised by the broker if it "
         "could not locate the producer metadata associated with the producerId in question. "
         "This could happen if, for instance, the producer's records were deleted because "
         "their retention time had elapsed. Once the last records of the producerId are "
         "removed, the producer's metadata is removed from the broker, and future appends by "
         "the producer will return this exception."),
    _row(ErrorCode.reassignment_in_progress, False, "A partition reassignment is in progress."),
    _row(ErrorCode.delegation_token_auth_disabled, False, "Delegation Token feature is not "
         "enabled."),
    _row(ErrorCode.delegation_token_not_found, False, "Delegation Token is not found on "
         "server."),
    _row(ErrorCode.delegation_token_owner_mismatch, False, "Specified Principal is not valid "
         "Owner/Renewer."),
    _row(ErrorCode.delegation_token_request_not_allowed, False, "Delegation Token requests are "
         "not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated "
         "channels."),
    _row(ErrorCode.delegation_token_authorization_failed, False, "Delegation Token "
         "authorization failed."),
    _row(ErrorCode.delegation_token_expired, False, "Delegation Token is expired."),
    _row(ErrorCode.invalid_principal_type, False, "Supplied principalType is not supported."),
    _row(ErrorCode.non_empty_group, False, "The group is not empty."),
    _row(ErrorCode.group_id_not_found, False, "The group id does not exist."),
    _row(ErrorCode.fetch_session_id_not_found, True, "The fetch session ID was not found."),
    _row(ErrorCode.invalid_fetch_session_epoch, True, "The fetch session epoch is invalid."),
    _row(ErrorCode.listener_not_found, True, "There is no listener on the leader broker that "
         "matches the listener on which metadata request was processed."),
    _row(ErrorCode.topic_deletion_disabled, False, "Topic deletion is disabled."),
    _row(ErrorCode.fenced_leader_epoch, True, "The leader epoch in the request is older than "
         "the epoch on the broker."),
    _row(ErrorCode.unknown_leader_epoch, True, "The leader epoch in the request is newer than "
         "the epoch on the broker."),
    _row(ErrorCode.unsupported_compression_type, False, "The requesting client does not "
         "support the compression type of given partition."),
    _row(ErrorCode.stale_broker_epoch, False, "Broker epoch has changed."),
    _row(ErrorCode.offset_not_available, True, "The leader high watermark has not caught up "
         "from a recent leader election so the offsets cannot be guaranteed to be "
         "monotonically increasing."),
    _row(ErrorCode.member_id_required, False, "The group member needs to have a valid member "
         "id before actually entering a consumer group."),
    _row(ErrorCode.preferred_leader_not_available, True, "The preferred leader was not "
         "available."),
    _row(ErrorCode.group_max_size_reached, False, "The group has reached its maximum size."),
    _row(ErrorCode.fenced_instance_id, False, "The broker rejected this static consumer since "
         "another consumer with the same group.instance.id has registered with a different "
         "member.id."),
    _row(ErrorCode.eligible_leaders_not_available, True, "Eligible topic partition leaders are "
         "not available."),
    _row(ErrorCode.election_not_needed, True, "Leader election not needed for topic partition."),
    _row(ErrorCode.no_reassignment_in_progress, False, "No partition reassignment is in "
         "progress."),
    _row(ErrorCode.group_subscribed_to_topic, False, "Deleting offsets of a topic is forbidden "
         "while the consumer group is actively subscribed to it."),
    _row(ErrorCode.invalid_record, False, "This record has failed the validation on broker and "
         "hence will be rejected."),
    _row(ErrorCode.unstable_offset_commit, True, "There are unstable offsets that need to be "
         "cleared."),
    _row(ErrorCode.throttling_quota_exceeded, True, "The throttling quota has been exceeded."),
    _row(ErrorCode.producer_fenced, False, "There is a newer producer with the same "
         "transactionalId which fences the current one."),
    _row(ErrorCode.resource_not_found, False, "A request illegally referred to a resource that "
         "does not exist."),
    _row(ErrorCode.duplicate_resource, False, "A request illegally referred to the same "
         "resource twice."),
    _row(ErrorCode.unacceptable_credential, False, "Requested credential would not meet "
         "criteria for acceptability."),
    _row(ErrorCode.inconsistent_voter_set, False, "Indicates that the either the sender or "
         "recipient of a voter-only request is not one of the expected voters."),
    _row(ErrorCode.invalid_update_version, False, "The given update version was invalid."),
    _row(ErrorCode.feature_update_failed, False, "Unable to update finalized features due to "
         "an unexpected server error."),
    _row(ErrorCode.principal_deserialization_failure, False, "Request principal "
         "deserialization failed during forwarding. This indicates an internal error on the "
         "broker cluster security setup."),
    _row(ErrorCode.snapshot_not_found, False, "Requested snapshot was not found."),
    _row(ErrorCode.position_out_of_range, False, "Requested position is not greater than or "
         "equal to zero, and less than the size of the snapshot."),
    _row(ErrorCode.unknown_topic_id, True, "This server does not host this topic ID."),
    _row(ErrorCode.duplicate_broker_registration, False, "This broker ID is already in use."),
    _row(ErrorCode.broker_id_not_registered, False, "The given broker ID was not registered."),
    _row(ErrorCode.inconsistent_topic_id, True, "The log's topic ID did not match the topic ID "
         "in the request."),
    _row(ErrorCode.inconsistent_cluster_id, False, "The clusterId in the request does not "
         "match that found on the server."),
    _row(ErrorCode.transactional_id_not_found, False, "The transactionalId could not be found."),
    _row(ErrorCode.fetch_session_topic_id_error, True, "The fetch session encountered "
         "inconsistent topic ID usage."),
    _row(ErrorCode.ineligible_replica, False, "The new ISR contains at least one ineligible "
         "replica."),
    _row(ErrorCode.new_leader_elected, False, "The AlterPartition request successfully updated "
         "the partition state but the leader has changed."),
    _row(ErrorCode.offset_moved_to_tiered_storage, False, "The requested offset is moved to "
         "tiered storage."),
    _row(ErrorCode.fenced_member_epoch, False, "The member epoch is fenced by the group "
         "coordinator. The member must abandon all its partitions and rejoin."),
    _row(ErrorCode.unreleased_instance_id, False, "The instance ID is still used by another "
         "member in the consumer group. That member must leave first."),
    _row(ErrorCode.unsupported_assignor, False, "The assignor or its version range is not "
         "supported by the consumer group."),
    _row(ErrorCode.stale_member_epoch, False, "The member epoch is stale. The member must "
         "retry after receiving its updated member epoch via the ConsumerGroupHeartbeat API."),
    _row(ErrorCode.mismatched_endpoint_type, False, "The request was sent to an endpoint of "
         "the wrong type."),
    _row(ErrorCode.unsupported_endpoint_type, False, "This endpoint type is not supported yet."),
    _row(ErrorCode.unknown_controller_id, False, "This controller ID is not known."),
    _row(ErrorCode.unknown_subscription_id, False, "Client sent a push telemetry request with "
         "an invalid or outdated subscription ID."),
    _row(ErrorCode.telemetry_too_large, False, "Client sent a push telemetry request larger "
         "than the maximum size the broker will accept."),
    _row(ErrorCode.invalid_registration, False, "The controller has considered the broker "
         "registration to be invalid."),
    _row(ErrorCode.transaction_abortable, False, "The server encountered an error with the "
         "transaction. The client can abort the transaction to continue using this "
         "transactional ID."),
    _row(ErrorCode.invalid_record_state, False, "The record state is invalid. The "
         "acknowledgement of delivery could not be completed."),
    _row(ErrorCode.share_session_not_found, True, "The share session was not found."),
    _row(ErrorCode.invalid_share_session_epoch, True, "The share session epoch is invalid."),
    _row(ErrorCode.fenced_state_epoch, False, "The share coordinator rejected the request "
         "because the share-group state epoch did not match."),
    _row(ErrorCode.invalid_voter_key, False, "The voter key doesn't match the receiving "
         "replica's key."),
    _row(ErrorCode.duplicate_voter, False, "The voter is already part of the set of voters."),
    _row(ErrorCode.voter_not_found, False, "The voter is not part of the set of voters."),
    _row(ErrorCode.invalid_regular_expression, False, "The regular expression is not valid."),
    _row(ErrorCode.rebootstrap_required, False, "Client metadata is stale. The client should "
         "rebootstrap to obtain new metadata."),
    _row(ErrorCode.streams_invalid_topology, False, "The supplied topology is invalid."),
    _row(ErrorCode.streams_invalid_topology_epoch, False, "The supplied topology epoch is "
         "invalid."),
    _row(ErrorCode.streams_topology_fenced, False, "The supplied topology epoch is outdated."),
    _row(ErrorCode.share_session_limit_reached, True, "The limit of share sessions has been "
         "reached."),
)))
# fmt: on


def error_info(code: ErrorCode) -> KafkaErrorInfo:
    return KAFKA_ERRORS[code]


def is_retriable(code: ErrorCode) -> bool:
    """Whether a Kafka client retries `code` by itself (Kafka's flag)."""
    return KAFKA_ERRORS[code].retriable


# -- the answers zonegate chooses -------------------------------------------------------

LEADER_MOVED: Final[frozenset[ErrorCode]] = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.unknown_leader_epoch,
    }
)
"""A leader's answers that it does not lead the partition at the epoch asked: the node
sends the batch again to the leader a refreshed catalog names
(leader_forwarder/directory.py). All retriable, so the client may also see them."""

OUTCOME_UNKNOWN: Final = ErrorCode.request_timed_out
"""The answer for a write that may or may not have happened (a call lost after it may
have reached the leader, a commit that failed after it may have landed): Kafka's
answer when the outcome is unknown. Never NOT_LEADER_OR_FOLLOWER or
KAFKA_STORAGE_ERROR, which clients take to mean nothing was written
(leader_forwarder/directory.py says why that matters)."""
