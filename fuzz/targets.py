"""Fuzz targets for kip714: plain functions ``target(data: bytes) -> None``.

Every target feeds hostile bytes to one of kip714's input surfaces and checks what must hold for *any*
input. A target returns normally for inputs that are handled correctly (accepted, or refused with the
documented :class:`kip714.Kip714Error`); anything else it raises (an unexpected exception type, a failed
oracle ``AssertionError``, a crash in native code) is a finding.

Nothing here imports atheris: ``fuzz/run.py`` drives these under atheris/libFuzzer, and
``tests/test_fuzz_replay.py`` replays the committed corpus through them deterministically.

Targets (``TARGETS``):

``frames``        framing and message codec: split_frames, decode_request/_header, decode_response,
                  Message.decode for every API key and version, then encode -> decode round trips.
``stream``        the ``kip714 serve`` connection handler fed a byte stream in fuzzer-chosen chunks
                  (framing, ApiVersions/Metadata answers, broker decisions, decompression).
``loop``          the native request loop against the Python path: one byte stream, in fuzzer-chosen reads at
                  harness-chosen times, to two ``kip714 serve`` connections on twin brokers, one deciding pushes
                  natively (``decides=True``), one handing every frame to Python (``decides=False``): the same
                  bytes written, the same closes, the same answers counted, instances, receivers' calls and
                  metrics (``LoopTwins``); each push's answer agrees with ``kip714.codec.decompress``.
``codec_none`` … ``codec_zstd``
                  decompress() of one codec: bounded output, exact limit behaviour, agreement with the
                  reference library where both accept, compress() round trip; the broker's
                  PayloadDecompressor answers the same at the limit, the output's size and one byte less
                  (none, gzip, snappy, lz4).
``otlp``          OTLP MetricsData decoding: the native decoder (``kip714.decode_metrics``) when it is
                  built, checked against the protobuf reference (``kip714.otlp.reference``); the reference alone
                  otherwise. Every input is also appended to one shared ``kip714.MetricsAccumulator``
                  (refuses what decode_metrics refuses, keeps nothing of it; its tables equal
                  ``decode_metrics_batch``'s).
``config``        subscription config parsing (parse_kafka_list, parse_config_string, the subscription
                  file format, SubscriptionRegistry.set) and matching with hostile client attributes,
                  with a time budget per resolution (the regex-complexity defence).
"""

from __future__ import annotations

import os
import random
import struct
import tempfile
import time
import uuid
import zlib

import kip714
from kip714 import Kip714Error
from kip714.errors import MalformedFrameError, TelemetryTooLargeError
from kip714.otlp import reference as otlp_pb

#: Known, already reported findings whose oracle a long fuzzing run may switch off so that the fuzzer
#: keeps exploring (``KIP714_FUZZ_TOLERATE=limit-error-code,exact-limit``; see
#: fuzz/findings/README.md). The corpus replay never sets it.
TOLERATE = frozenset(filter(None, os.environ.get("KIP714_FUZZ_TOLERATE", "").split(",")))

# --------------------------------------------------------------------------------------------- frames

_API_KEYS = (3, 18, 71, 72, 32, 33, 44, 74)
#: api key -> (min, max) version kip714 decodes
_VERSIONS = {3: (0, 13), 18: (0, 4), 71: (0, 0), 72: (0, 0), 32: (1, 4), 33: (0, 2), 44: (0, 1), 74: (0, 1)}


def _api_version(key_byte: int, version_byte: int) -> tuple[int, int]:
    """(api key, version) from two input bytes: every key and version kip714 decodes."""
    api_key = _API_KEYS[key_byte % len(_API_KEYS)]
    lo, hi = _VERSIONS[api_key]
    return api_key, lo + version_byte % (hi - lo + 1)


def _expect_kip714(fn, *args, **kw):
    """Call fn; a Kip714Error is the documented refusal (returns None), anything else propagates."""
    try:
        return fn(*args, **kw)
    except Kip714Error:
        return None


def _reencode_ok(exc: Exception) -> bool:
    # A classic (int16-length) string decoded with U+FFFD replacement can grow past 32767 UTF-8 bytes;
    # re-encoding it is then refused with ValueError. That is the documented encoder limit, not a bug.
    return isinstance(exc, ValueError) and "longer than 32767 bytes" in str(exc)


def _roundtrip_request(req) -> None:
    h = req.header
    try:
        wire = kip714.encode_request(
            req.body,
            req.correlation_id,
            h.client_id,
            api_version=req.api_version,
            header_tagged_fields=h.unknown_tagged_fields,
        )
    except ValueError as exc:
        if _reencode_ok(exc):
            return
        raise
    again = kip714.decode_request(wire[4:])
    assert again.header == h, (again.header, h)
    assert again.body == req.body, (again.body, req.body)
    # and once more: the encoding of a decoded message is a fixed point
    assert (
        kip714.encode_request(
            again.body,
            again.correlation_id,
            again.header.client_id,
            api_version=again.api_version,
            header_tagged_fields=again.header.unknown_tagged_fields,
        )
        == wire
    )


def _roundtrip_response(resp, api_key: int, version: int) -> None:
    try:
        wire = kip714.encode_response(
            resp.correlation_id, resp.body, version, header_tagged_fields=resp.header.unknown_tagged_fields
        )
    except ValueError as exc:
        if _reencode_ok(exc):
            return
        raise
    again = kip714.decode_response(wire[4:], api_key, version)
    assert again == resp, (again, resp)


def frames(data: bytes) -> None:
    """First byte picks the entry point, the rest is the input."""
    if not data:
        return
    mode, body = data[0] % 4, data[1:]
    if mode == 0:
        h = _expect_kip714(kip714.wire.decode_request_header, body)
        req = _expect_kip714(kip714.decode_request, body)
        if req is not None:
            assert h is not None
            assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (
                req.api_key,
                req.api_version,
                req.correlation_id,
                req.client_id,
            )
            if type(req.body) is kip714.PushTelemetryRequest:
                m = req.body.metrics
                # Metrics is not nullable (Kafka refuses a null): a decoded push always has a view
                assert m is not None and m.readonly and req.body.metrics_size == m.nbytes
                fields = req.body.decision_fields()
                assert fields[0] == req.body.client_instance_id.bytes
            _roundtrip_request(req)
        # the memoryview path must agree with the bytes path
        req2 = _expect_kip714(kip714.decode_request, bytearray(body))
        assert (req is None) == (req2 is None)
        if req is not None:
            assert req2 == req
    elif mode == 1:
        if len(body) < 2:
            return
        api_key, version = _api_version(body[0], body[1])
        resp = _expect_kip714(kip714.decode_response, body[2:], api_key, version)
        if resp is not None:
            _roundtrip_response(resp, api_key, version)
    elif mode == 2:
        limit = (1 << 16) if len(body) % 2 else 64
        for copy in (True, False):
            try:
                out, consumed = kip714.split_frames(body, limit, copy=copy)
            except MalformedFrameError:
                continue
            assert 0 <= consumed <= len(body)
            rebuilt = b"".join(struct.pack(">i", len(f)) + bytes(f) for f in out)
            assert rebuilt == body[:consumed]
            assert len(body) - consumed < 4 or struct.unpack_from(">i", body, consumed)[0] > len(body) - consumed - 4
            assert all(len(f) <= limit for f in out)
    else:
        if len(body) < 3:
            return
        api_key, version = _api_version(body[0], body[1])
        is_request = bool(body[2] & 1)
        cls = kip714.wire.message_class(api_key, is_request)
        msg = _expect_kip714(cls.decode, body[3:], version)
        if msg is not None:
            try:
                enc = msg.encode(version)
            except ValueError as exc:
                if _reencode_ok(exc):
                    return
                raise
            assert cls.decode(enc, version) == msg
            repr(msg)
            msg.to_dict()


# --------------------------------------------------------------------------------------------- stream


class _Transport:
    """Enough of asyncio.Transport for kip714.endpoint.server._ServeConnection."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data) -> None:
        assert not self.closed, "write after abort/close"
        self.out += data

    def is_closing(self) -> bool:
        return self.closed

    def abort(self) -> None:
        self.closed = True

    close = abort


_STREAM_SERVER = None


def _stream_server():
    global _STREAM_SERVER
    if _STREAM_SERVER is None:
        from kip714.endpoint.server import TelemetryServer

        registry = kip714.SubscriptionRegistry()
        registry.set("all", {"metrics": "*", "interval.ms": "100"})
        registry.set("some", {"metrics": "org.apache.kafka.", "match": "client_id=.*prod.*"})
        now = [1_700_000_000_000]

        def clock():
            now[0] += 37
            return now[0]

        broker = kip714.TelemetryBroker(registry, telemetry_max_bytes=1 << 16, max_instances=64, clock=clock)
        _STREAM_SERVER = TelemetryServer(broker, "127.0.0.1", 9092, max_frame_bytes=1 << 16)
    return _STREAM_SERVER


def stream(data: bytes) -> None:
    """First byte: chunking seed; the rest is what a client sends on one connection."""
    from kip714.endpoint.server import _ServeConnection as _Connection

    if not data:
        return
    server = _stream_server()
    conn = _Connection(server)
    tr = _Transport()
    conn.connection_made(tr)
    step = (data[0] % 17) + 1
    body = data[1:]
    try:
        for i in range(0, len(body), step):
            if tr.closed:
                break
            conn.data_received(body[i : i + step])  # must never raise
    finally:
        conn.connection_lost(None)
    assert conn not in server.connections
    assert not server.stats["internal_errors"], "an exception escaped the request handler (see the log)"
    # everything written is a sequence of complete, well-formed response frames
    _out, consumed = kip714.split_frames(bytes(tr.out))
    assert consumed == len(tr.out)
    assert conn.loop.held <= max(len(body), 4)


# --------------------------------------------------------------------------------------------- loop


class _LoopReceiver:
    """What one twin broker hands its receiver, in order: exports, pushes observed, instances closed (the
    oracle compares the twins' lists). ``raises``: ``export_metrics`` raises on payloads of a length divisible
    by 3 (the answer must become INVALID_RECORD); ``batch``: it also takes :class:`PushBatch` es."""

    def __init__(self, raises: bool) -> None:
        self.raises = raises
        self.exports: list[tuple] = []
        self.pushes: list[tuple] = []
        self.closed: list[tuple] = []

    def export_metrics(self, context, payload) -> None:
        self.exports.append(
            (
                payload.client_instance_id_bytes,
                payload.terminating,
                payload.content_type,
                payload.data,
                payload.compression_type,
                payload.subscription_id,
                payload.received_at_ms,
                payload.labels,
                context,
            )
        )
        if self.raises and len(payload.data) % 3 == 0:
            raise ValueError("the fuzz receiver refuses this payload")

    def push_completed(self, context, request, error_code: int, received_at_ms: int) -> None:
        sub = context.subscription
        assert context.push_interval_ms == (sub.push_interval_ms if sub is not None else None)
        self.pushes.append(
            (
                request.client_instance_id.bytes,
                request.subscription_id,
                request.terminating,
                request.compression_type,
                bytes(request.metrics),
                error_code,
                received_at_ms,
                context.client_info,
                context.node_id,
                sub,
            )
        )

    def instance_closed(self, context, instance, at_ms: int, reason: str) -> None:
        self.closed.append((instance.bytes, at_ms, reason, context))


class _LoopBatchReceiver(_LoopReceiver):
    """A :class:`_LoopReceiver` that takes a read's pushes as columns: :class:`PushBatch` es and accepted
    pushes' :class:`AcceptedBatch` es (``export_batch``), recorded as the Python twin's ``export_metrics``
    records each push (its labels and context made from the columns)."""

    def export_batch(self, batch) -> None:
        from kip714.broker.receivers import ReceiverContext

        for k, id16 in enumerate(batch.client_instance_ids):
            info = batch.client_infos[k]
            self.exports.append(
                (
                    id16,
                    batch.terminating[k],
                    "OTLP",
                    batch.payloads[k],
                    batch.compression_types[k],
                    batch.subscription_ids[k],
                    batch.received_at_ms,
                    info.labels(batch.node_id, id16),
                    ReceiverContext(info, batch.node_id, batch.push_intervals[k], None, batch.expiries[k]),
                )
            )

    def pushes_completed(self, batch) -> None:
        for k, id16 in enumerate(batch.client_instance_ids):
            self.pushes.append(
                (
                    id16,
                    batch.subscription_ids[k],
                    batch.terminating[k],
                    batch.compression_types[k],
                    bytes(batch.payloads[k]),
                    batch.error_codes[k],
                    batch.received_at_ms,
                    batch.client_infos[k],
                    batch.node_id,
                    batch.subscriptions[k],
                )
            )


class _UuidSource:
    """The ``uuid`` module as ``kip714.broker.manager`` sees it while a twin is fed: ``uuid4()`` (a Get with
    the zero id: the broker picks the instance id) draws from a sequence both twins restart together, so
    that they pick the same ids."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def __getattr__(self, name: str):
        return getattr(uuid, name)

    def uuid4(self) -> uuid.UUID:
        return uuid.UUID(int=self.rng.getrandbits(128), version=4)


def _decompression_agrees(metrics: bytes, ctype: int, code: int, limit: int) -> None:
    """A push's answer agrees with ``kip714.codec.decompress`` (not the broker's decompressor: an oracle of its
    own): accepted, the payload decompresses within the limit; INVALID_RECORD, it does not decompress;
    TELEMETRY_TOO_LARGE, it is over the limit as sent or decompressed."""
    if code not in (0, 87, 118) or not metrics or not 0 <= ctype <= 4:
        return
    try:
        kip714.decompress(metrics, ctype, limit)
        want = 0
    except TelemetryTooLargeError:
        want = 118
    except Kip714Error:
        want = 87
    if code == 118 and len(metrics) > limit:
        return
    assert code == want, f"answered {code} to a payload kip714.codec.decompress answers {want} (ctype {ctype})"


#: the metrics() entries that are times, not counts (they differ between any two runs)
_TIMED = ("plugin-export-time-avg", "plugin-export-time-max")


class LoopTwins:
    """Two ``kip714 serve`` endpoints on twin brokers (same subscriptions, limits and clock), one whose
    connections decide pushes in the native request loop (``decides=True``, what ``kip714 serve`` runs) and
    one whose connections hand every frame to Python (``decides=False``: ``handle_frame``, the old path that
    decodes each request and asks ``TelemetryBroker.handle``). :meth:`feed` gives both the same chunk at the
    same time and checks that they wrote the same bytes and are both open or both closed; :meth:`close`
    closes both connections and checks the brokers' and endpoints' state (answers counted, instances with
    every field, receivers' calls, metrics), then the instance tables' consistency.

    Options: ``receiver`` ("none", "export": a receiver with ``export_metrics``, ``push_completed`` and
    ``instance_closed``; "batch": one that also takes ``pushes_completed`` and ``export_batch``; "raise": "export" whose
    ``export_metrics`` raises on some payloads), ``decompress`` (the brokers' ``decompress_payloads``),
    ``max_instances``, ``telemetry_max_bytes``, ``max_frame_bytes`` (None: ``kip714 serve``'s default for the
    limit) and ``alter_open`` (the admin API may change the subscriptions: a Get's instance turns stale).

    The clock is the harness's: it moves only in :meth:`feed` (the loop reads it once per read, the Python
    path once per request: a clock that ticked per call would tell them apart for no fault of theirs).
    :meth:`open` moves it a day on, so nothing of an earlier connection is still alive."""

    SUBSCRIPTIONS = (
        ("all", {"metrics": "*", "interval.ms": "100"}),
        ("some", {"metrics": "org.apache.kafka.", "match": "client_id=.*prod.*"}),
    )
    START_MS = 1_700_000_000_000

    def __init__(
        self,
        receiver: str = "none",
        decompress: bool = True,
        max_instances: int = 64,
        telemetry_max_bytes: int = 1 << 16,
        max_frame_bytes: int | None = None,
        alter_open: bool = False,
    ) -> None:
        from kip714.broker.config_admin import ClientMetricsAdmin
        from kip714.broker.subscription_layers import SubscriptionLayers
        from kip714.endpoint.server import TelemetryServer, _ServeConnection

        class Native(_ServeConnection):
            handed = 0  # frames the request loop handed to Python

            def handle_frame(self, frame: bytes) -> None:
                self.handed += 1
                super().handle_frame(frame)

        class Python(Native):
            decides = False

        self.now = [self.START_MS]
        self.servers = []
        self.receivers: list[_LoopReceiver] = []
        self.uuids = []
        for _ in range(2):
            registry = kip714.SubscriptionRegistry()
            for name, config in self.SUBSCRIPTIONS:
                registry.set(name, config)
            broker = kip714.TelemetryBroker(
                registry,
                telemetry_max_bytes=telemetry_max_bytes,
                max_instances=max_instances,
                clock=self._clock,
                decompress_payloads=decompress,
            )
            if receiver != "none":
                rec = (_LoopBatchReceiver if receiver == "batch" else _LoopReceiver)(receiver == "raise")
                broker.add_receiver(rec)
                self.receivers.append(rec)
            admin = ClientMetricsAdmin(SubscriptionLayers(registry), alter_open=alter_open)
            self.servers.append(
                TelemetryServer(broker, "127.0.0.1", 9092, max_frame_bytes=max_frame_bytes, admin=admin)
            )
            self.uuids.append(_UuidSource())
        self.classes = (Native, Python)
        self.conns: list = []
        self.transports: list[_Transport] = []
        self.fed = 0

    def _clock(self) -> int:
        return self.now[0]

    @property
    def native(self):
        """The connection whose request loop decides (``decides=True``)."""
        return self.conns[0]

    @property
    def python(self):
        """The connection that hands every frame to Python."""
        return self.conns[1]

    @property
    def out(self) -> bytes:
        """What the native connection wrote (the same as the Python one's, :meth:`feed` checks it)."""
        return bytes(self.transports[0].out)

    @property
    def closed(self) -> bool:
        return self.transports[0].closed

    @property
    def max_frame_bytes(self) -> int:
        return self.servers[0].max_frame_bytes

    def open(self) -> None:
        """A new connection to each endpoint, a day after the last one."""
        self.now[0] += 86_400_000
        self.conns = [cls(server) for cls, server in zip(self.classes, self.servers)]
        self.transports = [_Transport(), _Transport()]
        for source in self.uuids:
            source.rng.seed(0)
        for conn, tr in zip(self.conns, self.transports):
            conn.connection_made(tr)
        self.fed = 0

    def _each(self, fn) -> None:
        from kip714.broker import manager

        real = manager.uuid
        try:
            for k in range(2):
                manager.uuid = self.uuids[k]
                fn(k)
        finally:
            manager.uuid = real

    def feed(self, chunk: bytes, dt_ms: int = 0) -> None:
        """``dt_ms`` later, one read of ``chunk`` on both connections (neither may be closed yet)."""
        assert not self.closed
        self.now[0] += dt_ms
        self.fed += len(chunk)
        self._each(lambda k: self.conns[k].data_received(chunk))  # must never raise
        native, python = self.transports
        assert native.out == python.out, "the native loop and the Python path wrote different bytes"
        assert native.closed == python.closed, f"native {'closed' if native.closed else 'open'}, Python not"
        held = [conn.loop.held for conn in self.conns]
        assert held[0] == held[1], f"held {held[0]} bytes natively, {held[1]} in Python"
        assert held[0] <= min(self.fed, self.max_frame_bytes + 3), f"{held[0]} bytes held after {self.fed}"
        assert self.servers[0].budget.total == self.servers[1].budget.total

    def close(self, check: bool = True) -> None:
        """Close both connections (the client went away) and, with ``check``, compare everything the twins
        hold (:meth:`check`)."""
        self._each(lambda k: self.conns[k].connection_lost(None))
        if check:
            self.check()

    def check(self) -> None:
        """The twins' state is the same: endpoint counters, answers counted, instances field by field,
        receivers' calls, broker metrics; each push's answer agrees with ``kip714.codec.decompress`` (with a
        receiver that does not raise, decompressing); each instance table is consistent; every byte written
        is whole response frames."""
        a, b = self.servers
        for server, conn in zip(self.servers, self.conns):
            assert conn not in server.connections
            assert not server.stats["internal_errors"], "an exception escaped the request handler (see the log)"
        assert dict(a.stats) == dict(b.stats), (dict(a.stats), dict(b.stats))
        ba, bb = a.broker, b.broker
        assert ba.push_results() == bb.push_results(), (ba.push_results(), bb.push_results())
        ma = {k: v for k, v in ba.metrics().items() if k not in _TIMED}
        mb = {k: v for k, v in bb.metrics().items() if k not in _TIMED}
        assert ma == mb, (ma, mb)
        ids = ba.instances._lru_ids()
        assert ids == bb.instances._lru_ids()
        for id16 in ids:
            assert ba.instances.get_state(id16) == bb.instances.get_state(id16), uuid.UUID(bytes=id16)
            assert ba.client_metadata(id16) == bb.client_metadata(id16)
        for ra, rb in zip(self.receivers[:1], self.receivers[1:]):
            assert ra.exports == rb.exports, "the receivers were handed different payloads"
            assert ra.pushes == rb.pushes, "the observers saw different pushes"
            assert ra.closed == rb.closed, "the observers heard of different instances closing"
            if ba.decompress_payloads and not ra.raises:
                for push in ra.pushes:
                    _decompression_agrees(push[4], push[3], push[5], ba.telemetry_max_bytes)
        ba.instances._check()
        bb.instances._check()
        # everything written is a sequence of complete, well-formed response frames
        _out, consumed = kip714.split_frames(self.out)
        assert consumed == len(self.out)

    @classmethod
    def from_flags(cls, flags: int) -> LoopTwins:
        """The twins of the ``loop`` target's first byte (see :func:`loop`)."""
        return cls(
            receiver=("none", "export", "batch", "raise")[flags & 3],
            decompress=not flags & 4,
            max_instances=4 if flags & 8 else 64,
            telemetry_max_bytes=1400 if flags & 16 else 1 << 16,
            max_frame_bytes=2048 if flags & 32 else None,
            alter_open=bool(flags & 64),
        )


_LOOP_TWINS: dict[int, LoopTwins] = {}
#: what a chunk of the ``loop`` target's stream may be, and how long after the last one it comes (ms)
LOOP_CHUNKS = (1, 1, 2, 3, 4, 5, 7, 11, 16, 23, 64, 257, 1024, 1 << 16)
LOOP_STEPS = (0, 0, 0, 1, 50, 99, 100, 250, 1000, 30_000, 200_000)


def loop_chunks(seed: int, n: int) -> list[tuple[int, int, int]]:
    """The ``loop`` target's reads of an ``n``-byte stream for its chunking byte ``seed``: ``(start, end,
    milliseconds since the last read)``. Seed 0 is one read; any other seeds a generator of chunk sizes and
    steps."""
    if seed == 0:
        return [(0, n, 0)]
    rng = random.Random(seed)
    out, pos = [], 0
    while pos < n:
        size = rng.choice(LOOP_CHUNKS)
        out.append((pos, min(n, pos + size), rng.choice(LOOP_STEPS)))
        pos += size
    return out


def loop(data: bytes) -> None:
    """The native request loop against the Python path: byte 0 picks the twins (:meth:`LoopTwins.from_flags`:
    bits 0-1 the receiver, 2 no decompression, 3 a table of 4 instances, 4 telemetry_max_bytes 1400, 5 a
    2048-byte frame limit, 6 subscriptions the admin API may change), byte 1 the reads (:func:`loop_chunks`);
    the rest is what a client sends on one connection."""
    if len(data) < 2:
        return
    flags = data[0] & 0x7F
    twins = _LOOP_TWINS.get(flags)
    if twins is None:
        twins = _LOOP_TWINS[flags] = LoopTwins.from_flags(flags)
    body = data[2:]
    ok = False
    twins.open()
    try:
        try:
            for start, end, dt in loop_chunks(data[1], len(body)):
                if twins.closed:
                    break
                twins.feed(body[start:end], dt)
        except BaseException:
            twins.close(check=False)
            raise
        twins.close()
        ok = True
    finally:
        if not ok or any(s.admin.changes for s in twins.servers):
            del _LOOP_TWINS[flags]  # twins no longer (or subscriptions changed): the next input starts afresh


# --------------------------------------------------------------------------------------------- codecs

_CODEC_LIMIT = 1 << 20


def _reference(ctype: int, data: bytes):
    """What the codec's own library makes of ``data`` (None when it refuses or the framing is ambiguous)."""
    try:
        if ctype == 1:
            out, rest = [], bytes(data)
            while rest:
                d = zlib.decompressobj(31)
                out.append(d.decompress(rest, _CODEC_LIMIT + 1))
                if not d.eof or d.unconsumed_tail:
                    return None
                rest = d.unused_data
            return b"".join(out)
        if ctype == 4:
            import zstandard

            reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
            out = reader.read(_CODEC_LIMIT + 1)
            return out if len(out) <= _CODEC_LIMIT else None
        if ctype == 3:
            import lz4.frame

            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(bytes(data), max_length=_CODEC_LIMIT + 1)
            return out if d.eof and not d.unused_data else None
    except Exception:
        return None
    return None


#: PayloadDecompressors by limit (each holds a libzstd context and an output buffer of its limit)
_DECOMPRESSORS: dict[int, object] = {}


def _outcome(fn, *args):
    """What ``fn(*args)`` answers: its value, or the class of the Kip714Error it raised."""
    try:
        return fn(*args)
    except Kip714Error as exc:
        return type(exc)


def _decompressor_agrees(data: bytes, ctype: int, limit: int) -> None:
    """The broker's PayloadDecompressor (libzstd called directly for zstd, the request loop's and
    TelemetryBroker.handle's decompression) answers what kip714.codec.decompress answers: the same bytes, or
    the same exception class."""
    from kip714._instances import PayloadDecompressor

    d = _DECOMPRESSORS.get(limit)
    if d is None:
        if len(_DECOMPRESSORS) >= 8:
            _DECOMPRESSORS.clear()
        d = _DECOMPRESSORS[limit] = PayloadDecompressor(limit)
    got, want = _outcome(d.decompress, data, ctype), _outcome(kip714.decompress, data, ctype, limit)
    assert got == want, f"PayloadDecompressor({limit}) answered {got!r:.80}, kip714.codec.decompress {want!r:.80}"


def _codec_target(ctype: int):
    def target(data: bytes) -> None:
        try:
            out = kip714.decompress(data, ctype, _CODEC_LIMIT)
        except Kip714Error:
            out = None
        _decompressor_agrees(data, ctype, _CODEC_LIMIT)
        if out:
            _decompressor_agrees(data, ctype, len(out))
            _decompressor_agrees(data, ctype, len(out) - 1 or 1)
        if out is not None:
            assert isinstance(out, bytes) and len(out) <= _CODEC_LIMIT
            n = len(out)
            # the limit is exact: n fits n, and n - 1 is refused as too large
            try:
                again = kip714.decompress(data, ctype, n)
            except Kip714Error as exc:
                if "exact-limit" not in TOLERATE:
                    raise AssertionError(f"max_output={n}, the payload's own size, raised {exc!r}") from exc
                again = out
            assert again == out
            if n:
                try:
                    kip714.decompress(data, ctype, n - 1)
                except TelemetryTooLargeError:
                    pass
                except Kip714Error as exc:
                    if "limit-error-code" not in TOLERATE:
                        raise AssertionError(
                            f"max_output={n - 1} on a payload of {n} bytes raised {exc!r}, not TelemetryTooLargeError"
                        ) from exc
                else:
                    raise AssertionError(f"{n} bytes passed max_output={n - 1}")
            ref = _reference(ctype, data)
            if ref is not None:
                assert ref == out, f"codec {ctype}: kip714 and the reference library disagree"
            if ctype == 0:
                assert out == bytes(data)
        # the framing sniffer never raises for any input
        kip714._codec.detect_framing(data, ctype)
        # compress -> decompress is the identity
        if len(data) <= 1 << 14:
            packed = kip714.compress(data, ctype)
            assert kip714.decompress(packed, ctype, len(data)) == bytes(data)

    target.__name__ = f"codec_{('none', 'gzip', 'snappy', 'lz4', 'zstd')[ctype]}"
    return target


codec_none = _codec_target(0)
codec_gzip = _codec_target(1)
codec_snappy = _codec_target(2)
codec_lz4 = _codec_target(3)
codec_zstd = _codec_target(4)


# --------------------------------------------------------------------------------------------- otlp


def native_otlp_decoder():
    """``kip714.decode_metrics`` when the native OTLP decoder is built, else None."""
    fn = getattr(kip714, "decode_metrics", None)
    if fn is None:
        try:
            from kip714 import _otlp
        except ImportError:
            return None
        fn = getattr(kip714, "decode_metrics", None) or getattr(_otlp, "decode_metrics", None)
    return fn


#: The accumulating decoder the ``otlp`` target feeds every input to (a batch spans several inputs, so that
#: appends after refused payloads and tables of several payloads are exercised too) and what it holds.
_ACCUMULATOR: list = []
_ACCUMULATED: list[bytes] = []


def _accumulate(data: bytes, accepted: bool) -> None:
    """Append ``data`` to the shared MetricsAccumulator: it refuses exactly what decode_metrics refuses (and
    keeps nothing of it), and every table it hands out is decode_metrics_batch's for the same payloads."""
    if not _ACCUMULATOR:
        _ACCUMULATOR.append(kip714.MetricsAccumulator(max_payloads=4))
    acc = _ACCUMULATOR[0]
    rows_before = acc.rows
    try:
        table = acc.append(data)
    except Kip714Error:
        assert not accepted, "MetricsAccumulator refused a payload decode_metrics accepts"
        assert acc.rows == rows_before and len(acc) == len(_ACCUMULATED), "a refused payload left rows behind"
        return
    assert accepted, "MetricsAccumulator accepted a payload decode_metrics refuses"
    _ACCUMULATED.append(data)
    if table is not None:
        want = kip714.decode_metrics_batch(_ACCUMULATED)
        _ACCUMULATED.clear()
        assert table.schema == want.schema and table.num_rows == want.num_rows
        for name in table.column_names:  # (to_pylist: NaN compares unequal in Table.equals)
            assert repr(table.column(name).to_pylist()) == repr(want.column(name).to_pylist()), name


def otlp(data: bytes) -> None:
    try:
        rows = otlp_pb.flatten(data)
    except Kip714Error:
        rows = None
    decode = native_otlp_decoder()
    if decode is None:
        return
    try:
        table = decode(data)
    except Kip714Error:
        table = None
    if hasattr(kip714, "MetricsAccumulator"):
        _accumulate(data, table is not None)
    # values that the int64 columns cannot hold: the native decoder refuses them, naming the field
    if rows is not None and any(otlp_pb.exceeds_int64(r) for r in rows):
        assert table is None, "native decoder accepted an unsigned value >= 2**63 (would wrap negative)"
        return
    # otherwise the native decoder refuses exactly what protobuf (upb) refuses, and agrees on the rows
    assert (table is None) == (rows is None), (
        f"native decoder {'refused' if table is None else 'accepted'} a payload protobuf "
        f"{'refused' if rows is None else 'accepted'}"
    )
    if table is not None:
        assert table.num_rows == len(rows), (table.num_rows, len(rows))
        for col in (
            "metric",
            "kind",
            "temporality",
            "start_time_unix_nano",
            "time_unix_nano",
            "value_int",
            "count",
            "zero_count",
            "bucket_counts",
            "positive_bucket_counts",
            "scale",
        ):
            got, want = table.column(col).to_pylist(), [r[col] for r in rows]
            if col.endswith("bucket_counts"):  # null vs [] is the column's business, not this oracle's
                got, want = [v or [] for v in got], [v or [] for v in want]
            assert got == want, col


# --------------------------------------------------------------------------------------------- config

#: A resolution must finish within this (seconds) whatever the attributes: the regex-complexity defence.
RESOLVE_BUDGET_S = 2.0


def _split_fields(data: bytes, n: int) -> list[str]:
    parts = data.split(b"\x00", n - 1)
    parts += [b""] * (n - len(parts))
    return [p.decode("utf-8", "replace") for p in parts]


def config(data: bytes) -> None:
    from kip714.broker.subscriptions import parse_config_string, parse_kafka_list
    from kip714.endpoint.subscription_file import load_subscription_file

    if not data:
        return
    mode = data[0] % 3
    text, metrics, interval, match, client_id, soft_name, soft_ver, blowup = _split_fields(data[1:], 8)
    # LIST parsing never fails and round-trips Kafka's rule
    items = parse_kafka_list(text)
    assert all(isinstance(i, str) for i in items)
    if mode == 0:
        cfg = _expect_kip714(parse_config_string, text)
        if cfg is None:
            return
    elif mode == 1:
        with tempfile.NamedTemporaryFile(
            "w", suffix=".conf", delete=False, encoding="utf-8", errors="surrogatepass"
        ) as f:
            f.write(text)
        try:
            subs = _expect_kip714(load_subscription_file, f.name)
        finally:
            os.unlink(f.name)
        if not subs:
            return
        cfg = next(iter(subs.values()))
    else:
        cfg = {"metrics": metrics, "interval.ms": interval, "match": match}
        cfg = {k: v for k, v in cfg.items() if v or len(data) % 2}
    registry = kip714.SubscriptionRegistry()
    try:
        registry.set("fuzz", cfg)
    except Kip714Error:
        return
    # hostile attributes: the fuzzer's strings, and a long repetition that makes backtracking explode
    long = (blowup or "a") * (1 + 4000 // max(1, len(blowup) or 1))
    for cid in (client_id, long, long + "!", client_id * 50):
        info = kip714.ClientInfo(
            client_instance_id=uuid.UUID(int=len(cid)),
            client_id=cid[:32767],
            client_software_name=soft_name or "unknown",
            client_software_version=soft_ver or "unknown",
        )
        started = time.monotonic()
        res = registry.resolve(info)
        elapsed = time.monotonic() - started
        assert elapsed < RESOLVE_BUDGET_S, f"resolve took {elapsed:.2f}s for a {len(cid)}-char client id"
        assert -(2**31) <= res.subscription_id < 2**31
        assert 100 <= res.push_interval_ms <= 300_000


TARGETS = {
    "frames": frames,
    "stream": stream,
    "loop": loop,
    "codec_none": codec_none,
    "codec_gzip": codec_gzip,
    "codec_snappy": codec_snappy,
    "codec_lz4": codec_lz4,
    "codec_zstd": codec_zstd,
    "otlp": otlp,
    "config": config,
}

#: libFuzzer -max_len per target (inputs it generates; corpus files may be larger)
MAX_LEN = {"frames": 8192, "stream": 16384, "loop": 16384, "otlp": 16384, "config": 2048}
for _name in TARGETS:
    MAX_LEN.setdefault(_name, 16384)
