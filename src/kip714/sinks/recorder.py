"""Recording PushTelemetry requests to Parquet (the input of the bulk-decoding pipeline).

Every push — accepted or rejected — becomes one row. Rows are buffered and written as complete Parquet
files (written under a temporary name and renamed, so a reader never sees a half-written file) at least
every ``flush_interval_s`` seconds, sooner when ``max_buffer_bytes`` of payload is buffered, and on
:meth:`close`. Nothing buffered is lost on a clean stop.

Files roll by size and time: each flush writes a part into ``_open/`` (durable at once; Spark, like any
Hadoop reader, skips ``_``-prefixed folders), and when the parts reach ``roll_bytes`` or the oldest is
``roll_interval_s`` old they are merged, one part at a time, into one ``push-<ms>-<pid>-<seq>.parquet`` in
the recording folder. A day of steady traffic is ~1440 files at the defaults (64 MiB / 60 s), not 86 400.
:meth:`close` rolls what is left; parts a crash left behind are rolled when a recorder next opens the
folder (one recorder per folder). ``roll_interval_s=0`` writes every flush straight into the folder.

A recording describes itself: each push row also carries what the endpoint had told that client in its
last GetTelemetrySubscriptions response (``subscribed_metrics``, ``push_interval_ms``,
``delta_temporality``, ``accepted_compression_types``; null when unknown, and absent from recordings made
before they were added — :func:`read_recording` and the Spark readers fill them with nulls). When the
client connection an instance used closes, one row goes to the side table ``_closed/`` (``closed-*.parquet``,
:data:`CLOSED_COLUMNS`): a client that left without a terminating push can be told from one still running.
The leading ``_`` keeps it out of ``spark.read.parquet(DIR)`` and of the push files' glob.
"""

from __future__ import annotations

import logging
import os
import pathlib
import threading
import time
from typing import Any

log = logging.getLogger("kip714.recorder")

#: Default size at which a recording file rolls (``kip714 serve --record-roll-bytes``).
ROLL_BYTES = 64 << 20
#: Default age at which a recording file rolls (``kip714 serve --record-roll-interval``).
ROLL_INTERVAL_S = 60.0
#: Sub-folder of the parts of the file being filled.
OPEN_DIR = "_open"

#: Column order of a recording.
RECORD_COLUMNS = (
    "received_at_ms", "client_instance_id", "client_id", "client_software_name", "client_software_version",
    "client_source_address", "client_source_port", "principal", "node_id", "subscription_id", "terminating",
    "compression_type", "error_code", "payload",
    "subscribed_metrics", "push_interval_ms", "delta_temporality", "accepted_compression_types",
)
#: The subscription columns (what the endpoint told the client): null in recordings made before them.
SUBSCRIPTION_COLUMNS = ("subscribed_metrics", "push_interval_ms", "delta_temporality", "accepted_compression_types")
#: The broker-added label columns of a recording (KIP-714's labels, as :meth:`ClientInfo.labels` names them).
LABEL_COLUMNS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                 "client_source_address", "client_source_port", "principal", "node_id")
#: Sub-directory of a recording holding the connection-closed rows.
CLOSED_DIR = "_closed"
#: Columns of a connection-closed row: when, the labels of the instance that used the connection, and who
#: closed it (``reason``: "client" or "endpoint").
CLOSED_COLUMNS = ("closed_at_ms",) + LABEL_COLUMNS + ("reason",)


def push_row(body, client_info, node_id, error_code: int, received_at_ms: int,
             subscription: Any = None) -> dict[str, Any]:
    """The recording row of one PushTelemetry request (``body``) as a broker with ``node_id`` received it
    from ``client_info`` and answered ``error_code``. ``subscription`` is what the endpoint had told the
    client (a :class:`~kip714.broker.receivers.ClientSubscription` or anything with its attributes, e.g.
    the client's own ``ClientTelemetrySubscription``); ``None`` leaves those columns null."""
    metrics = body.metrics
    row = {
        "received_at_ms": received_at_ms,
        **client_info.labels(node_id, body.client_instance_id_bytes),
        "subscription_id": body.subscription_id,
        "terminating": body.terminating,
        "compression_type": body.compression_type,
        "error_code": error_code,
        "payload": None if metrics is None else bytes(metrics),
    }
    if subscription is not None:
        row["subscribed_metrics"] = list(subscription.requested_metrics)
        row["push_interval_ms"] = subscription.push_interval_ms
        row["delta_temporality"] = bool(subscription.delta_temporality)
        row["accepted_compression_types"] = [int(c) for c in subscription.accepted_compression_types]
    return row


def closed_row(client_info, node_id, client_instance_id, closed_at_ms: int, reason: str = "client") -> dict[str, Any]:
    """The ``_closed`` row of an instance whose client connection closed at ``closed_at_ms``; ``reason``
    is ``"client"`` (the peer closed it) or ``"endpoint"`` (the endpoint did: shutdown, idle, protocol error)."""
    return {"closed_at_ms": closed_at_ms, **client_info.labels(node_id, client_instance_id), "reason": reason}


def record_schema():
    import pyarrow as pa

    return pa.schema([
        ("received_at_ms", pa.int64()),
        ("client_instance_id", pa.string()),
        ("client_id", pa.string()),
        ("client_software_name", pa.string()),
        ("client_software_version", pa.string()),
        ("client_source_address", pa.string()),
        ("client_source_port", pa.string()),
        ("principal", pa.string()),
        ("node_id", pa.string()),
        ("subscription_id", pa.int32()),
        ("terminating", pa.bool_()),
        ("compression_type", pa.int8()),
        ("error_code", pa.int16()),
        ("payload", pa.binary()),
        ("subscribed_metrics", pa.list_(pa.string())),
        ("push_interval_ms", pa.int32()),
        ("delta_temporality", pa.bool_()),
        ("accepted_compression_types", pa.list_(pa.int8())),
    ])


def closed_schema():
    import pyarrow as pa

    return pa.schema([("closed_at_ms", pa.int64())] + [(c, pa.string()) for c in LABEL_COLUMNS]
                     + [("reason", pa.string())])


class ParquetRecorder:
    """Thread-safe buffered writer of push rows into ``directory``; a :class:`kip714.TelemetryReceiver` that
    records every push (``TelemetryBroker(receivers=[recorder])`` or ``broker.add_receiver(recorder)``)."""

    def __init__(self, directory: str | os.PathLike, flush_interval_s: float = 1.0,
                 max_buffer_bytes: int = 32 << 20, compression: str = "zstd", *, roll_bytes: int = ROLL_BYTES,
                 roll_interval_s: float = ROLL_INTERVAL_S) -> None:
        import pyarrow  # noqa: F401  (fail early when pyarrow is missing)

        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.flush_interval_s = flush_interval_s
        self.max_buffer_bytes = max_buffer_bytes
        self.compression = compression
        self.roll_bytes = roll_bytes
        self.roll_interval_s = roll_interval_s
        self._open_dir = self.directory / OPEN_DIR
        self._parts: list[pathlib.Path] = sorted(self._open_dir.glob("part-*.parquet"))  # a crash's leftovers
        self._parts_bytes = sum(p.stat().st_size for p in self._parts)
        self._segment_started = time.monotonic()
        self._roll_lock = threading.Lock()
        self.rows_written = 0
        self.files_written = 0
        self._columns: dict[str, list[Any]] = {c: [] for c in RECORD_COLUMNS}
        self._closed_rows: list[dict[str, Any]] = []
        self.closed_written = 0
        self._buffered_bytes = 0
        self._seq = 0
        self._lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        if self._parts:  # a crash's leftovers become a file of the recording now
            self.roll()
        self._thread = threading.Thread(target=self._flusher, name="kip714-recorder", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ receiver (kip714.TelemetryReceiver)

    def export_metrics(self, context, payload) -> None:
        """Nothing to do: every push, accepted or not, is recorded by :meth:`push_completed`."""

    def push_completed(self, context, request, error_code: int, received_at_ms: int) -> None:
        """Record one PushTelemetry request with the answer it got (the broker calls this for every push)."""
        self.record(push_row(request, context.client_info, context.node_id, error_code, received_at_ms,
                             context.subscription))

    def instance_closed(self, context, client_instance_id, at_ms: int, reason: str = "client") -> None:
        """Record that the client connection ``client_instance_id`` used closed (the broker calls this).
        Closes after the recorder itself closed (the endpoint shutting down) are not recorded."""
        row = closed_row(context.client_info, context.node_id, client_instance_id, at_ms, reason)
        with self._lock:
            if not self._closed:
                self._closed_rows.append(row)

    def record(self, row: dict[str, Any]) -> None:
        """Buffer one row (keys: RECORD_COLUMNS)."""
        flush = False
        with self._lock:
            if self._closed:
                raise RuntimeError("recorder is closed")
            for c in RECORD_COLUMNS:
                self._columns[c].append(row.get(c))
            payload = row.get("payload")
            self._buffered_bytes += len(payload) if payload is not None else 0
            flush = self._buffered_bytes >= self.max_buffer_bytes
        if flush:
            self.flush()

    def pending(self) -> int:
        with self._lock:
            return len(self._columns["received_at_ms"])

    def flush(self) -> int:
        """Write everything buffered as one Parquet file (a part in ``_open/`` while files roll), roll the
        file when it is due; returns the number of rows written."""
        n = self._write_buffered()
        if self._parts and (self._parts_bytes >= self.roll_bytes
                            or time.monotonic() - self._segment_started >= self.roll_interval_s):
            self.roll()
        return n

    def _write_buffered(self) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._flush_closed()
        with self._lock:
            n = len(self._columns["received_at_ms"])
            if not n:
                return 0
            columns, self._columns = self._columns, {c: [] for c in RECORD_COLUMNS}
            self._buffered_bytes = 0
            self._seq += 1
            seq = self._seq
            table = pa.Table.from_pydict(columns, schema=record_schema())
            rolling = self.roll_interval_s > 0
            folder = self._open_dir if rolling else self.directory
            name = f"{'part' if rolling else 'push'}-{int(time.time() * 1000)}-{os.getpid()}-{seq:06d}.parquet"
            folder.mkdir(exist_ok=True)
            tmp = folder / f".{name}.tmp"
            pq.write_table(table, tmp, compression=self.compression)
            os.replace(tmp, folder / name)
            self.rows_written += n
            if rolling:
                if not self._parts:
                    self._segment_started = time.monotonic()
                self._parts.append(folder / name)
                self._parts_bytes += (folder / name).stat().st_size
            else:
                self.files_written += 1
        return n

    def roll(self) -> int:
        """Merge the parts in ``_open/`` into one file of the recording (one part in memory at a time);
        returns the rows it holds."""
        import pyarrow.parquet as pq

        with self._roll_lock:
            with self._lock:
                parts, self._parts, self._parts_bytes = self._parts, [], 0
                self._seq += 1
                seq = self._seq
            if not parts:
                return 0
            name = f"push-{int(time.time() * 1000)}-{os.getpid()}-{seq:06d}.parquet"
            tmp = self.directory / f".{name}.tmp"
            rows = 0
            with pq.ParquetWriter(tmp, record_schema(), compression=self.compression) as writer:
                for part in parts:
                    table = pq.read_table(part)
                    writer.write_table(table.cast(record_schema()))
                    rows += table.num_rows
            os.replace(tmp, self.directory / name)
            for part in parts:
                part.unlink(missing_ok=True)
            with self._lock:
                self.files_written += 1
        return rows

    def _flush_closed(self) -> None:
        """Write the buffered connection-closed rows to ``_closed/`` (after the pushes they follow)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        with self._lock:
            if not self._closed_rows:
                return
            rows, self._closed_rows = self._closed_rows, []
            self._seq += 1
            folder = self.directory / CLOSED_DIR
            folder.mkdir(exist_ok=True)
            name = f"closed-{int(time.time() * 1000)}-{os.getpid()}-{self._seq:06d}.parquet"
            tmp = folder / f".{name}.tmp"
            pq.write_table(pa.Table.from_pylist(rows, schema=closed_schema()), tmp, compression=self.compression)
            os.replace(tmp, folder / name)
            self.closed_written += len(rows)

    def _flusher(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
            except Exception:  # keep recording; the rows stay reported in the log
                log.exception("recorder flush failed")

    def close(self) -> None:
        """Flush what is buffered and stop the background flusher."""
        self._stop.set()
        self._thread.join(5)
        self.flush()
        self.roll()
        self._flush_closed()
        with self._lock:
            self._closed = True


def recording_files(directory: str | os.PathLike) -> list[pathlib.Path]:
    """The push files of a recording: the rolled files, then the parts of the file being filled
    (``_open/``). Side tables (``_closed/``) are not push files."""
    folder = pathlib.Path(directory)
    return sorted(folder.glob("*.parquet")) + sorted((folder / OPEN_DIR).glob("part-*.parquet"))


def read_recording(directory: str | os.PathLike):
    """All rows recorded under ``directory`` as one ``pyarrow.Table`` in :func:`record_schema`: the rolled files,
    then the parts of the file being filled (``_open/``); columns a recording made by an older kip714 lacks
    are null."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = recording_files(directory)
    schema = record_schema()
    if not files:
        return schema.empty_table()
    tables = []
    for f in files:
        t = pq.read_table(f)
        tables.append(pa.table([t.column(c).cast(schema.field(c).type) if c in t.column_names
                                else pa.nulls(t.num_rows, schema.field(c).type) for c in schema.names],
                               schema=schema))
    return pa.concat_tables(tables)


def read_closed(directory: str | os.PathLike):
    """The connection-closed rows of a recording (``_closed/``) as a ``pyarrow.Table`` (empty when the
    recording has none, e.g. one made before they were recorded)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted((pathlib.Path(directory) / CLOSED_DIR).glob("*.parquet"))
    if not files:
        return closed_schema().empty_table()
    return pa.concat_tables([pq.read_table(f) for f in files])
