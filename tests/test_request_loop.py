"""The native request loop (``kip714._instances.RequestLoop``, what ``kip714 serve`` runs) refuses and answers
what the Python path does: each test feeds the same reads to a connection whose loop decides pushes and to one
that hands every frame to Python (``decides=False``), on twin brokers (``fuzz/targets.py``'s ``LoopTwins``,
the ``loop`` fuzz target's harness), which checks after every read that both wrote the same bytes and are
both open or both closed, and at the end that the brokers, endpoints and receivers hold the same.

Also: ``PayloadDecompressor.decompress`` (libzstd called directly) against ``kip714.codec.decompress`` over
seeded mutations of zstd payloads.
"""

from __future__ import annotations

import pathlib
import random
import struct
import sys
import tracemalloc
import uuid

import pytest
import zstandard

import kip714
from kip714 import ErrorCode
from kip714._instances import PayloadDecompressor
from kip714.wire import ApiVersionsRequest, GetTelemetrySubscriptionsRequest, PushTelemetryRequest

FUZZ = pathlib.Path(__file__).resolve().parents[1] / "fuzz"
if not (FUZZ / "targets.py").exists():  # e.g. cibuildwheel copies only tests/ next to the wheel
    pytest.skip("fuzz/ is not next to tests/", allow_module_level=True)
sys.path.insert(0, str(FUZZ))

from targets import LoopTwins  # noqa: E402

pytestmark = pytest.mark.usefixtures("quiet_kip714_logs")  # the server logs each bad frame it drops

CAPTURES = pathlib.Path(__file__).parent / "data" / "captures"
E = ErrorCode
LIMIT = 1 << 16  # the twins' telemetry_max_bytes


def _capture(name: str):
    return kip714.decode_request((CAPTURES / name).read_bytes()[4:])


#: librdkafka's zstd push (464 B, 1.45 KB decompressed), and its client
PUSH = _capture("producer_zstd_push_01_zstd.bin")
PAYLOAD = bytes(PUSH.body.metrics)
PLAIN = kip714.decompress(PAYLOAD, 4, LIMIT)


class Client:
    """One client instance's requests, each remembered with its API key to read the answers."""

    def __init__(self, session: Session, n: int) -> None:
        self.session = session
        self.client_id = f"{PUSH.client_id}-{n}"
        self.instance = uuid.UUID(int=(n + 2) << 64 | 0x714)
        self.sid = 0

    def get(self) -> bytes:
        return self.session.request(GetTelemetrySubscriptionsRequest(self.instance), 71, self.client_id)

    def push(
        self, metrics: bytes = PAYLOAD, ctype: int = 4, terminating: bool = False, sid: int | None = None
    ) -> bytes:
        body = PushTelemetryRequest(self.instance, self.sid if sid is None else sid, terminating, ctype, metrics)
        return self.session.request(body, 72, self.client_id)


class Session:
    """A connection's requests and how to read its answers: ApiVersions, then a Get for each of ``clients``
    instances (their subscription ids found by a twin first), then what the test sends."""

    def __init__(self, twins: LoopTwins, clients: int = 1) -> None:
        self.twins = twins
        self.keys: list[tuple[int, int]] = []
        self.corr = 0
        self.clients = [Client(self, n) for n in range(clients)]
        probe = self.request(ApiVersionsRequest("librdkafka", "2.16.0"), 18, "probe", 3)
        probe += b"".join(c.get() for c in self.clients)
        twins.open()
        twins.feed(probe)
        for c, answer in zip(self.clients, self.answers(twins.out)[1:]):
            c.sid = answer.subscription_id
        twins.close()
        self.keys.clear()
        self.hello = self.request(ApiVersionsRequest("librdkafka", "2.16.0"), 18, PUSH.client_id, 3)
        self.hello += b"".join(c.get() for c in self.clients)

    def request(self, body, api_key: int, client_id: str, version: int = 0) -> bytes:
        self.corr += 1
        self.keys.append((api_key, version))
        return kip714.encode_request(body, self.corr, client_id, api_version=version)

    def answers(self, out: bytes) -> list:
        frames, consumed = kip714.split_frames(out)
        assert consumed == len(out)
        return [kip714.decode_response(bytes(f), *self.keys[k]).body for k, f in enumerate(frames)]

    def codes(self, out: bytes) -> list[int]:
        """The error code of every answer in ``out`` that is not ApiVersions'."""
        return [a.error_code for a, (key, _) in zip(self.answers(out), self.keys) if key != 18]

    def run(self, *reads: bytes) -> bytes:
        """``reads`` on a new connection of each twin, all at one time; what was written (checked alike)."""
        self.twins.open()
        for chunk in reads:
            if self.twins.closed:
                break
            self.twins.feed(chunk)
        self.twins.close()
        return self.twins.out


# ------------------------------------------------------------------------------------------- framing


def test_frames_split_at_every_byte_boundary():
    """Two instances' Get, push, push (and a terminating push): one read, cut in two at every offset, and a
    byte per read all answer alike (the same bytes as in one read), every push decided by the native loop.
    (The payload is a small zstd frame, so that the cuts are mostly in the headers; librdkafka's own goes a
    byte per read.)"""
    twins = LoopTwins()
    s = Session(twins, clients=2)
    a, b = s.clients
    small = _zstd(PLAIN[:120])
    stream = s.hello + a.push(small) + b.push(small) + a.push(small) + b.push(small, terminating=True)
    whole = s.run(stream)
    assert s.codes(whole) == [0, 0, 0, 0, E.THROTTLING_QUOTA_EXCEEDED, 0]
    assert twins.native.handed == 3 and twins.python.handed == 7  # ApiVersions and the Gets, against all
    for cut in range(1, len(stream)):
        assert s.run(stream[:cut], stream[cut:]) == whole, cut
        assert twins.native.handed == 3
    stream = s.hello + a.push() + b.push() + a.push() + b.push(terminating=True)
    whole = s.run(stream)
    assert s.codes(whole)[1:] == [0, 0, 0, E.THROTTLING_QUOTA_EXCEEDED, 0]
    assert s.run(*(stream[k : k + 1] for k in range(len(stream)))) == whole
    assert twins.native.handed == 3


@pytest.mark.parametrize("after_answers", [False, True])
def test_frame_over_the_limit_closes(after_answers):
    """A size prefix over the frame limit closes the connection before anything is held for the frame: the
    pushes of the same read are not answered (every prefix of a read is checked first), those of an earlier
    read are."""
    twins = LoopTwins()
    s = Session(twins)
    c = s.clients[0]
    first = s.hello + c.push()
    over = struct.pack(">i", twins.max_frame_bytes + 1) + b"\x00" * 64
    out = s.run(first, over + c.push()) if after_answers else s.run(first + over + c.push())
    assert twins.closed
    assert s.codes(out) == ([0, 0] if after_answers else [])
    for server in twins.servers:
        assert server.stats["frames_too_large"] == 1 and server.stats["protocol_errors"] == 1
    assert twins.native.loop.held == 0


@pytest.mark.parametrize("prefix", [b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfe"])
def test_negative_length_closes(prefix):
    twins = LoopTwins()
    s = Session(twins)
    c = s.clients[0]
    out = s.run(s.hello + c.push() + prefix + b"\x00" * 16)
    assert twins.closed and out == b""
    for server in twins.servers:
        assert server.stats["protocol_errors"] == 1 and server.stats["frames_too_large"] == 0


def test_unknown_api_key_between_pushes():
    """Answers to the requests before it are written, in order, then the connection closes; the push after
    it is never decided."""
    twins = LoopTwins()
    s = Session(twins)
    c = s.clients[0]
    produce = struct.pack(">hhih", 0, 9, 77, 1) + b"p" + b"\x00" * 12
    out = s.run(s.hello + c.push() + c.push(terminating=True) + struct.pack(">i", len(produce)) + produce + c.push())
    assert twins.closed
    assert s.codes(out) == [0, 0, 0]
    assert twins.native.handed == 3  # ApiVersions, Get, Produce: the pushes were the loop's
    assert twins.servers[0].broker.push_results() == {0: 2}


def test_a_100_mib_declared_frame_holds_only_what_was_sent():
    """Under a frame limit raised past it, a 100 MiB size prefix is taken; the loop then holds what the client
    sent of the frame, never what it declared (the endpoint's budget sees the same), and allocates about
    that much."""
    twins = LoopTwins(max_frame_bytes=200 << 20)
    s = Session(twins)
    twins.open()
    twins.feed(s.hello + s.clients[0].push())
    answered = twins.out
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        twins.feed(struct.pack(">i", 100 << 20))
        sent = 4
        for _ in range(16):
            twins.feed(b"\x00" * (64 << 10))
            sent += 64 << 10
            assert twins.native.loop.held == sent
            assert twins.servers[0].budget.total == sent
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 8 * sent, f"{peak} bytes allocated to hold {sent}"
    assert not twins.closed and twins.out == answered
    twins.close()


# ----------------------------------------------------------------------------------------- payloads


def _zstd(data: bytes, **kw) -> bytes:
    return zstandard.ZstdCompressor(**kw).compress(data)


@pytest.mark.parametrize("content_size", [True, False])
def test_zstd_bomb_is_too_large(content_size):
    """A small zstd payload that decompresses past telemetry_max_bytes answers TELEMETRY_TOO_LARGE (decided in
    the loop, as the Python path decides it); one of exactly the limit is accepted."""
    bomb = _zstd(b"\x00" * (16 << 20), write_content_size=content_size)
    assert len(bomb) < 4096
    exact = _zstd(bytes(LIMIT), write_content_size=content_size)
    over = _zstd(bytes(LIMIT + 1), write_content_size=content_size)
    for payload, code in ((bomb, E.TELEMETRY_TOO_LARGE), (over, E.TELEMETRY_TOO_LARGE), (exact, E.NONE)):
        twins = LoopTwins()
        s = Session(twins)
        out = s.run(s.hello + s.clients[0].push(payload))
        assert s.codes(out) == [0, code]
        assert twins.native.handed == 2


@pytest.mark.parametrize(
    "payload",
    [PAYLOAD[:-9], PAYLOAD[:5] + b"\xff" * 20 + PAYLOAD[25:], b"\x28\xb5\x2f\xfd", PAYLOAD + b"\x01"],
    ids=["truncated", "overwritten", "magic-only", "trailing-byte"],
)
def test_corrupt_zstd_is_invalid_record(payload):
    twins = LoopTwins()
    s = Session(twins)
    out = s.run(s.hello + s.clients[0].push(payload))
    assert s.codes(out) == [0, E.INVALID_RECORD]
    assert twins.native.handed == 2


@pytest.mark.parametrize("receiver", ["export", "batch", "raise"])
def test_receivers_get_what_the_python_path_gives_them(receiver):
    """With a receiver the loop hands its pushes over as a batch (``records``); the receivers' exports, the
    observers' pushes and the instances closed are those of the Python path, and a receiver that raises makes
    the answer INVALID_RECORD there too (the fuzz receiver raises on payloads whose length is divisible by 3)."""
    twins = LoopTwins(receiver=receiver)
    s = Session(twins, clients=2)
    a, b = s.clients
    refused, taken = _zstd(b"r" * 300), _zstd(b"t" * 301)
    out = s.run(s.hello + a.push(refused) + b.push(taken) + a.push(taken, terminating=True))
    raised = E.INVALID_RECORD if receiver == "raise" else 0
    assert s.codes(out) == [0, 0, raised, 0, 0]
    assert twins.native.handed == 3
    native = twins.receivers[0]
    assert [len(e[3]) for e in native.exports] == [300, 301, 301]
    assert [p[5] for p in native.pushes] == [raised, 0, 0]
    assert {c[0] for c in native.closed} == {a.instance.bytes, b.instance.bytes}


def test_a_later_push_keeps_its_error_when_the_read_is_finished():
    """With a receiver, the loop finishes a read's accepted pushes after deciding them all: a later push of the
    same instance in that read keeps its own last error. Here a terminating push refused UNKNOWN_SUBSCRIPTION_ID
    after an accepted one: the Get after them is let through (Kafka 4.1+), not throttled."""
    twins = LoopTwins(receiver="export")
    s = Session(twins)
    c = s.clients[0]
    out = s.run(s.hello + c.push() + c.push(sid=c.sid + 1, terminating=True) + c.get())
    assert s.codes(out) == [0, 0, E.UNKNOWN_SUBSCRIPTION_ID, 0]
    assert twins.native.handed == 3


@pytest.mark.parametrize(
    "kw,code",
    [
        ({"ctype": 5}, E.UNSUPPORTED_COMPRESSION_TYPE),
        ({"ctype": 127}, E.UNSUPPORTED_COMPRESSION_TYPE),
        ({"ctype": -1}, E.UNSUPPORTED_COMPRESSION_TYPE),
        ({"sid": 12345}, E.UNKNOWN_SUBSCRIPTION_ID),
        ({"metrics": b"\x0a" * (LIMIT + 1), "ctype": 0}, E.TELEMETRY_TOO_LARGE),
        ({"metrics": b"\x0a" * LIMIT, "ctype": 0}, E.NONE),
    ],
    ids=["ctype-5", "ctype-127", "ctype-minus-1", "subscription", "wire-size", "wire-size-at-limit"],
)
def test_refused_pushes(kw, code):
    twins = LoopTwins()
    s = Session(twins)
    c = s.clients[0]
    out = s.run(s.hello + c.push(**kw) + c.push(terminating=True))
    assert s.codes(out) == [0, code, 0]
    assert twins.native.handed == 2


# ------------------------------------------------------------------------------ PayloadDecompressor


def _frames(rng: random.Random) -> list[bytes]:
    """zstd payloads: librdkafka's, and python-zstandard's in every shape a frame takes."""
    plain = [PLAIN, b"", bytes(1000), bytes(rng.getrandbits(8) for _ in range(3000)), PLAIN * 40]
    out = [bytes(_capture(p.name).body.metrics) for p in sorted(CAPTURES.glob("*zstd*push*"))]
    for data in plain:
        for kw in ({}, {"write_content_size": False}, {"write_checksum": True}, {"level": 19}):
            out.append(_zstd(data, **kw))
        for window_log in (10, 20, 26, 27):
            params = zstandard.ZstdCompressionParameters(window_log=window_log, write_checksum=1)
            obj = zstandard.ZstdCompressor(compression_params=params).compressobj()  # size unknown: the window shows
            out.append(obj.compress(data) + obj.flush())
    frame = _zstd(PLAIN, write_content_size=False)
    out.append(frame[:5] + bytes([(27 - 10) << 3 | 1]) + frame[6:])  # a window of 2**27 + 2**24
    out.append(frame[:5] + bytes([(26 - 10) << 3 | 7]) + frame[6:])  # the largest the fast path takes
    out.append(out[0] + out[0])  # two frames
    out.append(struct.pack("<II", 0x184D2A53, 5) + b"skips" + out[0])  # a skippable frame first
    out.append(out[0] + struct.pack("<II", 0x184D2A50, 0))  # and last
    return out


def _mutate(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        if op == 0 and b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op == 1 and b:
            b[rng.randrange(min(len(b), 16))] = rng.randrange(256)  # the frame header
        elif op == 2:
            del b[rng.randrange(len(b) + 1) :]
        elif op == 3 and b:
            i = rng.randrange(len(b))
            del b[i : i + rng.randint(1, 8)]
        elif op == 4:
            i = rng.randrange(len(b) + 1)
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif b:
            b[rng.randrange(len(b))] = rng.choice((0, 0xFF, 0x80))
    return bytes(b)


def _outcome(fn, data: bytes, *args):
    try:
        return fn(data, *args)
    except kip714.Kip714Error as exc:
        return type(exc)


def _agree(frames: list[bytes]) -> None:
    """PayloadDecompressor answers each of ``frames`` as ``kip714.codec.decompress`` does (the same bytes, or
    the same exception class) at a limit above, at and under its size."""
    decompressors: dict[int, PayloadDecompressor] = {}
    for data in frames:
        out = _outcome(kip714.decompress, data, 4, 1 << 22)
        limits = {LIMIT, 1 << 22}
        if isinstance(out, bytes) and out:
            limits |= {len(out), len(out) - 1}
        for limit in sorted(limits):
            d = decompressors.get(limit)
            if d is None:
                d = decompressors[limit] = PayloadDecompressor(limit)
            want = _outcome(kip714.decompress, data, 4, limit)
            got = _outcome(d.decompress, data, 4)
            assert got == want, (limit, data.hex())


def _system_zstd() -> int | None:
    """ZSTD_versionNumber() of the system's libzstd (None when there is none)."""
    import ctypes

    for name in ("libzstd.so.1", "libzstd.so", "libzstd.1.dylib"):
        try:
            return int(ctypes.CDLL(name).ZSTD_versionNumber())
        except OSError:
            continue
    return None


def test_the_fast_path_takes_only_the_portable_paths_libzstd():
    """libzstd is called directly only when it is the release python-zstandard bundles: two releases do not refuse
    the same corrupt frames (fuzz/findings/README.md)."""
    import zstandard

    major, minor, patch = zstandard.ZSTD_VERSION
    assert PayloadDecompressor(LIMIT).native_zstd == (_system_zstd() == major * 10000 + minor * 100 + patch)


def test_payload_decompressor_matches_the_codec():
    """The broker's decompression (libzstd called directly where the fast path is on) answers what
    ``kip714.codec.decompress`` answers, bytes for bytes or the same exception, for well-formed frames of every
    shape."""
    _agree(_frames(random.Random("kip714-payload-decompressor")))


def test_payload_decompressor_matches_the_codec_on_mutated_frames():
    """The same over 4 000 seeded mutations of those frames."""
    rng = random.Random("kip714-payload-decompressor")
    frames = _frames(rng)
    _agree([_mutate(rng, rng.choice(frames)) for _ in range(4000)])


@pytest.mark.parametrize("ctype", [0, 1, 2, 3])
def test_payload_decompressor_other_codecs_match(ctype):
    """The other codecs go to ``kip714.codec.decompress`` itself: the limit holds for them the same way."""
    data = kip714.compress(PLAIN, ctype)
    for limit in (len(PLAIN), len(PLAIN) - 1, 1):
        assert _outcome(PayloadDecompressor(limit).decompress, data, ctype) == _outcome(
            kip714.decompress, data, ctype, limit
        )


def test_a_receiver_taking_columns_gets_the_accepted_pushes_and_may_refuse_them():
    """A receiver with ``export_batch`` gets a read's accepted pushes as an :class:`AcceptedBatch` (their
    columns, in request order: what each one's TelemetryPayload and context would say); one that raises has
    every push of that batch answered INVALID_RECORD and counted as a plugin error, as ``export_many``."""
    from kip714.broker.receivers import AcceptedBatch

    reg = kip714.SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    now = [1_000_000]
    seen: list[AcceptedBatch] = []

    class Columns:
        raises = False

        def export_metrics(self, context, payload):  # (never called: export_batch is)
            raise AssertionError("export_batch takes the pushes")

        def export_batch(self, batch):
            seen.append(batch)
            if self.raises:
                raise ValueError("refused")

    rec = Columns()
    broker = kip714.TelemetryBroker(reg, receivers=[rec], clock=lambda: now[0], node_id=7)
    info = kip714.ClientInfo(client_id="c", client_source_port=1)
    gets = [broker.handle(GetTelemetrySubscriptionsRequest(), info)[0] for _ in range(2)]
    loop = broker.request_loop(1 << 20)

    def read(terminating=False):
        frames = [
            kip714.encode_request(
                PushTelemetryRequest(g.client_instance_id, g.subscription_id, terminating, 0, b"\x0a" * (k + 1)),
                k,
                "c",
                0,
            )
            for k, g in enumerate(gets)
        ]
        answers, frame = broker.feed(loop, b"".join(frames), lambda client_id: info)
        assert frame is None and answers is not None
        return [
            kip714.decode_response(bytes(answers[i : i + 16]), 72, 0, size_prefixed=True).body.error_code
            for i in range(0, 32, 16)
        ]

    assert read() == [0, 0]
    (batch,) = seen
    assert batch.client_instance_ids == [g.client_instance_id.bytes for g in gets]
    assert batch.payloads == [b"\x0a", b"\x0a\x0a"] and batch.terminating == [False, False]
    assert batch.client_infos == [info, info] and batch.node_id == 7 and batch.received_at_ms == now[0]
    assert batch.subscription_ids == [g.subscription_id for g in gets] and batch.compression_types == [0, 0]
    timing = broker.instances.timing(gets[0].client_instance_id.bytes)
    assert batch.push_intervals == [100, 100] and (batch.push_intervals[0], batch.expiries[0]) == timing
    rec.raises = True
    now[0] += 1000
    assert read(terminating=True) == [E.INVALID_RECORD, E.INVALID_RECORD]
    assert len(seen) == 2 and broker.metrics()["plugin-error-count"] == 2


@pytest.mark.parametrize("clients", [3, 70])
def test_every_instance_of_a_connection_is_closed_once(clients):
    """The loop tells the broker which pushes' instances are new to its connection (the broker then notes them
    for ``instance_closed``, up to 64 a connection): over reads that repeat and interleave instances, and past
    the 64 the loop notes itself, the instances closed are the Python path's, each once."""
    twins = LoopTwins(receiver="batch", max_instances=256)
    s = Session(twins, clients=clients)
    first = b"".join(c.push() for c in s.clients)
    again = b"".join(c.push() for c in reversed(s.clients))
    third = b"".join(c.push() for c in s.clients[::2])
    before = len(twins.receivers[0].closed)  # (the Session's probe connection's)
    out = s.run(s.hello + first, again, third)
    assert len(s.codes(out)) == 3 * clients + len(s.clients[::2])  # (the Gets, then every push answered)
    closed = [c[0] for c in twins.receivers[0].closed[before:]]
    assert len(closed) == len(set(closed)) == min(clients, 64)
    assert set(closed) <= {c.instance.bytes for c in s.clients}


def test_the_loop_names_the_pushes_of_instances_new_to_its_connection():
    """The batch's last column: the pushes whose instance the loop has not seen on its connection (the first
    push of each), and past the 64 instances it notes, every push of an instance it did not note."""
    reg = kip714.SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    broker = kip714.TelemetryBroker(reg, clock=lambda: 1_000_000, max_instances=256)
    info = kip714.ClientInfo(client_id="c")
    gets = [broker.handle(GetTelemetrySubscriptionsRequest(), info)[0] for _ in range(70)]

    def read(order):
        return b"".join(
            kip714.encode_request(
                PushTelemetryRequest(gets[k].client_instance_id, gets[k].subscription_id, False, 0, b"\x0a"), k, "c", 0
            )
            for k in order
        )

    def new_here(loop, order):
        _answers, frame, batch = loop.feed(read(order), 1_000_000, 0, broker._decompressor, True, 1)
        assert frame is None and batch is not None and len(batch[0]) == len(order)
        return list(batch[-1])

    loop = broker.request_loop(1 << 20)
    assert new_here(loop, [0, 1, 0, 2, 1]) == [0, 1, 3]
    assert new_here(loop, [2, 0, 1]) == []
    assert new_here(loop, [3, 0, 3]) == [0]
    assert new_here(loop, range(70)) == list(range(4, 70))  # 64 noted in all: 0..63
    assert new_here(loop, [69, 5, 64]) == [0, 2]  # not noted: new each time
    assert new_here(broker.request_loop(1 << 20), [5, 5]) == [0]  # another connection's loop: its own set

    class Closes:  # hears of the instances a connection carried
        takes_payloads = False
        heard: list[bytes] = []

        def export_metrics(self, context, payload):
            pass

        def instance_closed(self, context, instance, at_ms, reason):
            self.heard.append(instance.bytes)

    broker.add_receiver(Closes())
    connection, loop = object(), broker.request_loop(1 << 20)  # (the Gets came on another connection)
    for order in ([7, 8, 7], [8, 9], [9, 7]):
        broker.feed(loop, read(order), lambda client_id: info, connection)
    broker.connection_closed(connection)
    assert sorted(Closes.heard) == sorted(gets[k].client_instance_id.bytes for k in (7, 8, 9))


def test_an_observer_taking_batches_gets_the_pushes_packed():
    """An observer with ``pushes_completed`` gets a read's pushes as the loop packed them: the payloads as
    received in one ``PackedBytes`` (Arrow's binary layout: pyarrow reads its buffers as the same strings), the
    SubscriptionIds and answers' codes in ``array`` s, each push's in request order."""
    import array

    import pyarrow as pa

    from kip714._instances import PackedBytes
    from kip714.broker.receivers import PushBatch

    reg = kip714.SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    seen: list[PushBatch] = []

    class Batches:  # (as the recorder: it records every push, and needs no payload exported)
        takes_payloads = False

        def export_metrics(self, context, payload):
            pass

        def push_completed(self, context, request, error_code, received_at_ms):
            raise AssertionError("pushes_completed takes the pushes")

        def pushes_completed(self, batch):
            seen.append(batch)

    broker = kip714.TelemetryBroker(reg, receivers=[Batches()], clock=lambda: 1_000_000, node_id=3)
    info = kip714.ClientInfo(client_id="c")
    gets = [broker.handle(GetTelemetrySubscriptionsRequest(), info)[0] for _ in range(3)]
    payloads = [b"\x0a" * 5, b"", bytes(range(200))]
    sids = [gets[0].subscription_id, gets[1].subscription_id + 1, gets[2].subscription_id]
    frames = [
        kip714.encode_request(PushTelemetryRequest(g.client_instance_id, sid, False, 0, p), k, "c", 0)
        for k, (g, sid, p) in enumerate(zip(gets, sids, payloads))
    ]
    answers, frame = broker.feed(broker.request_loop(1 << 20), b"".join(frames), lambda client_id: info)
    assert frame is None and answers is not None
    (batch,) = seen
    assert type(batch.payloads) is PackedBytes and list(batch.payloads) == payloads
    assert batch.payloads[-1] == payloads[-1] and batch.payloads[0:2] == payloads[:2]
    assert batch.payloads.nbytes == sum(map(len, payloads)) == len(batch.payloads.data)
    column = pa.Array.from_buffers(
        pa.binary(), 3, [None, pa.py_buffer(batch.payloads.offsets), pa.py_buffer(batch.payloads.data)]
    )
    assert column.to_pylist() == payloads
    assert batch.subscription_ids == array.array("i", sids)
    assert list(batch.error_codes) == [0, E.UNKNOWN_SUBSCRIPTION_ID, 0]
    assert batch.client_instance_ids == [g.client_instance_id.bytes for g in gets] and batch.node_id == 3


def test_packed_bytes_is_a_sequence_of_its_strings():
    from collections.abc import Sequence

    from kip714._instances import PackedBytes

    strings = [b"ab", b"", bytearray(b"xyz"), memoryview(b"q")]
    packed = PackedBytes.of(strings)
    assert isinstance(packed, Sequence) and len(packed) == 4 and bool(packed)
    assert list(packed) == [b"ab", b"", b"xyz", b"q"] and packed[-4] == b"ab" and packed[::-2] == [b"q", b""]
    assert list(packed.offsets) == [0, 2, 2, 5, 6] and packed.data == b"abxyzq" and packed.nbytes == 6
    for k in (4, -5):
        with pytest.raises(IndexError):
            packed[k]
    with pytest.raises(TypeError):  # the views are read-only: the bounds the strings are read by cannot move
        packed.offsets[1] = 1 << 30
    with pytest.raises(TypeError):
        packed.data[0] = 0
    empty = PackedBytes.of([])
    assert len(empty) == 0 and not empty and list(empty.offsets) == [0] and empty.data == b""
    with pytest.raises(TypeError):
        PackedBytes.of([1])


def test_packs_join_once_each_string():
    from kip714._instances import PackedBytes

    pieces = [PackedBytes.of([b"ab", b""]), PackedBytes.of([]), PackedBytes.of([b"xyz", b"q" * 300])]
    joined = PackedBytes.concat(pieces)
    assert list(joined) == [b"ab", b"", b"xyz", b"q" * 300] and joined.nbytes == 305
    assert list(joined.offsets) == [0, 2, 2, 5, 305] and joined.data == b"abxyz" + b"q" * 300
    assert list(PackedBytes.concat([])) == [] and list(PackedBytes.concat([]).offsets) == [0]


@pytest.mark.parametrize("payload", [b"\x0a" * 400, b"\x0a"])
def test_a_reads_payloads_are_borrowed_from_it_when_they_are_most_of_it(payload):
    """The loop's pack of a read's payloads borrows the read when it is ``bytes`` and the payloads are at least
    half of it (the read is kept, the strings copied later, in the thread that asks for ``data``); otherwise, and
    for a read that may change (a ``bytearray``), they are copied at once. Either way the strings read alike."""
    from kip714._instances import PackedBytes

    reg = kip714.SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    broker = kip714.TelemetryBroker(reg, clock=lambda: 1_000_000)
    gets = [broker.handle(GetTelemetrySubscriptionsRequest(), kip714.ClientInfo())[0] for _ in range(3)]
    frames = [
        kip714.encode_request(PushTelemetryRequest(g.client_instance_id, g.subscription_id, False, 0, payload), k, "c")
        for k, g in enumerate(gets)
    ]
    borrows = 2 * 3 * len(payload) >= len(b"".join(frames))
    for kind in (bytes, bytearray):
        read = kind(b"".join(frames))
        before = sys.getrefcount(read)
        loop = broker.request_loop(1 << 20)
        _answers, frame, batch = loop.feed(read, 1_000_000, 0, broker._decompressor, True, 1)
        packed = batch[5]
        assert type(packed) is PackedBytes and frame is None
        assert sys.getrefcount(read) - before == (1 if kind is bytes and borrows else 0)
        if kind is bytearray:
            read[:] = bytes(len(read))  # (what a reused buffer would do)
        assert list(packed) == [payload] * 3 and packed[1] == payload
        assert PackedBytes.concat([packed, packed]).data == payload * 6
        assert packed.data == payload * 3 and list(packed.offsets) == [0, *(len(payload) * k for k in (1, 2, 3))]
        assert list(packed) == [payload] * 3  # (copied out now)
        assert sys.getrefcount(read) == before or kind is bytearray
        loop = batch = packed = None
        assert sys.getrefcount(read) == before


def test_a_receiver_taking_columns_gets_the_pushes_decided_one_by_one_as_columns_too():
    """A push the broker decides by itself (``handle``: an instance's first push, which makes the instance) reaches
    a receiver with ``export_batch`` as a batch of one, with what a read's batch would say of it: one path in."""
    from kip714.broker.receivers import AcceptedBatch

    reg = kip714.SubscriptionRegistry()
    reg.set("all", {"metrics": "*", "interval.ms": "100"})
    seen: list[AcceptedBatch] = []

    class Columns:
        def export_metrics(self, context, payload):
            raise AssertionError("export_batch takes the pushes")

        def export_batch(self, batch):
            seen.append(batch)

    broker = kip714.TelemetryBroker(reg, receivers=[Columns()], clock=lambda: 5_000, node_id=4)
    info = kip714.ClientInfo(client_id="c")
    get = broker.handle(GetTelemetrySubscriptionsRequest(), info)[0]
    push = PushTelemetryRequest(get.client_instance_id, get.subscription_id, True, 0, b"\x0a\x0a")
    assert broker.handle(push, info)[0].error_code == 0
    (batch,) = seen
    assert batch.client_instance_ids == [get.client_instance_id.bytes] and batch.client_infos == [info]
    assert batch.payloads == [b"\x0a\x0a"] and batch.terminating == [True] and batch.compression_types == [0]
    assert batch.subscription_ids == [get.subscription_id] and (batch.node_id, batch.received_at_ms) == (4, 5_000)
    timing = broker.instances.timing(get.client_instance_id.bytes)
    assert (batch.push_intervals[0], batch.expiries[0]) == timing
    assert broker.metrics()["plugin-error-count"] == 0
