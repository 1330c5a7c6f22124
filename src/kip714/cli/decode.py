"""``kip714 decode``: decode size-prefixed request frames and print one row per data point."""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import kip714

from .._enums import DEFAULT_TELEMETRY_MAX_BYTES
from .._table import table as _table
from .._units import size
from ._text import codec_name as _codec_name


def iter_frames(paths: Iterable[pathlib.Path], max_frame_bytes: int) -> Iterator[tuple[pathlib.Path, int, bytes]]:
    """(path, index, frame bytes) for every size-prefixed frame in the files; leftover bytes are an error."""
    for path in paths:
        data = path.read_bytes()
        try:
            frames, consumed = kip714.split_frames(data, max_frame_bytes)
        except kip714.Kip714Error as exc:
            raise type(exc)(f"{path}: not a file of size-prefixed Kafka request frames: {exc}") from None
        if consumed != len(data):
            what = "a truncated frame" if frames or len(data) >= 4 else "too short for a frame"
            raise kip714.errors.MalformedFrameError(
                f"{path}: {len(data) - consumed} bytes after the last whole frame ({what})"
            )
        for i, frame in enumerate(frames):
            yield path, i, frame


def decode_push(
    frame: bytes | memoryview, max_output: int
) -> tuple[kip714.wire.Request, bytes | None, list[dict[str, Any]]]:
    """Decode one PushTelemetry frame: (request, decompressed payload, data-point rows)."""
    req = kip714.decode_request(frame)
    body = req.body
    if not isinstance(body, kip714.PushTelemetryRequest):
        return req, None, []
    metrics = body.metrics if body.metrics is not None else b""
    payload = kip714.decompress(metrics, body.compression_type, max_output) if body.metrics_size else b""
    rows = kip714.decode_metrics(payload).to_pylist() if payload else []
    for r in rows:  # Arrow maps come back as (key, value) pairs; print them as objects
        r["attributes"] = dict(r["attributes"])
        r["resource"] = dict(r["resource"])
    return req, payload, rows


def run(args: argparse.Namespace) -> int:
    """Decode files of size-prefixed Kafka request frames (as captured from a socket, or as kip714 writes
    them) and print one row per data point of every PushTelemetry request, or JSON lines with --json.
    Client instance ids are shown in Kafka's text form (Uuid.toString(): URL-safe base64), as recordings
    and the Spark decoders hold them."""
    paths = [pathlib.Path(p) for p in args.files]
    status = 0
    out_rows = []
    for path, index, frame in iter_frames(paths, args.max_frame_bytes):
        source = f"{path.name}#{index}"
        try:
            req, payload, rows = decode_push(frame, args.max_output)
        except kip714.Kip714Error as exc:
            print(
                f"{source}: {type(exc).__name__} (error code {exc.error_code.value} {exc.error_code.name}): {exc}",
                file=sys.stderr,
            )
            status = 1
            continue
        h, body = req.header, req.body
        if args.json:
            base = {
                "source": source,
                "api_key": h.api_key,
                "correlation_id": h.correlation_id,
                "client_id": h.client_id,
            }
            if isinstance(body, kip714.PushTelemetryRequest):
                base.update(
                    client_instance_id=kip714.kafka_uuid_string(body.client_instance_id_bytes),
                    subscription_id=body.subscription_id,
                    terminating=body.terminating,
                    compression=_codec_name(body.compression_type),
                )
            for row in rows or [{}]:
                print(json.dumps({**base, **row}, default=str))
            continue
        if not isinstance(body, kip714.PushTelemetryRequest):
            print(f"{source}: {type(body).__name__} correlation_id={h.correlation_id} client_id={h.client_id}")
            continue
        assert payload is not None  # a PushTelemetry request decodes to bytes
        print(
            f"{source}: PushTelemetry client_id={h.client_id} "
            f"instance={kip714.kafka_uuid_string(body.client_instance_id_bytes)} "
            f"subscription={body.subscription_id} codec={_codec_name(body.compression_type)} "
            f"wire={body.metrics_size}B otlp={len(payload)}B terminating={body.terminating} "
            f"points={len(rows)}"
        )
        for r in rows:
            attrs = ",".join(f"{k}={v}" for k, v in r["attributes"].items())
            value = r["value_int"] if r["value_int"] is not None else r["value"]
            out_rows.append((r["metric"], r["kind"], r["temporality"] or "", attrs, value))
        if out_rows and not args.summary:
            print(_table(out_rows, ("metric", "kind", "temporality", "attributes", "value")))
        out_rows.clear()
    return status


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``kip714 decode``."""
    p.description = run.__doc__
    p.add_argument("files", nargs="+", help="frame files (each holds one or more size-prefixed frames)")
    p.add_argument("--json", action="store_true", help="print JSON lines, one per data point")
    p.add_argument("--summary", action="store_true", help="one line per frame, no data-point table")
    p.add_argument(
        "--max-output",
        type=size,
        default=DEFAULT_TELEMETRY_MAX_BYTES,
        help=f"largest decompressed payload accepted (default {DEFAULT_TELEMETRY_MAX_BYTES}, Kafka's "
        "telemetry.max.bytes)",
    )
    p.add_argument(
        "--max-frame-bytes",
        type=size,
        default=kip714.wire.DEFAULT_MAX_FRAME_BYTES,
        help=f"largest frame accepted (default {kip714.wire.DEFAULT_MAX_FRAME_BYTES})",
    )
