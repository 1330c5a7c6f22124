"""The column contract of one decoded OTLP data point (``kip714.decode_metrics``): one home for the names.

The native decoder (``kip714._otlp``), the protobuf reference (:mod:`kip714.otlp.reference`) and the Spark
schemas all take their column list from here."""

from __future__ import annotations

__all__ = ["COLUMNS", "UNSIGNED_FIELDS"]

#: Columns of one data-point row, in table order.
COLUMNS = (
    "metric",
    "description",
    "unit",
    "kind",
    "temporality",
    "monotonic",
    "attributes",
    "resource",
    "scope_name",
    "scope_version",
    "start_time_unix_nano",
    "time_unix_nano",
    "value",
    "value_int",
    "count",
    "sum",
    "min",
    "max",
    "bucket_counts",
    "explicit_bounds",
    "scale",
    "zero_count",
    "positive_offset",
    "positive_bucket_counts",
    "negative_offset",
    "negative_bucket_counts",
    "quantiles",
    "flags",
    "exemplar_count",
)

#: Row fields that are unsigned 64-bit in OTLP (fixed64 / uint64) but int64 columns in
#: :func:`kip714.decode_metrics`, which refuses a payload where one of them is 2**63 or more.
UNSIGNED_FIELDS = (
    "start_time_unix_nano",
    "time_unix_nano",
    "count",
    "zero_count",
    "bucket_counts",
    "positive_bucket_counts",
    "negative_bucket_counts",
)
