from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FROM_OFFSET: _ClassVar[ReadMode]
    FROM_TIMESTAMP: _ClassVar[ReadMode]
    MAX_TIMESTAMP: _ClassVar[ReadMode]
    WATERMARKS: _ClassVar[ReadMode]
    PRODUCERS: _ClassVar[ReadMode]
FROM_OFFSET: ReadMode
FROM_TIMESTAMP: ReadMode
MAX_TIMESTAMP: ReadMode
WATERMARKS: ReadMode
PRODUCERS: ReadMode

class BatchSummary(_message.Message):
    __slots__ = ("stream_id", "leader_epoch", "object_index", "position", "length", "record_count", "max_timestamp", "producer_id", "producer_epoch", "base_sequence", "transactional", "control", "coordinator_epoch", "transactional_id", "produce_version")
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    OBJECT_INDEX_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BASE_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_FIELD_NUMBER: _ClassVar[int]
    CONTROL_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    stream_id: int
    leader_epoch: int
    object_index: int
    position: int
    length: int
    record_count: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: int
    coordinator_epoch: int
    transactional_id: str
    produce_version: int
    def __init__(self, stream_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., object_index: _Optional[int] = ..., position: _Optional[int] = ..., length: _Optional[int] = ..., record_count: _Optional[int] = ..., max_timestamp: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., base_sequence: _Optional[int] = ..., transactional: _Optional[bool] = ..., control: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., transactional_id: _Optional[str] = ..., produce_version: _Optional[int] = ...) -> None: ...

class AppendRequest(_message.Message):
    __slots__ = ("object_keys", "batches", "from_node")
    OBJECT_KEYS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    object_keys: _containers.RepeatedScalarFieldContainer[str]
    batches: _containers.RepeatedCompositeFieldContainer[BatchSummary]
    from_node: int
    def __init__(self, object_keys: _Optional[_Iterable[str]] = ..., batches: _Optional[_Iterable[_Union[BatchSummary, _Mapping]]] = ..., from_node: _Optional[int] = ...) -> None: ...

class BatchResult(_message.Message):
    __slots__ = ("error_code", "base_offset", "log_start_offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    base_offset: int
    log_start_offset: int
    def __init__(self, error_code: _Optional[int] = ..., base_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ...) -> None: ...

class AppendResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[BatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[BatchResult, _Mapping]]] = ...) -> None: ...

class ReadIndexRequest(_message.Message):
    __slots__ = ("stream_id", "mode", "offset", "timestamp", "max_bytes", "from_node", "read_committed")
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    READ_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    stream_id: int
    mode: ReadMode
    offset: int
    timestamp: int
    max_bytes: int
    from_node: int
    read_committed: bool
    def __init__(self, stream_id: _Optional[int] = ..., mode: _Optional[_Union[ReadMode, str]] = ..., offset: _Optional[int] = ..., timestamp: _Optional[int] = ..., max_bytes: _Optional[int] = ..., from_node: _Optional[int] = ..., read_committed: _Optional[bool] = ...) -> None: ...

class IndexEntry(_message.Message):
    __slots__ = ("base_offset", "last_offset", "object_key", "position", "length", "max_timestamp", "append_ms")
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    OBJECT_KEY_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    APPEND_MS_FIELD_NUMBER: _ClassVar[int]
    base_offset: int
    last_offset: int
    object_key: str
    position: int
    length: int
    max_timestamp: int
    append_ms: int
    def __init__(self, base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., object_key: _Optional[str] = ..., position: _Optional[int] = ..., length: _Optional[int] = ..., max_timestamp: _Optional[int] = ..., append_ms: _Optional[int] = ...) -> None: ...

class ReadIndexResponse(_message.Message):
    __slots__ = ("error_code", "entries", "high_watermark", "log_start_offset", "leader_epoch", "last_stable_offset", "aborted", "producers")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ABORTED_FIELD_NUMBER: _ClassVar[int]
    PRODUCERS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    entries: _containers.RepeatedCompositeFieldContainer[IndexEntry]
    high_watermark: int
    log_start_offset: int
    leader_epoch: int
    last_stable_offset: int
    aborted: _containers.RepeatedCompositeFieldContainer[AbortedRange]
    producers: _containers.RepeatedCompositeFieldContainer[ProducerState]
    def __init__(self, error_code: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[IndexEntry, _Mapping]]] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., aborted: _Optional[_Iterable[_Union[AbortedRange, _Mapping]]] = ..., producers: _Optional[_Iterable[_Union[ProducerState, _Mapping]]] = ...) -> None: ...

class ProducerState(_message.Message):
    __slots__ = ("producer_id", "epoch", "last_sequence", "last_timestamp", "coordinator_epoch", "txn_start_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TXN_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    txn_start_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., epoch: _Optional[int] = ..., last_sequence: _Optional[int] = ..., last_timestamp: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., txn_start_offset: _Optional[int] = ...) -> None: ...

class AbortedRange(_message.Message):
    __slots__ = ("producer_id", "first_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    first_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("stream_ids", "from_node")
    STREAM_IDS_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    stream_ids: _containers.RepeatedScalarFieldContainer[int]
    from_node: int
    def __init__(self, stream_ids: _Optional[_Iterable[int]] = ..., from_node: _Optional[int] = ...) -> None: ...

class WatchEvent(_message.Message):
    __slots__ = ("stream_id", "high_watermark")
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    stream_id: int
    high_watermark: int
    def __init__(self, stream_id: _Optional[int] = ..., high_watermark: _Optional[int] = ...) -> None: ...

class GroupCallRequest(_message.Message):
    __slots__ = ("from_node", "payload", "principal")
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    from_node: int
    payload: bytes
    principal: str
    def __init__(self, from_node: _Optional[int] = ..., payload: _Optional[bytes] = ..., principal: _Optional[str] = ...) -> None: ...

class GroupCallResponse(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class TxnCallRequest(_message.Message):
    __slots__ = ("from_node", "payload", "principal")
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    from_node: int
    payload: bytes
    principal: str
    def __init__(self, from_node: _Optional[int] = ..., payload: _Optional[bytes] = ..., principal: _Optional[str] = ...) -> None: ...

class TxnCallResponse(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    def __init__(self, payload: _Optional[bytes] = ...) -> None: ...

class DeleteRecordsRequest(_message.Message):
    __slots__ = ("stream_id", "offset", "from_node", "principal")
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    stream_id: int
    offset: int
    from_node: int
    principal: str
    def __init__(self, stream_id: _Optional[int] = ..., offset: _Optional[int] = ..., from_node: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...

class DeleteRecordsResponse(_message.Message):
    __slots__ = ("error_code", "log_start_offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    log_start_offset: int
    def __init__(self, error_code: _Optional[int] = ..., log_start_offset: _Optional[int] = ...) -> None: ...
