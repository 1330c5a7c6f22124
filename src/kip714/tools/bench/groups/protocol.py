"""The ``protocol`` group: the Kafka wire codec against kio (and kafka-python where the checkout has its
KIP-714 schemas): decoding a PushTelemetry request, reading every field a broker reads, and encoding a
GetTelemetrySubscriptions response; curves of the cost by payload size and by requested metrics."""

from __future__ import annotations

import importlib.util
import random
import sys
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import kip714

from ..harness import Bench
from ..machine import CHECKOUT
from ..payloads import ACCEPTED, KB, LIMIT
from ..peers import PeerMissing, peer_label, peer_module
from ..render import fmt_ns, size_name
from ..timing import interleaved

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["run"]


def run(bench: Bench) -> None:
    """Add the protocol rows and the decode/encode curves to ``bench``."""
    import datetime
    import io

    G = "protocol"
    instance = uuid.UUID("009859c3-10db-450e-a3b7-522b0ef19df4")
    metrics = ["org.apache.kafka.producer.", "org.apache.kafka.consumer.node.request.latency."]

    def push_frame(payload_size: int) -> bytes:
        body = kip714.PushTelemetryRequest(
            client_instance_id=instance,
            subscription_id=24301,
            compression_type=4,
            metrics=random.Random(1).randbytes(payload_size),
        )
        return kip714.encode_request(body, 4, "kip714-probe-producer")[4:]

    # the GetTelemetrySubscriptions answer every encode row writes (kio's names its fields differently)
    gts_fields: dict[str, Any] = {
        "client_instance_id": instance,
        "subscription_id": -111713672,
        "accepted_compression_types": list(ACCEPTED),
        "push_interval_ms": 300000,
        "telemetry_max_bytes": LIMIT,
        "delta_temporality": True,
    }

    def gts(requested: Sequence[str]):
        return kip714.GetTelemetrySubscriptionsResponse(**gts_fields, requested_metrics=list(requested))

    frame = push_frame(4096)
    assert kip714.decode_request(frame).body.metrics_size == 4096
    GTS = gts(metrics)

    def kio_decoder():
        serial = peer_module("kio.serial")
        req_mod = peer_module("kio.schema.push_telemetry.v0.request")
        hdr_mod = peer_module("kio.schema.request_header.v2.header")
        read_header = serial.entity_reader(hdr_mod.RequestHeader)
        read_body = serial.entity_reader(req_mod.PushTelemetryRequest)

        def run(buf):
            header, n = read_header(buf, 0)
            return header, read_body(buf, n)[0]

        return run

    def kio_decode_peer(buf=frame):
        run = kio_decoder()
        assert run(buf)[1].client_instance_id == instance  # the peer decodes the same frame
        return peer_label("kio"), run, (buf,)

    decode_row = bench.pair(
        G,
        "decode-push-4KB",
        "decode PushTelemetry request, header + body, 4 KB payload",
        (kip714.decode_request, (frame,)),
        kio_decode_peer,
        goal={"kind": "ratio", "value": 10, "text": "≥ 10×"},
        peer_dist="kio",
    )

    # Decode as a broker uses it: every field it reads (client id, the instance id, the SubscriptionId,
    # flags, the payload), read on both sides. kip714's broker path keys instances by the 16 id bytes and
    # never builds a uuid.UUID (text only when a label is written); kio has only uuid.UUID. The peer's
    # check below asserts both sides read the same id.
    def touch(buf):
        r = kip714.decode_request(buf)
        b = r.body
        return (
            r.client_id,
            b.client_instance_id_bytes,
            b.subscription_id,
            b.terminating,
            b.compression_type,
            b.metrics,
        )

    def kio_touch_peer(buf=frame):
        run = kio_decoder()

        def kio_touch(buf):
            header, b = run(buf)
            return (
                header.client_id,
                b.client_instance_id,
                b.subscription_id,
                b.terminating,
                b.compression_type,
                b.metrics,
            )

        got, want = kio_touch(buf), touch(buf)
        assert (got[0], got[2:5]) == (want[0], want[2:5]) and bytes(got[5]) == bytes(want[5])
        assert got[1] == uuid.UUID(bytes=want[1])  # the same instance id on both sides
        return peer_label("kio"), kio_touch, (buf,)

    touch_row = bench.pair(
        G,
        "decode-push-4KB-touch",
        "decode PushTelemetry request and read every field (client "
        "id, instance id, SubscriptionId, flags, payload view), 4 KB payload",
        (touch, (frame,)),
        kio_touch_peer,
        goal={"kind": "ratio", "value": 10, "text": "≥ 10×"},
        peer_dist="kio",
    )

    # The floor of that row in CPython: the same function reading the same six attributes of an object
    # whose fields are already Python objects (plain __slots__: nothing decoded, nothing built).
    class Built:
        __slots__ = (
            "body",
            "client_id",
            "client_instance_id_bytes",
            "compression_type",
            "metrics",
            "subscription_id",
            "terminating",
        )
        body: Built
        client_id: str | None
        client_instance_id_bytes: bytes
        compression_type: int
        metrics: Buffer
        subscription_id: int
        terminating: bool

    built = Built()
    touched = touch(frame)
    built.body = built
    (
        built.client_id,
        built.client_instance_id_bytes,
        built.subscription_id,
        built.terminating,
        built.compression_type,
        built.metrics,
    ) = touched

    def read_built(r):
        b = r.body
        return (
            r.client_id,
            b.client_instance_id_bytes,
            b.subscription_id,
            b.terminating,
            b.compression_type,
            b.metrics,
        )

    floor = bench.pair(
        G,
        "touch-floor",
        "the row above without decoding or building anything: the same six "
        "reads of an object whose fields are already Python objects",
        (read_built, (built,)),
        None,
    )
    if touch_row["peer"] is not None:
        budget = touch_row["peer"]["median"] / 10
        spent = decode_row["kip714"]["median"] + floor["kip714"]["median"]
        floor["note"] = (
            f"10× kio leaves {fmt_ns(budget)} per push; decode_request alone "
            f"({fmt_ns(decode_row['kip714']['median'])}) and these reads take {fmt_ns(spent)} before "
            "the client id str, the 16 id bytes, the SubscriptionId int and the payload memoryview "
            "are built"
        )
        floor["floor_ns"], floor["budget_ns"] = spent, budget

    def kio_writer(requested: Sequence[str]):
        serial = peer_module("kio.serial")
        errors = peer_module("kio.schema.errors")
        resp_mod = peer_module("kio.schema.get_telemetry_subscriptions.v0.response")
        cls = resp_mod.GetTelemetrySubscriptionsResponse
        msg = cls(
            throttle_time=datetime.timedelta(0),
            error_code=errors.ErrorCode.none,
            client_instance_id=instance,
            subscription_id=-111713672,
            accepted_compression_types=ACCEPTED,
            push_interval=datetime.timedelta(milliseconds=300000),
            telemetry_max_bytes=LIMIT,
            delta_temporality=True,
            requested_metrics=tuple(requested),
        )
        write = serial.entity_writer(cls)

        def run():
            buf = io.BytesIO()
            write(buf, msg)
            return buf.getvalue()

        assert run() == gts(requested).encode()  # byte-identical bodies
        return run

    def kio_encode_peer(requested=metrics):
        return peer_label("kio") + " (body only)", kio_writer(requested), ()

    bench.pair(
        G,
        "encode-gts-frame",
        "encode GetTelemetrySubscriptions response (size-prefixed frame)",
        (kip714.encode_response, (7, GTS)),
        kio_encode_peer,
        goal={"kind": "ratio", "value": 20, "text": "≥ 20×"},
        peer_dist="kio",
        note="kip714 writes the whole frame (size + header + body); kio the body only",
    )

    kp = _kafka_python_classes(bench, G)
    if kp is not None:
        body_only = frame[frame.index(b"producer") + len(b"producer") + 1 :]
        assert kp["PushTelemetryRequest"].decode(body_only, version=0).subscription_id == 24301
        bench.pair(
            G,
            "decode-push-body-kp",
            "decode PushTelemetry request body, 4 KB payload",
            (kip714.PushTelemetryRequest.decode, (body_only, 0)),
            lambda: (peer_label("kafka-python"), kp["PushTelemetryRequest"].decode, (body_only, 0)),
            peer_dist="kafka-python",
        )
        kp_msg = kp["GetTelemetrySubscriptionsResponse"](
            throttle_time_ms=0, error_code=0, **gts_fields, requested_metrics=metrics
        )
        assert bytes(kp_msg.encode(version=0)) == GTS.encode()
        bench.pair(
            G,
            "encode-gts-body-kp",
            "encode GetTelemetrySubscriptions response body",
            (GTS.encode, ()),
            lambda: (peer_label("kafka-python"), kp_msg.encode, (0,)),
            peer_dist="kafka-python",
        )

    def curve(key, title, xs, x_label, y_label, names, point):
        """A curve of kip714 against kio: ``point(x)`` gives the log line's words, kip714's call and a function
        making kio's (PeerMissing without kio: the curve is kip714's alone)."""
        kip_ns, kio_ns = [], []
        for x in xs:
            words, kip_call, kio_call = point(x)
            try:
                st = interleaved([kip_call, kio_call()], bench.rounds, budget_s=bench.budget / 2)
                kio_ns.append(st[1]["median"])
            except PeerMissing:
                st = interleaved([kip_call], bench.rounds, budget_s=bench.budget / 2)
            kip_ns.append(st[0]["median"])
            bench.log(
                f"[{G}] curve {words}: kip714 {fmt_ns(st[0]['median'])}"
                + (f", kio {fmt_ns(kio_ns[-1])}" if len(kio_ns) == len(kip_ns) else "")
            )
        series = {names[0]: kip_ns}
        if len(kio_ns) == len(xs):
            series[names[1]] = kio_ns
        bench.curve(key, title, x_label, y_label, xs, series)

    def decode_point(size: int):
        buf = push_frame(size)
        return f"decode push {size_name(size)}", (kip714.decode_request, (buf,)), lambda: (kio_decoder(), (buf,))

    def encode_point(count: int):
        req = [f"org.apache.kafka.producer.metric{i:04d}." for i in range(count)]
        return f"encode GTS {count} metrics", (kip714.encode_response, (7, gts(req))), lambda: (kio_writer(req), ())

    # curves: decode cost vs payload size; encode cost vs number of requested metric prefixes
    curve(
        "protocol_decode",
        "Decode PushTelemetry request (header + body)",
        [64, KB, 16 * KB, 1 << 20] if bench.quick else [64, KB, 4 * KB, 16 * KB, 64 * KB, 256 * KB, 1 << 20],
        "payload bytes",
        "time per request (ns)",
        ("kip714.decode_request", "kio"),
        decode_point,
    )
    curve(
        "protocol_encode",
        "Encode GetTelemetrySubscriptions response",
        [1, 16, 64] if bench.quick else [1, 4, 16, 64, 256],
        "requested metric prefixes",
        "time per response (ns)",
        ("kip714.encode_response (frame)", "kio (body only)"),
        encode_point,
    )


def _kafka_python_classes(bench: Bench, group: str) -> dict[str, Any] | None:
    """kafka-python generates codecs from Kafka's JSON schemas; it ships none for KIP-714's messages, so
    they come from the source checkout's tests/kp_schemas (skipped elsewhere)."""
    try:
        api_message = peer_module("kafka.protocol.api_message")
    except PeerMissing as exc:
        bench.skip(group, "kafka-python", str(exc))
        return None
    schemas = CHECKOUT / "tests" / "kp_schemas"
    if not (schemas / "__init__.py").is_file():
        bench.skip(
            group, "kafka-python", "kafka-python has no KIP-714 schemas outside a source checkout (tests/kp_schemas)"
        )
        return None
    if "kp_schemas" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "kp_schemas", schemas / "__init__.py", submodule_search_locations=[str(schemas)]
        )
        assert spec is not None and spec.loader is not None  # a .py file location always has its loader
        mod = importlib.util.module_from_spec(spec)
        sys.modules["kp_schemas"] = mod
        spec.loader.exec_module(mod)
    pkg = sys.modules["kp_schemas"]
    return {
        name: type(name, (api_message.ApiMessage,), {}, load_json=pkg)
        for name in ("GetTelemetrySubscriptionsResponse", "PushTelemetryRequest")
    }
