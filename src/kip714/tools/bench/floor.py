"""The floor of the ``endpoint`` group: the smallest server on the event loop ``kip714 serve`` runs on.

``python -m kip714.tools.bench.floor [--loop auto|asyncio|uvloop]`` listens on a free loopback port (printed
as ``event=listening port=N`` on stderr, like ``kip714 serve``) and answers every request frame with the
same canned PushTelemetry response (error NONE, the request's correlation id copied in): a frame is read,
its answer written (one ``transport.write`` per frame, as ``serve`` answers every request, and as one push
per connection and interval, what real clients send, needs), nothing decoded or decided. The same frames
answered by ``serve`` cost more by what kip714 does per push; this server costs what any Python endpoint on
this event loop pays at least for the same I/O.

``--batch`` writes the answers to one read together instead (one ``transport.write`` per read): what
pipelined requests could save in system calls, which clients pushing once per interval never pipeline.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

__all__ = ["FloorProtocol", "main"]

#: A PushTelemetry v0 response (size 12: correlation id, tagged fields, throttle time 0, error code 0,
#: tagged fields); bytes 4–8 take each request's correlation id.
_ANSWER = bytes.fromhex("0000000c000000000000000000000000")


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


async def _serve(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(FloorProtocol, "127.0.0.1", 0, backlog=1024)
    print(f"event=listening host=127.0.0.1 port={server.sockets[0].getsockname()[1]}", file=sys.stderr, flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kip714.tools.bench.floor")
    p.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default="auto")
    p.add_argument("--batch", action="store_true", help="write the answers to one read together")
    args = p.parse_args(argv)
    FloorProtocol.batch = args.batch
    use_uvloop = args.loop == "uvloop"
    if args.loop == "auto":
        try:
            import uvloop

            use_uvloop = True
        except ImportError:
            use_uvloop = False
    if use_uvloop:
        import uvloop

        uvloop.run(_serve(asyncio.Event()))
    else:
        asyncio.run(_serve(asyncio.Event()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
