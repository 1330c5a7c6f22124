"""Frame decode/encode: kip714 against kio and kafka-python on the same bytes, in the same run.

Goals (issue 2 / 7): decode a PushTelemetry request (header + body, 4 KB payload) >= 10x kio;
encode a GetTelemetrySubscriptions response >= 20x kio.
"""

from __future__ import annotations

import datetime
import io
import os
import uuid

import pytest

import kip714

INSTANCE = uuid.UUID("009859c3-10db-450e-a3b7-522b0ef19df4")
PAYLOAD = os.urandom(4096)
PUSH_FRAME = kip714.encode_request(
    kip714.PushTelemetryRequest(client_instance_id=INSTANCE, subscription_id=24301, compression_type=4,
                                metrics=PAYLOAD), 4, "kip714-probe-producer")[4:]
METRICS = ["org.apache.kafka.producer.", "org.apache.kafka.consumer.node.request.latency."]
GTS = kip714.GetTelemetrySubscriptionsResponse(
    client_instance_id=INSTANCE, subscription_id=-111713672, accepted_compression_types=[4, 3, 1, 2],
    push_interval_ms=300000, telemetry_max_bytes=1 << 20, delta_temporality=True, requested_metrics=METRICS)


# ----------------------------------------------------------------- decode PushTelemetry (header+body)

@pytest.mark.benchmark(group="decode-push-request")
def test_kip714_decode_push(measure):
    req = measure(kip714.decode_request, PUSH_FRAME)
    assert req.body.metrics_size == 4096


@pytest.mark.benchmark(group="decode-push-request")
def test_kip714_decode_push_and_touch_every_field(measure):
    def run():
        r = kip714.decode_request(PUSH_FRAME)
        b = r.body
        return r.header.client_id, b.client_instance_id, b.subscription_id, b.terminating, b.metrics
    assert measure(run)[1] == INSTANCE


@pytest.mark.benchmark(group="decode-push-request")
def test_kio_decode_push(measure):
    from kio.schema.push_telemetry.v0.request import PushTelemetryRequest
    from kio.schema.request_header.v2.header import RequestHeader
    from kio.serial import entity_reader

    read_header, read_body = entity_reader(RequestHeader), entity_reader(PushTelemetryRequest)

    def run():
        header, n = read_header(PUSH_FRAME, 0)
        return header, read_body(PUSH_FRAME, n)[0]
    assert measure(run)[1].client_instance_id == INSTANCE


@pytest.mark.benchmark(group="decode-push-request")
def test_kafka_python_decode_push_body_only(measure):
    from test_protocol import KP

    body = PUSH_FRAME[PUSH_FRAME.index(b"producer") + len(b"producer") + 1:]
    cls = KP["PushTelemetryRequest"]
    assert measure(cls.decode, body, version=0).subscription_id == 24301


# ----------------------------------------------------------- encode GetTelemetrySubscriptions response

@pytest.mark.benchmark(group="encode-gts-response")
def test_kip714_encode_gts_response_frame(measure):
    frame = measure(kip714.encode_response, 7, GTS)
    assert len(frame) > 100


@pytest.mark.benchmark(group="encode-gts-response")
def test_kip714_encode_gts_response_body(measure):
    assert measure(GTS.encode)


@pytest.mark.benchmark(group="encode-gts-response")
def test_kio_encode_gts_response_body(measure):
    from kio.schema.errors import ErrorCode
    from kio.schema.get_telemetry_subscriptions.v0.response import GetTelemetrySubscriptionsResponse
    from kio.serial import entity_writer

    msg = GetTelemetrySubscriptionsResponse(
        throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, client_instance_id=INSTANCE,
        subscription_id=-111713672, accepted_compression_types=(4, 3, 1, 2),
        push_interval=datetime.timedelta(milliseconds=300000), telemetry_max_bytes=1 << 20,
        delta_temporality=True, requested_metrics=tuple(METRICS))
    write = entity_writer(GetTelemetrySubscriptionsResponse)

    def run():
        buf = io.BytesIO()
        write(buf, msg)
        return buf.getvalue()
    assert measure(run) == GTS.encode()


@pytest.mark.benchmark(group="encode-gts-response")
def test_kafka_python_encode_gts_response_body(measure):
    from test_protocol import KP

    msg = KP["GetTelemetrySubscriptionsResponse"](
        throttle_time_ms=0, error_code=0, client_instance_id=INSTANCE, subscription_id=-111713672,
        accepted_compression_types=[4, 3, 1, 2], push_interval_ms=300000, telemetry_max_bytes=1 << 20,
        delta_temporality=True, requested_metrics=METRICS)
    assert bytes(measure(msg.encode, version=0)) == GTS.encode()


# ----------------------------------------------------------------------------------- small others

@pytest.mark.benchmark(group="encode-push-response")
def test_kip714_encode_push_response_frame(measure):
    resp = kip714.PushTelemetryResponse(error_code=89)
    assert len(measure(kip714.encode_response, 7, resp)) == 16


@pytest.mark.benchmark(group="split-frames")
def test_kip714_split_frames_100(measure):
    stream = (len(PUSH_FRAME).to_bytes(4, "big") + PUSH_FRAME) * 100
    frames, consumed = measure(kip714.split_frames, stream)
    assert len(frames) == 100 and consumed == len(stream)
