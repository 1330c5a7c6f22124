"""Typing stub for the native per-client-instance state table (kip714._instances)."""

from array import array
from collections.abc import Iterable, Iterator, Sequence
from enum import IntEnum
from typing import Final, Literal, TypedDict, overload

from typing_extensions import Buffer

from ._enums import ErrorCode
from ._protocol import PushTelemetryRequest

class Outcome(IntEnum):
    """The table's answers that are not decisions; negative below -1, so never a Kafka error code."""

    LIVE = 0  # lookup only: live and current (try_* then answer the decision's ErrorCode)
    ABSENT = -2  # absent, expired or evicted: create it, then decide
    STALE = -3  # built from an older subscription version: re-create it, then decide
    RESERVED = -4  # try_push on the reserved ids ZERO/ONE: INVALID_REQUEST, nothing touched

LOOKUP_LIVE: Final = Outcome.LIVE
LOOKUP_ABSENT: Final = Outcome.ABSENT
LOOKUP_STALE: Final = Outcome.STALE
LOOKUP_RESERVED: Final = Outcome.RESERVED
#: try_push_request / create_push_request answer an accepted push with a payload to export with a ticket >= this
TICKET_BASE: Final[int]

class DecisionCounts(TypedDict):
    push: dict[int, int]
    get: dict[int, int]

def java_uuid_hash(id16: Buffer) -> int: ...

class InstanceState(TypedDict):
    instance_id: bytes
    last_get_ms: int
    last_push_ms: int
    push_interval_ms: int
    subscription_id: int
    subscription_version: int
    terminating: bool
    last_known_error: int
    ttl_ms: int
    expires_at_ms: int
    last_request_ms: int

class InstanceTable:
    def __init__(self, max_instances: int = 16384, cache_expiry_ms: int = 60000) -> None: ...
    @property
    def max_instances(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def cache_expiry_ms(self) -> int: ...
    @property
    def now_ms(self) -> int | None: ...
    @property
    def evictions(self) -> int: ...
    @property
    def expirations(self) -> int: ...
    def memory_bytes(self) -> int: ...
    @staticmethod
    def entry_size() -> int: ...
    def __len__(self) -> int: ...
    def expire(self, now_ms: int) -> int: ...
    def clear(self) -> None: ...
    def lookup(
        self, id16: bytes, now_ms: int, subscription_version: int
    ) -> Literal[Outcome.LIVE, Outcome.ABSENT, Outcome.STALE]: ...
    def create(
        self, id16: bytes, now_ms: int, subscription_version: int, subscription_id: int, push_interval_ms: int
    ) -> None: ...
    def decide_get(self, id16: bytes, now_ms: int) -> ErrorCode: ...
    def decide_push(
        self,
        id16: bytes,
        now_ms: int,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        wire_size: int,
        telemetry_max_bytes: int,
    ) -> ErrorCode: ...
    def try_push(
        self,
        id16: bytes,
        now_ms: int,
        subscription_version: int,
        subscription_id: int,
        terminating: bool,
        compression_type: int,
        wire_size: int,
        telemetry_max_bytes: int,
    ) -> ErrorCode | Literal[Outcome.ABSENT, Outcome.STALE, Outcome.RESERVED]: ...
    def try_push_request(
        self,
        body: PushTelemetryRequest,
        now_ms: int,
        subscription_version: int,
        telemetry_max_bytes: int,
    ) -> ErrorCode | Literal[Outcome.ABSENT, Outcome.STALE, Outcome.RESERVED] | int: ...
    def create_push_request(
        self,
        body: PushTelemetryRequest,
        now_ms: int,
        subscription_version: int,
        subscription_id: int,
        push_interval_ms: int,
        telemetry_max_bytes: int,
    ) -> ErrorCode | Literal[Outcome.RESERVED] | int: ...
    def finish_push(self, id16: bytes, ticket: int, code: int) -> bool: ...
    def create_get(
        self, id16: bytes, now_ms: int, subscription_version: int, subscription_id: int, push_interval_ms: int
    ) -> ErrorCode: ...
    def try_get(
        self, id16: bytes, now_ms: int, subscription_version: int
    ) -> ErrorCode | Literal[Outcome.ABSENT, Outcome.STALE]: ...
    def decision_counts(self) -> DecisionCounts: ...
    def set_last_error(self, id16: bytes, code: int) -> None: ...
    def expiry_for(self, push_interval_ms: int) -> int: ...
    def timing(self, id16: bytes) -> tuple[int, int] | None: ...
    def get_state(self, id16: bytes) -> InstanceState | None: ...
    def remove(self, id16: bytes) -> bool: ...
    def decide_pushes(
        self,
        ids: Buffer,
        now_ms: Buffer,
        subscription_ids: Buffer,
        terminating: Buffer,
        compression_types: Buffer,
        wire_sizes: Buffer,
        out: Buffer,
        *,
        subscription_version: int,
        crc_base: int,
        push_interval_ms: int,
        telemetry_max_bytes: int,
    ) -> int: ...
    def decide_gets(
        self,
        ids: Buffer,
        now_ms: Buffer,
        out: Buffer,
        *,
        subscription_version: int,
        crc_base: int,
        push_interval_ms: int,
    ) -> int: ...

class PayloadDecompressor:
    """An accepted push's payload decompressed as the broker must (libzstd directly for one zstd frame, else
    kip714.codec.decompress), at most ``limit`` bytes of output."""

    limit: Final[int]
    loop_exported: Final[int]
    loop_corrupt: Final[int]
    loop_too_large: Final[int]
    def __init__(self, limit: int) -> None: ...
    @property
    def native_zstd(self) -> bool: ...
    def decompress(self, data: Buffer, compression_type: int) -> bytes: ...

#: the columns of the pushes a RequestLoop decided: ids, subscription ids, terminating flags, compression types,
#: codes (a ticket for an accepted push the caller finishes), payloads as received, payloads decompressed,
#: client ids, each answer's error-code offset in the answers buffer, and the pushes whose instance is new to
#: the loop's connection
LoopBatch = tuple[
    list[bytes],
    array[int],
    list[bool],
    list[int],
    array[int],
    PackedBytes,
    list[bytes | None],
    list[str | None],
    array[int],
    array[int],
]

class PackedBytes(Sequence[bytes]):
    """Byte strings stored end to end (Arrow's binary layout): ``data[offsets[k]:offsets[k + 1]]`` is string
    ``k``."""

    @staticmethod
    def of(strings: Iterable[Buffer]) -> PackedBytes: ...
    @staticmethod
    def concat(pieces: Iterable[PackedBytes]) -> PackedBytes: ...
    @property
    def data(self) -> memoryview: ...
    @property
    def offsets(self) -> memoryview: ...
    @property
    def nbytes(self) -> int: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, k: int) -> bytes: ...
    @overload
    def __getitem__(self, k: slice) -> list[bytes]: ...
    def __iter__(self) -> Iterator[bytes]: ...

class RequestLoop:
    """One client connection's request loop on an instance table (one native call per read)."""

    frames: Final[int]
    decides: Final[bool]
    def __init__(self, table: InstanceTable, max_frame_bytes: int, decides: bool = True) -> None: ...
    @property
    def held(self) -> int: ...
    def free(self) -> None: ...
    def feed(
        self,
        data: Buffer | None,
        now_ms: int,
        subscription_version: int,
        zd: PayloadDecompressor,
        decompress_payloads: bool,
        records: int,
    ) -> tuple[bytearray | None, bytes | None, LoopBatch | None]: ...
    def feed_prefix(
        self,
        data: Buffer,
        now_ms: int,
        subscription_version: int,
        zd: PayloadDecompressor,
        decompress_payloads: bool,
        records: int,
    ) -> tuple[bytearray | None, int, LoopBatch | None]: ...
