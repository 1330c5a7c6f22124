# The read path of a Kafka broker over a xerial snappy stream, step by step, for the one case where its
# answer depends on how the reads are cut: a chunk length that reads as the magic's first four bytes
# (82 53 4E 41) but is not followed by the rest of a stream header. Included into _codec.pyx; used only for
# such streams (the fast path in _unsnappy handles every other one).
#
# What is modelled (facts from the Java sources, checked against snappy-java in tests/test_snappy_java.py):
# * ClientTelemetryUtils.decompress reads the stream to EOF into a buffer of 2 x the payload length;
# * through Kafka's ChunkedBytesStream (2 KiB intermediate buffer: SnappyCompression.decompressionOutputSize;
#   reads of at least the buffer's size go straight through; after a read that did not fill the caller's
#   buffer it asks ``available()`` and returns when that is 0);
# * over SnappyInputStream: ``read`` loops over chunks and, when ``hasNextChunk()`` is false, returns -1 if
#   it wrote nothing in this call, else what it wrote; ``available()`` calls ``hasNextChunk()`` itself;
#   ``hasNextChunk()`` returns false (without ending the stream) for a 16-byte "header" whose 8-byte magic
#   is wrong, so a later read carries on after it.
# The result: such a non-header ends the payload only when a read meets it before producing anything.


cdef class _SnappyJavaStream:
    """SnappyInputStream (snappy-java 1.1.10) over a xerial stream whose first header was already read."""

    cdef const unsigned char* p
    cdef Py_ssize_t n, pos, cur, limit, budget
    cdef bint finished
    cdef object chunk

    cdef int _read_next(self, Py_ssize_t want) except -1:
        """readNext: up to ``want`` bytes; hitting the end of the input marks the stream finished."""
        cdef Py_ssize_t got = self.n - self.pos
        if got < want:
            self.finished = True
        else:
            got = want
        self.pos += got
        return <int>got

    cdef bint has_next_chunk(self) except -1:
        cdef Py_ssize_t start, clen_pos
        cdef int32_t clen
        cdef uint64_t ulen = 0
        cdef Py_ssize_t hdr
        cdef const char* err
        cdef object out
        while True:
            if self.finished:
                return False
            self.cur = 0
            self.limit = 0
            clen_pos = self.pos
            if self._read_next(4) < 4:
                return False
            clen = <int32_t>kc_be32(self.p + clen_pos)
            if <uint32_t>clen == KC_XERIAL_MAGIC_HEAD:
                start = self.pos
                if self._read_next(12) < 12:
                    _raise_corrupt("snappy", f"truncated concatenated stream header at offset {clen_pos}")
                if memcmp(self.p + clen_pos, <const void*>_XERIAL_MAGIC_C, 8) != 0:
                    return False                         # not a header: this read ends, the stream does not
                if <int32_t>kc_be32(self.p + start + 4) < 1:
                    _raise_corrupt("snappy", f"xerial stream: unsupported snappy-java stream version at offset "
                                             f"{clen_pos}")
                continue                                 # a concatenated stream: its first chunk
            if clen <= 0:
                _raise_corrupt("snappy", f"xerial stream: invalid chunk length at offset {clen_pos}")
            if clen > self.n - self.pos:
                _raise_corrupt("snappy", f"xerial stream: truncated chunk at offset {clen_pos}")
            hdr = _snappy_preamble(self.p + self.pos, clen, &ulen)
            if hdr == 0:
                _raise_corrupt("snappy", f"xerial stream: invalid snappy length preamble in chunk at offset "
                                         f"{clen_pos}")
            if ulen > <uint64_t>self.budget:
                _raise_too_large("snappy", f"more than {self.budget}", self.budget)
            out = _new_bytes(<Py_ssize_t>ulen) if ulen else b""
            err = kc_snappy_decode(self.p + self.pos + hdr, <size_t>clen - <size_t>hdr,
                                   <unsigned char*>PyBytes_AS_STRING(out) if ulen else NULL, <size_t>ulen)
            self.pos += clen
            if err != NULL:
                raise CorruptPayloadError(f"snappy: xerial chunk at offset {clen_pos}: {err.decode('ascii')}")
            self.budget -= <Py_ssize_t>ulen
            self.chunk = out
            self.limit = <Py_ssize_t>ulen
            return True

    cdef object read(self, Py_ssize_t length):
        """SnappyInputStream.read(b, 0, length): the bytes read, or None for -1."""
        cdef list parts = []
        cdef Py_ssize_t written = 0, k
        while written < length:
            if self.cur >= self.limit:
                if self.has_next_chunk():
                    continue
                return None if written == 0 else b"".join(parts)
            k = min(self.limit - self.cur, length - written)
            parts.append(self.chunk[self.cur:self.cur + k])
            self.cur += k
            written += k
        return b"".join(parts)

    cdef Py_ssize_t available(self) except -1:
        if self.cur < self.limit:
            return self.limit - self.cur
        return self.limit - self.cur if self.has_next_chunk() else 0


cdef enum:
    _CHUNKED_BYTES_STREAM_BUFFER = 2 * 1024     # SnappyCompression.decompressionOutputSize()


cdef object _snappy_java_read(const unsigned char* p, Py_ssize_t n, Py_ssize_t limit):
    """The bytes a Kafka broker reads from the xerial stream p[:n] (see the note above)."""
    cdef _SnappyJavaStream s = _SnappyJavaStream.__new__(_SnappyJavaStream)
    s.p = p
    s.n = n
    s.pos = 16
    s.budget = limit
    s.chunk = b""
    cdef Py_ssize_t user = 2 * n              # ClientTelemetryUtils: new byte[data.capacity() * 2]
    cdef list out = []
    cdef bytes cbuf = b""                     # ChunkedBytesStream's intermediate buffer (pos..count)
    cdef Py_ssize_t cpos = 0, got
    cdef object r
    while True:
        # ChunkedBytesStream.read(b, 0, user)
        got = 0
        while True:
            # read1(b, got, user - got)
            if cpos >= len(cbuf):
                if user - got >= _CHUNKED_BYTES_STREAM_BUFFER:
                    r = s.read(user - got)
                else:
                    r = s.read(_CHUNKED_BYTES_STREAM_BUFFER)     # fill()
                    cbuf = b"" if r is None else r
                    cpos = 0
                    if r is not None:
                        r = cbuf[:user - got]
                        cpos = len(r)
            else:
                r = cbuf[cpos:cpos + (user - got)]
                cpos += len(r)
            if r is None:
                break
            out.append(r)
            got += len(r)
            if got >= user or s.available() <= 0:
                break
        if got == 0:
            return b"".join(out)                  # -1: ClientTelemetryUtils stops reading
