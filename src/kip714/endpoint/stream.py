"""Cutting one direction of a Kafka connection into frames while forwarding it, without copying what passes.

The proxy's data path: a :class:`FrameStream` is fed the chunks a transport reads. At each frame start it
asks ``decide(buf, start, end, size)`` (``buf[start:end]``: the frame's first bytes, size prefix included)
whether the frame streams through (:data:`STREAM`: its bytes are written on as they come, as slices of the
chunks received) or is captured whole (:data:`CAPTURE`: handed to ``captured(frame)`` once complete, e.g. to
rewrite or answer it), or whether the stream ends before it (:data:`STOP`: nothing of that frame or of any
later byte is written or captured, everything before it is; a proxy draining its connections stops at the
next request boundary this way). ``decide`` may return ``None`` when it needs more of the frame's head than has
arrived (the head bytes are then held until it can decide). Only frame boundaries and heads are read;
a frame that streams is never parsed, joined or copied here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from ..errors import FrameTooLargeError, MalformedFrameError

__all__ = [
    "FrameStream",
    "STREAM",
    "CAPTURE",
    "STOP",
]

STREAM = 1
CAPTURE = 2
STOP = 3
_I32 = struct.Struct(">i")
#: bytes of a frame head held at most while ``decide`` asks for more (a request header with its client id)
_HEAD_LIMIT = 1 << 16


class FrameStream:
    """One direction of a connection (see the module docstring). ``min_size``: the smallest valid frame
    body (a request header is 8 bytes, a response header 4); ``max_frame``: the largest accepted.
    ``on_boundary``, when set, is called whenever a streamed frame ends (the proxy uses it to slip answers
    it made itself in between upstream responses)."""

    __slots__ = (
        "cap",
        "cap_size",
        "captured",
        "decide",
        "left",
        "max_frame",
        "min_size",
        "on_boundary",
        "part",
        "stopped",
        "write",
    )

    def __init__(
        self,
        decide: Callable[[bytes | bytearray, int, int, int], int | None],
        captured: Callable[[bytes], None],
        write: Callable[[bytes | memoryview], None],
        min_size: int,
        max_frame: int,
    ) -> None:
        self.decide, self.captured, self.write = decide, captured, write
        self.min_size, self.max_frame = min_size, max_frame
        self.left = 0  # bytes of the streaming frame still to come
        self.cap: bytearray | None = None  # the captured frame so far
        self.cap_size = 0
        self.part: bytearray | None = None  # a frame head held until ``decide`` can decide
        self.on_boundary: Callable[[], None] | None = None
        self.stopped = False  # STOP was decided (or :meth:`stop` called): input is ignored

    @property
    def held(self) -> int:
        """Bytes held here: a captured frame so far, or a frame head waiting for ``decide``."""
        return (len(self.cap) if self.cap is not None else 0) + (len(self.part) if self.part is not None else 0)

    def stop(self) -> None:
        """End the stream at its current frame boundary (only at one: see :attr:`at_boundary`); later input is
        ignored."""
        self.stopped = True
        self.part = None

    def free(self) -> None:
        """Let go of what is held (the connection is being dropped)."""
        self.cap = self.part = None

    @property
    def at_boundary(self) -> bool:
        """No frame is half-forwarded (an answer may be written now without splitting one)."""
        return not self.left and self.cap is None and self.part is None

    def _size(self, buf: bytes | bytearray, pos: int) -> int:
        size: int = _I32.unpack_from(buf, pos)[0]
        if size < self.min_size:
            raise MalformedFrameError(f"frame size {size} is below the {self.min_size}-byte header")
        if size > self.max_frame:
            raise FrameTooLargeError(f"frame size {size} is over the limit of {self.max_frame} bytes")
        return size

    def feed(self, data: bytes) -> None:
        if self.stopped:
            return
        n = len(data)
        pos = run = 0  # data[run:pos] streams through and is not written yet
        view = None
        write = self.write
        while pos < n:
            left = self.left
            if left:
                if left > n - pos:
                    self.left = left - (n - pos)
                    pos = n
                    break
                pos += left
                self.left = 0
                if self.on_boundary is not None:
                    if run < pos:
                        if view is None:
                            view = memoryview(data)
                        write(view[run:pos])
                        run = pos
                    self.on_boundary()
                continue
            cap = self.cap
            if cap is not None:
                k = min(self.cap_size - len(cap), n - pos)
                if view is None:
                    view = memoryview(data)
                cap += view[pos : pos + k]
                pos += k
                run = pos
                if len(cap) == self.cap_size:
                    self.cap = None
                    self.captured(bytes(cap))
                continue
            part = self.part
            if part is not None:
                if view is None:
                    view = memoryview(data)
                if len(part) < 4:
                    k = min(4 - len(part), n - pos)
                    part += view[pos : pos + k]
                    pos += k
                    run = pos
                    if len(part) < 4:
                        break
                size = self._size(part, 0)
                k = min(4 + size - len(part), n - pos, max(0, _HEAD_LIMIT - len(part)))
                part += view[pos : pos + k]
                pos += k
                run = pos
                d = self.decide(part, 0, len(part), size)
                if d is None:
                    if len(part) >= 4 + size or len(part) >= _HEAD_LIMIT:
                        raise MalformedFrameError("frame head does not parse")
                    continue
                self.part = None
                if d == STOP:
                    self.stopped = True
                    break
                if d == STREAM:
                    write(bytes(part))
                    self.left = 4 + size - len(part)
                    if not self.left and self.on_boundary is not None:
                        self.on_boundary()
                else:
                    self.cap, self.cap_size = part, 4 + size
                    if len(part) == self.cap_size:
                        self.cap = None
                        self.captured(bytes(part))
                continue
            # a frame starts at data[pos]
            if n - pos < 8:
                if n - pos >= 4:
                    self._size(data, pos)  # a bad size is an error now, not when more bytes come
                if run < pos:
                    write(memoryview(data)[run:pos])
                self.part = bytearray(data[pos:])
                pos = run = n
                break
            size = self._size(data, pos)
            end = pos + 4 + size
            d = self.decide(data, pos, end if end < n else n, size)
            if d == STREAM:
                self.left = 4 + size
                continue
            if run < pos:
                if view is None:
                    view = memoryview(data)
                write(view[run:pos])
            if d == STOP:
                self.stopped = True
                run = pos
                break
            if d is None:
                if end <= n:
                    raise MalformedFrameError("frame head does not parse")
                self.part = bytearray(data[pos:])
                pos = run = n
                break
            self.cap, self.cap_size = bytearray(), 4 + size
            run = pos
        if run < pos:
            write(data if run == 0 and pos == n else memoryview(data)[run:pos])
