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

A fleet: each replica (``kip714 proxy --replica-id``) records into a folder of its own, e.g. ``ROOT/r1``,
``ROOT/r2`` (``kip714 pipeline``, ``kip714 report`` and :mod:`kip714.spark` read ``ROOT`` as one recording),
and every push row carries the replica that received it (``kip714_replica``, the recorder's ``replica``;
null in recordings made before it existed). A recorder holds a lock on its folder (``.kip714-recorder.lock``,
a POSIX record lock, released when the recorder closes or its process dies): a second process recording into
the same folder fails at once instead of mixing its files and its crash recovery with the first one's.

Durability: without ``sync`` a part reaches the disk (the page cache) within ``flush_interval_s``, so a
``kill -9`` loses the rows of the last second, pushes whose clients were already told they were accepted.
With ``sync=True`` (``--record-sync``) a commit thread writes the rows as soon as they arrive, as group
commits (the rows that arrived while one commit was in progress form the next), each part fsync'd before
its rename and the folder fsync'd after it (also on roll); :meth:`ParquetRecorder.durable` is the future an
endpoint holds a push's answer on. Every file appears by rename of a complete, flushed temporary file, so
a file is either whole or absent; temporary files a crash left are removed, and an unreadable part (a host
crash without ``sync``) is set aside as ``*.corrupt`` when a recorder next opens the folder.
"""

from __future__ import annotations

import array
import concurrent.futures
import errno
import itertools
import json
import logging
import operator
import os
import pathlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from .._instances import PackedBytes
from ..broker.receivers import ClientSubscription
from ..broker.subscriptions import MATCH_SELECTORS

log = logging.getLogger("kip714.recorder")

#: Default size at which a recording file rolls (``kip714 serve --record-roll-bytes``).
ROLL_BYTES = 64 << 20
#: Default age at which a recording file rolls (``kip714 serve --record-roll-interval``).
ROLL_INTERVAL_S = 60.0
#: Sub-folder of the parts of the file being filled.
OPEN_DIR = "_open"
#: Parquet key-value metadata of a rolled file: the names of the parts merged into it (JSON list), so parts a
#: crash left between the roll's rename and their removal are known as already in the recording.
PARTS_KEY = b"kip714.parts"

#: The broker-added label columns of a recording (KIP-714's labels, as :meth:`ClientInfo.labels` names them):
#: the attributes a subscription matches, then the principal and the broker's node id.
LABEL_COLUMNS = (*MATCH_SELECTORS, "principal", "node_id")
#: The subscription columns (what the endpoint told the client): null in recordings made before them.
SUBSCRIPTION_COLUMNS = ("subscribed_metrics", "push_interval_ms", "delta_temporality", "accepted_compression_types")
#: The column of the replica that received the push (``kip714 proxy --replica-id``): null in recordings made
#: before it, and when the recorder was given none.
REPLICA_COLUMN = "kip714_replica"
#: Column order of a recording.
RECORD_COLUMNS = (
    "received_at_ms",
    *LABEL_COLUMNS,
    "subscription_id",
    "terminating",
    "compression_type",
    "error_code",
    "payload",
    *SUBSCRIPTION_COLUMNS,
    REPLICA_COLUMN,
)
#: The lock file a recorder holds in its folder (hidden: Spark's listing and the push files' glob skip it).
LOCK_FILE = ".kip714-recorder.lock"
#: Sub-directory of a recording holding the connection-closed rows.
CLOSED_DIR = "_closed"
#: Columns of a connection-closed row: when, the labels of the instance that used the connection, and who
#: closed it (``reason``: "client" or "endpoint").
CLOSED_COLUMNS = ("closed_at_ms",) + LABEL_COLUMNS + ("reason",)


def push_row(
    body: Any,
    client_info: Any,
    node_id: int | str,
    error_code: int,
    received_at_ms: int,
    subscription: Any = None,
    replica: str | None = None,
) -> dict[str, Any]:
    """The recording row of one PushTelemetry request (``body``) as a broker with ``node_id`` received it
    from ``client_info`` and answered ``error_code``. ``subscription`` is what the endpoint had told the
    client (a :class:`~kip714.broker.receivers.ClientSubscription` or anything with its attributes, e.g.
    the client's own ``ClientTelemetrySubscription``); ``None`` leaves those columns null. ``replica``: the
    replica that received it (``kip714_replica``; ``None``: the recorder's own)."""
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
        row.update(zip(SUBSCRIPTION_COLUMNS, _subscription_values(subscription)))
    if replica is not None:
        row[REPLICA_COLUMN] = replica
    return row


def closed_row(
    client_info: Any, node_id: int, client_instance_id: Any, closed_at_ms: int, reason: str = "client"
) -> dict[str, Any]:
    """The ``_closed`` row of an instance whose client connection closed at ``closed_at_ms``; ``reason``
    is ``"client"`` (the peer closed it) or ``"endpoint"`` (the endpoint did: shutdown, idle, protocol error)."""
    return {"closed_at_ms": closed_at_ms, **client_info.labels(node_id, client_instance_id), "reason": reason}


def rows_table(rows: list[Any], replica: str | None = None) -> Any:
    """The ``pyarrow.Table`` (:func:`record_schema`) of buffered rows, in order: row dicts (keys:
    RECORD_COLUMNS), and pushes as :meth:`ParquetRecorder.push_completed` buffers them (the fields of
    :func:`push_row`'s arguments, as a tuple or as the columns of many, :class:`_Pushes`) or as the broker hands
    over a read's (a :class:`~kip714.broker.receivers.PushBatch`); the pushes' columns are made here in bulk.
    ``replica`` fills ``kip714_replica`` where a row does not set it."""
    import pyarrow as pa

    if not any(type(r) is dict for r in rows):
        return _push_table(_Pushes.of(rows), replica)
    columns: dict[str, list[Any]] = {c: [] for c in RECORD_COLUMNS}
    for r in rows:
        for row in [r] if type(r) is dict else map(_tuple_row, _Pushes.of([r]).tuples()):
            for c in RECORD_COLUMNS:
                columns[c].append(row.get(c))
    if replica is not None:
        columns[REPLICA_COLUMN] = [replica if v is None else v for v in columns[REPLICA_COLUMN]]
    return pa.Table.from_pydict(columns, schema=record_schema())


class _Payloads:
    """The payloads of buffered pushes, in order, kept as they came: a request loop's
    :class:`~kip714._instances.PackedBytes` whole (one buffer per read), and the payloads given one by one (bytes,
    or None for a null one) in runs, a list each. :meth:`array` makes the Arrow column of them all."""

    __slots__ = ("n", "pieces")

    def __init__(self) -> None:
        self.pieces: list[Any] = []
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[bytes | None]:
        for piece in self.pieces:
            yield from piece

    def append(self, payload: bytes | None) -> None:
        if self.pieces and type(self.pieces[-1]) is list:
            self.pieces[-1].append(payload)
        else:
            self.pieces.append([payload])
        self.n += 1

    def extend(self, payloads: Any) -> None:
        """The payloads of a batch (a ``PackedBytes`` is kept whole; any other sequence is copied), or of another
        ``_Payloads``."""
        if type(payloads) is _Payloads:
            for piece in payloads.pieces:
                self.extend(piece)
        elif type(payloads) is PackedBytes:
            if len(payloads):
                self.pieces.append(payloads)
                self.n += len(payloads)
        else:
            if not (self.pieces and type(self.pieces[-1]) is list):
                self.pieces.append([])
            before = len(self.pieces[-1])
            self.pieces[-1].extend(payloads)
            self.n += len(self.pieces[-1]) - before

    def array(self) -> Any:
        """The ``binary`` column of the payloads: each run of packed reads joined into one pack
        (:func:`_packed_array`), taken by Arrow as it is; each run of single payloads converted by pyarrow."""
        import pyarrow as pa

        arrays: list[Any] = []
        run: list[PackedBytes] = []
        size = 0  # the run's bytes
        for piece in [*self.pieces, None]:
            if type(piece) is PackedBytes:
                if run and size + piece.nbytes > _BINARY_MAX:  # (int32 offsets)
                    arrays.append(_packed_array(run))
                    run, size = [], 0
                run.append(piece)
                size += piece.nbytes
                continue
            if run:
                arrays.append(_packed_array(run))
                run, size = [], 0
            if piece is not None:
                arrays.append(pa.array(piece, pa.binary()))
        if not arrays:
            return pa.array([], pa.binary())
        return arrays[0] if len(arrays) == 1 else pa.chunked_array(arrays, pa.binary())


#: The most bytes one Arrow ``binary`` array holds (its offsets are int32).
_BINARY_MAX = (1 << 31) - 1


def _packed_array(run: list[PackedBytes]) -> Any:
    """One Arrow ``binary`` array of the strings of ``run`` (at most 2 GiB in all): one pack of them all, each
    string copied once from where it lies (a read the pack borrows, or its own buffer), given to Arrow as is."""
    import pyarrow as pa

    packed = run[0] if len(run) == 1 else PackedBytes.concat(run)
    data, offsets = packed.data, packed.offsets
    return pa.Array.from_buffers(pa.binary(), len(packed), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


class _Pushes:
    """Pushes buffered as columns, one entry per push, in the order of a push's tuple (:meth:`add`: when
    received, the instance id's 16 bytes, ClientInfo, node id, SubscriptionId, terminating, compression type,
    error code, payload, subscription). A read's pushes are added by extending each column with the broker's
    own (:meth:`add_batch`), and the columns hold no Python object per push but the subscriptions: the ids
    end to end in one ``bytearray``, the numbers in ``array`` s, the payloads in :class:`_Payloads`, and when
    received, the ClientInfo and the node id as runs (``who``: one ``(received, ClientInfo, node id)`` per run
    of pushes that share them, ``run_lengths`` its pushes; a read is one run). So the request loop's packed
    columns are copied as memory, Arrow takes them as they are, and the collector has one list entry per push
    to walk, not seven."""

    __slots__ = ("codes", "ctypes", "ids", "payloads", "run_lengths", "sids", "subs", "terminating", "who")

    def __init__(self) -> None:
        self.ids = bytearray()
        self.who: list[tuple[int, Any, int | str]] = []
        self.run_lengths = array.array("q")
        self.sids = array.array("i")
        self.terminating = array.array("b")
        self.ctypes = array.array("b")
        self.codes = array.array("q")
        self.payloads = _Payloads()
        self.subs: list[Any] = []

    def __len__(self) -> int:
        return len(self.sids)

    def _run(self, at: int, info: Any, node: int | str, n: int) -> None:
        """``n`` more pushes received at ``at`` of ``info`` on ``node`` (one run with the last when it is theirs
        too)."""
        last = self.who[-1] if self.who else None
        if last is not None and last[1] is info and last[0] == at and last[2] == node:
            self.run_lengths[-1] += n
        else:
            self.who.append((at, info, node))
            self.run_lengths.append(n)

    def add(self, push: tuple[Any, ...]) -> None:
        """One push's tuple."""
        at, id16, info, node, sid, terminating, ctype, code, payload, sub = push
        self.ids += id16
        self._run(at, info, node, 1)
        self.sids.append(sid)
        self.terminating.append(terminating)
        self.ctypes.append(ctype)
        self.codes.append(code)
        self.payloads.append(payload)
        self.subs.append(sub)

    def add_batch(self, batch: Any) -> None:
        """The pushes of a ``PushBatch``."""
        ids = batch.client_instance_ids
        n = len(ids)
        if not n:
            return
        self.ids += b"".join(ids)
        at, infos, node = batch.received_at_ms, batch.client_infos, batch.node_id
        if infos.count(infos[0]) == n:  # one connection: one ClientInfo (the same object, found at once)
            self._run(at, infos[0], node, n)
        else:
            for _, run in itertools.groupby(infos, id):
                same = list(run)
                self._run(at, same[0], node, len(same))
        self.sids.extend(batch.subscription_ids)
        _extend_bytes(self.terminating, batch.terminating, n)
        _extend_bytes(self.ctypes, batch.compression_types, n)
        self.codes.extend(batch.error_codes)
        self.payloads.extend(batch.payloads)
        self.subs.extend(batch.subscriptions)

    def extend(self, other: _Pushes) -> None:
        """The pushes of another ``_Pushes``, after these."""
        self.ids += other.ids
        for (at, info, node), n in zip(other.who, other.run_lengths):
            self._run(at, info, node, n)
        self.sids.extend(other.sids)
        self.terminating.extend(other.terminating)
        self.ctypes.extend(other.ctypes)
        self.codes.extend(other.codes)
        self.payloads.extend(other.payloads)
        self.subs.extend(other.subs)

    @classmethod
    def of(cls, items: list[Any]) -> _Pushes:
        """The pushes of buffered items (tuples, ``PushBatch`` es, ``_Pushes``; no row dicts), in order."""
        if len(items) == 1 and type(items[0]) is cls:
            return items[0]
        out = cls()
        for item in items:
            if type(item) is tuple:
                out.add(item)
            elif type(item) is cls:
                out.extend(item)
            else:
                out.add_batch(item)
        return out

    def tuples(self) -> list[tuple[Any, ...]]:
        """Each push's tuple, as :meth:`add` takes it."""
        who = itertools.chain.from_iterable(itertools.repeat(w, n) for w, n in zip(self.who, self.run_lengths))
        ids = [bytes(self.ids[k : k + 16]) for k in range(0, len(self.ids), 16)]
        return [
            (at, id16, info, node, sid, bool(term), ctype, code, payload, sub)
            for id16, (at, info, node), sid, term, ctype, code, payload, sub in zip(
                ids, who, self.sids, self.terminating, self.ctypes, self.codes, self.payloads, self.subs
            )
        ]


def _extend_bytes(column: array.array[int], values: Any, n: int) -> None:
    """``column`` (an ``array('b')``) extended with the ``n`` ``values`` (ints in -128..127, or bools): when all
    are one value (a read's pushes: not terminating, one compression type), as that byte repeated."""
    if type(values) is list and values.count(values[0]) == n:
        column.frombytes(bytes((values[0] & 0xFF,)) * n)
    else:
        column.extend(values)


def _tuple_row(t: tuple[Any, ...]) -> dict[str, Any]:
    """A buffered push as :func:`push_row` makes its row."""
    at, id16, client_info, node_id, subscription_id, terminating, ctype, error_code, payload, subscription = t
    row = {
        "received_at_ms": at,
        **client_info.labels(node_id, id16),
        "subscription_id": subscription_id,
        "terminating": terminating,
        "compression_type": ctype,
        "error_code": error_code,
        "payload": payload,
    }
    if subscription is not None:
        row.update(zip(SUBSCRIPTION_COLUMNS, _subscription_values(subscription)))
    return row


def _subscription_values(sub: Any) -> tuple[Any, ...]:
    """The subscription columns' values of what the endpoint told a client (``None``: all null)."""
    return _key_values(_subscription_key(sub))


def _subscription_key(sub: Any) -> tuple[Any, ...] | None:
    """What the subscription columns hold of ``sub``, hashable (``None`` for none): equal keys, equal values.
    Every instance has a subscription object of its own (its SubscriptionId is the instance's), but few
    distinct values."""
    if sub is None:
        return None
    return (
        tuple(sub.requested_metrics),
        sub.push_interval_ms,
        bool(sub.delta_temporality),
        tuple(int(c) for c in sub.accepted_compression_types),
    )


#: The fields of a :class:`ClientSubscription` the subscription columns hold, in their order (tuples already:
#: its key).
_SUBSCRIPTION_FIELDS = operator.attrgetter(
    "requested_metrics", "push_interval_ms", "delta_temporality", "accepted_compression_types"
)


def _subscription_keys(subs: list[Any]) -> list[Any]:
    """:func:`_subscription_key` of each of ``subs``, the broker's :class:`ClientSubscription` s (whose fields are
    tuples) read in one ``map``."""
    if set(map(type, subs)) == {ClientSubscription}:
        return list(map(_SUBSCRIPTION_FIELDS, subs))
    return [_subscription_key(sub) for sub in subs]


def _key_values(key: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The subscription columns' values of a :func:`_subscription_key`."""
    if key is None:
        return (None, None, None, None)
    metrics, interval, delta, compression = key
    return (list(metrics), interval, bool(delta), [int(c) for c in compression])


def _groups(keys: Any) -> tuple[Any, Any]:
    """Rows grouped by equal ``keys`` (a numpy array): the first row of each group and each row's group (an
    int32 array), in numpy over the runs of equal neighbours (the pushes of a read share their connection)
    and the runs' keys sorted."""
    import numpy as np

    n = len(keys)
    if not n:
        return np.zeros(0, np.intp), np.zeros(0, np.int32)
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    _, first, run_group = np.unique(keys[starts], return_index=True, return_inverse=True)
    lengths = np.diff(np.append(starts, n))
    return starts[first], np.repeat(run_group.astype(np.int32), lengths)


def _identities(objects: list[Any]) -> Any:
    """The identities (``id``) of ``objects`` as a numpy array: equal for the same object (alive in the list)."""
    import numpy as np

    return np.fromiter(map(id, objects), np.uintp, len(objects))


def _push_table(pushes: _Pushes, replica: str | None = None) -> Any:
    """The table of buffered pushes, column by column: the instance ids base64-encoded in one call, the label
    columns made once per distinct client connection (ClientInfo and node) and the subscription columns once
    per distinct value, each taken for every row by index, the numbers' arrays and the packed payloads given to
    pyarrow as buffers (the rest converted by it, a list each). The same table as ``pa.Table.from_pydict`` of
    their :func:`push_row` rows (tests/test_recorder_rows.py checks it)."""
    import binascii

    import numpy as np
    import pyarrow as pa

    schema = record_schema()
    n = len(pushes)
    # client_instance_id: Kafka's Uuid.toString() (kafka_uuid_string) of every id at once. Each id padded
    # to 18 bytes is 6 whole base64 groups, so the encoding of the padded ids is each one's encoding; the
    # first 22 characters of each are the unpadded text.
    padded = np.zeros((n, 18), dtype=np.uint8)
    if n:
        padded[:, :16] = np.frombuffer(pushes.ids, dtype=np.uint8).reshape(n, 16)
    text = np.frombuffer(binascii.b2a_base64(padded.tobytes(), newline=False), dtype=np.uint8).reshape(n, 24)
    ids_data = np.ascontiguousarray(text[:, :22]).tobytes().translate(_URLSAFE)
    offsets = np.arange(0, 22 * n + 1, 22, dtype=np.int32)
    instance_ids = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(ids_data)])
    # the other labels, once per (ClientInfo, node id) pair: grouped over the runs (a read each), not the pushes
    who, run_lengths = pushes.who, np.frombuffer(pushes.run_lengths, np.int64)
    infos = [w[1] for w in who]
    nodes = [w[2] for w in who]
    _, info_group = _groups(_identities(infos))
    if nodes and nodes.count(nodes[0]) == len(nodes):  # one node: almost always
        who_first, who_group = _groups(info_group)
    else:
        node_first, node_group = _groups(_identities(nodes))
        who_first, who_group = _groups(info_group.astype(np.int64) * len(node_first) + node_group)
    take_who = pa.array(np.repeat(who_group, run_lengths))
    label_values = [infos[k].labels(nodes[k], bytes(16)) for k in who_first.tolist()]
    # the subscription columns, once per distinct value
    subs = pushes.subs
    subs_first, subs_group = _groups(_identities(subs))
    keys = _subscription_keys([subs[k] for k in subs_first.tolist()])
    by_value = {key: k for k, key in enumerate(dict.fromkeys(keys))}
    value_of = np.fromiter(map(by_value.__getitem__, keys), np.int32, len(keys))
    take_subs = pa.array(value_of[subs_group])
    subs_values = [_key_values(key) for key in by_value]

    def per_subscription(name: str, field: int) -> pa.Array:
        return pa.array([v[field] for v in subs_values], schema.field(name).type).take(take_subs)

    columns = {
        "received_at_ms": pa.array(np.repeat(np.fromiter((w[0] for w in who), np.int64, len(who)), run_lengths)),
        "client_instance_id": instance_ids,
        **{
            c: pa.array([labels[c] for labels in label_values], pa.string()).take(take_who)
            for c in LABEL_COLUMNS
            if c != "client_instance_id"
        },
        "subscription_id": pa.array(np.frombuffer(pushes.sids, np.int32), pa.int32()),
        "terminating": pa.array(np.frombuffer(pushes.terminating, np.int8).astype(np.bool_), pa.bool_()),
        "compression_type": pa.array(np.frombuffer(pushes.ctypes, np.int8), pa.int8()),
        "error_code": pa.array(np.frombuffer(pushes.codes, np.int64), pa.int16()),  # (pyarrow checks the range)
        "payload": pushes.payloads.array(),
        **{c: per_subscription(c, k) for k, c in enumerate(SUBSCRIPTION_COLUMNS)},
        REPLICA_COLUMN: pa.repeat(pa.scalar(replica, pa.string()), n),
    }
    return pa.Table.from_arrays([columns[c] for c in RECORD_COLUMNS], schema=schema)


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def _fsync_dir(folder: pathlib.Path) -> None:
    """Make the names in ``folder`` (a rename, a new file, an unlink) durable."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: pathlib.Path, write: Callable[[Any], None], sync: bool) -> None:
    """Create ``path`` through a temporary file that ``write(f)`` fills and that is renamed into place
    (fsync'd first, and the folder after, with ``sync``), so ``path`` is either complete or absent. ``f`` is
    an Arrow file (``pyarrow.OSFile``): Parquet's writes to it do not take the GIL from the event loop, as a
    Python file's would for every page."""
    import pyarrow as pa

    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with pa.OSFile(str(tmp), "wb") as f:
            write(f)
        if sync:
            fd = os.open(tmp, os.O_WRONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        _fsync_dir(path.parent)


def _write_parquet(table: Any, path: pathlib.Path, compression: str, sync: bool) -> None:
    """Write ``table`` to ``path`` as :func:`_write_file` does: complete or absent."""
    import pyarrow.parquet as pq

    _write_file(path, lambda f: pq.write_table(table, f, **_parquet_options(table.schema, compression)), sync)


def _parquet_options(schema: Any, compression: str) -> dict[str, Any]:
    """The Parquet writer's settings of every recording file (``schema``: its columns): ``compression`` for
    every column; statistics (min and max) for every column but the payload, an opaque blob no reader filters
    on (its statistics cost the writer a comparison of two payloads per row). What a reader reads is the same."""
    return {"compression": compression, "write_statistics": [name for name in schema.names if name != "payload"]}


def _file_ms(path: pathlib.Path) -> int:
    """The millisecond stamp in a recording file's name (``push-<ms>-…``, ``part-<ms>-…``), 0 if none."""
    try:
        return int(path.name.split("-")[1])
    except (IndexError, ValueError):
        return 0


def _rolled_parts(directory: pathlib.Path, parts: list[pathlib.Path]) -> set[str]:
    """The names among ``parts`` (files in ``_open/``) that a rolled file of ``directory`` already holds (a
    crash between a roll's rename and the parts' removal); only rolled files named after the oldest part
    are looked at."""
    import pyarrow.parquet as pq

    if not parts:
        return set()
    oldest = min(_file_ms(p) for p in parts)
    covered: set[str] = set()
    for f in directory.glob("push-*.parquet"):
        if _file_ms(f) < oldest:
            continue
        try:
            names = (pq.read_metadata(f).metadata or {}).get(PARTS_KEY)
        except Exception:
            continue
        if names:
            covered.update(json.loads(names))
    return covered & {p.name for p in parts}


def _lock_folder(folder: pathlib.Path, replica: str | None) -> int | None:
    """Lock ``folder`` for one recorder (a POSIX record lock on :data:`LOCK_FILE`, which the kernel releases
    when the process dies; it works on NFS too); returns the lock file's descriptor (None where there is no
    ``fcntl``). A folder another process holds raises InvalidConfigError naming that process."""
    try:
        import fcntl
    except ImportError:  # (Windows) no lock: one recorder per folder is then up to the operator
        return None
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
        os.close(fd)
        from ..errors import InvalidConfigError

        raise InvalidConfigError(
            f"{folder} is being recorded by {holder}: a recording folder takes one recorder; give each "
            "replica a folder of its own (e.g. ROOT/REPLICA)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"pid {os.getpid()}{'' if replica is None else f' (replica {replica})'}\n".encode(), 0)
    return fd


def _readable(path: pathlib.Path) -> bool:
    import pyarrow.parquet as pq

    try:
        pq.read_metadata(path)
        return True
    except Exception:
        return False


def record_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
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
            (REPLICA_COLUMN, pa.string()),
        ]
    )


def closed_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [("closed_at_ms", pa.int64())] + [(c, pa.string()) for c in LABEL_COLUMNS] + [("reason", pa.string())]
    )


class ParquetRecorder:
    """Thread-safe buffered writer of push rows into ``directory``; a :class:`kip714.TelemetryReceiver` that
    records every push (``TelemetryBroker(receivers=[recorder])`` or ``broker.add_receiver(recorder)``).

    ``sync=True``: every row is made durable as soon as possible by a commit thread (group commit; each
    part and the folders fsync'd); :meth:`durable` tells when. Without it rows are written every
    ``flush_interval_s`` and are not fsync'd.

    ``replica``: the name of the replica recording (``kip714_replica`` of every row it writes; ``None``
    leaves it null). The recorder locks ``directory`` for as long as it is open: a folder another process
    is recording into raises :class:`~kip714.errors.InvalidConfigError` (give each replica its own folder)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        flush_interval_s: float = 1.0,
        max_buffer_bytes: int = 32 << 20,
        compression: str = "zstd",
        *,
        roll_bytes: int = ROLL_BYTES,
        roll_interval_s: float = ROLL_INTERVAL_S,
        sync: bool = False,
        replica: str | None = None,
    ) -> None:
        import pyarrow  # noqa: F401  (fail early when pyarrow is missing)

        self.directory = pathlib.Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.replica = replica
        self._lock_fd = _lock_folder(self.directory, replica)  # before any recovery: one recorder per folder
        self.flush_interval_s = flush_interval_s
        self.max_buffer_bytes = max_buffer_bytes
        self.compression = compression
        self.roll_bytes = roll_bytes
        self.roll_interval_s = roll_interval_s
        self.sync = sync
        self._open_dir = self.directory / OPEN_DIR
        if sync and roll_interval_s > 0:
            self._open_dir.mkdir(exist_ok=True)
            _fsync_dir(self.directory)
        self._parts: list[pathlib.Path] = self._recover()  # a crash's leftovers
        self._parts_bytes = sum(p.stat().st_size for p in self._parts)
        self._segment_started = time.monotonic()
        self._roll_lock = threading.Lock()
        self._write_lock = threading.Lock()  # one writer of push parts at a time (commit order)
        self.rows_written = 0
        self.files_written = 0
        #: commits that failed (their rows are not in the recording; with ``sync`` their pushes were not
        #: answered as accepted) and the rows they held
        self.commits_failed = 0
        self.rows_failed = 0
        #: the error of the last write when it failed (None once a write succeeds): readiness reads it
        self.last_error: BaseException | None = None
        #: commits (parts written) so far
        self.commits = 0
        # rows buffered, in arrival order: pushes as columns (_Pushes: the broker's PushBatch of a read,
        # pushes_completed, the request loop's path; a push's fields, push_completed) and row dicts (record());
        # the table's columns are made per part, see rows_table
        self._rows: list[Any] = []
        self._pending = 0  # the rows they hold
        self._closed_rows: list[dict[str, Any]] = []
        self.closed_written = 0
        self._buffered_bytes = 0
        # when the oldest row not yet written arrived (monotonic): buffered, and in the commit being written
        self._oldest_buffered: float | None = None
        self._oldest_writing: float | None = None
        self._seq = 0
        self._lock = threading.Lock()
        self._closed = False
        self._stop = threading.Event()
        # sync: the future of the rows buffered now, and of the rows being written
        self._waiter: concurrent.futures.Future[int] | None = concurrent.futures.Future() if sync else None
        self._inflight: concurrent.futures.Future[int] | None = None
        self._wake = threading.Event()
        if self._parts:  # a crash's leftovers become a file of the recording now
            self.roll()
        self._thread = threading.Thread(target=self._flusher, name="kip714-recorder", daemon=True)
        self._thread.start()
        self._committer = None
        if sync:
            self._committer = threading.Thread(target=self._commit_loop, name="kip714-recorder-commit", daemon=True)
            self._committer.start()

    def _recover(self) -> list[pathlib.Path]:
        """The parts a crash left in ``_open/`` (temporary files it left are removed; an unreadable part,
        possible only after a host crash without ``sync``, is renamed ``*.corrupt`` and logged)."""
        for folder in (self.directory, self._open_dir, self.directory / CLOSED_DIR):
            for tmp in folder.glob(".*.parquet.tmp"):
                tmp.unlink(missing_ok=True)
        parts = []
        leftovers = sorted(self._open_dir.glob("part-*.parquet"))
        rolled = _rolled_parts(self.directory, leftovers)
        for part in leftovers:
            if part.name in rolled:  # already in a rolled file: a crash came before its removal
                part.unlink()
            elif _readable(part):
                parts.append(part)
            else:
                log.warning("event=recording_part_unreadable part=%s (set aside as .corrupt)", part)
                os.replace(part, part.with_name(part.name + ".corrupt"))
        return parts

    # ------------------------------------------------------------------ receiver (kip714.TelemetryReceiver)

    #: the broker need not hand it accepted payloads (``export_metrics`` does nothing with them)
    takes_payloads = False

    def export_metrics(self, context: Any, payload: Any) -> None:
        """Nothing to do: every push, accepted or not, is recorded by :meth:`push_completed`."""

    def push_completed(self, context: Any, request: Any, error_code: int, received_at_ms: int) -> None:
        """Record one PushTelemetry request with the answer it got (the broker calls this for every push): the
        row :func:`push_row` makes, kept as its fields until the part is written."""
        metrics = request.metrics
        payload = None if metrics is None else bytes(metrics)
        self._buffer(
            (
                received_at_ms,
                request.client_instance_id_bytes,
                context.client_info,
                context.node_id,
                request.subscription_id,
                request.terminating,
                request.compression_type,
                error_code,
                payload,
                context.subscription,
            ),
            0 if payload is None else len(payload),
        )

    def pushes_completed(self, batch: Any) -> None:
        """Record the pushes of one read at once (a :class:`~kip714.broker.receivers.PushBatch`, as the broker's
        request loop hands them over): the same rows as :meth:`push_completed` for each, its columns appended to
        the buffered ones, no Python object kept per push."""
        payloads = batch.payloads
        if payloads:
            size = payloads.nbytes if type(payloads) is PackedBytes else sum(map(len, payloads))
            self._buffer(batch, size, len(payloads))

    def instance_closed(self, context: Any, client_instance_id: Any, at_ms: int, reason: str = "client") -> None:
        """Record that the client connection ``client_instance_id`` used closed (the broker calls this).
        Closes after the recorder itself closed (the endpoint shutting down) are not recorded."""
        row = closed_row(context.client_info, context.node_id, client_instance_id, at_ms, reason)
        with self._lock:
            if not self._closed:
                self._closed_rows.append(row)

    def record(self, row: dict[str, Any]) -> None:
        """Buffer one row (keys: RECORD_COLUMNS); with ``sync``, wake the commit thread."""
        payload = row.get("payload")
        self._buffer(dict(row), len(payload) if payload is not None else 0)

    def _buffer(self, item: Any, size: int, rows: int = 1) -> None:
        """Buffer ``item`` (a row dict; a push's tuple, or a read's ``PushBatch`` of ``rows`` pushes, both added
        to the columns of the pushes buffered since the last row dict) with ``size`` bytes of payload."""
        with self._lock:
            if self._closed:
                raise RuntimeError("recorder is closed")
            if type(item) is dict:
                self._rows.append(item)
            else:
                pushes = self._rows[-1] if self._rows else None
                if type(pushes) is not _Pushes:
                    pushes = _Pushes()
                    self._rows.append(pushes)
                if type(item) is tuple:
                    pushes.add(item)
                else:
                    pushes.add_batch(item)
            self._pending += rows
            if self._oldest_buffered is None:
                self._oldest_buffered = time.monotonic()
            self._buffered_bytes += size
            flush = self._buffered_bytes >= self.max_buffer_bytes
        if self.sync:
            self._wake.set()
        elif flush:
            self.flush()

    def durable(self) -> concurrent.futures.Future[int]:
        """With ``sync``: a future done when every row recorded so far is durably on disk (its result: the
        rows of the commit that wrote them), or failed with the error that commit met (the rows are then
        not in the recording). Rows recorded together share one future (a group commit)."""
        if not self.sync:
            raise RuntimeError("durable() needs ParquetRecorder(sync=True)")
        with self._lock:
            if self._rows:
                assert self._waiter is not None  # (sync)
                return self._waiter
            inflight = self._inflight
        if inflight is not None:
            return inflight
        done: concurrent.futures.Future[int] = concurrent.futures.Future()
        done.set_result(0)
        return done

    def pending(self) -> int:
        """The rows buffered, not yet being written."""
        with self._lock:
            return self._pending

    def lag_s(self) -> float:
        """How long the oldest row not yet written has waited (seconds; 0 when every row is written): what
        a crash without ``sync`` would lose, and what grows when the disk falls behind."""
        with self._lock:
            oldest = [t for t in (self._oldest_writing, self._oldest_buffered) if t is not None]
        return max(0.0, time.monotonic() - min(oldest)) if oldest else 0.0

    def self_metrics(self) -> list[Any]:
        """The recorder's ``kip714_recording_*`` metric families (the Prometheus exporter exposes them):
        the lag (:meth:`lag_s`), rows written and failed, commits and failed commits."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        with self._lock:
            rows, failed_rows, commits, failed = self.rows_written, self.rows_failed, self.commits, self.commits_failed
        return [
            GaugeMetricFamily(
                "kip714_recording_lag_seconds",
                "Age of the oldest recorded push not yet written to the recording (0: all written)",
                value=self.lag_s(),
            ),
            CounterMetricFamily("kip714_recording_rows", "Push rows written to the recording", value=rows),
            CounterMetricFamily(
                "kip714_recording_rows_failed", "Push rows lost because their write failed", value=failed_rows
            ),
            CounterMetricFamily("kip714_recording_commits", "Parts written to the recording", value=commits),
            CounterMetricFamily("kip714_recording_commits_failed", "Writes of the recording that failed", value=failed),
        ]

    def flush(self) -> int:
        """Write everything buffered as one Parquet file (a part in ``_open/`` while files roll), roll the
        file when it is due; returns the number of rows written."""
        self._flush_closed()  # on this timer only, also with sync (not one _closed file per commit)
        n = self._write_buffered()
        if self._parts and (
            self._parts_bytes >= self.roll_bytes or time.monotonic() - self._segment_started >= self.roll_interval_s
        ):
            self.roll()
        return n

    def _write_buffered(self) -> int:

        with self._write_lock:
            with self._lock:
                n = self._pending
                if not n:
                    return 0
                rows, self._rows, self._pending = self._rows, [], 0
                self._buffered_bytes = 0
                self._oldest_writing, self._oldest_buffered = self._oldest_buffered, None
                self._seq += 1
                seq = self._seq
                waiter = self._waiter
                if waiter is not None:
                    self._waiter = concurrent.futures.Future()
                    self._inflight = waiter
            rolling = self.roll_interval_s > 0
            folder = self._open_dir if rolling else self.directory
            name = f"{'part' if rolling else 'push'}-{int(time.time() * 1000)}-{os.getpid()}-{seq:06d}.parquet"
            try:
                table = rows_table(rows, self.replica)
                if not folder.is_dir():
                    folder.mkdir(exist_ok=True)
                    if self.sync:
                        _fsync_dir(folder.parent)
                _write_parquet(table, folder / name, self.compression, self.sync)
                size = (folder / name).stat().st_size
            except BaseException as exc:
                with self._lock:
                    self.commits_failed += 1
                    self.rows_failed += n
                    self._inflight = None
                    self.last_error = exc
                    self._oldest_writing = None
                log.error("event=recording_write_failed rows=%d error=%r", n, exc)
                if waiter is not None:
                    waiter.set_exception(exc)
                raise
            with self._lock:
                self.last_error = None
                self.rows_written += n
                self.commits += 1
                self._oldest_writing = None
                if rolling:
                    if not self._parts:
                        self._segment_started = time.monotonic()
                    self._parts.append(folder / name)
                    self._parts_bytes += size
                else:
                    self.files_written += 1
                self._inflight = None
        if waiter is not None:
            waiter.set_result(n)
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
            schema = record_schema().with_metadata({PARTS_KEY: json.dumps([p.name for p in parts])})
            rows = 0

            def merge(f: Any) -> None:
                nonlocal rows
                with pq.ParquetWriter(f, schema, **_parquet_options(schema, self.compression)) as writer:
                    for part in parts:
                        table = pq.read_table(part)
                        writer.write_table(conform(table))
                        rows += table.num_rows

            try:  # with sync the rolled file is durable before its parts go
                _write_file(self.directory / name, merge, self.sync)
            except BaseException:
                with self._lock:  # the parts stay the open file's
                    self._parts[:0] = parts
                    self._parts_bytes += sum(p.stat().st_size for p in parts if p.exists())
                raise
            for part in parts:
                part.unlink(missing_ok=True)
            if self.sync:
                _fsync_dir(self._open_dir)
            with self._lock:
                self.files_written += 1
        return rows

    def _flush_closed(self) -> None:
        """Write the buffered connection-closed rows to ``_closed/`` (after the pushes they follow)."""
        import pyarrow as pa

        with self._lock:
            if not self._closed_rows:
                return
            rows, self._closed_rows = self._closed_rows, []
            self._seq += 1
            seq = self._seq
        folder = self.directory / CLOSED_DIR
        folder.mkdir(exist_ok=True)
        name = f"closed-{int(time.time() * 1000)}-{os.getpid()}-{seq:06d}.parquet"
        _write_parquet(pa.Table.from_pylist(rows, schema=closed_schema()), folder / name, self.compression, self.sync)
        with self._lock:
            self.closed_written += len(rows)

    def _flusher(self) -> None:
        while not self._stop.wait(self.flush_interval_s):
            try:
                self.flush()
            except Exception:  # keep recording; the rows stay reported in the log
                log.exception("recorder flush failed")

    def _commit_loop(self) -> None:
        """``sync``: write what arrived as soon as the previous commit is done (group commit)."""
        while True:
            self._wake.wait()
            self._wake.clear()
            try:
                self._write_buffered()
            except Exception:  # counted, logged, the waiters failed; keep committing
                pass
            if self._stop.is_set() and not self.pending():
                return

    def close(self) -> None:
        """Flush what is buffered, stop the background threads and release the folder."""
        self._stop.set()
        self._wake.set()
        self._thread.join(5)
        if self._committer is not None:
            self._committer.join(5)
        try:
            self.flush()
            self.roll()
            self._flush_closed()
        finally:
            with self._lock:
                self._closed = True
                fd, self._lock_fd = self._lock_fd, None
            if fd is not None:
                os.close(fd)  # releases the lock
        log.info(
            "event=recording_closed directory=%s rows=%d commits=%d commits_failed=%d sync=%s",
            self.directory,
            self.rows_written,
            self.commits,
            self.commits_failed,
            self.sync,
        )


def recording_files(directory: str | os.PathLike[str]) -> list[pathlib.Path]:
    """The push files of a recording: the rolled files, then the parts of the file being filled
    (``_open/``) but those a rolled file already holds (a crash between a roll's rename and the parts'
    removal). Side tables (``_closed/``) are not push files."""
    folder = pathlib.Path(directory)
    parts = sorted((folder / OPEN_DIR).glob("part-*.parquet"))
    rolled = _rolled_parts(folder, parts)
    return sorted(folder.glob("*.parquet")) + [p for p in parts if p.name not in rolled]


def is_recording(folder: str | os.PathLike[str]) -> bool:
    """Whether ``folder`` is a recording: it holds push files, parts of the file being filled (``_open/``),
    connection-closed rows (``_closed/``) or a recorder's lock (a recorder that has written nothing yet)."""
    p = pathlib.Path(folder)
    return (
        any(p.glob("*.parquet"))
        or any((p / OPEN_DIR).glob("part-*.parquet"))
        or (p / CLOSED_DIR).is_dir()
        or (p / LOCK_FILE).is_file()
    )


def recording_sources(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[pathlib.Path]:
    """The recordings ``paths`` name, in order: a recording folder (:func:`is_recording`) or one of its
    ``.parquet`` files is itself; a folder that is not a recording but whose sub-folders are (a root, such as
    a fleet's ``ROOT`` of ``ROOT/REPLICA`` recordings) stands for those sub-folders, by name (``_``- and
    ``.``-prefixed ones aside). FileNotFoundError when a path does not exist; ValueError when one is neither
    (a folder: naming up to three folders below it that hold Parquet files)."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise ValueError("no recording given")
    out: list[pathlib.Path] = []
    for item in items:
        p = pathlib.Path(item)
        if not p.exists():
            raise FileNotFoundError(errno.ENOENT, "does not exist", str(item))
        if p.is_file():
            if p.suffix != ".parquet":
                raise ValueError(
                    f"{item} is not a recording (a folder written by --record, or one of its .parquet files)"
                )
            out.append(p)
            continue
        if is_recording(p):
            out.append(p)
            continue
        below = sorted(c for c in p.iterdir() if c.is_dir() and not c.name.startswith(("_", ".")) and is_recording(c))
        if not below:
            found = sorted(
                {
                    str(f.parent.relative_to(p))
                    for f in p.rglob("*.parquet")
                    if not any(part.startswith("_") for part in f.relative_to(p).parts[:-1])
                }
            )[:3]
            hint = f"; folders below it with Parquet files: {', '.join(found)}" if found else ""
            raise ValueError(
                f"{item} holds no recording (no *.parquet files in it, in its _open/ or in its sub-folders){hint}"
            )
        out.extend(below)
    return out


def recordings_files(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[pathlib.Path]:
    """The push files of the recordings ``paths`` name (:func:`recording_sources`; each recording's files as
    :func:`recording_files` lists them), each file once however often it is named: the same recording twice,
    a root together with one of its own recordings, a recording and one of its files (compared after
    resolving links and relative paths). Empty when the recordings hold connection-closed rows only."""
    seen: set[pathlib.Path] = set()
    files: list[pathlib.Path] = []
    for source in recording_sources(paths):
        for f in [source] if source.is_file() else recording_files(source):
            key = f.resolve()
            if key not in seen:
                seen.add(key)
                files.append(f)
    return files


def read_recordings(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> Any:
    """The rows of one or more recordings as one ``pyarrow.Table`` (:func:`read_recording` of each): a
    recording folder, a root whose sub-folders are recordings (a fleet's ``ROOT/REPLICA`` folders), or several
    of them. Each file is read once however often it is named (:func:`recordings_files`)."""
    return read_recording_files(recordings_files(paths))


def read_recording(directory: str | os.PathLike[str]) -> Any:
    """All rows recorded under ``directory`` as one ``pyarrow.Table`` in :func:`record_schema`: the rolled files,
    then the parts of the file being filled (``_open/``); columns a recording made by an older kip714 lacks
    are null. It reads what a killed recorder left (its parts in ``_open/``; a part a roll had already merged
    is read once); a part there that cannot be read (only possible after a host crash of a recorder without
    ``sync``) is skipped with a warning."""
    return read_recording_files(recording_files(directory))


def read_recording_files(files: list[pathlib.Path]) -> Any:
    """The rows of these recording files (as :func:`recording_files` lists them) as one ``pyarrow.Table`` in
    :func:`record_schema`. A part in ``_open/`` that cannot be read is skipped with a warning; one that is gone
    was merged by a roll since it was listed (a live recording) and is skipped too."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = record_schema()
    if not files:
        return schema.empty_table()
    tables = []
    for f in files:
        try:
            t = pq.read_table(f)
        except Exception as exc:
            if f.parent.name != OPEN_DIR:
                raise
            if not isinstance(exc, FileNotFoundError):
                log.warning("event=recording_part_unreadable part=%s error=%r (skipped)", f, exc)
            continue
        tables.append(conform(t))
    return pa.concat_tables(tables) if tables else schema.empty_table()


def conform(table: Any) -> Any:
    """``table`` (rows of a recording file) in :func:`record_schema`: its columns in order and type, the
    columns a recording made by an older kip714 lacks null (``kip714_replica`` among them)."""
    import pyarrow as pa

    schema = record_schema()
    return pa.table(
        [
            table.column(c).cast(schema.field(c).type)
            if c in table.column_names
            else pa.nulls(table.num_rows, schema.field(c).type)
            for c in schema.names
        ],
        schema=schema,
    )


def read_closed(directory: str | os.PathLike[str]) -> Any:
    """The connection-closed rows of a recording (``_closed/``) as a ``pyarrow.Table`` (empty when the
    recording has none, e.g. one made before they were recorded)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted((pathlib.Path(directory) / CLOSED_DIR).glob("*.parquet"))
    if not files:
        return closed_schema().empty_table()
    return pa.concat_tables([pq.read_table(f) for f in files])
