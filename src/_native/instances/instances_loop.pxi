# Included by _instances.pyx: the endpoint's request loop. One native call per read (RequestLoop.feed) cuts
# the frames, decides every PushTelemetry request it can decide alone (a canonical v0 frame of a live,
# current instance) with the table's own decision (InstanceTable._push_at, the one TelemetryBroker.handle
# uses), decompresses its payload and writes every answer into one buffer. Anything else (another API, a
# push of an instance to create, a frame that is not in the canonical shape) is handed to Python whole, in
# its turn: the loop stops there, and the next call goes on after it. See RequestLoop.

cimport cpython.array as _carray
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_GET_SIZE,
                                PyByteArray_Resize)
from cpython.list cimport PyList_Append
from cpython.object cimport Py_SIZE
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint16_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp, memcpy, memmove

cdef extern from "kbuf_endian.h":
    uint16_t kb_load_be16(const unsigned char* p) noexcept nogil
    uint32_t kb_load_be32(const unsigned char* p) noexcept nogil
    void kb_store_be16(unsigned char* p, uint16_t v) noexcept nogil
    void kb_store_be32(unsigned char* p, uint32_t v) noexcept nogil

cdef extern from "kip714_held.h":
    unsigned char* kip714_held_grow(unsigned char* p, size_t cap, size_t used, size_t new_cap) noexcept nogil
    void kip714_held_free(unsigned char* p, size_t cap) noexcept nogil

cdef extern from "kip714_zstd.h":
    ctypedef struct k714_ZSTD_DCtx:
        pass
    int k714_zstd_load(unsigned version)
    k714_ZSTD_DCtx* k714_ZSTD_createDCtx() nogil
    size_t k714_ZSTD_freeDCtx(k714_ZSTD_DCtx* d) nogil
    size_t k714_ZSTD_decompressDCtx(k714_ZSTD_DCtx* d, void* dst, size_t cap, const void* src, size_t n) nogil
    unsigned k714_ZSTD_isError(size_t code) nogil
    size_t k714_ZSTD_findFrameCompressedSize(const void* src, size_t n) nogil
    uint32_t kb_load_le32 "k714_le32"(const unsigned char* p) nogil

from kip714._codec import decompress as _exact_decompress
from kip714.errors import FrameTooLargeError as _FrameTooLargeError
from kip714.errors import Kip714Error as _Kip714Error
from kip714.errors import MalformedFrameError as _MalformedFrameError
from kip714.errors import TelemetryTooLargeError as _TelemetryTooLargeError

cdef enum:
    ZSTD_MAGIC = 0xFD2FB528
    ZSTD_WINDOW_LOG_MAX = 26        # the largest window the fast path takes: 2**26 + 7/8 (libzstd's default limit is 2**27)
    NOGIL_PAYLOAD = 65536           # payloads at least this large are decompressed without the GIL
    PUSH_ANSWER = 16                # a PushTelemetry v0 response frame: size, correlation id, tags, throttle, error, tags
    HELD_INITIAL = 1024             # the loop's buffer when it first holds something (then doubled as needed)
    HELD_KEPT = 16384               # a buffer larger than this is let go of once it is empty
    RESERVE_MAX = 65536             # the most a read's payload column is made room for at once (then doubled)
    SEEN_FIRST = 16                 # slots of a loop's set of the instances seen on it, at first (then doubled)
    SEEN_MAX = 64                   # the most instances that set holds (TelemetryBroker keeps as many a connection)
    K_PUSH = 72

from zstandard import ZSTD_VERSION as _PORTABLE_ZSTD

# libzstd itself when the system's is the release the portable path bundles (see kip714_zstd.h)
cdef int _zstd_ok = k714_zstd_load(_PORTABLE_ZSTD[0] * 10000 + _PORTABLE_ZSTD[1] * 100 + _PORTABLE_ZSTD[2])

#: The PushTelemetry v0 response with error NONE; bytes 4..8 take the request's correlation id and 13..15 the error.
cdef const unsigned char* _ANSWER_TEMPLATE = b"\x00\x00\x00\x0c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"


import array as _array
import collections.abc as _abc

cdef _carray.array _I32 = _array.array("i")        # templates of the loop's number columns
cdef _carray.array _I64 = _array.array("q")


cdef inline int _put_i32(_carray.array a, int32_t v) except -1:
    cdef Py_ssize_t k = Py_SIZE(a)
    _carray.resize_smart(a, k + 1)
    a.data.as_ints[k] = v
    return 0


cdef inline int _put_i64(_carray.array a, int64_t v) except -1:
    cdef Py_ssize_t k = Py_SIZE(a)
    _carray.resize_smart(a, k + 1)
    a.data.as_longlongs[k] = v
    return 0


cdef inline uint32_t _seen_slot(const uint64_t* t, uint32_t cap, uint64_t msb, uint64_t lsb) noexcept nogil:
    """Where the instance ``(msb, lsb)`` is in the open-addressing set ``t`` of ``cap`` slots (a power of two,
    never full), or the empty slot where it would go."""
    cdef uint32_t k = <uint32_t>((msb ^ (lsb * <uint64_t>0x9E3779B97F4A7C15)) >> 32) & (cap - 1)
    while (t[2 * k] or t[2 * k + 1]) and not (t[2 * k] == msb and t[2 * k + 1] == lsb):
        k = (k + 1) & (cap - 1)
    return k


@cython.final
cdef class PackedBytes:
    """Byte strings stored end to end: ``data`` holds them in order and ``offsets`` (int32, one entry more than
    there are strings, the first 0) where each starts, so string ``k`` is ``data[offsets[k]:offsets[k + 1]]``:
    Arrow's binary layout, which a column store takes without a copy. Both are read-only views (what they view
    never changes, so the bounds the loop wrote hold). A read-only sequence of ``bytes`` otherwise (``len``,
    indexing, iteration). The request loop hands a read's payloads this way: one buffer, not an object per
    push. ``PackedBytes.of(strings)`` packs any byte strings; ``PackedBytes.concat(pieces)`` joins packs.

    The loop's packs of a read it got as ``bytes`` (what an asyncio transport hands over) borrow it: the strings
    stay where they lie in the read, which is kept, and are copied end to end the first time ``data`` is asked
    for, or joined by ``concat``, in the thread that asks (the recorder's writer), not on the event loop. The
    loop borrows only a read of which the strings are at least half, so a pack keeps at most twice its bytes."""

    cdef bytearray _data
    cdef Py_ssize_t _used          # bytes of _data in use while the loop fills it (its capacity is larger)
    cdef _carray.array _offsets
    cdef bint _sealed
    cdef bytes _src                # borrowed: the read the strings lie in (None once copied into _data)
    cdef _carray.array _starts     # borrowed: where each string starts in _src

    def __cinit__(self):
        self._data = PyByteArray_FromStringAndSize(NULL, 0)
        self._used = 0
        self._offsets = _carray.clone(_I32, 1, True)
        self._sealed = False
        self._src = None
        self._starts = None

    @staticmethod
    def of(strings) -> PackedBytes:
        """``strings`` (byte strings, or anything with the buffer protocol) packed, in order."""
        cdef PackedBytes out = PackedBytes()
        cdef Py_buffer view
        for s in strings:
            PyObject_GetBuffer(s, &view, PyBUF_SIMPLE)
            try:
                out._add(<const unsigned char*>view.buf, view.len)
            finally:
                PyBuffer_Release(&view)
        out._seal()
        return out

    @staticmethod
    def concat(pieces) -> PackedBytes:
        """The strings of ``pieces`` (PackedBytes), in order, in one pack: each copied once, from where it
        lies (at most 2 GiB in all)."""
        cdef PackedBytes out = PackedBytes(), piece
        cdef Py_ssize_t total = 0, strings = 0, k, n, at, j
        cdef char* dst
        cdef const int* off
        cdef int* out_off
        pieces = list(pieces)
        for piece in pieces:
            total += piece._used
            strings += Py_SIZE(piece._offsets) - 1
        if total > 2147483647:
            raise OverflowError("PackedBytes holds at most 2 GiB")
        PyByteArray_Resize(out._data, total)
        _carray.resize(out._offsets, strings + 1)
        dst = PyByteArray_AS_STRING(out._data)
        out_off = out._offsets.data.as_ints
        out_off[0] = 0
        at = 0
        k = 0
        for piece in pieces:
            off = piece._offsets.data.as_ints
            n = Py_SIZE(piece._offsets) - 1
            piece._write_to(dst + at)
            for j in range(n):
                out_off[k + 1 + j] = <int>(at + off[j + 1])
            at += piece._used
            k += n
        out._used = total
        out._sealed = True
        return out

    cdef int _add(self, const unsigned char* p, Py_ssize_t n) except -1:
        """Append one string (the loop, before ``_seal``); the buffer doubles as needed."""
        cdef Py_ssize_t need = self._used + n, cap = PyByteArray_GET_SIZE(self._data)
        if need > 2147483647:
            raise OverflowError("PackedBytes holds at most 2 GiB")
        if need > cap:
            cap = cap * 2 if cap else 4096
            while cap < need:
                cap *= 2
            PyByteArray_Resize(self._data, cap if cap <= 2147483647 else 2147483647)
        if n:
            memcpy(PyByteArray_AS_STRING(self._data) + self._used, p, <size_t>n)
        self._used = need
        _put_i32(self._offsets, <int32_t>need)
        return 0

    cdef int _add_in(self, bytes src, Py_ssize_t start, Py_ssize_t n) except -1:
        """Append one string that lies at ``start`` in ``src`` (the loop, before ``_seal``; every string of a
        pack lies in one ``src``), borrowed: not copied."""
        cdef Py_ssize_t need = self._used + n
        if need > 2147483647:
            raise OverflowError("PackedBytes holds at most 2 GiB")
        if self._src is None:
            self._src = src
            self._starts = _carray.clone(_I64, 0, False)
        _put_i64(self._starts, start)
        self._used = need
        _put_i32(self._offsets, <int32_t>need)
        return 0

    cdef int _reserve(self, Py_ssize_t n) except -1:
        """Room for ``n`` more bytes (the loop: the rest of a read, which bounds its payloads), so that a read's
        payloads are copied once."""
        cdef Py_ssize_t need = self._used + n
        if need > PyByteArray_GET_SIZE(self._data):
            PyByteArray_Resize(self._data, need if need <= 2147483647 else 2147483647)
        return 0

    cdef int _seal(self) except -1:
        """Stop adding: cut the buffer to what is used (no copy: at least half of it is), or, borrowed, copy
        the strings now when they are less than half of the read they lie in (not to keep the rest)."""
        if self._src is not None:
            if 2 * self._used < PyBytes_GET_SIZE(self._src):
                self._copy_out()
        else:
            PyByteArray_Resize(self._data, self._used)
        self._sealed = True
        return 0

    cdef void _write_to(self, char* dst) noexcept:
        """The strings end to end at ``dst`` (``_used`` bytes of room), from where they lie."""
        cdef Py_ssize_t j, n = Py_SIZE(self._offsets) - 1
        cdef const int* off = self._offsets.data.as_ints
        cdef const int64_t* starts
        cdef const char* src
        if self._src is None:
            if self._used:
                memcpy(dst, PyByteArray_AS_STRING(self._data), <size_t>self._used)
            return
        src = PyBytes_AS_STRING(self._src)
        starts = <const int64_t*>self._starts.data.as_longlongs
        for j in range(n):
            memcpy(dst + off[j], src + starts[j], <size_t>(off[j + 1] - off[j]))

    cdef int _copy_out(self) except -1:
        """Borrowed strings copied end to end into ``_data``; the read let go."""
        PyByteArray_Resize(self._data, self._used)
        self._write_to(PyByteArray_AS_STRING(self._data))
        self._src = None
        self._starts = None
        return 0

    @property
    def data(self) -> memoryview:
        """The strings end to end (a read-only view)."""
        if not self._sealed:
            raise RuntimeError("PackedBytes is still being filled")
        if self._src is not None:
            self._copy_out()
        return memoryview(self._data).toreadonly()

    @property
    def offsets(self) -> memoryview:
        """Where each string starts, and the end of the last (int32, a read-only view)."""
        return memoryview(self._offsets).toreadonly()

    @property
    def nbytes(self) -> int:
        """The strings' total length."""
        return self._used

    def __len__(self) -> int:
        return Py_SIZE(self._offsets) - 1

    def __getitem__(self, index):
        cdef Py_ssize_t n = Py_SIZE(self._offsets) - 1, k
        cdef const int* off = self._offsets.data.as_ints
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(n))]
        k = index
        if k < 0:
            k += n
        if k < 0 or k >= n:
            raise IndexError("PackedBytes index out of range")
        if self._src is not None:
            return PyBytes_FromStringAndSize(PyBytes_AS_STRING(self._src) + self._starts.data.as_longlongs[k],
                                             off[k + 1] - off[k])
        return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self._data) + off[k], off[k + 1] - off[k])

    def __iter__(self):
        cdef Py_ssize_t k
        for k in range(Py_SIZE(self._offsets) - 1):
            yield self[k]

    def __repr__(self) -> str:
        return f"PackedBytes({len(self)} strings, {self._used} bytes)"


_abc.Sequence.register(PackedBytes)


cdef class PayloadDecompressor:
    """Decompresses accepted push payloads as the broker must, at most ``limit`` bytes of output each.

    ``decompress(data, compression_type)`` answers the decompressed bytes or raises as
    :func:`kip714.codec.decompress` does (TelemetryTooLargeError over ``limit``, another Kip714Error for a
    payload that does not decompress). When the system's libzstd is the release python-zstandard bundles (the
    portable path's), a zstd payload of one frame is decompressed by it directly, through one context and one
    output buffer of ``limit`` bytes kept here (not a Python object per push); every other payload, and every
    zstd payload that path does not take whole (several frames, a dictionary, a window over 64 MiB, an error,
    more than ``limit`` bytes), goes through :func:`kip714.codec.decompress`, which decides it. Another libzstd
    release would not refuse exactly the same corrupt frames, so it is not used. Thread-safe: the context is
    used under a lock."""

    cdef k714_ZSTD_DCtx* dctx
    cdef unsigned char* out
    cdef readonly Py_ssize_t limit
    cdef cython.pymutex _lock
    #: what the request loops did with the accepted pushes they decided alone (no receiver to hand them to):
    #: payloads decompressed (exported), payloads that failed (INVALID_RECORD), over the limit (TELEMETRY_TOO_LARGE)
    cdef readonly uint64_t loop_exported
    cdef readonly uint64_t loop_corrupt
    cdef readonly uint64_t loop_too_large

    def __cinit__(self, Py_ssize_t limit):
        if limit < 1:
            raise ValueError("the decompression limit must be at least 1 byte")
        self.limit = limit
        self.dctx = NULL
        self.out = NULL
        if _zstd_ok:
            self.dctx = k714_ZSTD_createDCtx()
            self.out = <unsigned char*>PyMem_RawMalloc(<size_t>limit)
            if self.dctx == NULL or self.out == NULL:
                raise MemoryError("cannot allocate a zstd context")

    def __dealloc__(self):
        if self.dctx != NULL:
            k714_ZSTD_freeDCtx(self.dctx)
        PyMem_RawFree(self.out)

    @property
    def native_zstd(self):
        """True when zstd payloads are decompressed by libzstd directly (the release python-zstandard bundles was
        found at import)."""
        return self.dctx != NULL

    cdef Py_ssize_t _zstd_into(self, const unsigned char* p, Py_ssize_t n) noexcept nogil:
        """Decompress one whole zstd frame into ``self.out`` (the caller holds the lock): its size, or -1 when
        this path does not take the payload (the exact path then decides it)."""
        cdef uint8_t fhd
        cdef size_t r
        if self.dctx == NULL or n < 6 or kb_load_le32(p) != ZSTD_MAGIC:
            return -1
        fhd = p[4]
        if fhd & 0x0B:                              # reserved bit, or a dictionary id
            return -1
        if not (fhd & 0x20) and (p[5] >> 3) + 10 > ZSTD_WINDOW_LOG_MAX:
            return -1
        if k714_ZSTD_findFrameCompressedSize(p, <size_t>n) != <size_t>n:     # one frame, nothing after it
            return -1
        r = k714_ZSTD_decompressDCtx(self.dctx, self.out, <size_t>self.limit, p, <size_t>n)
        if k714_ZSTD_isError(r):
            return -1
        return <Py_ssize_t>r

    cdef object _decompress(self, const unsigned char* p, Py_ssize_t n, int ctype, object src, bint want):
        """The payload's decompressed bytes (None when ``want`` is false and the payload is valid), or the
        exact path's exception."""
        cdef Py_ssize_t got = -1
        if ctype == C_NONE and n <= self.limit:     # (over the limit: the exact path raises TelemetryTooLargeError)
            return (PyBytes_FromStringAndSize(<const char*>p, n) if src is None else bytes(src)) if want else None
        if ctype == C_ZSTD and self.dctx != NULL:
            if n >= NOGIL_PAYLOAD:
                with nogil:
                    with self._lock:
                        got = self._zstd_into(p, n)
                        if got >= 0 and want:
                            with gil:
                                return PyBytes_FromStringAndSize(<const char*>self.out, got)
            else:
                with self._lock:
                    got = self._zstd_into(p, n)
                    if got >= 0:
                        return PyBytes_FromStringAndSize(<const char*>self.out, got) if want else None
            if got >= 0:
                return None
        return _exact_decompress(PyBytes_FromStringAndSize(<const char*>p, n) if src is None else src, ctype,
                                 self.limit)

    def decompress(self, data, int compression_type):
        """The decompressed payload (see the class docstring)."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            return self._decompress(<const unsigned char*>view.buf, view.len, compression_type, data, True)
        finally:
            PyBuffer_Release(&view)


# The fields of a canonical PushTelemetry v0 frame, its bytes as pointers into it.
cdef struct Push:
    int32_t correlation_id
    const unsigned char* client_id    # NULL for a null client id
    Py_ssize_t client_id_len
    uint64_t msb
    uint64_t lsb
    int32_t subscription_id
    bint terminating
    int8_t compression_type
    const unsigned char* metrics
    Py_ssize_t metrics_len


cdef inline bint _uvarint(const unsigned char* p, Py_ssize_t end, Py_ssize_t* pos, uint32_t* out) noexcept nogil:
    """A Kafka unsigned varint of at most 4 bytes (28 bits: what a push's lengths need); False otherwise."""
    cdef uint32_t v = 0
    cdef int shift = 0
    cdef uint8_t b
    while shift < 28:
        if pos[0] >= end:
            return False
        b = p[pos[0]]
        pos[0] += 1
        v |= (<uint32_t>(b & 0x7F)) << shift
        if not (b & 0x80):
            out[0] = v
            return True
        shift += 7
    return False


cdef bint _canonical_push(const unsigned char* p, Py_ssize_t n, Push* m) noexcept nogil:
    """True when the frame ``p[0:n]`` is a PushTelemetry v0 request in the one shape every client sends: header
    v2 with no tagged fields, a boolean byte of 0 or 1, a non-null payload, no tagged fields, nothing after.
    Anything else (which the full decoder may accept, refuse or answer otherwise) is left to it."""
    cdef Py_ssize_t pos
    cdef int16_t cid_len
    cdef uint32_t raw
    if n < 12 or kb_load_be16(p) != K_PUSH or kb_load_be16(p + 2) != 0:
        return False
    m.correlation_id = <int32_t>kb_load_be32(p + 4)
    cid_len = <int16_t>kb_load_be16(p + 8)
    pos = 10
    if cid_len < 0:
        if cid_len != -1:
            return False
        m.client_id = NULL
        m.client_id_len = 0
    else:
        if n - pos < cid_len:
            return False
        m.client_id = p + pos
        m.client_id_len = cid_len
        pos += cid_len
    if pos >= n or p[pos] != 0:                     # header tagged fields: none
        return False
    pos += 1
    if n - pos < 22:
        return False
    m.msb = kb_load_be64(p + pos)
    m.lsb = kb_load_be64(p + pos + 8)
    m.subscription_id = <int32_t>kb_load_be32(p + pos + 16)
    if p[pos + 20] > 1:
        return False
    m.terminating = p[pos + 20] == 1
    m.compression_type = <int8_t>p[pos + 21]
    pos += 22
    if not _uvarint(p, n, &pos, &raw) or raw == 0:  # 0: a null payload (refused by the decoder)
        return False
    if <Py_ssize_t>(raw - 1) > n - pos:
        return False
    m.metrics = p + pos
    m.metrics_len = raw - 1
    pos += raw - 1
    return pos == n - 1 and p[pos] == 0             # body tagged fields: none, and the frame ends there


cdef class RequestLoop:
    """One client connection's request loop on an instance table: ``feed(...)`` per read.

    ``RequestLoop(table, max_frame_bytes, decides=True)`` (``decides=False``: every frame is handed back, the
    loop only cuts them); ``feed(data, now_ms, subscription_version, decompressor,
    decompress_payloads, records)`` (``decompressor``: the broker's :class:`PayloadDecompressor`, whose limit is
    its ``telemetry_max_bytes``). Each call appends ``data`` (None: nothing new) to the bytes held from earlier reads and
    goes through the whole frames in order:

    * a PushTelemetry v0 frame in the canonical shape (see ``_canonical_push``) of a live instance built from
      ``subscription_version`` or later is decided here, by the instance table's decision (the one
      ``TelemetryBroker.handle`` makes: rate limit, SubscriptionId, compression type, wire size); an accepted
      push with a payload is decompressed (:class:`PayloadDecompressor`; a payload that fails answers
      INVALID_RECORD, one over the limit TELEMETRY_TOO_LARGE, as the broker answers them), and its answer is
      appended to the answers buffer;
    * any other frame stops the call: it is returned whole for the caller to handle, and the next call
      (``feed(None, ...)``) goes on after it. So every answer keeps its request's turn.

    Returns ``(answers, frame, batch)``: the answers of the frames decided (a bytearray, or None), the frame
    handed over (bytes without its size prefix, or None when every whole frame was decided) and, with
    ``records`` (1: every push decided, as columns; 2: and each accepted push's decompressed payload, for the
    receivers), the pushes decided or None. The columns a store takes whole are packed: the SubscriptionIds,
    codes and answer offsets in ``array`` s, the payloads as received in one :class:`PackedBytes`; the last
    column (an ``array``) holds the indices of the pushes whose instance is new to this loop's connection (the
    first of each; every one past the SEEN_MAX instances the loop notes), so that the broker looks up only those
    among the instances it keeps per connection. An accepted push's last error is set here, except with
    ``records=2``: the caller then finishes each (``InstanceTable.finish_push`` with the ticket in its code
    column) once its receivers ran. A size prefix over ``max_frame_bytes`` raises FrameTooLargeError and a
    negative one MalformedFrameError, before anything is held for the frame, as ``split_frames`` does.
    ``held`` is what the loop holds of unfinished frames (for the endpoint's buffer budget)."""

    cdef InstanceTable table
    cdef unsigned char* buf
    cdef Py_ssize_t blen
    cdef Py_ssize_t bcap
    cdef int32_t max_frame
    cdef object _cid_raw          # the last client id's bytes and its str (one object per connection)
    cdef object _cid
    cdef list _c_ids, _c_term, _c_ctype, _c_data, _c_cid
    cdef _carray.array _c_sids, _c_codes, _c_at, _c_new
    cdef PackedBytes _c_raw
    cdef uint64_t* _seen          # the instances seen on this connection: (msb, lsb) pairs, open addressing
    cdef uint32_t _seen_cap       # its slots (a power of two; (0, 0), a reserved id the loop never decides, is empty)
    cdef uint32_t _seen_n
    #: complete frames taken so far
    cdef readonly uint64_t frames
    #: False: every frame is handed back (the loop only cuts frames; an endpoint that sees every request)
    cdef readonly bint decides

    def __cinit__(self, InstanceTable table not None, int64_t max_frame_bytes, bint decides=True):
        if max_frame_bytes < 0 or max_frame_bytes > 2147483647:
            raise ValueError("max_frame_bytes must be within 0..2147483647")
        self.table = table
        self.buf = NULL
        self.blen = 0
        self.bcap = 0
        self.max_frame = <int32_t>max_frame_bytes
        self.decides = decides
        self._cid_raw = None
        self._cid = None
        self._seen = NULL
        self._seen_cap = 0
        self._seen_n = 0
        self._clear_batch()                         # the batch's columns: made with its first push

    def __dealloc__(self):
        kip714_held_free(self.buf, <size_t>self.bcap)
        free(self._seen)

    @property
    def held(self):
        """Bytes held of frames not read whole yet."""
        return self.blen

    def free(self):
        """Let go of what is held (the connection is being dropped)."""
        kip714_held_free(self.buf, <size_t>self.bcap)
        self.buf = NULL
        self.blen = 0
        self.bcap = 0

    cdef int _clear_batch(self) except -1:
        """No columns held (none made yet, or handed over with their pushes): made again with the next push."""
        self._c_ids = self._c_term = self._c_ctype = self._c_data = self._c_cid = None
        self._c_sids = self._c_codes = self._c_at = self._c_new = None
        self._c_raw = None
        return 0

    cdef int _new_batch(self) except -1:
        self._c_ids = []
        self._c_sids = _carray.clone(_I32, 0, False)
        self._c_term = []
        self._c_ctype = []
        self._c_codes = _carray.clone(_I64, 0, False)
        self._c_raw = PackedBytes()
        self._c_data = []
        self._c_cid = []
        self._c_at = _carray.clone(_I64, 0, False)
        self._c_new = _carray.clone(_I32, 0, False)
        return 0

    cdef bint _first_seen(self, uint64_t msb, uint64_t lsb) except -1:
        """Whether the instance ``(msb, lsb)`` is new to this connection (then it is noted, while fewer than
        SEEN_MAX are; past that, every instance not noted is new each time)."""
        cdef uint32_t k = 0, j, cap
        cdef uint64_t* old
        cdef uint64_t* grown
        if self._seen_cap:
            k = _seen_slot(self._seen, self._seen_cap, msb, lsb)
            if self._seen[2 * k] or self._seen[2 * k + 1]:
                return False
        if self._seen_n >= SEEN_MAX:
            return True
        if 2 * (self._seen_n + 1) > self._seen_cap:  # at most half full: every probe ends
            cap = self._seen_cap * 2 if self._seen_cap else SEEN_FIRST
            grown = <uint64_t*>calloc(2 * cap, sizeof(uint64_t))
            if grown == NULL:
                raise MemoryError("cannot grow a request loop's set of instances")
            old = self._seen
            for j in range(self._seen_cap):
                if old[2 * j] or old[2 * j + 1]:
                    k = _seen_slot(grown, cap, old[2 * j], old[2 * j + 1])
                    grown[2 * k] = old[2 * j]
                    grown[2 * k + 1] = old[2 * j + 1]
            free(old)
            self._seen = grown
            self._seen_cap = cap
            k = _seen_slot(grown, cap, msb, lsb)
        self._seen[2 * k] = msb
        self._seen[2 * k + 1] = lsb
        self._seen_n += 1
        return True

    cdef int _append(self, const unsigned char* p, Py_ssize_t n) except -1:
        cdef Py_ssize_t need = self.blen + n, cap
        cdef unsigned char* nb
        if need > self.bcap:
            cap = self.bcap if self.bcap else HELD_INITIAL
            while cap < need:
                cap *= 2
            nb = kip714_held_grow(self.buf, <size_t>self.bcap, <size_t>self.blen, <size_t>cap)
            if nb == NULL:
                raise MemoryError("cannot grow the request buffer")
            self.buf = nb
            self.bcap = cap
        memcpy(self.buf + self.blen, p, <size_t>n)
        self.blen = need
        return 0

    cdef void _consume(self, Py_ssize_t pos) noexcept:
        """Drop the first ``pos`` bytes; shrink a buffer grown for a large frame once it is empty."""
        if pos >= self.blen:
            self.blen = 0
            if self.bcap > HELD_KEPT:
                kip714_held_free(self.buf, <size_t>self.bcap)
                self.buf = NULL
                self.bcap = 0
            return
        if pos:
            memmove(self.buf, self.buf + pos, <size_t>(self.blen - pos))
            self.blen -= pos

    cdef object _client_id(self, const Push* m):
        """The push's client id as str (None when null), one object while it does not change; NULL-ish (a
        marker False) when it is not UTF-8 (the full decoder then decides)."""
        if m.client_id == NULL:
            return None
        if (self._cid_raw is not None and PyBytes_GET_SIZE(self._cid_raw) == m.client_id_len
                and memcmp(PyBytes_AS_STRING(self._cid_raw), m.client_id, <size_t>m.client_id_len) == 0):
            return self._cid
        try:
            cid = PyUnicode_DecodeUTF8(<const char*>m.client_id, m.client_id_len, NULL)
        except UnicodeDecodeError:
            return False
        self._cid_raw = PyBytes_FromStringAndSize(<const char*>m.client_id, m.client_id_len)
        self._cid = cid
        return cid

    def feed(self, data, int64_t now_ms, int64_t subscription_version, PayloadDecompressor zd not None,
             bint decompress_payloads, int records):
        """One read (``data``; None: go on after a frame handed back): ``(answers, frame, batch)``, see the
        class docstring. A read of whole frames is decided where it lies; only what is left of it (an unfinished
        frame, or what follows a frame handed back) is copied into the loop's buffer."""
        cdef Py_buffer view
        cdef bint direct = False
        cdef const unsigned char* p
        cdef Py_ssize_t n, pos = 0
        cdef object answers, frame
        self.table._need()
        if data is not None:
            PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
            if self.blen == 0:
                direct = True
            else:
                try:
                    self._append(<const unsigned char*>view.buf, view.len)
                finally:
                    PyBuffer_Release(&view)
        if direct:
            p = <const unsigned char*>view.buf
            n = view.len
        else:
            p = self.buf
            n = self.blen
        if direct:
            try:
                self._check_sizes(p, n)
            except BaseException:
                PyBuffer_Release(&view)
                raise
        else:
            self._check_sizes(p, n)
        try:
            answers, frame = self._run(p, n, &pos, False, now_ms, subscription_version, zd, decompress_payloads,
                                       records, data if direct and type(data) is bytes else None)
        finally:
            if direct:
                try:
                    if pos < n:
                        self._append(p + pos, n - pos)
                finally:
                    PyBuffer_Release(&view)
            else:
                self._consume(pos)
        return answers, frame, self._take_batch(records)

    cdef int _check_sizes(self, const unsigned char* p, Py_ssize_t n) except -1:
        """Every size prefix in hand is checked before any frame is decided, as split_frames checks them all
        before a frame of the read is handled: a bad one closes the connection with nothing answered."""
        cdef Py_ssize_t pos = 0
        cdef int32_t size
        while n - pos >= 4:
            size = <int32_t>kb_load_be32(p + pos)
            if size < 0:
                self.free()
                raise _MalformedFrameError(f"negative frame size {size} (at offset {pos})")
            if size > self.max_frame:
                self.free()
                raise _FrameTooLargeError(f"frame size {size} is over the limit of {self.max_frame} bytes (offset {pos})")
            if n - pos - 4 < size:
                break
            pos += 4 + size
        return 0

    def feed_prefix(self, data, int64_t now_ms, int64_t subscription_version, PayloadDecompressor zd not None,
                    bint decompress_payloads, int records):
        """The pushes this loop decides alone at the start of ``data``, which is not held: ``(answers,
        consumed, batch)``. It stops before the first frame that is not whole in ``data`` or that it does not
        decide (nothing of it is taken: ``data[consumed:]`` is the caller's). For an endpoint that streams
        other requests on (``kip714 proxy``); nothing must be held from an earlier ``feed``."""
        cdef Py_buffer view
        cdef Py_ssize_t pos = 0
        cdef object answers
        if self.blen:
            raise RuntimeError("feed_prefix with bytes held from feed")
        self.table._need()
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            answers, _ = self._run(<const unsigned char*>view.buf, view.len, &pos, True, now_ms, subscription_version,
                                   zd, decompress_payloads, records, data if type(data) is bytes else None)
        finally:
            PyBuffer_Release(&view)
        return answers, pos, self._take_batch(records)

    cdef object _take_batch(self, int records):
        batch = None
        if records and self._c_ids:
            self._c_raw._seal()
            batch = (self._c_ids, self._c_sids, self._c_term, self._c_ctype, self._c_codes, self._c_raw,
                     self._c_data, self._c_cid, self._c_at, self._c_new)
            self._clear_batch()
        return batch

    cdef tuple _run(self, const unsigned char* p, Py_ssize_t n, Py_ssize_t* consumed, bint prefix, int64_t now_ms,
                    int64_t subscription_version, PayloadDecompressor zd, bint decompress_payloads, int records,
                    bytes src):
        """Decide the whole frames of ``p[0:n]`` in order (see feed and feed_prefix); ``consumed`` is advanced
        past each frame taken. ``(answers, frame handed back)``. ``src``: the ``bytes`` that ``p`` is the start
        of, whose payloads the batch borrows (None: ``p`` may change, they are copied)."""
        cdef Py_ssize_t pos = consumed[0], start
        cdef int32_t size
        cdef Push m
        cdef int64_t r
        cdef int code
        cdef bytearray answers = None
        cdef unsigned char* a
        cdef Py_ssize_t alen = 0
        cdef object frame = None, cid, payload
        cdef bint ok, reserved = False
        cdef int64_t max_bytes = zd.limit
        while n - pos >= 4:
            size = <int32_t>kb_load_be32(p + pos)
            if size < 0 or n - pos - 4 < size:
                break
            start = pos + 4
            cid = None
            ok = self.decides and _canonical_push(p + start, size, &m)
            if ok:
                cid = self._client_id(&m)
                ok = cid is not False
            if ok:
                if m.msb == 0 and m.lsb <= 1:
                    r = O_RESERVED
                else:
                    r = self.table._push_at(m.msb, m.lsb, now_ms, subscription_version, m.subscription_id,
                                            m.terminating, m.compression_type, m.metrics_len, max_bytes,
                                            True, False, 0, 0)
                ok = r >= 0                             # reserved, absent or stale: the broker decides it
            if not ok:
                if not prefix:
                    frame = PyBytes_FromStringAndSize(<const char*>(p + start), size)
                    pos = start + size
                    self.frames += 1
                break
            payload = None
            if r >= T_BASE:                             # accepted, a payload follows
                code = E_NONE
                if decompress_payloads:
                    try:
                        payload = zd._decompress(m.metrics, m.metrics_len, m.compression_type, None, records == 2)
                    except _TelemetryTooLargeError:
                        code = E_TELEMETRY_TOO_LARGE
                        zd.loop_too_large += 1
                    except _Kip714Error:
                        code = E_INVALID_RECORD
                        zd.loop_corrupt += 1
                elif records == 2:
                    payload = PyBytes_FromStringAndSize(<const char*>m.metrics, m.metrics_len)
                if code == E_NONE and records != 2:
                    zd.loop_exported += 1             # (with payloads to hand over, the receivers' export counts it)
                if records != 2 or code != E_NONE:
                    self.table._finish(m.msb, m.lsb, r, code)
                    r = code
            else:
                code = <int>r
            if answers is None:
                answers = PyByteArray_FromStringAndSize(NULL, PUSH_ANSWER)
            else:
                PyByteArray_Resize(answers, alen + PUSH_ANSWER)
            a = <unsigned char*>PyByteArray_AS_STRING(answers) + alen
            memcpy(a, _ANSWER_TEMPLATE, PUSH_ANSWER)
            kb_store_be32(a + 4, <uint32_t>m.correlation_id)
            kb_store_be16(a + 13, <uint16_t><int16_t>code)
            if records:
                if self._c_ids is None:
                    self._new_batch()
                PyList_Append(self._c_ids, _id_bytes(m.msb, m.lsb))
                _put_i32(self._c_sids, m.subscription_id)
                PyList_Append(self._c_term, m.terminating)
                PyList_Append(self._c_ctype, m.compression_type)
                _put_i64(self._c_codes, r)
                if src is not None:                     # the read is kept: its payloads stay where they are
                    self._c_raw._add_in(src, m.metrics - p, m.metrics_len)
                else:
                    if not reserved:                    # the rest of the read bounds its payloads: one copy
                        self._c_raw._reserve(n - start if n - start <= RESERVE_MAX else RESERVE_MAX)
                        reserved = True
                    self._c_raw._add(m.metrics, m.metrics_len)
                PyList_Append(self._c_data, payload)
                PyList_Append(self._c_cid, cid)
                _put_i64(self._c_at, alen + 13)
                if self._first_seen(m.msb, m.lsb):
                    _put_i32(self._c_new, <int32_t>(Py_SIZE(self._c_sids) - 1))
            alen += PUSH_ANSWER
            pos = start + size
            consumed[0] = pos
            self.frames += 1
        consumed[0] = pos
        return answers, frame
