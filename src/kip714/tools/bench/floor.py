"""The floors of the ``endpoint`` group: the smallest servers on the event loop ``kip714 serve`` runs on.

``python -m kip714.tools.bench.floor [--zstd | --batch] [--loop auto|asyncio|uvloop]`` listens on a free
loopback port (printed as ``event=listening port=N`` on stderr, like ``kip714 serve``).

* **The zstd floor** (``--zstd``, :class:`ZstdFloorProtocol`): what no endpoint may skip. It splits each
  read into frames; for each PushTelemetry v0 request it reads the request header (v2) and body by hand
  just far enough to find the payload, zstd-decompresses it with python-zstandard (one
  ``ZstdDecompressor`` per server, a ``decompressobj()`` per push: ``decompress(..., max_output_size=...)``
  would allocate that many bytes on every call), and answers error NONE (INVALID_RECORD when the payload does
  not decompress, UNSUPPORTED_COMPRESSION_TYPE for another codec; an uncompressed payload is taken as it
  is); the answers to one read go out in one ``transport.write``. Nothing is bounded or decided: the load
  is the bench's own. Frames of other APIs get the canned answer below (the load sends none to a floor).
* **The I/O-only floor** (:class:`FloorProtocol`): every request frame answered with the same canned
  PushTelemetry response (error NONE, the request's correlation id copied in), nothing decoded. By default
  one ``transport.write`` per frame (as ``serve`` answers every request, and as one push per connection and
  interval, what real clients send, needs); ``--batch`` writes the answers to one read together, as the
  zstd floor does, so that the two differ by the parsing and the decompression alone.

The same frames answered by ``serve`` cost more by what kip714 does per push; these servers cost what any
Python endpoint on this event loop pays at least for the same I/O (and, with ``--zstd``, the one
computation that decides a push's answer).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import struct
import sys
from typing import Any

from kip714._enums import ApiKey, CompressionType, ErrorCode

__all__ = ["FloorProtocol", "ZstdFloorProtocol", "main", "push_answer"]

#: A PushTelemetry v0 response (size 12: correlation id, tagged fields, throttle time 0, error code 0,
#: tagged fields); bytes 4–8 take each request's correlation id.
_ANSWER = bytes.fromhex("0000000c000000000000000000000000")
#: size, api key, api version, correlation id, the client id's length (-1: null): a request header v2's start
_HEAD = struct.Struct(">ihhih")
_PUSH = int(ApiKey.PUSH_TELEMETRY)
_ZSTD = int(CompressionType.ZSTD)
_NONE = int(CompressionType.NONE)
_OK_HEAD, _OK_TAIL = _ANSWER[:4], _ANSWER[8:]
_INVALID_REQUEST = int(ErrorCode.INVALID_REQUEST)
_INVALID_RECORD = int(ErrorCode.INVALID_RECORD)
_UNSUPPORTED = int(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)


def push_answer(correlation_id: bytes, error_code: int) -> bytes:
    """The PushTelemetry v0 response frame to the request with this (4-byte, big-endian) correlation id."""
    return _ANSWER[:4] + correlation_id + _ANSWER[8:13] + error_code.to_bytes(2, "big") + _ANSWER[15:]


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint at ``pos``: ``(value, position after it)``."""
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _skip_tagged(data: bytes, pos: int) -> int:
    """The position after the tagged fields at ``pos``."""
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    return pos


class FloorProtocol(asyncio.Protocol):
    """Read size-prefixed frames, write the canned answer for each (``batch``: the answers to one read in
    one ``transport.write``)."""

    batch = False

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        pos = 0
        end = len(buf)
        write = self.transport.write  # type: ignore[union-attr]
        answers: list[bytes] | None = [] if self.batch else None
        while end - pos >= 4:
            size = int.from_bytes(buf[pos : pos + 4], "big")
            if end - pos - 4 < size:
                break
            answer = _ANSWER[:4] + buf[pos + 8 : pos + 12] + _ANSWER[8:]
            if answers is None:
                write(answer)
            else:
                answers.append(answer)
            pos += 4 + size
        del buf[:pos]
        if answers:
            write(b"".join(answers))


class ZstdFloorProtocol(asyncio.Protocol):
    """Split each read into frames, decompress each PushTelemetry request's payload (a ``decompressobj()``
    of the server's one ``ZstdDecompressor`` per push), answer the frames of one read in one write."""

    dctx: Any = None  # the server's ZstdDecompressor (set by main, or by whoever builds the protocol)

    def __init__(self) -> None:
        if ZstdFloorProtocol.dctx is None:
            import zstandard

            ZstdFloorProtocol.dctx = zstandard.ZstdDecompressor()
        self.rest = b""
        self.transport: asyncio.Transport | None = None
        self.last = b""  # the last payload decompressed (the tests read it)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.rest:
            data = self.rest + data
        end = len(data)
        pos = 0
        answers = []
        unpack = _HEAD.unpack_from
        view = memoryview(data)
        dctx = self.dctx
        # (a request's header is at least 10 bytes: a frame shorter than that is not one, and waits for more)
        while end - pos >= 14:
            size, api_key, version, _, client_len = unpack(data, pos)
            nxt = pos + 4 + size
            if nxt > end:
                break
            corr = data[pos + 8 : pos + 12]
            if api_key != _PUSH or version != 0:
                answers.append(_OK_HEAD + corr + _OK_TAIL)
                pos = nxt
                continue
            # the header's tagged fields, then client_instance_id (16), subscription_id (4), terminating (1)
            at = pos + 14 + (client_len if client_len > 0 else 0)
            at = at + 1 if data[at] == 0 else _skip_tagged(data, at)
            compression = data[at + 21]
            length = data[at + 22]  # metrics: compact bytes (unsigned varint length + 1, 0 for null)
            at += 23
            if length >= 0x80:
                length, at = _uvarint(data, at - 1)
            stop = at + length - 1
            pos = nxt
            if stop > nxt:
                answers.append(push_answer(corr, _INVALID_REQUEST))
            elif compression == _ZSTD and length > 1:
                try:
                    self.last = dctx.decompressobj().decompress(view[at:stop])
                except Exception:  # zstandard.ZstdError: not a zstd frame, or a corrupt one
                    answers.append(push_answer(corr, _INVALID_RECORD))
                    continue
                answers.append(_OK_HEAD + corr + _OK_TAIL)
            elif compression == _NONE or length <= 1:
                self.last = data[at:stop] if length > 1 else b""
                answers.append(_OK_HEAD + corr + _OK_TAIL)
            else:
                answers.append(push_answer(corr, _UNSUPPORTED))
        view.release()
        self.rest = data[pos:] if pos < end else b""
        if answers:
            self.transport.write(b"".join(answers))  # type: ignore[union-attr]


async def _serve(stop: asyncio.Event, factory: Any) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(factory, "127.0.0.1", 0, backlog=1024)
    print(f"event=listening host=127.0.0.1 port={server.sockets[0].getsockname()[1]}", file=sys.stderr, flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kip714.tools.bench.floor")
    p.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default="auto")
    p.add_argument("--batch", action="store_true", help="write the answers to one read together")
    p.add_argument("--zstd", action="store_true", help="the zstd floor: decompress every push's payload")
    args = p.parse_args(argv)
    FloorProtocol.batch = args.batch
    factory = ZstdFloorProtocol if args.zstd else FloorProtocol
    use_uvloop = args.loop == "uvloop"
    if args.loop == "auto":
        try:
            import uvloop

            use_uvloop = True
        except ImportError:
            use_uvloop = False
    if use_uvloop:
        import uvloop

        uvloop.run(_serve(asyncio.Event(), factory))
    else:
        asyncio.run(_serve(asyncio.Event(), factory))
    return 0


if __name__ == "__main__":
    sys.exit(main())
