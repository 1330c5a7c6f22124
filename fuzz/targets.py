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
``codec_none`` … ``codec_zstd``
                  decompress() of one codec: bounded output, exact limit behaviour, agreement with the
                  reference library where both accept, compress() round trip.
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


def _codec_target(ctype: int):
    def target(data: bytes) -> None:
        try:
            out = kip714.decompress(data, ctype, _CODEC_LIMIT)
        except Kip714Error:
            out = None
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
    "codec_none": codec_none,
    "codec_gzip": codec_gzip,
    "codec_snappy": codec_snappy,
    "codec_lz4": codec_lz4,
    "codec_zstd": codec_zstd,
    "otlp": otlp,
    "config": config,
}

#: libFuzzer -max_len per target (inputs it generates; corpus files may be larger)
MAX_LEN = {"frames": 8192, "stream": 16384, "otlp": 16384, "config": 2048}
for _name in TARGETS:
    MAX_LEN.setdefault(_name, 16384)
