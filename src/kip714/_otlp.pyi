"""Typing stub for the native OTLP MetricsData decoder (kip714._otlp)."""

from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Literal, overload

import pyarrow as pa
from typing_extensions import Buffer

from ._enums import ErrorCode

__all__ = [
    "COLUMNS",
    "MAX_AMPLIFIED_BYTES",
    "MAX_ROWS",
    "MetricsAccumulator",
    "decode_metrics",
    "decode_metrics_batch",
    "output_schema",
]

COLUMNS: Final[tuple[str, ...]]  # == kip714.otlp.schema.COLUMNS
MAX_ROWS: Final[int]  # 10_000_000 data points per payload
MAX_AMPLIFIED_BYTES: Final[int]  # 2**30: metric/scope/resource bytes copied onto a payload's rows

LabelValue = str | int | None
Labels = Mapping[str, LabelValue]

def decode_metrics(
    otlp_bytes: Buffer,
    labels: Labels | None = None,
    *,
    max_rows: int = ...,
    max_amplified_bytes: int = ...,
) -> pa.Table:
    """One row per data point: the COLUMNS, then one constant column per label (str → string,
    int → int64). Raises kip714.errors.CorruptPayloadError (INVALID_RECORD) for bytes upb refuses
    and for payloads over the limits."""

@overload
def decode_metrics_batch(
    payloads: Iterable[Buffer | None],
    labels: Labels | Sequence[Labels | None] | None = None,
    errors: Literal["raise"] = "raise",
    *,
    max_rows: int = ...,
    max_amplified_bytes: int = ...,
) -> pa.Table: ...
@overload
def decode_metrics_batch(
    payloads: Iterable[Buffer | None],
    labels: Labels | Sequence[Labels | None] | None = None,
    *,
    errors: Literal["collect"],
    max_rows: int = ...,
    max_amplified_bytes: int = ...,
) -> tuple[pa.Table, list[tuple[int, ErrorCode, str]]]: ...
@overload
def decode_metrics_batch(
    payloads: Iterable[Buffer | None],
    labels: Labels | Sequence[Labels | None] | None,
    errors: Literal["collect"],
    *,
    max_rows: int = ...,
    max_amplified_bytes: int = ...,
) -> tuple[pa.Table, list[tuple[int, ErrorCode, str]]]: ...

class MetricsAccumulator:
    """Payloads appended one by one, walked at once into shared native columns; one table per batch:
    exactly what decode_metrics_batch returns for the batch's payloads and labels."""

    def __init__(
        self,
        max_payloads: int = 256,
        *,
        max_delay_s: float | None = None,
        max_rows: int = ...,
        max_amplified_bytes: int = ...,
    ) -> None: ...
    @property
    def max_payloads(self) -> int: ...
    @property
    def max_delay_s(self) -> float | None: ...
    @property
    def rows(self) -> int: ...
    def __len__(self) -> int: ...
    def append(self, payload: Buffer, labels: Labels | None = None) -> pa.Table | None:
        """Walk one payload (CorruptPayloadError if it is not OTLP); the batch's table when it is complete."""
    def flush(self) -> pa.Table:
        """The table of every payload appended since the last one; a new batch starts."""
    def flush_with_layouts(self) -> tuple[pa.Table, list[int]]:
        """flush(), and each payload's layout (equal exactly when their rows identify the same series)."""
    @property
    def last_layout(self) -> int | None:
        """The layout of the payload appended last (None while the batch is empty)."""
    def flush_values(self) -> tuple[list[int], array[int], array[float]]:
        """A new batch without a table: each payload's layout and row count, every row's value (NaN: null)."""

def output_schema(labels: Labels | None = None, *, batch: bool = False) -> pa.Schema:
    """The schema decode_metrics (or, with batch=True, decode_metrics_batch) returns for these labels."""
